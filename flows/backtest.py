"""The one backtest entry point: recompute the window of jobs completed since they were forecast
(`warehouse/backtest.py`), and say which champions drifted. The nightly runs it as its `backtest`
step; `gpucast backtest` runs it and prints the summary; a train run on its own runs it before the champion gate
reads its window (in the nightly, training reads the window the backtest step computed: one backtest a night,
`train_models(backtest_fresh=True)`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from prefect import task

from gpucast.flows.settings import Storage
from gpucast.records.results import BacktestResult
from gpucast.tasks.learn import gate
from gpucast.warehouse import backtest, db


def refresh_backtest(storage: Storage, backtest_days: int, now: datetime | None = None,
                     until: datetime | None = None) -> BacktestResult:
    """Rewrite `forecast_backtest` for the last `backtest_days` days; return its counts, each champion's
    P90 coverage on it and the drift warnings. `until`: a backfill's night (its clock, `now` too): the window ends
    there and the champion is the one in place then; None: a live night's open window (`warehouse/backtest.py`)."""
    now = now or datetime.now(UTC)  # the run's own clock anchors the window (with the logs' latest submission)
    with db.writer(storage) as con:
        counts = backtest.run(con, backtest_days, now, until)
        coverage = backtest.champion_coverage(con, backtest_days, now, until)
    return replace(counts, champions=coverage, warnings=tuple(gate.drift_warnings(coverage)))


@task(name="backtest")
def backtest_step(storage: Storage, backtest_days: int, now: datetime | None = None) -> BacktestResult:
    """The nightly's step: the backtest refreshed. `now`: the night's clock (a backfill's `--as-of`), where its window
    ends; None: a live night."""
    return refresh_backtest(storage, backtest_days, now, until=now)
