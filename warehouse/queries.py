"""Read-only queries for people (status, reports, planners' SQL): each returns Polars frames, but for the quick read
commands (`gpucast status`, `gpucast sql`'s table), whose few rows come from DuckDB's own fetch (`records.rows.Rows`,
`status_tables`, `run_sql(as_rows=True)`): importing Polars and PyArrow took most of their 0.5 s (issue 52 item 4).

Formatting them as text, Markdown or charts is `tasks/report/render.py`'s job; this module only asks.
`path` is the database to read: the planners' published copy by default (`Storage.query_path`),
the working file when a run reports on itself before it publishes.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from gpucast.records import UNKNOWN_LLM_SIZE
from gpucast.records.rows import Rows, plain_type
from gpucast.warehouse.concerns import SqlSandbox, Storage
from gpucast.warehouse.db import connect_reader
from gpucast.warehouse.errors import QueryError, duckdb_message

if TYPE_CHECKING:  # imported where a frame is made: `gpucast status` and `sql` print DuckDB's rows without Polars
    import polars as pl


class SqlTimeout(RuntimeError):
    """A planner's query ran past GPUCAST_SQL_TIMEOUT_S and was interrupted."""


class SqlTooLarge(RuntimeError):
    """A planner's query returned more than GPUCAST_SQL_MEMORY holds."""


class SqlRefused(ValueError):
    """A planner's query is not one that only reads (COPY, EXPORT, ATTACH, SET ...)."""


RECENT_INGESTS = """
SELECT run_id, source, status, started_at, round(epoch(finished_at - started_at), 1) AS seconds,
       files, files_rejected, rows_read, rows_loaded, rows_rejected, rows_duplicate
FROM ingest_runs ORDER BY started_at DESC LIMIT ?
"""
FAILURES = """
SELECT r.run_id, coalesce(r.message, '') AS message, f.source_file, f.reason
FROM ingest_runs r LEFT JOIN ingest_files f ON f.ingest_run_id = r.run_id AND f.status = 'rejected'
WHERE r.run_id IN (SELECT run_id FROM ingest_runs ORDER BY started_at DESC LIMIT ?)
  AND (r.status <> 'succeeded' OR f.source_file IS NOT NULL)
ORDER BY r.started_at DESC
"""
JOBS_BY_STATUS = "SELECT status, count(*) AS jobs FROM job_logs GROUP BY ALL ORDER BY jobs DESC"
RECENT_TRAINS = """
SELECT train_run_id, status, device, preset, round(epoch(finished_at - started_at), 1) AS seconds,
       coalesce(message, '') AS message
FROM train_runs ORDER BY started_at DESC LIMIT ?
"""
RECENT_SCORES = """
SELECT score_run_id, status, pending_jobs, forecasts, ood_forecasts, gpu_mem_gb,
       round(epoch(finished_at - started_at), 1) AS seconds, coalesce(message, '') AS message
FROM score_runs ORDER BY started_at DESC LIMIT ?
"""
RECENT_PLANS = """
SELECT plan_run_id, status, start_day, days, jobs, unknown_size_jobs, unplaceable_jobs,
       round(epoch(finished_at - started_at), 1) AS seconds, coalesce(message, '') AS message
FROM plan_runs ORDER BY started_at DESC LIMIT ?
"""
TOP_REJECTIONS = """
SELECT reason, count(*) AS n FROM (SELECT unnest(reasons) AS reason FROM rejected_job_logs WHERE ingest_run_id = ?)
GROUP BY ALL ORDER BY n DESC, reason LIMIT ?
"""
# `is_champion`: the row of the model that scores the target now; a target with none is scored by an earlier run's
# champion the gate kept (`CHAMPIONS` names it; newcomer 26 P4: the page's rank 1 read as the champion).
LEADERBOARD = """
SELECT target, rank, model, is_champion, planner_loss, holdout_planner_loss, validation_rmse, backtest_rmse, test_rmse, test_mape,
       backtest_mape, test_r2, train_seconds, epochs
FROM model_leaderboard ORDER BY target, rank
"""
# The champion that scores each target (a champion the gate kept from an earlier run included), with its
# metrics from the run that trained it (none for the analytic prior) and the last gate decision.
CHAMPIONS = """
SELECT c.target, c.model, round(s.validation_rmse, 3) AS validation_rmse, round(s.backtest_rmse, 3) AS backtest_rmse,
       round(s.test_mape, 1) AS test_mape,
       round(s.test_r2, 3) AS test_r2, c.decision AS gate
FROM current_champions c
LEFT JOIN run_model_summary s ON s.train_run_id = c.train_run_id AND s.target = c.target AND s.model = c.model
ORDER BY c.target
"""
CAPACITY_BY_QUEUE = """
SELECT queue, sum(jobs) AS jobs, round(sum(gpu_hours_p50), 1) AS gpu_hours_p50,
       round(sum(gpu_hours_p90), 1) AS gpu_hours_p90, round(max(mem_p90_max_gb), 1) AS mem_p90_max_gb,
       sum(jobs_over_24gb) AS jobs_over_24gb, sum(jobs_over_40gb) AS jobs_over_40gb, sum(jobs_over_80gb) AS jobs_over_80gb,
       sum(jobs_unknown_size) AS jobs_unknown_size
FROM capacity_daily GROUP BY ALL ORDER BY queue
"""
CAPACITY_TOTALS = """
SELECT sum(jobs) AS pending_jobs, sum(gpu_hours_p50) AS gpu_hours_p50, sum(gpu_hours_p90) AS gpu_hours_p90,
       sum(jobs_over_24gb) AS jobs_over_24gb, sum(jobs_over_40gb) AS jobs_over_40gb, sum(jobs_over_80gb) AS jobs_over_80gb,
       sum(jobs_unknown_size) AS jobs_unknown_size
FROM capacity_daily
"""
LATEST_TRAIN_RUN = "SELECT train_run_id FROM train_runs WHERE status = 'succeeded' ORDER BY started_at DESC LIMIT 1"
TRAIN_SUMMARY = """
SELECT target, model, split, avg(planner_loss) AS planner_loss, stddev_samp(planner_loss) AS planner_loss_std,
       avg(mse) AS mse, stddev_samp(mse) AS mse_std, avg(rmse) AS rmse, stddev_samp(rmse) AS rmse_std,
       avg(mae) AS mae, stddev_samp(mae) AS mae_std, avg(mape) AS mape, stddev_samp(mape) AS mape_std,
       avg(r2) AS r2, stddev_samp(r2) AS r2_std, avg(train_seconds) AS train_seconds, count(*) AS repeats
FROM model_metrics WHERE train_run_id = ? GROUP BY ALL ORDER BY target, split, rmse
"""
TRAIN_CHAMPIONS = "SELECT * FROM model_champions WHERE train_run_id = ? ORDER BY target"


