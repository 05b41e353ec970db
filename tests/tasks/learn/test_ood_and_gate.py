"""Out-of-distribution flags and the champion/challenger gate, on simulated jobs."""

from __future__ import annotations

import re
from datetime import date

import numpy as np
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.records.outcomes import Champion, GateWindow, TargetResult
from gpucast.records.results import ChampionCoverage
from gpucast.tasks.learn import gate, ood
from gpucast.tasks.learn.features import build
from gpucast.tasks.simulate import simulate_jobs

FEATURE_SET = "residual"


@pytest.fixture(scope="module")
def detector_and_fresh():
    """A detector fitted on one day of jobs, and a second day drawn from the same distribution."""
    train = build(simulate_jobs(3000, np.random.default_rng(1), date(2026, 1, 1), 0.0))
    fresh = build(simulate_jobs(3000, np.random.default_rng(2), date(2026, 1, 2), 0.0))
    return ood.fit(train, FEATURE_SET), fresh


def test_jobs_like_the_training_ones_are_rarely_flagged(detector_and_fresh):
    detector, fresh = detector_and_fresh
    flags, _ = ood.flag(fresh, detector)
    # The density check alone flags 0.5% of training-like jobs by construction; range checks add a little.
    assert flags.mean() < 0.02, f"false-alarm rate {flags.mean():.2%} on in-distribution jobs"


def test_unseen_categories_and_out_of_range_sizes_are_all_flagged_with_a_reason(detector_and_fresh):
    detector, fresh = detector_and_fresh
    base = fresh.head(40)
    unseen = base.head(10).with_columns(pl.lit("Mamba").alias(c.MODEL_TYPE))
    huge = base.slice(10, 10).with_columns((pl.col(c.PARAMS_MILLION) * 1e4).alias(c.PARAMS_MILLION))
    tiny_lr = base.slice(20, 10).with_columns(pl.lit(1e-10).alias(c.LEARNING_RATE))
    gpus = base.slice(30, 10).with_columns(pl.lit("H900").alias(c.GPU_TYPE),  # no peak logged: nothing known of it
                                           pl.lit(None, dtype=pl.Float64).alias(c.GPU_PEAK_TFLOPS))
    injected = pl.concat([unseen, build(huge), tiny_lr, build(gpus)], how="diagonal_relaxed")
    flags, reasons = ood.flag(injected, detector)
    assert flags.all(), [r for f, r in zip(flags, reasons, strict=True) if not f]
    assert all(f"unseen {c.MODEL_TYPE} 'Mamba'" in r for r in reasons[:10])
    assert all(f"{c.PARAMS_MILLION}" in r and "above the training range" in r for r in reasons[10:20])
    assert all(f"{c.LEARNING_RATE}" in r and "below the training range" in r for r in reasons[20:30])
    assert all(f"unknown {c.GPU_TYPE} 'H900'" in r for r in reasons[30:40])


def _on_one_gpu(n: int, seed: int, gpu: str, peak: float | None) -> pl.DataFrame:
    """Simulated jobs all run on `gpu` (a consumer card the catalogue lacks), its peak logged or not."""
    rows = simulate_jobs(n, np.random.default_rng(seed), date(2026, 1, 1), 0.0)
    return build(rows.with_columns(pl.lit(gpu).alias(c.GPU_TYPE), pl.lit(peak, dtype=pl.Float64).alias(c.GPU_PEAK_TFLOPS)))


def test_a_gpu_the_catalogue_lacks_is_known_when_the_history_ran_on_it():
    # The reviewer's case: every training job on one uncatalogued GPU, its peak in the log; the pending
    # jobs run on the same GPU (spelt another way) and are scored by the champion, not the fallback.
    detector = ood.fit(_on_one_gpu(400, 1, "GeForce RTX 3060", 25.0), FEATURE_SET)
    pending = _on_one_gpu(400, 2, "geforce_rtx_3060", 25.0)
    _, reasons = ood.flag(pending, detector)
    assert not any(r and c.GPU_TYPE in r for r in reasons)
    no_peak = _on_one_gpu(50, 3, "GeForce RTX 3060", None)  # peak not logged: the history alone knows it
    _, reasons = ood.flag(no_peak, detector)
    assert not any(r and c.GPU_TYPE in r for r in reasons)


def test_an_uncatalogued_gpu_with_a_logged_peak_is_judged_by_its_peak():
    detector = ood.fit(_on_one_gpu(400, 1, "GeForce RTX 3060", 25.0), FEATURE_SET)
    other = _on_one_gpu(50, 2, "Radeon RX 7900 XTX", 25.0)  # never seen, but its peak is in range
    _, reasons = ood.flag(other, detector)
    assert not any(r and c.GPU_TYPE in r for r in reasons)
    faster = _on_one_gpu(50, 2, "Radeon RX 7900 XTX", 250.0)  # ten times the fastest peak in training
    flags, reasons = ood.flag(faster, detector)
    assert flags.all() and all("peak_tflops 250 above the training range" in r for r in reasons)


