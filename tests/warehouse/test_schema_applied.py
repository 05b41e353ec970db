"""The DDL is applied once per warehouse and gpucast version, not on every writer connection."""

from __future__ import annotations

import duckdb

from gpucast.flows.settings import Settings
from gpucast.warehouse.db import apply_schema, connect_writer
from gpucast.warehouse.schema import schema_fingerprint
from tests.conftest import key_latest


def test_the_schema_is_applied_by_the_first_writer_and_again_only_when_the_ddl_changed(tmp_path):
    storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path)}).storage
    with connect_writer(storage) as con:  # a new warehouse: applied, and recorded
        assert con.execute("SELECT fingerprint FROM schema_applied").fetchall() == [(schema_fingerprint(),)]
        assert apply_schema(con) is False  # the same DDL: nothing to do
        con.execute("DROP VIEW pending_forecasts")
        con.execute("UPDATE schema_applied SET fingerprint = 'an older gpucast'")
    with connect_writer(storage) as con:  # another DDL recorded: applied again, the view is back
        assert con.execute("SELECT count(*) FROM pending_forecasts").fetchone() == (0,)
        assert con.execute("SELECT fingerprint FROM schema_applied").fetchall() == [(schema_fingerprint(),)]
    with duckdb.connect(str(storage.db_path)) as con:  # a warehouse made before the record: no table at all
        con.execute("DROP TABLE schema_applied")
        con.execute("DROP VIEW pending_forecasts")
    with connect_writer(storage) as con:
        assert con.execute("SELECT count(*) FROM pending_forecasts").fetchone() == (0,)


def test_records_an_older_gpucast_hashed_otherwise_are_hashed_again_step_by_step_and_the_lake_marked_stale(
        tmp_path, monkeypatch):
    """Issue 52, session 13: the record hash changed its text. A warehouse whose records carry other hashes gets every
    record hashed again when the schema is next applied, in steps of `REHASH_BATCH` arrivals, and every lake day marked
    stale (its files hold the old hashes); applied again, nothing changes and the lake's record stays. (`job_logs`, a
    view of the records since session 15, shows their hashes: nothing of its own to hash.)"""
    from gpucast.warehouse import schema
    from tests.warehouse.test_lake_append import add_records

    monkeypatch.setattr(schema, "REHASH_BATCH", 2)
    storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path)}).storage
    with connect_writer(storage) as con:
        add_records(con, "run-a", 0, ["2026-11-01", "2026-11-02", "2026-11-02", "2026-11-03", "2026-11-04"])
        key_latest(con, "arrival % 2 = 1")
        con.execute("INSERT INTO lake_partitions SELECT DISTINCT CAST(submitted_at AS DATE), 1, 1, now() "
                    "FROM job_log_records")
        assert [s[0] for s in schema.rehash_steps(con)] == ["job_log_records"] * 3
        con.execute("UPDATE schema_applied SET fingerprint = 'an older gpucast'")
    everywhere = f"SELECT count(*) FILTER (WHERE record_hash = {schema.RECORD_HASH}), count(*) FROM"
    with connect_writer(storage) as con:
        assert con.execute(f"{everywhere} job_log_records").fetchall() == [(5, 5)]
        assert con.execute(f"{everywhere} job_logs").fetchall() == [(3, 3)]
        assert con.execute("SELECT count(*) FROM lake_partitions").fetchall() == [(0,)]
        con.execute("INSERT INTO lake_partitions VALUES ('2026-11-01', 1, 1, now())")
        assert sum(schema.rehash_stored(con, *step) for step in schema.rehash_steps(con)) == 0
        assert con.execute("SELECT count(*) FROM lake_partitions").fetchall() == [(1,)]


def test_a_warehouse_from_before_the_site_p50_gains_its_columns_and_its_old_plan_reads_the_queues_sum(tmp_path):
    """Session 14 (issue 53 item 3): the columns of the site's P50 are added to a warehouse an older gpucast made
    (`ALTER TABLE ... ADD COLUMN IF NOT EXISTS` in schema.sql, applied again on the changed fingerprint); the rows it
    recorded read them as null, and their plan's `gpus_site_p50` is the queues' P50s summed, as before."""
    from gpucast.tasks.plan.arrivals import by_day

    storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path)}).storage
    new = {"demand_forecast": ["gpu_hours_p50_of_total"], "plan_scenarios": ["gpus_site_p50", "gpus_unplaceable"],
           "capacity_unplaceable": ["first_day", "hours_p90"],
           "capacity_plan": ["expected_gpu_hours_p50_of_total", "gpus_total_p50_of_total"]}
    with connect_writer(storage) as con:
        for table, columns in new.items():
            for column in columns:
                con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        con.execute("INSERT INTO capacity_plan (plan_run_id, day, queue, gpu_type, gpus_needed_p50, "
                    "gpus_needed_expected_p50, gpus_total_p50, gpus_total_p90, gpus_total_p90_of_total, shortfall_total_p90) "
                    "VALUES ('p1', '2026-11-02', 'q', 'A100-80GB', 1, 2, 3, 9, 10, 0)")
        con.execute("UPDATE schema_applied SET fingerprint = 'an older gpucast'")
    with connect_writer(storage) as con:
        for table, columns in new.items():
            have = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ?",
                                              [table]).fetchall()}
            assert set(columns) <= have, table
        plan = con.sql("SELECT * FROM capacity_plan").pl()
    assert plan["gpus_total_p50_of_total"].to_list() == [None]
    day = by_day(plan).row(0, named=True)
    assert (day["gpus_total_p50"], day["gpus_site_p50"], day["gpus_site_p90"]) == (3, 3, 10)


