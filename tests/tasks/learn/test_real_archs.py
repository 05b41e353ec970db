"""The real-architectures evaluation (tests/benchmarks/real_archs.py): the H100 runs become jobs with a traced
prior, and the per-family scores count coverage and under-provisioning as documented."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.learn import features, traced
from tests.benchmarks import real_archs


def test_the_gpu_runs_become_jobs_with_depth_and_a_traced_prior():
    reference = real_archs.load_reference()
    ev = real_archs.gpu_set(real_archs.GPU_RUNS, reference)
    runs = pl.read_csv(real_archs.GPU_RUNS).filter(pl.col("status") == "ok")
    assert ev.rows.height == runs.height == len(ev.truth)
    assert ev.rows[c.NUM_LAYERS].null_count() == 0  # every architecture is in the reference set
    built = features.build(ev.rows, trace=ev.trace)
    expected = [traced.reported_gb(gb * 1e9) for gb in runs["traced_peak_gb"].to_list()]
    assert built["prior_mem_gb"].to_list() == pytest.approx(expected)
    assert np.array_equal(ev.truth, runs["device_used_gb"].to_numpy())


def test_scores_count_coverage_and_under_provisioning():
    y = np.array([1.0, 2.0, 4.0, 8.0])
    s = real_archs.scores(y, p50=y, p90=np.array([1.0, 1.0, 4.0, 4.0]))
    assert s["MAPE %"] == 0.0 and s["P90 cover"] == 0.5
    assert s["under"] == 0.5  # 2 and 8 GB exceed the requests for P90s of 1 and 4 GB (headroom < 50%)


def test_a_missing_set_is_a_clear_message():
    with pytest.raises(SystemExit, match="no reference set at"):
        real_archs.load_reference(real_archs.REFERENCE.with_name("absent.csv"))
