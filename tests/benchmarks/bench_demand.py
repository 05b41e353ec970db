"""The demand forecast on the simulator: MASE against seasonal naive and P10-P90 coverage, horizons 1-14.

Simulates `--days` days of job logs with the default rhythm (`tasks/simulate.py` `Rhythm`: quiet
weekends, a slow trend, deadline bursts) at `--jobs-per-day` on a weekday, ending yesterday; ingests
them into a fresh warehouse (the real ingest flow); runs the demand flow (`flows/demand.py`), which
forecasts the next 14 days and backtests the method from 8 weekly origins; and prints
`demand_backtest_summary` (warehouse/sql/schema.sql) per horizon over all series: the forecast's MASE,
seasonal naive's MASE on the same days (the named baseline), their ratio of absolute errors, and the
share of actual days inside P10-P90. Goals (issue 30): MASE <= 0.8 x seasonal naive's at every
horizon, coverage 75-85%. Also timed: the forecast and the backtest, each against seasonal naive
alone on the same series in the same run.

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=112)
    ap.add_argument("--jobs-per-day", type=int, default=80)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from gpucast.flows.demand import demand_forecast, history_end
    from gpucast.flows.ingest import ingest_job_logs
    from gpucast.tasks.demand.backtest import backtest_demand
    from gpucast.tasks.demand.forecast import forecast_demand
    from gpucast.warehouse import db
    from gpucast.warehouse import demand as demand_tables
    from gpucast.warehouse.settings import Settings

    start = datetime.now(UTC).date() - timedelta(days=args.days)
    sim = SimConfig(days=args.days, jobs_per_day=args.jobs_per_day, pending_fraction=0.1, seed=args.seed, start=start,
                    rhythm=Rhythm())
    logs = Path(with_home) / "logs"
    write_logs(logs, sim)
    settings = Settings.from_env()
    ingest_job_logs(paths=[str(logs)], publish=False, settings=settings)
    out = demand_forecast(days=14, publish=False, settings=settings)
    with db.writer(settings.storage) as con:
        daily, latest = demand_tables.demand_input(con)
        summary = con.sql("SELECT horizon, origins, days, round(mase, 3) AS mase, round(mase_seasonal_naive, 3) "
                          "AS mase_seasonal_naive, round(mase / mase_seasonal_naive, 3) AS mase_ratio, "
                          "round(relative_mae, 3) AS relative_mae, round(coverage, 3) AS coverage "
                          "FROM demand_backtest_summary WHERE queue IS NULL ORDER BY horizon NULLS LAST").pl()
        methods = con.sql("SELECT method, count(DISTINCT (queue, gpu_type)) AS series FROM current_demand_forecast "
                          "GROUP BY ALL ORDER BY ALL").pl()
    end = history_end(latest, datetime.now(UTC))
    timings = {name: (_timed(forecast_demand, daily, end, 14, **kw), _timed(backtest_demand, daily, end, 14, **kw))
               for name, kw in (("chosen model", {}), ("seasonal naive alone", {"candidates": ()}))}
    print(f"demand: {args.days} days x {args.jobs_per_day} jobs a weekday (rhythm {Rhythm()}), seed {args.seed}; "
          f"{out['series']} series, history to {out['as_of']}")
    print(methods)
    with pl.Config(tbl_rows=40, tbl_cols=20):
        print(summary)
    (fc, bt), (fc0, bt0) = timings.values()
    print(f"timing: forecast {fc:.2f} s, backtest (8 origins) {bt:.2f} s; seasonal naive alone {fc0:.2f} s, {bt0:.2f} s "
          f"(ratio {fc / fc0:.1f}x, {bt / bt0:.1f}x)")
    by_h = summary.filter(pl.col("horizon").is_not_null())
    print(f"goal MASE <= 0.8 x seasonal naive at horizons 1-14: worst ratio {by_h['mase_ratio'].max():.3f} "
          f"({'met' if by_h['mase_ratio'].max() <= 0.8 else 'not met'}); coverage 75-85%: "
          f"{by_h['coverage'].min():.1%}-{by_h['coverage'].max():.1%}, overall {summary['coverage'][-1]:.1%}")


if __name__ == "__main__":
    main()
