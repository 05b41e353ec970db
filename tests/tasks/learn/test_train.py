"""Evaluation: metrics by hand, the folds every model shares, the holdout no fit reads, too few labels.
(The champion rule on constructed forecasts: test_champion_choice.py.)"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.runners import cores_here
from gpucast.tasks.learn import blend
from gpucast.tasks.learn.champion import metrics
from gpucast.tasks.learn.folds import generalisation_holdout, split
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.train import labelled
from gpucast.tasks.simulate import SimConfig, simulate_jobs
from tests.train_steps import train_target

THREADS = cores_here()  # OMP_NUM_THREADS where set (a test worker's share of the cores), else every core


def test_metrics_match_hand_computation():
    m = metrics(np.array([1.0, 2.0, 4.0]), np.array([2.0, 2.0, 3.0]))
    # errors 1, 0, -1: MSE 2/3, MAE 2/3, MAPE (1/1 + 0 + 1/4)/3 = 41.67%, R² = 1 - 2 / (14/3)
    assert m["mse"] == pytest.approx(2 / 3)
    assert m["rmse"] == pytest.approx((2 / 3) ** 0.5)
    assert m["mae"] == pytest.approx(2 / 3)
    assert m["mape"] == pytest.approx(125 / 3)
    assert m["r2"] == pytest.approx(1 - 2 / (14 / 3))
    # the planner loss: the under-forecast (4 -> 3) weighs 3x: sqrt((1 + 0 + 3) / 3)
    assert m["planner_loss"] == pytest.approx((4 / 3) ** 0.5)


def test_split_is_70_30_with_validation_inside_train():
    fit, val, test = split(1000, seed=1)
    assert len(test) == 300 and len(val) == 140 and len(fit) == 560
    assert len(set(fit) | set(val) | set(test)) == 1000


@pytest.fixture(scope="module")
def jobs():
    return simulate_jobs(1200, np.random.default_rng(5), SimConfig().start, 0.0)


MODELS = ("decision_tree", "linear_fs", "lightgbm")


def options(**kw) -> TrainOptions:
    return TrainOptions(**{"models": MODELS, "repeats": 1, "min_labelled": 10, **kw})


def test_no_fit_reads_the_generalisation_holdout(tmp_path, jobs):
    target = c.PEAK_GPU_MEM_GB
    a = train_target(jobs, target, options(), tmp_path / "a", threads=THREADS)
    # wreck the labels of every holdout row: the out-of-fold metrics must not change, the holdout's must
    rows = labelled(jobs, target, options())
    held, name = generalisation_holdout(rows, 0)
    assert held.any()
    wrecked_ids = rows.filter(pl.Series(held))[c.JOB_ID].to_list()
    wrecked = jobs.with_columns(pl.when(pl.col(c.JOB_ID).is_in(wrecked_ids)).then(pl.col(target) * 1000)
                                .otherwise(pl.col(target)).alias(target))
    b = train_target(wrecked, target, options(), tmp_path / "b", threads=THREADS)
    oof = lambda res: [m.rmse for m in res.metrics if m.split == "test"]  # noqa: E731
    assert oof(a) == pytest.approx(oof(b))
    held_a = [m.rmse for m in a.metrics if m.split == name]
    held_b = [m.rmse for m in b.metrics if m.split == name]
    assert held_a != pytest.approx(held_b)  # the wrecking did reach the holdout rows


def test_results_registry_and_summary(tmp_path, jobs):
    folder = tmp_path / c.GPU_DEMAND_GFLOPS
    res = train_target(jobs, c.GPU_DEMAND_GFLOPS, options(repeats=2), folder, threads=THREADS)
    # the champion alone is kept, refitted, with its encoder, metadata and every model's test predictions
    model_files = {"decision_tree": "decision_tree.skops", "linear_fs": "linear_fs.skops", "lightgbm": "lightgbm.txt"}
    assert {p.name for p in folder.iterdir()} == {"encoder.json", "metadata.json", "test_predictions.parquet",
                                                   model_files[res.champion]}
    labelled = res.rows
    assert res.refit.rows + res.refit.calibration_rows == labelled
    assert res.refit.calibration_rows == round(labelled * 0.15)
    # every model x repeat has its held-out fold's rows (validation and test: the same fold) and the holdout's
    folds = [(m.model, m.repeat, m.split) for m in res.metrics if m.split in ("validation", "test")]
    blended = [(blend.NAME, 0, s) for s in ("validation", "test")]  # the blend's cross-fitted forecasts, per pass
    assert sorted(folds) == sorted([*((m, r, s) for m in MODELS for r in (0, 1) for s in ("validation", "test")), *blended])
    assert {m.split for m in res.metrics} - {"validation", "test"} in ({"backtest"}, {"holdout"})
    assert res.test_predictions.columns == ["actual", *MODELS]
    assert all(m.planner_loss > 0 for m in res.metrics)
    assert {m.epochs for m in res.metrics} == {None}  # only the network counts epochs


def test_target_without_enough_labels_gets_the_plain_lightgbm_alone(tmp_path, jobs):
    # issue 50: too few labelled jobs for the comparison: the plain baseline alone, with or without the priors
    for features in ("contract", "residual"):
        res = train_target(jobs.head(50), c.RUNTIME_HOURS, options(min_labelled=200, features=features),
                           tmp_path / features, threads=THREADS)
        assert res.champion == registry.PLAIN and "fewer than the minimum 200" in res.skipped
        assert res.metrics == []  # nothing was compared
        assert res.refit.rows + res.refit.calibration_rows == res.rows and res.refit.calibration_rows >= 1


def test_with_the_priors_a_single_labelled_job_is_scored_by_the_prior(tmp_path, jobs):
    one = jobs.filter(pl.col(c.STATUS) == "COMPLETED").head(1)
    res = train_target(one, c.RUNTIME_HOURS, options(min_labelled=200, features="residual"), tmp_path, threads=THREADS)
    assert res.champion == "prior" and res.skipped.endswith("the analytic prior scores it")
    # the prior learns nothing, so every labelled job calibrates its intervals
    assert res.calibration["prior"]["n"] == res.rows == 1 and res.refit.rows == 0


def test_a_target_no_job_has_measured_is_skipped_even_with_a_prior(tmp_path, jobs):
    unmeasured = jobs.head(50).with_columns(pl.lit(None, dtype=pl.Float64).alias(c.RUNTIME_HOURS))
    res = train_target(unmeasured, c.RUNTIME_HOURS, options(features="residual"), tmp_path, threads=THREADS)
    # no labelled job: nothing to calibrate the prior's intervals on, so no champion (and no crash)
    assert res.champion is None and res.rows == 0 and res.skipped.startswith("0 labelled COMPLETED jobs")


def test_every_registry_model_and_the_blend_have_a_place_in_the_preference_the_network_last():
    from gpucast.tasks.learn import blend
    from gpucast.tasks.learn.models import registry

    assert sorted(registry.PREFERENCE) == sorted((*registry.MODEL_NAMES, blend.NAME))
    assert registry.PREFERENCE[-1] == registry.NN


def test_the_same_data_chooses_the_same_champion_and_the_metadata_says_why(tmp_path, jobs):
    import json

    from gpucast.tasks.learn.champion import CHAMPION_RULE

    opts = options(repeats=3, models=("decision_tree", "linear_fs", registry.PLAIN))
    runs = [train_target(jobs, c.PEAK_GPU_MEM_GB, opts, tmp_path / str(n), threads=THREADS) for n in (1, 2)]
    assert runs[0].champion == runs[1].champion  # the same data and seed, twice
    assert [m.rmse for m in runs[0].metrics] == [m.rmse for m in runs[1].metrics]
    saved = json.loads((tmp_path / "1" / "metadata.json").read_text())
    assert saved["champion_metric"] == CHAMPION_RULE and saved["most_accurate"] == runs[0].most_accurate
    assert saved["champion_tied"] == list(runs[0].champion_tied)
    assert "plain LightGBM" in saved["choice_reason"] or saved["champion"] == registry.PLAIN


def test_fits_are_ordered_fast_baselines_first_the_last_champion_next_the_network_last():
    from gpucast.tasks.learn.train import order_fits

    opts = TrainOptions(models=("transformer_bigru", "extra_trees", "lightgbm", "linear_fs", "catboost"), repeats=2,
                        targets=("runtime_hours", "peak_gpu_mem_gb"))
    fits = order_fits(opts, previous={"peak_gpu_mem_gb": "catboost"})
    assert len(fits) == 5 * 2 * 2 and len(set(fits)) == len(fits)
    names = [(f.target, f.model, f.repeat) for f in fits]
    assert names[:4] == [("runtime_hours", "linear_fs", 0), ("peak_gpu_mem_gb", "linear_fs", 0),
                         ("runtime_hours", "linear_fs", 1), ("peak_gpu_mem_gb", "linear_fs", 1)]
    assert names[4:6] == [("peak_gpu_mem_gb", "catboost", 0), ("peak_gpu_mem_gb", "catboost", 1)]  # last night's champion
    assert [m for _, m, _ in names[-4:]] == ["transformer_bigru"] * 4
    middle = names[6:-4]  # the other ensembles: repeat 1 of all before repeat 2, quickest model first
    assert [r for _, _, r in middle] == sorted(r for _, _, r in middle)
    assert middle[0] == ("runtime_hours", "lightgbm", 0)


def test_the_plain_lightgbm_fits_with_the_fast_baselines_so_a_budget_cut_never_drops_it():
    from gpucast.tasks.learn.train import order_fits

    opts = TrainOptions(repeats=2, targets=("runtime_hours",))  # the default model list: the plain baseline in it
    assert registry.PLAIN in opts.model_names
    models = [f.model for f in order_fits(opts, previous={"runtime_hours": "catboost"})]
    assert models.index("catboost") > max(i for i, m in enumerate(models) if m == registry.PLAIN)


def test_a_fit_past_the_night_budget_is_skipped_not_run(jobs):
    import time

    from gpucast.records.outcomes import FitResult, FitSkipped
    from gpucast.tasks.learn.train import fit_one, labelled

    rows = labelled(jobs, "runtime_hours", options())
    out = fit_one(rows, "runtime_hours", options(), "lightgbm", 0, threads=THREADS, budget_ends_at=time.time() - 1)
    assert out == FitSkipped("runtime_hours", "lightgbm", 0, "the night budget ran out before it started", failed=False)
    done = fit_one(rows, "runtime_hours", options(), "lightgbm", 0, threads=THREADS, budget_ends_at=time.time() + 600)
    assert isinstance(done, FitResult)
    assert {"validation", "test"} <= {m.split for m in done.metrics} and len(done.test_pred) == len(done.test_idx) > 0


def test_a_backfills_fits_learn_only_from_the_jobs_completed_by_its_night(jobs):
    """Review 63 / session 14's item 3: a backfill of night T (`until`) fits on the jobs whose completion (`updated_at`)
    is at or before T, what that night knew; a live night (None) on every one. The warehouse's column is zoned
    'Etc/UTC' and the night a Python UTC time: compared as instants."""
    from datetime import UTC, datetime

    ends = jobs[c.UPDATED_AT].dt.replace_time_zone("Etc/UTC") if jobs[c.UPDATED_AT].dtype.time_zone is None \
        else jobs[c.UPDATED_AT].dt.convert_time_zone("Etc/UTC")
    history = jobs.with_columns(ends.alias(c.UPDATED_AT))
    night = ends.sort()[ends.len() // 2].replace(tzinfo=None).replace(tzinfo=UTC)
    assert isinstance(night, datetime)
    every = labelled(history, c.PEAK_GPU_MEM_GB, TrainOptions())
    bounded = labelled(history, c.PEAK_GPU_MEM_GB, TrainOptions(), until=night)
    known = history.filter(pl.col(c.UPDATED_AT).dt.convert_time_zone("UTC") <= night)["job_id"]
    assert 0 < bounded.height < every.height
    assert set(bounded["job_id"]) == set(every["job_id"]) & set(known)


def test_a_backfill_bounds_jobs_without_a_completion_time_by_their_submission_and_run_time(jobs):
    """Review 65a S2-2: `updated_at` is optional in the contract; a job without one ended at submission + run time
    (its end as late as it can be: the queue wait is not logged), and one with neither time is kept, as a live night
    keeps it (before: every job without `updated_at` was dropped from a backfill's fits)."""
    from datetime import UTC, timedelta

    history = jobs.with_columns(pl.lit(None, pl.Datetime("us", "UTC")).alias(c.UPDATED_AT))
    submitted = history[c.SUBMITTED_AT]
    night = (submitted.sort()[submitted.len() // 2]).replace(tzinfo=UTC) + timedelta(days=1)
    every = labelled(history, c.PEAK_GPU_MEM_GB, TrainOptions())
    bounded = labelled(history, c.PEAK_GPU_MEM_GB, TrainOptions(), until=night)
    assert 0 < bounded.height < every.height
    finished = bounded.select(pl.col(c.SUBMITTED_AT).dt.replace_time_zone(None)
                              + pl.duration(seconds=pl.col(c.RUNTIME_HOURS) * 3600.0)).to_series()
    assert (finished <= night.replace(tzinfo=None)).all()
    unknown = history.with_columns(pl.lit(None, pl.Datetime("us", "UTC")).alias(c.SUBMITTED_AT))
    assert labelled(unknown, c.PEAK_GPU_MEM_GB, TrainOptions(), until=night).height == every.height
    # review 65b S2-1: no end and no run time either: its submission bounds it (it ended after it), never kept blind
    no_runtime = history.with_columns(pl.lit(None, pl.Float64).alias(c.RUNTIME_HOURS))
    middle = submitted.sort()[submitted.len() // 2].replace(tzinfo=UTC)
    kept = labelled(no_runtime, c.PEAK_GPU_MEM_GB, TrainOptions(), until=middle)
    assert 0 < kept.height < every.height
    assert (kept[c.SUBMITTED_AT].dt.replace_time_zone(None) <= middle.replace(tzinfo=None)).all()


def test_a_network_priced_out_is_fitted_once_for_the_record_and_does_not_compete(jobs):
    """A model priced out of the scoring budget (`fanout.priced_out_fits`) is fitted on its first repeat only: its
    figures are recorded, its other repeats are `skipped_fits`, and where tonight's count is over the budget too it
    neither competes nor joins the blend; the reason says so (session 24, review 74)."""
    from gpucast.tasks.learn import fanout
    from gpucast.tasks.learn.train import finish_target, fit_one, labelled, order_fits

    opts = options(models=("lightgbm_plain", "decision_tree", registry.NN), repeats=2, preset="tiny", epochs=2,
                   score_budget_s=1e-6, pending_jobs=1_000_000)
    target = c.RUNTIME_HOURS
    priced = fanout.priced_out(opts, {target: {registry.NN: 168.0}})
    fits = fanout.runnable_fits(opts, {}, {t: jobs for t in opts.targets}, priced)
    rows = labelled(jobs, target, opts)
    outcomes = [fit_one(rows, target, opts, f.model, f.repeat, threads=THREADS) for f in fits if f.target == target]
    outcomes += fanout.priced_out_fits(opts, priced)[target]
    assert [(f.model, f.repeat) for f in fits if f.target == target and f.model == registry.NN] == [(registry.NN, 0)]
    assert len(fits) == len(order_fits(opts)) - 1
    result = finish_target(rows, target, opts, outcomes, threads=THREADS).result
    assert {(m.model, m.repeat) for m in result.metrics if m.model == registry.NN} == {(registry.NN, 0)}
    assert [(f.model, f.repeat, f.priced_out) for f in result.skipped_fits] == [(registry.NN, 1, True)]
    assert result.champion == registry.PLAIN and result.most_accurate != registry.NN
    assert "fits not run tonight, over the scoring budget at their last counted cost (table skipped_fits), each " \
           f"fitted once: {registry.NN} (not competing: over it at tonight's count too)" in result.choice_reason
    assert registry.NN not in result.choice_reason.split("; fits not run tonight")[0]  # not among the compared
    # tonight's count within the budget (no budget to speak of): its one fit competes
    roomy = opts.model_copy(update={"score_budget_s": 1e9})
    again = finish_target(rows, target, roomy, outcomes, threads=THREADS).result
    assert f"{registry.NN} (within it at tonight's count: competing)" in again.choice_reason
