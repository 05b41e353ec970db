"""Warehouse side of scoring: the current champions and the one-transaction publish of a run's forecasts."""

from __future__ import annotations

from pathlib import Path

import duckdb

from gpucast.expectations.records import Champion
from gpucast.warehouse.db import transaction
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.runs import finish

FORECAST_COLUMNS = ("job_id", "target", "p10", "p50", "p90", "model", "train_run_id", "score_run_id", "scored_at",
                    "safe_request_gb", "gpu_mem_gb", "oom_risk", "ood", "ood_reason")

# The same rule as the `model_leaderboard` view's `latest` CTE (schema.sql), which reads this view.
LATEST_CHAMPIONS = "SELECT target, model, train_run_id, model_dir FROM current_champions ORDER BY target"


def latest_champions(con: duckdb.DuckDBPyConnection) -> list[Champion]:
    """Per target, the champion of the latest successful train run that trained it."""
    return [Champion(*row) for row in con.execute(LATEST_CHAMPIONS).fetchall()]


def publish(con: duckdb.DuckDBPyConnection, score_run_id: str, parts: list[Path], pending_jobs: int,
            targets: list[str], gpu_mem_gb: float) -> int:
    """Insert a run's staged forecasts and mark it published, in one transaction: all or nothing."""
    with transaction(con):
        if parts:
            files = [str(p) for p in parts]
            con.execute(f"INSERT INTO forecasts ({', '.join(FORECAST_COLUMNS)}) "
                        f"SELECT {', '.join(FORECAST_COLUMNS)} FROM read_parquet(?)", [files])
        n, n_ood = con.execute("SELECT count(*), count(*) FILTER (WHERE ood) FROM forecasts WHERE score_run_id = ?",
                               [score_run_id]).fetchall()[0]
        finish(con, "score", score_run_id, "published", pending_jobs=pending_jobs, forecasts=n, targets=targets,
               gpu_mem_gb=gpu_mem_gb, ood_forecasts=n_ood)
        failpoint("score:before-commit")
    return n
