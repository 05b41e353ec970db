"""How a train run's fits fan out and what they come back as (`tasks/learn/fanout.py`): no Prefect, no cluster."""

from __future__ import annotations

import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.records.outcomes import FitResult, FitSkipped
from gpucast.tasks.learn import fanout
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.train import Fit, order_fits


def test_targets_with_too_few_labelled_jobs_get_no_fits_and_the_order_is_kept():
    # issue 50: the folds need 2 rows each (6), and min_labelled: 6 rows compare, 5 do not
    options = TrainOptions(models=("lightgbm", registry.NN), repeats=1, min_labelled=3)
    rows = {t: pl.DataFrame({"x": range(6 if t != c.RUNTIME_HOURS else 5)}) for t in options.targets}
    fits = fanout.runnable_fits(options, {}, rows)
    assert fits == [f for f in order_fits(options) if f.target != c.RUNTIME_HOURS] and fits


def test_the_night_budget_ends_minutes_after_the_start_or_never():
    assert fanout.budget_end(1000.0, 2) == 1120.0
    assert fanout.budget_end(1000.0, None) is None and fanout.budget_end(1000.0, 0) is None


def test_fits_keep_their_order_as_priorities_and_network_fits_ask_for_a_gpu():
    fits = [Fit("t", "lightgbm", 0), Fit("t", registry.NN, 0)]
    assert fanout.annotations(fits, 0, {"GPU": 1}) == {"priority": 2}
    assert fanout.annotations(fits, 1, {"GPU": 1}) == {"priority": 1, "resources": {"GPU": 1}}
    assert fanout.annotations(fits, 1, None) == {"priority": 1}  # no GPU worker: the network runs on CPU


def test_a_fit_that_raised_is_a_failed_skip_carrying_its_error():
    fit = Fit("t", "lightgbm", 1)
    got = fanout.outcome_of(fit, ValueError("x" * 400))
    assert got == FitSkipped("t", "lightgbm", 1, f"failed: ValueError: {'x' * 300}", failed=True)
    done = FitResult("t", "lightgbm", 1, (), None, 1.0, "cpu")
    assert fanout.outcome_of(fit, done) is done


def test_the_run_stops_only_when_every_fit_failed():
    failed = FitSkipped("t", "lightgbm", 0, "failed: TypeError: bad option", failed=True)
    cut = FitSkipped("t", "xgboost", 0, "the night budget ran out")
    fanout.check_outcomes({})  # no fits at all (every target too small): the targets are skipped, not failed
    fanout.check_outcomes({"t": [failed, cut]})  # a budget cut is no failure
    with pytest.raises(RuntimeError, match="every fit of the run failed; the first: failed: TypeError: bad option"):
        fanout.check_outcomes({"t": [failed], "u": [failed]})


def test_the_runs_message_says_the_note_the_skipped_targets_and_the_fits_cut():
    from gpucast.records.results import TrainedTarget

    done = TrainedTarget("a", "lightgbm", None, 100, 0)
    assert fanout.run_message([done], None) is None
    skipped = TrainedTarget("b", None, "3 labelled COMPLETED jobs", 3, 0)
    cut = TrainedTarget("c", "lightgbm", None, 100, 2)
    assert fanout.run_message([done, skipped, cut], "fits in this process") == \
        "fits in this process; b: 3 labelled COMPLETED jobs; 2 fit(s) skipped: see skipped_fits"


