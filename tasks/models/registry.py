"""Every model in one registry: the Transformer-BiGRU and the seed papers' baselines.

Each entry builds a scikit-learn style estimator (`fit(X, y)` returns self, `predict(X)` a 1-D
array) and carries its own `save` and `load`, which never unpickle code from disk: torch
`weights_only`, XGBoost JSON, LightGBM text, CatBoost's own format, and skops with an allow-list
for scikit-learn. Adding a model means adding an entry here; no flow changes. Where the files go
is `store.py`'s business.

Baselines learn log(target) and predict exp() of it (`LogTarget`): the targets span orders of
magnitude, and a tree on the raw scale spends its splits on the largest jobs. Hyperparameters are
sensible middle-of-the-road settings, not defaults picked to lose; see `BASELINES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpucast.tasks.features import CATEGORICAL

NN = "transformer_bigru"


class LogTarget:
    """Fit `inner` on log(y); predict exp(inner.predict)."""

    def __init__(self, inner):
        self.inner = inner

    def fit(self, X, y):
        self.inner.fit(X, np.log(np.asarray(y, dtype=np.float64)))
        return self

    def predict(self, X):
        return np.exp(np.asarray(self.inner.predict(X), dtype=np.float64))


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


def _extra_trees(seed, **_):
    from sklearn.ensemble import ExtraTreesRegressor

    return LogTarget(ExtraTreesRegressor(n_estimators=300, min_samples_leaf=2, max_features=0.8,
                                         max_leaf_nodes=FOREST_MAX_LEAVES, n_jobs=-1, random_state=seed))


def _random_forest(seed, **_):
    from sklearn.ensemble import RandomForestRegressor

    return LogTarget(RandomForestRegressor(n_estimators=300, min_samples_leaf=2, max_features=0.6,
                                           max_leaf_nodes=FOREST_MAX_LEAVES, n_jobs=-1, random_state=seed))


def _decision_tree(seed, **_):
    from sklearn.tree import DecisionTreeRegressor

    return LogTarget(DecisionTreeRegressor(max_depth=14, min_samples_leaf=5, random_state=seed))


def _adaboost(seed, **_):
    from sklearn.ensemble import AdaBoostRegressor
    from sklearn.tree import DecisionTreeRegressor

    return LogTarget(AdaBoostRegressor(DecisionTreeRegressor(max_depth=6), n_estimators=200, learning_rate=0.1,
                                       random_state=seed))


def _linear(seed, **_):
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_selection import SelectKBest, f_regression
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numeric = [i for i in range(11) if i not in CATEGORICAL]
    prep = ColumnTransformer([
        ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), list(CATEGORICAL)),
        ("num", StandardScaler(), numeric),
    ])
    # the training-time paper: linear regression on the features that carry signal
    return LogTarget(make_pipeline(prep, SelectKBest(f_regression, k="all"), LinearRegression()))


def _xgboost(seed, **_):
    from xgboost import XGBRegressor

    return LogTarget(XGBRegressor(n_estimators=600, learning_rate=0.05, max_depth=8, subsample=0.8,
                                  colsample_bytree=0.8, random_state=seed, n_jobs=2, tree_method="hist"))


def _lightgbm(seed, **_):
    from lightgbm import LGBMRegressor

    return LogTarget(LGBMRegressor(n_estimators=600, learning_rate=0.05, num_leaves=63, subsample=0.8, subsample_freq=1,
                                   colsample_bytree=0.8, random_state=seed, n_jobs=2, verbose=-1))


def _catboost(seed, **_):
    from catboost import CatBoostRegressor

    return LogTarget(CatBoostRegressor(iterations=800, learning_rate=0.08, depth=8, random_seed=seed,
                                       thread_count=2, verbose=False, allow_writing_files=False))


def _transformer_bigru(seed, cardinalities=(), preset="paper", device=None, epochs=None, progress=None,
                       max_seconds=None, **_):
    from gpucast.tasks.models.transformer_bigru import TransformerBiGRURegressor

    return TransformerBiGRURegressor(preset=preset, seed=seed, device=device, epochs=epochs, categorical=CATEGORICAL,
                                     cardinalities=tuple(cardinalities), progress=progress, max_seconds=max_seconds)


# Saving and loading, per library: native, code-free formats only.
def _save_torch(est, path: Path) -> None:
    est.save(path)


def _load_torch(path: Path, device: str | None):
    from gpucast.tasks.models.transformer_bigru import TransformerBiGRURegressor

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
)}
MODEL_NAMES = tuple(REGISTRY)


def entry(name: str) -> ModelEntry:
    if name not in REGISTRY:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(REGISTRY)}")
    return REGISTRY[name]


def build(name: str, **kwargs):
    return entry(name).build(**kwargs)
