"""Contract v5 through the real `ingest-job-logs` flow: a v4 warehouse upgrades in place, its records keep their
identity, a job on many GPUs loads with its layout, and a bad layout is quarantined with the rule named (issue 51)."""

from __future__ import annotations

import pytest

from gpucast.expectations import contract as c
from tests.conftest import write
from tests.flows.test_ingest_flow import hashed_again, ingest, older_warehouse, query
from tests.sample_jobs import jsonl, record

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


def test_a_v4_warehouse_upgrades_to_v5_and_loads_jobs_on_many_gpus(home, tmp_path):
    v4 = record(job_id="v4-1", gpu_type="A100-80GB", gpu_count=2, arch="resnet50", time_limit_hours=4)
    ingest(write(tmp_path / "a.jsonl", jsonl(v4)))
    stored = older_warehouse(home, 4)
    s = ingest(write(tmp_path / "b.jsonl", jsonl(v4)))
    assert (s.rows_read, s.rows_loaded, s.rows_duplicate) == (1, 0, 1)  # the same record, still one
    hashed_again(home, stored)
    llm = record(job_id="llm-1", status="PENDING", arch="meta-llama/Llama-3.1-8B", gpu_count=8, tp=2,
                 zero_stage=3, gradient_checkpointing=True, peft_type="LORA", lora_r=16, micro_batch_size=2,
                 precision="bf16", cpu_offload="none")
    bad = [record(job_id="bad-1", tensor_parallel=3, gpu_count=8), record(job_id="bad-2", lora_rank=0),
           record(job_id="odd-1", sharding="megashard")]
    s = ingest(write(tmp_path / "c.jsonl", jsonl(llm, *bad)))
    assert (s.rows_loaded, s.rows_rejected) == (2, 2)
    assert query(home, "SELECT tensor_parallel, sharding, activation_checkpointing, adapter, lora_rank, micro_batch_size "
                       "FROM job_logs WHERE job_id = 'llm-1'") == [(2, "zero3", "full", "lora", 16, 2)]
    assert query(home, "SELECT sharding FROM job_logs WHERE job_id = 'odd-1'") == [(c.UNKNOWN_WORD,)]
    reasons = dict(query(home, "SELECT job_id, reason_text FROM rejected_job_logs"))
    assert "must divide gpu_count (got 3 x 1 x 1 = 3 on 8 GPUs)" in reasons["bad-1"], reasons
    assert reasons["bad-2"].startswith("lora_rank must be > 0"), reasons
