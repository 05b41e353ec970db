"""Benchmark: forests' trees and leaves against test MAPE and predict cost, per target (issue 52 item 5).

    .venv/bin/python tests/benchmarks/bench_forest_trees.py [--jobs 20000] [--seeds 0] [--trees 20,25,30,40,50]
                                                           [--leaves 2048,512] [--families random_forest,extra_trees]

Per target and seed, on `--jobs` simulated completed jobs with the protocol of `tasks/learn/train.py` (30% test,
20% of the rest validation, the default `residual` features), each family is fitted once per leaf cap in `--leaves`
with the registry's settings but that cap and the largest tree count of `--trees`; the first k trees of that forest
are a k-tree forest of the same seed (each tree draws its seed in order from the forest's `random_state`), so the
test MAPE and the predict CPU seconds per 1M jobs (`--score-rows` simulated pending jobs, `--threads` threads,
scaled) of each k are read from one fit. The named baseline is the registry's settings before issue 52 (`BASELINE`:
50 trees of 2,048 leaves); every line prints its change in test MAPE points against it (so `--leaves` must start at
2,048 and `--trees` include 50 for it to print).
Goal: no target's test MAPE worse by more than 1 point.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gpucast.expectations import contract as c
from gpucast.tasks.learn import features
from gpucast.tasks.learn.champion import metrics
from gpucast.tasks.learn.features import FeatureEncoder, labelled_rows
from gpucast.tasks.learn.folds import split
from gpucast.tasks.learn.options import DEFAULT_FEATURES
from gpucast.tasks.simulate import SimConfig, simulate_jobs
from tests.benchmarks.bench_ensemble_size import build

BASELINE = (50, 2048)  # (trees, max_leaf_nodes): both forests' settings before issue 52

def cpu_per_million(est, P: np.ndarray) -> float:
    """The predict's CPU seconds (every thread's) per 1M rows, on the encoded pending jobs `P`."""
    est.predict(P[:100])
    t = time.process_time()
    est.predict(P)
    return (time.process_time() - t) * 1_000_000 / len(P)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--seeds", default="0", help="simulation seeds (the split's too), comma separated")
    p.add_argument("--targets", default=",".join(c.TARGETS))
    p.add_argument("--families", default="random_forest,extra_trees")
    p.add_argument("--trees", default="20,25,30,40,50")
    p.add_argument("--leaves", default="2048,512")
    p.add_argument("--score-rows", type=int, default=200_000)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    ks = sorted(int(k) for k in args.trees.split(","))
    pending = features.build(simulate_jobs(args.score_rows, np.random.default_rng(2), SimConfig().start, 1.0))
    for seed in (int(s) for s in args.seeds.split(",")):
        rng = np.random.default_rng(args.jobs + seed)
        jobs = features.build(simulate_jobs(int(args.jobs * 1.35) + 100, rng, SimConfig().start, pending_fraction=0.0))
        for target in args.targets.split(","):
            rows = labelled_rows(jobs, target).head(args.jobs)
            y = rows[target].to_numpy()
            fit, _, test = split(rows.height, seed=seed)
            enc = FeatureEncoder(DEFAULT_FEATURES).fit(rows[fit])
            X, P = enc.transform(rows), np.ascontiguousarray(enc.transform(pending))
            print(f"\n== seed {seed}, {target}: {len(fit):,} fit / {len(test):,} test rows ==", flush=True)
            for name in args.families.split(","):
                baseline = None
                for leaves in (int(v) for v in args.leaves.split(",")):
                    est = build(name, enc, target, args.threads)
                    est.set_params(regressor__n_estimators=max(ks), regressor__max_leaf_nodes=leaves)
                    est.fit(X[fit], y[fit])
                    inner, full = est.regressor_, list(est.regressor_.estimators_)
                    for k in sorted(ks, reverse=True):  # the baseline (FOREST_TREES) first when it is the largest
                        inner.estimators_ = full[:k]
                        mape = metrics(y[test], est.predict(X[test]))["mape"]
                        if (k, leaves) == BASELINE:
                            baseline = mape
                        change = f"{mape - baseline:+.2f}" if baseline is not None else "  n/a"
                        print(f"{name:14} leaves {leaves:5d} trees {k:3d}: test MAPE {mape:6.2f}% ({change} points), "
                              f"predict {cpu_per_million(est, P):5.2f} CPU-s per 1M", flush=True)


if __name__ == "__main__":
    main()
