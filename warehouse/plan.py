"""Warehouse side of the capacity plan: what it is planned from, and the one-transaction write."""

from __future__ import annotations

from datetime import UTC, date, datetime

import duckdb
import polars as pl

from gpucast.records import UNKNOWN_LLM_SIZE
from gpucast.warehouse.db import transaction
from gpucast.warehouse.runs import finish

# Every PENDING job, with its latest published forecasts when it has them (a job never scored is
# planned as unknown size, never dropped). `day`: the day it was submitted. A job with LLM fields whose size is
# unknown (tasks/learn/ood.py check 7: its reason holds these words) is planned as unknown size too: a whole GPU
# of its queue's largest type, never shared (review 65a S2-3: its memory forecast leans on nothing). Bound: the
# words (records/__init__.py UNKNOWN_LLM_SIZE).
PLAN_INPUT = """
SELECT j.job_id, j.queue, CAST(j.submitted_at AS DATE) AS day, j.submitted_at, j.gpu_count,
       max(f.safe_request_gb) FILTER (WHERE f.target = 'peak_gpu_mem_gb'
                                        AND coalesce(strpos(f.ood_reason, ?) = 0, true)) AS mem_gb,
       max(f.p50) FILTER (WHERE f.target = 'runtime_hours') AS hours_p50,
       max(f.p90) FILTER (WHERE f.target = 'runtime_hours') AS hours_p90,
       max(f.p50) FILTER (WHERE f.target = 'gpu_demand_gflops') AS gflops_p50, j.precision
FROM job_logs j LEFT JOIN pending_forecasts f USING (job_id)
WHERE j.status = 'PENDING'
GROUP BY ALL
ORDER BY j.job_id
"""
# Issue 53: the RUNNING jobs, holding their GPUs until their expected end (tasks/plan/starts.py): since when, and
# their expected run time given the hours already run (job_demand.hours_expected: survival-aware, issue 53 item 2).
RUNNING_INPUT = """
SELECT job_id, queue, gpu_type, gpus AS gpu_count, started_at, hours_expected
FROM job_demand WHERE status = 'RUNNING' ORDER BY job_id
"""
LATEST_SCORE_RUN = """
SELECT r.score_run_id, CAST(max(f.scored_at) AS DATE)
FROM score_runs r LEFT JOIN forecasts f USING (score_run_id)
WHERE r.status = 'published'
GROUP BY r.score_run_id, r.started_at ORDER BY r.started_at DESC, r.score_run_id DESC LIMIT 1
"""
# The latest succeeded demand forecast (issue 30), per future day x queue x GPU type, and its run.
DEMAND_FORECAST = """
SELECT day, queue, gpu_type, gpu_hours_p50, gpu_hours_p90, coalesce(gpu_hours_p90_of_total, gpu_hours_p90) AS gpu_hours_p90_of_total,
       coalesce(gpu_hours_p90_of_queue, gpu_hours_p90) AS gpu_hours_p90_of_queue,
       coalesce(gpu_hours_p50_of_total, gpu_hours_p50) AS gpu_hours_p50_of_total
FROM current_demand_forecast ORDER BY day, queue, gpu_type
"""
LATEST_DEMAND_RUN = """
SELECT demand_run_id FROM demand_runs WHERE status = 'succeeded' ORDER BY started_at DESC, demand_run_id DESC LIMIT 1
"""
# The first day of the last ? days planned before this plan's first day (the latest succeeded plan of each), per
# queue x GPU type: the packing of known jobs the expected arrivals' packing efficiency is measured on
# (tasks/plan/arrivals.py). One plan a day: `gpucast plan` run again on the same forecasts (a what-if question) reads the
# same days as the nightly did, so the baseline it republishes is the same (session 22: it counted the day twice); a
# plan narrowed by `--gpu-types` packed some GPU types only and stands for no day (review 72 S2-3).
RECENT_PACKING = """
WITH runs AS (SELECT plan_run_id, start_day FROM plan_runs
              WHERE status = 'succeeded' AND start_day < ? AND gpu_types IS NULL  -- whole plans: not a `--gpu-types` one
              QUALIFY row_number() OVER (PARTITION BY start_day ORDER BY started_at DESC, plan_run_id DESC) = 1
              ORDER BY start_day DESC LIMIT ?)
SELECT p.queue, p.gpu_type, p.gpu_hours_p50, p.gpus_needed_p50
FROM capacity_plan p JOIN runs r ON p.plan_run_id = r.plan_run_id AND p.day = r.start_day
"""
KEEP_DETAIL_RUNS = 7  # plan runs whose per-job rows (unplaceable, co-location) are kept
OLDER_PLAN_RUNS = """SELECT plan_run_id FROM plan_runs WHERE status = 'succeeded'
                     ORDER BY started_at DESC, plan_run_id DESC OFFSET ?"""


def plan_input(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, str | None, date]:
    """(pending jobs with their forecasts, the score run they come from, the plan's first day: the
    day those forecasts were made for, else today)."""
    jobs = con.sql(PLAN_INPUT, params=[UNKNOWN_LLM_SIZE]).pl()
    latest = con.execute(LATEST_SCORE_RUN).fetchone()
    score_run_id, day = latest if latest else (None, None)
    return jobs, score_run_id, day or datetime.now(UTC).date()


def running_input(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The running jobs (RUNNING_INPUT): the GPUs they hold when the plan starts."""
    return con.sql(RUNNING_INPUT).pl()


def demand_input(con: duckdb.DuckDBPyConnection, recent_days: int,
                 start: date) -> tuple[pl.DataFrame, str | None, pl.DataFrame]:
    """(the latest demand forecast, its run id or None, the first days of the last `recent_days` days planned before
    `start`, this plan's first day: the latest succeeded plan of each day)."""
    forecast = con.sql(DEMAND_FORECAST).pl()
    latest = con.sql(LATEST_DEMAND_RUN).fetchall()  # all rows read: DuckDB 2.0 keeps an unread result open
    return forecast, latest[0][0] if latest else None, con.sql(RECENT_PACKING, params=[start, recent_days]).pl()


def record(con: duckdb.DuckDBPyConnection, plan_run_id: str, rows: pl.DataFrame, unplaceable: pl.DataFrame,
           colocation: pl.DataFrame, starts: pl.DataFrame, scenarios: pl.DataFrame, **summary) -> None:
    """Insert a plan's rows (with the pending jobs' expected starts and the what-if scenarios' days) and mark its run
    succeeded, in one transaction; drop the per-job rows of plan runs older than the last KEEP_DETAIL_RUNS."""
    with transaction(con):
        for table, frame in (("capacity_plan", rows), ("capacity_unplaceable", unplaceable),
                             ("capacity_colocation", colocation), ("capacity_job_starts", starts),
                             ("plan_scenarios", scenarios)):
            staged = frame.with_columns(pl.lit(plan_run_id).alias("plan_run_id"))  # noqa: F841 (read by DuckDB)
            names = ", ".join(staged.columns)
            con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM staged")
        finish(con, "plan", plan_run_id, "succeeded", **summary)
        for table in ("capacity_unplaceable", "capacity_colocation", "capacity_job_starts"):
            con.execute(f"DELETE FROM {table} WHERE plan_run_id IN ({OLDER_PLAN_RUNS})", [KEEP_DETAIL_RUNS])
