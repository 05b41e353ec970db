"""Which estimate out-of-distribution jobs get, and how wide: the held-out-family evidence, measured.

For each data set and target, `evidence.held_out_evidence` leaves each model family out of the rows in
turn (a LightGBM of 100 trees, the stand-in for a costly champion, fitted on the other families) and
scores the trained model's extrapolation, the target's analytic prior and their geometric mean on the
held-out family. Printed per candidate: MAPE over all held-out rows, median |log error|, the interval
factor (90th percentile of |log(actual / estimate)|), MAPE per family; the chosen estimate; seconds
(wall and CPU: on a shared machine the wall time says more about the neighbours).

Data sets: the measured set (`tests/data/measured_jobs.csv`: 840 real PyTorch networks, 7 families;
memory and FLOPs per step) and simulated jobs (`tasks/simulate.py`, the demo's generator; 3,000 jobs).

    .venv/bin/python tests/benchmarks/bench_ood_fallback.py [--simulated-jobs 3000]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import priors
from gpucast.tasks.learn.evidence import held_out_evidence
from gpucast.tasks.learn.features import build, labelled_rows
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.simulate import simulate_jobs

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable
from tests.measured import load  # noqa: E402


def report(name: str, rows: pl.DataFrame, target: str) -> None:
    rows = labelled_rows(rows, target)
    cpu = time.process_time()
    evidence = held_out_evidence(rows, target, TrainOptions(), "lightgbm", registry.Build(threads=2, progress=lambda _: None))
    cpu = time.process_time() - cpu
    print(f"\n{name}, {target}: {rows.height} rows; chosen: {evidence.estimate} "
          f"(x/÷ {evidence.interval_factor:.2f}); {evidence.seconds:.1f} s wall, {cpu:.1f} s CPU; "
          f"learner {evidence.learner}")
    families = list(evidence.families)
    print(f"  {'candidate':<9} {'MAPE %':>8} {'med|log|':>9} {'factor':>7}  " + " ".join(f"{f[:11]:>11}" for f in families))
    for cand, s in evidence.candidates.items():
        print(f"  {cand:<9} {s.mape:8.1f} {s.median_log_error:9.3f} {s.interval_factor:7.2f}  "
              + " ".join(f"{s.mape_by_family[f]:11.1f}" for f in families))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulated-jobs", type=int, default=3000)
    args = ap.parse_args()
    measured = load()
    for target in (c.PEAK_GPU_MEM_GB, priors.GFLOP_PER_ITERATION):
        report("measured set", measured, target)
    simulated = build(simulate_jobs(args.simulated_jobs, np.random.default_rng(1), date(2026, 11, 1), 0.0))
    for target in c.TARGETS:
        report("simulated jobs", simulated, target)


if __name__ == "__main__":
    main()
