"""Every model in one registry: the Transformer-BiGRU and the seed papers' baselines.

Each entry builds a scikit-learn style estimator (`fit(X, y)` returns self, `predict(X)` a 1-D
array) and carries its own `save` and `load`, which never unpickle code from disk: torch
`weights_only`, XGBoost JSON, LightGBM text, CatBoost's own format, and skops with an allow-list
for scikit-learn. Adding a model means adding an entry here; no flow changes. Where the files go
is `store.py`'s business.

Baselines learn log(target) and predict exp() of it (`LogTarget`): the targets span orders of
magnitude, and a tree on the raw scale spends its splits on the largest jobs. With a residual
feature set (`features.FEATURE_SETS`) they learn log(target) - log(prior) instead, the prior being
one of the feature columns (`base`), and predict prior x exp() of it. Hyperparameters are sensible
middle-of-the-road settings, not defaults picked to lose.

Builders take keyword arguments: `seed`, `categorical` (indices of the categorical columns),
`n_features`, `base` (the residual's prior column, or None), `cardinalities`, `threads` (None:
`default_threads()`), and the network's `preset`, `device`, `epochs`, `progress`, `max_seconds`;
each uses what it needs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NN = "transformer_bigru"


def default_threads() -> int:
    """Threads one fit may use: OMP_NUM_THREADS where set (a Dask worker's nanny sets 1, so workers
    on one machine do not fight over its cores), else every core."""
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "")))
    except ValueError:
        return os.cpu_count() or 1


def use_threads(estimator, threads: int) -> None:
    """Let a fitted model predict on `threads` threads. A model refitted on a Dask worker was built with
    one thread (`default_threads` there is 1) and keeps that `n_jobs` when saved; scoring in the flow's
    process should use its cores. CatBoost predicts on every core by default: left alone."""
    inner = getattr(estimator, "inner", estimator)
    if hasattr(inner, "get_params") and "n_jobs" in inner.get_params(deep=False):
        inner.set_params(n_jobs=threads)


class LogTarget:
    """Fit `inner` on log(y) (minus the log-prior column `base` when given); predict exp() of it back.

    Feature columns are encoded as natural logs (`features.FeatureEncoder`), so column `base` already
    holds log(prior): the inner model learns log(y / prior), and predictions are prior x exp(...).
    """

    def __init__(self, inner, base: int | None = None):
        self.inner = inner
        self.base = base

    def _offset(self, X) -> np.ndarray | float:
        return np.asarray(X, dtype=np.float64)[:, self.base] if self.base is not None else 0.0

    def fit(self, X, y):
        self.inner.fit(X, np.log(np.asarray(y, dtype=np.float64)) - self._offset(X))
        return self

    def predict(self, X):
        return np.exp(np.asarray(self.inner.predict(X), dtype=np.float64) + self._offset(X))


@dataclass(frozen=True)
class ModelEntry:
    name: str
    paper: str  # which seed paper compared it
    build: Callable[..., object]  # (seed, cardinalities, preset, device, epochs, progress, max_seconds) -> estimator
    suffix: str  # the saved file's extension
    save: Callable[[object, Path], None]  # (fitted estimator, path)
    load: Callable[[Path, str | None], object]  # (path, device) -> estimator


# Forests grow a leaf per few rows unless capped: at 100k jobs an uncapped 300-tree ExtraTrees was
# a 1.0 GB file (RandomForest 0.66 GB) per target and night. 2,048 leaves a tree keeps each forest
# near 90 MB whatever the history's size, and was as accurate or better (README "Training").
FOREST_MAX_LEAVES = 2048


def _extra_trees(seed, base=None, threads=None, **_):
    from sklearn.ensemble import ExtraTreesRegressor

    return LogTarget(ExtraTreesRegressor(n_estimators=300, min_samples_leaf=2, max_features=0.8,
                                         max_leaf_nodes=FOREST_MAX_LEAVES, n_jobs=threads or default_threads(), random_state=seed), base)


def _random_forest(seed, base=None, threads=None, **_):
    from sklearn.ensemble import RandomForestRegressor

    return LogTarget(RandomForestRegressor(n_estimators=300, min_samples_leaf=2, max_features=0.6,
                                           max_leaf_nodes=FOREST_MAX_LEAVES, n_jobs=threads or default_threads(), random_state=seed), base)


def _decision_tree(seed, base=None, **_):
    from sklearn.tree import DecisionTreeRegressor

    return LogTarget(DecisionTreeRegressor(max_depth=14, min_samples_leaf=5, random_state=seed), base)


def _adaboost(seed, base=None, **_):
    from sklearn.ensemble import AdaBoostRegressor
    from sklearn.tree import DecisionTreeRegressor

    return LogTarget(AdaBoostRegressor(DecisionTreeRegressor(max_depth=6), n_estimators=200, learning_rate=0.1,
                                       random_state=seed), base)


def _linear(seed, categorical=(), n_features=11, base=None, **_):
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_selection import SelectKBest, f_regression
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numeric = [i for i in range(n_features) if i not in categorical]
    prep = ColumnTransformer([
        ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), list(categorical)),
        ("num", StandardScaler(), numeric),
    ])
    # the training-time paper: linear regression on the features that carry signal
    return LogTarget(make_pipeline(prep, SelectKBest(f_regression, k="all"), LinearRegression()), base)


def _xgboost(seed, base=None, threads=None, **_):
    from xgboost import XGBRegressor

    return LogTarget(XGBRegressor(n_estimators=600, learning_rate=0.05, max_depth=8, subsample=0.8,
                                  colsample_bytree=0.8, random_state=seed, n_jobs=threads or default_threads(), tree_method="hist"), base)


def _lightgbm(seed, base=None, threads=None, **_):
    from lightgbm import LGBMRegressor

    return LogTarget(LGBMRegressor(n_estimators=600, learning_rate=0.05, num_leaves=63, subsample=0.8, subsample_freq=1,
                                   colsample_bytree=0.8, random_state=seed, n_jobs=threads or default_threads(), verbose=-1), base)


def _catboost(seed, base=None, threads=None, **_):
    from catboost import CatBoostRegressor

    return LogTarget(CatBoostRegressor(iterations=800, learning_rate=0.08, depth=8, random_seed=seed,
                                       thread_count=threads or default_threads(), verbose=False, allow_writing_files=False), base)


def _transformer_bigru(seed, categorical=(), cardinalities=(), base=None, preset="paper", device=None, epochs=None,
                       progress=None, max_seconds=None, **_):
    from gpucast.tasks.learn.models.transformer_bigru import TransformerBiGRURegressor

    return TransformerBiGRURegressor(preset=preset, seed=seed, device=device, epochs=epochs, categorical=categorical,
                                     cardinalities=tuple(cardinalities), base=base, progress=progress,
                                     max_seconds=max_seconds)


# Saving and loading, per library: native, code-free formats only.
def _save_torch(est, path: Path) -> None:
    est.save(path)


def _load_torch(path: Path, device: str | None):
    from gpucast.tasks.learn.models.transformer_bigru import TransformerBiGRURegressor

    return TransformerBiGRURegressor.load(path, device=device)


def _save_xgboost(est, path: Path) -> None:
    est.inner.save_model(path)


def _load_xgboost(path: Path, device: str | None):
    from xgboost import XGBRegressor

    inner = XGBRegressor()
    inner.load_model(path)
    return LogTarget(inner)


class _Booster:
    """A LightGBM booster behind `predict` (the saved text model has no sklearn wrapper)."""

    def __init__(self, booster):
        self.booster = booster

    def predict(self, X):
        return self.booster.predict(X)


def _save_lightgbm(est, path: Path) -> None:
    est.inner.booster_.save_model(str(path))


def _load_lightgbm(path: Path, device: str | None):
    import lightgbm as lgb

    return LogTarget(_Booster(lgb.Booster(model_file=str(path))))


def _save_catboost(est, path: Path) -> None:
    est.inner.save_model(str(path))


def _load_catboost(path: Path, device: str | None):
    from catboost import CatBoostRegressor

    return LogTarget(CatBoostRegressor().load_model(str(path)))


# scikit-learn types a saved model may contain; anything else refuses to load.
SKOPS_ALLOWED_PREFIXES = ("sklearn.", "numpy.", "builtins.")


def _save_skops(est, path: Path) -> None:
    import skops.io as sio

    sio.dump(est.inner, path)


def _load_skops(path: Path, device: str | None):
    import skops.io as sio

    untrusted = sio.get_untrusted_types(file=path)
    unexpected = [t for t in untrusted if not t.startswith(SKOPS_ALLOWED_PREFIXES)]
    if unexpected:
        raise ValueError(f"{path} holds types outside the allow-list: {', '.join(unexpected)}")
    return LogTarget(sio.load(path, trusted=untrusted))


class PriorModel:
    """The analytic prior alone (`tasks/learn/priors.py`): no learning, exp(column `base`) of the features.

    A plain baseline on the leaderboard (what a GPU engineer's formula gets right), and the forecast
    of last resort: a target with too few labelled jobs for the models is scored by it."""

    def __init__(self, base: int):
        self.base = base

    def fit(self, X, y):
        return self

    def predict(self, X):
        return np.exp(np.asarray(X, dtype=np.float64)[:, self.base])


PRIOR = "prior"


def _prior(seed, base=None, **_):
    if base is None:
        raise ValueError("the `prior` model needs a feature set with the priors (priors or residual)")
    return PriorModel(base)


def _save_prior(est, path: Path) -> None:
    path.write_text(json.dumps({"base": est.base}))


def _load_prior(path: Path, device: str | None):
    return PriorModel(json.loads(path.read_text())["base"])


_SKOPS = (".skops", _save_skops, _load_skops)
REGISTRY: dict[str, ModelEntry] = {e.name: e for e in (
    ModelEntry(NN, "compute (Transformer-BiGRU), memory (BiGRU-Transformer)", _transformer_bigru, ".pt",
               _save_torch, _load_torch),
    ModelEntry("extra_trees", "compute", _extra_trees, *_SKOPS),
    ModelEntry("catboost", "compute", _catboost, ".cbm", _save_catboost, _load_catboost),
    ModelEntry("xgboost", "compute", _xgboost, ".json", _save_xgboost, _load_xgboost),
    ModelEntry("lightgbm", "compute", _lightgbm, ".txt", _save_lightgbm, _load_lightgbm),
    ModelEntry("decision_tree", "memory", _decision_tree, *_SKOPS),
    ModelEntry("random_forest", "memory", _random_forest, *_SKOPS),
    ModelEntry("adaboost", "memory", _adaboost, *_SKOPS),
    ModelEntry("linear_fs", "training time", _linear, *_SKOPS),
    ModelEntry(PRIOR, "none: the analytic prior alone", _prior, ".json", _save_prior, _load_prior),
)}
MODEL_NAMES = tuple(REGISTRY)
# The order a night fits them in (tasks/learn/train.py `order_fits`): the fast baselines first, so every
# target has a champion within seconds, then the ensembles from the quickest to fit, the network last.
FAST_MODELS = (PRIOR, "linear_fs", "decision_tree")
FIT_ORDER = (*FAST_MODELS, "lightgbm", "xgboost", "catboost", "adaboost", "extra_trees", "random_forest", NN)


def entry(name: str) -> ModelEntry:
    if name not in REGISTRY:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(REGISTRY)}")
    return REGISTRY[name]


def build(name: str, **kwargs):
    return entry(name).build(**kwargs)
