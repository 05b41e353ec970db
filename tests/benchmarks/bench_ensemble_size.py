"""Benchmark: smaller tree ensembles (issue 40, decision 3): accuracy beside scoring cost, per target.

    .venv/bin/python tests/benchmarks/bench_ensemble_size.py [--jobs 20000] [--targets all] [--families all]
                                                            [--score-rows 200000] [--threads 2]

Per target, on `--jobs` simulated completed jobs with the protocol of `tasks/learn/train.py` (30% test,
20% of the rest validation, the default `residual` features), each family is fitted twice on the same rows:

* the named baseline, `before`: the registry's settings before issue 40 (boosted: all 600/800 trees, no early
  stopping; forests: 300 trees);
* `after`: the registry as it is (boosted: early stopping on 15% of the training rows, patience 50; forests:
  `registry.FOREST_TREES` trees).

Printed per target and family: trees kept, validation RMSE, test MAPE and R², and the library's own predict
cost in seconds per 1M jobs (`--score-rows` rows timed on `--threads` threads, scaled), with the after/before
ratios. For the forests it also prints the validation RMSE of the first k trees of the 300-tree forest (the
same trees: a forest's trees are independent), the curve `FOREST_TREES` was chosen on.
Goal: no target's test MAPE worse by more than 1 point.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gpucast.expectations import contract as c
from gpucast.tasks.learn import features
from gpucast.tasks.learn.champion import metrics
from gpucast.tasks.learn.features import FEATURE_SETS, FeatureEncoder, labelled_rows
from gpucast.tasks.learn.folds import split
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.options import DEFAULT_FEATURES
from gpucast.tasks.simulate import SimConfig, simulate_jobs

BOOSTED = ("lightgbm", "xgboost", "catboost")
FORESTS = ("random_forest", "extra_trees")
BEFORE = {"lightgbm": {"validation_fraction": 0.0, "regressor__early_stopping_round": None},
          "xgboost": {"validation_fraction": 0.0, "regressor__early_stopping_rounds": None},
          "catboost": {"validation_fraction": 0.0},
          "random_forest": {"regressor__n_estimators": 300},
          "extra_trees": {"regressor__n_estimators": 300}}
CURVE = (25, 50, 75, 100, 150, 200, 300)


def trees(est) -> int:
    inner = est.regressor_
    if hasattr(inner, "estimators_"):
        return len(inner.estimators_)
    if hasattr(inner, "booster_"):  # LightGBM
        return inner.booster_.best_iteration or inner.booster_.num_trees()
    if hasattr(inner, "get_booster"):  # XGBoost
        best = getattr(inner, "best_iteration", None)
        return best + 1 if best is not None else inner.get_booster().num_boosted_rounds()
    return inner.tree_count_  # CatBoost (use_best_model shrinks it)


def cost_per_million(est, X: np.ndarray, rows: int) -> float:
    sample = X[np.resize(np.arange(len(X)), rows)]
    est.predict(sample[:100])
    t = time.perf_counter()
    est.predict(sample)
    return (time.perf_counter() - t) * 1_000_000 / rows


def build(name: str, enc: FeatureEncoder, target: str, threads: int):
    return registry.build(name, registry.Build(seed=0, threads=threads, categorical=enc.categorical,
                                               cardinalities=enc.cardinalities,
                                               base=FEATURE_SETS[enc.feature_set].base_column(target)))


def forest_curve(est, X: np.ndarray, y: np.ndarray) -> str:
    """Validation RMSE of the first k trees of a fitted forest, for k in CURVE."""
    inner, full = est.regressor_, list(est.regressor_.estimators_)
    out = []
    for k in (k for k in CURVE if k <= len(full)):
        inner.estimators_ = full[:k]
        out.append(f"{k}: {metrics(y, est.predict(X))['rmse']:.4g}")
    inner.estimators_ = full
    return ", ".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--targets", default=",".join(c.TARGETS))
    p.add_argument("--families", default=",".join(BOOSTED + FORESTS))
    p.add_argument("--score-rows", type=int, default=200_000)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    rng = np.random.default_rng(args.jobs)
    jobs = features.build(simulate_jobs(int(args.jobs * 1.35) + 100, rng, SimConfig().start, pending_fraction=0.0))
    worst = {}
    for target in args.targets.split(","):
        rows = labelled_rows(jobs, target).head(args.jobs)
        y = rows[target].to_numpy()
        fit, val, test = split(rows.height, seed=0)
        enc = FeatureEncoder(DEFAULT_FEATURES).fit(rows[fit])
        X = enc.transform(rows)
        print(f"\n== {target}: {len(fit):,} fit / {len(val):,} validation / {len(test):,} test rows ==", flush=True)
        print(f"{'family':14} {'variant':7} {'trees':>5} {'fit s':>6} {'val RMSE':>10} {'test MAPE':>9} {'R2':>7} "
              f"{'s / 1M jobs':>11}")
        for name in args.families.split(","):
            got = {}
            for variant in ("before", "after"):
                est = build(name, enc, target, args.threads)
                if variant == "before":
                    est.set_params(**BEFORE[name])
                t = time.perf_counter()
                est.fit(X[fit], y[fit])
                fit_s = time.perf_counter() - t
                v, m = metrics(y[val], est.predict(X[val])), metrics(y[test], est.predict(X[test]))
                got[variant] = (m["mape"], m["r2"], cost_per_million(est, X[test], args.score_rows))
                print(f"{name:14} {variant:7} {trees(est):5d} {fit_s:6.1f} {v['rmse']:10.4g} {m['mape']:8.2f}% "
                      f"{m['r2']:7.4f} {got[variant][2]:11.2f}", flush=True)
                if name in FORESTS and variant == "before":
                    print(f"{'':14} first k trees, validation RMSE: {forest_curve(est, X[val], y[val])}")
            (mb, rb, cb), (ma, ra, ca) = got["before"], got["after"]
            worst[(target, name)] = ma - mb
            print(f"{name:14} after vs before: test MAPE {ma - mb:+.2f} points, R2 {ra - rb:+.4f}, scoring cost x{ca / cb:.2f}")
    (target, name), delta = max(worst.items(), key=lambda kv: kv[1])
    print(f"\nworst test MAPE change: {delta:+.2f} points ({name}, {target}); goal <= +1 point: "
          f"{'met' if delta <= 1 else 'NOT met'}")


if __name__ == "__main__":
    main()
