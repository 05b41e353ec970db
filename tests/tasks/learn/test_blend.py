"""The blend of issue 50 item 2: non-negative weights on out-of-fold forecasts, cross-fitted to judge it, the
candidate in the champion's choice, and a saved blend scored back through the `Scorer`, its compiled members compiled."""

from __future__ import annotations

import shutil
from datetime import date

import numpy as np
import pytest

from gpucast.expectations import contract as c
from gpucast.records.outcomes import Champion, TargetResult
from gpucast.tasks.learn import blend, folds, train
from gpucast.tasks.learn.champion import Pooled, ScoreBudget, champion_choice, planner_loss
from gpucast.tasks.learn.models import compiled, registry, store
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.score import Scorer
from gpucast.tasks.simulate import simulate_jobs
from tests.tasks.learn.test_champion_choice import _fits


def test_the_weights_recover_a_constructed_mix_and_one_useful_member_is_no_blend():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(1, 40, 200), rng.uniform(1, 40, 200)
    w, why = blend.nnls_weights(np.column_stack([a, b]), 0.7 * a + 0.3 * b)
    assert w == pytest.approx([0.7, 0.3], abs=1e-9) and why == ""
    # a member whose forecasts only hurt gets weight 0: fewer than 2 members left, no blend
    assert blend.nnls_weights(np.column_stack([a, -b]), a) == (None, "1 member(s) with a weight above zero")
    useless = blend.candidate(_pooled(a, {"extra_trees": a, "catboost": -b}), {}, seed=0)
    assert useless.oof is None and "1 member(s) with a weight above zero" in useless.describe()
    assert "the best single model" in useless.describe()


def _pooled(y: np.ndarray, preds: dict[str, np.ndarray]) -> Pooled:
    return Pooled({m: {(0, i): float(v) for i, v in enumerate(p)} for m, p in preds.items()}, y)


def test_the_blend_is_judged_on_cross_fitted_forecasts_and_competes_as_a_candidate():
    rng = np.random.default_rng(1)
    y = rng.uniform(1, 40, 300)
    e1, e2 = rng.normal(0, 2.0, 300), rng.normal(0, 2.0, 300)  # independent errors: their mean halves the variance
    preds = {"extra_trees": y + e1, "catboost": y + e2, "decision_tree": y + 3 * e1, registry.PLAIN: y + 2 * e2}
    mix = blend.candidate(_pooled(y, preds), {"extra_trees": 2.0, "catboost": 3.0, "decision_tree": 0.1}, seed=0)
    assert mix.members == ("extra_trees", "catboost")  # the 2 best trees (no network here)
    assert mix.weights == pytest.approx([0.5, 0.5], abs=0.1) and mix.cost == pytest.approx(5.0)
    keys = sorted(mix.oof)
    full = np.array([[preds[m][k[1]] for m in mix.members] for k in keys]) @ np.array(mix.weights)
    assert not np.allclose([mix.oof[k] for k in keys], full)  # each row's weights fitted without it
    blended = np.array([mix.oof[k] for k in keys])
    assert planner_loss(y, blended) < 0.8 * min(planner_loss(y, preds[m]) for m in mix.members)
    choice = champion_choice(_fits(y, preds), y, folds=folds.FOLDS, extra={blend.NAME: mix.oof},
                             costs={blend.NAME: mix.cost})
    assert choice.champion == blend.NAME and choice.lowest == blend.NAME
    assert "blend of 0.5" in mix.describe() and "5 CPU-s per 1M jobs, counted: the sum of its members'" in mix.describe()
    rows = blend.metric_rows(mix, y, _fits(y, preds))  # its figures in model_metrics, as every model's
    assert {(r.model, r.split, r.rows_eval) for r in rows} == {(blend.NAME, "validation", 300), (blend.NAME, "test", 300)}
    assert rows[1].planner_loss == pytest.approx(planner_loss(y, blended)) and rows[1].r2 > 0.9
    single = blend.candidate(_pooled(y, {"extra_trees": y + e1, "linear_fs": y + e2}), {}, seed=0)
    assert single.oof is None and "fewer than 2 members" in single.describe()


