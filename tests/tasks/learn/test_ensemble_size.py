"""Smaller ensembles where they cost nothing (issue 40): boosted models stop early on held-out training rows,
forests have `FOREST_TREES` trees (tasks/learn/models/registry.py, estimators.py)."""

from __future__ import annotations

import numpy as np
import pytest

from gpucast.tasks.learn.models import registry

CAPS = {"lightgbm": 600, "xgboost": 600, "catboost": 800}


@pytest.fixture(scope="module")
def noisy():
    """y = exp(x0 + noise): one tree-shaped signal, then only noise to chase, so extra rounds stop paying."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(3000, 4))
    return X, np.exp(X[:, 0] + rng.normal(scale=0.5, size=3000))


def _trees(name: str, est) -> int:
    inner = est.regressor_
    if name == "lightgbm":
        return inner.booster_.best_iteration
    if name == "xgboost":
        return inner.best_iteration + 1
    return inner.tree_count_


@pytest.mark.parametrize("name", list(CAPS))
def test_a_boosted_model_stops_once_held_out_rows_stop_improving_and_saves_only_the_kept_trees(tmp_path, noisy, name):
    X, y = noisy
    est = registry.build(name, registry.Build(seed=0, threads=1)).fit(X, y)
    kept = _trees(name, est)
    assert 0 < kept < CAPS[name] // 2  # was every round of the cap
    path = tmp_path / f"model{registry.entry(name).suffix}"
    registry.entry(name).save(est, path)
    loaded = registry.entry(name).load(path, None)
    np.testing.assert_allclose(loaded.predict(X[:200]), est.predict(X[:200]), rtol=1e-6)
    if name == "lightgbm":  # the saved file (the compiled library is built from it) holds only the kept trees
        assert loaded.regressor_.booster.num_trees() == kept


def test_the_held_out_rows_are_a_fixed_draw_so_a_fit_is_reproducible(noisy):
    X, y = noisy
    a, b = (registry.build("lightgbm", registry.Build(seed=0, threads=1)).fit(X, y) for _ in range(2))
    np.testing.assert_array_equal(a.predict(X[:100]), b.predict(X[:100]))


@pytest.mark.parametrize("name", ["random_forest", "extra_trees"])
def test_forests_have_the_chosen_number_of_trees(noisy, name):
    X, y = noisy
    est = registry.build(name, registry.Build(seed=0, threads=1)).fit(X[:500], y[:500])
    assert len(est.regressor_.estimators_) == registry.FOREST_TREES < 300

