"""Tree champions compiled for scoring (treelite + tl2cgen + gcc): same predictions, native fallback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.runners import cores_here
from gpucast.records.outcomes import TargetResult
from gpucast.tasks.learn import intervals
from gpucast.tasks.learn.features import FEATURE_SETS, FeatureEncoder
from gpucast.tasks.learn.models import compiled, registry, store
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.train import Finished, labelled, save_champion
from gpucast.tasks.simulate import SimConfig, simulate_jobs
from tests.train_steps import train_target

THREADS = cores_here()  # OMP_NUM_THREADS where set (a test worker's share of the cores), else every core

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on this machine: nothing to compile with")
TARGET = c.PEAK_GPU_MEM_GB


@pytest.fixture(scope="module")
def jobs():
    return simulate_jobs(3000, np.random.default_rng(3), SimConfig().start, 0.0)


@pytest.fixture(scope="module")
def champion(jobs, tmp_path_factory) -> Path:
    """A LightGBM champion trained and compiled once (compiling is the slow part)."""
    folder = tmp_path_factory.mktemp("compiled")
    opts = TrainOptions(models=("lightgbm",), repeats=1, min_labelled=50, compile_trees=True)
    result = train_target(jobs, TARGET, opts, folder, threads=THREADS)
    assert result.compiled.used is True, result.compiled
    return folder


def test_a_compiled_champion_predicts_what_the_native_model_does(jobs, champion):
    info = store.read_metadata(champion)["compiled"]
    assert info["used"] is True and info["max_relative_difference"] <= compiled.AGREEMENT_RTOL
    assert (champion / f"lightgbm{compiled.LIB_SUFFIX}").exists()
    fast = store.load_model(champion, "lightgbm")
    slow = store.load_model(champion, "lightgbm", use_compiled=False)
    assert fast.compiled and not slow.compiled
    X = fast.encoder.transform(labelled(jobs, TARGET, TrainOptions()))
    a, b = fast.estimator.predict(X), slow.estimator.predict(X)
    np.testing.assert_allclose(a, b, rtol=1e-6)
    assert np.std(a) > 0  # a model that predicts something


def test_without_a_usable_library_scoring_falls_back_to_the_native_model(champion, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(champion, folder)
    info_path = folder / f"lightgbm{compiled.INFO_SUFFIX}"
    info = json.loads(info_path.read_text())
    info_path.write_text(json.dumps({**info, "tl2cgen": "0.0.1"}))  # built by another tl2cgen
    assert not store.load_model(folder, "lightgbm").compiled
    info_path.write_text(json.dumps(info))
    (folder / f"lightgbm{compiled.LIB_SUFFIX}").write_bytes(b"not a library")  # damaged
    loaded = store.load_model(folder, "lightgbm")
    assert not loaded.compiled and len(loaded.estimator.predict(np.zeros((3, len(loaded.encoder.names))))) == 3


def test_a_library_changed_since_training_is_not_used(champion, tmp_path, caplog):
    """Review 86 S2-1: the compiled library is what scoring runs, and one swapped since training predicted unchecked;
    a library (or its record) whose SHA-256 is not the one training noted is not loaded: the native model predicts."""
    folder = tmp_path / "copy"
    shutil.copytree(champion, folder)
    assert store.load_model(folder, "lightgbm").compiled
    lib = folder / f"lightgbm{compiled.LIB_SUFFIX}"
    lib.write_bytes(lib.read_bytes() + b"\0")  # still a library that loads, not the one training built
    with caplog.at_level("INFO"):
        loaded = store.load_model(folder, "lightgbm")
    assert not loaded.compiled and "is not the file training wrote" in caplog.text


def test_not_compiled_unless_asked(jobs, tmp_path):
    result = train_target(jobs, c.RUNTIME_HOURS, TrainOptions(models=("lightgbm",), repeats=1, min_labelled=50,
                                                             compile_trees=False), tmp_path, threads=THREADS)
    assert result.compiled is None and not (tmp_path / f"lightgbm{compiled.LIB_SUFFIX}").exists()


def test_a_library_that_disagrees_with_its_model_is_not_kept(tmp_path):
    """The check compares against the fitted model: a wrong reference must discard the library."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4))
    model = lgb.LGBMRegressor(n_estimators=5, verbose=-1).fit(X, X[:, 0] * 2)
    model.booster_.save_model(str(tmp_path / "lightgbm.txt"))
    assert compiled.compile_model("lightgbm", tmp_path / "lightgbm.txt", model, X).used is True

    class Off:
        def predict(self, X):
            return np.full(len(X), 1e3)

    info = compiled.compile_model("lightgbm", tmp_path / "lightgbm.txt", Off(), X)
    assert info.used is False and "differ by up to" in info.reason
    assert not (tmp_path / f"lightgbm{compiled.LIB_SUFFIX}").exists()
    assert compiled.load_compiled(tmp_path / "lightgbm.txt")[0] is None