def test_a_saved_blend_scores_back_through_the_scorer_as_the_weighted_sum_of_its_members(tmp_path):
    jobs = simulate_jobs(400, np.random.default_rng(2), date(2026, 11, 1), 0.0)
    options = TrainOptions(models=("lightgbm", "extra_trees"), repeats=1, seed=0, compile_trees=False)
    target = c.PEAK_GPU_MEM_GB
    rows = train.labelled(jobs, target, options)
    mix = blend.Candidate(("lightgbm", "extra_trees"), (0.6, 0.45), {(0, 0): 1.0}, 3.0)
    build = registry.Build(seed=0, threads=1, progress=lambda _: None)
    finished = train._refit(rows, target, options, blend.NAME, TargetResult(target=target, rows=rows.height), build, mix)
    assert isinstance(finished.estimator, blend.Blend) and finished.result.champion == blend.NAME
    train.save_champion(tmp_path, target, options, finished, threads=1)
    assert store.read_metadata(tmp_path)["champion"] == blend.NAME
    assert (tmp_path / blend.FILE).exists() and (tmp_path / "lightgbm.txt").exists()
    X = finished.encoder.transform(rows)
    members = finished.estimator.estimators
    expected = 0.6 * members["lightgbm"].predict(X) + 0.45 * members["extra_trees"].predict(X)
    loaded = store.load_model(tmp_path, blend.NAME)
    assert np.allclose(loaded.estimator.predict(X), expected)
    scored = Scorer(Champion(target, blend.NAME, "train-test", str(tmp_path))).score(rows)
    inside = ~scored["ood"].to_numpy()
    assert inside.any() and (scored["model"].to_numpy()[inside] == blend.NAME).all()
    assert np.isfinite(scored["p50"].to_numpy()).all()


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on this machine: nothing to compile with")
def test_a_blend_keeps_its_compiled_members_compiled_and_scores_what_its_native_members_do(tmp_path):
    jobs = simulate_jobs(400, np.random.default_rng(2), date(2026, 11, 1), 0.0)
    options = TrainOptions(models=("lightgbm", "xgboost"), repeats=1, seed=0, compile_trees=True)
    target = c.PEAK_GPU_MEM_GB
    rows = train.labelled(jobs, target, options)
    mix = blend.Candidate(("lightgbm", "xgboost"), (0.7, 0.3), {(0, 0): 1.0}, 3.0)
    build = registry.Build(seed=0, threads=1, progress=lambda _: None)
    finished = train._refit(rows, target, options, blend.NAME, TargetResult(target=target, rows=rows.height), build, mix)
    train.save_champion(tmp_path, target, options, finished, threads=1)
    info = store.read_metadata(tmp_path)["compiled"]
    # the LightGBM member compiled and checked as it would be alone; XGBoost stays native and says why
    assert info["model"] == blend.NAME and info["used"] is True
    assert "lightgbm compiled" in info["reason"] and "xgboost native: XGBoost" in info["reason"]
    assert (tmp_path / f"lightgbm{compiled.LIB_SUFFIX}").exists() and not (tmp_path / f"xgboost{compiled.LIB_SUFFIX}").exists()
    fast = store.load_model(tmp_path, blend.NAME)
    slow = store.load_model(tmp_path, blend.NAME, use_compiled=False)
    assert fast.compiled and not slow.compiled
    assert isinstance(fast.estimator.estimators["lightgbm"].regressor_, compiled.CompiledTrees)
    X = finished.encoder.transform(rows)
    np.testing.assert_allclose(fast.estimator.predict(X), slow.estimator.predict(X), rtol=1e-6)
    np.testing.assert_allclose(slow.estimator.predict(X), finished.estimator.predict(X), rtol=1e-6)