def test_an_older_warehouses_job_logs_table_becomes_the_keys_of_a_view_holding_the_same_rows(tmp_path):
    """Issue 52, session 15: `job_logs` was a table holding each job's latest record a second time, every column; it is
    now a view over `job_log_records` by the keys in `job_logs_latest`. A warehouse of an older gpucast gets its table
    turned into those keys when the schema is next applied (`schema.latest_keys`): the view then holds the table's rows,
    every column, in its column order; a latest row whose record its history lacks (a warehouse changed by hand) is put
    back into the history, not lost; the keys are NOT NULL as schema.sql makes them; applied again, nothing changes."""
    from gpucast.warehouse.schema import RECORD_HASH

    storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path)}).storage
    with connect_writer(storage) as con:
        con.execute("""INSERT INTO job_log_records (job_id, submitted_at, updated_at, status, record_hash, arrival,
                                                    source_file, source_row, ingest_run_id, loaded_at)
                       SELECT job, TIMESTAMPTZ '2026-11-01 00:00+00', TIMESTAMPTZ '2026-11-01 00:00+00' + to_hours(hour),
                              status, '', arrival, 'f.jsonl', arrival, 'run-a', now()
                       FROM (VALUES ('a', 'RUNNING', 2, 1), ('a', 'COMPLETED', 5, 2), ('a', 'RUNNING', 3, 3),
                                    ('b', 'PENDING', 0, 4), ('c', 'FAILED', 1, 5)) t(job, status, hour, arrival)""")
        con.execute(f"UPDATE job_log_records SET record_hash = {RECORD_HASH}")  # as a load hashes (none hashed again)
        key_latest(con)  # a: its record of 05:00 (arrival 2), b: 4, c: 5
        # what an older gpucast left: `job_logs` a table, its job `d` missing from the history
        con.execute("CREATE TABLE job_logs_table AS SELECT * FROM job_logs")
        con.execute("INSERT INTO job_logs_table SELECT * REPLACE ('d' AS job_id, 6 AS arrival) FROM job_logs WHERE job_id = 'c'")
        con.execute(f"UPDATE job_logs_table SET record_hash = {RECORD_HASH}")
        con.execute("DROP VIEW job_logs")
        con.execute("DROP TABLE job_logs_latest")
        con.execute("ALTER TABLE job_logs_table RENAME TO job_logs")
        con.execute("UPDATE schema_applied SET fingerprint = 'an older gpucast'")
        held = con.execute("SELECT * FROM job_logs ORDER BY arrival").fetchall()
        columns = con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'job_logs' "
                              "ORDER BY column_index").fetchall()
    assert [(r[0], r[columns.index(("arrival", "BIGINT"))]) for r in held] == [("a", 2), ("b", 4), ("c", 5), ("d", 6)]
    with connect_writer(storage) as con:
        assert con.execute("SELECT table_type FROM information_schema.tables WHERE table_name = 'job_logs'").fetchall() == [
            ("VIEW",)]
        assert con.execute("SELECT * FROM job_logs ORDER BY arrival").fetchall() == held
        assert con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'job_logs' "
                           "ORDER BY column_index").fetchall() == columns
        assert con.execute("SELECT job_id, arrival, latest_at FROM job_logs_latest ORDER BY arrival").fetchall() == [
            (j, n, con.execute("SELECT TIMESTAMPTZ '2026-11-01 00:00+00' + to_hours(?)", [h]).fetchone()[0])
            for j, n, h in (("a", 2, 5), ("b", 4, 0), ("c", 5, 1), ("d", 6, 1))]
        assert con.execute("SELECT count(*) FROM job_log_records").fetchone() == (6,)  # d's record put back
        assert con.execute("SELECT bool_or(is_nullable) FROM duckdb_columns() WHERE table_name = 'job_logs_latest'"
                           ).fetchone() == (False,)
        assert apply_schema(con) is False
        assert con.execute("SELECT count(*) FROM job_logs").fetchone() == (4,)
