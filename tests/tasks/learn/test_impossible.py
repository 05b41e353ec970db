"""Never publish the impossible (issue 37, item 4): a P50 above what any job of its kind used (x a measured
margin), or above the largest GPU of the catalogue, is flagged and replaced by an estimate within the bound."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.runners import cores_here
from gpucast.records.outcomes import Champion
from gpucast.tasks.learn import features, ood, traced
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.score import Scorer

THREADS = cores_here()  # OMP_NUM_THREADS where set (a test worker's share of the cores), else every core

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests import measured  # noqa: E402
from tests.train_steps import train_target  # noqa: E402

MEM = c.PEAK_GPU_MEM_GB


def vgg16_as_cnn(precision: str = "FP32", optimizer: str = "SGD", batch: int = 128) -> pl.DataFrame:
    """The issue's job: a VGG16 logged with only its shape (model_type CNN, 138.4M parameters, 16 layers, 224 px)."""
    job = pl.DataFrame({c.JOB_ID: ["vgg"], c.MODEL_TYPE: ["CNN"], c.PARAMS_MILLION: [138.4], c.BATCH_SIZE: [batch],
                        c.INPUT_DIM: [224], c.NUM_LAYERS: [16], c.ITERATIONS: [1000.0], c.PRECISION: [precision],
                        c.OPTIMIZER: [optimizer], c.LEARNING_RATE: [0.01], c.REGULARIZATION: [False],
                        c.DATA_AUGMENTATION: [False], c.STATUS: ["PENDING"]})
    for name in c.HARDWARE:
        job = job.with_columns(pl.lit(None, dtype=pl.String if name == c.GPU_TYPE else pl.Float64).alias(name))
    return features.build(job)


def _scorer(history: pl.DataFrame, models: tuple[str, ...], folder: Path) -> Scorer:
    options = TrainOptions(targets=(MEM,), models=models, repeats=1)
    result = train_target(history, MEM, options, folder, threads=THREADS, progress=lambda _: None)
    return Scorer(Champion(MEM, result.champion, "t", str(folder)), threads=THREADS)


@pytest.fixture(scope="module")
def small_history() -> pl.DataFrame:
    """The measured set's jobs up to 12 GB: the largest CNN is a few GB, and a VGG16 at batch 128 is far above it."""
    return measured.load().filter(pl.col(MEM) <= 12)


def test_a_vgg16_logged_as_a_cnn_above_its_kinds_history_is_flagged_and_gets_an_estimate_within_it(small_history, tmp_path):
    scorer = _scorer(small_history, ("lightgbm",), tmp_path)
    job = vgg16_as_cnn()
    most = small_history.filter(pl.col(c.MODEL_TYPE) == "CNN")[MEM].max()
    unguarded = float(np.exp(scorer.encoder.transform(job)[:, scorer.prior_column])[0])  # the analytic prior: the base
    row = scorer.score(job).row(0, named=True)
    bound = most * ood.CEILING_MARGIN[MEM]
    assert unguarded > bound  # the base the champion corrects is above anything possible for a CNN of this history
    assert row["ood"] and row["p50"] <= bound + 1e-9
    assert f"the largest {MEM} of a CNN job in the history ({most:.4g})" in row["ood_reason"]
    assert "impossible: P50" in row["ood_reason"]
    assert row["p10"] <= row["p50"] <= row["p90"]


