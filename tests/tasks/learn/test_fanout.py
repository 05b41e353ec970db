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
