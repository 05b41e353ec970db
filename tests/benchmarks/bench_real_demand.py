"""The demand forecast on a real GPU cluster's trace (issue 53 items 1, 3): jobs and GPU-hours a day against
seasonal naive, P10-P90 coverage, and how wide the total's P90 is.

Reads `../shared/data/itp_jobs_2021.csv.gz` (Microsoft ITP, 2021: 69,351 jobs, 10 clusters, 60 days; its README
beside it) and turns it into the product's daily series as `demand_daily` (warehouse/sql/schema.sql) builds them:
queue = the cluster, GPU type unknown, `jobs_submitted` = jobs submitted that day, `gpu_hours` = num_gpu x
duration of every job submitted that day, all on its submission day (demand as it arrives; the trace holds
finished jobs only, so no job is still running). Day = submission_time // 86,400 s after 2021-03-04.

Then runs the product's backtest (`backtest_demand`, 14-day horizon) from every weekly origin the 60 days allow
(the latest 14 days before the last day, then a week apart back while the origin has 14 days of history:
seasonal naive's forecast needs a week, the product's weekly models two) on the 10 clusters together, and on
the site total (one series, every cluster summed: `forecast_total`'s series), and prints per series and over
all: relative MAE of jobs and GPU-hours a day against seasonal naive (sum |P50 - actual| / sum |naive - actual|),
P10-P90 coverage of days, and the P90 / P50 ratio of the site's total GPU-hours a day: from the total's own
band (`demand_forecast_total`) and, as the plan summed it before issue 53, the sum of the clusters' P90s over
the sum of their P50s; then the plan's P90 total GPUs over its P50 (session 14: `gpus_site_p90` over `gpus_site_p50`,
the P90 and P50 of one forecast, the site total's; the old figure over the queues' P50s summed beside it;
`tasks/plan/arrivals.py` `by_day`,
the expected arrivals of every cluster on one row each, no queued jobs), and the level's ceiling (`level_ceiling`:
each series' median of its own forecast days, an oracle); then the same backtest from each origin's history as the
warehouse knew it that night (`known_daily`: the last days' running jobs at `job_demand`'s expected hours, not the
hours they went on to run; issue 53 item 2), the figure a planner gets. Goals (issue 53): jobs relative MAE
<= 0.85, GPU-hours <= 0.75, coverage 70-90%, the plan's P90 total within 3x its P50. Timed: the forecast of
every series on the whole history and the backtest, with CPU seconds.

Session 11: the goals' figures are read on every day, as before; the same rows are also scored without the days
whose actuals the trace's end cuts short (`complete`: the trace holds finished jobs only, so the long jobs submitted in
its last days are missing; `settle_days`: the days by which 95% of a day's GPU-hours are finished, ITP 10; a daily
table has no run times: the ITP trace's days are taken for it), the same days left out for every model and seasonal
naive.

Session 9: per queue too: each queue's own P10-P90 coverage over the backtest's days and its plan row's P90 total over
its P50 (median over the plan's days, per origin), the row's P90 being its part of the P90 of its queue's total
(`forecast_queue_totals`, `with_queue_share`). `--daily FILE` reads a second real series instead of the trace: a daily table
of a public GPU cluster's submissions (tests/data/alibaba_spot_gpu_daily/README.md: `submit_day, jobs, gpu_seconds`),
one series (the site), so there is no "as the warehouse knew it" part (no job records).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_real_demand.py [--trace ../shared/data/itp_jobs_2021.csv.gz]
    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_real_demand.py --daily tests/data/alibaba_spot_gpu_daily/daily_summary.csv
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, date, timedelta
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.tasks.demand import backtest as backtest_module
from gpucast.tasks.demand.backtest import backtest_demand
from gpucast.tasks.demand.forecast import (
    DEFAULT_DAYS,
    MIN_SEASONAL_DAYS,
    SEASON,
    forecast_demand,
    forecast_queue_totals,
    forecast_total,
    total_series,
    with_queue_share,
    with_total_share,
)
from gpucast.tasks.plan import arrivals
from gpucast.tasks.plan.capacity import plan_capacity

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable (known_daily)

TRACE = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "itp_jobs_2021.csv.gz"
START = date(2021, 3, 4)  # the trace's submission_time 0


def daily_series(path: Path) -> pl.DataFrame:
    """`demand_daily`'s columns (day, queue, gpu_type, jobs_submitted, gpu_hours) from the trace (module doc)."""
    jobs = pl.read_csv(path, columns=["cluster", "submission_time", "duration", "num_gpu"])
    return (jobs.with_columns((pl.col("submission_time") // 86_400).alias("offset"),
                              (pl.col("num_gpu") * pl.col("duration") / 3600).alias("gpu_hours"))
            .group_by("offset", "cluster").agg(pl.len().alias("jobs_submitted"), pl.col("gpu_hours").sum())
            .select((pl.lit(START) + pl.duration(days=pl.col("offset"))).cast(pl.Date).alias("day"),
                    pl.col("cluster").alias("queue"), pl.lit(None, dtype=pl.String).alias("gpu_type"),
                    "jobs_submitted", "gpu_hours")
            .sort("queue", "day"))


DAILY_START = date(2025, 1, 1)  # a daily table's day 0 (the Alibaba table's days are offsets: no calendar date)


def daily_table(path: Path) -> pl.DataFrame:
    """`demand_daily`'s columns from a daily table of submissions (`submit_day`: days since the trace's first
    submission; `jobs`; `gpu_seconds`: GPUs x workers x duration of the jobs submitted that day), one series `site`;
    the last day is left out when it is partial (the trace ends inside it: its jobs under a tenth of the median day's)."""
    table = pl.read_csv(path, columns=["submit_day", "jobs", "gpu_seconds"]).sort("submit_day")
    if table["jobs"][-1] < 0.1 * table["jobs"].median():
        table = table.head(-1)
    return table.select((pl.lit(DAILY_START) + pl.duration(days=pl.col("submit_day"))).cast(pl.Date).alias("day"),
                        pl.lit("site").alias("queue"), pl.lit(None, dtype=pl.String).alias("gpu_type"),
                        pl.col("jobs").alias("jobs_submitted"), (pl.col("gpu_seconds") / 3600).alias("gpu_hours"))


def weekly_origins(daily: pl.DataFrame, days: int) -> int:
    """How many weekly origins the history allows: the latest `days` before the last day, back while the
    origin has `MIN_SEASONAL_DAYS` days of history."""
    span = (daily["day"].max() - daily["day"].min()).days + 1
    return max(0, (span - days - MIN_SEASONAL_DAYS) // SEASON + 1)


def scores(rows: pl.DataFrame) -> dict[str, float | None]:
    """relative MAE (jobs, GPU-hours) and P10-P90 coverage (jobs, GPU-hours) of backtest rows."""
    rel = backtest_module.relative_mae(rows)
    return {"jobs_rel_mae": rel["jobs_submitted"], "gpu_hours_rel_mae": rel["gpu_hours"],
            "jobs_coverage": rows.select(pl.col("actual_jobs").is_between("jobs_p10", "jobs_p90").mean()).item(),
            "gpu_hours_coverage": rows.select(pl.col("actual").is_between("gpu_hours_p10", "gpu_hours_p90").mean()).item()}


def table(per_series: pl.DataFrame, label: str) -> pl.DataFrame:
    out = []
    for (queue,), group in per_series.group_by("queue", maintain_order=True):
        out.append({"series": queue, "days": group.height, "jobs_method": group["jobs_method"].mode().sort()[0],
                    "method": group["method"].mode().sort()[0], **scores(group)})
    out.append({"series": label, "days": per_series.height, "jobs_method": "", "method": "", **scores(per_series)})
    return pl.DataFrame(out)


def level_ceiling(rows: pl.DataFrame) -> dict[str, float]:
    """Relative MAE (GPU-hours, jobs) of an oracle that knows the future: per origin and series, a constant equal to
    the median of the series' own forecast days (`actual`). The median is the constant of least absolute error, so no
    level forecast (a constant over the horizon, what the candidates chosen here mostly are) does better on these
    days; only day-to-day movement the level misses (weekdays, bursts) is left beyond it."""
    out = {}
    for actual, naive in (("actual", "seasonal_naive"), ("actual_jobs", "jobs_seasonal_naive")):
        scored = rows.filter(pl.col(naive).is_not_null())
        level = pl.col(actual).median().over("origin", "queue")
        out[actual] = float(scored.select((level - pl.col(actual)).abs().sum()
                                           / (pl.col(naive) - pl.col(actual)).abs().sum()).item())
    return out


SETTLED = 0.95  # a day is complete when the run times of the trace's jobs put this share of its GPU-hours in by the end


def settle_days(path: Path) -> int:
    """Days after a submission by which `SETTLED` of the GPU-hours submitted are finished: the GPU-hour-weighted P95
    of the trace's run times, rounded up (ITP: 9.20 days -> 10). The trace holds finished jobs only, so a day closer
    to its end than this is short of the long jobs still running then, in its actuals as in any history."""
    jobs = pl.read_csv(path, columns=["duration", "num_gpu"]).with_columns(
        (pl.col("num_gpu") * pl.col("duration")).alias("gpu_seconds")).sort("duration")
    share = (jobs["gpu_seconds"].cum_sum() / jobs["gpu_seconds"].sum()).to_numpy()
    return int(np.ceil(jobs["duration"][int(np.searchsorted(share, SETTLED))] / 86_400))


def complete(rows: pl.DataFrame, as_of: date, settle: int) -> pl.DataFrame:
    """The backtest's rows of the days complete by the trace's end (`settle_days`): the same days left out for every
    series, model and seasonal naive alike (session 11)."""
    return rows.filter(pl.col("day") <= as_of - timedelta(days=settle))


def _both_ways(all_rows: pl.DataFrame, as_of: date, settle: int, why: str) -> None:
    kept = complete(all_rows, as_of, settle)
    part = scores(kept)
    print(f"scored on the days complete by the trace's end only ({why}: the last {settle} days left out for every model "
          f"and seasonal naive alike, {kept.height} of {all_rows.height} series-days): GPU-hours "
          f"{part['gpu_hours_rel_mae']:.3f}, jobs {part['jobs_rel_mae']:.3f}; P10-P90 coverage GPU-hours "
          f"{part['gpu_hours_coverage']:.1%}, jobs {part['jobs_coverage']:.1%} (every day: GPU-hours "
          f"{scores(all_rows)['gpu_hours_rel_mae']:.3f}, the goals' figure below)")


def plan_ratio(daily: pl.DataFrame, origin: date, days: int) -> tuple[float, float, dict[str, float], float]:
    """The plan's P90 total GPUs over its P50 (median over its days), as the plan makes them from the forecast of
    `origin` (the demand flow's steps: the series, the total, each queue's total and the shares): every cluster a queue
    with no queued job (`plan_capacity` with none), its expected arrivals from the demand forecast
    (`arrivals.add_expected`), the day's totals by `arrivals.by_day`: `gpus_site_p90` over `gpus_site_p50`, the P90 and
    P50 of one forecast, the site total's (session 14); the rows' P90s summed over their P50s summed (before issue
    53); per queue its rows' `gpus_total_p90` over `gpus_total_p50` (the days its P50 is above 0); and last the
    figure this bench printed before session 14: `gpus_site_p90` over the queues' own P50s summed (`gpus_total_p50`),
    two forecasts' quantiles."""
    history = daily.filter(pl.col("day") <= origin)
    series = forecast_demand(history, origin, days)
    forecast = with_queue_share(with_total_share(series, forecast_total(history, origin, days)),
                                forecast_queue_totals(history, origin, days, series))
    empty = pl.DataFrame(schema={c: pl.Float64 for c in ("hours_p50", "hours_p90", "mem_gb")} | {
        "job_id": pl.String, "queue": pl.String, "day": pl.Date, "gpu_count": pl.Int64})
    known = plan_capacity(empty, None, origin + timedelta(days=1), days, queues=arrivals.forecast_queues(forecast))
    rows, _ = arrivals.add_expected(known.rows, forecast, pl.DataFrame(schema=arrivals.PACKING_SCHEMA))
    now, before = arrivals.by_day(rows), arrivals.by_day(rows.drop("gpus_total_p90_of_total"))
    queues = (rows.group_by("day", "queue").agg(pl.col("gpus_total_p50", "gpus_total_p90").sum())
              .filter(pl.col("gpus_total_p50") > 0).group_by("queue")
              .agg((pl.col("gpus_total_p90") / pl.col("gpus_total_p50")).median().alias("ratio")))
    return ((now["gpus_site_p90"] / now["gpus_site_p50"]).median(),
            (before["gpus_site_p90"] / before["gpus_total_p50"]).median(), dict(queues.iter_rows()),
            (now["gpus_site_p90"] / now["gpus_total_p50"]).median())


def per_queue(clusters: pl.DataFrame, plans: list[tuple[float, float, dict[str, float], float]]) -> str:
    """Each queue's P10-P90 coverage of its own GPU-hours over the backtest's days (the queue's total: one series a
    queue here) and its plan rows' P90 / P50 (the worst origin), and how many meet the goals (70-90%, within 3x)."""
    cover = clusters.group_by("queue").agg(pl.col("actual").is_between("gpu_hours_p10", "gpu_hours_p90").mean()
                                            .alias("coverage")).sort("queue")
    ratios = {q: [p[2][q] for p in plans if q in p[2]] for q in cover["queue"]}
    worst = {q: max(r, default=0.0) for q, r in ratios.items()}
    typical = {q: float(np.median(r)) if r else 0.0 for q, r in ratios.items()}
    inside = cover.filter(pl.col("coverage").is_between(0.7, 0.9)).height
    return (f"per queue ({cover.height}): GPU-hours P10-P90 coverage "
            + ", ".join(f"{q} {c:.0%}" for q, c in cover.iter_rows())
            + f" ({cover['coverage'].min():.1%}-{cover['coverage'].max():.1%}; {inside} of {cover.height} within 70-90%); "
            "the plan's P90 total over its P50, median over the origins (worst): "
            + ", ".join(f"{q} {typical[q]:.2f} ({worst[q]:.2f})" for q in cover["queue"])
            + f"; within 3x at every origin: {sum(v <= 3 for v in worst.values())} of {len(worst)}, at the median origin: "
            f"{sum(v <= 3 for v in typical.values())} of {len(typical)}")


def known_daily(origin: date, trace: Path = TRACE) -> pl.DataFrame:
    """`demand_daily` as the warehouse held it at the end of `origin`'s day (issue 53 item 2): the trace's jobs
    submitted by then loaded into the product's schema (`bench_real_runtime.warehouse_at`: those ended by then
    COMPLETED, the others RUNNING from their submission, ITP having no queueing), so a job still running counts its
    survival-aware `job_demand.hours_expected`, not the hours it went on to run. None of them has a run-time forecast:
    on a cluster that does not queue no job is pending at a nightly (a job that has run longer than all but 9 finished
    runs of its queue is then unknown: not counted)."""
    from datetime import datetime

    from tests.benchmarks import bench_real_runtime as runtime

    jobs = _itp_jobs(trace)
    with runtime.warehouse_at(jobs, datetime.combine(origin + timedelta(days=1), datetime.min.time(), UTC), None) as con:
        return con.sql("SELECT day, queue, gpu_type, jobs_submitted, gpu_hours FROM demand_daily").pl()


@cache
def _itp_jobs(trace: Path) -> pl.DataFrame:
    from tests.benchmarks import bench_real_runtime as runtime

    return runtime.itp_jobs(trace)


def timed(fn, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--daily", type=Path, help="a daily table instead of the trace (module doc)")
    ap.add_argument("--days", type=int, default=DEFAULT_DAYS)
    args = ap.parse_args()

    daily = daily_table(args.daily) if args.daily else daily_series(args.trace)
    name = (args.daily or args.trace).name
    site = total_series(daily)
    as_of = daily["day"].max()
    origins = weekly_origins(daily, args.days)
    print(f"trace {name}: {daily['jobs_submitted'].sum():,} jobs, {daily['queue'].n_unique()} clusters, "
          f"{daily['day'].min()} to {as_of}; {origins} weekly origins, horizon {args.days} days; load {os.getloadavg()[0]:.1f}")

    _, first_wall, first_cpu = timed(forecast_demand, daily, as_of, args.days)  # numba compiles statsforecast's models
    _, fc_wall, fc_cpu = timed(forecast_demand, daily, as_of, args.days)
    clusters, bt_wall, bt_cpu = timed(backtest_demand, daily, as_of, args.days, origins)
    total = backtest_demand(site, as_of, args.days, origins)
    with pl.Config(tbl_rows=40, tbl_cols=20, float_precision=3, tbl_width_chars=200):
        print(table(clusters, "all clusters"))
        print(table(total, "site total"))
        per_origin = (pl.concat([clusters, total]).group_by("origin").agg(
            pl.col("queue").n_unique().alias("series"),
            (pl.col("jobs_p50") - pl.col("actual_jobs")).abs().sum().truediv(
                (pl.col("jobs_seasonal_naive") - pl.col("actual_jobs")).abs().sum()).alias("jobs_rel_mae"),
            (pl.col("gpu_hours_p50") - pl.col("actual")).abs().sum().truediv(
                (pl.col("seasonal_naive") - pl.col("actual")).abs().sum()).alias("gpu_hours_rel_mae")).sort("origin"))
        print(per_origin)
    summed = clusters.group_by("origin", "day").agg(pl.col("gpu_hours_p50", "gpu_hours_p90", "actual").sum())
    ratio_summed = (summed["gpu_hours_p90"] / summed["gpu_hours_p50"]).median()
    ratio_total = (total["gpu_hours_p90"] / total["gpu_hours_p50"]).median()
    cover_summed = summed.select(pl.col("actual") <= pl.col("gpu_hours_p90")).mean().item()
    all_rows = clusters if daily["queue"].n_unique() == 1 else pl.concat([clusters, total])  # one series: the site
    overall = scores(all_rows)
    print(f"the site's total GPU-hours a day, median P90/P50 over the backtest's days: {ratio_total:.2f} from the "
          f"total's own band; {ratio_summed:.2f} as the clusters' P90s summed (days under that sum: {cover_summed:.1%})")
    ceiling, ceiling_clusters, ceiling_total = level_ceiling(all_rows), level_ceiling(clusters), level_ceiling(total)
    print(f"the level's ceiling (an oracle: each series' median of its own next {args.days} days as its forecast): "
          f"GPU-hours {ceiling['actual']:.3f} (clusters {ceiling_clusters['actual']:.3f}, total {ceiling_total['actual']:.3f}), "
          f"jobs {ceiling['actual_jobs']:.3f} of seasonal naive's error")
    latest = as_of - timedelta(days=args.days)
    plans = [plan_ratio(daily, latest - timedelta(days=SEASON * k), args.days) for k in range(origins)]
    worst = max(p[0] for p in plans)
    print("the plan's P90 total GPUs over its P50 (median over its days; gpus_site_p90 / gpus_site_p50, one forecast of "
          "the site's total), per origin from the latest: " + ", ".join(f"{p[0]:.2f}" for p in plans)
          + " (over the queues' P50s summed, gpus_total_p50, as printed before session 14: "
          + ", ".join(f"{p[3]:.2f}" for p in plans) + "; the rows' P90s summed over it, before issue 53: "
          + ", ".join(f"{p[1]:.2f}" for p in plans) + f"); within 3x: {'met' if worst <= 3 else 'not met'} (worst {worst:.2f})")
    print(per_queue(clusters, plans))
    print(f"timing: forecast of {daily['queue'].n_unique()} clusters {fc_wall:.2f} s wall / {fc_cpu:.2f} CPU-s (the "
          f"process's first, compiling: {first_wall:.2f} s / {first_cpu:.2f} CPU-s); backtest ({origins} origins) "
          f"{bt_wall:.2f} s / {bt_cpu:.2f} CPU-s")
    if args.daily:  # no job records: no history as the warehouse knew it
        if args.trace.exists():  # a daily table has no run times: the trace's are taken for it
            _both_ways(all_rows, as_of, settle_days(args.trace), f"no run times in a daily table: {args.trace.name}'s, "
                       f"{SETTLED:.0%} of a day's GPU-hours finished by then")
        return goals(all_rows, overall)
    _both_ways(all_rows, as_of, settle_days(args.trace), f"{SETTLED:.0%} of a day's GPU-hours finished by then, by the "
               "trace's GPU-hour-weighted run times")
    # the same backtest from the history as the warehouse knew it at each origin (running jobs at their expected hours)
    t0 = time.process_time()
    known = backtest_demand(daily, as_of, args.days, origins, known=lambda o: known_daily(o, args.trace))
    known_total = backtest_demand(site, as_of, args.days, origins, known=lambda o: total_series(known_daily(o, args.trace)))
    then = scores(pl.concat([known, known_total]))
    print(f"from the history as the warehouse knew it at each origin (the last days' running jobs at job_demand's "
          f"hours_expected, none forecast while pending; {time.process_time() - t0:.1f} CPU-s): GPU-hours "
          f"{then['gpu_hours_rel_mae']:.3f} (clusters {scores(known)['gpu_hours_rel_mae']:.3f}, total "
          f"{scores(known_total)['gpu_hours_rel_mae']:.3f}), jobs {then['jobs_rel_mae']:.3f}; P10-P90 coverage GPU-hours "
          f"{then['gpu_hours_coverage']:.1%}, jobs {then['jobs_coverage']:.1%}")
    goals(all_rows, overall)


def goals(all_rows: pl.DataFrame, overall: dict[str, float | None]) -> None:
    print(f"goals (issue 53), over {all_rows.height} series-days (clusters and site): jobs relative MAE "
          f"{overall['jobs_rel_mae']:.3f} (<= 0.85: {'met' if overall['jobs_rel_mae'] <= 0.85 else 'not met'}); "
          f"GPU-hours {overall['gpu_hours_rel_mae']:.3f} (<= 0.75: "
          f"{'met' if overall['gpu_hours_rel_mae'] <= 0.75 else 'not met'}); P10-P90 coverage jobs "
          f"{overall['jobs_coverage']:.1%}, GPU-hours {overall['gpu_hours_coverage']:.1%} (70-90%)")


if __name__ == "__main__":
    main()