def test_models_far_over_the_scoring_budget_at_their_last_cost_are_not_fitted_and_say_why():
    """A model whose last counted cost puts tonight's queue above twice the scoring budget is fitted once (its other
    repeats are `priced_out` skips, with the cost and the budget); the plain LightGBM, a model never counted, and a
    model near the budget are fitted on every repeat (review 73 S3-11, session 24)."""
    from gpucast.tasks.learn import champion

    options = TrainOptions(models=("lightgbm_plain", "xgboost", "adaboost", registry.NN, "extra_trees"), repeats=2,
                           score_budget_s=10.0, pending_jobs=1_000_000, min_labelled=3)
    last = {c.RUNTIME_HOURS: {registry.NN: 168.0, "adaboost": 20.4, "xgboost": 19.9, "lightgbm_plain": 500.0}}
    priced = fanout.priced_out(options, last)
    # 168 and 20.4 CPU-s are over 2 x 10; xgboost's 19.9 is under 20 (fitted, judged on tonight's count); the plain
    # LightGBM is the floor; extra_trees was never counted; the other targets have no cost on record
    assert priced == {c.RUNTIME_HOURS: {registry.NN: pytest.approx(168.0), "adaboost": pytest.approx(20.4)}}
    rows = {t: pl.DataFrame({"x": range(100)}) for t in options.targets}
    fits = fanout.runnable_fits(options, {}, rows, priced)
    # a model priced out is fitted once (its first repeat): its other repeats are not run
    assert fits == [f for f in order_fits(options) if not (
        f.target == c.RUNTIME_HOURS and f.model in ("adaboost", registry.NN) and f.repeat > 0)]
    assert Fit(c.RUNTIME_HOURS, registry.NN, 0) in fits and Fit(c.RUNTIME_HOURS, "adaboost", 1) not in fits
    unfitted = fanout.priced_out_fits(options, priced)[c.RUNTIME_HOURS]
    assert [(f.model, f.repeat, f.priced_out, f.failed) for f in unfitted] == [  # the models' order, as asked
        ("adaboost", 1, True, False), (registry.NN, 1, True, False)]
    assert unfitted[0].reason == ("not fitted: at its last counted scoring cost it would cost 20.4 CPU-s for the "
                                  "1,000,000 pending jobs, over 2x the scoring budget (10 CPU-s a target for the "
                                  "1,000,000 pending jobs (GPUCAST_SCORE_BUDGET_S)); fitted once (repeat 1), competing "
                                  "only within the budget at tonight's count")
    assert fanout.describe_not_run({c.RUNTIME_HOURS: unfitted, c.PEAK_GPU_MEM_GB: []}) == [
        f"runtime_hours: 2 fit(s) not run, over the scoring budget at their last counted cost (each fitted once): "
        f"adaboost, {registry.NN}"]
    # with one repeat nothing is left out: the one fit is run
    assert fanout.priced_out_fits(options.model_copy(update={"repeats": 1}), priced) == {c.RUNTIME_HOURS: []}
    # fits not run are not failures, nor do they hide a night where every fit that ran failed (review 74 S1-1)
    fanout.check_outcomes({c.RUNTIME_HOURS: unfitted})
    failed = FitSkipped(c.RUNTIME_HOURS, "lightgbm_plain", 0, "failed: ValueError: x", failed=True)
    with pytest.raises(RuntimeError, match="every fit of the run failed"):
        fanout.check_outcomes({c.RUNTIME_HOURS: [failed, *unfitted]})
    # a small queue, or no budget: every model is fitted
    assert fanout.priced_out(options.model_copy(update={"pending_jobs": 40_000}), last) == {}
    assert fanout.priced_out(options.model_copy(update={"score_budget_s": 0.0}), last) == {}
    # every model asked for priced out (no plain LightGBM): the cheapest is fitted, so a champion is always chosen
    budget = champion.ScoreBudget(1.0, 1_000_000)
    assert champion.priced_out({"xgboost": 5.0, "adaboost": 20.0}, ["xgboost", "adaboost"], budget) == {"adaboost": 20.0}


def test_the_runs_message_names_the_models_priced_out_apart_from_the_fits_cut():
    from gpucast.records.results import TrainedTarget

    priced = TrainedTarget("a", "lightgbm_plain", None, 100, 0, priced_out=("adaboost", registry.NN))
    cut = TrainedTarget("b", "lightgbm", None, 100, 1, priced_out=(registry.NN,))
    assert fanout.run_message([priced, cut], None) == (
        "1 fit(s) skipped: see skipped_fits; fits not run, over the scoring budget at their last counted cost: "
        f"adaboost, {registry.NN} (skipped_fits)")


def test_a_targets_fits_not_run_are_counted_apart_from_the_models_priced_out():
    cut = FitSkipped("t", "xgboost", 1, "the night budget ran out before it started")
    failed = FitSkipped("t", "lightgbm", 0, "failed: ValueError: x", failed=True)
    priced = [FitSkipped("t", m, r, "not fitted: ...", priced_out=True) for m, r in ((registry.NN, 1), ("adaboost", 0),
                                                                                   ("adaboost", 1))]
    assert fanout.not_run([cut, failed, *priced]) == (2, ("adaboost", registry.NN))
    assert fanout.not_run([]) == (0, ())
