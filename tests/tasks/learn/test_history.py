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


def test_the_chosen_run_time_trees_learn_again_from_every_labelled_job():
    """Issue 53 item 2: the calibration slice (a quarter) chooses the trees and their band, then the run-time trees
    learn again from all the jobs (the latest weeks weigh most: a quarter of them held out lost the most recent
    evidence); the other targets keep the trees of the three quarters."""
    runtime, memory = (h.SchedulerHistory(t, max_iter=40).fit(jobs(200)) for t in (c.RUNTIME_HOURS, c.PEAK_GPU_MEM_GB))
    assert runtime.chosen_ == h.MODEL and runtime.trained_rows_ == runtime.rows_ == 200
    assert memory.trained_rows_ == 150
    p10, p50, p90 = runtime.intervals(jobs(2, seed=3))  # the refit trees still tell the two scripts apart
    assert p50[0] > 5 * p50[1] and (p10 <= p50).all() and (p50 <= p90).all()


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
    assert "x/÷ 4: too few jobs to calibrate" in small.describe()
    assert "held-out errors by queue, the latest weeks weighted most" in big.describe()  # run time (issue 53)
    assert "conformal by queue" in h.SchedulerHistory(c.PEAK_GPU_MEM_GB, max_iter=20).fit(jobs(400)).describe()


def test_the_run_time_band_follows_the_latest_weeks_of_each_queue():
    """Issue 53 item 2: the P10 / P90 of the held-out log errors weighted as the trees learn, per queue with
    intervals.MIN_GROUP of them: a queue whose old errors were wide (+-2) and whose recent ones are narrow (+-0.1)
    gets the narrow band; a queue with fewer errors gets the pooled one."""
    old, recent = np.tile([-2.0, 2.0], 30), np.tile([-0.1, 0.1], 30)
    errors = np.r_[old, recent, np.zeros(10)]
    weights = np.r_[np.full(60, 0.001), np.ones(60), np.ones(10)]
    queues = np.array(["a"] * 120 + ["b"] * 10)
    by_queue, pooled = h._weighted_band(errors, weights, queues)
    assert set(by_queue) == {"a"} and by_queue["a"] == pytest.approx((-0.1, 0.1))
    assert pooled == pytest.approx((-0.1, 0.1))
    unweighted, _ = h._weighted_band(errors, np.ones(130), queues)
    assert unweighted["a"] == pytest.approx((-2.0, 2.0))  # the whole history's band


def test_champions_do_not_learn_from_jobs_without_model_features():
    featured = jobs(3, **{c.JOB_ID: ["f1", "f2", "f3"], c.MODEL_TYPE: ["CNN"] * 3})
    both = pl.concat([jobs(5), featured], how="diagonal_relaxed")
    assert sorted(labelled(both, c.RUNTIME_HOURS, TrainOptions())[c.JOB_ID]) == ["f1", "f2", "f3"]


# Issue 53 item 2: recent run times as of submission, recency, the remaining time of running jobs

def test_recent_facts_read_only_the_jobs_that_had_ended_before_a_job_was_submitted():
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    history = jobs(3, **{c.RUNTIME_HOURS: [1.0, 4.0, 100.0], c.JOB_NAME: ["a", "a", "a"],
                         c.SUBMITTED_AT: [t0, t0 + timedelta(hours=1), t0 + timedelta(hours=2)]})
    # ends: 1 h, 5 h, 102 h after t0. A job submitted at 6 h sees the first two; at 3 h only the first; at 0 h none
    new = jobs(3, **{c.JOB_ID: ["x", "y", "z"], c.SUBMITTED_AT: [t0 + timedelta(hours=6), t0 + timedelta(hours=3), t0]})
    facts = h.recent_facts(new, h.finished_runs(history))
    assert np.exp(facts["qg_last"].to_numpy()[:2]) == pytest.approx([4.0, 1.0])  # the latest to END before it
    assert np.exp(facts["qg_median"][0]) == pytest.approx(2.0)  # median of 1 h and 4 h
    assert facts["qg_last"][2] is None and facts["t_last"][0] is not None  # the team's too; nothing before t0
    # submissions (the history's and the new rows'), strictly before: in the hour before 6 h none, before 3 h the one at
    # 2 h, before t0 none; the previous one: y at 3 h, the history's at 2 h, none
    assert facts["qg_submitted_1h"].to_list() == [0.0, 1.0, 0.0]
    assert facts["qg_hours_since_submit"].to_list() == [3.0, 1.0, None]


