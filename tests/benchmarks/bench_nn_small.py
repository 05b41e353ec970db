"""The Transformer-BiGRU on data it was not tuned on: its test RMSE against the best tree ensemble's on
the measured set subsampled (the reviewer's ~480 jobs) and leaving one model type out (issue 26, item 6).

Per repeat r the rows are split as the product splits them (`train.split(n, r)`: 70/30, 20% of train for
validation), every model learns the `residual` feature set on the fit rows, the tree ensemble kept is the
one of lowest validation RMSE, and the printed ratio is network test RMSE / that tree's test RMSE (mean
over repeats, and per repeat). With --lofo the test rows are one model type, the fit and validation rows
the other types (the same 80/20 cut of them).

Variants of a preset are set on the command line (`--set batch_size=32 --set epochs=100`), so what changes
the network's ratio can be measured one knob at a time:

    .venv/bin/python tests/benchmarks/bench_nn_small.py --rows 480 --presets paper,tuned [--repeats 3]
    .venv/bin/python tests/benchmarks/bench_nn_small.py --rows 480 --presets tuned --set batch_size=32
    .venv/bin/python tests/benchmarks/bench_nn_small.py --lofo --presets tuned --epochs 60
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn.champion import metrics
from gpucast.tasks.learn.features import FEATURE_SETS, FeatureEncoder, labelled_rows
from gpucast.tasks.learn.folds import split
from gpucast.tasks.learn.models import presets, registry

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable
from tests.measured import load  # noqa: E402

TREES = ("lightgbm", "extra_trees", "catboost")
FEATURES = "residual"


def variant(preset: str, settings: list[str], epochs: int | None) -> str:
    """Register `preset` with the `--set key=value` overrides as a new preset; return its name."""
    cfg = presets.PRESETS[preset]
    types = {f.name: f.type for f in fields(cfg)}
    changes = {}
    for s in settings:
        key, value = s.split("=", 1)
        changes[key] = {"int": int, "float": float, "str": str}[str(types[key])](value)
    if epochs:
        changes["epochs"] = epochs
    if not changes:
        return preset
    name = preset + "+" + ",".join(f"{k}={v}" for k, v in changes.items())
    presets.PRESETS[name] = replace(cfg, **changes)
    return name


def fit_rmse(name: str, rows: pl.DataFrame, y: np.ndarray, fit: np.ndarray, val: np.ndarray, test: np.ndarray,
             target: str, preset: str, seed: int) -> tuple[float, float, float, int | None]:
    """(validation RMSE, test RMSE, seconds, epochs run) of registry model `name` fitted on `fit`."""
    enc = FeatureEncoder(FEATURES).fit(rows[fit])
    X = enc.transform(rows)
    fs = FEATURE_SETS[FEATURES]
    build = registry.Build(seed=seed, threads=2, categorical=enc.categorical, cardinalities=enc.cardinalities,
                           base=fs.base_column(target), preset=preset, device="cpu")
    t0 = time.perf_counter()
    est = registry.build(name, build).fit(X[fit], y[fit])
    seconds = time.perf_counter() - t0
    pred = est.predict(X)
    return metrics(y[val], pred[val])["rmse"], metrics(y[test], pred[test])["rmse"], seconds, getattr(est, "epochs_run_", None)


def splits(rows: pl.DataFrame, repeats: int, lofo: bool):
    """(label, seed, fit, validation, test) index sets: repeated product splits, or one model type held out."""
    if not lofo:
        for r in range(repeats):
            yield f"repeat {r}", r, *split(rows.height, r)
        return
    types = rows[c.MODEL_TYPE].to_numpy()
    for family in sorted(set(types)):
        test, rest = np.flatnonzero(types == family), np.flatnonzero(types != family)
        order = np.random.default_rng(0).permutation(rest)
        n_val = int(round(len(order) * 0.2))
        yield family, 0, order[n_val:], order[:n_val], test


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=None, help="subsample the measured set to this many jobs (seeded)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lofo", action="store_true", help="hold out one model type at a time")
    ap.add_argument("--presets", default="paper,tuned")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--set", action="append", default=[], help="a preset field to override, key=value (repeatable)")
    ap.add_argument("--target", default=c.PEAK_GPU_MEM_GB)
    args = ap.parse_args()
    rows = labelled_rows(load(), args.target)
    if args.rows:
        rows = rows[np.sort(np.random.default_rng(0).permutation(rows.height)[: args.rows])]
    y = rows[args.target].to_numpy().astype(np.float64)
    nets = [variant(p, args.set, args.epochs) for p in args.presets.split(",")]
    print(f"{rows.height} measured jobs, target {args.target}, {'leave one model type out' if args.lofo else 'repeated splits'}")
    ratios: dict[str, list[float]] = {n: [] for n in nets}
    for label, seed, fit, val, test in splits(rows, args.repeats, args.lofo):
        trees = {t: fit_rmse(t, rows, y, fit, val, test, args.target, "paper", seed) for t in TREES}
        best = min(trees, key=lambda t: trees[t][0])
        line = f"{label:12s} fit {len(fit)}: best tree {best} test RMSE {trees[best][1]:.3f}"
        for net in nets:
            v, t, s, ep = fit_rmse(registry.NN, rows, y, fit, val, test, args.target, net, seed)
            ratios[net].append(t / trees[best][1])
            line += f" | {net}: {t:.3f} ({ratios[net][-1]:.2f}x, {ep} epochs, {s:.0f} s)"
        print(line, flush=True)
    for net, r in ratios.items():
        print(f"{net}: network / best tree test RMSE, mean {np.mean(r):.2f}x, geometric mean "
              f"{np.exp(np.mean(np.log(r))):.2f}x, median {np.median(r):.2f}x over {len(r)}")


if __name__ == "__main__":
    main()
