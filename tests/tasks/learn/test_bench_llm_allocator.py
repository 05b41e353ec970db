"""The caching allocator model and the long-run replay of tests/benchmarks/bench_llm_allocator.py (session 19): the
allocator reuses, splits and merges cached blocks as torch 2.1's does, a run of one length reserves no more after its
first step, a longer sample than any before makes new segments, and the long run built from two traced lengths
replays exactly what tracing every step does."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpucast.tasks.learn import llm_memory as m
from tests.benchmarks import bench_llm_allocator as bench

MIB = 1 << 20
TINY = replace(m.lookup("Qwen-7B"), hidden=256, layers=2, heads=2, kv_heads=2, intermediate=512, vocab=150_000)


def test_a_freed_block_serves_a_smaller_request_and_a_larger_one_makes_a_segment():
    a = bench.Allocator()
    a.release(a.malloc(30 * MIB))
    a.malloc(20 * MIB)  # split off the cached 30 MiB segment
    assert a.reserved == 30 * MIB
    a.malloc(40 * MIB)  # nothing cached is large enough
    assert a.reserved == 70 * MIB
    assert a.allocated == 60 * MIB


def test_split_blocks_merge_back_when_both_are_freed():
    a = bench.Allocator()
    a.release(a.malloc(30 * MIB))
    x, y = a.malloc(10 * MIB), a.malloc(20 * MIB)  # the segment's two halves
    assert a.reserved == 30 * MIB
    a.release(x)
    a.release(y)
    a.malloc(30 * MIB)  # whole again: no new segment
    assert a.reserved == 30 * MIB


@pytest.mark.parametrize("size, segment", [(100, 2 * MIB), (3 * MIB, 20 * MIB), (11 * MIB + 1, 12 * MIB)])
def test_segment_sizes_follow_torch_2_1(size, segment):
    a = bench.Allocator()
    a.malloc(size)
    assert a.reserved == segment


def test_one_length_reserves_nothing_more_after_its_first_step_and_a_new_longest_does():
    steady = bench.replay(bench.trace_steps(TINY, [300, 300, 300]))
    assert steady[1][1] == steady[2][1] == steady[0][1]
    growing = bench.replay(bench.trace_steps(TINY, [200, 300, 250, 301]))
    reserved = [r for _, r in growing]
    assert reserved[1] > reserved[0] and reserved[3] > reserved[2]
    # the allocated peak follows the step's own length: the reserved one grows beyond it
    assert growing[3][1] - growing[3][0] > steady[2][1] - steady[2][0]


def test_the_long_run_from_two_traced_lengths_replays_what_tracing_every_step_does():
    lengths = [200, 350, 120, 351, 300, 352, 90]
    direct = bench.replay(bench.trace_steps(TINY, lengths))
    composed = bench.run(TINY, lengths, at=tuple(range(1, len(lengths) + 1)), traced=(100, 200))
    assert [(round(p.allocated_gb * 1e9), round(p.reserved_gb * 1e9)) for p in composed] == [(a, r) for a, r in direct]
