"""What `gpucast demand` prints per series and where a forecast's history ends (`tasks/demand/forecast.py`)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import polars as pl

from gpucast.tasks.demand.forecast import history_end, summary


def test_history_ends_the_day_before_the_clock_or_at_the_latest_submission():
    clock = datetime(2026, 11, 26, 2, 0, tzinfo=UTC)
    assert history_end(date(2026, 11, 26), clock) == date(2026, 11, 25)  # today's submissions: not a full day yet
    assert history_end(date(2026, 10, 29), clock) == date(2026, 10, 29)  # logs replayed from the past (the demo)
    assert history_end(None, clock) is None  # an empty warehouse


def test_summary_has_the_first_days_band_and_the_sums_over_all_days_per_series():
    forecast = pl.DataFrame({
        "queue": ["a", "a", "a", "b", "b", "b"], "gpu_type": ["A100"] * 3 + ["unknown"] * 3,
        "gpu_hours_p10": [1.04, 9.0, 9.0, 0.0, 0.0, 0.0], "gpu_hours_p50": [2.06, 3.0, 4.0, 0.5, 0.25, 0.25],
        "gpu_hours_p90": [5.55, 9.0, 9.0, 1.0, 1.0, 1.0], "jobs_p50": [1.4, 1.4, 1.4, 0.2, 0.2, 0.2],
        "method": ["AutoETS"] * 3 + ["naive"] * 3, "fallback_reason": [None] * 3 + ["3 days of history"] * 3,
        "jobs_method": ["SeasonalWindowAverage"] * 3 + ["naive"] * 3})
    got = summary(forecast)
    assert got.columns == ["queue", "gpu_type", "method", "fallback_reason", "jobs_method", "day1_p10", "day1_p50",
                           "day1_p90", "all_days_p50", "jobs_p50"]
    assert got.rows() == [  # series in their order; day 1 = each series' first row
        ("a", "A100", "AutoETS", None, "SeasonalWindowAverage", 1.0, 2.1, 5.6, 9.1, 4.0),
        ("b", "unknown", "naive", "3 days of history", "naive", 0.0, 0.5, 1.0, 1.0, 1.0)]


def test_a_runs_series_and_fallbacks_are_counted_per_queue_and_gpu_type():
    from gpucast.tasks.demand.forecast import series_counts

    forecast = pl.DataFrame({"queue": ["a", "a", "b", "c"], "gpu_type": ["x", "x", "x", "y"],
                             "fallback_reason": [None, None, "too short", "too short"]})
    assert series_counts(forecast) == (3, 2)
    assert series_counts(forecast.head(0)) == (0, 0)


def test_the_backtest_against_seasonal_naive_in_words_leaves_out_series_without_a_baseline():
    from gpucast.tasks.demand.backtest import versus_naive

    rows = pl.DataFrame({"gpu_hours_p50": [1.0, 3.0], "actual": [2.0, 2.0], "seasonal_naive": [0.0, 6.0],
                         "jobs_p50": [1.0, 1.0], "actual_jobs": [1.0, 1.0], "jobs_seasonal_naive": [None, None]},
                        schema_overrides={"jobs_seasonal_naive": pl.Float64})
    assert versus_naive(rows) == "gpu_hours 0.33"  # |1-2| + |3-2| over |0-2| + |6-2|; jobs: no baseline
    assert versus_naive(rows.with_columns(pl.lit(None, pl.Float64).alias("seasonal_naive"))) == ""
