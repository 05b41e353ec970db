"""Early stopping's refit (issue 50 item 4, `LogTarget(refit_all=True)`): the rounds kept, on every row."""

from __future__ import annotations

import numpy as np
import pytest

from gpucast.tasks.learn.models.estimators import LogTarget


@pytest.mark.parametrize("library", ["lightgbm", "xgboost"])
def test_the_rounds_early_stopping_kept_are_fitted_again_on_every_row(library: str) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = np.exp(X[:, 0] + 0.1 * rng.normal(size=200))
    if library == "lightgbm":
        from lightgbm import LGBMRegressor

        inner = LGBMRegressor(n_estimators=400, learning_rate=0.1, early_stopping_round=20, verbose=-1, random_state=0)
    else:
        from xgboost import XGBRegressor

        inner = XGBRegressor(n_estimators=400, learning_rate=0.1, early_stopping_rounds=20, random_state=0)
    stopped = LogTarget(inner, validation_fraction=0.2).fit(X, y)
    refitted = LogTarget(inner, validation_fraction=0.2, refit_all=True).fit(X, y)
    kept = refitted.rounds_kept_
    assert 0 < kept < 400  # it stopped early
    trees = (refitted.regressor_.booster_.num_trees() if library == "lightgbm"
             else refitted.regressor_.get_booster().num_boosted_rounds())
    assert trees == round(kept * 200 / 160)  # the kept rounds scaled to every row (160 fitted, 40 held out)
    assert refitted.regressor_.n_features_in_ == 4
    # the refit saw the 40 held-out rows; the stopped model did not
    held = np.random.default_rng(0).permutation(200)[:40]
    err = lambda est: np.mean(np.abs(np.log(est.predict(X[held]) / y[held])))  # noqa: E731
    assert err(refitted) < err(stopped)
