"""The nightly backtest: every job that completed after it was forecast, against its forecast.

For each COMPLETED job (completed within the window) and target, `forecast_backtest` holds the last
forecast published *before the job started* (the first RUNNING record's time), or before it
completed when its log never said it was running; and what the job then measured. A completed job
with no earlier forecast gets a row too, with empty forecast columns: it counts as "not forecast",
never as an error. Jobs whose completion precedes their submission never reach here (the contract
quarantines them). Re-running a window replaces its rows (idempotent).

A backfill's night (`gpucast nightly --as-of T`, on a warehouse that may already hold later days) reads the window as
that night would have: it ends at T (`until`): a job that completed after T, and a forecast published after T, do
not count; its re-run replaces only the rows it rewrites (completed by T), never a later night's. The end is the
job's own completion time, the clock the logs carry (a warehouse loaded in bulk after the fact has no other: its
`loaded_at` is the load's wall clock, after every night it replays). A live night's window is open at the end, as it
always was: a log may carry a completion ahead of the clock (GPUCAST_FUTURE_TOLERANCE_HOURS; the simulator writes a
long job's end when it is submitted), and such a job counts.

`summary` aggregates the rows by target, model, model type and queue: MAPE, coverage of [P10, P90]
and of P90, and how often `safe_request_gb` under-provisioned (memory). The champion/challenger gate
(`tasks/learn/gate.py`) and the drift warning read the same rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records.results import BacktestResult, ChampionCoverage
from gpucast.warehouse.db import transaction
from gpucast.warehouse.forecast import CHAMPIONS_AS_OF

DEFAULT_DAYS = 7

# One row per completed job x target: its actual value, and (ASOF) the last published forecast made
# strictly before the job started (or, without a RUNNING record, before it completed).
BACKTEST = f"""
WITH done AS (
    SELECT j.job_id, j.model_type, j.queue, j.updated_at AS completed_at,
           s.started_at, j.{c.GPU_DEMAND_GFLOPS}, j.{c.PEAK_GPU_MEM_GB}, j.{c.RUNTIME_HOURS}
    FROM job_logs j
    LEFT JOIN (SELECT job_id, min(updated_at) AS started_at FROM job_log_records
               WHERE status = 'RUNNING' AND updated_at IS NOT NULL GROUP BY job_id) s USING (job_id)
    WHERE j.status = 'COMPLETED' AND j.updated_at IS NOT NULL AND j.updated_at BETWEEN ? AND ?
), actual AS (
    SELECT job_id, model_type, queue, completed_at, started_at, coalesce(started_at, completed_at) AS cutoff,
           target, value AS actual
    FROM (UNPIVOT done ON {c.GPU_DEMAND_GFLOPS}, {c.PEAK_GPU_MEM_GB}, {c.RUNTIME_HOURS} INTO NAME target VALUE value)
    WHERE value > 0
), published AS (
    -- `scored_at <= ?` (the night) is a guard: the ASOF join below already takes forecasts before a job's cutoff,
    -- which is before its completion, which the window bounds at the night (review 64 S3-4)
    SELECT f.* FROM forecasts f JOIN score_runs r USING (score_run_id) WHERE r.status = 'published' AND f.scored_at <= ?
)
SELECT a.job_id, a.target, f.score_run_id, f.scored_at, f.model, f.train_run_id, a.model_type, a.queue,
       a.started_at, a.completed_at, a.started_at IS NOT NULL AS start_known,
       f.p10, f.p50, f.p90, f.safe_request_gb, a.actual,
       abs(f.p50 - a.actual) / a.actual AS ape,
       a.actual BETWEEN f.p10 AND f.p90 AS in_p10_p90,
       a.actual <= f.p90 AS within_p90,
       CASE WHEN a.target = '{c.PEAK_GPU_MEM_GB}' THEN f.safe_request_gb < a.actual END AS under_provisioned,
       f.ood, ? AS backtested_at
FROM actual a ASOF LEFT JOIN published f
  ON a.job_id = f.job_id AND a.target = f.target AND a.cutoff > f.scored_at
"""

SUMMARY = """
SELECT target, coalesce(model, '(not forecast)') AS model, model_type, queue,
       count(*) AS jobs, count(*) FILTER (WHERE p50 IS NULL) AS not_forecast,
       round(100 * avg(ape), 2) AS mape, round(avg(in_p10_p90::INT), 4) AS p10_p90_coverage,
       round(avg(within_p90::INT), 4) AS p90_coverage, round(avg(under_provisioned::INT), 4) AS under_provisioned
