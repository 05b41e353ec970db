"""How much the warehouse (and so the planners' copy) grows per night, and where retention holds it.

Baseline: the warehouse before the night. Each simulated night publishes one score run through
the real publish path (`warehouse.forecast.publish`: insert, mark published, prune past
GPUCAST_KEEP_FORECAST_DAYS) with 3 forecasts per pending job, values drawn like real ones
(distinct floats, ids, reasons), then checkpoints, and the file size is read. Run for 10k and
1M pending jobs per night; prints bytes per night, per forecast row, and the steady state the
default retention (30 days) allows.

    .venv/bin/python tests/benchmarks/bench_growth.py [--pending 10000,1000000] [--nights 4]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from gpucast.expectations import contract as c
from gpucast.flows.settings import SPEC_BY_FIELD
from gpucast.warehouse import forecast, runs
from gpucast.warehouse.schema import schema_sql

KEEP_DAYS = SPEC_BY_FIELD["keep_forecast_days"].default
NIGHT0 = datetime(2026, 11, 1, 2, tzinfo=UTC)

STAGED = """
COPY (
    SELECT 'job-' || (i // 3) AS job_id, ([?, ?, ?])[(i % 3) + 1] AS target,
           random() * 10 AS p10, 10 + random() * 10 AS p50, 20 + random() * 30 AS p90,
           'lightgbm' AS model, 'train-20261101T020000Z-abc123' AS train_run_id, ? AS score_run_id,
           ?::TIMESTAMPTZ AS scored_at, 20 + random() * 40 AS safe_request_gb, 80.0 AS gpu_mem_gb,
           random() < 0.05 AS oom_risk, random() < 0.02 AS ood,
           CASE WHEN random() < 0.02 THEN 'batch_size above the training range (max 4096)' END AS ood_reason
    FROM range(?) t(i)
) TO '{path}' (FORMAT parquet)
"""


def night(con: duckdb.DuckDBPyConnection, db: Path, staging: Path, n: int, pending: int) -> int:
    run_id = f"score-night{n:03d}"
    at = NIGHT0 + timedelta(days=n)
    runs.start(con, runs.Run("score", run_id, at, None))
    part = staging / f"{run_id}.parquet"
    con.execute(STAGED.format(path=part), [*c.TARGETS, run_id, at, 3 * pending])
    forecast.publish(con, run_id, [part], pending, list(c.TARGETS), 80.0, KEEP_DAYS)
    con.execute("CHECKPOINT")
    part.unlink()
    return db.stat().st_size


def measure(pending: int, nights: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "warehouse.duckdb"
        con = duckdb.connect(str(db))
        con.execute(schema_sql())
        con.execute("CHECKPOINT")
        sizes = [db.stat().st_size]
        t0 = time.perf_counter()
        for n in range(nights):
            sizes.append(night(con, db, Path(tmp), n, pending))
        seconds = time.perf_counter() - t0
        con.close()
    per_night = (sizes[-1] - sizes[1]) / max(nights - 1, 1)  # the first night also allocates the tables
    rows = 3 * pending
    print(f"{pending:>9,} pending/night: {per_night / 2**20:8.1f} MiB per night ({per_night / rows:5.1f} bytes per "
          f"forecast row, {rows:,} rows); with {KEEP_DAYS}-day retention the forecasts level off near "
          f"{KEEP_DAYS * per_night / 2**30:6.2f} GiB (+ the newest night); {nights} nights in {seconds:.1f} s; "
          f"sizes {[round(s / 2**20, 1) for s in sizes]} MiB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pending", default="10000,1000000")
    p.add_argument("--nights", type=int, default=4)
    args = p.parse_args()
    for pending in (int(x) for x in args.pending.split(",")):
        measure(pending, args.nights)


if __name__ == "__main__":
    main()
