"""Warehouse side of the demand forecast: the daily series it reads, and the one-transaction write."""

from __future__ import annotations

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


def record(con: duckdb.DuckDBPyConnection, demand_run_id: str, forecast: pl.DataFrame, backtest: pl.DataFrame,
           **summary) -> None:
    """Insert a demand run's forecast and backtest rows and mark it succeeded, in one transaction; drop
    the backtest rows of runs older than the last KEEP_BACKTEST_RUNS."""
    with transaction(con):
        for table, frame in (("demand_forecast", forecast), ("demand_backtest", backtest)):
            staged = frame.with_columns(pl.lit(demand_run_id).alias("demand_run_id"))  # noqa: F841 (read by DuckDB)
            names = ", ".join(staged.columns)
            con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM staged")
        finish(con, "demand", demand_run_id, "succeeded", **summary)
        con.execute(f"DELETE FROM demand_backtest WHERE demand_run_id IN ({OLDER_DEMAND_RUNS})", [KEEP_BACKTEST_RUNS])
