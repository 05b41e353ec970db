"""Getting job logs in: readers per format (`readers`), the normaliser (`normalize`: spellings, types,
parsing rules) and staging (`staging`: validate, split valid from rejected rows, write Parquet)."""

DEFAULT_CHUNK_ROWS = 100_000  # rows read, validated and staged at a time (bounds memory); here, not in `readers`,
# so that `gpucast --help` shows it without importing Polars, PyArrow and DuckDB
