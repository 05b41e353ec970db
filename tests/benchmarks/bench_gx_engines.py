"""Benchmark: Great Expectations' share of an ingest, per chunk on pandas (before) and once per run on DuckDB (now).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_gx_engines.py [--rows 1000000] [--chunk-rows 100000] [--repeat 2]

Simulated logs of `--rows` jobs (1% dirty) are read and normalised as the ingest does; the rows that parse (the
suite's input) are cut into chunks of `--chunk-rows` (the ingest's chunk). Both ways run the row rules on every
chunk (`validate.check_rows`: they decide which rows are quarantined, before and now), then:

* **before** (the named baseline, the ingest until issue 52's decision 1): GX on its pandas data source, every
  chunk (`to_pandas` + `BOOLEAN_ONLY`), each chunk's verdict checked against that chunk's rule counts;
* **now**: each chunk written as Parquet (as the ingest stages its rows), then GX once over all of them on DuckDB
  (`validate.validate_staged`: in GX's judge process, `expectations/judge.py`, the copy into an in-memory DuckDB
  and GX's SQL data source), its verdict checked against the rule counts summed over the run.

It prints each way's seconds (rules included, and GX's part alone) and whether every verdict agreed. Both ways run
in the same process, alternately, `--repeat` times: compare them side by side, run by run.
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


def pandas_judge():
    """GX's context on its pandas data source, as the ingest built it before (the baseline)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    from gpucast.expectations.suite import job_logs_suite

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    suite = context.suites.add(gx.ExpectationSuite(**job_logs_suite()))
    definition = context.data_sources.add_pandas("frames").add_dataframe_asset("frame").add_batch_definition_whole_dataframe("all")
    return definition, suite


def before(chunks, definition, suite) -> tuple[float, float, bool]:
    """(seconds in all, of which GX, every chunk's verdict agreeing with its rules)."""
    from gpucast.expectations import validate

    total = gx_part = 0.0
    agree = True
    for chunk in chunks:
        t0 = time.perf_counter()
        ours = validate.check_rows(chunk)
        t1 = time.perf_counter()
        result = definition.get_batch(batch_parameters={"dataframe": chunk.to_pandas()}).validate(
            suite, result_format={"result_format": "BOOLEAN_ONLY"})
        t2 = time.perf_counter()
        judged = {validate._key(r.expectation_config.type, r.expectation_config.kwargs, r.expectation_config.meta["rule"]):
                  r.success for r in result.results}
        agree = agree and all(judged[validate._key(o.expectation, {"column": o.column}, o.rule)] == o.success
                              for o in ours.outcomes)
        total, gx_part = total + t2 - t0, gx_part + t2 - t1
    return total, gx_part, agree


def now(chunks, folder: Path) -> tuple[float, float, bool]:
    """(seconds in all, of which the Parquet writes and GX's one run, the run's verdict agreeing with its rules)."""
    from dataclasses import replace

    from gpucast.expectations import contract as c
    from gpucast.expectations import validate

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    t0 = time.perf_counter()
    totals: dict[tuple, validate.ExpectationOutcome] = {}
    rules = 0.0
    for k, chunk in enumerate(chunks):
        t1 = time.perf_counter()
        ours = validate.check_rows(chunk)
        rules += time.perf_counter() - t1
        chunk.write_parquet(folder / f"valid-{k:05d}.parquet")
        for o in ours.outcomes:
            key = validate._key(o.expectation, {"column": o.column}, o.rule)
            seen = totals.get(key)
            totals[key] = o if seen is None else replace(seen, success=seen.success and o.success,
                                                         unexpected_count=seen.unexpected_count + o.unexpected_count)
    try:
        validate.validate_staged(sorted(folder.glob("*.parquet")), list(c.COLUMNS), list(totals.values()))
        agree = True
    except validate.RuleMismatch:
        agree = False
    total = time.perf_counter() - t0
    return total, total - rules, agree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-rows", type=int, default=100_000, help="the ingest's chunk (DEFAULT_CHUNK_ROWS)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    from gpucast.expectations import validate
    from gpucast.expectations.suite import job_logs_suite

    work = Path(tempfile.mkdtemp(prefix="bench-gx-"))  # the simulated logs and the Parquet: removed at exit
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    frame = frame_of(args.rows, work)
    chunks = [frame.slice(start, args.chunk_rows) for start in range(0, frame.height, args.chunk_rows)]
    print(f"{frame.height:,} rows x {frame.width} columns in {len(chunks)} chunks; suite of "
          f"{len(job_logs_suite()['expectations'])} expectations")
    started = time.perf_counter()
    validate.warm_up()  # the judge process (expectations/judge.py) builds its context beside the pandas one
    definition, suite = pandas_judge()
    validate.validate_frame(frame.head(10))  # waits for the judge's build: neither way's runs pay it
    print(f"both GX contexts built: {time.perf_counter() - started:.2f} s (once per process, either way)")
    for run in range(1, args.repeat + 1):
        b_all, b_gx, b_agree = before(chunks, definition, suite)
        n_all, n_gx, n_agree = now(chunks, work / "staged")
        print(f"run {run}: before (GX on pandas per chunk) {b_all:.2f} s, GX {b_gx:.2f} s, agree {b_agree}; "
              f"now (GX once on DuckDB) {n_all:.2f} s, Parquet + GX {n_gx:.2f} s, agree {n_agree}; "
              f"now / before {n_all / b_all:.2f}x (GX's part {n_gx / b_gx:.2f}x)")
    judge = validate._JUDGE.process  # GX's judge process (expectations/judge.py): its own peak memory
    peak = next(int(line.split()[1]) / 1024 for line in open(f"/proc/{judge.pid}/status") if line.startswith("VmHWM:"))
    print(f"GX's judge process: peak RSS {peak:,.0f} MB")


if __name__ == "__main__":
    main()
