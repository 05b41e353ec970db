"""Benchmark: a fit's OpenMP threads against the cores that are free (why `OMP_NUM_THREADS` matters, issue 39).

    .venv/bin/python tests/benchmarks/bench_threads.py [--rows 2000] [--trees 300]

One LightGBM fit of `--rows` rows (20 features) with `n_jobs` = 1 and = every core, first alone, then with a
second process running the same fit at the same time (as two test workers, or a nightly beside another job,
do). The baseline is one thread. It prints wall and CPU seconds per case and the ratio to the baseline: more
threads than free cores spin at every barrier, and the fit becomes many times slower, not a little
(`flows/environment.py` `cores_here`, docs/testing.md).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

import numpy as np


def fit(rows: int, trees: int, threads: int) -> tuple[float, float]:
    """(wall s, CPU s of this process) of one LightGBM fit."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = rng.random((rows, 20))
    y = X @ rng.random(20) + rng.normal(0, 0.1, rows)
    wall, cpu = time.perf_counter(), time.process_time()
    lgb.LGBMRegressor(n_estimators=trees, n_jobs=threads, verbose=-1).fit(X, y)
    return time.perf_counter() - wall, time.process_time() - cpu


def _beside(rows: int, trees: int, threads: int, out) -> None:
    out.put(fit(rows, trees, threads))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--trees", type=int, default=300)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} core(s); load average {os.getloadavg()[0]:.1f}; LightGBM, {args.rows:,} rows, {args.trees} trees")
    base = None
    for label, threads, other in (("1 thread, alone", 1, False), (f"{cores} threads, alone", cores, False),
                                  ("1 thread, beside a second fit", 1, True),
                                  (f"{cores} threads, beside a second fit", cores, True)):
        queue = mp.get_context("spawn").Queue()
        second = mp.get_context("spawn").Process(target=_beside, args=(args.rows, args.trees, threads, queue)) if other else None
        if second:
            second.start()
        wall, cpu = fit(args.rows, args.trees, threads)
        if second:
            queue.get()
            second.join()
        base = base or wall
        print(f"  {label:38s} wall {wall:7.2f} s  cpu {cpu:7.2f} s  x{wall / base:6.1f} of one thread alone")


if __name__ == "__main__":
    main()
