"""Accuracy on real measurements: gpucast's models vs a plain LightGBM, per target and model type.

The measured set (`tests/data/measured_jobs.csv`, made by `tests/data/make_measured_jobs.py`) holds
real PyTorch training configurations whose peak training memory and FLOPs per step were measured
with PyTorch's own tooling: nothing in it comes from gpucast's simulator. For each target (memory;
compute as FLOPs per training step) and each repeat, the rows are split as the product splits them
(70/30, 20% of train for validation); every model is fitted on the fit rows, the champion is the
lowest mean validation RMSE, and intervals are split-conformal on the validation rows. The named
baseline is a plain LightGBM on the 11 raw features (`contract`), on the same splits, with a plain
quantile LightGBM (alpha 0.9) for its P90.

Printed: per target and model type, the champion's and the baseline's MAPE, R², P90 coverage and
(memory) how often `safe_request_gb` under-provisions; the feature sets compared (with and without
the priors); the Transformer-BiGRU presets against the best tree ensemble (RMSE and training time);
and what refitting the champion on all labelled jobs gains, at full size and at 300 jobs.

    .venv/bin/python tests/benchmarks/bench_accuracy.py [--repeats 3] [--nn-epochs 200] [--nn-presets paper,tuned] [--targets T,T] [--quick]
    .venv/bin/python tests/benchmarks/bench_accuracy.py --real-architectures [real_archs.py's flags]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import priors
from gpucast.tasks.learn.features import FEATURE_SETS, FeatureEncoder
from gpucast.tasks.learn.intervals import Calibrated, calibrate
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.score import safe_request_gb
from gpucast.tasks.learn.train import CALIBRATION_FRACTION, TrainOptions, _build, choose_champion, metrics, split

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable
from tests.benchmarks import real_archs  # noqa: E402
from tests.measured import load  # noqa: E402

TARGETS = {c.PEAK_GPU_MEM_GB: "memory (GB)", priors.GFLOP_PER_ITERATION: "compute (GFLOP per training step)"}
TREE_ENSEMBLES = ("extra_trees", "random_forest", "catboost", "xgboost", "lightgbm")


def fit_predict(name: str, rows: pl.DataFrame, y: np.ndarray, target: str, feature_set: str, fit: np.ndarray,
                nn_epochs: int, preset: str = "paper") -> tuple[np.ndarray, float]:
    """(predictions for every row, training seconds) of model `name` fitted on rows `fit`."""
    enc = FeatureEncoder(feature_set).fit(rows[fit])
    X = enc.transform(rows)
    options = TrainOptions(features=feature_set, preset=preset, epochs=nn_epochs)
    t0 = time.perf_counter()
    est = _build(name, enc, X.shape[1], target, options, 0, lambda _: None).fit(X[fit], y[fit])
    return est.predict(X), time.perf_counter() - t0


def plain_quantile_p90(rows: pl.DataFrame, y: np.ndarray, fit: np.ndarray) -> np.ndarray:
    """A plain quantile model's P90: LightGBM (alpha 0.9) on log(y) and the 11 raw features."""
    from lightgbm import LGBMRegressor

    enc = FeatureEncoder("contract").fit(rows[fit])
    X = enc.transform(rows)
    q = LGBMRegressor(objective="quantile", alpha=0.9, n_estimators=600, learning_rate=0.05, num_leaves=63,
                      subsample=0.8, subsample_freq=1, colsample_bytree=0.8, random_state=0, n_jobs=2, verbose=-1)
    return np.exp(q.fit(X[fit], np.log(y[fit])).predict(X))


