"""The MAPE floor of `bench_ceiling` (issue 50, session 16): the analytic floor of a uniform per-run draw, and the
floor of repeated inputs."""

from __future__ import annotations

import numpy as np
import polars as pl

from tests.benchmarks.bench_ceiling import optimal_ape, repeat_ape


def test_the_analytic_floor_of_a_uniform_draw_is_the_best_forecasts_error_and_matches_a_simulation():
    tensor, draw = np.array([0.0, 0.1, 2.0, 40.0]), (0.3, 1.0)
    p, mean, var = optimal_ape(tensor, draw)
    y = tensor[:, None] + np.random.default_rng(0).uniform(*draw, (tensor.size, 400_000))
    ape = np.abs(p[:, None] - y) / y
    np.testing.assert_allclose(mean, ape.mean(axis=1), rtol=5e-3)
    np.testing.assert_allclose(var, ape.var(axis=1), rtol=2e-2)
    assert 0.28 < mean[0] < 0.30 and mean[-1] < 0.005  # a job that is all context: ~29%; a 40 GB job: < 0.5%
    for scale in (0.9, 0.97, 1.03, 1.1):  # any other forecast misses by more
        assert ((np.abs(p[:, None] * scale - y) / y).mean(axis=1) > mean).all()
    assert (np.abs(tensor + 0.65 - y.T).T / y).mean(axis=1)[0] > mean[0]  # the mean draw is not the APE minimiser


def test_the_repeat_floor_takes_each_groups_weighted_median_in_sample_and_leaves_single_rows_out():
    rows = pl.DataFrame({"model_type": ["A", "A", "A", "B", "B"], "batch_size": [8, 8, 8, 8, 16],
                         "peak_gpu_mem_gb": [1.0, 2.0, 4.0, 3.0, 5.0]})
    ape = repeat_ape(rows, ["model_type", "batch_size"], "peak_gpu_mem_gb")
    # group A: weights 1, 1/2, 1/4 (sum 1.75): the weighted median is 1.0 (cumulative 1 >= 0.875)
    np.testing.assert_allclose(ape[:3], [0.0, 0.5, 0.75])
    assert np.isnan(ape[3:]).all()  # B's rows differ in batch size: no repeat