def _read(path: Path, *queries: tuple[str, list]) -> list[pl.DataFrame]:
    """Run each (sql, params) on a read-only connection to `path`; one frame each."""
    con = connect_reader(path)
    try:
        return [con.sql(sql, params=params or None).pl() for sql, params in queries]
    finally:
        con.close()


def _read_rows(path: Path, *queries: tuple[str, list]) -> list[Rows | pl.DataFrame]:
    """As `_read`, each result as DuckDB's own rows (`Rows`) where its columns' types allow (`plain_type`), else as a
    Polars frame."""
    con = connect_reader(path)
    try:
        return [_rows_or_frame(con, con.sql(sql, params=params or None)) for sql, params in queries]
    finally:
        con.close()


def _rows_or_frame(con: duckdb.DuckDBPyConnection, rel: duckdb.DuckDBPyRelation) -> Rows | pl.DataFrame:
    kinds = tuple(str(t) for t in rel.types)
    if all(plain_type(k) for k in kinds):
        return Rows(tuple(rel.columns), kinds, tuple(rel.fetchall()), _time_zone(con, kinds))
    return rel.pl()


def _time_zone(con: duckdb.DuckDBPyConnection, kinds: tuple[str, ...]) -> str:
    """The session's TimeZone, where a TIMESTAMP WITH TIME ZONE column's values are given in it."""
    if "TIMESTAMP WITH TIME ZONE" not in kinds:
        return "UTC"
    return con.sql("SELECT current_setting('TimeZone')").fetchall()[0][0]


CHAMPIONS_AND_BACKTEST = """
SELECT ch.target, ch.model, ch.decision, ch.decision_reason,
       count(b.p50) AS backtest_jobs, round(avg(b.within_p90::INT), 3) AS p90_coverage,
       round(100 * avg(b.ape), 1) AS backtest_mape
FROM current_champions ch
LEFT JOIN forecast_backtest b ON b.target = ch.target AND b.train_run_id = ch.train_run_id AND b.p50 IS NOT NULL
     -- the window ends at the latest completion, never after this query's own clock (a record from the future)
     AND b.completed_at >= least((SELECT max(completed_at) FROM forecast_backtest), now()) - to_days(?)
GROUP BY ALL ORDER BY ch.target
"""


