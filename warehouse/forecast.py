"""Warehouse side of scoring: the champions, the pending jobs, and the one-transaction publish."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl

from gpucast.tasks import contract as c
from gpucast.tasks.score import Champion
from gpucast.warehouse.housekeeping import failpoint, owner

FORECAST_COLUMNS = ("job_id", "target", "p10", "p50", "p90", "model", "train_run_id", "score_run_id", "scored_at",
                    "safe_request_gb", "gpu_mem_gb", "oom_risk")

LATEST_CHAMPIONS = """
SELECT c.target, c.model, c.train_run_id, c.model_dir
FROM model_champions c JOIN train_runs r USING (train_run_id)
WHERE r.status = 'succeeded' AND c.model IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY c.target ORDER BY r.started_at DESC) = 1
ORDER BY c.target
"""


def latest_champions(con: duckdb.DuckDBPyConnection) -> list[Champion]:
    """Per target, the champion of the latest successful train run that trained it."""
    return [Champion(*row) for row in con.execute(LATEST_CHAMPIONS).fetchall()]


def read_pending(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """job_id and the 11 features of every job whose latest record is PENDING."""
    cols = ", ".join((c.JOB_ID, *c.FEATURES))
    return con.sql(f"SELECT {cols} FROM job_logs WHERE status = 'PENDING' ORDER BY job_id").pl()


def publish(con: duckdb.DuckDBPyConnection, score_run_id: str, started_at: datetime, finished_at: datetime,
            parts: list[Path], pending_jobs: int, targets: list[str], gpu_mem_gb: float) -> int:
    """Insert a run's staged forecasts and mark it published, in one transaction: all or nothing."""
    con.execute("BEGIN TRANSACTION")
    try:
        n = 0
        if parts:
            files = [str(p) for p in parts]
            con.execute(f"INSERT INTO forecasts ({', '.join(FORECAST_COLUMNS)}) "
                        f"SELECT {', '.join(FORECAST_COLUMNS)} FROM read_parquet(?)", [files])
            n = con.execute("SELECT count(*) FROM forecasts WHERE score_run_id = ?", [score_run_id]).fetchone()[0]
        con.execute("INSERT OR REPLACE INTO score_runs (score_run_id, started_at, finished_at, status, pending_jobs, "
                    "forecasts, targets, gpu_mem_gb, pid, host) VALUES (?, ?, ?, 'published', ?, ?, ?, ?, ?, ?)",
                    [score_run_id, started_at, finished_at, pending_jobs, n, targets, gpu_mem_gb, *owner()])
        failpoint("score:before-commit")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return n


def record_failure(con: duckdb.DuckDBPyConnection, score_run_id: str, started_at: datetime, finished_at: datetime,
                   message: str) -> None:
    con.execute("INSERT OR REPLACE INTO score_runs (score_run_id, started_at, finished_at, status, forecasts, message, "
                "pid, host) VALUES (?, ?, ?, 'failed', 0, ?, ?, ?)",
                [score_run_id, started_at, finished_at, message[:2000], *owner()])


def start_run(con: duckdb.DuckDBPyConnection, score_run_id: str, started_at: datetime) -> None:
    """Record a scoring run as running (so a killed one is found and marked 'crashed' later)."""
    con.execute("INSERT OR IGNORE INTO score_runs (score_run_id, started_at, status, pid, host) "
                "VALUES (?, ?, 'running', ?, ?)", [score_run_id, started_at, *owner()])
