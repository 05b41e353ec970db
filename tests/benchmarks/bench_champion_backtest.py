"""Champion chosen on what generalises (issue 37, item 6), on the shipped measured set.

The measured set (`tests/data/measured_jobs.csv`, 840 real PyTorch networks) has no dates: the jobs are
given submission days over `--weeks` weeks (a seeded shuffle, the same every run), so the latest week's jobs are
the backtest (`folds.backtest_mask`) that no fit sees. For each target and repeat count, trained as the nightly
trains (`tests/train_steps.py`'s steps, without saving): per model, mean validation RMSE, backtest RMSE and
MAPE, test RMSE; the champion chosen out of fold alone (`champion_choice` on the fits without their backtest
forecasts: no generalisation check) and the champion now, with the reason.

    .venv/bin/python tests/benchmarks/bench_champion_backtest.py [--models lightgbm,extra_trees,transformer_bigru]
        [--preset tuned] [--epochs 60] [--repeats 1,3] [--targets peak_gpu_mem_gb]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records.outcomes import FitResult
from gpucast.tasks.learn import folds, train
from gpucast.tasks.learn.champion import champion_choice
from gpucast.tasks.learn.options import TrainOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable
from tests.measured import load  # noqa: E402


def dated(rows: pl.DataFrame, weeks: int, seed: int = 0) -> pl.DataFrame:
    """The rows with `submitted_at` spread evenly over `weeks` weeks in a seeded random order."""
    order = np.random.default_rng(seed).permutation(rows.height)
    start = datetime(2026, 10, 1, tzinfo=UTC)
    span = timedelta(weeks=weeks).total_seconds()
    when = [start + timedelta(seconds=span * k / rows.height) for k in np.argsort(order)]
    return rows.with_columns(pl.Series(c.SUBMITTED_AT, when, dtype=pl.Datetime("us", "UTC")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="lightgbm,extra_trees,transformer_bigru")
    ap.add_argument("--preset", default="tuned")
    ap.add_argument("--epochs", type=int, default=60, help="caps the network's epochs (a CPU run)")
    ap.add_argument("--repeats", default="1,3")
    ap.add_argument("--targets", default=c.PEAK_GPU_MEM_GB)
    ap.add_argument("--weeks", type=int, default=8)
    args = ap.parse_args()
    rows = dated(load(), args.weeks)
    back = folds.backtest_mask(rows)
    print(f"measured set: {rows.height} jobs over {args.weeks} weeks; backtest (the latest week): {int(back.sum())} jobs")
    for target in args.targets.split(","):
        for repeats in (int(r) for r in args.repeats.split(",")):
            options = TrainOptions(targets=(target,), models=tuple(args.models.split(",")), repeats=repeats,
                                   preset=args.preset, epochs=args.epochs, nn_max_minutes=0)
            t0 = time.perf_counter()
            quiet = lambda _: None  # noqa: E731
            labelled = train.labelled(rows, target, options)  # train_target's steps, keeping the fits
            outcomes = [train.fit_one(labelled, target, options, f.model, f.repeat, threads=2, progress=quiet)
                        for f in train.order_fits(options) if f.target == target]
            result = train.finish_target(labelled, target, options, outcomes, threads=2, progress=quiet).result
            metrics = pl.DataFrame(result.metrics)
            table = (metrics.group_by("model", "split").agg(pl.col("rmse").mean(), pl.col("mape").mean())
                     .pivot(on="split", index="model", values=["rmse", "mape"]).sort("rmse_validation"))
            y = labelled[target].to_numpy().astype(np.float64)
            fits = [replace(o, holdout_idx=None, holdout_pred=None) for o in outcomes if isinstance(o, FitResult)]
            before = champion_choice(fits, y, folds=folds.FOLDS, target=target)
            print(f"\n{target}, {repeats} repeat(s) ({time.perf_counter() - t0:.0f} s):")
            print(f"  {'model':<18} {'val RMSE':>9} {'backtest RMSE':>14} {'backtest MAPE':>14} {'test RMSE':>10}")
            for r in table.iter_rows(named=True):
                print(f"  {r['model']:<18} {r['rmse_validation']:9.4g} {r['rmse_backtest']:14.4g} {r['mape_backtest']:13.1f}% "
                      f"{r['rmse_test']:10.4g}")
            champ = table.filter(pl.col("model") == result.champion).row(0, named=True)
            print(f"  champion out of fold alone (no backtest): {before.champion}; now: {result.champion} "
                  f"(validation {champ['rmse_validation']:.4g}, backtest {champ['rmse_backtest']:.4g})")
            print(f"  why: {result.choice_reason}")


if __name__ == "__main__":
    main()
