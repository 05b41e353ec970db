"""The two estimators of our own behind the registry (`registry.py`): `LogTarget`, which makes any
regressor learn log(target) (or log(target / prior)), and `PriorModel`, the analytic prior as a model.

scikit-learn is imported here, not in `registry.py`: the core install (no `ml` extra) imports the
registry's names (`gpucast sql` and `--help` must work there) but never builds a model.
"""

from __future__ import annotations

import inspect

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_array, check_is_fitted, check_X_y, validate_data

# below this many rows left to fit on, early stopping holds none out (sklearn's one-sample checks, tiny sites)
MIN_ROWS_TO_HOLD_OUT = 20
# Beyond the fit rows' range of the prior (issue 50), the residual's forecast follows the prior only as far as the
# prior is right at that edge of the history: `LogTarget.fit` measures the median ratio truth / prior of the
# `EDGE_SHARE` of fit rows with the largest (and the smallest) prior, at least `EDGE_MIN_ROWS` of them.
EDGE_SHARE = 0.1
EDGE_MIN_ROWS = 5

class LogTarget(TransformedTargetRegressor):
    """scikit-learn's `TransformedTargetRegressor` learning log(y), with an offset: the log-prior column
    `base` of X when given. The inner regressor then learns log(y) - X[:, base] = log(y / prior).

    Feature columns are encoded as natural logs (`features.FeatureEncoder`), so column `base` holds
    log(prior): `fit` hands the parent y / prior, whose log it learns; `predict` is exp(inner + offset),
    the parent's inverse times the prior, in one step (so a model loaded from its library's own file needs
    only `regressor_`: `LogTarget.fitted`).

    **Beyond the history's range of the prior** (issue 50): the forecast is prior x learned ratio, so a job whose
    prior is above every fit row's multiplies the ratio the trees learned at the history's edge by a prior they never
    saw; where the prior is badly scaled there (GPUMemNet's CNNs: truth / prior ~7x at the edge, ~3x beyond it), that
    forecast is 2-3x the truth. So `fit` keeps the fit rows' range of log(prior) (`base_range_`) and, per edge, the
    trust in the prior there (`base_trust_`: min(r, 1/r) of r, the median truth / prior of the edge rows: 1 where the
    prior is right at the edge, small where it is far off); beyond the range, the offset moves with log(prior) at that
    slope: offset = clip(b) + trust x (b - clip(b)). A prior right at the edge extrapolates as before (the measured
    set: trust 0.93-0.94); a prior 7x off barely moves the forecast (trust ~0.14). Inside the range nothing changes.
    """

    def __init__(self, regressor=None, *, base: int | None = None, validation_fraction: float = 0.0,
                 refit_all: bool = False):
        # the transform is fixed (log in, exp out, which `predict` applies with the offset), so it is not
        # a parameter: get_params/clone see `regressor`, `base`, `validation_fraction` and `refit_all` only, and no
        # setting is silently ignored
        super().__init__(regressor=regressor, func=np.log, inverse_func=np.exp, check_inverse=False)
        self.base = base
        self.validation_fraction = validation_fraction
        self.refit_all = refit_all

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True  # log(y): every target is > 0 (the contract's rule)
        tags.target_tags.multi_output = False  # one target per model
        tags.input_tags.sparse = False  # the encoder's matrix is dense; fit makes any input dense
        return tags

    def _offset(self, X) -> np.ndarray | float:
        if self.base is None:
            return 0.0
        b = np.asarray(np.asarray(X)[:, self.base], dtype=np.float64)  # the one column, not the float32 matrix, to float64
        if getattr(self, "base_range_", None) is None:  # (a model saved before issue 50's edge rule: as it was)
            return b
        inside = np.clip(b, *self.base_range_)
        trust = np.where(b > inside, self.base_trust_[1], self.base_trust_[0])
        return inside + trust * (b - inside)

    def _fit_edges(self, X, y) -> None:
        """`base_range_` and `base_trust_` (lower edge, upper edge) of the fit rows (class doc)."""
        self.base_range_ = self.base_trust_ = None
        if self.base is None or not len(y):
            return
        b = X[:, self.base]
        k = min(len(y), max(EDGE_MIN_ROWS, int(round(len(y) * EDGE_SHARE))))
        order = np.argsort(b, kind="stable")
        ratio = [float(np.exp(np.median(np.log(y[edge]) - b[edge]))) for edge in (order[:k], order[-k:])]
        self.base_range_ = (float(b.min()), float(b.max()))
        self.base_trust_ = tuple(min(r, 1 / r) for r in ratio)

    def edges(self) -> dict | None:
        """The edge rule's learned state for the saved metadata (`from_edges` restores it); None without a base."""
        if getattr(self, "base_range_", None) is None:
            return None
        return {"range": list(self.base_range_), "trust": list(self.base_trust_)}

    def from_edges(self, saved: dict | None) -> LogTarget:
        """Restore `edges()` on a loaded model (None: a model saved before the rule, as it was)."""
        if saved and self.base is not None:
            self.base_range_, self.base_trust_ = tuple(saved["range"]), tuple(saved["trust"])
        return self

    def fit(self, X, y, **fit_params):
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        X, y = check_X_y(X, y, dtype=np.float64, y_numeric=True)  # finite (the encoder never leaves NaN), same length
        self._fit_edges(X, y)
        target = y / np.exp(self._offset(X))
        if self.validation_fraction:
            # early stopping (a boosted ensemble built with its library's patience: registry.py): a fixed random
            # `validation_fraction` of the rows is held out, and the library stops adding trees once its error
            # there stops falling, keeping the best round's trees. The held-out rows are not fitted on.
            order = np.random.default_rng(0).permutation(len(y))
            held = max(1, round(len(y) * self.validation_fraction))
            val, fit = order[:held], order[held:]
            if len(fit) < MIN_ROWS_TO_HOLD_OUT:  # too few rows to spare any: fit on all (the library still needs an eval set)
                fit = order
            accepts = inspect.signature(self.regressor.fit).parameters
            if "eval_X" in accepts:  # LightGBM >= 4.7 (its `eval_set` is deprecated)
                fit_params = {**fit_params, "eval_X": (X[val],), "eval_y": (np.log(target[val]),)}
            else:
                fit_params = {**fit_params, "eval_set": [(X[val], np.log(target[val]))]}
            if "verbose" in accepts:
                fit_params.setdefault("verbose", False)  # XGBoost would print every round's error
            if self.refit_all and len(fit) < len(y):
                # the rounds early stopping kept, scaled to every row, then fitted again on every row (issue 50
                # item 4: the held-out rows are otherwise never fitted on)
                super().fit(X[fit], target[fit], **fit_params)
                if (kept := _rounds_kept(self.regressor_)) is not None:
                    rounds, no_stopping = kept[1], {kept[0]: max(1, round(kept[1] * len(y) / len(fit))), kept[2]: None}
                    self.regressor_ = clone(self.regressor).set_params(**no_stopping).fit(X, np.log(target))
                    self.rounds_kept_ = rounds
                return self
            X, target = X[fit], target[fit]
        return super().fit(X, target, **fit_params)

    def predict(self, X, **predict_params):
        if not hasattr(self, "regressor_"):  # (check_is_fitted would ask a loaded booster for sklearn tags)
            raise NotFittedError("LogTarget.predict before fit")
        X = check_array(X, dtype=(np.float64, np.float32))  # 2-D and finite: a NaN would become a silent forecast
        expected = getattr(self.regressor_, "n_features_in_", None)  # (CatBoost's reads 0 after unpickling: unknown)
        if expected and X.shape[1] != expected:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting {expected} features as input.")
        return np.exp(np.asarray(self.regressor_.predict(X, **predict_params), dtype=np.float64).ravel() + self._offset(X))

    @classmethod
    def fitted(cls, regressor, base: int | None = None) -> LogTarget:
        """A LogTarget around a regressor already fitted on log targets (loaded from its own file)."""
        est = cls(regressor, base=base)
        est.regressor_ = regressor
        return est


