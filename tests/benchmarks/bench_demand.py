"""The demand forecast on the simulator: MASE against seasonal naive and P10-P90 coverage, horizons 1-14.

Simulates `--days` days of job logs with the default rhythm (`tasks/simulate.py` `Rhythm`: quiet
weekends, a slow trend, deadline bursts) at `--jobs-per-day` on a weekday, ending yesterday; ingests
them into a fresh warehouse (the real ingest flow); runs the demand flow (`flows/demand.py`), which
forecasts the next 14 days and backtests the method from 8 weekly origins; and prints
`demand_backtest_summary` (warehouse/sql/schema.sql) per horizon over all series: the forecast's MASE,
seasonal naive's MASE on the same days (the named baseline), their ratio of absolute errors, and the
share of actual days inside P10-P90; then the same for jobs submitted a day (the `jobs_` columns: that
series chooses its own model), beside the method before issue 38 (jobs forecast with the GPU-hours'
model) on the same origins. Goals (issue 30): MASE <= 0.8 x seasonal naive's at every horizon,
coverage 75-85%; jobs a day (issue 38): relative MAE <= 0.85 against seasonal naive. Also timed: the
forecast and the backtest, each against seasonal naive
alone on the same series in the same run. Session 9: each queue of several series (a GPU type and `unknown`) backtested
as its total's own forecast beside its series' bands summed (coverage of its days, median P90 / P50).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_demand.py [--days 112] [--jobs-per-day 80] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

with_home = tempfile.mkdtemp(prefix="gpucast-bench-demand-")
os.environ["GPUCAST_HOME"] = with_home
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")

from gpucast.flows.environment import configure  # noqa: E402

configure()

from gpucast.tasks.simulate import Rhythm, SimConfig, write_logs  # noqa: E402


def _timed(fn, *args, **kwargs) -> float:
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t0


def _jobs_with_the_hours_model(group, key, as_of, days, candidates, job_candidates):
    """The method before issue 38, for comparison: jobs a day forecast with the model the GPU-hours chose."""
    from gpucast.tasks.demand import forecast as module

    hours, jobs = group["gpu_hours"].to_numpy(), group["jobs_submitted"].to_numpy()
    choice = module.choose(hours, days, candidates)
    try:
        (h10, h50, h90), (j10, j50, j90) = module._predict(choice.model, hours, days), module._predict(choice.model, jobs, days)
    except Exception:  # noqa: BLE001  (as the forecast does: seasonal naive)
        choice = module.Choice(module.SEASONAL_NAIVE, module._seasonal_naive, "failed at the final fit")
        (h10, h50, h90), (j10, j50, j90) = (module._predict(choice.model, y, days) for y in (hours, jobs))
    return pl.DataFrame({
        "day": [as_of + timedelta(days=h) for h in range(1, days + 1)], "horizon": list(range(1, days + 1)),
        "queue": [key[0]] * days, "gpu_type": [key[1]] * days, "gpu_hours_p10": h10, "gpu_hours_p50": h50,
        "gpu_hours_p90": h90, "jobs_p10": j10, "jobs_p50": j50, "jobs_p90": j90, "method": [choice.method] * days,
        "fallback_reason": [choice.reason] * days, "jobs_method": [choice.method] * days,
        "jobs_fallback_reason": [choice.reason] * days}, schema=module._schema())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=112)
    ap.add_argument("--jobs-per-day", type=int, default=80)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from gpucast.flows.demand import demand_forecast
    from gpucast.flows.ingest import ingest_job_logs
    from gpucast.flows.settings import Settings
    from gpucast.tasks.demand.backtest import backtest_demand
    from gpucast.tasks.demand.forecast import forecast_demand, history_end
    from gpucast.warehouse import db
    from gpucast.warehouse import demand as demand_tables

    start = datetime.now(UTC).date() - timedelta(days=args.days)
    sim = SimConfig(days=args.days, jobs_per_day=args.jobs_per_day, pending_fraction=0.1, seed=args.seed, start=start,
                    rhythm=Rhythm())
    logs = Path(with_home) / "logs"
    write_logs(logs, sim)
    settings = Settings.from_env().override(plan_days=14)
    ingest_job_logs(paths=[str(logs)], publish=False, storage=settings.storage)
    out = demand_forecast(publish=False, storage=settings.storage, planning=settings.planning)
    with db.writer(settings.storage) as con:
        daily, latest = demand_tables.demand_input(con)
        summary = con.sql("SELECT horizon, origins, days, round(mase, 3) AS mase, round(mase_seasonal_naive, 3) "
                          "AS mase_seasonal_naive, round(mase / mase_seasonal_naive, 3) AS mase_ratio, "
                          "round(relative_mae, 3) AS relative_mae, round(coverage, 3) AS coverage "
                          "FROM demand_backtest_summary WHERE queue IS NULL ORDER BY horizon NULLS LAST").pl()
        jobs = con.sql("SELECT horizon, round(jobs_mase, 3) AS jobs_mase, round(jobs_mase_seasonal_naive, 3) AS "
                       "jobs_mase_seasonal_naive, round(jobs_relative_mae, 3) AS jobs_relative_mae, "
                       "round(jobs_coverage, 3) AS jobs_coverage FROM demand_backtest_summary WHERE queue IS NULL "
                       "ORDER BY horizon NULLS LAST").pl()
        methods = con.sql("SELECT method, jobs_method, count(DISTINCT (queue, gpu_type)) AS series "
                          "FROM current_demand_forecast GROUP BY ALL ORDER BY ALL").pl()
    end = history_end(latest, datetime.now(UTC))
    from gpucast.tasks.demand import backtest as backtest_module
    from gpucast.tasks.demand import forecast as forecast_module

    own_rows = backtest_demand(daily, end, 14)
    with_own_model = backtest_module.relative_mae(own_rows)["jobs_submitted"]
    queue_bands = _queue_bands(own_rows, backtest_demand(forecast_module.queue_series(daily), end, 14))
    own = forecast_module._forecast_one
    forecast_module._forecast_one = _jobs_with_the_hours_model
    try:
        with_hours_model = backtest_module.relative_mae(backtest_demand(daily, end, 14))["jobs_submitted"]
    finally:
        forecast_module._forecast_one = own
    timings = {name: (_timed(forecast_demand, daily, end, 14, **kw), _timed(backtest_demand, daily, end, 14, **kw))
               for name, kw in (("chosen model", {}), ("seasonal naive alone", {"candidates": ()}))}
    print(f"demand: {args.days} days x {args.jobs_per_day} jobs a weekday (rhythm {Rhythm()}), seed {args.seed}; "
          f"{out.series} series, history to {out.history_end}")
    print(methods)
    with pl.Config(tbl_rows=40, tbl_cols=20):
        print(summary)
        print(jobs)
    (fc, bt), (fc0, bt0) = timings.values()
    print(f"timing: forecast {fc:.2f} s, backtest (8 origins) {bt:.2f} s; seasonal naive alone {fc0:.2f} s, {bt0:.2f} s "
          f"(ratio {fc / fc0:.1f}x, {bt / bt0:.1f}x)")
    by_h = summary.filter(pl.col("horizon").is_not_null())
    print(f"goal MASE <= 0.8 x seasonal naive at horizons 1-14: worst ratio {by_h['mase_ratio'].max():.3f} "
          f"({'met' if by_h['mase_ratio'].max() <= 0.8 else 'not met'}); coverage 75-85%: "
          f"{by_h['coverage'].min():.1%}-{by_h['coverage'].max():.1%}, overall {summary['coverage'][-1]:.1%}")
    jobs_h = jobs.filter(pl.col("horizon").is_not_null())
    overall = jobs["jobs_relative_mae"][-1]
    print(f"goal jobs a day relative MAE <= 0.85 (against seasonal naive): overall {overall:.3f} "
          f"({'met' if overall <= 0.85 else 'not met'}), horizons {jobs_h['jobs_relative_mae'].min():.3f}-"
          f"{jobs_h['jobs_relative_mae'].max():.3f}; coverage overall {jobs['jobs_coverage'][-1]:.1%}")
    print(f"jobs a day, relative MAE against seasonal naive: {with_own_model:.3f} with their own model, "
          f"{with_hours_model:.3f} with the GPU-hours' model (before issue 38)")
    print(queue_bands)


def _queue_bands(series: pl.DataFrame, queues: pl.DataFrame) -> str:
    """Session 9 (issue 53 item 3): each queue's GPU-hours band in the backtest, as the queue's total forecast as a
    series of its own (`forecast_queue_totals`' way) and as its series' bands summed (before): P10-P90 coverage of the
    queue's days and the median P90 / P50, over the queues of several series (the simulator's: a type and `unknown`)."""
    summed = (series.group_by("origin", "day", "queue")
              .agg(pl.col("gpu_hours_p10", "gpu_hours_p50", "gpu_hours_p90", "actual").sum(), pl.len().alias("series"))
              .filter(pl.col("series") > 1))
    own = queues.join(summed.select("origin", "day", "queue"), on=["origin", "day", "queue"], how="semi")

    def figures(rows: pl.DataFrame) -> str:
        cover = rows.select(pl.col("actual").is_between("gpu_hours_p10", "gpu_hours_p90").mean()).item()
        ratio = rows.filter(pl.col("gpu_hours_p50") > 0).select((pl.col("gpu_hours_p90") / pl.col("gpu_hours_p50"))
                                                                .median()).item()
        return f"P10-P90 coverage {cover:.1%}, median P90/P50 {ratio:.2f}"
    return (f"queues of several series ({summed['queue'].n_unique()}, {summed.height} queue-days): the queue's own band "
            f"{figures(own)}; its series' bands summed (before session 9) {figures(summed)}")


if __name__ == "__main__":
    main()
