"""Read-only views for people: `gpucast status` and `gpucast sql`."""

from __future__ import annotations

import polars as pl

from gpucast.warehouse.db import connect_reader
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


def _table(df: pl.DataFrame) -> str:
    with pl.Config(tbl_rows=200, tbl_cols=30, tbl_width_chars=200, fmt_str_lengths=80,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        return str(df)


def status_text(settings: Settings, limit: int = 10) -> str:
    con = connect_reader(settings.db_path)
    try:
        runs = con.sql(RECENT_RUNS, params=[limit]).pl()
        failures = con.sql(FAILURES, params=[limit]).pl()
        totals = con.sql(
            "SELECT status, count(*) AS jobs FROM job_logs GROUP BY ALL ORDER BY jobs DESC"
        ).pl()
    finally:
        con.close()
    lines = [f"Recent ingest runs ({settings.db_path}):", _table(runs)]
    if failures.height:
        lines += ["", "Failed runs and rejected files:"]
        for row in failures.iter_rows(named=True):
            what = f"{row['source_file']}: {row['reason']}" if row["source_file"] else row["message"]
            lines.append(f"- {row['run_id']}: {what}")
    lines += ["", "Jobs in job_logs by status:", _table(totals)]
    return "\n".join(lines)


def run_query(settings: Settings, query: str, fmt: str = "table") -> str:
    """Run one read-only query; the connection cannot write, ATTACH, or read other files."""
    con = connect_reader(settings.db_path)
    try:
        df = con.sql(query).pl()
    finally:
        con.close()
    if fmt == "csv":
        return df.write_csv()
    if fmt == "json":
        return df.write_json() + "\n"
    return _table(df) + "\n"