def _rounds_kept(model) -> tuple[str, int, str] | None:
    """(the library's rounds parameter, rounds an early-stopped fit kept, its early-stopping parameter) of a boosted
    ensemble; None for any other model."""
    kind = type(model).__name__
    if kind == "LGBMRegressor" and getattr(model, "best_iteration_", 0):
        return "n_estimators", int(model.best_iteration_), "early_stopping_round"
    if kind == "XGBRegressor" and hasattr(model, "best_iteration"):
        return "n_estimators", int(model.best_iteration) + 1, "early_stopping_rounds"
    if kind == "CatBoostRegressor" and model.get_best_iteration() is not None:
        return "iterations", int(model.get_best_iteration()) + 1, "early_stopping_rounds"
    return None


class PriorModel(RegressorMixin, BaseEstimator):
    """The analytic prior alone (`tasks/learn/priors.py`): no learning, exp(column `base`) of the features.

    A plain baseline on the leaderboard (what a GPU engineer's formula gets right), and the forecast
    of last resort: a target with too few labelled jobs for the models is scored by it."""

    def __init__(self, base: int = 0):
        self.base = base

    def fit(self, X, y):
        validate_data(self, X, y, y_numeric=True)  # nothing is learned; the input is checked, n_features_in_ set
        return self

    def predict(self, X):
        check_is_fitted(self, "n_features_in_")
        return np.exp(validate_data(self, X, reset=False, dtype=np.float64)[:, self.base])

    @classmethod
    def on(cls, base: int, n_features: int) -> PriorModel:
        """The prior in column `base` of an encoder's `n_features` columns, ready to predict (nothing to learn)."""
        est = cls(base)
        est.n_features_in_ = n_features
        return est