def test_the_blend_is_judged_on_the_holdout_with_its_members_forecasts_and_a_member_that_misses_it_keeps_it_out():
    """Review 57 S3: the blend's holdout forecasts are its members' with the weights fitted out of fold (the holdout is
    never in the folds), so it passes the holdout checks every model passes. Before, it had none and competed on its
    out-of-fold loss alone: here it would have been champion though one member under-forecasts every held-out job."""
    rng = np.random.default_rng(1)
    y, held_y = rng.uniform(1, 40, 300), rng.uniform(1, 40, 60)
    actual, idx = np.concatenate([y, held_y]), np.arange(300, 360)
    e1, e2 = rng.normal(0, 2.0, 300), rng.normal(0, 2.0, 300)
    preds = {"extra_trees": y + e1, "catboost": y + e2, "decision_tree": y + 3 * e1, registry.PLAIN: y + 2 * e2}
    mix = blend.candidate(_pooled(y, preds), {}, seed=0)
    noise = rng.normal(0, 1.0, 60)
    held = {"idx": idx, "extra_trees": held_y + noise, "decision_tree": held_y + 2 * noise, registry.PLAIN: held_y + noise}
    for catboost, competes in ((held_y - 10.0, False), (held_y - noise, True)):
        fits = _fits(actual[:300], preds, **{**held, "catboost": catboost})
        mixed = blend.holdout(mix, fits)
        assert sorted(mixed) == [(r, i) for r in range(folds.FOLDS) for i in idx]  # every fit's copy, as every model's
        expect = mix.weights[0] * held["extra_trees"] + mix.weights[1] * catboost
        assert [mixed[(0, i)] for i in idx] == pytest.approx(expect)
        choice = champion_choice(fits, actual, folds=folds.FOLDS, extra={blend.NAME: mix.oof},
                                 extra_holdout={blend.NAME: mixed})
        assert choice.lowest == blend.NAME and blend.NAME in choice.backtest
        held_rows = [r for r in blend.metric_rows(mix, actual, fits, mixed) if r.split == "holdout"]  # the leaderboard's
        assert [r.repeat for r in held_rows] == list(range(folds.FOLDS)) and held_rows[0].rows_eval == 60
        assert held_rows[0].planner_loss == pytest.approx(planner_loss(held_y, expect))
        if competes:  # members that hold: its holdout errors average out, and it is champion
            assert choice.champion == blend.NAME and "holdout planner loss" in choice.describe()
        else:  # catboost 10 GB under on every held-out job: the blend is worse than the plain LightGBM there
            assert choice.champion != blend.NAME and "worse beyond noise" in choice.unclear[blend.NAME]
    assert blend.holdout(blend.Candidate(why="none"), fits) is None


def test_a_member_over_the_scoring_budget_is_no_member_and_the_blend_is_made_of_the_trees_within_it():
    """At 1M pending jobs the network (230 CPU-s per 1M, counted) is over a 10 s budget: the blend is of the two best
    trees, whose cost fits; at 40 pending jobs the network is a member again (issue 52 item 5, session 23)."""
    rng = np.random.default_rng(5)
    y = rng.uniform(1, 40, 300)
    e1, e2, e3 = (rng.normal(0, 2.0, 300) for _ in range(3))
    preds = {registry.NN: y + 0.5 * e3, "extra_trees": y + e1, "catboost": y + e2, registry.PLAIN: y + 2 * e2}
    costs = {registry.NN: 230.0, "extra_trees": 2.0, "catboost": 3.0, registry.PLAIN: 8.0}
    site = blend.candidate(_pooled(y, preds), costs, seed=0, budget=ScoreBudget(10.0, 1_000_000))
    assert set(site.members) == {"extra_trees", "catboost"} and site.cost == pytest.approx(5.0)
    small = blend.candidate(_pooled(y, preds), costs, seed=0, budget=ScoreBudget(10.0, 40))
    assert small.members[0] == registry.NN and small.cost == pytest.approx(235.0)
    assert blend.candidate(_pooled(y, preds), costs, seed=0).members == small.members  # no budget: as before
    # each tree fits alone (2 and 3 s), not together (5 s): no blend, and the reason says so
    tight = blend.candidate(_pooled(y, preds), costs, seed=0, budget=ScoreBudget(4.0, 1_000_000))
    assert tight.oof is None and "their summed cost 5 s is over the scoring budget" in tight.describe()
    # the budget leaves one member: said
    no_plain = {m: p for m, p in preds.items() if m != registry.PLAIN}  # (the plain LightGBM is never left out)
    one = blend.candidate(_pooled(y, no_plain), costs, seed=0, budget=ScoreBudget(2.5, 1_000_000))
    assert one.oof is None and "fewer than 2 members within the scoring budget (extra_trees)" in one.describe()
