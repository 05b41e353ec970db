"""The constants of the champion's counted scoring cost (`tasks/learn/champion.py` `COST_BASE`, `COST_PER_UNIT`).

`score_cost` counts a fitted model's work per job (`predict_work`: tree nodes a job passes, a network's weights) and
converts it to CPU seconds per 1M jobs with one constant per library. This script measures those constants: each
model fitted on the measured set (`tests/data/measured_jobs.csv`, all rows and the first half; seeds 0 and 1), its
`predict` on one thread (n_jobs 1, CatBoost's thread_count 1, threadpoolctl and torch at 1) timed by that thread's CPU
clock on 20,000 rows, the fastest of ROUNDS x 3 calls (the quietest the machine gives). Printed per fit: its kind, its
units of work per job, the CPU-s per 1M jobs and (CPU-s - COST_BASE) / units; then per kind the median and the spread
of that last figure, next to the constant in the code. Rerun it after a library upgrade that may change how fast its
`predict` is (issue 50, session 21; docs/models.md).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/calibrate_score_cost.py [--rounds 5] [--seeds 0,1] [--models a,b] [--network]

`--network` also fits the Transformer-BiGRU (one epoch: its size, not its accuracy, sets its cost).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from contextlib import contextmanager

import numpy as np

from gpucast.expectations import contract as c
from gpucast.tasks.learn import champion, unfitted
from gpucast.tasks.learn.features import FeatureEncoder
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.options import TrainOptions
from tests.measured import load

ROWS = 20_000


@contextmanager
def one_thread(est):
    """`est.predict` on one thread: its n_jobs, CatBoost's thread_count, the BLAS/OpenMP pools and torch's threads."""
    from threadpoolctl import threadpool_limits

    inner = getattr(est, "regressor_", est)
    had = inner.get_params(deep=False).get("n_jobs") if hasattr(inner, "get_params") else None
    if had is not None:
        inner.set_params(n_jobs=1)
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(1)
    catboost = type(inner).__module__.startswith("catboost")
    try:
        with threadpool_limits(limits=1):
            yield (lambda rows: est.predict(rows, thread_count=1)) if catboost else est.predict
    finally:
        if had is not None:
            inner.set_params(n_jobs=had)
        if threads is not None:
            torch.set_num_threads(threads)


def cpu_per_million(est, X: np.ndarray, rounds: int) -> float:
    """The fastest one-thread call's CPU seconds per row, scaled to 1M jobs."""
    sample = X[np.resize(np.arange(len(X)), ROWS)]
    best = np.inf
    with one_thread(est) as predict:
        predict(sample[:100])  # warm-up
        for _ in range(rounds):
            for part in np.array_split(sample, 3):
                t0 = time.thread_time()
                predict(part)
                best = min(best, (time.thread_time() - t0) / len(part))
    return best * 1e6


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--models", default="", help="comma-separated registry names (default: every tree and linear model)")
    ap.add_argument("--network", action="store_true", help="also the Transformer-BiGRU, one epoch")
    args = ap.parse_args(argv)
    rows, target = load(), c.PEAK_GPU_MEM_GB
    options = TrainOptions(epochs=1) if args.network else TrainOptions()
    models = (args.models.split(",") if args.models
              else [m for m in options.model_names if m != registry.NN] + ([registry.NN] if args.network else []))
    per_unit: dict[str, list[float]] = defaultdict(list)
    print(f"{len(rows)} measured jobs; models {', '.join(models)}; COST_BASE {champion.COST_BASE}", flush=True)
    for name in models:
        for seed in (int(s) for s in args.seeds.split(",")):
            for part, sub in (("all", rows), ("half", rows[: len(rows) // 2])):
                enc = FeatureEncoder(options.features).fit(sub)
                X, y = enc.transform(sub), sub[target].to_numpy().astype(np.float64)
                build = registry.Build(seed=seed, threads=2, progress=lambda _: None,
                                       epochs=1 if name == registry.NN else None)
                est = unfitted.model(name, enc, target, options, build).fit(X, y)
                kind, units = champion.predict_work(est)
                cpu = cpu_per_million(est, enc.transform(rows), args.rounds)
                unit = (cpu - champion.COST_BASE) / units if units else float("nan")
                if kind is not None and units:
                    per_unit[kind].append(unit)
                print(f"{name:16s} seed {seed} {part:4s} kind {kind or '-':14s} units {units:12.2f} "
                      f"CPU-s per 1M {cpu:9.3f} per unit {unit:.6f}", flush=True)
    print("\nper kind: median (min-max) of (CPU-s - COST_BASE) / units, against the code's constant")
    for kind, values in sorted(per_unit.items()):
        print(f"  {kind:14s} {np.median(values):.5f} ({min(values):.5f}-{max(values):.5f})   "
              f"COST_PER_UNIT {champion.COST_PER_UNIT.get(kind)}")


if __name__ == "__main__":
    main()
