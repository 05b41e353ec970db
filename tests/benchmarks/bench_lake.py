"""Benchmark: the lake's refresh after a run that touches every day of the history (issue 52, item 3: rows move once).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_lake.py [--history 2000000] [--run 100000] [--days 365] [--repeat 2]

A warehouse holds `--history` records spread over `--days` days, its lake written; a run then adds `--run` records
spread over the same days (a backfill, or a night whose jobs were submitted over the past year). Timed, `--repeat`
times each on fresh copies: the refresh as it is (`load.refresh_lake`: this run's records appended to each day as a
file of their own), and the plain baseline, the rewrite the refresh did before (every record of every day the run
touched, `load._copy_days` over them all), in the same process.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from gpucast.flows.settings import Settings
from gpucast.warehouse import load
from gpucast.warehouse.db import connect_writer

RECORDS = """INSERT INTO job_log_records (job_id, submitted_at, status, record_hash, arrival, source_file, source_row,
                                          ingest_run_id, loaded_at, model_type, batch_size, params_million)
             SELECT ? || '-' || i, TIMESTAMPTZ '2025-11-28' + INTERVAL (i % ?) DAY, 'COMPLETED', md5(? || i), ? + i,
                    'f.jsonl', i, ?, ?, 'ResNet', 32, 25.6
             FROM range(?) t(i)"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", type=int, default=2_000_000)
    ap.add_argument("--run", type=int, default=100_000)
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gpucast-bench-lake-"))
    try:
        storage = Settings.from_env({"GPUCAST_HOME": str(root / "home")}).storage
        with connect_writer(storage) as con:
            now = datetime.now(UTC)
            con.execute(RECORDS, ["h", args.days, "h", 0, "history", now, args.history])
            load.refresh_lake(con, storage.lake_dir, "history")
            con.execute(RECORDS, ["r", args.days, "r", args.history, "run", now, args.run])
        print(f"{args.history:,} records over {args.days} days; a run of {args.run:,} records over the same days")
        for attempt in range(1, args.repeat + 1):
            copy = root / f"copy-{attempt}"
            shutil.copytree(root / "home", copy)
            storage = Settings.from_env({"GPUCAST_HOME": str(copy)}).storage
            with connect_writer(storage) as con:
                t = time.perf_counter()
                days = load.refresh_lake(con, storage.lake_dir, "run")
                append = time.perf_counter() - t
                t = time.perf_counter()
                load._copy_days(con, root / f"rewrite-{attempt}", "TRUE", days, [], "part-{i}")
                rewrite = time.perf_counter() - t
            print(f"run {attempt}: refresh (append) {append:.2f} s for {len(days)} days; the rewrite before "
                  f"(every record of those days) {rewrite:.2f} s: {rewrite / append:.1f}x", flush=True)
            shutil.rmtree(copy)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