def status_tables(path: Path, limit: int, backtest_days: int = 7) -> dict[str, Rows | pl.DataFrame]:
    """Recent ingest, train, score and plan runs, failures and rejected files, jobs by status, and the
    current champions with their gate decision and backtest coverage (DuckDB's rows, `_read_rows`)."""
    names = ("ingests", "failures", "jobs", "trains", "scores", "plans", "champions")
    frames = _read_rows(path, (RECENT_INGESTS, [limit]), (FAILURES, [limit]), (JOBS_BY_STATUS, []),
                   (RECENT_TRAINS, [limit]), (RECENT_SCORES, [limit]), (RECENT_PLANS, [limit]),
                   (CHAMPIONS_AND_BACKTEST, [backtest_days]))
    return dict(zip(names, frames, strict=True))


def top_rejection_reasons(con: duckdb.DuckDBPyConnection, ingest_run_id: str, n: int = 3) -> list[tuple[str, int]]:
    """The `n` rules that rejected most rows of one ingest run, with their counts."""
    return con.execute(TOP_REJECTIONS, [ingest_run_id, n]).fetchall()


def leaderboard_and_capacity(path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The leaderboard of the latest train run per target, and the pending queue's capacity totals."""
    board, totals = _read(path, (LEADERBOARD, []), (CAPACITY_TOTALS, []))
    return board, totals


CURRENT_PLAN = "SELECT * FROM current_capacity_plan ORDER BY day, queue, gpu_type"


def capacity_summary(path: Path) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Per queue: jobs, GPU-hours and memory of the pending queue; the champion per target; the current plan's rows."""
    capacity, champions, plan = _read(path, (CAPACITY_BY_QUEUE, []), (CHAMPIONS, []), (CURRENT_PLAN, []))
    return capacity, champions, plan


# What a planner's query may be, by DuckDB's own parse (`duckdb.extract_statements`), not by matching
# text: SELECT (WITH, FROM-first, VALUES, SHOW, DESCRIBE, SUMMARIZE parse as SELECT), EXPLAIN, PRAGMA
# and CALL read. Everything else is refused before anything runs: COPY and EXPORT (the only
# statements that write files: DuckDB lets a query write into its own spill folder, which
# `allowed_directories` lists), ATTACH, INSTALL/LOAD, SET, CREATE, INSERT ...
READ_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN,
                             duckdb.StatementType.PRAGMA, duckdb.StatementType.CALL})
FETCH_ROWS = 2048  # rows fetched at a time (one DuckDB vector): the result is counted as it arrives
VALUE_SHARE = 8  # one value may hold at most this share of GPUCAST_SQL_MEMORY (printing it copies it)


def run_sql(path: Path, query: str, limits: SqlSandbox, spill_dir: Path, max_rows: int | None = None,
            as_rows: bool = False) -> tuple[pl.DataFrame | Rows, int]:
    """One bounded read-only planner query: (the first `max_rows` rows, or all when None; the total row count).
    With `as_rows`, a result of at most `ROWS_MOST` rows (`max_rows`) whose columns are each a `plain_type` comes as
    DuckDB's own rows (`Rows`: `gpucast sql`'s table, printed without Polars), anything else as a Polars frame.

    Only statements that read run (`READ_STATEMENTS`; `SqlRefused` otherwise), on a connection that
    cannot write, ATTACH, or read other files, within the `GPUCAST_SQL_*` limits: memory, threads,
    a cap on what it spills to its own temporary folder, a timeout after which the query is
    interrupted (`SqlTimeout`); and the result is fetched in batches and refused (`SqlTooLarge`) as
    soon as what was fetched passes the memory limit, so the limit bounds what `gpucast sql` holds.
    """
    _refuse_all_but_reads(query)
    spill = _spill_folder(spill_dir)
    try:
        con = connect_reader(path, limits={"memory_limit": limits.memory, "threads": limits.threads,
                                           "temp_directory": str(spill), "max_temp_directory_size": limits.temp_limit})
    except BaseException:
        shutil.rmtree(spill, ignore_errors=True)
        raise
    timer = threading.Timer(limits.timeout_s, con.interrupt)
    timer.start()
    try:
        rel = con.sql(query)
        if rel is None:  # a statement without a result (a PRAGMA that sets nothing visible ...)
            if as_rows:
                return Rows((), (), ()), 0
            import polars as pl

            return pl.DataFrame(), 0
        kinds = tuple(str(t) for t in rel.types)
        if as_rows and max_rows is not None and max_rows <= ROWS_MOST and all(plain_type(k) for k in kinds):
            con.execute(rel.limit(max_rows + 1).sql_query())  # (a relation is fetched whole; a result a batch at a time)
            rows = _fetch_rows_within(con, tuple(rel.columns), limits)
            total = len(rows) if len(rows) <= max_rows else rel.aggregate("count(*)").fetchall()[0][0]
            return Rows(tuple(rel.columns), kinds, rows[:max_rows], _time_zone(con, kinds)), total
        df = _fetch_within(rel if max_rows is None else rel.limit(max_rows + 1), limits)
        total = df.height if max_rows is None or df.height <= max_rows else rel.aggregate("count(*)").fetchall()[0][0]
    except duckdb.InterruptException:
        raise SqlTimeout(f"the query ran longer than {limits.timeout_s:g} s (GPUCAST_SQL_TIMEOUT_S) and was "
                         "stopped; narrow it (WHERE, LIMIT) or raise the limit") from None
    except duckdb.Error as exc:
        raise QueryError(duckdb_message(exc)) from None
    finally:
        timer.cancel()
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    import polars as pl

    df = df.head(max_rows) if max_rows is not None else df
    # DuckDB sums integers into HUGEINT (a Polars Decimal(38, 0)); JSON would write it as a string.
    return df.with_columns(pl.col(pl.Int128).cast(pl.Int64),
                           *[pl.col(n).cast(pl.Int64 if t.scale == 0 else pl.Float64)
                             for n, t in df.schema.items() if isinstance(t, pl.Decimal)]), total


