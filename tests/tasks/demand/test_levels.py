"""Issue 53 items 1 and 3 on small series: the level models, a short history cross-validated, the band from the
cross-validation errors, and the site total's own P90 (not the series' P90s summed)."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import polars as pl
import pytest

from gpucast.tasks.demand import forecast as module
from gpucast.tasks.demand.backtest import backtest_demand, relative_mae
from gpucast.tasks.demand.models import LevelBlend, LongLevel, RobustLevel, WeekdayProfile, weekday_effects

START = date(2026, 9, 6)


def shifting(days: int, seed: int = 0, queue: str = "q", level: float = 60.0, shift: int = 21) -> pl.DataFrame:
    """A count around a level that doubles after `shift` days, no weekly rhythm: the shape of a real cluster's day
    (tests/benchmarks/bench_real_demand.py), where copying one noisy day of last week doubles the noise."""
    rng = np.random.default_rng(seed)
    mean = np.where(np.arange(days) < shift, level, 2 * level)
    jobs = rng.negative_binomial(6, 6 / (6 + mean)).astype(float)
    return pl.DataFrame({"day": [START + timedelta(days=d) for d in range(days)], "queue": queue, "gpu_type": None,
                         "jobs_submitted": jobs, "gpu_hours": jobs * 3.0}, schema_overrides={"gpu_type": pl.String})


def test_weekday_effects_keep_a_clear_rhythm_and_drop_noise():
    rng = np.random.default_rng(1)
    rhythm = np.tile([0.0, 0.0, 0.0, 0.0, 0.0, -1.4, -1.4], 6)  # weekends a quarter of a weekday, in log space
    clear = weekday_effects(4.0 + rhythm + rng.normal(0, 0.1, rhythm.size))
    assert clear[5] == pytest.approx(-1.0, abs=0.15) and clear[0] == pytest.approx(0.4, abs=0.15)  # centred: -1.4 x 5/7
    noise = weekday_effects(4.0 + rng.normal(0, 0.5, 42))
    assert np.abs(noise).max() < 0.15  # shrunk to (nearly) nothing: no weekday is told apart from noise
    assert WeekdayProfile().forecast(4.0 + rhythm, 7)["mean"][5] < WeekdayProfile().forecast(4.0 + rhythm, 7)["mean"][0]


def test_the_level_blend_follows_a_level_shift_and_needs_a_week():
    y = np.log1p(np.r_[np.full(14, 50.0), np.full(7, 100.0)])
    assert np.expm1(LevelBlend().forecast(y, 3)["mean"]) == pytest.approx([100.0] * 3, rel=0.15)
    with pytest.raises(ValueError, match="needs 7"):
        LevelBlend().forecast(y[:5], 3)


def test_the_long_level_reads_two_weeks_and_is_steadier_on_a_steady_heavy_tailed_series():
    """The long level is the mean of the last 14 days (no weekday rhythm here: the effects shrink to ~0); on a level
    that holds, with a day's log GPU-hours as noisy as the real trace's (sd 1.2), it strays less from the true level
    than a one-week mean (`WeekdayProfile`); a GPU-hours candidate only (on jobs a day it measured worse)."""
    y = np.r_[np.full(7, 9.0), np.tile([1.0, 3.0], 7)]  # the last 14 days average 2.0
    assert LongLevel().forecast(y, 3)["mean"] == pytest.approx([2.0] * 3, abs=0.05)
    with pytest.raises(ValueError, match="needs 7"):
        LongLevel().forecast(y[:5], 3)
    stray = np.zeros(2)
    for seed in range(20):
        logged = np.random.default_rng(seed).normal(6.0, 1.2, 35)
        stray += [abs(m().forecast(logged, 1)["mean"][0] - 6.0) for m in (LongLevel, WeekdayProfile)]
    assert stray[0] < 0.85 * stray[1]
    assert module._long_level in module.CANDIDATES and module._long_level in module.SIMPLE
    assert module._long_level not in module.JOB_CANDIDATES


def test_the_robust_level_reads_three_weeks_median_and_a_burst_does_not_move_it():
    """Session 10: the robust level is the median of the last 21 days (less their weekday effects): a burst of big jobs
    on 3 of the last 14 days (log GPU-hours +4) moves the long level's mean and leaves the median at the level; on a
    level that holds, with heavy-tailed days (a t on 2 degrees of freedom, as big multi-GPU jobs make them), it strays
    less from the true level than the long level does. A GPU-hours candidate, offered on a short history too."""
    y = np.r_[np.full(14, 1.0), np.full(21, 5.0)]
    y[[-2, -6, -11]] = 9.0
    assert RobustLevel().forecast(y, 3)["mean"] == pytest.approx([5.0] * 3, abs=0.05)
    assert LongLevel().forecast(y, 1)["mean"][0] > 5.5
    assert RobustLevel().forecast(np.r_[np.full(14, 1.0), np.full(21, 5.0)], 2)["mean"] == pytest.approx([5.0] * 2)
    with pytest.raises(ValueError, match="needs 7"):
        RobustLevel().forecast(y[:5], 3)
    stray = np.zeros(2)
    for seed in range(30):
        logged = 6.0 + 0.6 * np.random.default_rng(seed).standard_t(2, 42)
        stray += [abs(m().forecast(logged, 1)["mean"][0] - 6.0) for m in (RobustLevel, LongLevel)]
    assert stray[0] < 0.85 * stray[1]
    assert module._robust_level in module.CANDIDATES and module._robust_level in module.SIMPLE
    assert module._robust_level not in module.JOB_CANDIDATES


def test_a_history_too_short_to_cross_validate_gets_a_band_one_wild_day_does_not_set():
    """Session 10: 16 days, too short to cross-validate, keep seasonal naive; its band comes from its own past errors
    (each day less the same weekday a week before, in log space) read by their median absolute value. Alibaba's trace
    begins with a day 20x the others (the jobs running when it began): from the series' own root mean square error that
    one day set P90 at ~6.6x P50 (the plan's P90 total 7.74x its P50); read robustly, under 3x and still a band."""
    rng = np.random.default_rng(3)
    hours = 250_000 * np.exp(rng.normal(0, 0.3, 16))
    hours[0] = 6_000_000
    daily = pl.DataFrame({"day": [START + timedelta(days=d) for d in range(16)], "queue": "site", "gpu_type": None,
                          "jobs_submitted": np.full(16, 2000.0), "gpu_hours": hours}, schema_overrides={"gpu_type": pl.String})
    out = module.forecast_demand(daily, START + timedelta(days=15), 14)
    assert set(out["method"]) == {module.SEASONAL_NAIVE} and "too short" in out["fallback_reason"][0]
    ratio = out["gpu_hours_p90"] / out["gpu_hours_p50"]
    assert (ratio > 1.1).all() and (ratio < 3.0).all()
    assert (out["gpu_hours_p10"] < out["gpu_hours_p50"]).all()
    errors = module._fallback_errors(hours, module.SEASONAL_NAIVE)
    assert len(errors) == 9 and errors[0] == pytest.approx(np.log1p(hours[7]) - np.log1p(hours[0]))


@pytest.mark.parametrize("kind", ["idle most days", "steady"])
def test_a_short_history_that_repeats_its_week_still_gets_a_band(kind):
    """Review 60 M1: a young queue idle most days, or a steady reservation, repeats the week before on most days, so
    the median of its week-on-week errors is 0; read robustly that was a band of zero width (P10 = P50 = P90, and a
    site of one such queue planned its P90 at its P50). A zero median keeps the model's own band."""
    if kind == "steady":
        hours = np.r_[np.full(15, 100.0), 400.0]
    else:
        hours = np.zeros(16)
        hours[[1, 4, 8, 13]] = [120.0, 300.0, 80.0, 500.0]
    daily = pl.DataFrame({"day": [START + timedelta(days=d) for d in range(16)], "queue": "new", "gpu_type": None,
                          "jobs_submitted": np.where(hours > 0, 3.0, 0.0), "gpu_hours": hours},
                         schema_overrides={"gpu_type": pl.String})
    assert np.median(np.abs(module._fallback_errors(hours, module.SEASONAL_NAIVE))) == 0
    out = module.forecast_demand(daily, START + timedelta(days=15), 14)
    assert set(out["method"]) == {module.SEASONAL_NAIVE}
    busy = out.filter(pl.col("gpu_hours_p50") > 0)
    assert busy.height > 0 and (busy["gpu_hours_p90"] > busy["gpu_hours_p50"]).all()


def test_a_shifting_count_beats_seasonal_naive():
    """Issue 53: a count whose level shifts is forecast by a model (no fallback), and better than seasonal naive, which
    copies one noisy day of last week (which model: `test_a_long_count_is_forecast_by_the_mean_of_its_two_best`)."""
    daily = shifting(56, shift=14)
    out = module.forecast_demand(daily, START + timedelta(days=55), 14)
    assert module.SEASONAL_NAIVE not in set(out["jobs_method"]) and out["jobs_fallback_reason"].is_null().all()
    rows = backtest_demand(daily, START + timedelta(days=55), 14, origins=3)  # origins 4-6 weeks in: after the shift
    assert relative_mae(rows)["jobs_submitted"] <= 0.85


def test_a_long_count_is_forecast_by_the_mean_of_its_two_best():
    """Session 17 (C3j): on a long history (3 folds of 14 days) the jobs' choice is the mean, in log space, of the two
    candidates with the lowest fold MAE that beat seasonal naive, banded by that mean's own fold errors; a short history
    keeps its single choice, and GPU-hours' candidates choose one."""
    y = shifting(56, shift=14)["jobs_submitted"].to_numpy()
    h, windows = module._folds(len(y), 14)
    assert (h, windows) == (14, module.CV_WINDOWS)
    folds = module.cv_errors(y, [*module.JOB_CANDIDATES, module._seasonal_naive], h, windows)
    naive = folds.pop(module.SEASONAL_NAIVE)
    first, second = sorted(name for _, name in sorted((f.mae, name) for name, f in folds.items() if f.mae < naive.mae)[:2])
    choice = module.choose(y, 14, module.JOB_CANDIDATES)
    assert choice.method == f"BestTwo({first}, {second})" and choice.reason is None  # named alphabetically
    # its band's errors are the pair's own, cross-validated as any candidate's (review 67b D3)
    own = module.cv_errors(y, [choice.model], h, windows)[choice.method]
    assert choice.errors == pytest.approx(own.log_errors)
    factories = {module._alias(f()): f for f in module.JOB_CANDIDATES}
    logged = np.log1p(y)
    mean = (factories[first]().forecast(y=logged, h=14)["mean"] + factories[second]().forecast(y=logged, h=14)["mean"]) / 2
    assert module._predict(choice.model, y, 14)[1] == pytest.approx(np.expm1(mean))
    assert module.choose(y[:25], 14, module.JOB_CANDIDATES).method == "LevelBlend"  # short: one fold, one choice
    assert not module.choose(y, 14).method.startswith("BestTwo")  # GPU-hours' set


def test_a_short_history_is_cross_validated_on_the_simple_candidates():
    """25 days: too short for folds of 3 weeks and 14 days, so a week ahead from folds of 2 weeks, on the candidates
    that fit nothing (AutoETS chosen by one noisy week lost to seasonal naive on the real trace)."""
    y = shifting(25)["jobs_submitted"].to_numpy()
    choice = module.choose(y, 14, module.JOB_CANDIDATES)
    assert choice.method == "LevelBlend" and choice.reason is None and len(choice.errors) == 7
    seen = []
    real = module.cv_errors
    module_cv = lambda y, factories, h, windows: seen.extend(module._alias(f()) for f in factories) or real(y, factories, h, windows)  # noqa: E731
    try:
        module.cv_errors = module_cv
        module.choose(y, 14, module.JOB_CANDIDATES)
    finally:
        module.cv_errors = real
    assert "AutoETS" not in seen and "LevelBlend" in seen
    short = module.choose(y[:16], 14)  # 16 days: folds of 2 weeks leave 2 days to forecast, under 3
    assert short.method == module.SEASONAL_NAIVE and "too short to cross-validate" in short.reason


@pytest.mark.parametrize("days", [1, 2])
def test_a_plan_of_one_or_two_days_still_cross_validates_a_long_history(days):
    # the short-history floor of 3 days to forecast applies to a short history, not to a short plan
    choice = module.choose(shifting(60)["jobs_submitted"].to_numpy(), days, module.JOB_CANDIDATES)
    assert choice.reason is None or "too short" not in choice.reason
    assert len(choice.errors) == days * module.CV_WINDOWS


def test_the_band_comes_from_the_cross_validation_errors_and_covers():
    """The P10-P90 band: a Student t on the chosen model's fold errors, so a noisier series gets a wider band and the
    backtest covers about 80% of days, not all of them at many times the median."""
    calm, wild = shifting(63, seed=2), shifting(63, seed=2).with_columns(pl.col("jobs_submitted") ** 1.5)
    as_of = START + timedelta(days=62)
    width = [(f["jobs_p90"] / f["jobs_p50"]).mean() for f in (module.forecast_demand(d, as_of, 14) for d in (calm, wild))]
    assert 1.0 < width[0] < width[1] < 3.0
    rows = pl.concat([backtest_demand(shifting(63, seed=s, queue=f"q{s}"), as_of, 14, origins=4) for s in range(4)])
    coverage = rows.select(pl.col("actual_jobs").is_between("jobs_p10", "jobs_p90").mean()).item()
    assert coverage >= 0.6 and (rows["jobs_p90"] / rows["jobs_p50"]).median() < 3.0  # covers, and not by width


def test_the_total_has_its_own_p90_and_the_series_shares_add_up_to_it():
    """Eight independent queues: the total's P90 is well under the P90s summed (their noise partly cancels), above
    the P50s summed; each series' `gpu_hours_p90_of_total` adds up, per day, to the total's P90."""
    daily = pl.concat([shifting(49, seed=s, queue=f"q{s}") for s in range(8)])
    as_of = START + timedelta(days=48)
    per_series, total = module.forecast_demand(daily, as_of, 7), module.forecast_total(daily, as_of, 7)
    assert total.columns == list(module.TOTAL_COLUMNS) and total.height == 7
    summed = per_series.group_by("day").agg(pl.col("gpu_hours_p50", "gpu_hours_p90").sum()).sort("day")
    assert (total["gpu_hours_p90"] < summed["gpu_hours_p90"]).all()
    assert (total["gpu_hours_p90"] > summed["gpu_hours_p50"]).all()
    shared = module.with_total_share(per_series, total).group_by("day").agg(pl.col(module.SHARE).sum()).sort("day")
    assert shared[module.SHARE].to_list() == pytest.approx(total["gpu_hours_p90"].to_list())
    # a day the total does not cover keeps the series' own P90 (a forecast before the total: the old sum)
    alone = module.with_total_share(per_series, total.filter(pl.col("horizon") > 1))
    first = alone.filter(pl.col("horizon") == 1)
    assert first[module.SHARE].to_list() == first["gpu_hours_p90"].to_list()


def test_the_series_shares_of_the_totals_p50_add_up_to_it_split_as_the_p90_is():
    """Session 14 (issue 53 item 3): the pair of the P90's share: each series' `gpu_hours_p50_of_total` is the total's
    own P50 split by the series' P50s (as the P90 is), so per day they add up to the total's P50, not to the series'
    P50s summed (a second forecast); a day the total does not cover keeps the series' own P50."""
    per_series = pl.DataFrame({"day": [START, START, START + timedelta(days=1)], "queue": ["a", "b", "a"],
                               "gpu_type": ["unknown"] * 3, "gpu_hours_p50": [10.0, 30.0, 5.0],
                               "gpu_hours_p90": [40.0, 90.0, 20.0]})
    total = pl.DataFrame({"day": [START], "gpu_hours_p50": [80.0], "gpu_hours_p90": [120.0]})
    shared = module.with_total_share(per_series, total)
    assert shared[module.SHARE_P50].to_list() == [20.0, 60.0, 5.0]  # 80 split 1:3; day 2: a's own P50
    assert shared[module.SHARE].to_list() == [30.0, 90.0, 20.0]  # 120 split 1:3, as before


def test_a_queue_of_several_gpu_types_has_its_own_p90_and_its_series_shares_add_up_to_it():
    """Session 9 (issue 53 item 3): a queue of four independent GPU-type series is forecast as a series of its own
    (`forecast_queue_totals`): its P90 is under its series' P90s summed, above their P50s summed, and each series'
    `gpu_hours_p90_of_queue` adds up, per day and queue, to it; a queue of one series is that series' forecast."""
    several = pl.concat([shifting(49, seed=s, queue="big").with_columns(pl.lit(f"t{s}").alias("gpu_type")) for s in range(4)])
    daily = pl.concat([several, shifting(49, seed=9, queue="one")])
    as_of = START + timedelta(days=48)
    per_series = module.forecast_demand(daily, as_of, 7)
    queues = module.forecast_queue_totals(daily, as_of, 7, per_series)
    assert queues.columns == [*module.QUEUE_COLUMNS, module.RAISED_TO] and queues.height == 14
    big = queues.filter(pl.col("queue") == "big").sort("day")
    summed = per_series.filter(pl.col("queue") == "big").group_by("day").agg(pl.col("gpu_hours_p50", "gpu_hours_p90").sum()).sort("day")
    assert (big["gpu_hours_p90"] < summed["gpu_hours_p90"]).all() and (big["gpu_hours_p90"] > summed["gpu_hours_p50"]).all()
    one = per_series.filter(pl.col("queue") == "one").select(module.QUEUE_COLUMNS)
    assert queues.filter(pl.col("queue") == "one").drop(module.RAISED_TO).equals(one)
    assert queues.filter(pl.col("queue") == "one")[module.RAISED_TO].is_null().all()
    shared = module.with_queue_share(per_series, queues).group_by("day", "queue").agg(pl.col(module.QUEUE_SHARE).sum())
    got = shared.join(queues.select("day", "queue", "gpu_hours_p90"), on=["day", "queue"])
    assert got[module.QUEUE_SHARE].to_list() == pytest.approx(got["gpu_hours_p90"].to_list())


def test_a_total_is_never_forecast_below_one_of_its_parts():
    """Newcomer 26 P2: the site's total and each queue's are forecast apart, and the demo's site P90 (4,388 GPU-hours)
    fell below one queue's own (4,815) on a day. A total of non-negative parts is at least each part, so each of its
    quantiles is raised to the largest part's where below, `raised_to` naming it; a day no part exceeds is untouched,
    the parts never move, a quantile the total lacks (jobs) stays null."""
    total = pl.DataFrame({"day": [START, START + timedelta(days=1)], "gpu_hours_p10": [200.0, 100.0],
                          "gpu_hours_p50": [1500.0, 900.0], "gpu_hours_p90": [4388.5, 3000.0],
                          "jobs_p10": [None, 5.0], "jobs_p50": [None, 9.0], "jobs_p90": [None, 12.0]},
                         schema_overrides={"jobs_p10": pl.Float64, "jobs_p50": pl.Float64, "jobs_p90": pl.Float64})
    queues = pl.DataFrame({"day": [START] * 2 + [START + timedelta(days=1)] * 2, "queue": ["a100", "l4"] * 2,
                           "gpu_hours_p10": [250.0, 10.0, 50.0, 20.0], "gpu_hours_p50": [1400.0, 300.0, 600.0, 200.0],
                           "gpu_hours_p90": [4814.8, 900.0, 2000.0, 800.0], "jobs_p10": [1.0, 1.0, 2.0, 1.0],
                           "jobs_p50": [2.0, 2.0, 4.0, 3.0], "jobs_p90": [3.0, 3.0, 14.0, 5.0]})
    got = module.at_least_its_parts(total, queues, ["day"], "queue").sort("day")
    assert got["gpu_hours_p10"].to_list() == [250.0, 100.0] and got["gpu_hours_p50"].to_list() == [1500.0, 900.0]
    assert got["gpu_hours_p90"].to_list() == [4814.8, 3000.0]
    assert got["jobs_p10"].to_list() == [None, 5.0] and got["jobs_p90"].to_list() == [None, 14.0]  # day 2: a100's jobs
    assert got[module.RAISED_TO].to_list() == ["a100", "a100"]
    assert (got["gpu_hours_p10"] <= got["gpu_hours_p50"]).all() and (got["gpu_hours_p50"] <= got["gpu_hours_p90"]).all()
    untouched = module.at_least_its_parts(total.with_columns(pl.col("gpu_hours_p90") * 10, pl.col("gpu_hours_p10") * 10,
                                                             pl.col("jobs_p90") * 10), queues, ["day"], "queue")
    assert untouched[module.RAISED_TO].is_null().all()


def test_the_level_ceiling_is_each_series_median_of_its_own_forecast_days():
    """bench_real_demand's oracle (issue 53): per origin and series, the median of the days forecast is the constant of
    least absolute error, so its relative MAE bounds what any level forecast reaches; checked by hand on 2 series."""
    from tests.benchmarks.bench_real_demand import level_ceiling

    rows = pl.DataFrame({"origin": [START] * 5, "queue": ["a", "a", "a", "b", "b"],
                         "actual": [1.0, 2.0, 10.0, 4.0, 6.0], "seasonal_naive": [0.0, 0.0, 0.0, 5.0, 5.0],
                         "actual_jobs": [3.0, 3.0, 3.0, 1.0, 1.0], "jobs_seasonal_naive": [1.0, 1.0, 1.0, 2.0, None]})
    got = level_ceiling(rows)
    # a: median 2 errs 1 + 0 + 8, naive 13; b: median 5 errs 1 + 1, naive 1 + 1
    assert got["actual"] == pytest.approx(11 / 15)
    assert got["actual_jobs"] == pytest.approx(0.0)  # a constant count: its median is exact (b's unscored day left out)
    mean_level = (abs(13 / 3 - 1) + abs(13 / 3 - 2) + abs(13 / 3 - 10) + 2) / 15
    assert got["actual"] < mean_level  # the median beats another constant, the mean


def test_the_days_a_trace_of_finished_jobs_cuts_short_are_weighted_by_gpu_hours(tmp_path):
    """bench_real_demand's complete days (issue 53 session 11): `settle_days` is the P95 of the run times weighted by
    GPU-hours, not by jobs (a hundred 1-hour jobs and one 8-GPU job of 2.5 days: 3 days, where a count would say 1
    hour), and `complete` leaves out the same last days of every series."""
    from tests.benchmarks.bench_real_demand import complete, settle_days

    trace = tmp_path / "trace.csv"
    pl.DataFrame({"duration": [3_600] * 100 + [int(2.5 * 86_400)], "num_gpu": [1] * 100 + [8]}).write_csv(trace)
    assert settle_days(trace) == 3
    days = [START + timedelta(days=d) for d in range(6)]
    rows = pl.DataFrame({"day": days * 2, "queue": ["a"] * 6 + ["b"] * 6})
    kept = complete(rows, days[-1], 3)
    assert kept["day"].max() == days[2] and kept.group_by("queue").len()["len"].to_list() == [3, 3]


class _Offset:
    """A stub candidate: the last week's mean in log space plus a fixed offset (a level read too high or too low)."""

    def __init__(self, offset: float, alias: str):
        self.offset, self.alias = offset, alias

    def forecast(self, y, h, level=None):
        return {"mean": np.full(h, np.mean(np.asarray(y)[-7:]) + self.offset)}


def test_the_combination_weighs_its_members_by_inverse_cross_validated_mae():
    """Session 13: the members' log forecasts averaged with weights 1 / their fold MAE on the history given (the same
    folds `choose` reads), a member that fails left out; and it is a GPU-hours candidate on a long history only."""
    high, low, broken = (lambda: _Offset(0.2, "High")), (lambda: _Offset(-0.6, "Low")), (lambda: _Offset(np.nan, "Nan"))
    y = np.log1p(np.full(56, 100.0))
    got = module.Combination((high, low, broken)).forecast(y, 14)["mean"]
    h, windows = module._folds(56, 14)
    folds = module.cv_errors(np.expm1(y), (high, low), h, windows)
    w_high, w_low = 1 / folds["High"].mae, 1 / folds["Low"].mae
    assert w_high > 2 * w_low  # the closer member weighs more
    assert got == pytest.approx(np.full(14, np.log1p(100.0) + (0.2 * w_high - 0.6 * w_low) / (w_high + w_low)))
    assert module._combination in module.CANDIDATES and module._combination not in module.SIMPLE
    assert module._combination not in module.JOB_CANDIDATES and module._combination not in module.MEMBERS


def test_on_alibabas_series_the_combination_is_chosen_where_the_folds_took_autoets_and_errs_half():
    """Session 13, a real series (tests/data/alibaba_spot_gpu_daily): from 121 days of history the folds alone took
    AutoETS, whose next 14 days erred 46.7k GPU-hours a day (seasonal naive 57.6k); the combination of the candidates,
    weighted by inverse fold error, is chosen instead and errs 22.2k (docs/planners.md, Session 13)."""
    from pathlib import Path

    table = pl.read_csv(Path(__file__).parents[2] / "data" / "alibaba_spot_gpu_daily" / "daily_summary.csv").sort("submit_day")
    y = (table["gpu_seconds"] / 3600).to_numpy()
    history, actual = y[:121], y[121:135]
    assert module.choose(history, 14, module.MEMBERS).method == "AutoETS"  # the choice among the members alone
    choice = module.choose(history, 14)
    assert choice.method == "Combination" and choice.reason is None and len(choice.errors) == 14 * module.CV_WINDOWS
    p50 = module._predict(choice.model, history, 14)[1]
    ets = module._predict(module._auto_ets, history, 14)[1]
    naive = np.tile(history[-7:], 2)
    assert np.abs(p50 - actual).mean() < 0.6 * np.abs(ets - actual).mean()
    assert np.abs(p50 - actual).mean() < 0.5 * np.abs(naive - actual).mean()


def test_a_short_history_of_gpu_hours_is_forecast_by_the_levels_combined_with_autoets():
    """Session 13: under `CV_WINDOWS` full folds the GPU-hours are not chosen among the levels by a fold or two of
    noise but forecast by their `Combination` with AutoETS (weighted by inverse fold MAE, AutoETS's weekly rhythm kept
    at its weight), cross-validated against seasonal naive alone. On 12 seeded 4-week histories with a weekend
    rhythm it errs less over the next 14 days, on average, than the choice among the levels did."""
    assert module.SHORT_MEMBERS == (module._level_blend, module._long_level, module._robust_level, module._auto_ets)
    seen = []
    real = module.cv_errors
    module_cv = lambda y, factories, h, windows: seen.append([module._alias(f()) for f in factories]) or real(y, factories, h, windows)  # noqa: E731
    ahead, before = [], []
    for seed in range(12):
        rng = np.random.default_rng(seed)
        t = np.arange(42)
        y = np.expm1(5 + np.where(t % 7 >= 5, -0.8, 0.0) + rng.normal(0, 0.5, t.size))
        history, actual = y[:28], y[28:]
        try:
            module.cv_errors, seen[:] = module_cv, []
            choice = module.choose(history, 14)
        finally:
            module.cv_errors = real
        assert choice.method == "Combination" and seen[0] == ["Combination", module.SEASONAL_NAIVE]
        old = module.choose(history, 14, module.MEMBERS)  # the members alone: the levels, chosen (as before)
        assert old.method in {"LevelBlend", "LongLevel", "RobustLevel"}
        ahead.append(np.abs(module._predict(choice.model, history, 14)[1] - actual).mean())
        before.append(np.abs(module._predict(old.model, history, 14)[1] - actual).mean())
    assert np.mean(ahead) < 0.97 * np.mean(before)


def test_a_combination_inside_the_folds_forecasts_each_members_days_once():
    """`_remembered`: the combination reads its members on folds inside each of `choose`'s folds, and the same days
    recur (an inner fold of one outer fold is an outer fold, or another's inner fold); each is forecast once per
    series, with the same figures (ITP's clusters, its total and Alibaba backtested: identical to the last bit, 11.4 -> 7.7 CPU-s)."""
    calls = []

    class Counted(_Offset):
        def forecast(self, y, h, level=None):
            calls.append((len(y), h))
            return super().forecast(y, h)

    member = lambda: Counted(0.1, "Counted")  # noqa: E731
    combined = lambda: module.Combination((member,))  # noqa: E731
    y = np.expm1(np.log1p(100.0) + np.random.default_rng(3).normal(0, 0.3, 63))
    choice = module.choose(y, 14, (combined,))
    assert choice.method == "Combination"
    # 3 outer folds of 49, 42 and 35 days, inside them folds of 35, 28 and 21 days: 5 distinct histories, not 9
    assert len(calls) == len(set(calls)) == 5
    calls.clear()
    module.choose(y, 14, (combined,))
    assert len(calls) == 5  # the next series (here the same one again): forgotten at `choose`, forecast afresh


def test_a_pair_whose_member_fails_at_the_final_fit_forecasts_with_the_other():
    """Review 67b D1: a `BestTwo` member that raises leaves the other's forecast alone (it fell back to seasonal naive,
    its reason a TypeError of the conformal retry); both failing raise the first's error."""
    def broken():
        class Broken:
            alias = "Broken"

            def forecast(self, y, h, level=None):
                raise ValueError("the fit did not converge")
        return Broken()

    y = np.log1p(shifting(56, shift=14)["jobs_submitted"].to_numpy())
    works = module.JOB_CANDIDATES[0]
    got = module.BestTwo(works, broken).forecast(y, 14)["mean"]
    assert got == pytest.approx(works().forecast(y=y, h=14)["mean"])
    with pytest.raises(ValueError, match="did not converge"):
        module.BestTwo(broken, broken).forecast(y, 14)


def test_the_forecast_reads_two_years_of_history_whatever_the_oldest_job():
    """Review 77 S1-6: a series runs from its first day with every day filled, and one job of 1970 made the demand
    step run 15+ minutes; the seed table's undated rows (2000-01-01) stretched their queue's series alike. The
    forecast and its backtest read `DEMAND_HISTORY_DAYS` before the history's end: an old row is not read at all."""
    daily = pl.concat([shifting(49, seed=1, queue="q"),
                       pl.DataFrame({"day": [date(1970, 1, 1), date(2000, 1, 1)], "queue": ["q", "seed"],
                                     "gpu_type": ["unknown", "unknown"], "jobs_submitted": [1, 1],
                                     "gpu_hours": [5.0, 1.0]})], how="diagonal_relaxed")
    as_of = START + timedelta(days=48)
    recent = module.recent_history(daily, as_of)
    assert recent["day"].min() == START and "seed" not in recent["queue"].to_list()
    assert recent.height == daily.height - 2
    assert module.recent_history(daily, as_of, days=10)["day"].min() == as_of - timedelta(days=9)
