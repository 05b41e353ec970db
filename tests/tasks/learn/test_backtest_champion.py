"""Champion chosen on what generalises (issue 37, item 6): the latest week's completed jobs are a backtest no
fit sees, and every model's error on it is reported. (A champion that is chosen out of fold but is worse there
than the best tree loses, or is tied: on constructed forecasts in test_champion_choice.py, issue 50.)"""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.runners import cores_here
from gpucast.tasks.learn import train
from gpucast.tasks.learn.folds import backtest_mask
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.simulate import simulate_jobs
from tests.train_steps import train_target

THREADS = cores_here()  # OMP_NUM_THREADS where set (a test worker's share of the cores), else every core

NN = "transformer_bigru"


def _history(weeks: int = 4, per_day: int = 40) -> pl.DataFrame:
    """Completed and failed jobs submitted over `weeks` weeks, `per_day` a day."""
    days = [simulate_jobs(per_day, np.random.default_rng(d), date(2026, 10, 1) + timedelta(days=d), 0.0, seed=d)
            for d in range(7 * weeks)]
    return pl.concat(days, how="diagonal_relaxed")


def test_the_backtest_is_the_latest_week_of_completions_when_there_are_enough_older_jobs():
    history = _history()
    mask = backtest_mask(history)
    done = history[c.SUBMITTED_AT]
    assert mask.any() and (done.filter(pl.Series(mask)).min() > done.max() - timedelta(days=7))
    assert not (done.filter(pl.Series(~mask)) > done.max() - timedelta(days=7)).any()
    assert 0.15 < mask.mean() < 0.35  # one week of four
    assert not backtest_mask(_history(weeks=1)).any()  # a week of history: nothing older to learn from
    assert not backtest_mask(history.drop(c.UPDATED_AT, c.SUBMITTED_AT)).any()  # no times: no backtest


@pytest.fixture(scope="module")
def history() -> pl.DataFrame:
    return _history()


def test_no_fit_sees_the_backtest_jobs_and_every_model_reports_its_error_on_them(tmp_path, history):
    target = c.PEAK_GPU_MEM_GB
    options = TrainOptions(models=("linear_fs", "decision_tree"), repeats=2, min_labelled=10)
    a = train_target(history, target, options, tmp_path / "a", threads=THREADS)
    rows = train.labelled(history, target, options)
    back = backtest_mask(rows)
    wrecked_ids = rows.filter(pl.Series(back))[c.JOB_ID]
    wrecked = history.with_columns(pl.when(pl.col(c.JOB_ID).is_in(wrecked_ids.implode())).then(pl.col(target) * 1000)
                                   .otherwise(pl.col(target)).alias(target))
    b = train_target(wrecked, target, options, tmp_path / "b", threads=THREADS)
    for split in ("validation", "backtest"):
        assert {(m.model, m.repeat) for m in a.metrics if m.split == split} == {(m, r) for m in options.models for r in (0, 1)}
    assert all(m.rows_eval == back.sum() for m in a.metrics if m.split == "backtest")
    val = lambda res: [m.rmse for m in res.metrics if m.split == "validation"]  # noqa: E731
    assert val(a) == pytest.approx(val(b))  # the wrecked labels never reached a fit or its validation
    bt = lambda res: [m.rmse for m in res.metrics if m.split == "backtest"]  # noqa: E731
    assert all(x > 100 * y for x, y in zip(bt(b), bt(a), strict=True))  # ... but they are the backtest
    assert "holdout planner loss" in a.choice_reason