def compare(rows: pl.DataFrame, target: str, feature_set: str, models: tuple[str, ...], repeats: int,
            nn_epochs: int, preset: str = "paper") -> dict:
    """Every model on every repeat's split: validation RMSEs, the champion, and per-row test results."""
    y = rows[target].to_numpy().astype(np.float64)
    val_rmse: list[dict] = []
    tests: dict[str, list[pl.DataFrame]] = {}
    seconds: dict[str, list[float]] = {}
    for r in range(repeats):
        fit, val, test = split(rows.height, r)
        for name in models:
            pred, s = fit_predict(name, rows, y, target, feature_set, fit, nn_epochs, preset)
            seconds.setdefault(name, []).append(s)
            val_rmse.append({"model": name, "split": "validation", "rmse": metrics(y[val], pred[val])["rmse"]})
            groups = {c.MODEL_TYPE: rows[c.MODEL_TYPE].gather(val).to_list()}
            cal = Calibrated(calibrate(y[val], pred[val], float(y[fit].min()), groups))
            p10, p50, p90 = cal.intervals(pred[test], {c.MODEL_TYPE: rows[c.MODEL_TYPE].gather(test).to_numpy()})
            tests.setdefault(name, []).append(rows[test].select(c.MODEL_TYPE).with_columns(
                pl.Series("actual", y[test]), pl.Series("p50", pred[test]), pl.Series("p10", p10),
                pl.Series("p90", p90), pl.lit(r).alias("repeat")))
    champion = choose_champion(val_rmse)
    mean_val = pl.DataFrame(val_rmse).group_by("model").agg(pl.col("rmse").mean())
    return {"champion": champion, "tests": {m: pl.concat(v) for m, v in tests.items()},
            "val_rmse": dict(mean_val.iter_rows()), "seconds": {m: float(np.mean(s)) for m, s in seconds.items()}}


def baseline(rows: pl.DataFrame, target: str, repeats: int) -> pl.DataFrame:
    """The plain LightGBM (point) and plain quantile LightGBM (P90) on the 11 raw features, same splits."""
    y = rows[target].to_numpy().astype(np.float64)
    parts = []
    for r in range(repeats):
        fit, _, test = split(rows.height, r)
        pred, _ = fit_predict("lightgbm", rows, y, target, "contract", fit, 1)
        p90 = plain_quantile_p90(rows, y, fit)
        parts.append(rows[test].select(c.MODEL_TYPE).with_columns(
            pl.Series("actual", y[test]), pl.Series("p50", pred[test]), pl.Series("p90", p90[test]),
            pl.lit(r).alias("repeat")))
    return pl.concat(parts)


def scores(df: pl.DataFrame, memory: bool) -> dict:
    """MAPE, R², P90 coverage and (memory) under-provisioning of safe_request_gb over rows of `df`."""
    y, p50, p90 = (df[k].to_numpy() for k in ("actual", "p50", "p90"))
    m = metrics(y, p50)
    out = {"n": len(y), "mape": m["mape"], "r2": m["r2"], "p90_cover": float(np.mean(y <= p90))}
    if "p10" in df.columns:
        out["p10_p90_cover"] = float(np.mean((y >= df["p10"].to_numpy()) & (y <= p90)))
    if memory:
        out["under"] = float(np.mean(safe_request_gb(p90) < y))
    return out


def per_type_table(champ: pl.DataFrame, base: pl.DataFrame, memory: bool) -> None:
    header = f"{'model type':12s} {'n':>5s} | {'MAPE %':>7s} {'R²':>6s} {'P90 cov':>7s}" + (f" {'under':>6s}" if memory else "")
    print(f"  {header} || plain LightGBM: {'MAPE %':>7s} {'R²':>6s} {'P90 cov':>7s}" + (f" {'under':>6s}" if memory else ""))
    types = sorted(champ[c.MODEL_TYPE].unique().to_list()) + ["all"]
    for t in types:
        a = champ if t == "all" else champ.filter(pl.col(c.MODEL_TYPE) == t)
        b = base if t == "all" else base.filter(pl.col(c.MODEL_TYPE) == t)
        sa, sb = scores(a, memory), scores(b, memory)
        line = f"{t:12s} {sa['n']:5d} | {sa['mape']:7.1f} {sa['r2']:6.3f} {sa['p90_cover']:7.1%}"
        line += f" {sa['under']:6.1%}" if memory else ""
        line += f" ||                 {sb['mape']:7.1f} {sb['r2']:6.3f} {sb['p90_cover']:7.1%}"
        line += f" {sb['under']:6.1%}" if memory else ""
        print("  " + line)


