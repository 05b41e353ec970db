"""Does the Transformer-BiGRU learn? Its training loss, epoch by epoch, per target and preset.

The loss is the MSE of the standardised target: 1.0 is what predicting the mean scores, so a curve
that sits at 1.0 is a network that does not learn. The baseline named beside it is the same split's
LightGBM test MAPE.

    .venv/bin/python tests/benchmarks/bench_nn_stability.py [--jobs 5000] [--epochs 40] [--presets paper,tuned]
    # the implementation before the fix, for the "before" curves (docs/models.md):
    git show 5a0f13a:tasks/learn/models/transformer_bigru.py > /tmp/tbg_before.py
    .venv/bin/python tests/benchmarks/bench_nn_stability.py --module /tmp/tbg_before.py --features contract

Writes the curves as CSV (and a PNG chart with --png).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from datetime import date

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import features
from gpucast.tasks.learn.champion import metrics
from gpucast.tasks.learn.features import FEATURE_SETS, FeatureEncoder, labelled_rows
from gpucast.tasks.learn.folds import split
from gpucast.tasks.learn.models import registry
from gpucast.tasks.simulate import simulate_jobs


def regressor_class(module_path: str | None):
    if module_path is None:
        from gpucast.tasks.learn.models.transformer_bigru import TransformerBiGRURegressor

        return TransformerBiGRURegressor
    spec = importlib.util.spec_from_file_location("tbg_under_test", module_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module.TransformerBiGRURegressor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=5000, help="simulated jobs (about 75%% are labelled)")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--presets", default="paper")
    ap.add_argument("--features", default="contract", choices=list(FEATURE_SETS))
    ap.add_argument("--module", default=None, help="another transformer_bigru.py to load (the 'before' curves)")
    ap.add_argument("--csv", default="nn_loss_curves.csv")
    ap.add_argument("--png", default=None)
    args = ap.parse_args()
    cls = regressor_class(args.module)
    jobs = features.build(simulate_jobs(args.jobs, np.random.default_rng(7), date(2026, 11, 1), 0.0))
    fs = FEATURE_SETS[args.features]
    curves = []
    for target in c.TARGETS:
        rows = labelled_rows(jobs, target)
        y = rows[target].to_numpy()
        fit, _, test = split(rows.height, 0)
        enc = FeatureEncoder(args.features).fit(rows[fit])
        X = enc.transform(rows)
        gbm = registry.build("lightgbm", registry.Build(seed=0, base=fs.base_column(target))).fit(X[fit], y[fit])
        base_mape = metrics(y[test], gbm.predict(X[test]))["mape"]
        for preset in args.presets.split(","):
            kwargs = dict(preset=preset, seed=0, epochs=args.epochs, categorical=enc.categorical,
                          cardinalities=enc.cardinalities)
            if fs.base_column(target) is not None:
                kwargs["base"] = fs.base_column(target)
            t0 = time.perf_counter()
            est = cls(**kwargs).fit(X[fit], y[fit])
            m = metrics(y[test], est.predict(X[test]))
            losses = [h["train_loss"] for h in est.history_]
            curves += [{"target": target, "preset": preset, "epoch": h["epoch"], "train_loss": h["train_loss"]}
                       for h in est.history_]
            print(f"{target:18s} {preset:12s} {time.perf_counter() - t0:6.0f} s  loss first {losses[0]:.3f} "
                  f"min {min(losses):.3f} last {losses[-1]:.3f}  test MAPE {m['mape']:.1f}% R2 {m['r2']:.3f} "
                  f"(LightGBM on the same split: MAPE {base_mape:.1f}%)", flush=True)
            print("   loss by epoch: " + " ".join(f"{v:.2f}" for v in losses), flush=True)
    df = pl.DataFrame(curves)
    df.write_csv(args.csv)
    if args.png:
        plot(df, args.png)


def plot(df: pl.DataFrame, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(c.TARGETS), figsize=(15, 4), sharey=True)
    for ax, target in zip(axes, c.TARGETS, strict=True):
        for (preset,), part in df.filter(pl.col("target") == target).group_by("preset", maintain_order=True):
            ax.plot(part["epoch"], part["train_loss"], label=preset)
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        ax.set_title(target)
        ax.set_xlabel("epoch")
    axes[0].set_ylabel("training MSE (standardised target; 1.0 = the mean)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
