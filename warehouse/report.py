"""Read-only views for people: `gpucast status` and `gpucast sql`."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from gpucast.warehouse.db import connect_reader, writer
from gpucast.warehouse.settings import Settings

RECENT_RUNS = """
SELECT run_id, status, started_at, round(epoch(finished_at - started_at), 1) AS seconds,
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

RECENT_TRAINS = """
SELECT train_run_id, status, device, preset, round(epoch(finished_at - started_at), 1) AS seconds,
       coalesce(message, '') AS message
FROM train_runs ORDER BY started_at DESC LIMIT ?
"""
RECENT_SCORES = """
SELECT score_run_id, status, pending_jobs, forecasts, gpu_mem_gb,
       round(epoch(finished_at - started_at), 1) AS seconds, coalesce(message, '') AS message
FROM score_runs ORDER BY started_at DESC LIMIT ?
"""


def _table(df: pl.DataFrame) -> str:
    with pl.Config(tbl_rows=200, tbl_cols=30, tbl_width_chars=200, fmt_str_lengths=80,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        return str(df)


def markdown_table(df: pl.DataFrame) -> str:
    """A frame as a Markdown table (for Prefect artifacts)."""
    with pl.Config(tbl_formatting="MARKDOWN", tbl_rows=200, tbl_cols=30, fmt_str_lengths=80, float_precision=3,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True, tbl_width_chars=400):
        return str(df)


def top_rejection_reasons(settings: Settings, ingest_run_id: str, n: int = 3) -> list[tuple[str, int]]:
    """The `n` rules that rejected most rows of one ingest run, with their counts."""
    with writer(settings) as con:
        return con.execute("SELECT reason, count(*) AS n FROM (SELECT unnest(reasons) AS reason FROM rejected_job_logs "
                           "WHERE ingest_run_id = ?) GROUP BY ALL ORDER BY n DESC, reason LIMIT ?",
                           [ingest_run_id, n]).fetchall()


def nightly_tables(settings: Settings) -> tuple[pl.DataFrame, pl.DataFrame]:
    """For the nightly report: the leaderboard, and the pending queue's capacity totals."""
    with writer(settings) as con:
        board = con.sql("SELECT target, rank, model, validation_rmse, test_rmse, test_mape, test_r2, train_seconds, "
                        "epochs FROM model_leaderboard ORDER BY target, rank").pl()
        totals = con.sql("SELECT sum(jobs) AS pending_jobs, sum(gpu_hours_p50) AS gpu_hours_p50, "
                         "sum(gpu_hours_p90) AS gpu_hours_p90, sum(jobs_over_24gb) AS over_24gb, "
                         "sum(jobs_over_40gb) AS over_40gb, sum(jobs_over_80gb) AS over_80gb FROM capacity_daily").pl()
    return board, totals


def status_text(settings: Settings, limit: int = 10) -> str:
    con = connect_reader(settings.query_path)
    try:
        runs = con.sql(RECENT_RUNS, params=[limit]).pl()
        failures = con.sql(FAILURES, params=[limit]).pl()
        totals = con.sql(
            "SELECT status, count(*) AS jobs FROM job_logs GROUP BY ALL ORDER BY jobs DESC"
        ).pl()
        trains = con.sql(RECENT_TRAINS, params=[limit]).pl()
        scores = con.sql(RECENT_SCORES, params=[limit]).pl()
    finally:
        con.close()
    lines = [f"Recent ingest runs ({settings.query_path}):", _table(runs)]
    if failures.height:
        lines += ["", "Failed runs and rejected files:"]
        for row in failures.iter_rows(named=True):
            what = f"{row['source_file']}: {row['reason']}" if row["source_file"] else row["message"]
            lines.append(f"- {row['run_id']}: {what}")
    lines += ["", "Jobs in job_logs by status:", _table(totals)]
    if trains.height:
        lines += ["", "Recent train runs:", _table(trains)]
    if scores.height:
        lines += ["", "Recent score runs:", _table(scores)]
    return "\n".join(lines)


def run_query(settings: Settings, query: str, fmt: str = "table") -> str:
    """Run one read-only query on the published copy; it cannot write, ATTACH, or read other files."""
    con = connect_reader(settings.query_path)
    try:
        df = con.sql(query).pl()
    finally:
        con.close()
    # DuckDB sums integers into HUGEINT (a Polars Decimal(38, 0)); JSON would write it as a string.
    df = df.with_columns(pl.col(pl.Int128).cast(pl.Int64),
                         *[pl.col(n).cast(pl.Int64 if t.scale == 0 else pl.Float64)
                           for n, t in df.schema.items() if isinstance(t, pl.Decimal)])
    if fmt == "csv":
        return df.write_csv()
    if fmt == "json":
        return df.write_json() + "\n"
    return _table(df) + "\n"


def latest_train_run(settings: Settings, path: Path | None = None) -> str:
    con = connect_reader(path or settings.query_path)
    try:
        row = con.execute(
            "SELECT train_run_id FROM train_runs WHERE status = 'succeeded' ORDER BY started_at DESC LIMIT 1"
        ).fetchone()
    finally:
        con.close()
    if not row:
        raise FileNotFoundError("no successful training run yet: run `gpucast train` first")
    return row[0]


def train_tables(settings: Settings, run_id: str, path: Path | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(summary over repeats per target/model/split, champions) of one train run."""
    con = connect_reader(path or settings.query_path)
    try:
        summary = con.sql(TRAIN_SUMMARY, params=[run_id]).pl()
        champions = con.sql("SELECT * FROM model_champions WHERE train_run_id = ? ORDER BY target", params=[run_id]).pl()
    finally:
        con.close()
    return summary, champions


TRAIN_SUMMARY = """
SELECT target, model, split,
       avg(mse) AS mse, stddev_samp(mse) AS mse_std, avg(rmse) AS rmse, stddev_samp(rmse) AS rmse_std,
       avg(mae) AS mae, stddev_samp(mae) AS mae_std, avg(mape) AS mape, stddev_samp(mape) AS mape_std,
       avg(r2) AS r2, stddev_samp(r2) AS r2_std, avg(train_seconds) AS train_seconds, count(*) AS repeats
FROM model_metrics WHERE train_run_id = ? GROUP BY ALL ORDER BY target, split, rmse
"""


def train_report(settings: Settings, run_id: str) -> str:
    from gpucast.tasks.report import markdown

    summary, champions = train_tables(settings, run_id, settings.db_path)  # inside the run: the working file
    return markdown(run_id, summary, champions)
