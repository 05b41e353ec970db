"""Contract v7 through the real `ingest-job-logs` flow: a v6 warehouse upgrades in place and keeps its rows and their
identity, a job logging its expert-parallel size or the modules it trains in full loads with them, and an
expert-parallel size that does not divide the data-parallel x context ranks is quarantined with its rule named
(issue 51, session 11)."""

from __future__ import annotations

import pytest

from gpucast.expectations import contract as c
from tests.conftest import write
from tests.flows.test_contract_v6 import upgraded_from
from tests.flows.test_ingest_flow import ingest, query
from tests.sample_jobs import jsonl, record

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


def test_a_v6_warehouse_upgrades_to_v7_keeps_its_rows_and_loads_experts_and_trained_modules(home, tmp_path):
    v6 = [record(job_id="v6-1", arch="Qwen2.5-7B", gpu_count=4, sharding="zero3", loss_precision="liger"),
          record(job_id="v5-1", arch="meta-llama/Llama-3.1-8B", gpu_count=8, adapter="lora", lora_rank=16),
          record(job_id="v4-1", gpu_type="A100-80GB", gpu_count=2, time_limit_hours=4)]
    upgraded_from(home, tmp_path, v6, 6, ("expert_parallel", "trained_modules"))  # missing: 1 / none where used
    new = [record(job_id="moe-1", arch="Mixtral-8x7B", gpu_count=16, pipeline_parallel=2, expert_parallel=8),
           record(job_id="mts-1", arch="Qwen-7B", adapter="lora", lora_rank=64,
                  trained_modules="['embed_tokens', 'lm_head']"),
           record(job_id="odd-1", arch="Qwen-7B", adapter="lora", trained_modules="score"),
           record(job_id="bad-1", arch="Mixtral-8x7B", gpu_count=8, pipeline_parallel=2, expert_parallel=8)]
    s = ingest(write(tmp_path / "c.jsonl", jsonl(*new)))
    assert (s.rows_loaded, s.rows_rejected) == (3, 1)
    assert query(home, "SELECT job_id, expert_parallel, trained_modules FROM job_logs WHERE job_id IN ('moe-1', "
                       "'mts-1', 'odd-1') ORDER BY job_id") == [("moe-1", 8, None), ("mts-1", None, "embeddings_and_head"),
                                                                ("odd-1", None, c.UNKNOWN_WORD)]
    reasons = query(home, "SELECT reasons FROM rejected_job_logs WHERE job_id = 'bad-1'")
    assert "expert_parallel x pipeline_parallel must divide gpu_count (got 8 x 2 = 16 on 8 GPUs)" in str(reasons), reasons
    assert query(home, "SELECT count(*) FROM job_logs") == [(6,)]