def test_a_gpu_neither_seen_in_training_nor_logged_with_a_peak_is_flagged():
    detector = ood.fit(_on_one_gpu(400, 1, "GeForce RTX 3060", 25.0), FEATURE_SET)
    flags, reasons = ood.flag(_on_one_gpu(50, 2, "Radeon RX 7900 XTX", None), detector)
    assert flags.all() and all(f"unknown {c.GPU_TYPE} 'Radeon RX 7900 XTX'" in r for r in reasons)


def test_a_missing_value_is_not_a_new_category(detector_and_fresh):
    detector, fresh = detector_and_fresh
    rows = fresh.head(200).with_columns(pl.lit(None, dtype=pl.String).alias(c.PRECISION))
    _, reasons = ood.flag(rows, detector)
    assert not any(r and c.PRECISION in r for r in reasons)


def test_an_unusual_combination_of_in_range_sizes_is_flagged_by_density(detector_and_fresh):
    detector, fresh = detector_and_fresh
    # Every size at its training minimum except parameters at its maximum: each in range, together odd.
    lo = {n: float(np.exp(detector.ranges[n][0])) for n in detector.numbers if detector.ranges[n]}
    hi = {n: float(np.exp(detector.ranges[n][1])) for n in detector.numbers if detector.ranges[n]}
    odd = fresh.head(1).with_columns([pl.lit(lo[n]).alias(n) for n in lo if n in fresh.columns])
    odd = odd.with_columns(pl.lit(hi[c.PARAMS_MILLION]).alias(c.PARAMS_MILLION))
    flags, reasons = ood.flag(odd, detector)
    assert flags[0] and "unusual combination" in reasons[0]


def test_the_gate_keeps_the_champion_when_the_challenger_is_clearly_worse():
    rng = np.random.default_rng(0)
    actual = rng.uniform(1, 50, 200)
    champion = actual * np.exp(rng.normal(0, 0.05, 200))
    challenger = actual * np.exp(rng.normal(0, 0.30, 200))
    decision = gate.decide(actual, champion, challenger)
    assert not decision.promote and "worse on the backtest window beyond noise" in decision.reason
    assert decision.window_jobs == 200 and decision.challenger_error > decision.champion_error
    # the bound in two significant figures: a small one is not printed "0.000 > 0" (newcomer 25)
    tiny = gate.decide(actual, actual, actual * np.exp(np.where(np.arange(200) < 199, 1e-5, 2e-5)))
    assert not tiny.promote and re.search(r"difference 1(\.\d)?e-05 > 0\)$", tiny.reason), tiny.reason


def test_the_gate_promotes_a_challenger_that_is_as_good_or_better():
    rng = np.random.default_rng(0)
    actual = rng.uniform(1, 50, 200)
    champion = actual * np.exp(rng.normal(0, 0.10, 200))
    same = actual * np.exp(rng.normal(0, 0.10, 200))  # equal skill: noise must not block it
    better = actual * np.exp(rng.normal(0, 0.05, 200))
    assert gate.decide(actual, champion, same).promote
    assert gate.decide(actual, champion, better).promote


def test_a_small_window_leaves_the_decision_to_validation():
    actual = np.array([1.0, 2.0, 3.0])
    decision = gate.decide(actual, actual, actual * 3)
    assert decision.promote and f"fewer than {gate.MIN_WINDOW_JOBS}" in decision.reason


def test_drift_is_warned_only_on_windows_large_enough_to_say_so():
    rows = [ChampionCoverage(c.PEAK_GPU_MEM_GB, "lightgbm", "train-1", jobs=500, p90_coverage=0.61, p10_p90_coverage=0.5,
                             mape=30.0),
            ChampionCoverage(c.RUNTIME_HOURS, "lightgbm", "train-1", jobs=500, p90_coverage=0.91, p10_p90_coverage=0.8,
                             mape=20.0),
            ChampionCoverage(c.GPU_DEMAND_GFLOPS, "lightgbm", "train-1", jobs=5, p90_coverage=0.0, p10_p90_coverage=0.0,
                             mape=90.0)]
    warnings = gate.drift_warnings(rows)
    assert len(warnings) == 1 and "61%" in warnings[0] and c.PEAK_GPU_MEM_GB in warnings[0]


def _window(jobs: int) -> GateWindow:
    ids = [f"j{i}" for i in range(jobs)]
    return GateWindow(Champion(c.RUNTIME_HOURS, "lightgbm", "train-0", "/m"),
                      pl.DataFrame({c.JOB_ID: ids, "p50": [2.0] * jobs, "p90": [3.0] * jobs, "actual": [1.0] * jobs}))


