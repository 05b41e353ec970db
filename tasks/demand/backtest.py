"""Rolling-origin backtest of the demand forecast: how good it would have been over the history.

From each origin (the latest one `days` before `as_of`, so its whole horizon has happened, then a
week apart back over `origins` weeks) the forecast is made as it would have been that night, from
the days up to the origin only, with the model choice included, and set against what happened.
Each row also carries seasonal naive's forecast of that day (the same weekday of the origin's last
week) and the MASE scale: the mean absolute difference between each day and the same weekday a week
earlier over the history the origin saw. Both for GPU-hours and, in the `jobs_` columns, for jobs
submitted. `demand_backtest_summary` (warehouse/sql/schema.sql) turns the rows into MASE against
seasonal naive and the P10-P90 coverage per horizon and series, for each of the two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, timedelta

import numpy as np
import polars as pl

from gpucast.tasks.demand.forecast import CANDIDATES, DEFAULT_DAYS, KEYS, SEASON, forecast_demand, series_frame

ORIGINS = 8  # weekly origins: the last 8 weeks


def backtest_demand(daily: pl.DataFrame, as_of: date, days: int = DEFAULT_DAYS, origins: int = ORIGINS,
                    candidates: Sequence[Callable[[], object]] = CANDIDATES,
                    job_candidates: Sequence[Callable[[], object]] | None = None,
                    known: Callable[[date], pl.DataFrame] | None = None) -> pl.DataFrame:
    """Per origin, horizon and series: the forecast (P10/P50/P90, method), the actual GPU-hours,
    seasonal naive's forecast and the MASE scale, and the same for jobs submitted; empty when the
    history is shorter than `days` + 1. `known`: the daily series as they were known at the end of an origin's day
    (`demand_daily`'s columns: the last days' running jobs at their expected hours, not the hours they went on to
    run), which that origin's forecast and seasonal naive are made from; the actuals are always `daily`'s. None: the
    history is `daily`'s own days up to the origin (as the nightly's backtest reads the warehouse now)."""
    series = series_frame(daily, as_of)
    latest = as_of - timedelta(days=days)
    frames = []
    for k in range(origins):
        origin = latest - timedelta(days=SEASON * k)
        history = (series if known is None else series_frame(known(origin), origin)).filter(pl.col("day") <= origin)
        if history.is_empty():
            break
        forecast = forecast_demand(history, origin, days, candidates, job_candidates)
        frames.append(_against_actual(forecast, series, _baseline(history, days), origin))
    return pl.concat(frames) if frames else pl.DataFrame(schema=SCHEMA)


SCHEMA = {"origin": pl.Date, "horizon": pl.Int32, "day": pl.Date, "queue": pl.String, "gpu_type": pl.String,
          "method": pl.String, "actual": pl.Float64, "gpu_hours_p10": pl.Float64, "gpu_hours_p50": pl.Float64,
          "gpu_hours_p90": pl.Float64, "seasonal_naive": pl.Float64, "mase_scale": pl.Float64,
          "jobs_method": pl.String, "actual_jobs": pl.Float64, "jobs_p10": pl.Float64, "jobs_p50": pl.Float64,
          "jobs_p90": pl.Float64, "jobs_seasonal_naive": pl.Float64, "jobs_mase_scale": pl.Float64}
# per series: (the column of `series_frame`, the prefix of its backtest columns)
SERIES = (("gpu_hours", ""), ("jobs_submitted", "jobs_"))


# per series: its backtest's (P50, actual, seasonal naive) columns
SCORED = {"gpu_hours": ("gpu_hours_p50", "actual", "seasonal_naive"),
          "jobs_submitted": ("jobs_p50", "actual_jobs", "jobs_seasonal_naive")}


def relative_mae(rows: pl.DataFrame) -> dict[str, float | None]:
    """Per series (`gpu_hours`, `jobs_submitted`): the backtest's sum |P50 - actual| / sum |seasonal naive - actual|
    over the rows with a seasonal naive forecast (below 1: better than the baseline; what
    `demand_backtest_summary` says over everything); None without a baseline error."""
    out: dict[str, float | None] = {}
    for series, (p50, actual, naive) in SCORED.items():
        scored = rows.filter(pl.col(naive).is_not_null())
        baseline = float((scored[naive] - scored[actual]).abs().sum())
        out[series] = float((scored[p50] - scored[actual]).abs().sum()) / baseline if baseline > 0 else None
    return out


def versus_naive(rows: pl.DataFrame) -> str:
    """`relative_mae` in words ("gpu_hours 0.83, jobs_submitted 0.91"), the series without a baseline left out;
    empty when none has one."""
    return ", ".join(f"{name} {value:.2f}" for name, value in relative_mae(rows).items() if value is not None)


def _baseline(history: pl.DataFrame, days: int) -> pl.DataFrame:
    """Per series and horizon: seasonal naive's forecast and the in-sample MASE scale (null when the
    series has no week-earlier day, or never changed from one week to the next), of GPU-hours and of jobs."""
    rows = []
    for key, group in history.group_by(*KEYS, maintain_order=True):
        per_series = [_naive_and_scale(group[column].to_numpy(), days) for column, _ in SERIES]
        for h in range(1, days + 1):
            rows.append((*key, h, *(v for naive, scale in per_series for v in (naive[h - 1], scale))))
    schema = {"queue": pl.String, "gpu_type": pl.String, "horizon": pl.Int32}
    for _, prefix in SERIES:
        schema |= {f"{prefix}seasonal_naive": pl.Float64, f"{prefix}mase_scale": pl.Float64}
    return pl.DataFrame(rows, schema=schema, orient="row")


def _naive_and_scale(y: np.ndarray, days: int) -> tuple[list[float | None], float | None]:
    diffs = np.abs(y[SEASON:] - y[:-SEASON])
    scale = float(diffs.mean()) if len(diffs) and diffs.mean() > 0 else None
    naive = [float(y[len(y) - SEASON + (h - 1) % SEASON]) if len(y) >= SEASON else None for h in range(1, days + 1)]
    return naive, scale


def _against_actual(forecast: pl.DataFrame, series: pl.DataFrame, baseline: pl.DataFrame, origin: date) -> pl.DataFrame:
    actual = series.select("day", *KEYS, pl.col("gpu_hours").alias("actual"), pl.col("jobs_submitted").alias("actual_jobs"))
    return (forecast.join(actual, on=["day", *KEYS], how="left").join(baseline, on=[*KEYS, "horizon"], how="left")
            .with_columns(pl.lit(origin).alias("origin"), pl.col("actual", "actual_jobs").fill_null(0.0))
            .select(*SCHEMA).cast(SCHEMA))
