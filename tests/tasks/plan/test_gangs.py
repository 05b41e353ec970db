"""A multi-GPU job reserved as one gang, on one node when it fits (tasks/plan/gangs.py, issue 51 item 6): an 8-GPU
job on nodes of 8 and of 4, the inventory's `gpus_per_node`, the pending jobs' starts, each worked out by hand."""

from __future__ import annotations

from datetime import date

import numpy as np
import polars as pl
import pytest

from gpucast.records.inventory import Inventory, InventoryError, Owned, load_inventory
from gpucast.tasks.plan import gangs
from gpucast.tasks.plan.starts import RUNNING_SCHEMA, fcfs, job_starts

START = date(2026, 11, 23)


def _place(per_node: int, held: list[float], counts: list[int], hours: list[float], gpus: int = 16):
    return gangs.fcfs_nodes(np.array(held), gpus, per_node, np.array(hours, dtype=float), np.array(counts))


def test_an_8_gpu_job_on_nodes_of_8_waits_for_one_whole_node_not_8_gpus_spread_over_two():
    # 12 GPUs: a node of 8 and a node of 4; a running job holds one GPU of the 8-GPU node for 5 h
    placed, free = _place(8, [5.0], [8], [3.0], gpus=12)
    # 11 GPUs are free now, but only the node of 8 holds the gang: it waits 5 h for that node
    assert placed[0].start == 5.0 and placed[0].nodes == (0,) and placed[0].one_node
    assert np.sort(free).tolist() == [0.0] * 4 + [8.0] * 8
    # without nodes (one pool) the same job would start now on 8 of the 11 free GPUs, over both nodes
    starts, _ = fcfs(np.array([5.0]), 12, np.array([3.0]), np.array([8]))
    assert starts[0] == 0.0


def test_an_8_gpu_job_on_nodes_of_4_spans_the_two_nodes_free_earliest():
    # 16 GPUs in 4 nodes of 4; running jobs hold two GPUs of node 0 (the first nodes: schedulers pack)
    placed, _ = _place(4, [6.0, 2.0], [8], [1.0])
    assert not placed[0].one_node and placed[0].nodes == (1, 2) and placed[0].start == 0.0  # two whole free nodes
    # a second 8-GPU job: node 3 (free) and node 1 (free at 1 h), not node 0 (busy to 6 h)
    placed, _ = _place(4, [6.0, 2.0], [8, 8], [1.0, 1.0])
    assert placed[1].nodes == (1, 3) and placed[1].start == 1.0
    assert gangs.nodes_needed(8, 4) == 2 and gangs.nodes_needed(8, 8) == 1 and gangs.nodes_needed(8, None) is None


def test_a_small_gang_takes_the_fullest_node_and_leaves_a_whole_node_for_the_big_one():
    # 2 nodes of 8; node 0 has one GPU busy for 10 h: a 4-GPU job goes there (best fit), so the 8-GPU job starts now
    placed, _ = _place(8, [10.0], [4, 8], [2.0, 2.0])
    assert placed[0].nodes != placed[1].nodes
    assert [p.start for p in placed] == [0.0, 0.0]
    # a job larger than every GPU owned never starts
    never, _ = _place(8, [], [32], [1.0])
    assert np.isnan(never[0].start) and never[0].nodes == ()


def test_the_inventory_reads_gpus_per_node_and_refuses_a_bad_one(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text("queues:\n  q:\n    - gpu_type: H100-80GB\n      count: 16\n      gpus_per_node: 8\n")
    assert load_inventory(path).owned[0].gpus_per_node == 8
    path.write_text("queues:\n  q:\n    - gpu_type: H100-80GB\n      count: 16\n      gpus_per_node: 0\n")
    with pytest.raises(InventoryError, match="inventory.yaml:5: gpus_per_node must be a whole number"):
        load_inventory(path)


def _jobs(rows: list[tuple]) -> pl.DataFrame:
    """(job_id, gpu_count, mem_gb, hours) in queue q, all submitted before the plan."""
    return pl.DataFrame([(j, "q", START, n, m, h, h) for j, n, m, h in rows],
                        schema={"job_id": pl.String, "queue": pl.String, "day": pl.Date, "gpu_count": pl.Int64,
                                "mem_gb": pl.Float64, "hours_p50": pl.Float64, "hours_p90": pl.Float64}, orient="row")


def test_job_starts_reserve_the_gang_on_one_node_of_the_inventory():
    inventory = Inventory("test", (Owned("q", "A100-80GB", 16, 80.0, gpus_per_node=8),))
    # a 1-GPU job of 5 h first, then an 8-GPU one: node 0 keeps 7 free GPUs, the gang takes node 1 at once
    got = job_starts(_jobs([("a", 1, 20.0, 5.0), ("b", 8, 60.0, 3.0), ("c", 8, 60.0, 1.0)]),
                     pl.DataFrame(schema=RUNNING_SCHEMA), inventory, START)
    waits = dict(zip(got.jobs["job_id"], got.jobs["expected_wait_hours"], strict=True))
    # c waits for a whole node: node 1 frees at 3 h, node 0 at 5 h
    assert waits == {"a": 0.0, "b": 0.0, "c": 3.0}

