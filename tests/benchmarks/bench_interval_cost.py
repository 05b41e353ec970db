"""The label-conditional P90's scoring cost: `Calibrated.intervals` on 1M memory jobs with and without `LARGE_TRUTH`.

docs/models.md's "Scoring cost" of session 8's rule for the jobs measured large (issue 50; committed for review 57
N13: it ran as an uncommitted scratch script). A calibration is built with `intervals.calibrate` from seeded constructed
forecasts (600 history jobs, CNN and MLP alternating, log-normal residuals; the shape groups' columns, the out-of-fold
forecasts of every job), so it holds the shape groups and the large jobs' own P90; then `Calibrated.intervals` runs on
`--jobs` constructed pending forecasts, with that calibration as built and with its `LARGE_TRUTH` part removed:
CPU seconds per 1M jobs, the best of `--repeat` calls each, in this process.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_interval_cost.py [--jobs 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn.intervals import LARGE_TRUTH, Calibrated, calibrate


def calibration(rng: np.random.Generator, n: int = 600) -> dict:
    pred = np.exp(rng.uniform(0, 3, n))
    truth = pred * np.exp(rng.normal(0, 0.3, n))
    types = np.where(np.arange(n) % 2 == 0, "CNN", "MLP")
    shapes = {c.MODEL_TYPE: types, c.BATCH_SIZE: rng.integers(8, 64, n).astype(float),
              c.INPUT_DIM: rng.integers(32, 224, n).astype(float)}
    raw = calibrate(truth[:90], pred[:90], 1.0, {c.MODEL_TYPE: types[:90].tolist()}, history=truth, shapes=shapes,
                    out_of_fold=(truth, pred, np.arange(n)))
    if raw[LARGE_TRUTH] is None:
        raise SystemExit("the constructed calibration has no large jobs' P90: nothing to time")
    return raw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    raw = calibration(rng)
    m = args.jobs
    groups = {c.MODEL_TYPE: pl.Series(np.where(np.arange(m) % 2 == 0, "CNN", "MLP")), c.QUEUE: pl.Series(["q"] * m),
              c.BATCH_SIZE: pl.Series(rng.integers(8, 64, m).astype(float)),
              c.INPUT_DIM: pl.Series(rng.integers(32, 224, m).astype(float))}
    p = np.exp(rng.uniform(0, 3, m))
    for label, cal in (("without", Calibrated({**raw, LARGE_TRUTH: None})), ("with", Calibrated(raw))):
        best = float("inf")
        for _ in range(args.repeat):
            t = time.process_time()
            cal.intervals(p, groups)
            best = min(best, time.process_time() - t)
        print(f"{label} the large jobs' P90: {best * 1e6 / m:.3f} CPU-s per 1M jobs (best of {args.repeat}, {m:,} jobs)")


if __name__ == "__main__":
    main()