def test_run_time_follows_the_latest_weeks_and_is_chosen_on_held_out_hours():
    # one queue, whose jobs ran 1 h until two weeks ago and 8 h since: the recency weights follow the change
    n = 400
    t0 = datetime(2026, 10, 1, tzinfo=UTC)
    times = [t0 + timedelta(hours=3 * i) for i in range(n)]  # 50 days
    recent = np.array([t > times[-1] - timedelta(days=14) for t in times])
    history = jobs(n, **{c.SUBMITTED_AT: times, c.RUNTIME_HOURS: np.where(recent, 8.0, 1.0), c.JOB_NAME: ["x"] * n,
                         c.TIME_LIMIT_HOURS: [None] * n})
    model = h.SchedulerHistory(c.RUNTIME_HOURS).fit(history)
    assert model.metric_ == "MAE" and "held-out MAE" in model.describe()
    p50 = model.predict(jobs(1, **{c.SUBMITTED_AT: [times[-1]], c.JOB_NAME: ["x"], c.TIME_LIMIT_HOURS: [None]}))
    assert p50[0] > 4.0  # the unweighted median of the history is 1 h (72% of its jobs)
    assert h.SchedulerHistory(c.PEAK_GPU_MEM_GB).fit(history).metric_ == "MAPE"  # other targets as before


