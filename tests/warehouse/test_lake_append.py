"""Rows move once (issue 52, item 3): a run's records are appended to the lake's day partitions as files of their
own; a day written before is not rewritten unless it is stale (then it is rewritten whole, as before)."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from gpucast.flows.settings import Settings
from gpucast.warehouse import load
from gpucast.warehouse.db import connect_writer


def add_records(con, run_id: str, first_arrival: int, days: list[str]) -> None:
    """One record per day, as a load would leave it (only the columns the lake's bookkeeping reads filled)."""
    con.execute(
        """INSERT INTO job_log_records (job_id, submitted_at, status, record_hash, arrival, source_file, source_row,
                                        ingest_run_id, loaded_at)
           SELECT ? || '-' || i, CAST(d AS TIMESTAMPTZ) + INTERVAL 1 HOUR, 'COMPLETED', md5(? || i), ? + i,
                  'f.jsonl', i, ?, ?
           FROM (SELECT unnest(?::DATE[]) AS d, generate_subscripts(?::DATE[], 1) AS i)""",
        [run_id, run_id, first_arrival, run_id, datetime.now(UTC), days, days])


def files(lake) -> dict[str, list[str]]:
    return {p.name: sorted(f.name for f in p.iterdir()) for p in sorted(lake.iterdir())}


def test_a_run_appends_its_records_and_leaves_the_days_written_before(tmp_path):
    storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path)}).storage
    lake = storage.lake_dir
    with connect_writer(storage) as con:
        add_records(con, "run-a", 0, ["2026-11-01", "2026-11-02"])
        assert load.refresh_lake(con, lake, "run-a") == ["2026-11-01", "2026-11-02"]
        first = lake / "submitted_date=2026-11-01" / files(lake)["submitted_date=2026-11-01"][0]
        written = first.stat().st_mtime_ns, first.stat().st_ino
        add_records(con, "run-b", 10, ["2026-11-01", "2026-11-03"])  # one day seen before, one new
        assert load.refresh_lake(con, lake, "run-b") == ["2026-11-01", "2026-11-03"]
        assert (first.stat().st_mtime_ns, first.stat().st_ino) == written  # not rewritten: rows move once
        assert files(lake)["submitted_date=2026-11-01"] == ["run-run-a-0.parquet", "run-run-b-0.parquet"]
        assert load.refresh_lake(con, lake, "run-b") == ["2026-11-01", "2026-11-03"]  # again: the same files
        assert files(lake)["submitted_date=2026-11-01"] == ["run-run-a-0.parquet", "run-run-b-0.parquet"]
        rows = pl.read_parquet(lake / "**" / "*.parquet", hive_partitioning=True)
        assert rows.height == 4 and sorted(rows["arrival"].to_list()) == [1, 2, 11, 12]
        assert load.stale_lake_days(con, lake) == []

        # a stale day (its partition deleted by hand) is rewritten whole by the next run, with every record
        for f in (lake / "submitted_date=2026-11-01").iterdir():
            f.unlink()
        (lake / "submitted_date=2026-11-01").rmdir()
        add_records(con, "run-c", 20, ["2026-11-02"])
        assert load.refresh_lake(con, lake, "run-c") == ["2026-11-01", "2026-11-02"]
        assert files(lake)["submitted_date=2026-11-01"] == ["part-0.parquet"]
        assert files(lake)["submitted_date=2026-11-02"] == ["run-run-a-0.parquet", "run-run-c-0.parquet"]
        assert pl.read_parquet(lake / "**" / "*.parquet").height == 5 and load.stale_lake_days(con, lake) == []
