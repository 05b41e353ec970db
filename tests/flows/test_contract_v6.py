"""Contract v6 through the real `ingest-job-logs` flow: a v5 warehouse upgrades in place and keeps its rows and their
identity, and a job logging its loss's precision (or LISA) loads with it (issue 51, session 10)."""

from __future__ import annotations

import duckdb
import pytest

from gpucast.expectations import contract as c
from tests.conftest import write
from tests.flows.test_ingest_flow import ingest, query
from tests.sample_jobs import jsonl, record

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


def older_warehouse(home, version: int) -> list[tuple]:
    """Turn the warehouse under `home` into one made under contract `version`: its records' hashes checked against
    that version's definition (frozen here), the columns later versions added dropped. Returns (job_id, record_hash)."""
    block = lambda names: f"CAST(to_json(struct_pack({', '.join(names)})) AS VARCHAR)"  # noqa: E731
    later = "".join(f" || CASE WHEN {' OR '.join(f'{n} IS NOT NULL' for n in c.ADDED_BY_VERSION[v])} THEN "
                    f"{block(c.ADDED_BY_VERSION[v])} ELSE '' END" for v in range(2, version + 1))
    old_hash = f"md5({block(c.V1_COLUMNS)}{later})"
    with duckdb.connect(str(home / "warehouse.duckdb")) as con:
        con.execute("DROP TABLE schema_applied")
        stored = con.execute("SELECT job_id, record_hash FROM job_logs ORDER BY job_id").fetchall()
        assert con.execute(f"SELECT job_id, {old_hash} FROM job_logs ORDER BY job_id").fetchall() == stored
        for table in ("job_log_records", "job_logs"):
            for v in range(version + 1, c.CONTRACT_VERSION + 1):
                for name in c.ADDED_BY_VERSION[v]:
                    con.execute(f"ALTER TABLE {table} DROP COLUMN {name}")
    return stored


def test_a_v5_warehouse_upgrades_to_v6_keeps_its_rows_and_loads_the_loss_precision(home, tmp_path):
    v5 = [record(job_id="v5-1", arch="meta-llama/Llama-3.1-8B", gpu_count=8, sharding="zero3", adapter="lora",
                 lora_rank=16), record(job_id="v4-1", gpu_type="A100-80GB", gpu_count=2, time_limit_hours=4)]
    ingest(write(tmp_path / "a.jsonl", jsonl(*v5)))
    stored = older_warehouse(home, 5)
    s = ingest(write(tmp_path / "b.jsonl", jsonl(*v5)))
    assert (s.rows_read, s.rows_loaded, s.rows_duplicate) == (2, 0, 2)  # the same records, still one each
    assert query(home, "SELECT job_id, record_hash, loss_precision FROM job_logs ORDER BY job_id") == [
        (j, h, None) for j, h in stored]  # kept, with their identity; missing means fp32 where used
    new = [record(job_id="liger-1", arch="Qwen2.5-7B", gpu_count=4, sharding="zero3",
                  loss_precision="liger"),
           record(job_id="lisa-1", arch="Qwen2.5-7B", adapter="LISA", loss_precision="bf16"),
           record(job_id="odd-1", arch="Qwen2.5-7B", gpu_count=2, sharding="fsdp", loss_precision="sparsemax")]
    s = ingest(write(tmp_path / "c.jsonl", jsonl(*new)))
    assert (s.rows_loaded, s.rows_rejected) == (3, 0)
    assert query(home, "SELECT job_id, adapter, loss_precision FROM job_logs WHERE job_id IN ('liger-1', 'lisa-1', "
                       "'odd-1') ORDER BY job_id") == [("liger-1", None, "fused"), ("lisa-1", "lisa", "half"),
                                                       ("odd-1", None, c.UNKNOWN_WORD)]
    assert query(home, "SELECT count(*) FROM job_logs") == [(5,)]
