"""The demand forecast: daily GPU-hours and jobs submitted per queue x GPU type for the next days.

Pure: takes the daily series (`demand_daily`'s columns `day, queue, gpu_type, jobs_submitted,
gpu_hours`) and returns forecast rows (`demand_forecast`'s columns). The method, with why
(docs/planners.md, "Demand forecast"):

* Each series is modelled on log(1 + GPU-hours): a day's GPU-hours are a sum of a few heavy-tailed
  jobs, and in log space the weekly rhythm is a steady pattern instead of a few spikes. The
  transform is monotone, so the P10 / P50 / P90 of the log forecast, mapped back, are the
  P10 / P50 / P90 of the GPU-hours (P50 is the median day, below the mean day of a heavy tail).
* Candidates (`CANDIDATES`: statsforecast's AutoETS and AutoTheta, weekly season, and the level blend, the long
  level and the robust level of `models.py`: the recent level (one week's / two weeks' mean, three weeks' median)
  plus shrunk weekday effects, issue 53; on a long history also their `Combination`, weighted by inverse
  cross-validated MAE, and on a short one for GPU-hours only the levels' combination with AutoETS, session 13) are
  compared with **seasonal naive** (each day as the same weekday last week) by rolling-origin cross-validation (`cv_errors`: horizon = the
  forecast's days up to 14, up to 3 origins a week apart, each fit on the days before its origin); the lowest
  mean absolute error on the GPU-hours themselves wins, and seasonal naive keeps the series unless a candidate
  beats it. A history too short for folds of 3 weeks and a 14-day horizon is cross-validated a week ahead (at
  least `MIN_CV_DAYS`) from folds of 2 weeks; with fewer than `CV_WINDOWS` full folds only the candidates that
  fit no parameters (`SIMPLE`) compete: on the real trace AutoETS chosen on one noisy week lost to seasonal naive
  (tests/benchmarks/bench_real_demand.py, docs/planners.md); for GPU-hours, since session 13, the levels are
  combined with AutoETS instead (`_short_combination`), no choice among them. There, too, seasonal naive keeps the series only where
  its fold errors are clearly the lower (`_clearly_better`: a paired t-test at `SHORT_EVIDENCE`), not by any margin:
  one week of noisy days does not tell a level from a copy of last week (issue 53: GPU-hours 0.783 -> 0.767 and
  jobs 0.791 -> 0.753 of seasonal naive's error on the real trace).
* The band (issue 53 item 3) comes from the chosen model's own cross-validation errors in log space (log(1 +
  actual) - log forecast over every fold day): P10 / P90 = P50 x exp(-/+ t x RMS error x sqrt(1 + 1/n)), t the
  Student t's 90% point on n - 1 degrees of freedom (a few errors: a wider band). Calibrated on the real trace's
  backtest (docs/planners.md): 80% of days covered without any scale factor. Before, it was the model's own 80%
  interval, whose log-space width on a series with idle days made P90 tens of times P50. Seasonal naive kept on a
  history too short to cross-validate has no fold errors: its band comes from its own past errors (each day less the
  same weekday a week before) read by their median absolute value, so one wild day does not set it (`_fallback_errors`,
  session 10); naive (under two weeks) keeps its model's own interval.
* The site's total (`forecast_total`: every series summed per day) is forecast as a series of its own, so its P90 is
  the P90 of the total; `with_total_share` gives each series its part of it (`gpu_hours_p90_of_total`), which the plan
  adds up instead of the series' P90s, and likewise its part of the total's P50 (`gpu_hours_p50_of_total`, session
  14), so the site's P90 is read beside the P50 of the same forecast. Each queue's total likewise
  (`forecast_queue_totals`, session 9: a queue of several GPU types forecast as a series of its own, a queue of one
  series being that series), and `with_queue_share` gives each series its part of its queue's P90
  (`gpu_hours_p90_of_queue`): a queue's P90 is the P90 of its total, not its series' P90s summed (the page's outlook,
  the plan's rows at P90).
* Fallbacks, each with its reason in `fallback_reason`: fewer than `MIN_SEASONAL_DAYS` days:
  `naive` (the last day repeated); too short to cross-validate: `seasonal_naive`; every candidate
  failed or none beat the baseline: `seasonal_naive`; the chosen model failing at the final fit:
  `seasonal_naive`. A failure is caught per series: one series never stops the others.

* GPU-hours and jobs submitted are two series of each queue x GPU type, and each chooses its own
  model by the same cross-validation (`choose`): a day's job count is steadier than its GPU-hours,
  and the model that wins on one is often not the best on the other (the jobs series once took the
  GPU-hours' model, and forecast no better than seasonal naive: relative MAE 1.01 on a real trace).
  Jobs also have `JOB_CANDIDATES`' seasonal window average (the same weekday over the last weeks),
  which a count's day-to-day noise favours; its band, as every chosen model's, comes from its fold errors
  (statsforecast's conformal interval, or none, only where there are too few of them: `_predict`). On a long
  history a jobs series is forecast by the mean of its two best candidates that beat seasonal naive (`BestTwo`,
  session 17): combining is robust where the folds' choice among close candidates is noisy.

Days without jobs are zeros: each series runs from its first day to `as_of` without gaps, within the last
`DEMAND_HISTORY_DAYS` (two years; `recent_history`).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import partial

import numpy as np
import polars as pl

SEASON = 7  # days: the weekly rhythm
LEVEL = 80  # the P10-P90 band
DEFAULT_DAYS = 14
MIN_SEASONAL_DAYS = 2 * SEASON  # fewer days of history: the naive forecast (no weekly pattern to copy)
MIN_FIT_DAYS = 3 * SEASON  # the least history a candidate is fitted on inside cross-validation
CV_WINDOWS = 3  # rolling origins, a week apart, that choose a series' model
CV_STEP = SEASON
MIN_CV_DAYS = 3  # the fewest days a short history's folds forecast
UNKNOWN_GPU = "unknown"  # a series of jobs that did not log their GPU type
KEYS = ("queue", "gpu_type")
COLUMNS = ("day", "horizon", "queue", "gpu_type", "gpu_hours_p10", "gpu_hours_p50", "gpu_hours_p90", "jobs_p10",
           "jobs_p50", "jobs_p90", "method", "fallback_reason", "jobs_method", "jobs_fallback_reason")
SEASONAL_NAIVE, NAIVE = "seasonal_naive", "naive"


def _auto_ets():
    from statsforecast.models import AutoETS

    # additive error and season in log space (multiplicative on GPU-hours), trend chosen (none, additive,
    # damped): as accurate as the full search (ZZZ) on the simulator, ~6x faster (docs/planners.md)
    return AutoETS(season_length=SEASON, model="AZA")


def _auto_theta():
    from statsforecast.models import AutoTheta

    return AutoTheta(season_length=SEASON)


# AutoARIMA and MSTL were measured too: no better than AutoETS on the simulator, AutoARIMA ~10x slower, and MSTL's
# band too narrow (70% coverage).
CANDIDATES: tuple[Callable[[], object], ...] = (_auto_ets, _auto_theta)
SWA_WEEKS = 4  # the seasonal window average's weeks: the same weekday over the last 4 weeks


def _seasonal_window_average(prediction_intervals=None):
    from statsforecast.models import SeasonalWindowAverage

    return SeasonalWindowAverage(season_length=SEASON, window_size=SWA_WEEKS, prediction_intervals=prediction_intervals)


def _level_blend():
    from gpucast.tasks.demand.models import LevelBlend

    return LevelBlend()


def _long_level():
    from gpucast.tasks.demand.models import LongLevel

    return LongLevel()


def _robust_level():
    from gpucast.tasks.demand.models import RobustLevel

    return RobustLevel()


# Issue 53: on a real cluster's trace a day's demand is mostly a shifting level plus noise (tasks/demand/models.py):
# the level blend is a candidate for both series; the long level (two weeks' mean) and the robust level (three weeks'
# median, session 10) for GPU-hours only.
STATS_CANDIDATES = (*CANDIDATES, _level_blend)
MEMBERS = (*STATS_CANDIDATES, _long_level, _robust_level)  # the GPU-hours candidates a `Combination` weighs


def _combination():
    return Combination(MEMBERS)


# A short history's GPU-hours (under `CV_WINDOWS` full folds): not chosen among the levels by a fold or two of noise,
# but their combination with AutoETS (which keeps a weekly rhythm the levels' shrunk effects drop; in a combination
# at its weight, not the whole series as when one noisy week chose it), against seasonal naive (session 13).
SHORT_MEMBERS = (_level_blend, _long_level, _robust_level, _auto_ets)


def _short_combination():
    return Combination(SHORT_MEMBERS)


# ... and their combination weighted by inverse cross-validation error (session 13), on a long history only (not SIMPLE)
CANDIDATES = (*MEMBERS, _combination)
# the candidates that fit no parameters (averages of recent days): the only ones compared on a short history
SIMPLE: tuple[Callable[[], object], ...] = (_level_blend, _long_level, _robust_level, _seasonal_window_average)
# ... except for a candidate set with a short rule of its own, named here: GPU-hours' (`CANDIDATES`) compare the short
# combination alone. Keyed on the whole set, so a caller's own set (even one holding `_combination`) and the jobs'
# sets take the SIMPLE rule (review 63 S3-9: the rule was keyed on `_combination` being among the candidates).
SHORT_RULES: dict[tuple[Callable[[], object], ...], tuple[Callable[[], object], ...]] = {
    CANDIDATES: (_short_combination,)}
# A day's job count is a count (Poisson-like noise around the weekly rhythm): averaging the same weekday over
# several weeks beats copying last week's (docs/planners.md, "Arrivals by count"). Not the long level: on the real
# trace it took jobs a day from 0.791 to 0.795 of seasonal naive's error (docs/planners.md).
JOB_CANDIDATES: tuple[Callable[[], object], ...] = (*STATS_CANDIDATES, _seasonal_window_average)
# ... and on a long history (`CV_WINDOWS` full folds of the whole horizon) a set named here is forecast by the mean of
# its two best candidates (`BestTwo`), not the best alone: the jobs' set (session 17, C3j). Keyed on the whole set, as
# `SHORT_RULES`: GPU-hours' (where it measured worse: Alibaba 0.727 -> 0.752) and a caller's own set choose one.
BEST_TWO_SETS: tuple[tuple[Callable[[], object], ...], ...] = (JOB_CANDIDATES,)
BAND = (0.1, 0.9)  # the band's quantiles: P10 / P90
MIN_BAND_ERRORS = 3  # fewer errors: the model's own band


@dataclass(frozen=True)
class Choice:
    method: str  # a candidate's alias, `seasonal_naive` or `naive`
    model: Callable[[], object]
    reason: str | None  # why a series got a fallback
    errors: tuple[float, ...] = ()  # the chosen model's cross-validation errors, log(1 + actual) - log forecast


def series_frame(daily: pl.DataFrame, as_of: date) -> pl.DataFrame:
    """Per queue x GPU type (null: `unknown`), every day from the series' first day to `as_of` (zeros
    where no row says otherwise); days after `as_of` are left out."""
    rows = (daily.filter(pl.col("day") <= as_of)
            .with_columns(pl.col("gpu_type").fill_null(UNKNOWN_GPU))
            .group_by("day", *KEYS).agg(pl.col("gpu_hours").sum().cast(pl.Float64),
                                        pl.col("jobs_submitted").sum().cast(pl.Float64)))
    if rows.is_empty():
        return rows.sort(*KEYS, "day")
    firsts = rows.group_by(*KEYS).agg(pl.col("day").min().alias("first"))
    calendar = firsts.with_columns(pl.date_ranges("first", pl.lit(as_of)).alias("day")).explode("day").drop("first")
    return (calendar.join(rows, on=["day", *KEYS], how="left")
            .with_columns(pl.col("gpu_hours", "jobs_submitted").fill_null(0.0).clip(lower_bound=0.0))
            .sort(*KEYS, "day"))


def history_end(latest_submission: date | None, clock: datetime) -> date | None:
    """The last full day of history: the day before the run's clock, or the latest submission day when
    that is earlier (logs replayed from the past, as the demo's); None on an empty warehouse."""
    if latest_submission is None:
        return None
    return min(latest_submission, (clock - timedelta(days=1)).date())


# The days of history before its end the forecast and its backtest read. Two years: more than any candidate uses (the
# levels read weeks, AutoETS and AutoTheta a few seasons; the backtest 8 weekly origins), and a bound on the work: a
# series runs from its first day with every day filled, and cross-validation grew ~n^1.5 with its length, so one job
# of 1970 made the demand step run 15+ minutes (review 77 S1-6); the seed table's undated rows sit before it too.
DEMAND_HISTORY_DAYS = 730


def recent_history(daily: pl.DataFrame, as_of: date, days: int = DEMAND_HISTORY_DAYS) -> pl.DataFrame:
    """The rows of `daily` (`demand_daily`'s) within `days` of `as_of`, the history's last full day."""
    return daily.filter(pl.col("day") > as_of - timedelta(days=days))


def series_counts(forecast: pl.DataFrame) -> tuple[int, int]:
    """(queue x GPU type series in a forecast, of which forecast on a fallback method: `fallback_reason`), as the
    demand run records them."""
    fallbacks = forecast.filter(pl.col("fallback_reason").is_not_null())[list(KEYS)].n_unique()
    series = forecast[list(KEYS)].n_unique() if forecast.height else 0
    return series, fallbacks


def summary(forecast: pl.DataFrame) -> pl.DataFrame:
    """Per series of a forecast (`forecast_demand`'s rows, days in order): the first day's GPU-hours band
    (`day1_p10`, `day1_p50`, `day1_p90`), the P50 GPU-hours over all days (`all_days_p50`) and the P50 jobs
    over all days (`jobs_p50`), rounded as `gpucast demand` prints them, with the series' methods."""
    return forecast.group_by("queue", "gpu_type", "method", "fallback_reason", "jobs_method", maintain_order=True).agg(
        pl.col("gpu_hours_p10").first().round(1).alias("day1_p10"), pl.col("gpu_hours_p50").first().round(1).alias("day1_p50"),
        pl.col("gpu_hours_p90").first().round(1).alias("day1_p90"), pl.col("gpu_hours_p50").sum().round(1).alias("all_days_p50"),
        pl.col("jobs_p50").sum().round(0).alias("jobs_p50"))


def forecast_demand(daily: pl.DataFrame, as_of: date, days: int = DEFAULT_DAYS,
                    candidates: Sequence[Callable[[], object]] = CANDIDATES,
                    job_candidates: Sequence[Callable[[], object]] | None = None) -> pl.DataFrame:
    """`days` days after `as_of` per series, GPU-hours and jobs submitted at P10 / P50 / P90 (never below 0),
    with the method and fallback reason of each (module doc). `job_candidates` default: `JOB_CANDIDATES`
    when `candidates` are the default ones, else `candidates` (seasonal naive alone: `()`)."""
    if days < 1:
        raise ValueError(f"--plan-days must be 1 or more, got {days}")
    if job_candidates is None:
        job_candidates = JOB_CANDIDATES if tuple(candidates) == CANDIDATES else candidates
    series = series_frame(daily, as_of)
    out = [_forecast_one(group, key, as_of, days, candidates, job_candidates)
           for key, group in series.group_by(*KEYS, maintain_order=True)]
    return pl.concat(out) if out else pl.DataFrame(schema=_schema())


TOTAL = "(all)"  # the queue and GPU type of the site's total series
TOTAL_COLUMNS = tuple(c for c in COLUMNS if c not in KEYS)
SHARE = "gpu_hours_p90_of_total"  # a series' part of the P90 of the site's total that day
SHARE_P50 = "gpu_hours_p50_of_total"  # a series' part of the P50 of the site's total that day (its pair: session 14)


def total_series(daily: pl.DataFrame) -> pl.DataFrame:
    """The site's total: every queue and GPU type summed per day (`demand_daily`'s columns, queue and GPU type
    `TOTAL`); a day no series has is left to `series_frame`, which fills it with zeros."""
    return (daily.group_by("day").agg(pl.col("jobs_submitted").sum().cast(pl.Float64), pl.col("gpu_hours").sum().cast(pl.Float64))
            .select("day", pl.lit(TOTAL).alias("queue"), pl.lit(TOTAL).alias("gpu_type"), "jobs_submitted", "gpu_hours")
            .sort("day"))


def forecast_total(daily: pl.DataFrame, as_of: date, days: int = DEFAULT_DAYS) -> pl.DataFrame:
    """The site's total GPU-hours and jobs a day, forecast as a series of its own (`TOTAL_COLUMNS`): its P90 is
    the P90 of the total, which the per-series P90s summed are not (docs/planners.md, "The total's band")."""
    return forecast_demand(total_series(daily), as_of, days).select(TOTAL_COLUMNS)


QUEUE_COLUMNS = tuple(c for c in COLUMNS if c != "gpu_type")
QUEUE_SHARE = "gpu_hours_p90_of_queue"  # a series' part of the P90 of its queue's total that day


def queue_series(daily: pl.DataFrame) -> pl.DataFrame:
    """Each queue's total: its GPU types summed per day (`demand_daily`'s columns, GPU type `TOTAL`)."""
    return (daily.group_by("day", "queue").agg(pl.col("jobs_submitted").sum().cast(pl.Float64),
                                               pl.col("gpu_hours").sum().cast(pl.Float64))
            .select("day", "queue", pl.lit(TOTAL).alias("gpu_type"), "jobs_submitted", "gpu_hours").sort("queue", "day"))


def forecast_queue_totals(daily: pl.DataFrame, as_of: date, days: int, forecast: pl.DataFrame) -> pl.DataFrame:
    """Each queue's total GPU-hours and jobs a day (`QUEUE_COLUMNS`), its P90 the P90 of the queue's total (session 9):
    a queue of one series is that series' forecast (`forecast`, the same days); a queue of several GPU types (the demo's:
    its type and `unknown`) is forecast as a series of its own by the same method, not its series' bands summed."""
    several = forecast.group_by("queue").agg(pl.col("gpu_type").n_unique().alias("_n")).filter(pl.col("_n") > 1)["queue"]
    alone = forecast.filter(~pl.col("queue").is_in(several.implode())).select(QUEUE_COLUMNS)
    summed = queue_series(daily.filter(pl.col("queue").is_in(several.implode())))
    own = forecast_demand(summed, as_of, days).select(QUEUE_COLUMNS) if summed.height else alone.clear()
    own = at_least_its_parts(own, forecast.filter(pl.col("queue").is_in(several.implode())), ["day", "queue"], "gpu_type")
    return pl.concat([alone.with_columns(pl.lit(None, dtype=pl.String).alias(RAISED_TO)), own]).sort("queue", "day")


QUANTILES = ("gpu_hours_p10", "gpu_hours_p50", "gpu_hours_p90", "jobs_p10", "jobs_p50", "jobs_p90")
RAISED_TO = "raised_to"  # the parts (queues of the site's total, GPU types of a queue's) a total's band was raised to


def at_least_its_parts(whole: pl.DataFrame, parts: pl.DataFrame, keys: list[str], part: str) -> pl.DataFrame:
    """`whole` (a total's own forecast, one row per `keys`) with each of its quantiles at least the largest of its
    `parts`' same quantile (per `keys`), and `RAISED_TO` naming the parts (`part`'s values) that raised one, null where
    none did. A total of non-negative parts is at least each part, so each of its quantiles is at least each part's;
    forecast apart, they can disagree: the demo's site total had a P90 of 4,388 GPU-hours on a day one queue's own P90
    was 4,815, and the page showed the site needing fewer GPUs than that queue (newcomer 26 P2). Raising the total is
    the least change that makes them agree; a part's band stays its own. A quantile the whole has none of stays null."""
    quantiles = [q for q in QUANTILES if q in whole.columns and q in parts.columns]
    top = parts.group_by(keys).agg(*[pl.col(q).max().alias(f"_max_{q}") for q in quantiles],
                                   *[pl.col(part).sort_by(q, descending=True, nulls_last=True).first().alias(f"_by_{q}")
                                     for q in quantiles])
    raised = [pl.when(pl.col(f"_max_{q}") > pl.col(q)).then(pl.col(f"_by_{q}")) for q in quantiles]
    names = pl.concat_list(raised).list.drop_nulls().list.unique(maintain_order=True)
    return (whole.join(top, on=keys, how="left")
            .with_columns(pl.when(names.list.len() > 0).then(names.list.join(", ")).alias(RAISED_TO),
                          *[pl.when(pl.col(q).is_not_null()).then(pl.max_horizontal(q, f"_max_{q}")).alias(q)
                            for q in quantiles])
            .drop([f"_{w}_{q}" for w in ("max", "by") for q in quantiles]))


def with_queue_share(forecast: pl.DataFrame, queues: pl.DataFrame) -> pl.DataFrame:
    """The per-series forecast with `QUEUE_SHARE`: the queue's own P90 (`forecast_queue_totals`) that day split over its
    series by P50, as `with_total_share` splits the site's, so a queue's series add up to the P90 of its total and
    the plan's rows of a queue add up to it; without a queue forecast of the day: the series' own P90."""
    return _share(forecast, queues.select("day", "queue", "gpu_hours_p90"), ["day", "queue"], QUEUE_SHARE)


def with_total_share(forecast: pl.DataFrame, total: pl.DataFrame) -> pl.DataFrame:
    """The per-series forecast with `SHARE` and `SHARE_P50`: the total's P90 (and P50) that day split over the series
    in proportion to their P50 (evenly on a day whose P50s are all 0), so any sum over all series of a day is the P90
    (the P50) of the total and a plan that adds rows adds up to it. Without a total forecast of the day: the series'
    own P90 (the sum of P90s), and own P50. The P50 share is the P90's pair (session 14): the total's P90 over the
    series' P50s summed compares two forecasts, and where the total follows a level the series lag, the two part."""
    return _share(_share(forecast, total.select("day", "gpu_hours_p90"), ["day"], SHARE),
                  total.select("day", "gpu_hours_p50"), ["day"], SHARE_P50, quantile="gpu_hours_p50")


def _share(forecast: pl.DataFrame, whole: pl.DataFrame, keys: list[str], name: str,
           quantile: str = "gpu_hours_p90") -> pl.DataFrame:
    """`forecast` with `name`: `whole`'s `quantile` (per `keys`) split over the series of those keys by their P50
    (evenly where their P50s are all 0); the series' own `quantile` where `whole` has no row."""
    sums = forecast.group_by(keys).agg(pl.col("gpu_hours_p50").sum().alias("_sum"), pl.len().alias("_n"))
    return (forecast.join(sums, on=keys, how="left")
            .join(whole.rename({quantile: "_whole"}), on=keys, how="left")
            .with_columns(pl.when(pl.col("_whole").is_null()).then(pl.col(quantile))
                          .when(pl.col("_sum") > 0).then(pl.col("_whole") * pl.col("gpu_hours_p50") / pl.col("_sum"))
                          .otherwise(pl.col("_whole") / pl.col("_n")).alias(name))
            .drop("_sum", "_n", "_whole"))


def _schema() -> dict:
    return {"day": pl.Date, "horizon": pl.Int32, "queue": pl.String, "gpu_type": pl.String,
            "gpu_hours_p10": pl.Float64, "gpu_hours_p50": pl.Float64, "gpu_hours_p90": pl.Float64,
            "jobs_p10": pl.Float64, "jobs_p50": pl.Float64, "jobs_p90": pl.Float64,
            "method": pl.String, "fallback_reason": pl.String, "jobs_method": pl.String, "jobs_fallback_reason": pl.String}


def _forecast_one(group: pl.DataFrame, key: tuple, as_of: date, days: int, candidates: Sequence[Callable[[], object]],
                  job_candidates: Sequence[Callable[[], object]]) -> pl.DataFrame:
    hours, hours_method, hours_reason = _forecast_series(group["gpu_hours"].to_numpy(), days, candidates)
    jobs, jobs_method, jobs_reason = _forecast_series(group["jobs_submitted"].to_numpy(), days, job_candidates)
    return pl.DataFrame({
        "day": [as_of + timedelta(days=h) for h in range(1, days + 1)], "horizon": list(range(1, days + 1)),
        "queue": [key[0]] * days, "gpu_type": [key[1]] * days,
        "gpu_hours_p10": hours[0], "gpu_hours_p50": hours[1], "gpu_hours_p90": hours[2],
        "jobs_p10": jobs[0], "jobs_p50": jobs[1], "jobs_p90": jobs[2],
        "method": [hours_method] * days, "fallback_reason": [hours_reason] * days,
        "jobs_method": [jobs_method] * days, "jobs_fallback_reason": [jobs_reason] * days,
    }, schema=_schema())


def _forecast_series(y: np.ndarray, days: int, candidates: Sequence[Callable[[], object]]
                     ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], str, str | None]:
    """((P10, P50, P90), method, fallback reason) of one series' next `days` days, by its own chosen model."""
    choice = choose(y, days, candidates)
    try:
        if choice.errors or choice.method not in FALLBACK_LAGS:
            return _banded(_predict(choice.model, y, days), choice.errors), choice.method, choice.reason
        # a fallback without cross-validation errors: the band from its own past errors, robustly (`_fallback_errors`)
        return (_banded(_predict(choice.model, y, days), _fallback_errors(y, choice.method), robust=True),
                choice.method, choice.reason)
    except Exception as exc:  # noqa: BLE001  (a model failing for one series: that series falls back)
        reason = f"{choice.method} failed at the final fit: {_describe(exc)}"
        return _predict(_seasonal_naive, y, days), SEASONAL_NAIVE, reason


