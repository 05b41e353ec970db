"""Small rules of training and scoring, without Prefect: when trees are compiled, how pending jobs are partitioned."""

from __future__ import annotations

import polars as pl
import pytest

from gpucast.tasks.learn.score import partitions
from gpucast.tasks.learn.train import COMPILE_MIN_PENDING, compile_trees_for


def test_trees_are_compiled_from_the_minimum_pending_queue_on():
    assert compile_trees_for(COMPILE_MIN_PENDING) is True
    assert compile_trees_for(COMPILE_MIN_PENDING - 1) is False
    assert compile_trees_for(0) is False


@pytest.mark.parametrize(("rows", "parts", "sizes"), [
    (10, 4, [3, 3, 3, 1]),  # ceil(10 / 4) = 3 a partition, the last one shorter
    (8, 4, [2, 2, 2, 2]),
    (3, 4, [1, 1, 1, 0]),  # fewer rows than partitions: the last ones empty, never an error
    (0, 2, [0, 0]),
])
def test_partitions_are_consecutive_slices_in_order_covering_every_row_once(rows, parts, sizes):
    frame = pl.DataFrame({"job_id": [f"j{i}" for i in range(rows)]}, schema={"job_id": pl.String})
    cut = partitions(frame, parts)
    assert [p.height for p in cut] == sizes
    assert pl.concat(cut)["job_id"].to_list() == frame["job_id"].to_list()
