"""The LLM memory benchmark's two views (review 60 S4): with and without what it reads off a run's notes, and the
replay of the fields contract v6 lacks (tests/benchmarks/bench_llm_memory.py)."""

from __future__ import annotations

import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import llm_memory as m
from tests.benchmarks import bench_llm_memory as bench

COLUMNS = ("source_repo,source_path,commit,licence,model,params_billion,adapter,lora_rank,sharding,cpu_offload,"
           "tensor_parallel,pipeline_parallel,gpu_count,gpu_type,precision,micro_batch_size,seq_len,"
           "activation_checkpointing,other,peak_gb,metric,oom").split(",")


def _set(tmp_path, *runs: dict) -> object:
    base = dict.fromkeys(COLUMNS)
    base.update(source_repo="modelscope/ms-swift", source_path="examples/train/x.sh", tensor_parallel=1,
                pipeline_parallel=1, gpu_count=1, precision="BF16", micro_batch_size=1, seq_len=2048, peak_gb=20.0,
                oom=False, sharding="none", cpu_offload="none", activation_checkpointing="full")
    path = tmp_path / "runs.csv"
    pl.DataFrame([{**base, **r} for r in runs], schema_overrides={k: pl.String for k in ("lora_rank", "other")},
                 infer_schema_length=None).write_csv(path)
    return path


def test_the_set_read_as_logged_drops_what_the_notes_give(tmp_path):
    path = _set(tmp_path,
                {"model": "Qwen-7B", "adapter": "lora", "other": "liger kernel on; --sequence_parallel_size 2",
                 "gpu_count": 2},
                {"model": "Qwen-7B", "adapter": "none", "other": "LISA lisa_activated_layers=2; galore"})
    noted, logged = bench.job_rows(path), bench.job_rows(path, ())
    assert noted[c.LOSS_PRECISION].to_list() == ["fused", None]
    assert noted[c.ADAPTER].to_list() == ["lora", "lisa"]
    assert noted[c.CONTEXT_PARALLEL].to_list() == [2, 1]
    assert noted[c.OPTIMIZER].to_list()[1].startswith("galore")
    assert logged[c.LOSS_PRECISION].to_list() == [None, None]
    assert logged[c.ADAPTER].to_list() == ["lora", "none"]
    assert logged[c.CONTEXT_PARALLEL].to_list() == [1, 1]
    assert logged[c.OPTIMIZER].to_list() == [None, None]
    # still words (a column of nulls only would not pass the feature encoder of the night that scores them)
    assert logged.schema[c.OPTIMIZER] == logged.schema[c.LOSS_PRECISION] == pl.String
    # one value left out at a time: the others are still read
    assert bench.job_rows(path, ("adapter",))[c.ADAPTER].to_list() == ["lora", "lisa"]
    assert bench.job_rows(path, ("adapter",))[c.LOSS_PRECISION].to_list() == [None, None]


def test_the_replay_of_absent_fields_adds_the_trained_embedding_and_splits_the_experts():
    qwen = m.lookup("Qwen-7B")
    lora = m.Layout(adapter="lora", lora_rank=64, activation_checkpointing="full", seq_len=256)
    plain = m.per_gpu(qwen, lora).total_gb
    assert bench.replayed_gb(qwen, lora, "no such field", ("modules_to_save",)) == plain
    assert bench.replayed_gb(qwen, lora, "embedding + output layer also trainable (modules_to_save)", ()) == plain
    trained = bench.replayed_gb(qwen, lora, "embedding + output layer also trainable (modules_to_save)",
                                ("modules_to_save",))
    # a 16-bit copy of the embedding and the head, its gradient and two moments: 8 bytes; the step's copy above the
    # activations and logits of 256 tokens
    low = qwen.embedding_params * 8 * m.ALLOCATOR_FACTOR / m.GB
    assert low < trained - plain < low + qwen.embedding_params * 2 * m.ALLOCATOR_FACTOR / m.GB + 1e-9
    moe = m.lookup("Qwen3-30B-A3B")
    full = m.Layout(gpu_count=4, sharding="zero1", activation_checkpointing="full", seq_len=8192)
    assert bench.replayed_gb(moe, full, "EP4", ("expert_parallel",)) < m.per_gpu(moe, full).total_gb - 40
    assert bench.replayed_gb(m.lookup("Qwen-7B"), full, "EP4", ("expert_parallel",)) == m.per_gpu(qwen, full).total_gb