FROM forecast_backtest WHERE completed_at BETWEEN ? AND ?
GROUP BY ALL ORDER BY target, model, model_type, queue
"""


def window_start(con: duckdb.DuckDBPyConnection, days: int, now: datetime) -> datetime | None:
    """The start of the window: `days` before the latest submission the warehouse knows of (the
    clock of the logs, so a backfill or a demo of simulated dates gets the same window as a live
    night), but never after the run's own clock `now`: one record dated 2099 (loaded before the time
    rule rejected such rows) would otherwise move the window past every real job. Not the latest
    completion: a log may carry a completion time ahead of its own clock (the simulator writes a
    long job's end when it is submitted), and one such job would move the window past every job
    that was forecast."""
    latest = con.execute("SELECT max(submitted_at) FROM job_logs").fetchall()[0][0]
    return None if latest is None else min(latest, now) - timedelta(days=days)


# The end of a live night's window: none (see the module's doc). A bound value, so one statement serves both.
OPEN_END = datetime.max.replace(tzinfo=UTC)


def window(con: duckdb.DuckDBPyConnection, days: int, now: datetime,
           until: datetime | None = None) -> tuple[datetime, datetime] | None:
    """The window's first and last completion times: from `window_start`, to `until` (a backfill's night: its clock)
    or open (None: a live night). None when the warehouse has no jobs."""
    start = window_start(con, days, now)
    return None if start is None else (start, until or OPEN_END)


def run(con: duckdb.DuckDBPyConnection, days: int, now: datetime, until: datetime | None = None) -> BacktestResult:
    """Recompute `forecast_backtest` for jobs completed in the window (`window`); return its counts (the champions'
    coverage is `champion_coverage`'s). Rows completed after `until` (a later night's) are kept as they are."""
    bounds = window(con, days, now, until)
    if bounds is None:
        return BacktestResult(window_start=None, jobs=0, forecast=0, not_forecast=0)
    start, end = bounds
    with transaction(con):
        con.execute("DELETE FROM forecast_backtest WHERE completed_at BETWEEN ? AND ?", [start, end])
        con.execute(f"INSERT INTO forecast_backtest BY NAME {BACKTEST}", [start, end, end, now])
        jobs, forecast = con.execute("SELECT count(*), count(p50) FROM forecast_backtest WHERE completed_at BETWEEN ? AND ?",
                                     [start, end]).fetchall()[0]
    return BacktestResult(window_start=start, jobs=jobs, forecast=forecast, not_forecast=jobs - forecast)


def summary(con: duckdb.DuckDBPyConnection, days: int, now: datetime, until: datetime | None = None) -> pl.DataFrame:
    """Per target, model, model type and queue over the window: MAPE, coverages, under-provisioning."""
    bounds = window(con, days, now, until)
    if bounds is None:
        return pl.DataFrame()
    return con.sql(SUMMARY, params=list(bounds)).pl()


def champion_window(con: duckdb.DuckDBPyConnection, target: str, train_run_id: str, days: int,
                    now: datetime, until: datetime | None = None) -> pl.DataFrame:
    """The window's jobs a champion forecast before they ran: job_id, its P50, P90 and the actual."""
    bounds = window(con, days, now, until)
    if bounds is None:
        return pl.DataFrame(schema={c.JOB_ID: pl.String, "p50": pl.Float64, "p90": pl.Float64, "actual": pl.Float64})
    return con.sql("SELECT job_id, p50, p90, actual FROM forecast_backtest WHERE target = ? AND train_run_id = ? "
                   "AND completed_at BETWEEN ? AND ? AND p50 IS NOT NULL ORDER BY job_id",
                   params=[target, train_run_id, *bounds]).pl()


CHAMPION_COVERAGE = """
WITH ch AS ({champions})
SELECT b.target, ch.model, ch.train_run_id, count(*) AS jobs, avg(b.within_p90::INT) AS p90_coverage,
       avg(b.in_p10_p90::INT) AS p10_p90_coverage, 100 * avg(b.ape) AS mape
FROM forecast_backtest b JOIN ch ON ch.target = b.target AND ch.train_run_id = b.train_run_id
WHERE b.completed_at BETWEEN ? AND ? AND b.p50 IS NOT NULL
GROUP BY ALL ORDER BY b.target
"""


def champion_coverage(con: duckdb.DuckDBPyConnection, days: int, now: datetime,
                      until: datetime | None = None) -> tuple[ChampionCoverage, ...]:
    """Per target, how the champion's own forecasts did on the window (for the drift warning): the current champion,
    or on a backfill's night (`until`) the one in place then (`forecast.champions_as_of`)."""
    bounds = window(con, days, now, until)
    if bounds is None:
        return ()
    if until is None:
        cur = con.execute(CHAMPION_COVERAGE.format(champions="SELECT * FROM current_champions"), list(bounds))
    else:
        cur = con.execute(CHAMPION_COVERAGE.format(champions=CHAMPIONS_AS_OF), [until, *bounds])
    names = [d[0] for d in cur.description]
    return tuple(ChampionCoverage(**dict(zip(names, row, strict=True))) for row in cur.fetchall())