def _refuse_all_but_reads(query: str) -> None:
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise QueryError(duckdb_message(exc)) from None
    for statement in statements:
        if statement.type not in READ_STATEMENTS:
            raise SqlRefused(f"`gpucast sql` only reads; refused: {statement.type.name} (allowed: SELECT, WITH, "
                             "FROM, VALUES, SHOW, DESCRIBE, SUMMARIZE, EXPLAIN, PRAGMA, CALL)")


ROWS_MOST = 10_000  # `run_sql(as_rows=True)` fetches Python rows for at most this many (a larger table: Arrow's, smaller)


def _fetch_rows_within(con: duckdb.DuckDBPyConnection, columns: tuple[str, ...], limits: SqlSandbox) -> tuple[tuple, ...]:
    """`_fetch_within`'s bounds on the rows of the query `con` executed last, as DuckDB's own tuples: FETCH_ROWS at a
    time, `SqlTooLarge` once they hold more than the memory limit (counted as Arrow holds them: 8 bytes a value, a
    text its bytes and a 4-byte offset), or as soon as one text holds more than `VALUE_SHARE` of it."""
    most = limits.memory_bytes // VALUE_SHARE
    rows: list[tuple] = []
    held = 0
    while batch := con.fetchmany(FETCH_ROWS):
        texts = [(name, len(v.encode())) for row in batch for name, v in zip(columns, row, strict=True)
                 if isinstance(v, str)]
        held += sum(size + 4 for _, size in texts) + 8 * (len(batch) * len(columns) - len(texts))
        rows += batch
        if held > limits.memory_bytes:
            raise SqlTooLarge(f"the result passed GPUCAST_SQL_MEMORY ({limits.memory}) after {len(rows):,} rows and was "
                              "stopped; select fewer rows or columns (WHERE, LIMIT, an aggregate) or raise the limit")
        for name, size in texts:
            if size > most:
                raise SqlTooLarge(f"a value of column {name!r} holds {size:,} bytes, more than `gpucast sql` prints "
                                  f"({most:,} bytes: GPUCAST_SQL_MEMORY ({limits.memory}) / {VALUE_SHARE}); select "
                                  f"part of it (left({name}, 1000), length({name})) or raise the limit")
    return tuple(rows)


def _fetch_within(rel: duckdb.DuckDBPyRelation, limits: SqlSandbox) -> pl.DataFrame:
    """The relation's rows, fetched FETCH_ROWS at a time; `SqlTooLarge` once they hold more than the memory
    limit, or as soon as one value (a text or a blob) holds more than `VALUE_SHARE` of it: printing a value
    takes several copies of it (`repeat('x', 250000000)` under a 256MB limit printed at 2.3 GB peak)."""
    import polars as pl
    import pyarrow as pa
    import pyarrow.compute as pc

    reader = rel.fetch_record_batch(FETCH_ROWS)
    most = limits.memory_bytes // VALUE_SHARE
    batches, held, rows = [], 0, 0
    for batch in reader:
        held += batch.nbytes
        rows += batch.num_rows
        if held > limits.memory_bytes:
            raise SqlTooLarge(f"the result passed GPUCAST_SQL_MEMORY ({limits.memory}) after {rows:,} rows and was "
                              "stopped; select fewer rows or columns (WHERE, LIMIT, an aggregate) or raise the limit")
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            if _is_bytes(column.type) and (size := pc.max(pc.binary_length(column)).as_py() or 0) > most:
                raise SqlTooLarge(f"a value of column {name!r} holds {size:,} bytes, more than `gpucast sql` prints "
                                  f"({most:,} bytes: GPUCAST_SQL_MEMORY ({limits.memory}) / {VALUE_SHARE}); select "
                                  f"part of it (left({name}, 1000), length({name})) or raise the limit")
        batches.append(batch)
    return pl.from_arrow(pa.Table.from_batches(batches, schema=reader.schema))


