"""Run time of jobs without model features, from the scheduler's history (issue 38, item 2).

`SchedulerHistory` (`tasks/learn/history.py`: HistGradientBoosting on queue, account, GPU type and count,
time limit and job-name pattern, conformal P10-P90) against the plain baselines a planner would use:
the **queue median** and the **seasonal median** (queue x weekday), all fitted on the earlier jobs and
measured on the later ones (a time split: the forecast never sees the future), on
* `sacct`: the shipped sacct-like sample (`tests/data/sacct_sample.txt`, `make_sacct_sample.py`), read by
  the product's own path (`parse_sacct` + the normaliser), COMPLETED jobs, first 2/3 of the days to fit;
* `simulator`: `tasks/simulate.py`'s jobs with their model features dropped (its logs have no time limit
  or job name: queue, team and GPUs are all the scheduler knows there), COMPLETED jobs, days 1-10 to fit,
  11-14 to measure.
Prints MAE (hours), MAPE, the P10-P90 coverage, the ratio of MAEs against each baseline (< 1: better) and which
estimate `SchedulerHistory` chose on its held-out slice (its trees, or the queue median when the facts beat no median).

    .venv/bin/python tests/benchmarks/bench_scheduler_runtime.py [--sim-jobs-per-day 400] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.ingest.normalize import normalize
from gpucast.tasks.learn.history import SchedulerHistory
from gpucast.tasks.simulate import simulate_jobs
from gpucast.tasks.sources.slurm import parse_sacct

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "sacct_sample.txt"
WEEKDAY = "__weekday"


def sacct_jobs(path: Path = SAMPLE) -> pl.DataFrame:
    """The sample's jobs as typed contract rows, through the product's parser and normaliser."""
    parsed = parse_sacct(path.read_text(), path.name).jobs
    frame = parsed.with_columns(pl.int_range(pl.len()).alias("_row"), pl.lit(None, pl.String).alias("_raw"),
                                pl.lit(None, pl.String).alias("_read_error"))
    return normalize(frame).filter(pl.col("_errors").list.len() == 0).drop("_row", "_raw", "_errors")


def simulated_jobs(jobs_per_day: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    days = [simulate_jobs(jobs_per_day, rng, date(2026, 11, 1) + timedelta(days=d), 0.0, seed=seed) for d in range(14)]
    rows = pl.concat(days)
    return rows.with_columns(pl.lit(c.UNKNOWN_MODEL_TYPE).alias(c.MODEL_TYPE),
                             *[pl.lit(None).cast(rows[f].dtype).alias(f) for f in c.FEATURES if f != c.MODEL_TYPE])


def split_by_time(rows: pl.DataFrame, share: float) -> tuple[pl.DataFrame, pl.DataFrame]:
    """COMPLETED jobs with a run time, the earlier `share` of the days to fit, the rest to measure."""
    done = rows.filter((pl.col(c.STATUS) == "COMPLETED") & pl.col(c.RUNTIME_HOURS).is_not_null())
    done = done.with_columns(pl.col(c.SUBMITTED_AT).dt.weekday().cast(pl.String).alias(WEEKDAY))
    first, last = done[c.SUBMITTED_AT].min(), done[c.SUBMITTED_AT].max()
    cut = first + (last - first) * share
    return done.filter(pl.col(c.SUBMITTED_AT) < cut), done.filter(pl.col(c.SUBMITTED_AT) >= cut)


def queue_median(history: pl.DataFrame, rows: pl.DataFrame, target: str, by: tuple[str, ...] = (c.QUEUE,)) -> np.ndarray:
    """The plain baseline: the median `target` of the history's jobs with the same `by` values (pooled median
    where a group has none); the yardstick `SchedulerHistory` is measured against (its own fallback, the queue
    median, is `tasks/learn/history.py` `SchedulerHistory._queue_medians`)."""
    labelled = history.filter(pl.col(target).is_not_null() & (pl.col(target) > 0))
    pooled = float(labelled[target].median())
    medians = labelled.group_by(list(by)).agg(pl.col(target).median().alias("__m"))
    return (rows.select(list(by)).join(medians, on=list(by), how="left", maintain_order="left")["__m"]
            .fill_null(pooled).to_numpy().astype(np.float64))


def measure(name: str, fit: pl.DataFrame, test: pl.DataFrame, seed: int) -> dict[str, float]:
    y = test[c.RUNTIME_HOURS].to_numpy()
    t0 = time.perf_counter()
    model = SchedulerHistory(c.RUNTIME_HOURS, seed=seed).fit(fit)
    p10, p50, p90 = model.intervals(test)
    seconds = time.perf_counter() - t0
    forecasts = {"SchedulerHistory": p50, "queue median": queue_median(fit, test, c.RUNTIME_HOURS),
                 "seasonal median (queue x weekday)": queue_median(fit, test, c.RUNTIME_HOURS, (c.QUEUE, WEEKDAY))}
    mae = {k: float(np.mean(np.abs(p - y))) for k, p in forecasts.items()}
    mape = {k: float(np.mean(np.abs(p - y) / y)) for k, p in forecasts.items()}
    print(f"\n{name}: fit on {fit.height:,} completed jobs, measured on {test.height:,} later ones "
          f"(fit + forecast {seconds:.1f} s)")
    print(f"  {'forecast':<36}{'MAE h':>9}{'MAPE':>9}")
    for k in forecasts:
        print(f"  {k:<36}{mae[k]:>9.3f}{mape[k]:>9.1%}")
    print(f"  SchedulerHistory chose {model.chosen_}: {model.describe()}")
    coverage = float(np.mean((y >= p10) & (y <= p90)))
    q, s = mae["SchedulerHistory"] / mae["queue median"], mae["SchedulerHistory"] / mae["seasonal median (queue x weekday)"]
    print(f"  P10-P90 coverage {coverage:.1%} (goal ~80%); MAE vs queue median x{q:.2f}, vs seasonal median x{s:.2f}; "
          f"MAPE vs queue median x{mape['SchedulerHistory'] / mape['queue median']:.2f}")
    return {"mae_ratio_queue": q, "mae_ratio_seasonal": s, "coverage": coverage}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim-jobs-per-day", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    measure(f"sacct sample ({SAMPLE.name})", *split_by_time(sacct_jobs(), 2 / 3), a.seed)
    measure(f"simulator ({a.sim_jobs_per_day} jobs/day x 14 days, model features dropped)",
            *split_by_time(simulated_jobs(a.sim_jobs_per_day, a.seed), 10 / 14), a.seed)


if __name__ == "__main__":
    sys.exit(main())
