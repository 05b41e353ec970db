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