def check_table_size(df: pl.DataFrame | Rows, limits: SqlSandbox) -> None:
    """`SqlTooLarge` when a result is too large to lay out as one text table (a table is built whole, at
    several times the result's size: 100k rows of 1 kB took 1 GB): at most `VALUE_SHARE` of the limit. DuckDB's rows
    are counted as Polars would hold them (`_polars_bytes`)."""
    most = limits.memory_bytes // VALUE_SHARE
    if (size := _polars_bytes(df) if isinstance(df, Rows) else df.estimated_size()) > most:
        raise SqlTooLarge(f"the result ({size:,} bytes) is more than a table lays out ({most:,} bytes: GPUCAST_SQL_MEMORY "
                          f"({limits.memory}) / {VALUE_SHARE}); print it with --format csv or json (printed a piece at "
                          "a time), or fewer rows (--max-rows)")


def _polars_bytes(rows: Rows) -> int:
    """About what Polars' `estimated_size` says of `rows` as a frame: 8 bytes a value, a text 16 (its view) and its
    bytes beyond the 12 a view holds inline."""
    return sum(16 + (n if (n := len(v.encode())) > 12 else 0) if isinstance(v, str) else 8
               for row in rows.rows for v in row)


def _is_bytes(kind) -> bool:
    import pyarrow as pa

    return any(test(kind) for test in (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
                                       pa.types.is_large_binary))


def _spill_folder(folder: Path) -> Path:
    """This query's own temporary folder: under the data directory, or the system's temporary folder
    when a planner may read but not write the data directory. (Folders of killed queries are swept
    by the next run, `housekeeping.sweep_staging`.)"""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    except PermissionError:
        return Path(tempfile.mkdtemp(prefix="gpucast-sql-"))


def latest_train_run(path: Path) -> str:
    (df,) = _read(path, (LATEST_TRAIN_RUN, []))
    if df.is_empty():
        raise FileNotFoundError("no successful training run yet: run `gpucast train` first")
    return df.item()