def test_recent_facts_model_forecasts_from_what_finished_before_each_job():
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    n = 280  # one queue, its jobs' run times in runs of 5 alike: 1 h, 9 h, 1 h, ...; each known once ended (10 h apart)
    hours = np.where((np.arange(n) // 5) % 2 == 0, 1.0, 9.0)
    history = jobs(n, **{c.SUBMITTED_AT: [t0 + timedelta(hours=10 * i) for i in range(n)], c.RUNTIME_HOURS: hours,
                         c.JOB_NAME: ["x"] * n, c.TIME_LIMIT_HOURS: [None] * n})
    # two new jobs: one submitted as job 265 was (the run before it, jobs 260-264, ran 1 h), one after the last (9 h)
    new = jobs(2, **{c.JOB_ID: ["a", "b"], c.SUBMITTED_AT: [t0 + timedelta(hours=10 * 265), t0 + timedelta(hours=10 * n)],
                     c.JOB_NAME: ["x", "x"], c.TIME_LIMIT_HOURS: [None, None]})
    assert h.SchedulerHistory(c.RUNTIME_HOURS, recent=True).fit(history).predict(new) == pytest.approx([1.0, 9.0], rel=0.3)
    plain = h.SchedulerHistory(c.RUNTIME_HOURS).fit(history).predict(new)  # without them, one forecast for both
    assert plain[0] == plain[1]


def test_a_job_running_for_days_is_not_forecast_to_end_at_its_queue_median():
    rng = np.random.default_rng(0)
    n = 400  # one queue: most jobs ~2 h, one in ten runs ~10 days
    hours = np.where(np.arange(n) % 10 == 0, 240.0, 2.0) * np.exp(rng.normal(0, 0.2, n))
    history = jobs(n, **{c.RUNTIME_HOURS: hours})
    remaining = h.RemainingTime().fit(history)
    running = jobs(3, **{c.JOB_ID: ["new", "four_days", "beyond"]})
    p10, p50, p90 = remaining.intervals(running, np.array([0.5, 100.0, 2_000.0]))
    assert p50[0] == pytest.approx(np.median(hours) - 0.5, rel=0.1)  # just started: about the queue's median
    # four days in: one of the long runs; expected to end with them (~240 h), not in the queue median's 2 h
    assert 100.0 + p50[1] == pytest.approx(np.median(hours[hours > 100.0]), rel=0.01) and p50[1] > 100.0
    # ten days in: at least as long again (20 days), but never beyond the longest run of the queue (~17 days)
    longer = hours[hours > 240.0]
    assert len(longer) >= h.MIN_SURVIVORS and np.median(longer) < hours.max() < 480.0
    assert 240.0 + remaining.intervals(running.head(1), np.array([240.0]))[1][0] == pytest.approx(hours.max())
    assert (p10[:2] <= p50[:2]).all() and (p50[:2] <= p90[:2]).all() and (p10[:2] >= 0).all()
    # longer than any job of its queue: if it was forecast while pending, the hours it has run (0 remaining: nothing
    # says how long such a run goes); never forecast (first seen running): unknown, likely a stale record
    assert np.isnan(p50[2]) and np.isnan(p90[2])
    beyond = remaining.intervals(running.tail(1), np.array([2_000.0]), p50=np.array([2.0]))
    assert beyond[1][0] == 0.0 and beyond[2][0] == 0.0
    # a job's own P50 still ahead of it is kept
    assert remaining.intervals(running.head(1), np.array([1.0]), p50=np.array([5.0]))[1][0] == pytest.approx(4.0)


def test_the_run_time_ceiling_of_queue_and_gpus_is_each_groups_own_median():
    """bench_real_runtime's oracle (issue 53 item 2): each queue x GPU count's median of the measured jobs themselves,
    the least MAE any forecast from those two facts can reach on them; checked by hand."""
    from tests.benchmarks.bench_real_runtime import oracle_median

    rows = pl.DataFrame({c.QUEUE: ["a", "a", "a", "a", "b"], c.GPU_COUNT: [1, 1, 1, 2, 1],
                         c.RUNTIME_HOURS: [1.0, 3.0, 8.0, 5.0, 2.0]})
    got = oracle_median(rows)
    assert got.tolist() == [3.0, 3.0, 3.0, 5.0, 2.0]
    y = rows[c.RUNTIME_HOURS].to_numpy()
    assert np.abs(got - y).sum() < np.abs(np.where(got == 3.0, 4.0, got) - y).sum()  # the mean of a's 1-GPU jobs errs more


# Issue 53 item 2: a burst's siblings (same queue, account, name pattern, GPUs, submitted within an hour) run alike

def test_a_burst_moves_the_run_time_toward_what_its_siblings_had_run_by_the_forecasts_time():
    t0 = datetime(2026, 11, 20, tzinfo=UTC)
    minutes = lambda m: t0 + timedelta(minutes=m)  # noqa: E731
    # three siblings of "x" (sweep_*, within an hour of it); one 2.5 h away, one of another script, and "x" itself
    # (a record of it must never count)
    ctx = jobs(6, **{c.JOB_ID: ["s1", "s2", "s3", "far", "other", "x"],
                     c.JOB_NAME: ["sweep_1", "sweep_2", "sweep_3", "sweep_4", "eval_1", "sweep_9"],
                     c.SUBMITTED_AT: [minutes(0), minutes(10), minutes(20), minutes(180), minutes(5), minutes(30)],
                     c.RUNTIME_HOURS: [4.0, 4.0, 16.0, 4.0, 1.0, 100.0]})
    x = jobs(1, **{c.JOB_ID: ["x"], c.JOB_NAME: ["sweep_9"], c.SUBMITTED_AT: [minutes(30)]})
    prior = np.array([1.0])
    # at 6 h: s1 and s2 finished (4 h), s3 still running (5 h 40 min so far): median of log 4, 4, 5.67 h is log 4;
    # three siblings against the P50's one: 4 h ^ (3/4)
    moved, n = h.burst_p50(x, h.burst_siblings(ctx, minutes(360)), prior)
    assert n[0] == 3 and moved[0] == pytest.approx(4.0 ** 0.75)
    # at 1 h none has finished: the hours so far (1 h, 50 min, 40 min) are lower bounds, they never lower the P50
    moved, n = h.burst_p50(x, h.burst_siblings(ctx, minutes(60)), prior)
    assert n[0] == 3 and moved[0] == 1.0
    assert h.burst_p50(x, h.burst_siblings(ctx, minutes(60)), np.array([0.1]))[0][0] > 0.1  # ... but may raise it
    # before any was submitted: nothing known, the P50 kept; a job submitted after the time is not known either
    assert h.burst_p50(x, h.burst_siblings(ctx, minutes(-1)), prior)[0][0] == 1.0
    late = h.burst_siblings(ctx, minutes(15))
    assert sorted(late[c.JOB_ID]) == ["other", "s1", "s2"] and not late[h.DONE].any()
    # every job finished (the nightly's history, no time): 4, 4, 16 h -> median 4 h; "x"'s own 100 h left out
    assert h.burst_p50(x, h.burst_siblings(ctx), prior)[0][0] == pytest.approx(4.0 ** 0.75)


def test_a_running_jobs_burst_counts_only_the_siblings_that_ran_longer():
    rng = np.random.default_rng(0)
    history = jobs(400, **{c.RUNTIME_HOURS: np.where(np.arange(400) % 10 == 0, 240.0, 2.0) * np.exp(rng.normal(0, 0.2, 400))})
    t0 = datetime(2026, 11, 25, tzinfo=UTC)
    burst = jobs(5, **{c.JOB_ID: [f"s{i}" for i in range(5)], c.JOB_NAME: [f"sweep_{i}" for i in range(5)],
                       c.SUBMITTED_AT: [t0] * 5, c.RUNTIME_HOURS: [20.0, 20.0, 20.0, 3.0, 3.0]})
    running = jobs(1, **{c.JOB_ID: ["r"], c.JOB_NAME: ["sweep_9"], c.SUBMITTED_AT: [t0]})
    remaining = h.RemainingTime().fit(history)
    elapsed = np.array([5.0])
    p10, p50, p90 = remaining.intervals(running, elapsed)
    s10, s50, s90 = remaining.intervals(running, elapsed, siblings=h.burst_siblings(burst))
    # the 3 h siblings ended before it had run 5 h: only the three of 20 h count, against its own total's one
    assert 5.0 + s50[0] == pytest.approx(np.exp((3 * np.log(20.0) + np.log(5.0 + p50[0])) / 4))
    assert s10[0] / p10[0] == pytest.approx(s50[0] / p50[0]) and s90[0] / p90[0] == pytest.approx(s50[0] / p50[0])


def test_the_nightlys_run_time_of_a_job_without_features_moves_toward_its_bursts_finished_jobs():
    from gpucast.tasks.learn import score

    t0 = datetime(2026, 11, 20, tzinfo=UTC)
    # the burst's three jobs started at t0 and ran 20 h, 40 h, 40 h (no end logged: submitted_at + run time)
    burst = jobs(3, **{c.JOB_ID: ["s1", "s2", "s3"], c.JOB_NAME: ["sweep_1", "sweep_2", "sweep_3"],
                       c.SUBMITTED_AT: [t0] * 3, c.RUNTIME_HOURS: [20.0, 40.0, 40.0], c.TIME_LIMIT_HOURS: [None] * 3})
    history = pl.concat([jobs(200), burst])
    # "p" of the burst, "q" of no burst (another script)
    new = jobs(2, **{c.JOB_ID: ["p", "q"], c.JOB_NAME: ["sweep_9", "solo_1"], c.SUBMITTED_AT: [t0 + timedelta(minutes=30)] * 2,
                     c.TIME_LIMIT_HOURS: [None] * 2})
    model = h.SchedulerHistory(c.RUNTIME_HOURS).fit(history)
    plain = model.predict(new)
    made = score.history_forecasts(c.RUNTIME_HOURS, new, lambda: history, "score-1", 1, say=lambda _: None)
    assert made["p50"].to_list() == pytest.approx([np.exp((3 * np.log(40.0) + np.log(plain[0])) / 4), plain[1]])
    assert made["ood_reason"][0].endswith(h.BURST_REASON.format(n=3)) and "burst" not in made["ood_reason"][1]
    # a backfill as of t0 + 25 h (review 57 S1): s1 had ended (20 h), s2 and s3 had run 25 h so far, their 40 h not
    # yet known; most of the burst still running, their hours so far only raise the P50 (a lower bound)
    then = score.history_forecasts(c.RUNTIME_HOURS, new, lambda: history, "score-1", 1, say=lambda _: None,
                                   as_of=t0 + timedelta(hours=25))
    moved = np.exp((3 * np.log(25.0) + np.log(plain[0])) / 4)  # the median of log 20, log 25, log 25
    assert then["p50"].to_list() == pytest.approx([max(moved, plain[0]), plain[1]])
    # the nightly as the warehouse holds that time (issue 53 item 2): s1 finished, s2 and s3 RUNNING since t0
    # (`training.read_running`: updated_at their start, no run time; known_at the warehouse's clock, t0 + 25 h). The
    # staged running jobs are the lower bounds a backfill reads: the same P50; without them (the nightly before) only
    # s1's 20 h is known and the P50 falls toward it, though most of its burst still runs
    finished = pl.concat([jobs(200), burst.head(1)])
    going = burst.tail(2).with_columns(pl.lit("RUNNING").alias(c.STATUS), pl.lit(None, pl.Float64).alias(c.RUNTIME_HOURS),
                                       pl.lit(t0).alias(c.UPDATED_AT), pl.lit(t0 + timedelta(hours=25)).alias(h.KNOWN_AT))
    staged = score.by_history(model, new, finished, going, t0 + timedelta(hours=27))
    assert staged["p50"].to_list() == pytest.approx(then["p50"].to_list())  # counted to the clock, not the run's time
    assert "3 job(s)" in staged["ood_reason"][0]
    before = score.by_history(model, new, finished, None, t0 + timedelta(hours=27))
    assert before["p50"][0] == pytest.approx(np.exp((np.log(20.0) + np.log(plain[0])) / 2))
    assert before["p50"][0] < staged["p50"][0] and "1 job(s)" in before["ood_reason"][0]
    # at t0 none had started (a start at the forecasts' time is not before it): no burst, the trees' P50
    assert score.by_history(model, new, finished, going, t0)["p50"].to_list() == pytest.approx(list(plain))


def test_a_burst_is_read_in_chunks_of_rows_and_at_most_a_bounded_sample_of_siblings(monkeypatch):
    t0 = datetime(2026, 11, 20, tzinfo=UTC)
    n = 250  # one script's array: 250 finished runs in the same 50 minutes, 3 h or 12 h alternately
    ctx = jobs(n, **{c.JOB_ID: [f"s{i}" for i in range(n)], c.JOB_NAME: ["sweep"] * n,
                     c.SUBMITTED_AT: [t0 + timedelta(seconds=12 * i) for i in range(n)],
                     c.RUNTIME_HOURS: np.where(np.arange(n) % 2 == 0, 3.0, 12.0)})
    rows = jobs(3, **{c.JOB_ID: ["a", "b", "c"], c.JOB_NAME: ["sweep"] * 3,
                      c.SUBMITTED_AT: [t0 + timedelta(minutes=m) for m in (10, 20, 200)]})
    siblings = h.burst_siblings(ctx)
    whole, n_whole = h.burst_p50(rows, siblings, np.ones(3))
    monkeypatch.setattr(h, "BURST_CHUNK_ROWS", 1)
    assert h.burst_p50(rows, siblings, np.ones(3))[0].tolist() == whole.tolist()  # a row at a time: the same
    # the bucket's 250 siblings read as an even sample of at most 100: every 3rd, 84 (both run times kept); "c", 3 h
    # later, has none
    assert n_whole.tolist() == [84, 84, 0] and whole[2] == 1.0 and 3.0 ** (84 / 85) < whole[0] < 12.0
    # only the siblings submitted before the row (a FIFO queue's bound, bench_real_runtime.py): of the 84, those of
    # the first 10 / 20 minutes
    assert h.burst_p50(rows, siblings, np.ones(3), before_only=True)[1].tolist() == [17, 34, 0]
