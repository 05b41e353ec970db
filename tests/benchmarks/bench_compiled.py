"""Benchmark: each tree family's compiled library (treelite + tl2cgen, gcc) against the library's own predict.

    python tests/benchmarks/bench_compiled.py [--jobs 3000] [--rows 200000] [--threads 2] [--families ...] [--plain]
    python tests/benchmarks/bench_compiled.py --forest-leaves 2048,1024,512,256 [--jobs 20000] [--compile-target T]
                                              [--compile-leaves 512,256] [--forest-family extra_trees] [--forest-trees 25]

Per family: the registry's model with its own hyperparameters, fitted on `--jobs` simulated labelled jobs
(peak GPU memory, the default feature set), saved and compiled as `save_champion` does; then the raw
predict (what the compiled library replaces) on `--rows` encoded jobs, compiled vs the library's own
`predict` (the named baseline), both on `--threads` threads, with the largest relative difference.
XGBoost and DecisionTree stay native (`compiled.STAYS_NATIVE`): they are compiled here anyway, outside
the registry's path, to measure why. AdaBoost cannot be compiled: its native
predict alone is timed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from gpucast.expectations import contract as c
from gpucast.tasks.learn.features import FEATURE_SETS, FeatureEncoder
from gpucast.tasks.learn.models import compiled, registry, store
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.train import labelled
from gpucast.tasks.simulate import SimConfig, simulate_jobs

FAMILIES = ("lightgbm", "xgboost", "random_forest", "extra_trees", "decision_tree", "adaboost")
TARGET = c.PEAK_GPU_MEM_GB


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def bench(name: str, X: np.ndarray, y: np.ndarray, rows: np.ndarray, base: int | None, categorical, threads: int,
          folder: Path, plain: bool = False) -> None:
    est, fit_s = timed(registry.build(name, registry.Build(threads=threads, categorical=categorical, base=base)).fit, X, y)
    path = store.save_model(folder, name, est)
    inner = est.regressor_
    native_pred, native_s = timed(inner.predict, rows)
    head = f"{name:14s} fit {fit_s:6.1f} s | native predict {len(rows):,} rows {native_s:6.2f} s"
    if name == "adaboost":
        print(f"{head} = {len(rows) / native_s * 60:,.0f} rows/min (not compilable: {compiled.STAYS_NATIVE[name][:60]}...)",
              flush=True)
        return
    lib = folder / f"{name}-bench{compiled.LIB_SUFFIX}"
    _, compile_s = timed(compiled.export, compiled.treelite_model(name, path, inner), lib, threads)
    fast = compiled.CompiledTrees(lib, threads, float32_input=name in compiled.SKLEARN_TREES)
    fast_pred, fast_s = timed(fast.predict, rows)
    diff = compiled.max_relative_difference(fast_pred, np.asarray(native_pred, dtype=np.float64))
    verdict = "kept" if name in compiled.COMPILABLE and diff <= compiled.AGREEMENT_RTOL else "stays native"
    print(f"{head} | compiled {fast_s:6.2f} s = {native_s / fast_s:5.2f}x | compile {compile_s:6.1f} s | "
          f"max rel diff {diff:.1e} (abs {np.max(np.abs(fast_pred - native_pred)):.1e}) | {verdict}", flush=True)
    if plain:  # the same library without tl2cgen's options (`compiled.CODEGEN`: quantized thresholds)
        lib = folder / f"{name}-plain{compiled.LIB_SUFFIX}"
        _, plain_compile_s = timed(compiled.export, compiled.treelite_model(name, path, inner), lib, threads, {})
        slow = compiled.CompiledTrees(lib, threads, float32_input=name in compiled.SKLEARN_TREES)
        slow_pred, slow_s = timed(slow.predict, rows)
        print(f"{'':14s} plain (no {compiled.CODEGEN}): compiled {slow_s:6.2f} s = {native_s / slow_s:5.2f}x native, "
              f"{slow_s / fast_s:4.2f}x the codegen options' time | compile {plain_compile_s:6.1f} s | max rel diff "
              f"{compiled.max_relative_difference(slow_pred, np.asarray(native_pred, dtype=np.float64)):.1e}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=3000, help="labelled jobs the models are fitted on")
    ap.add_argument("--rows", type=int, default=200_000, help="rows predicted")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    ap.add_argument("--plain", action="store_true", help="also compile without compiled.CODEGEN, to measure it")
    ap.add_argument("--forest-leaves", help="random forests with these max_leaf_nodes caps, accuracy and cost")
    ap.add_argument("--compile-target", action="append", help="with --forest-leaves: compile only these targets' forests")
    ap.add_argument("--compile-leaves", help="with --forest-leaves: compile only the forests of these caps")
    ap.add_argument("--forest-family", default="random_forest", choices=compiled.SKLEARN_TREES[:2],
                    help="with --forest-leaves: the forest family measured")
    ap.add_argument("--forest-trees", type=int, help="with --forest-leaves: trees a forest (default: the registry's)")
    args = ap.parse_args()
    if args.forest_leaves:
        forest_leaves([int(n) for n in args.forest_leaves.split(",")], args.jobs, args.rows, args.threads,
                      args.compile_target or list(c.TARGETS),
                      [int(n) for n in (args.compile_leaves or args.forest_leaves).split(",")], args.forest_family,
                      args.forest_trees)
        return
    options = TrainOptions()
    train = labelled(simulate_jobs(int(args.jobs * 1.6), np.random.default_rng(1), SimConfig().start, 0.0), TARGET,
                     options).head(args.jobs)
    encoder = FeatureEncoder(options.features).fit(train)
    X, y = encoder.transform(train), train[TARGET].to_numpy().astype(np.float64)
    pending = simulate_jobs(args.rows, np.random.default_rng(2), SimConfig().start, 1.0)
    rows = np.ascontiguousarray(encoder.transform(_features(pending)))
    print(f"{train.height:,} labelled jobs x {X.shape[1]} features; predicting {len(rows):,} rows on {args.threads} threads",
          flush=True)
    base = FEATURE_SETS[options.features].base_column(TARGET)
    with tempfile.TemporaryDirectory(prefix="gpucast-bench-compiled-") as tmp:
        for name in args.families:
            bench(name, X, y, rows, base, encoder.categorical, args.threads, Path(tmp), args.plain)


def forest_leaves(caps: list[int], jobs: int, n_rows: int, threads: int, compile_targets: list[str],
                  compile_caps: list[int], family: str = "random_forest", trees: int | None = None) -> None:
    """`--forest-leaves`: the registry's `family` forest (`trees` trees, default the registry's) at each leaf cap,
    per target (module doc)."""
    from gpucast.tasks.learn import features
    from gpucast.tasks.learn.champion import metrics
    from gpucast.tasks.learn.features import labelled_rows
    from gpucast.tasks.learn.folds import split
    from gpucast.tasks.learn.options import DEFAULT_FEATURES

    built = features.build(simulate_jobs(int(jobs * 1.35) + 100, np.random.default_rng(jobs), SimConfig().start, 0.0))
    pending = _features(simulate_jobs(n_rows, np.random.default_rng(2), SimConfig().start, 1.0))
    worst = {}
    for target in c.TARGETS:
        rows = labelled_rows(built, target).head(jobs)
        y = rows[target].to_numpy()
        fit, _, test = split(rows.height, seed=0)
        enc = FeatureEncoder(DEFAULT_FEATURES).fit(rows[fit])
        X, P = enc.transform(rows), np.ascontiguousarray(enc.transform(pending))
        print(f"\n== {target}: {len(fit):,} fit / {len(test):,} test rows; predict timed on {len(P):,} pending rows, "
              f"{threads} threads ==", flush=True)
        baseline = None
        for cap in caps:
            est = registry.build(family, registry.Build(seed=0, threads=threads, categorical=enc.categorical,
                                                                 cardinalities=enc.cardinalities,
                                                                 base=FEATURE_SETS[enc.feature_set].base_column(target)))
            est.set_params(regressor__max_leaf_nodes=cap, **({"regressor__n_estimators": trees} if trees else {}))
            _, fit_s = timed(est.fit, X[fit], y[fit])
            mape = metrics(y[test], est.predict(X[test]))["mape"]
            baseline = mape if baseline is None else baseline
            worst[(target, cap)] = mape - baseline
            inner, nodes = est.regressor_, compiled.node_count(family, est.regressor_)
            cpu = time.process_time()
            native, native_s = timed(inner.predict, P)
            cpu = time.process_time() - cpu
            line = (f"max_leaf_nodes {cap:5d}: {nodes:7,} nodes, fit {fit_s:5.1f} s, test MAPE {mape:6.2f}% "
                    f"({mape - baseline:+.2f} points), native predict per 1M {native_s / len(P) * 1e6:6.2f} s "
                    f"(CPU {cpu / len(P) * 1e6:6.2f} s)")
            if target in compile_targets and cap in compile_caps and nodes <= compiled.MAX_COMPILE_NODES:
                with tempfile.TemporaryDirectory(prefix="gpucast-bench-leaves-") as tmp:
                    path = store.save_model(Path(tmp), family, est)
                    lib = Path(tmp) / f"forest{compiled.LIB_SUFFIX}"
                    _, compile_s = timed(compiled.export, compiled.treelite_model(family, path, inner), lib, threads)
                    fast = compiled.CompiledTrees(lib, threads, float32_input=True)
                    cpu = time.process_time()
                    got, fast_s = timed(fast.predict, P)
                    cpu = time.process_time() - cpu
                    line += (f", compile {compile_s:5.1f} s, compiled predict per 1M {fast_s / len(P) * 1e6:5.2f} s "
                             f"(CPU {cpu / len(P) * 1e6:5.2f} s)"
                             f" (max rel diff {compiled.max_relative_difference(got, np.asarray(native, float)):.1e})")
            print(line, flush=True)
    (target, cap), delta = max(worst.items(), key=lambda kv: kv[1])
    print(f"\nworst test MAPE change against max_leaf_nodes {caps[0]}: {delta:+.2f} points ({target}, {cap}); "
          f"goal <= +1 point")
    for cap in caps[1:]:
        d = max(v for (t, k), v in worst.items() if k == cap)
        print(f"  max_leaf_nodes {cap}: worst {d:+.2f} points: {'met' if d <= 1 else 'NOT met'}")


def _features(jobs):
    from gpucast.tasks.learn import features

    return features.build(jobs)


if __name__ == "__main__":
    main()
