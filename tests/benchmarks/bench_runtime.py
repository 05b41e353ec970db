"""Run-time forecasts on the simulator: with and without the hardware context (issue: accurate on real jobs).

Run time depends on the GPU a job runs on, which the seed paper's 11 features do not carry. This
benchmark fits the product's models for `runtime_hours` on simulated completed jobs with each
feature set (`paper`: the 11; `hardware`: + GPU type/count/peak TFLOPS; `priors`: + the analytic
priors; `residual`: learning actual/prior), on the product's splits (70/30, 20% of train for
validation, champion by validation RMSE), and prints the champion's test MAPE and R² per set,
next to the named baseline: a plain LightGBM on the 11 raw features. The network is left out by
default (`--with-nn` adds it): trees decide the champion here, and the network's cost is measured
in bench_accuracy and bench_train.

    .venv/bin/python tests/benchmarks/bench_runtime.py [--jobs 10000] [--repeats 2] [--with-nn]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import features
from gpucast.tasks.learn.features import FEATURE_SETS, labelled_rows
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.simulate import SimConfig, simulate_jobs

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable
from tests.benchmarks.bench_accuracy import baseline, compare, scores  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--with-nn", action="store_true")
    ap.add_argument("--nn-epochs", type=int, default=30)
    args = ap.parse_args()
    target = c.RUNTIME_HOURS
    jobs = simulate_jobs(int(args.jobs * 1.4), np.random.default_rng(7), SimConfig().start, pending_fraction=0.0)
    done = jobs.filter(pl.col(c.STATUS) == "COMPLETED").head(args.jobs)
    rows = features.build(labelled_rows(done, target)).sort(c.JOB_ID)  # + hardware context and priors, as the nightly
    print(f"simulator: {rows.height:,} completed jobs with {target}; {args.repeats} repeats")
    for fs in FEATURE_SETS:
        models = tuple(m for m in TrainOptions(features=fs).model_names if args.with_nn or m != registry.NN)
        t0 = time.perf_counter()
        res = compare(rows, target, fs, models, args.repeats, args.nn_epochs)
        s = scores(res["tests"][res["champion"]], memory=False)
        print(f"  feature set {fs:9s}: champion {res['champion']:16s} test MAPE {s['mape']:6.1f}%  R² {s['r2']:.3f}  "
              f"P90 cover {s['p90_cover']:.1%}  ({time.perf_counter() - t0:.0f} s)", flush=True)
    b = scores(baseline(rows, target, args.repeats), memory=False)
    print(f"  baseline: plain LightGBM on the 11 raw features: test MAPE {b['mape']:6.1f}%  R² {b['r2']:.3f}")


if __name__ == "__main__":
    main()
