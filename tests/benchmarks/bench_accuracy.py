"""Accuracy on real measurements: gpucast's models vs a plain LightGBM, per target and model type.

The measured set (`tests/data/measured_jobs.csv`, made by `tests/data/make_measured_jobs.py`) holds
real PyTorch training configurations whose peak training memory and FLOPs per step were measured
with PyTorch's own tooling: nothing in it comes from gpucast's simulator. For each target (memory;
compute as FLOPs per training step) and each repeat, the rows are split as the product splits them
(70/30, 20% of train for validation); every model is fitted on the fit rows, the champion is chosen
on validation by the product's rule (`champion_choice` on the planner loss), and intervals are
split-conformal on the validation rows. The named
baseline is a plain LightGBM on the 11 raw features (`contract`), on the same splits, with a plain
quantile LightGBM (alpha 0.9) for its P90.

Printed: per target and model type, the champion's and the baseline's MAPE, R², P90 coverage and
(memory) how often `safe_request_gb` under-provisions; the feature sets compared (with and without
the priors); the Transformer-BiGRU presets against the best tree ensemble (RMSE and training time);
and what refitting the champion on all labelled jobs gains, at full size and at 300 jobs.

    .venv/bin/python tests/benchmarks/bench_accuracy.py [--repeats 3] [--nn-epochs 200] [--nn-presets paper,tuned] [--targets T,T] [--quick]

`--leave-one-family-out`: for each model type, the rows of every other type are the history and that
type's rows the pending jobs (`leave_one_family_out`). `evaluate(train_rows, test_rows, label, ...)` runs
the methods on any such pair, so a second evaluation set plugs in as another call: the champion
pipeline as a night runs it (`LOFO_MODELS` compared over the repeats, `champion_choice`, refit,
calibration, saved and scored by the `Scorer`, out-of-distribution jobs to its fallback: `pipeline`), the
champion model's own forecast (`champion`), a plain LightGBM with its quantile P90 (`plain_lightgbm`), the
analytic prior alone (`prior`, P90 calibrated on the history) and an accelerate-style count of the model
state (`accelerate_style`, memory only). Printed per held-out type: MAPE, R², P90 coverage and
under-provisioning (actual above `safe_request_gb` of the P90, the request a planner makes).

    .venv/bin/python tests/benchmarks/bench_accuracy.py --leave-one-family-out [--repeats 2] [--nn-epochs 20] [--quick]

`--real-architectures`: train on the measured set, forecast real named architectures (tests/benchmarks/real_archs.py):

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
from gpucast.records.outcomes import FitResult, MetricRow
from gpucast.tasks.learn import priors
from gpucast.tasks.learn.champion import champion_choice, metrics, score_cost
from gpucast.tasks.learn.features import FEATURE_SETS, FeatureEncoder
from gpucast.tasks.learn.folds import split
from gpucast.tasks.learn.intervals import LARGE_TRUTH, SHAPE_OOF, SIZE_OOF, Calibrated, calibrate
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.score import safe_request_gb
from gpucast.tasks.learn.train import CALIBRATION_FRACTION
from gpucast.tasks.learn.unfitted import model as _build

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable
from tests.benchmarks import real_archs  # noqa: E402
from tests.measured import load  # noqa: E402

TARGETS = {c.PEAK_GPU_MEM_GB: "memory (GB)", priors.GFLOP_PER_ITERATION: "compute (GFLOP per training step)"}
TREE_ENSEMBLES = ("extra_trees", "random_forest", "catboost", "xgboost", "lightgbm")


def fit_predict(name: str, rows: pl.DataFrame, y: np.ndarray, target: str, feature_set: str, fit: np.ndarray,
                nn_epochs: int, preset: str = "paper") -> tuple[np.ndarray, float, float]:
    """(predictions for every row, training seconds, scoring seconds per 1M jobs: `score_cost`) of model
    `name` fitted on rows `fit`."""
    enc = FeatureEncoder(feature_set).fit(rows[fit])
    X = enc.transform(rows)
    options = TrainOptions(features=feature_set, preset=preset, epochs=nn_epochs)
    t0 = time.perf_counter()
    est = _build(name, enc, target, options, registry.Build(seed=0, threads=2, progress=lambda _: None)).fit(X[fit], y[fit])
    seconds = time.perf_counter() - t0
    return est.predict(X), seconds, score_cost(est)


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
    """Every model on every repeat's split: validation RMSEs, the champion, and per-row test results. The champion
    by the product's rule (`champion_choice`, issue 50) on each model's forecasts of the validation rows, pooled
    over the repeats (the rows no fit of that repeat saw; one fold a repeat here: `folds=1`), with its scoring cost."""
    y = rows[target].to_numpy().astype(np.float64)
    val_rmse: list[dict] = []
    fits: list[FitResult] = []
    tests: dict[str, list[pl.DataFrame]] = {}
    seconds: dict[str, list[float]] = {}
    for r in range(repeats):
        fit, val, test = split(rows.height, r)
        for name in models:
            pred, s, cost = fit_predict(name, rows, y, target, feature_set, fit, nn_epochs, preset)
            seconds.setdefault(name, []).append(s)
            val_rmse.append({"model": name, "split": "validation", "repeat": r, "rmse": metrics(y[val], pred[val])["rmse"],
                             "score_seconds_per_million": cost})
            row = MetricRow(model=name, preset=preset if name == registry.NN else None, features=feature_set, repeat=r,
                            seed=r, split="validation", rows_train=len(fit), rows_eval=len(val), train_seconds=s,
                            device="cpu", epochs=None, score_seconds_per_million=cost, **metrics(y[val], pred[val]))
            fits.append(FitResult(target, name, r, (row,), pred[val], s, "cpu", test_idx=val))
            groups = {c.MODEL_TYPE: rows[c.MODEL_TYPE].gather(val).to_list()}
            cal = Calibrated(calibrate(y[val], pred[val], float(y[fit].min()), groups))
            p10, p50, p90 = cal.intervals(pred[test], {c.MODEL_TYPE: rows[c.MODEL_TYPE].gather(test).to_numpy()})
            tests.setdefault(name, []).append(rows[test].select(c.MODEL_TYPE).with_columns(
                pl.Series("actual", y[test]), pl.Series("p50", pred[test]), pl.Series("p10", p10),
                pl.Series("p90", p90), pl.lit(r).alias("repeat")))
    choice = champion_choice(fits, y, folds=1, target=target)
    mean_val = pl.DataFrame(val_rmse).group_by("model").agg(pl.col("rmse").mean())
    return {"champion": choice.champion, "choice": choice, "tests": {m: pl.concat(v) for m, v in tests.items()},
            "val_rmse": dict(mean_val.iter_rows()), "seconds": {m: float(np.mean(s)) for m, s in seconds.items()}}


def baseline(rows: pl.DataFrame, target: str, repeats: int) -> pl.DataFrame:
    """The plain LightGBM (point) and plain quantile LightGBM (P90) on the 11 raw features, same splits."""
    y = rows[target].to_numpy().astype(np.float64)
    parts = []
    for r in range(repeats):
        fit, _, test = split(rows.height, r)
        pred, *_ = fit_predict("lightgbm", rows, y, target, "contract", fit, 1)
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
            pred, *_ = fit_predict(champion, rows, y_all, target, feature_set, chosen, nn_epochs)
            out.append(metrics(y_all[test], pred[test])["mape"])
    return float(np.mean(before)), float(np.mean(after))


# --- Leave one family out: train without a model type, forecast it ---------------------------------------------

LOFO_NN_EPOCHS = 20  # the network's epochs leaving a family out: 7 families x repeats x a fit each, on a CPU
# The models a night compares, but for the slowest trees (catboost, xgboost, adaboost, random_forest: 7 trainings
# of all ten took over 5 minutes a family on this shared 2-core machine): the champion pipeline leaving a family out.
LOFO_MODELS = ("lightgbm", "extra_trees", "linear_fs", registry.PRIOR, registry.NN)
LOFO_METHODS = ("pipeline", "champion", "plain_lightgbm", "prior", "accelerate_style")
ADAM_MOMENTS = {"Adam": 2, "AdamW": 2, "SGD": 1, "RMSprop": 1, "Adagrad": 1}
VALUE_BYTES = {"FP32": 4, "FP64": 8, "FP16": 2, "BF16": 2}


def accelerate_style_gb(rows: pl.DataFrame) -> np.ndarray:
    """The estimate of `accelerate estimate-memory` ("training using Adam: 4x the model size"): weights,
    gradients and the optimizer's moments, each one value per parameter at the job's precision (Adam 2
    moments; SGD, RMSprop, Adagrad 1; unknown 2). No activations, no CUDA context, no mixed-precision
    master copy: the baseline that counts the model state alone."""
    params = rows[c.PARAMS_MILLION].to_numpy().astype(np.float64) * 1e6
    value = np.array([VALUE_BYTES.get(p, 4) for p in rows[c.PRECISION].to_list()], dtype=np.float64)
    moments = np.array([ADAM_MOMENTS.get(o, 2) for o in rows[c.OPTIMIZER].to_list()], dtype=np.float64)
    return params * value * (2 + moments) / priors.GB


def champion_pipeline(train_rows: pl.DataFrame, test_rows: pl.DataFrame, target: str, options: TrainOptions,
                      folder: Path) -> tuple[pl.DataFrame, str]:
    """What the product publishes for `test_rows` after a night on `train_rows`: every model compared over
    the repeats, the champion chosen (`finish_target`: out of fold, `champion_choice`), refitted, calibrated,
    saved and loaded by the `Scorer` (out-of-distribution jobs go to its fallback). Returns (p50/p90 of the scorer, of
    the scorer with the large jobs' P90 from the calibration slice alone as before issue 50's out-of-fold size group
    (`slice_p50`, `slice_p90`: the same night, its `size_oof` left out), of the scorer without the memory groups large
    by shape (`noshape_p50`, `noshape_p90`: its `shape_oof` left out, issue 50 session 6), without the label-conditional
    P90 of the jobs measured large (`nolarge_p50`, `nolarge_p90`: its `large_truth` left out, session 8), and of the
    champion model alone, the
    champion's name)."""
    from gpucast.records.outcomes import Champion
    from gpucast.tasks.learn.score import Scorer
    from gpucast.tasks.learn.train import finish_target, fit_one, save_champion

    quiet = lambda _: None  # noqa: E731
    outcomes = [fit_one(train_rows, target, options, m, r, threads=2, progress=quiet)
                for r in range(options.repeats) for m in options.model_names]
    finished = finish_target(train_rows, target, options, outcomes, threads=2, progress=quiet)
    save_champion(folder, target, options, finished, threads=2)
    champion = finished.result.champion
    scorer = Scorer(Champion(target, champion, "lofo", str(folder)))
    scored = scorer.score(test_rows)
    scorer.calibration = Calibrated({k: v for k, v in finished.result.calibration[champion].items() if k != SIZE_OOF})
    sliced = scorer.score(test_rows)
    scorer.calibration = Calibrated({k: v for k, v in finished.result.calibration[champion].items() if k != SHAPE_OOF})
    shapeless = scorer.score(test_rows)
    scorer.calibration = Calibrated({k: v for k, v in finished.result.calibration[champion].items() if k != LARGE_TRUTH})
    truthless = scorer.score(test_rows)
    X = finished.encoder.transform(test_rows)
    own = Calibrated(finished.result.calibration[champion]).intervals(
        finished.estimator.predict(X), {c.MODEL_TYPE: test_rows[c.MODEL_TYPE].to_numpy()})
    return pl.DataFrame({"pipeline_p50": scored["p50"], "pipeline_p90": scored["p90"], "ood": scored["ood"],
                         "slice_p50": sliced["p50"], "slice_p90": sliced["p90"],
                         "noshape_p50": shapeless["p50"], "noshape_p90": shapeless["p90"],
                         "nolarge_p50": truthless["p50"], "nolarge_p90": truthless["p90"],
                         "champion_p50": own[1], "champion_p90": own[2]}), champion


def evaluate(train_rows: pl.DataFrame, test_rows: pl.DataFrame, label: str, target: str, options: TrainOptions,
             folder: Path) -> pl.DataFrame:
    """Every method of `LOFO_METHODS` fitted (or calibrated) on `train_rows` and forecasting `test_rows`:
    one row per test job and method (label, method, model_type, actual, p50, p90). Any two sets of labelled
    rows with the contract's columns and `target` will do: a held-out family, or another evaluation set."""
    both = pl.concat([train_rows, test_rows], how="diagonal_relaxed")
    y = both[target].to_numpy().astype(np.float64)
    fit, test = np.arange(train_rows.height), np.arange(train_rows.height, both.height)
    pipe, champion = champion_pipeline(train_rows, test_rows, target, options, folder)
    plain, *_ = fit_predict("lightgbm", both, y, target, "contract", fit, 1)
    prior_col = priors.PRIOR_FOR_TARGET[target]
    prior = both[prior_col].to_numpy().astype(np.float64)
    prior_cal = Calibrated(calibrate(y[fit], prior[fit], float(y[fit].min()),
                                     {c.MODEL_TYPE: train_rows[c.MODEL_TYPE].to_list()}))
    _, prior_p50, prior_p90 = prior_cal.intervals(prior[test], {c.MODEL_TYPE: test_rows[c.MODEL_TYPE].to_numpy()})
    methods = {"pipeline": (pipe["pipeline_p50"], pipe["pipeline_p90"]),
               "pipeline_slice": (pipe["slice_p50"], pipe["slice_p90"]),
               "pipeline_noshape": (pipe["noshape_p50"], pipe["noshape_p90"]),
               "pipeline_nolarge": (pipe["nolarge_p50"], pipe["nolarge_p90"]),
               "champion": (pipe["champion_p50"], pipe["champion_p90"]),
               "plain_lightgbm": (plain[test], plain_quantile_p90(both, y, fit)[test]),
               "prior": (prior[test], prior_p90)}
    if target == c.PEAK_GPU_MEM_GB:
        state = accelerate_style_gb(test_rows)
        methods["accelerate_style"] = (state, state)  # a point estimate: its P90 is itself
    base = test_rows.select(c.MODEL_TYPE).with_columns(pl.Series("actual", y[test]), pl.lit(label).alias("label"))
    return pl.concat([base.with_columns(pl.lit(m).alias("method"), pl.Series("p50", np.asarray(p50, dtype=np.float64)),
                                        pl.Series("p90", np.asarray(p90, dtype=np.float64)),
                                        pl.lit(champion if m == "champion" else None, dtype=pl.String).alias("model"),
                                        pl.Series("ood", pipe["ood"]))
                      for m, (p50, p90) in methods.items()])


def leave_one_family_out(rows: pl.DataFrame, target: str, options: TrainOptions, folder: Path) -> pl.DataFrame:
    """`evaluate` once per model type: trained on the others, forecasting it."""
    from gpucast.tasks.learn.features import labelled_rows

    rows = labelled_rows(rows, target)
    parts = []
    for family in sorted(rows[c.MODEL_TYPE].unique().to_list()):
        t0 = time.perf_counter()
        held = pl.col(c.MODEL_TYPE) == family
        parts.append(evaluate(rows.filter(~held), rows.filter(held), family, target, options, folder / family))
        chosen = parts[-1].filter(pl.col("method") == "champion")["model"][0]
        print(f"  {family}: champion {chosen} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return pl.concat(parts)


def lofo_table(results: pl.DataFrame, memory: bool) -> None:
    """Per held-out family (and all), per method: n, MAPE, R², P90 coverage, (memory) under-provisioning."""
    print(f"  {'held out':12s} {'method':17s} {'n':>4s} {'MAPE %':>8s} {'R²':>7s} {'P90 cov':>7s}"
          + (f" {'under':>6s}" if memory else "") + "  (pipeline: share flagged out of distribution)")
    for label in [*sorted(results["label"].unique().to_list()), "all"]:
        part = results if label == "all" else results.filter(pl.col("label") == label)
        for method in (m for m in LOFO_METHODS if m in part["method"].unique().to_list()):
            sc = scores(part.filter(pl.col("method") == method), memory)
            ood = f"  ood {part['ood'].mean():.0%}" if method == "pipeline" else ""
            print(f"  {label:12s} {method:17s} {sc['n']:4d} {sc['mape']:8.1f} {sc['r2']:7.3f} {sc['p90_cover']:7.1%}"
                  + (f" {sc['under']:6.1%}" if memory else "") + ood)


def lofo_main(args: argparse.Namespace, preset: str, nn_epochs: int) -> None:
    import tempfile

    rows = load()
    models = LOFO_MODELS if not args.quick else tuple(m for m in LOFO_MODELS if m != registry.NN)
    options = TrainOptions(features="residual", preset=preset.split(",")[0], epochs=nn_epochs, repeats=args.repeats,
                           device="cpu", compile_trees=False, models=models)
    print(f"measured set: {rows.height} jobs; leave one model type out; {options.repeats} repeats; models "
          f"{', '.join(options.model_names)}; network preset {options.preset}, {options.epochs} epochs\n")
    for target in args.targets.split(","):
        print(f"== {TARGETS[target]}")
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            results = leave_one_family_out(rows, target, options, Path(folder))
        lofo_table(results, target == c.PEAK_GPU_MEM_GB)
        print(f"  ({time.perf_counter() - t0:.0f} s)\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nn-epochs", type=int, default=None, help="the network's epochs (default 200; 20 leaving a family out)")
    ap.add_argument("--features", default=",".join(FEATURE_SETS), help="feature sets to compare")
    ap.add_argument("--nn-presets", default=None,
                    help="network presets set against the best tree ensemble (default paper,tuned; tuned leaving a family out)")
    ap.add_argument("--quick", action="store_true", help="2 repeats, no network, fewer sets: a smoke run")
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    ap.add_argument("--leave-one-family-out", action="store_true",
                    help="train without each model type and forecast it (the first of --nn-presets; --quick: trees only)")
    ap.add_argument("--real-architectures", action="store_true", help="forecast real named architectures instead "
                    "(tests/benchmarks/real_archs.py, whose flags follow)")
    args, rest = ap.parse_known_args()
    if args.real_architectures or rest:
        return real_archs.main(rest) if args.real_architectures else ap.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.leave_one_family_out:
        lofo_main(args, args.nn_presets or "tuned", args.nn_epochs or LOFO_NN_EPOCHS)
        return
    args.nn_presets, args.nn_epochs = args.nn_presets or "paper,tuned", args.nn_epochs or 200
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
            print(f"      {res['choice'].describe()}")
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
