"""Contract v8 through the real `ingest-job-logs` flow: a v7 warehouse upgrades in place and keeps its rows and their
identity, a job placed by ColossalAI Gemini's `auto` policy loads with `cpu_offload` `auto` (logged as the word or
under Gemini's own name), and a job logging its kernel library with `kernels` (issue 51, session 12)."""

from __future__ import annotations

import pytest

from gpucast.expectations import contract as c
from tests.conftest import write
from tests.flows.test_contract_v6 import upgraded_from
from tests.flows.test_ingest_flow import ingest, query
from tests.sample_jobs import jsonl, record

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


def test_a_v7_warehouse_upgrades_to_v8_keeps_its_rows_and_loads_auto_placement_and_kernels(home, tmp_path):
    v7 = [record(job_id="v7-1", arch="Mixtral-8x7B", gpu_count=16, pipeline_parallel=2, expert_parallel=8),
          record(job_id="v5-1", arch="gpt2-xl", gpu_count=1, sharding="zero3", cpu_offload="all"),
          record(job_id="v4-1", gpu_type="A100-80GB", gpu_count=2, time_limit_hours=4)]
    upgraded_from(home, tmp_path, v7, 7, ("kernels",))  # missing means `none` where used
    gemini = record(job_id="gemini-1", arch="gpt2-style", params_million=24_000, gpu_type="A100-40GB", gpu_count=1,
                    sharding="zero3")
    named = {k: v for k, v in gemini.items() if k != "job_id"}
    lines = jsonl({**gemini, "cpu_offload": "auto"}, {**named, "job_id": "gemini-2", "placement_policy": "AUTO"},
                  {**named, "job_id": "gemini-3", "placement_policy": "cuda"},
                  {**named, "job_id": "bad-1", "cpu_offload": "sometimes"},
                  record(job_id="fast-1", arch="Llama-2-7B", adapter="qlora", kernels="Unsloth"),
                  record(job_id="odd-1", arch="Llama-2-7B", adapter="lora", kernels="warp-drive"))
    s = ingest(write(tmp_path / "c.jsonl", lines))
    assert (s.rows_loaded, s.rows_rejected) == (5, 1)
    assert query(home, "SELECT job_id, cpu_offload FROM job_logs WHERE job_id LIKE 'gemini%' ORDER BY job_id") == [
        ("gemini-1", "auto"), ("gemini-2", "auto"), ("gemini-3", "none")]
    assert query(home, "SELECT job_id, kernels FROM job_logs WHERE job_id IN ('fast-1', 'odd-1') ORDER BY job_id") == [
        ("fast-1", "unsloth"), ("odd-1", c.UNKNOWN_WORD)]
    reasons = query(home, "SELECT reasons FROM rejected_job_logs WHERE job_id = 'bad-1'")
    assert "cpu_offload is one of none, optimizer, all, auto" in str(reasons), reasons
