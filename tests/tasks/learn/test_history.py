"""Forecasts of jobs without model features from the scheduler's history (`tasks/learn/history.py`, issue 38)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.learn import history as h
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.train import labelled


def jobs(n: int, seed: int = 0, **columns) -> pl.DataFrame:
    """`n` completed scheduler-only jobs: two scripts in one queue, `train_bert_<n>` (about 10 h, limit 24 h)
    and `eval_<n>` (about 0.5 h, limit 2 h); a hand-checkable signal only the name and the limit carry."""
    rng = np.random.default_rng(seed)
    bert = np.arange(n) % 2 == 0
    base = {
        c.JOB_ID: [f"j{i}" for i in range(n)], c.STATUS: ["COMPLETED"] * n, c.QUEUE: ["gpu"] * n, c.TEAM: ["nlp"] * n,
        c.MODEL_TYPE: [c.UNKNOWN_MODEL_TYPE] * n, c.GPU_TYPE: ["A100-80GB"] * n, c.GPU_COUNT: [1] * n,
        c.SUBMITTED_AT: [datetime(2026, 11, 1, tzinfo=UTC) + timedelta(hours=i) for i in range(n)],
        c.JOB_NAME: [f"train_bert_{i:03d}" if b else f"eval_{i}" for i, b in enumerate(bert)],
        c.TIME_LIMIT_HOURS: np.where(bert, 24.0, 2.0),
        c.RUNTIME_HOURS: np.where(bert, 10.0, 0.5) * np.exp(rng.normal(0, 0.1, n)),
        c.PEAK_GPU_MEM_GB: np.where(bert, 60.0, 8.0) * np.exp(rng.normal(0, 0.05, n)),
    }
    base.update(columns)
    frame = pl.DataFrame(base)
    kinds = {"float": pl.Float64, "int": pl.Int64, "bool": pl.Boolean, "timestamp": pl.Datetime("us", "UTC")}
    return frame.with_columns(pl.lit(None, kinds.get(f.kind, pl.String)).alias(f.name)
                              for f in c.FIELDS if f.name not in frame.columns)


def test_a_job_is_without_model_features_when_its_type_is_unknown_and_nothing_else_is_logged():
    rows = pl.DataFrame({c.MODEL_TYPE: ["unknown", None, "unknown", "CNN"], c.PARAMS_MILLION: [None, None, 5.0, None]},
                        schema_overrides={c.PARAMS_MILLION: pl.Float64})
    # a logged parameter count is a model feature: the champion can use it, so that job goes to the champion
    assert h.featureless(rows).to_list() == [True, True, False, False]


def test_the_name_pattern_and_the_time_limit_forecast_what_the_queue_median_cannot():
    history, new = jobs(200), jobs(4, seed=1, **{c.JOB_ID: ["a", "b", "c", "d"],
                                                  c.JOB_NAME: ["train_bert_999", "eval_7", "train_bert_5", "eval_123"]})
    model = h.SchedulerHistory(c.RUNTIME_HOURS).fit(history)
    p10, p50, p90 = model.intervals(new)
    assert p50[[0, 2]] == pytest.approx([10.0, 10.0], rel=0.2) and p50[[1, 3]] == pytest.approx([0.5, 0.5], rel=0.2)
    assert (p10 <= p50).all() and (p50 <= p90).all()
    median = history[c.RUNTIME_HOURS].median()  # the plain yardstick (one queue): one number, between the two scripts
    assert history[c.QUEUE].n_unique() == 1 and 0.5 * 1.5 < median < 10.0 / 1.5
    out = model.forecast(new)
    assert out["model"].to_list() == [h.MODEL] * 4 and out["ood"].all()
    assert out["ood_reason"][0].startswith("model features unknown -> scheduler history: scheduler_history") and \
        "learned from 200 jobs" in out["ood_reason"][0]


def test_where_the_facts_carry_nothing_the_queue_median_is_chosen_by_evidence():
    rng = np.random.default_rng(5)
    noise = jobs(400, **{c.JOB_NAME: [f"job_{i}{'xyz'[i % 3]}" for i in range(400)], c.TIME_LIMIT_HOURS: [None] * 400,
                         c.RUNTIME_HOURS: np.exp(rng.normal(0.0, 1.0, 400))})  # run time unrelated to name or limit
    model = h.SchedulerHistory(c.RUNTIME_HOURS).fit(noise)
    assert model.chosen_ == h.MEDIAN and model.evidence_[h.MEDIAN] < model.evidence_[h.MODEL]
    out = model.forecast(jobs(3))
    assert out["model"].to_list() == [h.MEDIAN] * 3 and out["p50"].n_unique() == 1  # one queue: its median
    assert "history_queue_median (the facts beat no queue median)" in out["ood_reason"][0]


def test_run_time_never_above_the_time_limit():
    model = h.SchedulerHistory(c.RUNTIME_HOURS).fit(jobs(200))
    tight = jobs(2, **{c.JOB_ID: ["a", "b"], c.JOB_NAME: ["train_bert_1", "train_bert_2"], c.TIME_LIMIT_HOURS: [4.0, None]})
    p10, p50, p90 = model.intervals(tight)
    assert p90[0] == 4.0 and p50[0] <= 4.0  # the scheduler stops it at its limit
    assert p90[1] > 4.0  # no limit logged: nothing caps it


def test_facts_never_seen_still_forecast():
    model = h.SchedulerHistory(c.PEAK_GPU_MEM_GB).fit(jobs(200))
    odd = jobs(1, **{c.QUEUE: ["new-queue"], c.TEAM: [None], c.GPU_TYPE: ["TPU-v9"], c.JOB_NAME: [None],
                     c.TIME_LIMIT_HOURS: [None], c.GPU_COUNT: [None]})
    p10, p50, p90 = model.intervals(odd)
    assert np.isfinite([p10, p50, p90]).all() and p10[0] < p50[0] < p90[0]


def test_little_history_gives_its_percentiles_and_none_gives_no_forecast():
    few = jobs(12)
    model = h.SchedulerHistory(c.RUNTIME_HOURS).fit(few)
    out = model.forecast(jobs(2, **{c.JOB_ID: ["a", "b"], c.QUEUE: ["gpu", "other"]}))
    y = few[c.RUNTIME_HOURS].to_numpy()
    # the queue has 12 (>= 5) jobs: its own percentiles; an unseen queue: all jobs' (here the same 12)
    assert out.row(0, named=True)["p50"] == pytest.approx(min(np.quantile(y, 0.5), 24.0))
    assert out["model"].to_list() == [h.QUANTILES] * 2 and "of 12 labelled job(s)" in out["ood_reason"][0]
    empty = h.SchedulerHistory(c.GPU_DEMAND_GFLOPS).fit(few)  # nothing measured compute
    assert empty.forecast(jobs(2)).height == 0


def test_intervals_say_how_little_is_known():
    """Under intervals.MIN_POOLED calibration jobs there is no conformal guarantee: a fixed x/÷ 4 band."""
    small = h.SchedulerHistory(c.RUNTIME_HOURS).fit(jobs(60))  # 15 calibration jobs
    big = h.SchedulerHistory(c.RUNTIME_HOURS).fit(jobs(400))
    new = jobs(2, seed=3)
    (s10, _, s90), (b10, _, b90) = small.intervals(new), big.intervals(new)
    assert (s90 / s10 > b90 / b10).all()
    assert "x/÷ 4: too few jobs to calibrate" in small.describe() and "conformal by queue" in big.describe()


def test_champions_do_not_learn_from_jobs_without_model_features():
    featured = jobs(3, **{c.JOB_ID: ["f1", "f2", "f3"], c.MODEL_TYPE: ["CNN"] * 3})
    both = pl.concat([jobs(5), featured], how="diagonal_relaxed")
    assert sorted(labelled(both, c.RUNTIME_HOURS, TrainOptions())[c.JOB_ID]) == ["f1", "f2", "f3"]
