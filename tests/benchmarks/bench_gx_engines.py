"""Benchmark: the `job_logs` suite run by Great Expectations on pandas (what the ingest does) and on DuckDB (issue 40).

    .venv/bin/pip install --target DIR duckdb-engine==0.17.0   # not a dependency of gpucast: this benchmark's alone
    PYTHONPATH=.:DIR .venv/bin/python tests/benchmarks/bench_gx_engines.py [--rows 100000] [--repeat 2] [--chunk-rows 100000]

Simulated logs of `--rows` jobs (1% dirty) are read and normalised as the ingest does, and the rows that parse
(the suite's input) are validated as one batch, `--repeat` times each way, with `result_format=BOOLEAN_ONLY`:

* **pandas** (the baseline, `expectations/validate.py`): `frame.to_pandas()`, then GX's pandas data source;
* **DuckDB**: the frame copied into a table of a DuckDB file, then GX's SQL data source over it (duckdb-engine).

It prints the seconds of each step and whether the two agree on every expectation. Run with 100,000 rows (one
ingest chunk) and with 1,000,000 (a whole file in one batch); `--chunk-rows 100000` adds the file validated chunk by
chunk as the ingest does, DuckDB reading each chunk in place (an Arrow view, no copy).

Why GX's SQL path needs `OwnCursors` below: duckdb-engine hands SQLAlchemy cursors that all wrap the *same* DuckDB
connection; SQLAlchemy begins a transaction on it and rolls it back when GX's `with get_connection()` block ends,
before GX fetches the rows, and that ROLLBACK on the one connection discards the pending result: `fetchall()`
gives `[]` and GX fails each expectation with "list index out of range" (docs/benchmarks.md, issue 40). Giving
each cursor a DuckDB cursor of its own (a separate connection to the same database) keeps the result.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import tempfile
import time
from pathlib import Path


def frame_of(rows: int, work: Path):
    """The typed rows of `rows` simulated jobs that parse, as the ingest hands them to the suite."""
    import polars as pl

    from gpucast.expectations import contract as c
    from gpucast.tasks.ingest.normalize import normalize
    from gpucast.tasks.ingest.readers import FileInfo, read_chunks
    from gpucast.tasks.simulate import SimConfig, write_logs

    path, *_ = write_logs(work, SimConfig(days=1, jobs_per_day=rows, dirty_fraction=0.01, seed=5))
    chunks = [normalize(chunk) for chunk in read_chunks(path, FileInfo(path))]
    return pl.concat(chunks).filter(pl.col("_errors").list.len() == 0).select(c.COLUMNS).fill_nan(None)


def duckdb_batch(work: Path, suite_spec: dict, views: dict):
    """(DuckDB connection, GX's SQL data source over it, suite). `views`: name -> Arrow table, registered
    (without a copy) on every cursor GX opens, for validating a frame in place."""
    import duckdb
    import great_expectations as gx
    from duckdb_engine import ConnectionWrapper, CursorWrapper
    from great_expectations.data_context.types.base import ProgressBarsConfig

    class OwnCursors(ConnectionWrapper):
        """duckdb-engine's connection, each cursor a DuckDB cursor of its own (see the module's docstring)."""

        def __init__(self, con):
            super().__init__(con)
            self._con = con

        def cursor(self):
            cursor = self._con.cursor()
            for name, table in views.items():
                cursor.register(name, table)
            return CursorWrapper(cursor, self)

    con = duckdb.connect(str(work / "gx.duckdb"))
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_sql(name="duckdb", connection_string="duckdb://",
                                          kwargs={"creator": lambda: OwnCursors(con.cursor())})
    return con, source, context.suites.add(gx.ExpectationSuite(**suite_spec))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--chunk-rows", type=int, default=0,
                        help="also validate chunk by chunk, as the ingest does (100000: its default chunk), "
                             "on pandas and on DuckDB reading each chunk in place (no copy)")
    args = parser.parse_args()

    from gpucast.expectations import validate
    from gpucast.expectations.suite import job_logs_suite

    work = Path(tempfile.mkdtemp(prefix="bench-gx-"))  # the simulated logs and the DuckDB file: removed at exit
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    frame = frame_of(args.rows, work)  # noqa: F841  (DuckDB reads the Python variable `frame` by name)
    print(f"{frame.height:,} rows x {frame.width} columns; suite of {len(job_logs_suite()['expectations'])} expectations")
    started = time.perf_counter()
    validate.warm_up()  # GX's import and context, as every ingest pays once (in a thread beside Prefect's start)
    print(f"Great Expectations' import and context (validate.warm_up): {time.perf_counter() - started:.2f} s")
    pandas_definition, pandas_suite = validate._context_and_suite("job_logs")
    views = {"chunk": frame.head(0).to_arrow()}
    con, source, duckdb_suite = duckdb_batch(work, job_logs_suite(), views)
    con.execute("CREATE TABLE batch AS SELECT * FROM frame LIMIT 0")
    duckdb_definition = source.add_table_asset(name="batch", table_name="batch").add_batch_definition_whole_table("all")
    boolean_only = {"result_format": "BOOLEAN_ONLY"}
    for run in range(1, args.repeat + 1):
        t0 = time.perf_counter()
        pdf = frame.to_pandas()
        t1 = time.perf_counter()
        by_pandas = pandas_definition.get_batch(batch_parameters={"dataframe": pdf}).validate(pandas_suite, result_format=boolean_only)
        t2 = time.perf_counter()
        con.execute("CREATE OR REPLACE TABLE batch AS SELECT * FROM frame")
        t3 = time.perf_counter()
        by_duckdb = duckdb_definition.get_batch().validate(duckdb_suite, result_format=boolean_only)
        t4 = time.perf_counter()
        errors = [r.expectation_config.type for r in by_duckdb.results if validate._raised(r.exception_info)]
        agree = [a.success == b.success for a, b in zip(by_pandas.results, by_duckdb.results, strict=True)]
        print(f"run {run}: pandas {t1 - t0:.2f} s to_pandas + {t2 - t1:.2f} s validate = {t2 - t0:.2f} s (baseline); "
              f"DuckDB {t3 - t2:.2f} s copy + {t4 - t3:.2f} s validate = {t4 - t2:.2f} s "
              f"({(t4 - t2) / (t2 - t0):.2f}x the baseline; validate alone {(t4 - t3) / (t2 - t1):.2f}x); "
              f"agree on {sum(agree)} of {len(agree)} expectations; DuckDB errors: {errors or 'none'}")
    if args.chunk_rows:
        by_chunk(frame, args, pandas_definition, pandas_suite, views,
                 source.add_table_asset(name="chunk", table_name="chunk").add_batch_definition_whole_table("all"),
                 duckdb_suite)
    con.close()


def by_chunk(frame, args, pandas_definition, pandas_suite, views, duckdb_definition, duckdb_suite) -> None:
    """The frame validated in chunks of `--chunk-rows`, each way; DuckDB reads each chunk where it is."""
    chunks = [frame.slice(start, args.chunk_rows) for start in range(0, frame.height, args.chunk_rows)]
    boolean_only = {"result_format": "BOOLEAN_ONLY"}
    for run in range(1, args.repeat + 1):
        on_pandas = on_duckdb = 0.0
        agree = True
        for chunk in chunks:
            t0 = time.perf_counter()
            by_pandas = pandas_definition.get_batch(batch_parameters={"dataframe": chunk.to_pandas()}).validate(
                pandas_suite, result_format=boolean_only)
            t1 = time.perf_counter()
            views["chunk"] = chunk.to_arrow()
            by_duckdb = duckdb_definition.get_batch().validate(duckdb_suite, result_format=boolean_only)
            t2 = time.perf_counter()
            on_pandas, on_duckdb = on_pandas + t1 - t0, on_duckdb + t2 - t1
            agree = agree and all(a.success == b.success for a, b in zip(by_pandas.results, by_duckdb.results, strict=True))
        print(f"run {run}, {len(chunks)} chunks of {args.chunk_rows:,}: pandas {on_pandas:.2f} s (baseline); "
              f"DuckDB in place {on_duckdb:.2f} s ({on_duckdb / on_pandas:.2f}x); every chunk agrees: {agree}")


if __name__ == "__main__":
    main()
