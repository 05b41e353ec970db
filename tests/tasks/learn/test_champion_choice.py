"""The champion rule of issue 50 on constructed forecasts: the folds, the planner loss, the tie rule, the
generalisation holdout (the latest week, else whole families, else whole shape clusters), the plain LightGBM's floor, too few rows."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.records.outcomes import FitResult, MetricRow
from gpucast.tasks.learn import blend
from gpucast.tasks.learn.champion import (
    COST_BASE,
    COST_FREE,
    COST_NOISE,
    COST_PER_UNIT,
    COST_REACH,
    FLOOR_P,
    GROUPED_CAP,
    TIE_CAP,
    UNDER_WEIGHT,
    ScoreBudget,
    _below,
    _nested_depth,
    _together,
    _weighted_sq,
    _worse_beyond_noise,
    champion_choice,
    planner_loss,
    predict_work,
    score_cost,
)
from gpucast.tasks.learn.folds import (
    FOLDS,
    fold_split,
    generalisation_holdout,
    grouped_holdout,
    holdout_groups,
    shape_clusters,
)
from gpucast.tasks.learn.models import registry

PLAIN = registry.PLAIN


def test_every_row_outside_the_holdout_is_out_of_fold_once_per_pass_and_the_holdout_never_fitted():
    n = 101
    holdout = np.zeros(n, dtype=bool)
    holdout[[3, 50, 77, 100]] = True
    for p in range(2):  # two passes: repeats 0-2 and 3-5
        folds = [fold_split(n, holdout, seed=7, repeat=p * FOLDS + k) for k in range(FOLDS)]
        oof = np.concatenate([o for _, o in folds])
        assert sorted(oof) == sorted(np.flatnonzero(~holdout))  # each once
        for fit, o in folds:
            assert not set(fit) & set(o) and not holdout[fit].any() and not holdout[o].any()
            assert len(fit) + len(o) == n - holdout.sum()
    first, second = fold_split(n, holdout, 7, 0)[1], fold_split(n, holdout, 7, FOLDS)[1]
    assert set(first) != set(second)  # the second pass deals another permutation


def test_an_under_forecast_weighs_three_times_an_over_forecast():
    y = np.array([10.0, 10.0])
    assert planner_loss(y, np.array([12.0, 10.0])) == pytest.approx(np.sqrt(4 / 2))
    assert planner_loss(y, np.array([8.0, 10.0])) == pytest.approx(np.sqrt(UNDER_WEIGHT * 4 / 2))
    # in the target's units: a 15 GB miss weighs 100x a 1.5 GB one (squared), not the same as a relative metric would
    assert planner_loss(np.array([20.0]), np.array([5.0])) == pytest.approx(10 * planner_loss(np.array([2.0]), np.array([0.5])))


def _fit(model: str, repeat: int, idx: np.ndarray, pred: np.ndarray, cost: float | None = None,
         held: np.ndarray | None = None, held_pred: np.ndarray | None = None) -> FitResult:
    row = MetricRow(model=model, preset=None, features="residual", repeat=repeat, seed=repeat, split="test", mse=0.0,
                    rmse=0.0, mae=0.0, mape=0.0, r2=0.0, rows_train=1, rows_eval=len(idx), train_seconds=0.0, device="cpu",
                    epochs=None, score_seconds_per_million=cost)
    rows = (row,) if held is None else (row, replace(row, split="holdout", rows_eval=len(held)))  # as fit_one's
    return FitResult("peak_gpu_mem_gb", model, repeat, rows, pred, 0.0, "cpu", test_idx=idx, holdout_idx=held,
                     holdout_pred=held_pred)


def _fits(y: np.ndarray, preds: dict[str, np.ndarray], costs: dict[str, float] | None = None, **held) -> list[FitResult]:
    """One pass of three folds per model, each fold forecasting its rows with `preds[model]`."""
    folds = np.array_split(np.arange(len(y)), FOLDS)
    return [_fit(m, k, f, p[f], (costs or {}).get(m), held.get("idx"), held.get(m)) for m, p in preds.items()
            for k, f in enumerate(folds)]


def test_the_lowest_planner_loss_wins_and_noise_ties_go_to_the_cheapest():
    rng = np.random.default_rng(0)
    y = rng.uniform(1, 40, 300)
    good, close, bad = y + rng.normal(0, 1.0, 300), y + rng.normal(0, 1.05, 300), y + rng.normal(0, 4.0, 300)
    choice = champion_choice(_fits(y, {"lightgbm": good, "decision_tree": close, "linear_fs": bad, PLAIN: bad},
                                   {"lightgbm": 50.0, "decision_tree": 0.2, "linear_fs": 1.0, PLAIN: 20.0}), y, folds=FOLDS)
    assert choice.lowest == "lightgbm" and choice.rows == 300
    assert choice.champion == "decision_tree" and set(choice.tied) == {"lightgbm", "decision_tree"}  # tied: the cheaper
    assert "linear_fs" not in choice.tied  # clearly worse: not tied however cheap
    # an under-forecasting model loses to one with the same errors over the truth
    under = champion_choice(_fits(y, {"lightgbm": y - 3.0, "decision_tree": y + 3.0}), y, folds=FOLDS)
    assert under.champion == "decision_tree" and under.tied == ("decision_tree",)


def test_models_are_compared_on_the_rows_every_one_of_them_forecast():
    y = np.arange(1.0, 31.0)
    fits = _fits(y, {"lightgbm": y + 1.0, PLAIN: y + 2.0})
    fits = [f for f in fits if not (f.model == "lightgbm" and f.repeat == 2)]  # a budget cut: one fold less
    choice = champion_choice(fits, y, folds=FOLDS)
    assert choice.rows == 20 and choice.champion == "lightgbm"


def test_a_model_worse_than_the_plain_lightgbm_or_below_it_within_noise_never_wins_and_the_reason_says_by_how_much():
    rng = np.random.default_rng(1)
    y = rng.uniform(1, 40, 300)
    plain = y + rng.normal(0, 1.0, 300)
    # decision_tree is tied with the plain baseline (its loss within 2% of it) and far cheaper, but its loss is higher
    tree = y + (plain - y) * 1.01
    choice = champion_choice(_fits(y, {"decision_tree": tree, PLAIN: plain}, {"decision_tree": 0.1, PLAIN: 20.0}),
                             y, folds=FOLDS, target=c.PEAK_GPU_MEM_GB)
    assert choice.means["decision_tree"] > choice.means[PLAIN]
    assert choice.champion == PLAIN and choice.describe().startswith(f"{PLAIN} is champion: no model's out-of-fold")
    better = champion_choice(_fits(y, {"lightgbm": y + 0.5, PLAIN: y + 1.0}), y, folds=FOLDS, target=c.PEAK_GPU_MEM_GB)
    assert better.champion == "lightgbm"
    assert "planner loss 0.5 GB vs the plain LightGBM's 1 GB: 50% lower" in better.describe()
    # one big job's under-forecast carries the plain LightGBM's loss; a model that got that one job right is ~40% lower
    # but about one standard error of the paired differences: within noise, so it does not compete (the public set's
    # seed 0, docs/models.md: a decision tree 31% lower at 1.7 standard errors was champion and worse on pending jobs)
    err = rng.normal(0, 1.0, 300)
    base, lucky = y + err, y + err + rng.normal(0, 0.05, 300)
    base[0], lucky[0] = y[0] - 20.0, y[0]
    noisy = champion_choice(_fits(y, {"decision_tree": lucky, PLAIN: base}, {"decision_tree": 0.1, PLAIN: 20.0}),
                            y, folds=FOLDS, target=c.PEAK_GPU_MEM_GB)
    assert noisy.means["decision_tree"] < 0.7 * noisy.means[PLAIN] and noisy.lowest == "decision_tree"
    assert noisy.champion == PLAIN and set(noisy.unclear) == {"decision_tree"}
    assert noisy.unclear["decision_tree"].startswith("below it on ") and f"{1 - FLOOR_P:.1%} of" in noisy.describe()
    assert "below it, but not clearly: (a candidate needs" in noisy.describe() and "decision_tree 1." in noisy.describe()
    # the rule in words names each condition, the grouped holdout's together-check too (review 68b S3-1)
    assert "over the out-of-fold and held-out jobs together)" in noisy.describe()
    # a model beyond noise (half the plain LightGBM's error on every row, not one job's luck): it competes and wins
    clear = champion_choice(_fits(y, {"decision_tree": y + 0.5 * err, PLAIN: y + err}, {"decision_tree": 0.1, PLAIN: 20.0}),
                            y, folds=FOLDS, target=c.PEAK_GPU_MEM_GB)
    assert clear.champion == "decision_tree" and not clear.unclear and "resamples of the jobs)" in clear.describe()


def test_a_network_that_validates_best_but_generalises_worse_than_the_best_tree_loses_to_it():
    rng = np.random.default_rng(2)
    y, held_y = rng.uniform(1, 40, 300), rng.uniform(1, 40, 60)
    actual = np.concatenate([y, held_y])
    idx = np.arange(300, 360)
    # the plain LightGBM the worst out of fold and on the holdout, so the network and lightgbm both compete (`_clear`)
    preds = {registry.NN: y + rng.normal(0, 0.5, 300), "lightgbm": y + rng.normal(0, 2.0, 300), PLAIN: y + 4.0}
    held = {"idx": idx, registry.NN: held_y - 8.0, "lightgbm": held_y + 1.0, PLAIN: held_y - 9.0}
    fits = _fits(y, preds, **held)
    choice = champion_choice(fits, actual, folds=FOLDS)
    assert choice.lowest == registry.NN and choice.champion == "lightgbm"
    assert "worse beyond noise: lightgbm is champion" in choice.describe()
    # where the plain LightGBM generalises well, a network worse than it on the holdout does not even compete
    plain_holds = champion_choice(_fits(y, preds, **{**held, PLAIN: held_y + 2.0}), actual, folds=FOLDS)
    assert plain_holds.champion == "lightgbm" and set(plain_holds.unclear) == {registry.NN}
    assert "holdout planner loss 13.86 vs its 2: worse beyond noise" in plain_holds.describe()
    kept = champion_choice(_fits(y, preds, **{**held, registry.NN: held_y + 0.5}), actual, folds=FOLDS)
    assert kept.champion == registry.NN and "not worse, kept" in kept.describe()
    # worse on the holdout within noise (1% above the tree): tied, and the cheaper to score wins
    costs = {registry.NN: 500.0, "lightgbm": 10.0, PLAIN: 5.0}
    near = champion_choice(_fits(y, preds, costs, **{**held, registry.NN: held_y + 1.01}), actual, folds=FOLDS)
    assert near.champion == "lightgbm" and "worse within noise: tied" in near.describe()
    # the tree that takes the tie there was never tied out of fold: the report says the holdout decided, with the
    # tree's cost (review 69 S2-2), not "tied (within 2%, ...)" nor "scoring cost not measured"
    assert near.overruled and near.costs["lightgbm"] == 10.0 and "the cheaper to score wins" in near.describe()
    assert near.describe().startswith(f"{registry.NN} had the lowest") and "not measured" not in near.describe()
    # session 19: under `COST_REACH` the two are equally cheap and the preference order decides, whichever is cheaper:
    # main's rule gave the network at 1 s the tie against lightgbm at 3 s
    costs = {registry.NN: 1.0, "lightgbm": 3.0, PLAIN: 5.0}
    free = champion_choice(_fits(y, preds, costs, **{**held, registry.NN: held_y + 1.01}), actual, folds=FOLDS)
    assert free.champion == "lightgbm" and "as cheap to score" in free.describe()
    # a cost not measured: the preference order alone (main's rule: the model without a cost lost)
    unknown = champion_choice(_fits(y, preds, {registry.NN: 1.0, PLAIN: 5.0}, **{**held, registry.NN: held_y + 1.01}),
                              actual, folds=FOLDS)
    assert unknown.champion == "lightgbm" and "not measured" in unknown.describe()


def test_the_holdout_judges_a_candidate_over_its_held_out_families_not_one_draw_of_them():
    """Issue 50, session 18: the grouped holdout is a few whole families, one draw of which ones. A candidate clearly
    below the plain LightGBM out of fold and better on two of the three held-out families competes (and is champion)
    though the third, where the GB are, makes its holdout loss 19% worse: main's rule vetoed it on that one draw (job
    resamples and a 5% cap). A candidate worse on every held-out family still does not compete. One held-out family is
    one draw: never beyond noise alone."""
    rng = np.random.default_rng(5)
    y, err = rng.uniform(1, 40, 300), rng.normal(0, 3.0, 300)
    held_y = np.concatenate([np.full(20, 2.0), np.full(20, 8.0), np.full(20, 30.0)])  # families A, B, C: small to big
    family = np.array(["x"] * 300 + ["A"] * 20 + ["B"] * 20 + ["C"] * 20)
    actual, idx = np.concatenate([y, held_y]), np.arange(300, 360)
    plain_held = held_y + np.repeat([1.0, 1.5, 3.0], 20)
    wins_two = held_y + np.repeat([0.5, 1.0, 4.0], 20)  # better on A and B, worse on C
    preds = {"extra_trees": y + 0.3 * err, PLAIN: y + err}
    assert planner_loss(held_y, wins_two) > 1.15 * planner_loss(held_y, plain_held)
    on_main = champion_choice(_fits(y, preds, idx=idx, extra_trees=wins_two, **{PLAIN: plain_held}), actual, folds=FOLDS)
    assert on_main.champion == PLAIN and "worse beyond noise" in on_main.unclear["extra_trees"]  # the one draw decided
    grouped = champion_choice(_fits(y, preds, idx=idx, extra_trees=wins_two, **{PLAIN: plain_held}), actual,
                              folds=FOLDS, groups=family)
    assert grouped.champion == "extra_trees" and not grouped.unclear
    loses_all = held_y + np.repeat([1.2, 1.8, 4.0], 20)  # worse on every held-out family
    worse = champion_choice(_fits(y, preds, idx=idx, extra_trees=loses_all, **{PLAIN: plain_held}), actual,
                            folds=FOLDS, groups=family)
    assert worse.champion == PLAIN and "worse beyond noise" in worse.unclear["extra_trees"]
    # better on two held-out families, but so far off on the third (20 GB over on each of its jobs) that over the
    # out-of-fold and held-out jobs together it is above the plain LightGBM: its lead does not pay for it
    far_off = held_y + np.repeat([0.5, 1.0, 20.0], 20)
    off = champion_choice(_fits(y, preds, idx=idx, extra_trees=far_off, **{PLAIN: plain_held}), actual,
                          folds=FOLDS, groups=family)
    assert off.champion == PLAIN and "worse beyond noise" in off.unclear["extra_trees"]  # above the cap (review 68b)
    # `_together` alone: each job once, the out-of-fold jobs by their mean over passes, then the held-out ones
    sq = {"extra_trees": np.array([1.0, 1.0, 4.0]), PLAIN: np.array([4.0, 4.0, 4.0])}
    assert _together(sq, np.array([0, 0, 1]), "extra_trees", np.array([100.0]), np.array([1.0])) == pytest.approx(
        (np.sqrt((1.0 + 4.0 + 100.0) / 3), np.sqrt((4.0 + 4.0 + 1.0) / 3), 3))
    # within 2% of the plain LightGBM's holdout loss: never worse, grouped or not
    d = _weighted_sq(held_y, loses_all) - _weighted_sq(held_y, plain_held)
    base = planner_loss(held_y, plain_held)
    assert not _worse_beyond_noise(d, 1.01 * base, base, groups=family[300:])
    # one held-out family is one draw: up to GROUPED_CAP worse, it is not beyond noise; above it, it is (review 68b)
    assert not _worse_beyond_noise(d[40:], (1 + GROUPED_CAP) * base, base, groups=family[340:])
    assert _worse_beyond_noise(d[40:], (1 + GROUPED_CAP) * 1.01 * base, base, groups=family[340:])
    assert _worse_beyond_noise(d[40:], 2 * base, base)  # job by job (the latest week's unit), the cap still applies
    assert _worse_beyond_noise(d, float("nan"), base, groups=family[300:])  # a NaN forecast's loss is worse
    # better on two held-out families but 4x the plain LightGBM's holdout loss (the third's GB): it does not compete
    # though its out-of-fold lead pays for it over the jobs together (review 68b S2-1)
    four_x = held_y + np.repeat([0.5, 1.0, 12.0], 20)
    assert planner_loss(held_y, four_x) > (1 + GROUPED_CAP) * planner_loss(held_y, plain_held)
    capped = champion_choice(_fits(y, preds, idx=idx, extra_trees=four_x, **{PLAIN: plain_held}), actual,
                             folds=FOLDS, groups=family)
    assert capped.champion == PLAIN and "worse beyond noise" in capped.unclear["extra_trees"]


def test_a_champion_far_worse_than_the_best_tree_on_held_out_groups_loses_to_it():
    """Review 68b S1-1: on a grouped holdout the best tree's check must still remove a champion that generalises far
    worse than it (here the network: better on one of two held-out families, over twice the tree's loss on them),
    and leave one worse within the cap on one family only."""
    rng = np.random.default_rng(7)
    y, err = rng.uniform(1, 40, 300), rng.normal(0, 3.0, 300)
    held_y = np.concatenate([np.full(30, 2.0), np.full(30, 30.0)])
    family = np.array(["x"] * 300 + ["A"] * 30 + ["B"] * 30)
    actual, idx = np.concatenate([y, held_y]), np.arange(300, 360)
    preds = {registry.NN: y + 0.2 * err, "lightgbm": y + 0.3 * err, PLAIN: y + err}
    tree_held, plain_held = held_y + 1.0, held_y + 6.0  # the plain LightGBM far off: the network competes
    far = held_y + np.repeat([0.5, 9.0], 30)  # better on A, far worse on B
    assert planner_loss(held_y, far) > (1 + GROUPED_CAP) * planner_loss(held_y, tree_held)
    out = champion_choice(_fits(y, preds, idx=idx, **{registry.NN: far, "lightgbm": tree_held, PLAIN: plain_held}),
                          actual, folds=FOLDS, groups=family)
    assert out.champion == "lightgbm" and out.overruled, out.describe()
    near = held_y + np.repeat([0.5, 1.6], 30)  # better on A, worse on B, within the cap
    kept = champion_choice(_fits(y, preds, idx=idx, **{registry.NN: near, "lightgbm": tree_held, PLAIN: plain_held}),
                           actual, folds=FOLDS, groups=family)
    # not vetoed: worse within noise, so tied with the tree (which then takes the tie by the preference order, no
    # costs given; the report says the holdout decided: review 69 S2-2)
    assert "worse within noise: tied" in kept.describe() and "beyond noise" not in kept.describe(), kept.describe()


def test_the_holdout_groups_are_the_held_out_families_or_shape_clusters_and_none_for_the_latest_week():
    rows = _history(400, families=10, weeks=None)
    mask, _ = generalisation_holdout(rows, seed=0)
    groups = holdout_groups(rows, 0)
    assert groups is not None and (groups == rows[c.MODEL_TYPE].to_numpy()).all() and len(set(groups[mask])) >= 2
    assert holdout_groups(_history(400, families=10, weeks=4), 0) is None  # the latest week: its jobs are the draws
    assert holdout_groups(_history(400, families=1, weeks=None), 0) is None  # no holdout
    rng = np.random.default_rng(0)
    shapes = _history(300, families=2, weeks=None).with_columns(
        pl.Series(c.PARAMS_MILLION, np.exp(rng.uniform(-3, 5, 300))), pl.Series(c.BATCH_SIZE, rng.integers(2, 1024, 300)),
        pl.Series(c.INPUT_DIM, rng.integers(32, 2048, 300)), pl.Series(c.NUM_LAYERS, rng.integers(2, 30, 300)))
    assert (holdout_groups(shapes, 0) == shape_clusters(shapes, 0)).all()


def _history(n: int, families: int, weeks: float | None) -> pl.DataFrame:
    start = datetime(2026, 1, 1)
    rows = pl.DataFrame({c.JOB_ID: [f"j{i}" for i in range(n)],
                         c.MODEL_TYPE: [f"family{i % families}" for i in range(n)]})
    if weeks is None:
        return rows
    step = weeks * 7 * 86_400 / n
    return rows.with_columns(pl.Series(c.SUBMITTED_AT, [start + timedelta(seconds=i * step) for i in range(n)]))


def test_without_a_later_week_whole_families_are_held_out():
    rows = _history(400, families=10, weeks=None)  # no times: no latest week
    mask, name = generalisation_holdout(rows, seed=0)
    assert name == "holdout" and 0.15 <= mask.mean() <= 0.35
    held = set(rows.filter(pl.Series(mask))[c.MODEL_TYPE])
    assert not held & set(rows.filter(~pl.Series(mask))[c.MODEL_TYPE])  # whole families only
    assert (grouped_holdout(rows, 0) == mask).all() and not (grouped_holdout(rows, 1) == mask).all()  # seeded
    assert not grouped_holdout(_history(400, families=1, weeks=None), 0).any()  # one family: nothing to hold out
    week_mask, week_name = generalisation_holdout(_history(400, families=10, weeks=4), seed=0)
    assert week_name == "backtest" and week_mask[-1] and not week_mask[0]  # a later week: it is the holdout


def test_where_no_family_can_be_held_out_whole_shape_clusters_are():
    """Two families of half the rows each (the public GPUMemNet set): no family fits under the 35% cap, so whole
    shape clusters are held out instead (issue 50 item 1), about a fifth of the rows, seeded; without shape
    columns nothing is."""
    rng = np.random.default_rng(0)
    rows = _history(300, families=2, weeks=None).with_columns(
        pl.Series(c.PARAMS_MILLION, np.exp(rng.uniform(-3, 5, 300))), pl.Series(c.BATCH_SIZE, rng.integers(2, 1024, 300)),
        pl.Series(c.INPUT_DIM, rng.integers(32, 2048, 300)), pl.Series(c.NUM_LAYERS, rng.integers(2, 30, 300)))
    mask, name = generalisation_holdout(rows, seed=0)
    assert name == "holdout" and 0.15 <= mask.mean() <= 0.35
    clusters = shape_clusters(rows, 0)
    assert not set(clusters[mask]) & set(clusters[~mask])  # whole clusters only
    assert set(rows.filter(pl.Series(mask))[c.MODEL_TYPE]) <= {"family0", "family1"}
    assert not (grouped_holdout(rows, 1) == mask).all()  # seeded
    assert not grouped_holdout(_history(300, families=2, weeks=None), 0).any()  # no shape: nothing to hold out


def test_the_scoring_cost_does_not_move_with_what_else_the_machine_runs():
    """The scoring cost is counted from the fitted model, not timed (issue 50, session 21): the same fits timed a
    forest at 4.0-4.2 s per 1M jobs on a quiet machine and 5.77 s at load ~5.7, above the reach, and the night went
    back to the lone tree. A predict slowed (a pause, a busy thread beside it in the process) costs what it costs
    unslowed; a forest of twice the trees costs about twice; a lone tree is cheaper than the forest."""
    import threading
    import time

    from sklearn.ensemble import RandomForestRegressor
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(0)
    X = rng.random((400, 4))
    y = X[:, 0] + 0.1 * rng.random(400)
    forest = RandomForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    quiet = score_cost(forest)

    class Slowed(RandomForestRegressor):
        def predict(self, X):
            time.sleep(0.05)
            return super().predict(X)

    slowed = Slowed(n_estimators=10, random_state=0).fit(X, y)
    stop = threading.Event()
    busy = threading.Thread(target=lambda: [sum(range(1000)) for _ in iter(stop.is_set, True)], daemon=True)
    busy.start()
    try:
        loaded = [score_cost(slowed) for _ in range(3)]
    finally:
        stop.set()
        busy.join()
    assert loaded == [quiet] * 3 and quiet > COST_BASE
    twice = score_cost(RandomForestRegressor(n_estimators=20, random_state=0).fit(X, y))
    assert 1.8 * (quiet - COST_BASE) < twice - COST_BASE < 2.2 * (quiet - COST_BASE)
    assert score_cost(DecisionTreeRegressor(random_state=0).fit(X, y)) < quiet / 3


@pytest.mark.parametrize("name", ["extra_trees", "random_forest", "decision_tree", "adaboost", "lightgbm",
                                  "lightgbm_plain", "xgboost", "catboost", "linear_fs"])
def test_every_tree_and_linear_model_has_a_counted_scoring_cost(name):
    """Each registry model's fitted estimator is counted (`predict_work`), so no model's cost is unknown (an unknown
    cost makes every tied model equally cheap); the boosted trees count only the trees their predict uses (the best
    round's, after early stopping), so a model that stopped early costs less than its cap of trees would."""

    rng = np.random.default_rng(1)
    X = rng.random((300, 4))
    y = np.exp(X[:, 0] + 0.1 * rng.random(300))
    est = registry.build(name, registry.Build(seed=0, threads=1)).fit(X, y)
    kind, units = predict_work(est)
    assert kind is not None and units > 0
    cost = score_cost(est)
    assert cost == round(COST_BASE + COST_PER_UNIT[kind] * units, 3) and cost > COST_BASE
    inner = getattr(est, "regressor_", est)
    if name == "xgboost":  # stopped early: the dump holds rounds after the best one, which predict does not use
        dumped = inner.get_booster().get_dump(with_stats=True, dump_format="json")
        assert inner.best_iteration + 1 < len(dumped)
        assert units < sum(_nested_depth(json.loads(t), "children", None, "cover") for t in dumped)
    if name == "lightgbm":  # stopped early: its dump is the best round's trees, and those are what is counted
        assert 0 < inner.best_iteration_ == len(inner.booster_.dump_model()["tree_info"]) < inner.n_estimators


def test_the_networks_counted_cost_leaves_out_its_lookup_tables():
    """An embedding table is a lookup, one row a job: the network's count is the weights a job multiplies through, the
    same whether the history holds 3 categories or 300 (review 71 S2-2)."""
    from gpucast.tasks.learn.models.transformer_bigru import TransformerBiGRURegressor

    rng = np.random.default_rng(0)

    def fitted(categories: int):
        X = rng.random((64, 3))
        X[:, 0] = rng.integers(0, categories, 64)
        return TransformerBiGRURegressor("tiny", epochs=1, seed=0, categorical=(0,),
                                         cardinalities=(categories,)).fit(X, np.exp(X[:, 1]))

    few, many = fitted(3), fitted(300)
    assert predict_work(few)[0] == "network" and predict_work(few) == predict_work(many)
    assert score_cost(few) == score_cost(many) > COST_BASE
    assert predict_work(few)[1] < sum(p.numel() for p in few.model_.parameters())


def test_too_few_labelled_jobs_for_the_folds_get_the_plain_lightgbm_alone(tmp_path):
    from gpucast.tasks.learn.options import TrainOptions
    from gpucast.tasks.simulate import SimConfig, simulate_jobs
    from tests.train_steps import train_target

    jobs = simulate_jobs(60, np.random.default_rng(5), SimConfig().start, 0.0)
    res = train_target(jobs, c.RUNTIME_HOURS, TrainOptions(models=("linear_fs",), repeats=1, min_labelled=200),
                       tmp_path, threads=1)
    assert res.champion == PLAIN and res.metrics == []  # nothing compared
    assert "fewer than the minimum 200" in res.choice_reason and "plain LightGBM (lightgbm_plain) alone" in res.choice_reason
    assert (tmp_path / f"{PLAIN}.txt").exists()


def test_with_heavy_tailed_errors_a_model_15_percent_worse_is_not_tied_and_one_1_percent_worse_is():
    """Per-row errors in GB are heavy-tailed (a few big jobs carry most of the squared error): the standard error of
    the paired differences is then so wide that the noise alone ties a clearly worse model with the best, which then wins
    on scoring cost. `TIE_CAP` stops that; `TIE_FLOOR` still ties a model 1% worse."""
    rng = np.random.default_rng(3)
    n = 420
    y = rng.uniform(1, 40, n)
    best_err, other_err = rng.standard_t(2.5, n), rng.standard_t(2.5, n)  # independent heavy tails

    def scaled(err: np.ndarray, ratio: float) -> np.ndarray:  # forecasts whose planner loss is `ratio` x the best's
        return y + err * ratio * planner_loss(y, y + best_err) / planner_loss(y, y + err)

    worse, near = scaled(other_err, 1.15), scaled(other_err, 1.01)
    d = _weighted_sq(y, worse) - _weighted_sq(y, y + best_err)
    assert _below(-d) < 1 - FLOOR_P  # the resamples alone would tie the worse model (not worse on 97.5% of them)
    costs = {"extra_trees": 8.0, "decision_tree": 0.05, PLAIN: 20.0}  # 8 s per 1M jobs: above `COST_FREE`
    choice = champion_choice(_fits(y, {"extra_trees": y + best_err, "decision_tree": worse, PLAIN: y + 3 * other_err}),
                             y, folds=FOLDS)
    assert choice.means["decision_tree"] == pytest.approx(1.15 * choice.means["extra_trees"])
    assert choice.tied == ("extra_trees",) and choice.champion == "extra_trees"
    costed = champion_choice(_fits(y, {"extra_trees": y + best_err, "decision_tree": worse, PLAIN: y + 3 * other_err},
                                   costs), y, folds=FOLDS)
    assert costed.champion == "extra_trees" and "decision_tree" not in costed.tied  # cheap, but clearly less accurate
    tied = champion_choice(_fits(y, {"extra_trees": y + best_err, "decision_tree": near, PLAIN: y + 3 * other_err},
                                 costs), y, folds=FOLDS)
    assert set(tied.tied) == {"extra_trees", "decision_tree"} and tied.champion == "decision_tree"  # 1%: the cheaper
    assert "tied (within 2%, or within 5% and noise) with extra_trees" in tied.describe()  # a margin, not noise alone


def test_the_holdout_counts_a_job_once_however_many_fits_forecast_it():
    """Review 57 S3: every fit forecasts the whole generalisation holdout (here 3 folds: 3 copies of each job), and the
    copies are one job's, not three draws. On the holdout lightgbm is 3.9% above the plain LightGBM (between
    `TIE_FLOOR` and `TIE_CAP`): worse beyond noise if its 180 copies counted (the pre-session-8 rule), within noise
    per job (60 jobs), so it competes and, clearly below the plain LightGBM out of fold, is champion."""
    rng = np.random.default_rng(1)
    y = rng.uniform(1, 40, 300)
    err = rng.normal(0, 1.0, 300)
    held = np.random.default_rng(123)
    held_y = held.uniform(1, 40, 60)
    e = held.normal(0, 2.0, 60)
    base, cand = held_y + e, held_y + e + held.normal(0.15, 0.6, 60)
    actual, idx = np.concatenate([y, held_y]), np.arange(300, 360)
    d = _weighted_sq(held_y, cand) - _weighted_sq(held_y, base)
    loss, base_loss = planner_loss(held_y, cand), planner_loss(held_y, base)
    assert 1.02 < loss / base_loss < 1 + TIE_CAP
    copies = np.repeat(d, FOLDS)
    assert _worse_beyond_noise(copies, loss, base_loss) and not _worse_beyond_noise(d, loss, base_loss)
    assert _worse_beyond_noise(copies, loss, base_loss, np.repeat(np.arange(60), FOLDS)) is False  # copies averaged
    choice = champion_choice(_fits(y, {"lightgbm": y + 0.5 * err, PLAIN: y + err}, idx=idx, lightgbm=cand, **{PLAIN: base}),
                             actual, folds=FOLDS, target=c.PEAK_GPU_MEM_GB)
    assert choice.champion == "lightgbm" and not choice.unclear
    assert choice.backtest["lightgbm"] == pytest.approx(loss)  # the holdout loss itself is unchanged by the averaging


def test_a_lone_tree_does_not_win_a_tie_on_a_saving_the_score_command_cannot_see():
    """Issue 50, session 19: among tied models the cheapest to score wins, and a lone decision tree (~0.05 s per 1M
    jobs) always was, though its variance on unseen jobs is what the nights' worst misses were (docs/models.md). Costs
    under `COST_FREE` are equal: a LightGBM 1% more accurate at 0.6 s per 1M jobs wins; at 5 s the tree still does."""
    rng = np.random.default_rng(4)
    y = rng.uniform(1, 40, 300)
    err = rng.normal(0, 1.0, 300)
    preds = {"lightgbm": y + err, "decision_tree": y + 1.01 * err, PLAIN: y + 4 * rng.normal(0, 1.0, 300)}
    free = champion_choice(_fits(y, preds, {"lightgbm": 0.6, "decision_tree": 0.05, PLAIN: 0.3}), y, folds=FOLDS)
    assert set(free.tied) == {"lightgbm", "decision_tree"}  # tied within `TIE_FLOOR`
    assert free.champion == "lightgbm"  # main's rule: decision_tree, 12x cheaper
    dear = champion_choice(_fits(y, preds, {"lightgbm": 5.0, "decision_tree": 0.05, PLAIN: 0.3}), y, folds=FOLDS)
    assert dear.champion == "decision_tree"  # a saving above the floor still decides
    assert 0.6 < COST_FREE < 5.0 / (1 + COST_NOISE)
    # the case that landed (measured set, training seed 1, split 1): a random forest LESS accurate than the tree, timed
    # at 4.0-4.2 s, inside `COST_REACH`: the preference order, not the loss, gives it the tie (review 69 S2-3)
    forest = {"decision_tree": y + err, "random_forest": y + 1.01 * err, PLAIN: preds[PLAIN]}
    order = champion_choice(_fits(y, forest, {"decision_tree": 0.05, "random_forest": 4.2, PLAIN: 0.3}), y, folds=FOLDS)
    assert order.lowest == "decision_tree" and order.champion == "random_forest", order.describe()
    assert "as cheap to score as the cheapest of the tied" in order.describe()
    assert "first in the preference order" in order.describe() and COST_REACH == pytest.approx(4.25)
    beyond = champion_choice(_fits(y, forest, {"decision_tree": 0.05, "random_forest": 4.4, PLAIN: 0.3}), y, folds=FOLDS)
    assert beyond.champion == "decision_tree" and "cheapest to score of the tied" in beyond.describe()


def test_a_blend_tied_with_a_lone_tree_under_the_cost_floor_wins_it_out_of_fold_and_on_the_holdout():
    """Issue 50, session 20: the blend (non-negative stacking of the best trees and the network) has its place in
    `registry.PREFERENCE`, ahead of the lone tree. The measured set's training seed 0, split 2: a decision tree (0.17 s
    per 1M jobs) tied with the blend alone (2.45 s, 0.5% more accurate), both under `COST_REACH`, and worse than the
    tree on the holdout within noise; main's order (the blend after all of it) gave the tree both ties (MLP 18.7%)."""
    rng = np.random.default_rng(5)
    y, held_y = rng.uniform(1, 40, 300), rng.uniform(1, 40, 60)
    actual, idx = np.concatenate([y, held_y]), np.arange(300, 360)
    err, held_err = rng.normal(0, 1.0, 300), rng.normal(0, 1.0, 60)
    preds = {"decision_tree": y + 1.005 * err, PLAIN: y + 4 * rng.normal(0, 1.0, 300)}
    held = {"idx": idx, "decision_tree": held_y + held_err, PLAIN: held_y + 4.0}
    oof = {(0, i): float(v) for i, v in enumerate(y + err)}
    mixed = {(r, 300 + j): float(v) for r in range(FOLDS) for j, v in enumerate(held_y + 1.01 * held_err)}
    costs = {"decision_tree": 0.17, PLAIN: 0.3}

    def choose(blend_cost: float):
        return champion_choice(_fits(y, preds, costs, **held), actual, folds=FOLDS, extra={blend.NAME: oof},
                               costs={blend.NAME: blend_cost}, extra_holdout={blend.NAME: mixed})

    free = choose(2.45)
    assert set(free.tied) == {blend.NAME, "decision_tree"} and free.best == blend.NAME  # tied within `TIE_FLOOR`
    assert free.champion == blend.NAME, free.describe()  # main's order: decision_tree
    assert "worse within noise: tied, as cheap to score" in free.describe()  # the holdout's pair: the order again
    assert registry.PREFERENCE.index(blend.NAME) < registry.PREFERENCE.index("decision_tree")
    dear = choose(45.0)  # training seed 1, split 0: a blend dearer than the reach loses the tie to the cheaper tree
    assert dear.champion == "decision_tree" and "cheapest to score of the tied" in dear.describe()
    # training seed 1, split 1: a random forest tied with the blend (the tree and that forest: 4.19 s) goes first, the
    # blend then carrying the lone tree's variance (R² 0.935 where the forest got 0.971)
    forest = champion_choice(_fits(y, {**preds, "random_forest": y + 1.01 * err}, {**costs, "random_forest": 4.0},
                                   **held, random_forest=held_y + held_err), actual, folds=FOLDS,
                             extra={blend.NAME: oof}, costs={blend.NAME: 4.17}, extra_holdout={blend.NAME: mixed})
    assert forest.best == blend.NAME and forest.champion == "random_forest", forest.describe()


def test_a_model_over_the_scoring_budget_at_the_sites_queue_does_not_compete_and_the_reason_says_its_cost():
    """Issue 52 item 5, session 23: the demo's network blend (230 CPU-s per 1M jobs) won outright and scored 1M
    pending jobs at 154k a minute. A model whose counted cost for the pending queue is above the budget does not
    compete; the same model at a small queue does; the plain LightGBM competes whatever it costs."""
    rng = np.random.default_rng(23)
    y = rng.uniform(1, 40, 300)
    err = rng.normal(0, 1.0, 300)
    preds = {registry.NN: y + 0.3 * err, "extra_trees": y + 0.6 * err, PLAIN: y + err}
    costs = {registry.NN: 230.0, "extra_trees": 2.0, PLAIN: 8.0}
    fits = _fits(y, preds, costs)
    site = champion_choice(fits, y, folds=FOLDS, target=c.PEAK_GPU_MEM_GB, budget=ScoreBudget(10.0, 1_000_000))
    assert site.lowest == registry.NN and site.champion == "extra_trees"  # the most accurate, left out by its cost
    assert site.over_budget == {registry.NN: pytest.approx(230.0)} and registry.NN not in site.competing
    assert ("over the scoring budget (10 CPU-s a target for the 1,000,000 pending jobs (GPUCAST_SCORE_BUDGET_S)), "
            f"so not competing: {registry.NN} 230 s") in site.describe()
    assert "of the models that beat the plain LightGBM clearly within the scoring budget" in site.describe()
    for small in (ScoreBudget(10.0, 40), None):  # a few dozen jobs: 0.0092 CPU-s; no budget: every model competes
        choice = champion_choice(fits, y, folds=FOLDS, target=c.PEAK_GPU_MEM_GB, budget=small)
        assert choice.champion == registry.NN and not choice.over_budget and "scoring budget" not in choice.describe()
    assert ScoreBudget(10.0, 43_478).fits(230.0) and not ScoreBudget(10.0, 43_479).fits(230.0)  # 10 s / 230 s per 1M
    assert ScoreBudget.of(0, 1_000_000) is None and ScoreBudget.of(10.0, None) is None  # 0: no budget; queue unknown
    # every candidate over it: the plain LightGBM (over it too) is champion, and says the budget left the others out
    dear = champion_choice(fits, y, folds=FOLDS, target=c.PEAK_GPU_MEM_GB, budget=ScoreBudget(1.0, 1_000_000))
    assert dear.champion == PLAIN and set(dear.over_budget) == {registry.NN, "extra_trees"}
    assert dear.describe().startswith(f"{PLAIN} is champion: no model within the scoring budget has an out-of-fold")
    assert dear.describe().endswith("; the champion is over the scoring budget itself (8 s): the plain LightGBM "
                                    "competes whatever it costs")
    assert "over the scoring budget itself" not in site.describe()  # extra_trees' 2 s is within 10
    # a model whose cost is not known is not judged by it
    unknown = champion_choice(_fits(y, preds, {"extra_trees": 2.0, PLAIN: 8.0}), y, folds=FOLDS,
                              budget=ScoreBudget(10.0, 1_000_000))
    assert unknown.champion == registry.NN and not unknown.over_budget


def test_without_the_plain_lightgbm_and_every_model_over_the_scoring_budget_the_cheapest_competes():
    rng = np.random.default_rng(24)
    y = rng.uniform(1, 40, 300)
    err = rng.normal(0, 1.0, 300)
    fits = _fits(y, {"lightgbm": y + 0.5 * err, "linear_fs": y + err}, {"lightgbm": 12.0, "linear_fs": 1.2})
    choice = champion_choice(fits, y, folds=FOLDS, budget=ScoreBudget(1e-9, 500))
    assert choice.champion == "linear_fs" and set(choice.over_budget) == {"lightgbm"}  # always a champion
    words = choice.describe()
    assert words.startswith("lowest out-of-fold planner loss (300 rows) of the models the scoring budget lets compete "
                            "(linear_fs)") and "beat the plain LightGBM" not in words
    assert words.endswith("the champion is over the scoring budget itself (0.0006 s): every model is over it and no "
                          "plain LightGBM was fitted: the cheapest competes")