def test_the_gate_joins_the_window_with_the_challengers_predictions_by_job():
    """The evidence: per job of the window, the current champion's P50, the challenger's (fitted without the window)
    and the actual value; a job the challenger did not predict is left out."""
    window = _window(40)
    mine = TargetResult(c.RUNTIME_HOURS, champion="xgboost",
                        gate_predictions=pl.DataFrame({c.JOB_ID: [f"j{i}" for i in range(39, -1, -1)] + ["other"],
                                                       "p50": [1.1] * 40 + [9.0]}))
    decision = gate.judge(window, mine)
    assert decision == gate.decide(np.ones(40), np.full(40, 2.0), np.full(40, 1.1)) and decision.verdict == "promoted"
    worse = TargetResult(c.RUNTIME_HOURS, champion="xgboost",
                         gate_predictions=pl.DataFrame({c.JOB_ID: [f"j{i}" for i in range(40)], "p50": [8.0] * 40}))
    assert gate.verdict(gate.judge(window, worse)) == "kept"


def test_a_current_champion_over_tonights_scoring_budget_does_not_stay_whatever_the_window_says():
    """Chosen at last night's small queue, a network blend (240 CPU-s per 1M jobs, counted) would score tonight's 1M
    pending jobs at the cost the champion rule refuses: tonight's champion replaces it though the window favours the
    old one (issue 52 item 5, session 23); within the budget, or its cost not counted, the window decides."""
    from dataclasses import replace

    from gpucast.records.outcomes import MetricRow
    from gpucast.tasks.learn.champion import ScoreBudget

    def costing(per_million: float | None) -> list[MetricRow]:  # tonight's champion's held-out folds, as fit_one's
        return [MetricRow(model="xgboost", preset=None, features="residual", repeat=r, seed=r, split=split, mse=0.0,
                          rmse=0.0, mae=0.0, mape=0.0, r2=0.0, rows_train=1, rows_eval=1, train_seconds=0.0,
                          device="cpu", epochs=None, score_seconds_per_million=per_million)
                for r in range(2) for split in ("validation", "test")]

    window = {c.JOB_ID: [f"j{i}" for i in range(40)], "p50": [8.0] * 40}
    worse = TargetResult(c.RUNTIME_HOURS, champion="xgboost", metrics=costing(4.4), gate_predictions=pl.DataFrame(window))
    assert worse.champion_cost() == pytest.approx(4.4)
    dear = replace(_window(40), cost=240.0)
    decision = gate.judge(dear, worse, ScoreBudget(10.0, 1_000_000))
    assert decision.verdict == "promoted"
    assert decision.reason == ("the current champion lightgbm would cost 240 CPU-s to score, over the scoring budget "
                               "(10 CPU-s a target for the 1,000,000 pending jobs (GPUCAST_SCORE_BUDGET_S)), and "
                               "tonight's xgboost 4.4: replaced without the backtest")
    for budget, window in ((ScoreBudget(10.0, 40), dear), (None, dear), (ScoreBudget(10.0, 1_000_000), _window(40))):
        assert gate.verdict(gate.judge(window, worse, budget)) == "kept"
    # tonight's over it too (the plain LightGBM competes whatever it costs): replaced only where it is the cheaper
    dearer = replace(worse, metrics=costing(300.0))
    assert gate.verdict(gate.judge(dear, dearer, ScoreBudget(10.0, 1_000_000))) == "kept"  # the window decides
    cheaper = replace(worse, metrics=costing(100.0))
    assert gate.verdict(gate.judge(dear, cheaper, ScoreBudget(10.0, 1_000_000))) == "promoted"


def test_nothing_to_gate_without_a_current_champion_a_champion_tonight_or_predictions():
    with_predictions = TargetResult(c.RUNTIME_HOURS, champion="xgboost",
                                    gate_predictions=pl.DataFrame({c.JOB_ID: ["j0"], "p50": [1.0]}))
    assert gate.judge(None, with_predictions) is None  # no current champion: tonight's is promoted
    assert gate.judge(_window(3), TargetResult(c.RUNTIME_HOURS, skipped="too few")) is None
    assert gate.judge(_window(0), TargetResult(c.RUNTIME_HOURS, champion="xgboost")) is None  # an empty window
    assert gate.verdict(None) is None


def test_the_gate_weighs_only_tonights_targets_champions():
    champions = [Champion(t, "lightgbm", "train-0", "/m") for t in (c.RUNTIME_HOURS, c.PEAK_GPU_MEM_GB)]
    assert gate.gated(champions, (c.PEAK_GPU_MEM_GB, c.GPU_DEMAND_GFLOPS)) == champions[1:]
