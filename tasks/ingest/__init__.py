"""Getting job logs in: readers per format (`readers`), the normaliser (`normalize`: spellings, types,
parsing rules) and staging (`staging`: validate, split valid from rejected rows, write Parquet)."""
