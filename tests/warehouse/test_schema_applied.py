"""The DDL is applied once per warehouse and gpucast version, not on every writer connection."""

from __future__ import annotations

import duckdb

from gpucast.flows.settings import Settings
from gpucast.warehouse.db import apply_schema, connect_writer
from gpucast.warehouse.schema import schema_fingerprint


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
    record of both tables hashed again when the schema is next applied, in steps of `REHASH_BATCH` arrivals, and every
    lake day marked stale (its files hold the old hashes); applied again, nothing changes and the lake's record stays."""
    from gpucast.warehouse import schema
    from tests.warehouse.test_lake_append import add_records

    monkeypatch.setattr(schema, "REHASH_BATCH", 2)
    storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path)}).storage
    with connect_writer(storage) as con:
        add_records(con, "run-a", 0, ["2026-11-01", "2026-11-02", "2026-11-02", "2026-11-03", "2026-11-04"])
        con.execute("INSERT INTO job_logs SELECT * FROM job_log_records WHERE arrival % 2 = 1")
        con.execute("INSERT INTO lake_partitions SELECT DISTINCT CAST(submitted_at AS DATE), 1, 1, now() "
                    "FROM job_log_records")
        assert [s[0] for s in schema.rehash_steps(con)] == ["job_log_records"] * 3 + ["job_logs"] * 3
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
           "capacity_plan": ["expected_gpu_hours_p50_of_total", "gpus_total_p50_of_total"]}
    with connect_writer(storage) as con:
        for table, columns in new.items():
            for column in columns:
                con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        con.execute("INSERT INTO capacity_plan (plan_run_id, day, queue, gpu_type, gpus_needed_p50, "
                    "gpus_needed_expected_p50, gpus_total_p50, gpus_total_p90, gpus_total_p90_of_total, shortfall_total_p90) "
                    "VALUES ('p1', '2026-11-02', 'q', 'A100-80GB', 1, 2, 3, 9, 7, 0)")
        con.execute("UPDATE schema_applied SET fingerprint = 'an older gpucast'")
    with connect_writer(storage) as con:
        for table, columns in new.items():
            have = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ?",
                                              [table]).fetchall()}
            assert set(columns) <= have, table
        plan = con.sql("SELECT * FROM capacity_plan").pl()
    assert plan["gpus_total_p50_of_total"].to_list() == [None]
    day = by_day(plan).row(0, named=True)
    assert (day["gpus_total_p50"], day["gpus_site_p50"], day["gpus_site_p90"]) == (3, 3, 7)
