"""Every model in one registry: the Transformer-BiGRU and the seed papers' baselines.

Each entry builds a scikit-learn estimator (`get_params`, `clone`, `fit(X, y)` returns self, `predict(X)`
a 1-D array; tests/tasks/learn/test_models.py runs scikit-learn's estimator checks on each) and carries
its own `save` and `load`, which never unpickle code from disk: torch `weights_only`, XGBoost JSON,
LightGBM text, CatBoost's own format, and skops with an allow-list for scikit-learn. Adding a model
means adding an entry here; no flow changes. Where the files go is `store.py`'s business.

Baselines learn log(target) and predict exp() of it (`estimators.LogTarget`, scikit-learn's
`TransformedTargetRegressor` with log / exp): the targets span orders of magnitude, and a tree on the
raw scale spends its splits on the largest jobs. With a residual feature set (`features.FEATURE_SETS`)
they learn log(target) - log(prior) instead, the prior being one of the feature columns (`base`), and
predict prior x exp() of it. Hyperparameters are sensible middle-of-the-road settings, not defaults
picked to lose.

Builders take one `Build` (what every model may need: seed, the categorical columns, the residual's
prior column, threads, and the network's preset, device, epochs, progress and time budget); each
reads the fields it uses, and a misspelt field fails.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpucast.tasks.learn.models.presets import DEFAULT_PRESET

NN = "transformer_bigru"


@dataclass(frozen=True)
class Build:
    """What a builder may use. `threads`: cores one fit may use (a Dask worker's share, decided by the
    flow that runs it); `base`: the column holding log(prior) for residual learning, else None."""

    seed: int = 0
    threads: int = 1
    categorical: tuple[int, ...] = ()
    base: int | None = None
    cardinalities: tuple[int, ...] = ()
    preset: str = DEFAULT_PRESET
    device: str | None = None
    epochs: int | None = None
    progress: Callable[[str], None] | None = None
    max_seconds: float | None = None  # the network's time budget for this fit


def use_threads(estimator, threads: int) -> None:
    """Let a fitted model predict on `threads` threads. A model refitted on a Dask worker was built with
    that worker's share (one thread) and keeps that `n_jobs` when saved; scoring in the flow's process
    should use its cores. CatBoost predicts on every core by default: left alone."""
    inner = getattr(estimator, "regressor_", estimator)
    if hasattr(inner, "get_params") and "n_jobs" in inner.get_params(deep=False):
        inner.set_params(n_jobs=threads)


@dataclass(frozen=True)
class ModelEntry:
    name: str
    compared_in: str  # which of the seed papers compared it (compute, memory, training time)
    build: Callable[[Build], object]  # -> an unfitted estimator
    suffix: str  # the saved file's extension
    save: Callable[[object, Path], None]  # (fitted estimator, path)
    load: Callable[[Path, str | None], object]  # (path, device) -> estimator


# Boosted ensembles stop early (issue 40): `LogTarget` holds out this fraction of the training rows, and the
# library stops adding trees after PATIENCE rounds without a lower error there, keeping the best round's trees
# (LightGBM saves only those; XGBoost predicts with them; CatBoost's `use_best_model` drops the rest). The
# tree counts below are caps. Fewer trees score faster (docs/models.md "Ensemble sizes").
EARLY_STOPPING_FRACTION = 0.15
PATIENCE = 50
# Refit after stopping (issue 50 item 4, a candidate measured by bench_champion.py --stopping refit): the rounds kept,
# scaled to every row, fitted again on every row, so the held-out share is not lost to the model. Off: measured side by
# side (--stopping-side-by-side now,refit, 2026-11-28) it kept or improved MAPE in 14 of 15 comparisons but cost
# 1.2-2.3x the boosted fit's CPU seconds, more than the fit time's noise (docs/models.md "Early stopping checked").
REFIT_AFTER_STOPPING = False

# Forests grow a leaf per few rows unless capped: at 100k jobs an uncapped 300-tree ExtraTrees was
# a 1.0 GB file (RandomForest 0.66 GB) per target and night. 2,048 leaves a tree keeps each forest
# near 90 MB whatever the history's size, and was as accurate or better (README "Training").
FOREST_MAX_LEAVES = 2048
# Trees per forest (issue 40): a forest scores in proportion to its trees. The validation error of the first k
# trees of a 300-tree forest levels off well before 300 (tests/benchmarks/bench_ensemble_size.py; docs/models.md
# "Ensemble sizes"): FOREST_TREES is where it is within noise of 300's. 100 until 2026-11-27; at 50 the test
# MAPE is at most 0.27 points above the 300-tree forest's, and a forest scores 1.8x faster than at 100. 25 since
# 2026-11-29 (issue 52 item 5: scoring 1M jobs x 3 targets in 20 s): a forest predicts in half the time, and against
# the forests before issue 52 (50 trees of 2,048 leaves) no target's test MAPE is worse by more than 0.72 points (the
# random forest's run time at 512 leaves; extra_trees at most 0.35) over two seeds:
# `tests/benchmarks/bench_forest_trees.py --seeds 0,1` (docs/benchmarks.md). Both forests score natively
# (`compiled.STAYS_NATIVE`).
FOREST_TREES = 25
# The random forest's own cap (issue 52 item 5: scoring 1M jobs x 3 targets in 20 s): at 512 leaves a tree its
# predict costs 3.5-3.8 CPU-s per 1M jobs and target against 5.1-5.9 at 2,048, and no target's test MAPE is worse by
# more than 0.38 points (runtime_hours; gflops -0.07, memory +0.05; at 10,000 jobs +0.29 at most):
# `bench_compiled.py --forest-leaves 2048,512,256 --jobs 20000` (docs/benchmarks.md). ExtraTrees keeps
# FOREST_MAX_LEAVES (not measured).
RANDOM_FOREST_MAX_LEAVES = 512


def _extra_trees(b: Build):
    from sklearn.ensemble import ExtraTreesRegressor

    from gpucast.tasks.learn.models.estimators import LogTarget

    return LogTarget(ExtraTreesRegressor(n_estimators=FOREST_TREES, min_samples_leaf=2, max_features=0.8,
                                         max_leaf_nodes=FOREST_MAX_LEAVES, n_jobs=b.threads, random_state=b.seed), base=b.base)


def _random_forest(b: Build):
    from sklearn.ensemble import RandomForestRegressor

    from gpucast.tasks.learn.models.estimators import LogTarget

    return LogTarget(RandomForestRegressor(n_estimators=FOREST_TREES, min_samples_leaf=2, max_features=0.6,
                                           max_leaf_nodes=RANDOM_FOREST_MAX_LEAVES, n_jobs=b.threads,
                                           random_state=b.seed),
                     base=b.base)


def _decision_tree(b: Build):
    from sklearn.tree import DecisionTreeRegressor

    from gpucast.tasks.learn.models.estimators import LogTarget

    return LogTarget(DecisionTreeRegressor(max_depth=14, min_samples_leaf=5, random_state=b.seed), base=b.base)


def _adaboost(b: Build):
    from sklearn.ensemble import AdaBoostRegressor
    from sklearn.tree import DecisionTreeRegressor

    from gpucast.tasks.learn.models.estimators import LogTarget

    return LogTarget(AdaBoostRegressor(DecisionTreeRegressor(max_depth=6), n_estimators=200, learning_rate=0.1,
                                       random_state=b.seed), base=b.base)


def _linear(b: Build):
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_selection import SelectKBest, f_regression
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from gpucast.tasks.learn.models.estimators import LogTarget

    prep = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), list(b.categorical))],
                             remainder=StandardScaler())  # every other column is a number
    # the training-time paper: linear regression on the features that carry signal
    return LogTarget(make_pipeline(prep, SelectKBest(f_regression, k="all"), LinearRegression()), base=b.base)


def _xgboost(b: Build):
    from xgboost import XGBRegressor

    from gpucast.tasks.learn.models.estimators import LogTarget

    return LogTarget(XGBRegressor(n_estimators=600, learning_rate=0.05, max_depth=8, subsample=0.8, colsample_bytree=0.8,
                                  random_state=b.seed, n_jobs=b.threads, tree_method="hist", early_stopping_rounds=PATIENCE),
                     base=b.base, validation_fraction=EARLY_STOPPING_FRACTION,
                     refit_all=REFIT_AFTER_STOPPING)


def _lightgbm(b: Build):
    from lightgbm import LGBMRegressor

    from gpucast.tasks.learn.models.estimators import LogTarget

    return LogTarget(LGBMRegressor(n_estimators=600, learning_rate=0.05, num_leaves=63, subsample=0.8, subsample_freq=1,
                                   colsample_bytree=0.8, random_state=b.seed, n_jobs=b.threads, verbose=-1,
                                   early_stopping_round=PATIENCE), base=b.base, validation_fraction=EARLY_STOPPING_FRACTION,
                     refit_all=REFIT_AFTER_STOPPING)


# The plain baseline (issue 50 item 3): LightGBM with the library's defaults (100 trees, 31 leaves, learning rate 0.1)
# but the seed, threads and silence; log(target) without the residual's prior (`base`), no early stopping. Always
# fitted on the same folds as the others (the default model list; `order_fits`' first tier): no champion may be
# worse than it on the planner loss (tasks/learn/champion.py `_floor`).
PLAIN = "lightgbm_plain"


def _lightgbm_plain(b: Build):
    from lightgbm import LGBMRegressor

    from gpucast.tasks.learn.models.estimators import LogTarget

    return LogTarget(LGBMRegressor(random_state=b.seed, n_jobs=b.threads, verbose=-1))


def _catboost(b: Build):
    from catboost import CatBoostRegressor

    from gpucast.tasks.learn.models.estimators import LogTarget

    return LogTarget(CatBoostRegressor(iterations=800, learning_rate=0.08, depth=8, random_seed=b.seed,
                                       thread_count=b.threads, verbose=False, allow_writing_files=False,
                                       early_stopping_rounds=PATIENCE), base=b.base, validation_fraction=EARLY_STOPPING_FRACTION,
                     refit_all=REFIT_AFTER_STOPPING)


def _transformer_bigru(b: Build):
    from gpucast.tasks.learn.models.transformer_bigru import TransformerBiGRURegressor

    return TransformerBiGRURegressor(preset=b.preset, seed=b.seed, device=b.device, epochs=b.epochs,
                                     categorical=tuple(b.categorical), cardinalities=tuple(b.cardinalities), base=b.base,
                                     progress=b.progress, max_seconds=b.max_seconds)


# Saving and loading, per library: native, code-free formats only.
def _save_torch(est, path: Path) -> None:
    est.save(path)


def _load_torch(path: Path, device: str | None):
    from gpucast.tasks.learn.models.transformer_bigru import TransformerBiGRURegressor

    return TransformerBiGRURegressor.load(path, device=device)


def _save_xgboost(est, path: Path) -> None:
    est.regressor_.save_model(path)


def _load_xgboost(path: Path, device: str | None):
    from xgboost import XGBRegressor

    from gpucast.tasks.learn.models.estimators import LogTarget

    inner = XGBRegressor()
    inner.load_model(path)
    return LogTarget.fitted(inner)


class _Booster:
    """A LightGBM booster behind `predict` (the saved text model has no sklearn wrapper)."""

    def __init__(self, booster):
        self.booster = booster

    def predict(self, X):
        return self.booster.predict(X)


def _save_lightgbm(est, path: Path) -> None:
    est.regressor_.booster_.save_model(str(path))


def _load_lightgbm(path: Path, device: str | None):
    import lightgbm as lgb

    from gpucast.tasks.learn.models.estimators import LogTarget

    return LogTarget.fitted(_Booster(lgb.Booster(model_file=str(path))))


def _save_catboost(est, path: Path) -> None:
    est.regressor_.save_model(str(path))


def _load_catboost(path: Path, device: str | None):
    from catboost import CatBoostRegressor

    from gpucast.tasks.learn.models.estimators import LogTarget

    return LogTarget.fitted(CatBoostRegressor().load_model(str(path)))


# scikit-learn types a saved model may contain; anything else refuses to load.
SKOPS_ALLOWED_PREFIXES = ("sklearn.", "numpy.", "builtins.")


# scikit-learn's bundled array-API adapters for libraries a saved model never holds. `import skops.io` lists
# scikit-learn's estimators (`sklearn.utils.all_estimators`, for its trusted-type names), and the package walk that
# does it imports every scikit-learn package on its way, these three among them: the torch one imports torch
# (1.7 of `import skops.io`'s 3.5 CPU-s here, paid by every command that loads a champion; issue 52 item 5).
_ARRAY_API_ADAPTERS = tuple(f"sklearn.externals.array_api_compat.{lib}" for lib in ("torch", "dask", "cupy"))


_SKOPS_IMPORT = threading.Lock()  # the targets' threads load their champions at once (flows/score.py)


def skops_io():
    """`skops.io`, imported without importing torch, Dask or CuPy through scikit-learn's array-API adapters: while
    skops imports, each adapter not yet imported is an empty package (nothing under it to walk: none holds an
    estimator), then removed again, so a later real import of it imports it. The trusted-type names skops builds
    are the same (tests/tasks/learn/test_models.py). One thread imports; the others wait for it (a lock, so none
    sees the stand-ins' window as its own or a half-imported skops)."""
    import sys
    import types

    with _SKOPS_IMPORT:
        if "skops.io" not in sys.modules:
            import sklearn  # noqa: F401  (the adapters' parent packages, before their stand-ins)

            stand_ins = {}
            for name in _ARRAY_API_ADAPTERS:
                if name not in sys.modules:
                    stand_ins[name] = types.ModuleType(name)
                    stand_ins[name].__path__ = []
            sys.modules.update(stand_ins)
            try:
                import skops.io  # noqa: F401
            finally:
                for name, module in stand_ins.items():
                    if sys.modules.get(name) is module:
                        del sys.modules[name]
    import skops.io

    return skops.io


def _save_skops(est, path: Path) -> None:
    skops_io().dump(est.regressor_, path)


def _load_skops(path: Path, device: str | None):
    sio = skops_io()

    from gpucast.tasks.learn.models.estimators import LogTarget

    untrusted = sio.get_untrusted_types(file=path)
    unexpected = [t for t in untrusted if not t.startswith(SKOPS_ALLOWED_PREFIXES)]
    if unexpected:
        raise ValueError(f"{path} holds types outside the allow-list: {', '.join(unexpected)}")
    return LogTarget.fitted(sio.load(path, trusted=untrusted))


PRIOR = "prior"


def _prior(b: Build):
    from gpucast.tasks.learn.models.estimators import PriorModel

    if b.base is None:
        raise ValueError("the `prior` model needs a feature set with the priors (priors or residual)")
    return PriorModel(b.base)


def _save_prior(est, path: Path) -> None:
    path.write_text(json.dumps({"base": est.base, "n_features": est.n_features_in_}))


def _load_prior(path: Path, device: str | None):
    from gpucast.tasks.learn.models.estimators import PriorModel

    saved = json.loads(path.read_text())
    return PriorModel.on(saved["base"], saved.get("n_features", -1))  # -1: saved before it was recorded (store fills it)


_SKOPS = (".skops", _save_skops, _load_skops)
REGISTRY: dict[str, ModelEntry] = {e.name: e for e in (
    ModelEntry(NN, "compute (Transformer-BiGRU), memory (BiGRU-Transformer)", _transformer_bigru, ".pt",
               _save_torch, _load_torch),
    ModelEntry("extra_trees", "compute", _extra_trees, *_SKOPS),
    ModelEntry("catboost", "compute", _catboost, ".cbm", _save_catboost, _load_catboost),
    ModelEntry("xgboost", "compute", _xgboost, ".json", _save_xgboost, _load_xgboost),
    ModelEntry("lightgbm", "compute", _lightgbm, ".txt", _save_lightgbm, _load_lightgbm),
    ModelEntry(PLAIN, "none: the plain baseline (issue 50)", _lightgbm_plain, ".txt", _save_lightgbm, _load_lightgbm),
    ModelEntry("decision_tree", "memory", _decision_tree, *_SKOPS),
    ModelEntry("random_forest", "memory", _random_forest, *_SKOPS),
    ModelEntry("adaboost", "memory", _adaboost, *_SKOPS),
    ModelEntry("linear_fs", "training time", _linear, *_SKOPS),
    ModelEntry(PRIOR, "none: the analytic prior alone", _prior, ".json", _save_prior, _load_prior),
)}
MODEL_NAMES = tuple(REGISTRY)
# Models that learn log(target) alone, never the residual on the prior, whatever the feature set (`base` None when
# built, tasks/learn/train.py `_build`, and when loaded, store.py `load_model`).
NO_BASE = (PLAIN,)
# The order a night fits them in (tasks/learn/train.py `order_fits`): the fast baselines first, so every
# target has a champion within seconds, then the ensembles from the quickest to fit, the network last.
FAST_MODELS = (PRIOR, "linear_fs", "decision_tree")
FIT_ORDER = (*FAST_MODELS, PLAIN, "lightgbm", "xgboost", "catboost", "adaboost", "extra_trees", "random_forest", NN)
# The blend's name (tasks/learn/blend.py `NAME`): no registry model, but a candidate with a place in `PREFERENCE`.
BLEND = "blend"
# Which model wins when several are tied with the best on validation (within noise, and equally cheap to score:
# tasks/learn/champion.py `champion_choice`): ensembles of trees first (they average many trees, score in
# milliseconds, and LightGBM compiles), the boosted ones in the order they fit fastest, then the forests; then the
# blend (issue 50, session 20); then the single models; the analytic prior (it learns nothing); the network last (the
# slowest to fit and score, and the one whose validation error moves most with its seed and the epochs a night allows).
# Why the blend after the forests and before adaboost and the lone tree (docs/models.md, session 20): a blend cheap
# enough to tie under `champion.COST_REACH` has cheap members, on the measured nights the lone decision tree and one
# ensemble (2.45 = 0.17 + 2.28 s per 1M jobs), so it carries the tree's variance; first in the order, it took a tie from
# the random forest it blends with the tree (R² 0.971 -> 0.935, CNN 16.1 -> 25.1%). Ahead of the lone tree it averages
# that tree with an ensemble: where the two were tied, R² 0.958 -> 0.971, MLP 18.7 -> 17.9%.
PREFERENCE = ("lightgbm", PLAIN, "xgboost", "catboost", "extra_trees", "random_forest", BLEND, "adaboost", "decision_tree",
              "linear_fs", PRIOR, NN)


def entry(name: str) -> ModelEntry:
    if name not in REGISTRY:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(REGISTRY)}")
    return REGISTRY[name]


def build(name: str, b: Build):
    """A new, unfitted estimator of registry model `name`."""
    return entry(name).build(b)