def train_tables(path: Path, run_id: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(metrics summarised over repeats per target/model/split, champions) of one train run."""
    summary, champions = _read(path, (TRAIN_SUMMARY, [run_id]), (TRAIN_CHAMPIONS, [run_id]))
    return summary, champions


# The planners' page (`tasks/report/site.py` renders it) -------------------------------------------------
# GPU-hours per submission day and queue with the P10-P90 band of the day's sum (issue 53 item 3: the P90 of the
# total, not the per-job P90s summed), from the latest published forecasts. Each job's run time is read as a
# lognormal through its P50 and P90 (sigma = ln(P90 / P50) / z90), times its GPUs; the jobs of a day and queue are
# taken as independent and their sum as the lognormal of the same mean and variance (Fenton-Wilkinson), whose
# P10 / P50 / P90 are shown. One job alone keeps its P50 and P90 (its P10: P50^2 / P90).
# 1.2815515655446004: the standard normal's 90% point (z90).
DEMAND_BY_DAY = """
WITH jobs AS (
    SELECT CAST(f.submitted_at AS DATE) AS day, f.queue, CAST(coalesce(j.gpu_count, 1) AS DOUBLE) AS gpus, f.p50,
           CASE WHEN f.p50 > 0 AND f.p90 > f.p50 THEN ln(f.p90 / f.p50) / 1.2815515655446004 ELSE 0.0 END AS sigma
    FROM pending_forecasts f JOIN job_logs j USING (job_id)
    WHERE f.target = 'runtime_hours'
),
moments AS (    -- the day's sum: its mean and variance (independent jobs)
    SELECT day, queue, count(*) AS jobs, coalesce(sum(gpus * p50 * exp(sigma * sigma / 2)), 0) AS mean,
           coalesce(sum(gpus * gpus * p50 * p50 * exp(sigma * sigma) * (exp(sigma * sigma) - 1)), 0) AS variance
    FROM jobs GROUP BY ALL
),
summed AS (     -- ... as a lognormal: its median and sigma
    SELECT day, queue, jobs,
           CASE WHEN mean > 0 THEN mean / sqrt(1 + variance / (mean * mean)) ELSE 0.0 END AS median,
           CASE WHEN mean > 0 THEN sqrt(ln(1 + variance / (mean * mean))) ELSE 0.0 END AS sigma
    FROM moments
)
SELECT day, queue, median * exp(-1.2815515655446004 * sigma) AS gpu_hours_p10, median AS gpu_hours_p50,
       median * exp(1.2815515655446004 * sigma) AS gpu_hours_p90, jobs
FROM summed ORDER BY day, queue
"""
# Issue 30: daily GPU-hours per queue, the last ? days of history (`demand_daily`) and the latest demand
# forecast: the queue's own (`current_demand_forecast_queue`, session 9: its P10 / P90 those of the queue's total);
# a run before that table: per-series quantiles summed over a queue's GPU types, `series` saying how many (above 1
# the band is a sum of bands, wider than the queue's own, and the page says so). Issue 53 item 3: with
# two queues or more, the site's total too (queue `TOTAL_QUEUE`): the history summed, and the total's own forecast
# (`current_demand_forecast_total`), whose P90 is the P90 of the total the plan adds up (not the queues' P90s summed).
TOTAL_QUEUE = "(all queues)"
DEMAND_HISTORY = """
WITH seen AS (  -- the history the forecast saw: up to the day before its first day (none: the last day there is)
    SELECT coalesce((SELECT min(day) - 1 FROM current_demand_forecast), (SELECT max(day) FROM demand_daily)) AS last_day
),
shown AS (
    SELECT d.day, d.queue, sum(d.gpu_hours) AS gpu_hours FROM demand_daily d, seen
    WHERE d.day <= seen.last_day AND d.day > seen.last_day - to_days(CAST(? AS INTEGER))
    GROUP BY d.day, d.queue
)
SELECT day, queue, gpu_hours FROM shown
UNION ALL
SELECT day, CAST(? AS VARCHAR), sum(gpu_hours) FROM shown
WHERE (SELECT count(DISTINCT queue) FROM shown) > 1 GROUP BY day
ORDER BY day, queue
"""
DEMAND_OUTLOOK = """
SELECT day, queue, gpu_hours_p10, gpu_hours_p50, gpu_hours_p90, method, 1 AS series FROM current_demand_forecast_queue
UNION ALL
SELECT day, queue, sum(gpu_hours_p10), sum(gpu_hours_p50), sum(gpu_hours_p90),
       string_agg(DISTINCT method, ', ' ORDER BY method), count(*)
FROM current_demand_forecast WHERE queue NOT IN (SELECT queue FROM current_demand_forecast_queue) GROUP BY day, queue
UNION ALL
SELECT day, CAST(? AS VARCHAR), gpu_hours_p10, gpu_hours_p50, gpu_hours_p90, method, 1 FROM current_demand_forecast_total
WHERE (SELECT count(DISTINCT queue) FROM current_demand_forecast) > 1
ORDER BY day, queue
"""
HISTORY_DAYS = 56  # days of demand history the page's chart shows before the forecast
PLAN = "SELECT * EXCLUDE (plan_run_id) FROM current_capacity_plan ORDER BY day, queue, gpu_memory_gb, gpu_type"
PLAN_RUN = """
SELECT plan_run_id, started_at, start_day, days, inventory, score_run_id, demand_run_id, jobs, unknown_size_jobs, unplaceable_jobs,
       coalesce(message, '') AS message
FROM plan_runs WHERE status = 'succeeded' ORDER BY started_at DESC, plan_run_id DESC LIMIT 1
"""
OOM_RISK = """
SELECT job_id, queue, team, model_type, round(p90, 1) AS mem_p90_gb, safe_request_gb, gpu_mem_gb
FROM pending_forecasts WHERE target = 'peak_gpu_mem_gb' AND oom_risk
ORDER BY safe_request_gb DESC, job_id LIMIT ?
"""
OOM_RISK_COUNT = "SELECT count(*) AS jobs FROM pending_forecasts WHERE target = 'peak_gpu_mem_gb' AND oom_risk"
UNPLACEABLE = """
SELECT job_id, queue, mem_gb, gpu_count, coalesce(smallest_fitting_gpu, 'none in the catalogue') AS smallest_fitting_gpu,
       round(hours_p90, 1) AS hours_p90
FROM current_unplaceable_jobs ORDER BY mem_gb DESC, job_id LIMIT ?
"""
UNPLACEABLE_COUNT = "SELECT count(*) AS jobs FROM current_unplaceable_jobs"
COLOCATION = """
SELECT queue, gpu_type, count(*) AS groups, sum(jobs) AS jobs_in_groups, max(jobs) AS largest_group
FROM current_colocation GROUP BY ALL ORDER BY queue, gpu_type
"""
COVERAGE = """
SELECT target, sum(jobs) AS jobs, round(sum(p10_p90_coverage * jobs) / sum(jobs), 3) AS p10_p90_coverage,
       round(sum(p90_coverage * jobs) / sum(jobs), 3) AS p90_coverage
FROM interval_coverage GROUP BY ALL ORDER BY target
"""
# Every run of every kind (the run tables' union): what RECENT_RUNS and `gpucast status`'s unpublished failures read.
ALL_RUNS = """(
    SELECT 'ingest' AS kind, run_id, status, started_at, coalesce(message, '') AS message FROM ingest_runs
    UNION ALL SELECT 'train', train_run_id, status, started_at, coalesce(message, '') FROM train_runs
    UNION ALL SELECT 'score', score_run_id, status, started_at, coalesce(message, '') FROM score_runs
    UNION ALL SELECT 'plan', plan_run_id, status, started_at, coalesce(message, '') FROM plan_runs
    UNION ALL SELECT 'demand', demand_run_id, status, started_at, coalesce(message, '') FROM demand_runs
)"""
# The page never shows a failed run's error text (a source's error may quote what it read: a file given by
# mistake, a store's names); `gpucast status` shows it to on-call.
RECENT_RUNS = f"""
SELECT kind, run_id, status, started_at,
       CASE WHEN status = 'failed' THEN 'failed: the reason is in `gpucast status`' ELSE message END AS message
FROM {ALL_RUNS} ORDER BY started_at DESC LIMIT ?
"""
LATEST_RUN_START = f"SELECT max(started_at) FROM {ALL_RUNS}"
# Review 85 S2-1: the runs that failed, crashed or still run in the warehouse since the planners' copy's newest run
# (a failed night publishes nothing, so `gpucast status`, reading the copy, showed last night's all-green runs).
UNPUBLISHED_RUNS = f"""
SELECT kind, run_id, status, started_at, message FROM {ALL_RUNS}
WHERE status NOT IN ('succeeded', 'published') AND started_at > coalesce(?, TIMESTAMPTZ '1970-01-01 00:00:00+00')
ORDER BY started_at DESC LIMIT ?
"""


def unpublished_runs(storage: Storage, limit: int) -> Rows | str | None:
    """The warehouse's runs not succeeded since the planners' copy's newest run (`UNPUBLISHED_RUNS`), as rows; a
    sentence when the warehouse cannot be read now (a writer holds it); None when people query the warehouse itself
    (nothing published yet: `status` already reads it)."""
    if storage.query_path == storage.db_path or not storage.db_path.exists():
        return None
    (since,), = _read_rows(storage.published_path, (LATEST_RUN_START, []))[0].rows
    try:
        con = duckdb.connect(str(storage.db_path), read_only=True)
    except duckdb.Error as exc:
        if isinstance(exc, duckdb.ConnectionException) or "lock" in str(exc).lower():  # another process's; our own
            return ("the warehouse is held by a running writer now: runs since the last publish are not shown "
                    "(`gpucast status --flows` shows the flow runs)")
        return _unreadable(exc)
    try:
        con.execute("SET TimeZone = 'UTC'")  # as the rest of `status` (review 86 S3-2)
        return _rows_or_frame(con, con.sql(UNPUBLISHED_RUNS, params=[since, limit]))
    except duckdb.Error as exc:  # a damaged block (review 86 S2-2: it failed the whole of `status`)
        return _unreadable(exc)
    finally:
        con.close()


def _unreadable(exc: BaseException) -> str:
    return (f"the warehouse could not be read ({duckdb_message(exc)}): runs since the last publish are not shown; "
            "see docs/operations.md, on-call runbook step 7")
# Pending jobs forecast from the scheduler's history (no model features, contract v4): the reason
# tasks/learn/history.py (`SchedulerHistory.describe`) gives them begins with these words.
FEATURELESS = """
SELECT count(DISTINCT job_id) AS jobs, string_agg(DISTINCT model, ', ' ORDER BY model) AS models
FROM pending_forecasts WHERE ood_reason LIKE 'model features unknown -> %'
"""
# Issue 53: the what-if scenarios beside the plan (every day of each), the queues and the pending jobs that wait longest.
SCENARIOS = "SELECT * EXCLUDE (plan_run_id) FROM current_plan_scenarios ORDER BY scenario = 'baseline' DESC, scenario, day"
QUEUE_WAITS = """
SELECT queue, gpu_type, any_value(gpus_owned) AS gpus_owned,
       round(arg_min(expected_wait_hours, day), 1) AS wait_first_day_h, round(max(expected_wait_hours), 1) AS longest_wait_h,
       arg_max(day, expected_wait_hours) AS longest_on
FROM current_capacity_plan WHERE expected_wait_hours IS NOT NULL
GROUP BY ALL ORDER BY longest_wait_h DESC, queue, gpu_type
"""
JOB_WAITS = """
SELECT s.job_id, s.queue, s.gpu_type, CAST(j.submitted_at AS DATE) AS submitted, s.expected_start,
       round(s.expected_wait_hours, 1) AS expected_wait_hours
FROM current_job_starts s JOIN job_logs j USING (job_id)
WHERE s.expected_wait_hours IS NOT NULL ORDER BY s.expected_wait_hours DESC, s.job_id LIMIT ?
"""
NO_START_COUNT = """
SELECT count(*) AS jobs FROM current_job_starts WHERE expected_wait_hours IS NULL AND gpu_type IS NOT NULL
"""
# Issue 51: the large pending jobs (several GPUs, or a per-GPU P90 near its GPU's memory) with their
# layout; the page adds the GPU types each fits (tasks/report/site.py large_jobs_table). "Near" = P90 >= 0.8 x the
# memory of the GPU its forecast was checked against (gpu_mem_gb, the same as oom_risk's)
# A job with LLM fields whose size is unknown (`size_unknown`: its memory reason holds the bound words
# records.UNKNOWN_LLM_SIZE, tasks/learn/ood.py check 7) is a large job too, its memory shown as unknown (review 65b S3-3).
LARGE_JOBS_FROM = """
FROM (SELECT *, coalesce(strpos(ood_reason, ?) > 0, false) AS size_unknown FROM pending_forecasts
      WHERE target = 'peak_gpu_mem_gb') f JOIN job_logs j USING (job_id)
WHERE coalesce(j.gpu_count, 1) > 1 OR f.p90 >= 0.8 * f.gpu_mem_gb OR f.size_unknown
"""
LARGE_JOBS_COUNT = f"SELECT count(*) AS jobs {LARGE_JOBS_FROM}"
LARGE_JOBS = f"""
SELECT f.job_id, f.queue, j.arch, coalesce(j.gpu_count, 1) AS gpus, coalesce(j.tensor_parallel, 1) AS tp,
       coalesce(j.pipeline_parallel, 1) AS pp, coalesce(j.context_parallel, 1) AS cp, j.sharding, j.adapter,
       round(f.p50, 1) AS mem_p50_gb, round(f.p90, 1) AS mem_p90_gb, f.safe_request_gb, f.gpu_mem_gb, f.size_unknown
{LARGE_JOBS_FROM}ORDER BY gpus DESC, f.size_unknown DESC, f.p90 DESC, f.job_id LIMIT ?
"""
SITE_ROWS = 50  # rows of a job list shown on the page (the counts say how many there are)


def site_frames(path: Path, rows: int = SITE_ROWS, runs: int = 12) -> dict[str, pl.DataFrame]:
    """Everything the planners' page shows, read from one database (the published copy)."""
    names = ("demand", "demand_history", "demand_outlook", "plan", "plan_run", "oom", "oom_count", "unplaceable",
             "unplaceable_count", "colocation", "champions", "leaderboard", "coverage", "runs", "featureless", "scenarios",
             "queue_waits", "job_waits", "no_start_count", "large_jobs", "large_jobs_count")
    frames = _read(path, (DEMAND_BY_DAY, []), (DEMAND_HISTORY, [HISTORY_DAYS, TOTAL_QUEUE]),
                   (DEMAND_OUTLOOK, [TOTAL_QUEUE]), (PLAN, []),
                   (PLAN_RUN, []), (OOM_RISK, [rows]), (OOM_RISK_COUNT, []),
                   (UNPLACEABLE, [rows]), (UNPLACEABLE_COUNT, []), (COLOCATION, []), (CHAMPIONS, []), (LEADERBOARD, []),
                   (COVERAGE, []), (RECENT_RUNS, [runs]), (FEATURELESS, []), (SCENARIOS, []), (QUEUE_WAITS, []),
                   (JOB_WAITS, [min(rows, 20)]), (NO_START_COUNT, []), (LARGE_JOBS, [UNKNOWN_LLM_SIZE, rows]),
                   (LARGE_JOBS_COUNT, [UNKNOWN_LLM_SIZE]))
    return dict(zip(names, frames, strict=True))