# Each tree family, tiny (a few trees on a few hundred jobs: compiling is the slow part), through the registry.
TINY = {"lightgbm": {"n_estimators": 5}, "random_forest": {"n_estimators": 4}, "extra_trees": {"n_estimators": 4},
        "decision_tree": {"max_depth": 8}, "xgboost": {"n_estimators": 5}, "adaboost": {"n_estimators": 5}}


def _saved_champion(name: str, jobs, folder: Path) -> Path:
    """Registry model `name` (tiny) fitted on 400 labelled jobs and saved by `save_champion` with compiling on."""
    options = TrainOptions(models=(name,), compile_trees=True)
    rows = labelled(jobs, TARGET, options).head(400)
    encoder = FeatureEncoder(options.features).fit(rows)
    X, y = encoder.transform(rows), rows[TARGET].to_numpy().astype(np.float64)
    est = registry.build(name, registry.Build(threads=THREADS, categorical=encoder.categorical,
                                              base=FEATURE_SETS[options.features].base_column(TARGET)))
    est.regressor.set_params(**TINY[name])
    est.fit(X, y)
    result = TargetResult(TARGET, rows=rows.height, champion=name,
                          calibration={name: intervals.calibrate(y, est.predict(X), float(y.min()))})
    save_champion(folder, TARGET, options, Finished(result, est, encoder, X), threads=THREADS)
    return folder


@pytest.mark.parametrize("name", ["lightgbm"])
def test_every_compilable_family_scores_compiled_as_its_native_model_does(name, jobs, tmp_path, caplog):
    folder = _saved_champion(name, jobs, tmp_path)
    info = store.read_metadata(folder)["compiled"]
    assert info["used"] is True, info
    with caplog.at_level("INFO", logger=store.__name__):
        fast = store.load_model(folder, name)
    assert fast.compiled and isinstance(fast.estimator.regressor_, compiled.CompiledTrees)
    assert "predicts through its compiled library" in caplog.text
    slow = store.load_model(folder, name, use_compiled=False)
    assert not slow.compiled
    X = fast.encoder.transform(labelled(jobs, TARGET, TrainOptions()))  # every job, most of them unseen by the fit
    a, b = fast.estimator.predict(X), slow.estimator.predict(X)
    np.testing.assert_allclose(a, b, rtol=compiled.AGREEMENT_RTOL)
    inner = slow.estimator.regressor_.predict(X)  # the raw (log) output the library replaces, compared as such
    assert compiled.max_relative_difference(fast.estimator.regressor_.predict(X), inner) <= compiled.AGREEMENT_RTOL
    assert np.std(a) > 0


@pytest.mark.parametrize("name", ["adaboost", "decision_tree", "extra_trees", "random_forest", "xgboost"])
def test_a_family_that_stays_native_says_why_and_scores_natively(name, jobs, tmp_path, caplog):
    folder = _saved_champion(name, jobs, tmp_path)
    info = json.loads((folder / f"{name}{registry.entry(name).suffix}").with_suffix(compiled.INFO_SUFFIX).read_text())
    assert info == store.read_metadata(folder)["compiled"]
    assert info["used"] is False and info["reason"] == compiled.STAYS_NATIVE[name]
    assert not list(folder.glob(f"*{compiled.LIB_SUFFIX}"))
    with caplog.at_level("INFO", logger=store.__name__):
        loaded = store.load_model(folder, name)
    assert not loaded.compiled and f"{name} predicts through its native model: not compiled: " in caplog.text
    assert np.all(np.isfinite(loaded.estimator.predict(loaded.encoder.transform(labelled(jobs, TARGET, TrainOptions())))))


def test_a_forest_too_large_to_compile_in_minutes_scores_natively(jobs, tmp_path, monkeypatch):
    monkeypatch.setattr(compiled, "MAX_COMPILE_NODES", 10)  # the tiny forest has more nodes than that
    monkeypatch.setitem(compiled.COMPILABLE, "extra_trees", "sklearn")  # (it stays native: a forest that would not)
    folder = _saved_champion("extra_trees", jobs, tmp_path)
    info = store.read_metadata(folder)["compiled"]
    assert info["used"] is False and "tree nodes: above the 10" in info["reason"]
    assert not (folder / f"extra_trees{compiled.LIB_SUFFIX}").exists() and not store.load_model(folder, "extra_trees").compiled
