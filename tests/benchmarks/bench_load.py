"""Benchmark: the warehouse load and the lake's refresh of one staged run, this code against another's, side by side.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_load.py --source DIR [--rows 1000000] [--repeat 2] [--workdir DIR]

The ingest's two last per-row stages (`bench_ingest.py` prints them as `warehouse` and `lake`), apart from reading and
checking: a JSONL file of `--rows` simulated jobs (bench_ingest's file, reused from a kept `--workdir`) is staged once
(`staging.stage_file`), then each run loads the same staged files into a fresh warehouse with `load.load_run` and
refreshes the lake with `load.refresh_lake`, first with `--source`'s `warehouse/load.py` (a `git archive` of the
commit before a change), then with this checkout's, in one process. Printed per run and code: wall and CPU seconds
(all threads) of each stage, and the rows loaded; the two warehouses and lakes are compared after each pair (the same
records, the same lake rows).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import fresh_folder, input_options, simulated_input  # noqa: E402

from gpucast.flows.settings import Settings  # noqa: E402
from gpucast.tasks.ingest import staging  # noqa: E402
from gpucast.warehouse import load, runs  # noqa: E402
from gpucast.warehouse.db import connect_writer  # noqa: E402


def other_load(checkout: Path):
    """`checkout`'s warehouse/load.py as a module of its own (the rest of the package is this checkout's)."""
    spec = importlib.util.spec_from_file_location("load_before", checkout / "warehouse" / "load.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(fn, *args, **kwargs):
    t, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t, time.process_time() - cpu


def one(module, home: Path, staged: Path, results) -> tuple[dict, Path]:
    """Load `staged` into a fresh warehouse under `home` and refresh its lake with `module`; the seconds taken."""
    shutil.rmtree(home, ignore_errors=True)
    storage = Settings.from_env({"GPUCAST_HOME": str(home)}).storage
    run_id = "ingest-bench"
    with connect_writer(storage) as con:
        runs.start(con, runs.Run("ingest", run_id, datetime.now(UTC), staged), **module.start_columns(1))
        extra = {"lake_dir": storage.lake_dir} if "lake_dir" in inspect.signature(module.load_run).parameters else {}
        totals, w, wc = timed(module.load_run, con, run_id, staged, results, **extra)
        extra = {"staging_dir": staged} if "staging_dir" in inspect.signature(module.refresh_lake).parameters else {}
        days, lw, lc = timed(module.refresh_lake, con, storage.lake_dir, run_id, **extra)
    return dict(warehouse=w, warehouse_cpu=wc, lake=lw, lake_cpu=lc, loaded=totals.rows_loaded, days=len(days)), home


CLOCKS = {"job_log_records": "loaded_at", "job_logs": "loaded_at", "rejected_job_logs": "rejected_at"}


def same(a: Path, b: Path) -> str:
    """Whether two homes hold the same records, rejections and lake rows (every column but the load's clock)."""
    con = duckdb.connect()
    con.execute(f"ATTACH {str(a / 'warehouse.duckdb')!r} AS a (READ_ONLY); "
                f"ATTACH {str(b / 'warehouse.duckdb')!r} AS b (READ_ONLY)")
    out = []

    def differ(left: str, right: str) -> list:
        return con.execute(f"SELECT count(*) FROM (({left}) EXCEPT ALL ({right})) UNION ALL "
                           f"SELECT count(*) FROM (({right}) EXCEPT ALL ({left}))").fetchall()

    for table, clock in CLOCKS.items():
        diff = differ(f"SELECT * EXCLUDE ({clock}) FROM a.main.{table}", f"SELECT * EXCLUDE ({clock}) FROM b.main.{table}")
        out.append(f"{table} {'same' if diff == [(0,), (0,)] else f'DIFFER {diff}'}")
    lake = [f"SELECT * EXCLUDE (loaded_at) FROM read_parquet('{h}/lake/job_logs/**/*.parquet', hive_partitioning = true)"
            for h in (a, b)]
    diff = differ(*lake)
    types = [con.execute(f"DESCRIBE SELECT * FROM read_parquet('{h}/lake/job_logs/**/*.parquet')").fetchall()
             for h in (a, b)]
    out.append(f"lake rows {'same' if diff == [(0,), (0,)] else f'DIFFER {diff}'}, "
               f"file columns {'same' if types[0] == types[1] else f'DIFFER {types}'}")
    return "; ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, required=True, help="the other checkout (its warehouse/load.py)")
    input_options(ap)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    work, src, lines = simulated_input(args, "gpucast-bench-load-")
    staged = fresh_folder(work / "staged")
    result = staging.stage_file(src, staged, 0, not_after=datetime.now(UTC) + timedelta(hours=1))
    print(f"staged {result.rows_valid:,} valid + {result.rows_rejected:,} rejected rows of {lines:,} lines", flush=True)
    before = other_load(args.source)
    for run in range(1, args.repeat + 1):
        print(f"\nrun {run}:")
        homes = []
        for name, module in (("before", before), ("now", load)):
            figures, home = one(module, work / f"home-{name}", staged, [result])
            homes.append(home)
            print(f"  {name:6}: warehouse {figures['warehouse']:6.2f} s (CPU {figures['warehouse_cpu']:6.2f} s), "
                  f"lake {figures['lake']:6.2f} s (CPU {figures['lake_cpu']:6.2f} s), together "
                  f"{figures['warehouse'] + figures['lake']:6.2f} s (CPU "
                  f"{figures['warehouse_cpu'] + figures['lake_cpu']:6.2f} s); loaded {figures['loaded']:,} rows, "
                  f"{figures['days']} lake day(s)", flush=True)
        print(f"  compared: {same(*homes)}", flush=True)


if __name__ == "__main__":
    main()
