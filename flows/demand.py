"""Prefect flow `demand-forecast`: next days' GPU-hours per queue x GPU type, and its backtest.

Reads the demand series (`demand_daily`), forecasts the `days` days after the last full day of
history (`tasks/demand/forecast.py`), and the site's total as a series of its own (its P90 the P90 of the
total; each series' part of it in `gpu_hours_p90_of_total`, and of its P50 in `gpu_hours_p50_of_total`) and
each queue's total likewise (`demand_forecast_queue`, `gpu_hours_p90_of_queue`), backtests the same method from the last 8 weekly
origins (`tasks/demand/backtest.py`), the total's too, and writes all in one transaction (`warehouse/demand.py`); a failed
run leaves the previous forecast in `current_demand_forecast`. `gpucast demand` runs it and
publishes; the nightly runs it after scoring and before the plan, where a failure is a warning
(`demand_step`): the night still plans and publishes.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import polars as pl
from prefect import flow, task

from gpucast.flows.errors import no_retry_on_environment
from gpucast.flows.settings import Planning, Settings, Storage
from gpucast.records.results import DemandResult
from gpucast.tasks.demand.backtest import backtest_demand, versus_naive
from gpucast.tasks.demand.forecast import (
    NAIVE,
    SEASONAL_NAIVE,
    at_least_its_parts,
    forecast_demand,
    forecast_queue_totals,
    forecast_total,
    history_end,
    recent_history,
    series_counts,
    total_series,
    with_queue_share,
    with_total_share,
)
from gpucast.warehouse import db
from gpucast.warehouse import demand as demand_tables
from gpucast.warehouse.publish import publish_if
from gpucast.warehouse.runs import describe, lifecycle


@task(name="read-demand")
def read_demand(storage: Storage) -> tuple[pl.DataFrame, date | None]:
    with db.writer(storage) as con:
        return demand_tables.demand_input(con)


@task(name="forecast-demand")
def forecast_demand_task(daily: pl.DataFrame, as_of: date, days: int) -> pl.DataFrame:
    return forecast_demand(daily, as_of, days)


@task(name="forecast-demand-total")
def forecast_total_task(daily: pl.DataFrame, as_of: date, days: int) -> pl.DataFrame:
    return forecast_total(daily, as_of, days)


@task(name="forecast-demand-queues")
def forecast_queue_totals_task(daily: pl.DataFrame, as_of: date, days: int, forecast: pl.DataFrame) -> pl.DataFrame:
    return forecast_queue_totals(daily, as_of, days, forecast)


@task(name="backtest-demand")
def backtest_demand_task(daily: pl.DataFrame, as_of: date, days: int) -> pl.DataFrame:
    return backtest_demand(daily, as_of, days)


@task(name="backtest-demand-total")
def backtest_total_task(daily: pl.DataFrame, as_of: date, days: int) -> pl.DataFrame:
    return backtest_demand(total_series(daily), as_of, days)


@task(name="record-demand", retries=2, retry_delay_seconds=5,
      retry_condition_fn=no_retry_on_environment)
def record_demand(storage: Storage, run_id: str, forecast: pl.DataFrame, backtest: pl.DataFrame,
                  total: demand_tables.Total, queues: pl.DataFrame, **summary) -> None:
    with db.writer(storage) as con:
        demand_tables.record(con, run_id, forecast, backtest, total, queues, **summary)


@flow(name="demand-forecast", log_prints=True)
def demand_forecast(publish: bool = True, as_of: datetime | None = None, storage: Storage | None = None,
                    planning: Planning | None = None) -> DemandResult:
    """Forecast `planning.plan_days` days (GPUCAST_PLAN_DAYS, so the forecast covers the plan; `gpucast
    demand --plan-days` sets them) after the last full day of history before `as_of` (default now);
    backtest it; record both; publish unless told not to. `storage`, `planning`: default the environment's."""
    settings = Settings.given(storage=storage, planning=planning).ensure()
    storage, days = settings.storage, settings.planning.plan_days
    with lifecycle(storage, "demand", days=days) as run:
        daily, latest = read_demand(storage)
        end = history_end(latest, as_of or datetime.now(UTC))
        if end is None:
            raise ValueError("no jobs in the warehouse yet: nothing to forecast (ingest job logs first: gpucast ingest)")
        daily = recent_history(daily, end)  # (two years: the work stays bounded whatever the oldest job's date)
        total = forecast_total_task(daily, end, days)
        forecast = forecast_demand_task(daily, end, days)
        queues = forecast_queue_totals_task(daily, end, days, forecast)
        total = at_least_its_parts(total, queues, ["day"], "queue")  # the site's band not below one queue's own
        forecast = with_queue_share(with_total_share(forecast, total), queues)
        backtest = backtest_demand_task(daily, end, days)
        series, fallbacks = series_counts(forecast)
        record_demand(storage, run.run_id, forecast, backtest, demand_tables.Total(total, backtest_total_task(daily, end, days)),
                      queues, as_of=end, series=series, fallback_series=fallbacks)
    publish_if(publish, storage)
    against = versus_naive(backtest)
    print(f"{run.run_id}: forecast {series} series over {days} day(s) after {end}; {fallbacks} on a fallback "
          f"({SEASONAL_NAIVE} or {NAIVE}: see fallback_reason); backtest: {backtest.height:,} forecast days"
          + (f", relative MAE against seasonal naive: {against}" if against else ""))
    return DemandResult(demand_run_id=run.run_id, history_end=end, days=days, series=series, fallback_series=fallbacks,
                        forecast=forecast, backtest_rows=backtest.height)


def demand_step(settings: Settings, as_of: datetime | None) -> tuple[DemandResult | None, list[str]]:
    """The nightly's step: the demand forecast, unpublished (the night publishes); a failure is a
    warning, never the night's failure (the plan and the publish go on with the previous forecast)."""
    try:
        return demand_forecast(publish=False, as_of=as_of, storage=settings.storage, planning=settings.planning), []
    except Exception as exc:  # noqa: BLE001  (see the docstring)
        return None, [f"demand forecast failed, planners keep the previous one: {describe(exc)}"]