def test_a_forecast_above_the_largest_gpu_of_the_catalogue_is_never_published(tmp_path):
    """The analytic prior as champion (nothing learned to pull it down): a VGG16 at batch 512 in FP64 with Adam
    has an analytic prior of hundreds of GB, more than any GPU holds; it is published at the largest GPU's
    memory at most, flagged, and the reason names the GPU."""
    history = measured.load()
    scorer = _scorer(history, ("prior",), tmp_path)
    job = vgg16_as_cnn("FP64", "Adam", 512)
    name, gb = ood.largest_gpu_gb()
    row = scorer.score(job).row(0, named=True)
    assert row["p50"] <= gb and row["ood"]
    assert f"the memory of the largest GPU in the catalogue ({name}, {gb:g} GB)" in row["ood_reason"]
    assert row["p50"] <= 1.5 * gb  # the goal
    # smaller batches: a P50 under the bound keeps its own forecast, but its P90 is no more than the bound either
    rows = [scorer.score(vgg16_as_cnn("FP32", "Adam", b)).row(0, named=True) for b in (64, 128, 192, 256)]
    kept = [r for r in rows if r["p50"] < gb]
    assert kept and all(r["p90"] <= gb for r in rows)
    assert any(r["p90"] == gb for r in kept)  # one of them a band the clip brought down (its P50 x factor above it)
    for r in kept:  # and its reason says so, naming the bound (newcomer 26 P6)
        clipped = f"capped at {gb:.4g}, the memory of the largest GPU in the catalogue ({name}, {gb:g} GB)"
        assert (clipped in (r["ood_reason"] or "")) == (r["p90"] == gb), r


def test_a_jobs_own_trace_above_the_bound_is_published_as_it_is():
    """The trace says so: a bound below the job's own traced memory is lifted to it."""
    rows = pl.DataFrame({c.MODEL_TYPE: ["CNN", "CNN"], traced.TRACED_MEM_GB: [300.0, None]})
    bound, words = ood.ceiling(rows, MEM, ood.Ceiling(MEM, 2.5, {"CNN": 10.0}))
    assert bound.tolist() == [300.0, 25.0]
    assert words(0) == "the job's own trace (300 GB)" and words(1) == f"2.5x the largest {MEM} of a CNN job in the history (10)"


def test_run_time_and_gflops_have_the_same_check_and_an_unseen_kind_only_the_gpu_bound():
    rows = pl.DataFrame({c.MODEL_TYPE: ["CNN", "Mamba"]})
    fitted = ood.fit_ceiling(pl.DataFrame({c.MODEL_TYPE: ["CNN", "CNN"], c.RUNTIME_HOURS: [2.0, 4.0]}), c.RUNTIME_HOURS)
    bound, words = ood.ceiling(rows, c.RUNTIME_HOURS, fitted)
    assert bound[0] == pytest.approx(4.0 * ood.CEILING_MARGIN[c.RUNTIME_HOURS]) and np.isinf(bound[1])
    fitted = ood.fit_ceiling(pl.DataFrame({c.MODEL_TYPE: ["CNN"], c.GPU_DEMAND_GFLOPS: [1e5]}), c.GPU_DEMAND_GFLOPS)
    assert ood.ceiling(rows, c.GPU_DEMAND_GFLOPS, fitted)[0][0] == pytest.approx(1e5 * ood.CEILING_MARGIN[c.GPU_DEMAND_GFLOPS])
    assert ood.ceiling(rows, MEM, None)[0].tolist() == [ood.largest_gpu_gb()[1]] * 2


def test_within_the_bound_the_held_out_best_is_kept_else_the_next_candidate_else_the_bound():
    evidence = ood.Fallback.from_json({"estimate": "blend", "interval_factor": 2.0, "candidates": {
        k: {"mape": m, "median_log_error": 0.0, "interval_factor": 2.0} for k, m in (("model", 30.0), ("prior", 50.0), ("blend", 20.0))}})
    model, prior, bound = np.array([400.0, 900.0, 400.0]), np.array([4.0, 100.0, 900.0]), np.array([100.0, 250.0, 50.0])
    p10, p50, p90, used = ood.within_ceiling(evidence, model, prior, bound)
    assert used == ["blend", "prior", "capped"]
    assert p50.tolist() == pytest.approx([40.0, 100.0, 50.0])
    assert p90[2] == 50.0 and p10[2] == 25.0  # capped: the most it can be
    # a P50 within the bound whose P50 x factor is not: its P90 is the bound, its P10 and P50 as they were
    p10, p50, p90, used = ood.within_ceiling(evidence, model[:1], prior[:1], np.array([60.0]))
    assert used == ["blend"] and p50.tolist() == pytest.approx([40.0])
    assert p90.tolist() == [60.0] and p10.tolist() == pytest.approx([20.0])
