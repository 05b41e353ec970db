"""Benchmark: training time and accuracy of every model at 10k and 100k simulated completed jobs.

    python tests/benchmarks/bench_train.py [--sizes 10000,100000] [--target gpu_demand_gflops]
                                           [--nn-epochs 10000=200,100000=20] [--device cpu]
                                           [--presets paper,tuned,bigru_first] [--baselines lightgbm,...]

Per size: one 70/30 split (20% of train held out for validation) shared by every model, the
protocol of `tasks/learn/train.py`. Prints train seconds (and the ratio to LightGBM, the named baseline),
validation RMSE and test MSE/RMSE/MAE/MAPE/R², for the Transformer-BiGRU in each preset of
`--presets` and every baseline. The network's epochs are capped per size (`--nn-epochs`) so
that the 100k run ends on a 2-core CPU; the cap is printed with the figures.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn.champion import metrics
from gpucast.tasks.learn.features import FeatureEncoder, labelled_rows
from gpucast.tasks.learn.folds import split
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.models.presets import DEFAULT_PRESET
from gpucast.tasks.simulate import SimConfig, simulate_jobs

BASELINE = "lightgbm"


def completed_jobs(n: int, seed: int) -> pl.DataFrame:
    """At least n COMPLETED jobs with every target measured."""
    rng = np.random.default_rng(seed)
    df = simulate_jobs(int(n * 1.35) + 100, rng, SimConfig().start, pending_fraction=0.0)
    done = df.filter(pl.col(c.STATUS) == "COMPLETED")
    if done.height < n:
        raise SystemExit(f"simulated only {done.height} completed jobs, wanted {n}")
    return done.head(n)


def run(n: int, target: str, nn_epochs: int, device: str | None, presets: list[str],
        baselines: list[str] | None = None) -> pl.DataFrame:
    rows = labelled_rows(completed_jobs(n, seed=n), target)
    y = rows[target].to_numpy()
    fit, val, test = split(rows.height, seed=0)
    enc = FeatureEncoder("contract").fit(rows[fit])  # the 11 features, as before the default became residual
    X = enc.transform(rows)
    out = []
    others = [m for m in registry.REGISTRY if m != registry.NN and (baselines is None or m in baselines or m == BASELINE)]
    plan = [(registry.NN, p) for p in presets if p != "none"] + [(m, None) for m in others]
    for name, preset in plan:
        est = registry.build(name, registry.Build(seed=0, categorical=enc.categorical, cardinalities=enc.cardinalities,
                                                  preset=preset or DEFAULT_PRESET, device=device,
                                                  epochs=nn_epochs if name == registry.NN else None))
        t = time.perf_counter()
        est.fit(X[fit], y[fit])
        seconds = time.perf_counter() - t
        v, m = metrics(y[val], est.predict(X[val])), metrics(y[test], est.predict(X[test]))
        label = f"{name}[{preset}]" if preset else name
        epochs = getattr(est, "epochs_run_", None)
        out.append({"model": label, "train_s": seconds, "epochs": epochs,
                    "epoch_s": seconds / epochs if epochs else None, "val_rmse": v["rmse"], **m,
                    "device": getattr(est, "device_", "cpu")})
        per_epoch = f" ({seconds / epochs:.1f} s/epoch over {epochs})" if epochs else ""
        print(f"  n={n:,} {label:28s} {seconds:8.1f} s{per_epoch}  val RMSE {v['rmse']:.4g}  test MAPE {m['mape']:.1f}%",
              flush=True)
    df = pl.DataFrame(out)
    base = df.filter(pl.col("model") == BASELINE)["train_s"][0]
    return df.with_columns((pl.col("train_s") / base).alias(f"time_vs_{BASELINE}"), pl.lit(n).alias("jobs"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--target", default=c.GPU_DEMAND_GFLOPS, choices=c.TARGETS)
    ap.add_argument("--nn-epochs", default="10000=200,100000=20", help="size=epochs,... (cap per size)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--presets", default="paper,tuned,bigru_first",
                    help="Transformer-BiGRU presets to compare (none: baselines only)")
    ap.add_argument("--baselines", default=None, help=f"comma-separated baselines (default: all; {BASELINE} always)")
    args = ap.parse_args()
    caps = dict(item.split("=") for item in args.nn_epochs.split(","))
    for n in [int(s) for s in args.sizes.split(",")]:
        epochs = int(caps.get(str(n), 200))
        print(f"\n== {n:,} completed jobs, target {args.target}, Transformer-BiGRU epochs <= {epochs} ==", flush=True)
        df = run(n, args.target, epochs, args.device, args.presets.split(","),
                 args.baselines.split(",") if args.baselines else None)
        with pl.Config(tbl_rows=50, tbl_cols=20, tbl_width_chars=220, float_precision=4,
                       tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
            print(df.select("model", "device", "epochs", "train_s", "epoch_s", f"time_vs_{BASELINE}", "val_rmse", "mse", "rmse",
                            "mae", "mape", "r2"))


if __name__ == "__main__":
    main()
