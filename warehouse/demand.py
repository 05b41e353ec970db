"""Warehouse side of the demand forecast: the daily series it reads, and the one-transaction write."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import duckdb
import polars as pl

from gpucast.warehouse.db import transaction
from gpucast.warehouse.runs import finish

DEMAND_INPUT = "SELECT day, queue, gpu_type, jobs_submitted, gpu_hours FROM demand_daily ORDER BY ALL"
# The latest day anything was submitted (UTC): the forecast's history never runs past it.
LATEST_SUBMISSION_DAY = "SELECT CAST(max(timezone('UTC', submitted_at)) AS DATE) FROM job_logs"
KEEP_BACKTEST_RUNS = 7  # demand runs whose backtest rows are kept
OLDER_DEMAND_RUNS = """SELECT demand_run_id FROM demand_runs WHERE status = 'succeeded'
                       ORDER BY started_at DESC, demand_run_id DESC OFFSET ?"""


def demand_input(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, date | None]:
    """(the demand series, `demand_daily`; the latest submission day, None on an empty warehouse)."""
    return con.sql(DEMAND_INPUT).pl(), con.execute(LATEST_SUBMISSION_DAY).fetchall()[0][0]


@dataclass(frozen=True)
class Total:
    """The site's total series (issue 53 item 3): its forecast (`demand_forecast_total`'s columns) and its backtest
    (`demand_backtest`'s, queue and GPU type left out: `demand_backtest_total`)."""
    forecast: pl.DataFrame
    backtest: pl.DataFrame


def record(con: duckdb.DuckDBPyConnection, demand_run_id: str, forecast: pl.DataFrame, backtest: pl.DataFrame,
           total: Total | None = None, queues: pl.DataFrame | None = None, **summary) -> None:
    """Insert a demand run's forecast and backtest rows (and the total's, and each queue's total forecast:
    `demand_forecast_queue`) and mark it succeeded, in one transaction; drop the backtest rows of runs older than the
    last KEEP_BACKTEST_RUNS."""
    frames = [("demand_forecast", forecast), ("demand_backtest", backtest)]
    if queues is not None:
        frames.append(("demand_forecast_queue", queues))
    if total is not None:
        frames += [("demand_forecast_total", total.forecast),
                   ("demand_backtest_total", total.backtest.drop("queue", "gpu_type", strict=False))]
    with transaction(con):
        for table, frame in frames:
            staged = frame.with_columns(pl.lit(demand_run_id).alias("demand_run_id"))  # noqa: F841 (read by DuckDB)
            names = ", ".join(staged.columns)
            con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM staged")
        finish(con, "demand", demand_run_id, "succeeded", **summary)
        for table in ("demand_backtest", "demand_backtest_total"):
            con.execute(f"DELETE FROM {table} WHERE demand_run_id IN ({OLDER_DEMAND_RUNS})", [KEEP_BACKTEST_RUNS])