def refit_gain(rows: pl.DataFrame, target: str, champion: str, feature_set: str, nn_epochs: int, size: int | None,
               repeats: int) -> tuple[float, float]:
    """Test MAPE of the champion as saved before (fitted on 56% of the labelled history) and after
    (refitted on all of it but the calibration slice), with 30% of the rows held out as the test."""
    before, after = [], []
    y_all = rows[target].to_numpy().astype(np.float64)
    for r in range(repeats):
        idx = np.random.default_rng(100 + r).permutation(rows.height)
        n_test = int(round(rows.height * 0.3))
        test, history = idx[:n_test], idx[n_test:]
        if size:
            history = history[:size]
        fit56, _, _ = split(len(history), r)
        refit = history[: len(history) - int(round(len(history) * CALIBRATION_FRACTION))]
        for chosen, out in ((history[fit56], before), (refit, after)):
            pred, _ = fit_predict(champion, rows, y_all, target, feature_set, chosen, nn_epochs)
            out.append(metrics(y_all[test], pred[test])["mape"])
    return float(np.mean(before)), float(np.mean(after))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nn-epochs", type=int, default=200)
    ap.add_argument("--features", default=",".join(FEATURE_SETS), help="feature sets to compare")
    ap.add_argument("--nn-presets", default="paper,tuned", help="network presets set against the best tree ensemble")
    ap.add_argument("--quick", action="store_true", help="2 repeats, no network, fewer sets: a smoke run")
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    ap.add_argument("--real-architectures", action="store_true", help="forecast real named architectures instead "
                    "(tests/benchmarks/real_archs.py, whose flags follow)")
    args, rest = ap.parse_known_args()
    if args.real_architectures or rest:
        return real_archs.main(rest) if args.real_architectures else ap.error(f"unrecognized arguments: {' '.join(rest)}")
    rows = load()
    repeats = 2 if args.quick else args.repeats
    sets = ("contract", "residual") if args.quick else tuple(args.features.split(","))
    trees = ("lightgbm", "extra_trees", "catboost")
    print(f"measured set: {rows.height} jobs, {rows[c.MODEL_TYPE].n_unique()} model types; {repeats} repeats\n")
    for target in args.targets.split(","):
        label = TARGETS[target]
        print(f"== {label}")
        results = {}
        for fs in sets:
            # every model the product compares with this feature set (the quick run: a few trees, no network)
            models = tuple(m for m in TrainOptions(features=fs).model_names
                           if not args.quick or m in (*trees, "linear_fs", registry.PRIOR))
            t0 = time.perf_counter()
            results[fs] = compare(rows, target, fs, models, repeats, args.nn_epochs)
            res = results[fs]
            best_val = res["val_rmse"][res["champion"]]
            print(f"  feature set {fs:9s}: champion {res['champion']:18s} validation RMSE {best_val:.4g}, "
                  f"test MAPE {scores(res['tests'][res['champion']], False)['mape']:.1f}% ({time.perf_counter() - t0:.0f} s)")
        best_set = min(results, key=lambda k: results[k]["val_rmse"][results[k]["champion"]])
        best = results[best_set]
        print(f"  -> kept on validation: {best_set} ({best['champion']})\n")
        per_type_table(best["tests"][best["champion"]], baseline(rows, target, repeats), target == c.PEAK_GPU_MEM_GB)
        if registry.NN in best["seconds"]:
            tree = min(TREE_ENSEMBLES, key=lambda m: best["val_rmse"].get(m, np.inf))
            tree_test = metrics(*[best["tests"][tree][k].to_numpy() for k in ("actual", "p50")])["rmse"]
            nets = {"paper": best}
            if "tuned" in args.nn_presets.split(","):
                nets["tuned"] = compare(rows, target, best_set, (registry.NN,), repeats, args.nn_epochs, preset="tuned")
            for preset, res in nets.items():
                nn_test = metrics(*[res["tests"][registry.NN][k].to_numpy() for k in ("actual", "p50")])["rmse"]
                print(f"  transformer_bigru[{preset}] test RMSE {nn_test:.4g} vs best tree ensemble {tree} {tree_test:.4g}: "
                      f"{nn_test / tree_test:.2f}x; training time {res['seconds'][registry.NN] / best['seconds'][tree]:.1f}x "
                      f"({res['seconds'][registry.NN]:.1f} s vs {best['seconds'][tree]:.1f} s a fit)")
        for size in (None, 300):
            b, a = refit_gain(rows, target, best["champion"], best_set, args.nn_epochs, size, repeats)
            print(f"  refit gain ({'all' if size is None else size} labelled jobs): test MAPE {b:.1f}% fitted on 56% -> "
                  f"{a:.1f}% refitted on 85%")
        print()


if __name__ == "__main__":
    main()
