"""FSDP training steps traced for their per-GPU peak on a fake process group, on CPU (tasks/learn/llm_trace.py, issue 51
item 4): a small decoder of the LLM table's shape, sharding that divides what each rank holds, the cache."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpucast.tasks.learn import llm_memory as m
from gpucast.tasks.learn import llm_trace as t

# a tiny Llama-shaped decoder: 2 blocks of hidden 256, grouped attention, gated MLP, a 4,096-entry vocabulary
TINY = replace(m.lookup("Llama-3.1-8B"), name="tiny", params=0.0, hidden=256, layers=2, heads=4, kv_heads=2,
               intermediate=704, vocab=4096)


def test_a_traced_fsdp_step_holds_about_16_bytes_a_parameter_over_the_ranks_plus_activations(tmp_path):
    one = t.trace_peak(TINY, data_parallel=1, micro_batch_size=1, seq_len=64, cache=tmp_path)
    eight = t.trace_peak(TINY, data_parallel=8, micro_batch_size=1, seq_len=64, cache=tmp_path)
    assert not one.cached and one.cpu_seconds > 0
    params = 2 * 256 * 4096 + 2 * (2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 704)  # embedding, head, 2 blocks
    # fp32 parameters, sharded: one rank of 8 holds 1/8 of them; the whole state (parameters, gradients, AdamW's
    # moments and the step's temporaries) shrinks with the ranks
    assert one.parts_gb["Sharded Param"] == pytest.approx(params * 4 / 1e9, rel=0.02)
    assert eight.parts_gb["Sharded Param"] == pytest.approx(params * 4 / 8 / 1e9, rel=0.02)
    assert params * 16 / 1e9 <= one.total_gb and eight.total_gb < one.total_gb / 3
    # the activations grow with the sequence
    longer = t.trace_peak(TINY, data_parallel=8, micro_batch_size=1, seq_len=2048, cache=tmp_path)
    assert longer.total_gb > eight.total_gb + 2048 * 4096 * 4 / 1e9  # at least the fp32 logits more


def test_a_configuration_traced_once_is_read_from_the_cache(tmp_path):
    first = t.trace_peak(TINY, data_parallel=2, micro_batch_size=1, seq_len=32, cache=tmp_path)
    again = t.trace_peak(TINY, data_parallel=2, micro_batch_size=1, seq_len=32, cache=tmp_path)
    assert again.cached and again.cpu_seconds == 0.0 and again.total_gb == first.total_gb
    assert len(list(tmp_path.glob("fsdp-*.json"))) == 1
    other = t.trace_peak(TINY, data_parallel=2, micro_batch_size=1, seq_len=32, checkpointing=False, cache=tmp_path)
    assert not other.cached and len(list(tmp_path.glob("fsdp-*.json"))) == 2
    # a half-written entry (a trace killed before the atomic write existed) is traced again and replaced
    entry = next(p for p in tmp_path.glob("fsdp-*.json") if p.read_text().find('"checkpointing": false') >= 0)
    entry.write_text('{"config": {"arch"')
    again = t.trace_peak(TINY, data_parallel=2, micro_batch_size=1, seq_len=32, checkpointing=False, cache=tmp_path)
    assert not again.cached and again.total_gb == other.total_gb
    assert t.trace_peak(TINY, data_parallel=2, micro_batch_size=1, seq_len=32, checkpointing=False, cache=tmp_path).cached