def _banded(quantiles: tuple[np.ndarray, np.ndarray, np.ndarray], errors: Sequence[float], robust: bool = False
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P10 / P90 from the chosen model's cross-validation errors around its P50 (module doc), where there are at
    least `MIN_BAND_ERRORS`; else the band `_predict` gave. `robust`: the errors' scale read from their median absolute
    value (`MAD_SIGMA` x it, a normal's sd) instead of their root mean square, so one wild error does not set it."""
    p10, p50, p90 = quantiles
    n = len(errors)
    if n < MIN_BAND_ERRORS:
        return p10, p50, p90
    from scipy.stats import t

    # the errors' root mean square, a Student t's 10% / 90% points for so few of them, and a forecast's own
    # uncertainty beside the errors' (sqrt(1 + 1/n)); no scale factor: it covered 80% on the real trace (module doc)
    errors = np.asarray(errors, dtype=float)
    scale = MAD_SIGMA * float(np.median(np.abs(errors))) if robust else float(np.sqrt(np.mean(np.square(errors))))
    if robust and not scale > 0:  # most days repeat the week before (an idle or a steady queue): a median of 0 is no
        return p10, p50, p90      # spread, so the model's own band stands (review 60 M1)
    half = float(t.ppf(BAND[1], n - 1)) * scale * float(np.sqrt(1 + 1 / n))
    centre = np.log1p(p50)
    return np.clip(np.expm1(centre - half), 0.0, None), p50, np.clip(np.expm1(centre + half), 0.0, None)


MAD_SIGMA = 1.4826  # a normal's sd over its median absolute deviation
FALLBACK_LAGS = {SEASONAL_NAIVE: SEASON}  # how far back a fallback banded by `_fallback_errors` copies a day


def _fallback_errors(y: np.ndarray, method: str) -> np.ndarray:
    """A fallback's errors on the history it is given, in log space: each day less the day it would have copied
    (`FALLBACK_LAGS`: a week earlier for seasonal naive), which `_banded` reads robustly. Not naive's (under 2 weeks of
    history): read so, a young cluster's day-to-day changes made its band cover 24% of days (cluster10). A
    history too short to cross-validate has no fold errors, and the model's own band is the root mean square of these
    same errors times sqrt(h): on Alibaba's series at 16 days the trace's first day (every job running when the trace
    began: 6.1M GPU-hours, ~20x a usual day) is one of 9 such errors, at -3.5 in log space, and set the band at P90 6.6x
    P50 and the plan's P90 total at 7.74x its P50; their median absolute value reads the other 8 (issue 53 session 10)."""
    logged = np.log1p(np.asarray(y, dtype=float))
    lag = FALLBACK_LAGS[method]
    return logged[lag:] - logged[:-lag]


def _seasonal_naive():
    from statsforecast.models import SeasonalNaive

    return SeasonalNaive(season_length=SEASON, alias=SEASONAL_NAIVE)


def _naive():
    from statsforecast.models import Naive

    return Naive(alias=NAIVE)


def choose(y: np.ndarray, days: int, candidates: Sequence[Callable[[], object]] = CANDIDATES) -> Choice:
    """The model a series is forecast with: the candidate with the lowest cross-validated MAE if it
    beats seasonal naive's, else a fallback with its reason (module doc); with the chosen model's
    cross-validation errors, which make its band."""
    n = len(y)
    _memo().clear()  # one series' forecasts at a time in this thread (`_remembered`)
    if n < MIN_SEASONAL_DAYS:
        return Choice(NAIVE, _naive, f"{n} day(s) of history: too short for weekly seasonality (needs {MIN_SEASONAL_DAYS})")
    h, windows = _folds(n, days)
    if h < min(MIN_CV_DAYS, days) or windows < 1 or not candidates:  # a plan of 1-2 days cross-validates 1-2 days
        return Choice(SEASONAL_NAIVE, _seasonal_naive, f"{n} days of history: too short to cross-validate a model "
                      f"(needs {MIN_SEASONAL_DAYS + MIN_CV_DAYS})")
    short = windows < CV_WINDOWS or h < min(days, 2 * SEASON)
    if short:  # few folds choose by noise: the simple candidates alone; GPU-hours: their combination with AutoETS
        candidates = SHORT_RULES.get(tuple(candidates)) or ([f for f in candidates if f in SIMPLE] or candidates)
    errors = cv_errors(y, [*candidates, _seasonal_naive], h, windows)
    baseline = errors.pop(SEASONAL_NAIVE)
    if isinstance(baseline, str):  # even the baseline failed: the last day repeated
        return Choice(NAIVE, _naive, f"seasonal naive failed in cross-validation: {baseline}")
    scored = {name: e for name, e in errors.items() if not isinstance(e, str)}
    failed = "; ".join(f"{name} failed: {e}" for name, e in errors.items() if isinstance(e, str))
    if not scored:
        return Choice(SEASONAL_NAIVE, _seasonal_naive, failed, baseline.log_errors)
    best = min(scored, key=lambda name: scored[name].mae)
    if scored[best].mae >= baseline.mae and not (short and not _clearly_better(baseline, scored[best])):
        return Choice(SEASONAL_NAIVE, _seasonal_naive, "no model beat seasonal naive in cross-validation "
                      f"(best {best}: MAE {scored[best].mae:.4g} vs {baseline.mae:.4g} a day)"
                      + (f"; {failed}" if failed else ""), baseline.log_errors)
    if not short and tuple(candidates) in BEST_TWO_SETS:
        beating = sorted((fold.mae, name) for name, fold in scored.items() if fold.mae < baseline.mae)
        if len(beating) >= 2:  # the two best that beat seasonal naive: their mean (`BestTwo`)
            first, second = sorted(name for _, name in beating[:2])  # one name per pair, whichever led (review 67b D2)
            factories = {_alias(f()): f for f in candidates}
            pair = partial(BestTwo, factories[first], factories[second])
            both = np.add(scored[first].log_errors, scored[second].log_errors) / 2  # the mean forecast's own errors
            return Choice(_alias(pair()), pair, None, tuple(both.tolist()))
    factory = next(f for f in candidates if _alias(f()) == best)
    return Choice(best, factory, None, scored[best].log_errors)


def _folds(n: int, days: int) -> tuple[int, int]:
    """(horizon, origins) of the rolling-origin cross-validation of a history of `n` days for a forecast of `days`:
    up to 14 days ahead from `CV_WINDOWS` origins a week apart, each fitted on `MIN_FIT_DAYS` at least; a history too
    short for that, up to a week ahead from folds of two weeks (issue 53: a 60-day real trace). Either may be below 1:
    too short to cross-validate."""
    h, min_fit = min(days, 2 * SEASON), MIN_FIT_DAYS
    if n < min_fit + h:
        h, min_fit = min(days, SEASON, n - MIN_SEASONAL_DAYS), MIN_SEASONAL_DAYS
    return h, min(CV_WINDOWS, (n - min_fit - h) // CV_STEP + 1)


class Combination:
    """Its members' forecasts (in log space) averaged with weights 1 / each member's cross-validated MAE on the history
    it is given (`cv_errors` with `_folds`' origins, as `choose` reads them; equal weights where the history is too
    short for a fold, or no member has one), the members that fail left out. A forecast combination weighted by
    inverse error (Bates and Granger's, on MAE): where a few folds leave two or three candidates close, choosing one is
    a coin toss the choice pays for (issue 53 session 11: AutoTheta or AutoETS taken by the folds at the later origins
    of Alibaba's series, erring 1.29 and 0.81 of seasonal naive's), and the weights keep most of the best member while
    the others' differing errors partly cancel. On a long history it competes in `choose` as one more GPU-hours
    candidate (`_combination`, of `MEMBERS`); on a short one it is the GPU-hours' only candidate against seasonal naive
    (`_short_combination`, of `SHORT_MEMBERS`). Its band comes from its own (outer) fold errors, as every candidate's.
    Session 13, docs/planners.md: GPU-hours relative MAE Alibaba 0.772 -> 0.733 (long) -> 0.727 (and short), ITP
    0.768 -> 0.768 -> 0.761 (60 days: every origin a short history)."""

    alias = "Combination"

    def __init__(self, members: Sequence[Callable[[], object]]):
        self.members = tuple(members)

    def forecast(self, y: np.ndarray, h: int, level=None) -> dict[str, np.ndarray]:
        y = np.asarray(y, dtype=float)
        forecasts: dict[str, np.ndarray] = {}
        for factory in self.members:
            try:
                mean = _remembered(factory, y, h)
            except Exception:  # noqa: BLE001  (a member that cannot forecast this history is left out)
                continue
            if np.all(np.isfinite(mean)):
                forecasts[_alias(factory())] = mean
        if not forecasts:
            raise ValueError("no member of the combination could forecast this history")
        weights = dict.fromkeys(forecasts, 1.0)
        fold_h, windows = _folds(len(y), h)
        if fold_h >= 1 and windows >= 1:
            folds = _cv_logged(y, self.members, fold_h, windows)
            scored = {name: 1.0 / max(fold.mae, MIN_MAE) for name, fold in folds.items()
                      if isinstance(fold, Fold) and name in forecasts}
            weights = scored or weights
        return {"mean": sum(w * forecasts[name] for name, w in weights.items()) / sum(weights.values())}


MIN_MAE = 1e-9  # a member whose folds were exact: its weight is finite (it all but takes the combination)


class BestTwo:
    """The mean (in log space, equal weights) of two candidates' forecasts: on a long history, the forecast of a series
    whose candidates are a set of `BEST_TWO_SETS` (jobs a day), made of the two candidates with the lowest
    cross-validated MAE that both beat seasonal naive's (`choose`; with one such candidate, that one alone), named in
    alphabetical order. Why: a
    forecast combination is robust where selection among close candidates is noisy. The folds rank candidates whose
    errors differ by little (three origins a week apart), so the best by them is partly chance, and the runner-up's
    errors partly cancel the best's; equal weights, as the ranking says little beyond which two (issue 53 session 17,
    docs/planners.md: jobs a day Alibaba 0.769 -> 0.723 of seasonal naive's error, the simulator 0.827 -> 0.815; ITP
    unchanged, all its origins short histories). Its band, as every chosen model's, comes from its fold errors: the
    mean forecast's, which are the mean of the two's log errors day by day."""

    def __init__(self, first: Callable[[], object], second: Callable[[], object]):
        self.members = (first, second)
        self.alias = f"BestTwo({_alias(first())}, {_alias(second())})"

    def forecast(self, y: np.ndarray, h: int, level=None) -> dict[str, np.ndarray]:
        """The members' mean forecast; a member that fails (at the final fit: the folds chose them where both worked)
        leaves the other's alone, and both failing raise the first's error (review 67b D1)."""
        y = np.asarray(y, dtype=float)
        means, errors = [], []
        for factory in self.members:
            try:
                means.append(_remembered(factory, y, h))
            except Exception as exc:  # noqa: BLE001  (a statsforecast fit can raise anything)
                errors.append(exc)
        if not means:
            raise errors[0]
        return {"mean": sum(means) / len(means)}


@dataclass(frozen=True)
class Fold:
    """A model's rolling-origin cross-validation: the mean absolute error on the series itself, every forecast
    day's error in log space (log(1 + actual) - the log forecast), which make the band, and every forecast day's
    absolute error on the series itself (`abs_errors`, whose mean is `mae`), which `_clearly_better` pairs."""
    mae: float
    log_errors: tuple[float, ...]
    abs_errors: tuple[float, ...] = ()


SHORT_EVIDENCE = 0.9  # a short history keeps seasonal naive only where a paired one-sided t-test says so at 90%


def _clearly_better(baseline: Fold, candidate: Fold) -> bool:
    """Whether seasonal naive's fold errors are lower than `candidate`'s beyond noise: the candidate's absolute
    error minus naive's, paired day by day, has a mean above 0 by a one-sided t-test at `SHORT_EVIDENCE` (a
    Diebold-Mariano test without its autocorrelation term: the days of one short fold are few). Asked on a short
    history only (fewer than `CV_WINDOWS` folds or a shorter horizon), where one fold of up to a week decides: there
    a level model that averages the recent days (`SIMPLE`) is taken unless seasonal naive, which copies one noisy
    day of last week, is clearly better (issue 53: on the real trace one 7-day fold kept seasonal naive for the
    site's total by an MAE 11% below the long level's, and it then erred 30% more; docs/planners.md)."""
    if len(candidate.abs_errors) < 2 or len(candidate.abs_errors) != len(baseline.abs_errors):
        return True  # nothing to pair: naive keeps the series on its lower MAE, as on a long history
    diff = np.asarray(candidate.abs_errors) - np.asarray(baseline.abs_errors)
    spread = float(diff.std(ddof=1))
    if spread == 0:
        return float(diff.mean()) > 0
    from scipy.stats import t

    return float(diff.mean()) / (spread / np.sqrt(len(diff))) > float(t.ppf(SHORT_EVIDENCE, len(diff) - 1))


def cv_errors(y: np.ndarray, factories: Sequence[Callable[[], object]], h: int, windows: int) -> dict[str, Fold | str]:
    """Per model alias: its `Fold` over `windows` rolling origins a week apart (the latest `h` days before
    the end), forecasting `h` days, each fit on the days before its origin only; or the error text of a
    model that failed. The same as statsforecast's `cross_validation` with a refit per window, without its
    data frames (a few ms a series instead of tens)."""
    return _cv_logged(np.log1p(np.asarray(y, dtype=float)), factories, h, windows)


def _cv_logged(logged: np.ndarray, factories: Sequence[Callable[[], object]], h: int, windows: int
               ) -> dict[str, Fold | str]:
    """`cv_errors` of a series already in log space (a `Combination`'s folds inside a fold: the same days as the
    outer folds', so `_remembered` finds them)."""
    cuts = [len(logged) - h - CV_STEP * k for k in range(windows)]
    out: dict[str, Fold | str] = {}
    for factory in factories:
        model = factory()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                forecast = np.concatenate([_remembered(factory, logged[:cut], h) for cut in cuts])
        except Exception as exc:  # noqa: BLE001  (a model failing: recorded, the others go on)
            out[_alias(model)] = _describe(exc)
            continue
        actual = np.concatenate([logged[cut:cut + h] for cut in cuts])
        absolute = np.abs(np.clip(np.expm1(forecast), 0, None) - np.expm1(actual))
        error = float(np.mean(absolute))
        # a model that needs more history than a fold has (the 4-week window average on 3 weeks) forecasts NaN
        out[_alias(model)] = (Fold(error, tuple((actual - forecast).tolist()), tuple(absolute.tolist()))
                              if np.isfinite(error) else "no forecast on the shortest fold (too little history)")
    return out


_LOCAL = threading.local()  # this thread's memo (`_memo`): a series chosen in another thread never clears it
MEMO_SIZE = 4096  # forecasts remembered at most (a series' choice needs a few hundred); full: forgotten, and refilled


def _remembered(factory: Callable[[], object], logged: np.ndarray, h: int) -> np.ndarray:
    """`factory()`'s mean forecast of `h` days after `logged`, computed once per series and fold: a `Combination` reads
    its members on the folds inside each of `choose`'s folds, and many of those days are the same (the candidates
    fit no state between calls, so the same days give the same forecast). `choose` forgets them at each series."""
    key, memo = (factory, h, np.ascontiguousarray(logged, dtype=float).tobytes()), _memo()
    if key not in memo:
        if len(memo) >= MEMO_SIZE:
            memo.clear()
        memo[key] = np.asarray(factory().forecast(y=logged, h=h)["mean"], dtype=float)
    return memo[key].copy()


def _memo() -> dict[tuple, np.ndarray]:
    """This thread's forecasts remembered by `_remembered`: (factory, h, the log series' bytes) -> its mean forecast."""
    if not hasattr(_LOCAL, "memo"):
        _LOCAL.memo = {}
    return _LOCAL.memo


def _predict(factory: Callable[[], object], y: np.ndarray, days: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(P10, P50, P90) of the next `days` days of `y`, fitted in log space and mapped back, never below 0
    (a band the model leaves undefined, as naive's on one day, collapses onto P50). A model without a
    band of its own (the seasonal window average) gets statsforecast's conformal one where the history
    holds `CONFORMAL_WINDOWS` horizons and a day, and none (P10 = P90 = P50) where it does not."""
    model, logged = factory(), np.log1p(np.asarray(y, dtype=float))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = model.forecast(y=logged, h=days, level=[LEVEL])
        except Exception:  # noqa: BLE001  (no band of its own: conformal, or the mean alone)
            out = _with_conformal_band(factory, logged, days)
    p50 = out["mean"]
    # a model without a band (the level blend: its band is its cross-validation errors') gives the mean alone
    lo, hi = (np.where(np.isfinite(out[k]), out[k], p50) if k in out else p50 for k in (f"lo-{LEVEL}", f"hi-{LEVEL}"))
    p10, p50, p90 = (np.clip(np.expm1(v), 0.0, None) for v in (np.minimum(lo, p50), p50, np.maximum(hi, p50)))
    if not np.all(np.isfinite(p50)):
        raise ValueError("the forecast is not a number")
    return p10, p50, p90


CONFORMAL_WINDOWS = 2  # statsforecast's ConformalIntervals: n_windows x h + 1 days of history at least


def _with_conformal_band(factory: Callable[..., object], logged: np.ndarray, days: int) -> dict[str, np.ndarray]:
    """The forecast of a model without a band of its own (its factory takes `prediction_intervals`)."""
    from statsforecast.utils import ConformalIntervals

    if len(logged) <= CONFORMAL_WINDOWS * days:
        mean = factory().forecast(y=logged, h=days)["mean"]
        return {"mean": mean, f"lo-{LEVEL}": mean, f"hi-{LEVEL}": mean}
    banded = factory(prediction_intervals=ConformalIntervals(h=days, n_windows=CONFORMAL_WINDOWS))
    return banded.forecast(y=logged, h=days, level=[LEVEL])


def _alias(model) -> str:
    return getattr(model, "alias", None) or type(model).__name__


def _describe(exc: BaseException) -> str:
    return (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:300]
