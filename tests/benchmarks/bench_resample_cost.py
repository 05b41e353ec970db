"""The champion rule's resampling: its cost and its decision, jobs drawn one by one against `RESAMPLE_BLOCKS` blocks.

docs/models.md's "The resampling's cost" (issue 50 session 8, review 57 N3; committed for review 57 N13: it ran as
uncommitted scratch scripts). `champion._below` decides whether a candidate beats the plain LightGBM clearly (at least
1 - `FLOOR_P` of `BOOTSTRAP` seeded resamples of the jobs). Above `RESAMPLE_BLOCKS` jobs it resamples seeded blocks'
sums instead of the jobs. For constructed heavy-tailed paired differences (Student t, 2.5 degrees of freedom, seeded)
with a mean of 0 to -0.03, at each size: the share below zero and the decision ("clear" at >= 97.5%) and the CPU
seconds of one call, jobs one by one (`RESAMPLE_BLOCKS` raised past the size, in this process only) and in blocks.

`--end-to-end ROWS`: `champion.champion_choice` at ROWS out-of-fold rows (one pass of 3 folds) of 9 models all below
the plain LightGBM plus the plain LightGBM, its CPU and wall seconds (the fits built as the champion tests build them,
tests/tasks/learn/test_champion_choice.py `_fits`).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_resample_cost.py [--sizes 20000,100000,500000]
        [--end-to-end 500000]

Cost: the one-by-one draws are ~8.7 CPU-s a call at 500,000 jobs (load 10), so the default sizes take about a minute.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from gpucast.tasks.learn import champion as ch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable

SHIFTS = (0.0, 0.01, 0.02, 0.03)  # minus the mean paired difference
MODELS = ("extra_trees", "catboost", "xgboost", "lightgbm", "decision_tree", "random_forest", "adaboost", "linear_fs",
          "blend")


def one_by_one_and_blocks(sizes: list[int]) -> None:
    rng = np.random.default_rng(0)
    blocks = ch.RESAMPLE_BLOCKS
    try:
        for n in sizes:
            for shift in SHIFTS:
                d = rng.standard_t(2.5, n) - shift
                out = []
                for label, limit in (("jobs", 10**9), ("blocks", blocks)):
                    ch.RESAMPLE_BLOCKS = limit
                    c0 = time.process_time()
                    share = ch._below(d)
                    cpu = time.process_time() - c0
                    out.append(f"{label if n > limit or label == 'jobs' else 'jobs (under the blocks)'}: {share:.2%} "
                               f"({'clear' if share >= 1 - ch.FLOOR_P else 'not'}) {cpu:.2f} CPU-s")
                print(f"{n:>9,} jobs, mean difference {-shift:+.2f}: " + " | ".join(out), flush=True)
    finally:
        ch.RESAMPLE_BLOCKS = blocks


def end_to_end(n: int) -> None:
    from gpucast.tasks.learn.folds import FOLDS
    from gpucast.tasks.learn.models import registry
    from tests.tasks.learn.test_champion_choice import _fits

    rng = np.random.default_rng(0)
    y = rng.uniform(1, 40, n)
    base = rng.standard_t(2.5, n)
    preds = {m: y + base * (0.9 + 0.01 * i) + rng.normal(0, 0.3, n) for i, m in enumerate(MODELS)}  # all below it
    preds[registry.PLAIN] = y + base * 1.0 + rng.normal(0, 0.3, n)
    fits = _fits(y, preds)
    c0, w0 = time.process_time(), time.perf_counter()
    choice = ch.champion_choice(fits, y, folds=FOLDS)
    print(f"champion_choice at {n:,} rows, {len(preds)} models: champion {choice.champion}, "
          f"{len(choice.competing) - 1} compete; CPU {time.process_time() - c0:.1f} s, "
          f"wall {time.perf_counter() - w0:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20000,100000,500000", help="jobs, comma-separated ('' for none)")
    ap.add_argument("--end-to-end", type=int, default=0, metavar="ROWS", help="also time champion_choice at ROWS")
    args = ap.parse_args()
    if args.sizes:
        one_by_one_and_blocks([int(s) for s in args.sizes.split(",")])
    if args.end_to_end:
        end_to_end(args.end_to_end)


if __name__ == "__main__":
    main()
