"""Level models for daily demand whose weekly rhythm is weak beside its noise (issue 53 item 1).

On a real cluster's trace (`tests/benchmarks/bench_real_demand.py`: Microsoft ITP, 10 clusters, 60 days) a day's
jobs and GPU-hours are mostly a level that shifts every few weeks plus day-to-day noise; the weekday pattern is
small. Seasonal naive copies one noisy day of last week, so its error holds that day's noise twice; a model that
averages the recent days (here in log(1 + y) space, as every candidate: `forecast.py`) holds it once. Each model
has statsforecast's `forecast(y, h, level=None) -> {"mean": ...}` and an `alias`, so `forecast.choose` compares it
with the statsforecast candidates by the same rolling-origin cross-validation. No band of its own: the chosen
model's band comes from its cross-validation errors (`forecast.py`).
"""

from __future__ import annotations

import numpy as np

SEASON = 7  # days
LEVEL_DAYS = 7  # the level: the mean of the last week (every weekday once)
SES_ALPHA = 0.3  # simple exponential smoothing's weight on the newest day: a level over ~6 days, newest first
LONG_LEVEL_DAYS = 2 * SEASON  # the long level: the mean of the last two weeks (every weekday twice)
ROBUST_LEVEL_DAYS = 3 * SEASON  # the robust level: the median of the last three weeks (every weekday three times)


def weekday_effects(y: np.ndarray) -> np.ndarray:
    """Per day index mod 7: the mean difference of that weekday from the mean of each 7-day window holding it,
    centred, and shrunk towards 0 by how much of it is noise (James-Stein: 1 - the effects' sampling variance
    over their spread; a weak rhythm measured on a few noisy weeks is mostly dropped, a clear one kept)."""
    n = len(y)
    weeks = np.lib.stride_tricks.sliding_window_view(y, SEASON)  # (n - 6, 7): every 7-day window
    deviation = (weeks - weeks.mean(axis=1, keepdims=True)).ravel()
    weekday = ((np.arange(n - SEASON + 1)[:, None] + np.arange(SEASON)[None, :]) % SEASON).ravel()
    count = np.bincount(weekday, None, SEASON)
    effect = np.bincount(weekday, deviation, SEASON) / count
    spread = np.bincount(weekday, (deviation - effect[weekday]) ** 2, SEASON) / np.maximum(count - 1, 1)
    # each window holds a day 7 times over: about count / 7 independent looks at its weekday
    noise = float(np.mean(spread / np.maximum(count / SEASON, 1)))
    signal = float(np.mean((effect - effect.mean()) ** 2))
    shrink = max(0.0, 1.0 - noise / signal) if signal > 0 else 0.0
    return shrink * (effect - effect.mean())


class WeekdayProfile:
    """The last week's mean plus the weekday effects (`weekday_effects`). In log space a multiplicative model of a
    count: the level x weekday form of a Poisson GLM on day of week with the recent level as offset."""

    alias = "WeekdayProfile"

    def forecast(self, y: np.ndarray, h: int, level=None) -> dict[str, np.ndarray]:
        y = np.asarray(y, dtype=float)
        if len(y) < SEASON:
            raise ValueError(f"{len(y)} day(s): a weekday profile needs {SEASON}")
        effect = weekday_effects(y)
        return {"mean": y[-LEVEL_DAYS:].mean() + effect[(len(y) + np.arange(h)) % SEASON]}


class LevelBlend:
    """The weekday effects (`weekday_effects`) on a level that is the mean of two level forecasts of the series
    without them: the last week's mean (statsforecast `WindowAverage`) and simple exponential smoothing
    (`SimpleExponentialSmoothing`, alpha `SES_ALPHA`). Averaging level estimates whose errors differ (a shift read
    late by the week's mean, early and noisier by the smoothing) beats each alone on the real trace."""

    alias = "LevelBlend"

    def forecast(self, y: np.ndarray, h: int, level=None) -> dict[str, np.ndarray]:
        from statsforecast.models import SimpleExponentialSmoothing, WindowAverage

        plain, ahead = _without_weekdays(y, h, "the level blend")
        return {"mean": (WindowAverage(window_size=LEVEL_DAYS).forecast(y=plain, h=h)["mean"]
                         + SimpleExponentialSmoothing(alpha=SES_ALPHA).forecast(y=plain, h=h)["mean"]) / 2 + ahead}


class LongLevel:
    """The weekday effects (`weekday_effects`) on the mean of the last `LONG_LEVEL_DAYS` days without them: a level
    read over two weeks instead of one. A day's GPU-hours are a few jobs of up to weeks each; in log space one big
    or idle day moves a week's mean twice as far as a fortnight's, so where the level holds for weeks the longer
    mean is the steadier forecast (issue 53: on the real trace it took GPU-hours from 0.840 to 0.783 of seasonal
    naive's error; `forecast.py` offers it to the GPU-hours series only: on jobs a day it measured worse)."""

    alias = "LongLevel"

    def forecast(self, y: np.ndarray, h: int, level=None) -> dict[str, np.ndarray]:
        plain, ahead = _without_weekdays(y, h, "the long level")
        return {"mean": plain[-LONG_LEVEL_DAYS:].mean() + ahead}


class RobustLevel:
    """The weekday effects (`weekday_effects`) on the median of the last `ROBUST_LEVEL_DAYS` days without them. A day's
    GPU-hours are a few long multi-GPU jobs: even in log space a week holds a day or two far off the level (a burst of
    big jobs, an idle day), which move a mean (`LongLevel`) and leave a median where it was; over three weeks it reads a
    level that holds for weeks from more days without a burst dragging it (issue 53 session 10, docs/planners.md: on
    Alibaba's series GPU-hours 0.810 -> 0.772 of seasonal naive's error). A GPU-hours candidate only, as the long level."""

    alias = "RobustLevel"

    def forecast(self, y: np.ndarray, h: int, level=None) -> dict[str, np.ndarray]:
        plain, ahead = _without_weekdays(y, h, "the robust level")
        return {"mean": np.median(plain[-ROBUST_LEVEL_DAYS:]) + ahead}


def _without_weekdays(y: np.ndarray, h: int, model: str) -> tuple[np.ndarray, np.ndarray]:
    """The series less its weekday effects (`weekday_effects`), and those effects on the `h` days ahead: what a level
    model forecasts on, and what it adds back. `ValueError` under a week of history, naming `model`."""
    y = np.asarray(y, dtype=float)
    if len(y) < SEASON:
        raise ValueError(f"{len(y)} day(s): {model} needs {SEASON}")
    effect = weekday_effects(y)
    return y - effect[np.arange(len(y)) % SEASON], effect[(len(y) + np.arange(h)) % SEASON]
