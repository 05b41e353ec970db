"""job_demand at 1M jobs: the plan's read of the running jobs and demand_daily, a base commit's view beside this tree's.

The view `job_demand` (warehouse/sql/schema.sql) gives each running job its survival-aware expected run time
(`hours_expected`, issue 53 item 2). Two reads pay for it: the plan's RUNNING_INPUT (warehouse/plan.py: the running
jobs' rows) and `demand_daily` (every job's row, read once by that view since session 7). This benchmark builds one in-memory
warehouse on one DuckDB thread with `--jobs` synthetic jobs (5% RUNNING, 20 queues x 1-4 GPUs, every queue x GPU
count with running jobs; the rest finished, 1 in 31 FAILED, run times 0.1-100 h; one record a job; no forecasts,
so every running job's estimate is read from its queue's finished runs), then, for each of the two views (`--base`'s
`job_demand` from git and this tree's), times both reads `--repeat` times (wall and this process's CPU seconds) and
checks that the two views give the same rows (every column of every job) and the same demand_daily. Each side is
its commit's `job_demand` and `demand_daily` (`--base 4fd7eaf^`: demand_daily's two reads of job_demand against one).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_job_demand.py [--jobs 1000000] [--repeat 2] [--base c21d3ba]
"""

from __future__ import annotations

import argparse
import math
import re
import subprocess
import time
from pathlib import Path

import duckdb

from gpucast.warehouse import schema

ROOT = Path(__file__).resolve().parents[2]
VIEW = re.compile(r"CREATE OR REPLACE VIEW job_demand AS.*?\nFROM jobs[^;]*;", re.S)
DAILY = re.compile(r"CREATE OR REPLACE VIEW demand_daily AS.*?;\n", re.S)
READS = {
    "running (RUNNING_INPUT)": "SELECT count(*), sum(gpu_hours_forecast) FROM job_demand WHERE status = 'RUNNING'",
    "demand_daily": "SELECT count(*), sum(gpu_hours) FROM demand_daily",
}


def view_of(text: str) -> str:
    """The `CREATE OR REPLACE VIEW job_demand` and `demand_daily` statements of a schema.sql text (demand_daily read
    job_demand twice before 4fd7eaf, once since)."""
    found, daily = VIEW.search(text), DAILY.search(text)
    if found is None or daily is None:
        raise SystemExit("no job_demand or demand_daily view in the schema text")
    return found.group(0) + "\n" + daily.group(0)


def warehouse(jobs: int) -> duckdb.DuckDBPyConnection:
    """This tree's schema on one thread, with `jobs` synthetic jobs (one record each)."""
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute(schema.schema_sql())
    con.execute(f"""
        INSERT INTO job_log_records (job_id, submitted_at, updated_at, status, queue, model_type, gpu_count, runtime_hours,
                              record_hash, arrival, source_file, source_row, ingest_run_id, loaded_at)
        SELECT 'j' || i, TIMESTAMPTZ '2026-06-01 00:00+00' + INTERVAL (i * 13) SECOND,
               TIMESTAMPTZ '2026-06-01 00:00+00' + INTERVAL (i * 13 + 3600) SECOND,
               CASE WHEN i % 20 = 0 THEN 'RUNNING' WHEN i % 31 = 0 THEN 'FAILED' ELSE 'COMPLETED' END,
               'q' || (hash(i, 1) % 20), 'CNN', 1 + hash(i, 2) % 4,
               CASE WHEN i % 20 <> 0 THEN 0.1 + (hash(i) % 1000) / 10.0 END,
               'h', i, 'f', i, 'r', TIMESTAMPTZ '2026-06-01 00:00+00' FROM range({jobs}) t(i)""")
    con.execute("INSERT INTO job_logs_latest SELECT job_id, arrival, coalesce(updated_at, submitted_at) FROM job_log_records")
    return con


def same_rows(a: list[tuple], b: list[tuple]) -> bool:
    """Equal rows, floats to 1e-9 relative (a sum over many rows may differ in its last digits with the order)."""
    return len(a) == len(b) and all(
        len(x) == len(y) and all(math.isclose(u, v, rel_tol=1e-9) if isinstance(u, float) and isinstance(v, float)
                                 else u == v for u, v in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--base", default="c21d3ba", help="the commit whose job_demand is the baseline")
    args = parser.parse_args()
    base_text = subprocess.run(["git", "show", f"{args.base}:warehouse/sql/schema.sql"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout
    views = {f"base {args.base}": view_of(base_text),
             "this tree": view_of((ROOT / "warehouse/sql/schema.sql").read_text())}
    con = warehouse(args.jobs)
    print(f"{args.jobs:,} jobs, one DuckDB thread (duckdb {duckdb.__version__})")
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    answers: dict[str, list] = {}
    for _ in range(args.repeat):
        for name, ddl in views.items():     # side by side: each round times both views
            con.execute(ddl)
            for read, sql in READS.items():
                wall, cpu = time.perf_counter(), time.process_time()
                con.execute(sql).fetchall()
                times.setdefault((read, name), []).append((time.perf_counter() - wall, time.process_time() - cpu))
    for name, ddl in views.items():
        con.execute(ddl)
        answers[name] = [con.execute("SELECT * FROM job_demand ORDER BY job_id").fetchall(),
                         con.execute("SELECT * FROM demand_daily ORDER BY ALL").fetchall()]
    base, mine = views
    for read in READS:
        for name in views:
            runs = ", ".join(f"{w:.2f} s ({c:.2f} CPU-s)" for w, c in times[(read, name)])
            print(f"{read:24} {name:14} {runs}")
        ratio = ", ".join(f"{b[1] / m[1]:.1f}x" for b, m in zip(times[(read, base)], times[(read, mine)], strict=True))
        print(f"{read:24} CPU-s base / this tree: {ratio}")
    print(f"job_demand rows identical: {answers[base][0] == answers[mine][0]}; "
          f"demand_daily rows equal (floats to 1e-9): {same_rows(answers[base][1], answers[mine][1])}")


if __name__ == "__main__":
    main()
