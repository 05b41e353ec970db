"""Contract v6 through the real `ingest-job-logs` flow: a v5 warehouse upgrades in place and keeps its rows and their
identity, and a job logging its loss's precision (or LISA) loads with it (issue 51, session 10)."""

from __future__ import annotations

import pytest

from gpucast.expectations import contract as c
from tests.conftest import write
from tests.flows.test_ingest_flow import hashed_again, ingest, older_warehouse, query
from tests.sample_jobs import jsonl, record

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


def upgraded_from(home, tmp_path, rows: list[dict], version: int, new_columns: tuple[str, ...]) -> None:
    """`rows` loaded into a warehouse made under contract `version` (`older_warehouse`), then sent again after the
    upgrade: every one is a duplicate (the same records keep their identity, hashed again: `hashed_again`), the columns
    the later versions added empty (missing means the field's default where it is used)."""
    ingest(write(tmp_path / "a.jsonl", jsonl(*rows)))
    stored = older_warehouse(home, version)
    s = ingest(write(tmp_path / "b.jsonl", jsonl(*rows)))
    assert (s.rows_read, s.rows_loaded, s.rows_duplicate) == (len(rows), 0, len(rows))
    assert query(home, f"SELECT job_id, {', '.join(new_columns)} FROM job_logs ORDER BY job_id") == [
        (j, *[None] * len(new_columns)) for j, _ in stored]
    hashed_again(home, stored)


def test_a_v5_warehouse_upgrades_to_v6_keeps_its_rows_and_loads_the_loss_precision(home, tmp_path):
    v5 = [record(job_id="v5-1", arch="meta-llama/Llama-3.1-8B", gpu_count=8, sharding="zero3", adapter="lora",
                 lora_rank=16), record(job_id="v4-1", gpu_type="A100-80GB", gpu_count=2, time_limit_hours=4)]
    upgraded_from(home, tmp_path, v5, 5, ("loss_precision",))  # missing means fp32 where used
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
