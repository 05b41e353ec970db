"""Train every registry model on one target, evaluate them honestly, pick a champion: the protocol.

Per target (issue 50: repeated K-fold, chosen on the loss planners pay; which rows: `tasks/learn/folds.py`):
1. the **generalisation holdout** is set aside, never fitted nor in the folds (`generalisation_holdout`): the
   latest week's jobs when the history has one (`backtest_mask`), else whole model families, ~20% of the rows,
   seeded (`grouped_holdout`);
2. the other labelled rows (`labelled`) are dealt into `FOLDS` folds; repeat r is pass r // `FOLDS`, fold r %
   `FOLDS` of a permutation seeded by (seed + pass) (`fold_split`): the fit trains on the other folds and forecasts
   its held-out fold (out of fold) and the holdout (`fit_one`); every model of a repeat sees the same rows;
3. the champion is chosen on the pooled out-of-fold forecasts every model shares (`tasks/learn/champion.py`
   `champion_choice`: the planner loss, ties within noise, scoring cost, the holdout, never worse than the plain
   LightGBM), or the blend of the best models is (`tasks/learn/blend.py`); then it is refitted on every labelled
   job but a calibration slice, on which its intervals are calibrated (`finish_target`), and saved
   (`save_champion`).
The `train-models` flow (flows/train.py) runs these steps; what a run does is `tasks/learn/options.py`'s
`TrainOptions`. `folds.split` (a seeded 70/30 holdout with 20% validation) is the protocol before issue 50, which the
benchmarks still use for their own comparisons.
"""

from __future__ import annotations

import logging
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records.outcomes import FitOutcome, FitResult, FitSkipped, MetricRow, Refit, TargetResult
from gpucast.tasks.learn import blend, features, intervals, ood, priors, reference, unfitted
from gpucast.tasks.learn.champion import (
    CHAMPION_RULE,
    ScoreBudget,
    _mean_costs,
    champion_choice,
    metrics,
    pool_holdout,
    pool_out_of_fold,
    score_cost,
)
from gpucast.tasks.learn.evidence import held_out_evidence, llm_evidence
from gpucast.tasks.learn.features import FEATURE_SETS, FeatureEncoder, labelled_rows
from gpucast.tasks.learn.folds import FOLDS, MIN_ROWS_PER_FOLD, fold_split, generalisation_holdout, holdout_groups
from gpucast.tasks.learn.history import featureless
from gpucast.tasks.learn.models import compiled, registry, store
from gpucast.tasks.learn.options import TrainOptions

log = logging.getLogger(__name__)
# Compiling a 600-tree champion took ~1 minute here and saves ~12 s per million jobs scored
# (tasks/learn/models/compiled.py): below this many pending jobs it does not pay.
COMPILE_MIN_PENDING = 200_000
# The zoo's reference set (issue 37 item 3; docs/models.md "Learning from the zoo"): the shipped file (the share of
# its rows that trains by default: `options.DEFAULT_REFERENCE_WEIGHT`).
REFERENCE_SET = Path(__file__).with_name("reference_archs.csv")  # package data: in the wheel


def compile_trees_for(pending_jobs: int) -> bool:
    """Whether tree champions are compiled for scoring when the options leave it open: when the pending
    queue is large enough for the minute of compiling to pay (`COMPILE_MIN_PENDING`)."""
    return pending_jobs >= COMPILE_MIN_PENDING


# The champion is refitted on every labelled job but this share, on which its intervals are then
# calibrated: split-conformal intervals stay valid for the refitted model only if it never saw the
# calibration rows (CV+ would refit on everything but must keep K fold models to score with: K times
# the scoring work of a night). docs/models.md measures what the refit gains.
CALIBRATION_FRACTION = 0.15
# A target with too few labelled jobs for the folds gets the plain LightGBM alone from this many (one to refit on,
# one to calibrate on); with fewer, the analytic prior where the feature set has it.
PLAIN_ALONE_MIN_ROWS = 2


def calibration_split(n: int, seed: int, learns: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(refit, calibration) row indices. A model that learns nothing (the analytic prior) is
    calibrated on every row: no row it could have learned from is ever used twice. At least one
    calibration row when there are two rows or more (a tiny history's plain baseline)."""
    idx = np.random.default_rng(seed + 10_000).permutation(n)
    if not learns:
        return np.array([], dtype=int), idx
    n_cal = max(int(round(n * CALIBRATION_FRACTION)), 1 if n >= 2 else 0)
    return idx[n_cal:], idx[:n_cal]


@dataclass(frozen=True)
class Fit:
    """One model fitted on one target in one fold of the repeated K-fold: the unit a night fans out."""

    target: str
    model: str
    repeat: int

    def __str__(self) -> str:
        return f"{self.target} {self.model} repeat {self.repeat + 1}"


def order_fits(options: TrainOptions, previous: Mapping[str, str] | None = None) -> list[Fit]:
    """Every fit of a train run, in the order a night should run them so that a budget cut leaves
    the best comparison it can: the fast baselines of every target first, the plain LightGBM among them (each
    target has a champion within seconds, and a budget cut never drops the floor the champion is held to), then
    the previous champion's model (`previous`: target -> model),
    then the other ensembles from the quickest to fit (`registry.FIT_ORDER`), the network last
    (the slowest by far: a cut there must not starve the trees). Within a tier, repeat 1 of every
    target and model before repeat 2, so a cut removes repeats, not models."""
    previous = previous or {}
    rank = {m: i for i, m in enumerate(registry.FIT_ORDER)}
    target_rank = {t: i for i, t in enumerate(options.targets)}

    def tier(f: Fit) -> int:
        if f.model in registry.FAST_MODELS or f.model == registry.PLAIN:
            return 0
        if f.model == registry.NN:
            return 3
        return 1 if previous.get(f.target) == f.model else 2

    fits = [Fit(t, m, r) for t in options.targets for m in options.model_names for r in range(options.repeats)]
    return sorted(fits, key=lambda f: (tier(f), f.repeat, target_rank[f.target], rank.get(f.model, len(rank))))


def known_by(history: pl.DataFrame, until: datetime) -> pl.Expr:
    """The completed jobs a night at `until` knew of: its completion (`updated_at`; where a log has none, submitted
    + run time, review 65a S2-2; without a run time, its submission: no later than its end, review 65b S2-1) at or
    before `until`; a row with no time at all (no `submitted_at` column: tests' frames) is kept, as a live night keeps
    it.
    The warehouse's column is zoned 'Etc/UTC', a Python time 'UTC': polars compares only equal zone names."""
    def utc(name: str) -> pl.Expr:
        col = pl.col(name)
        zoned = history.schema.get(name)
        return col.dt.convert_time_zone("UTC") if getattr(zoned, "time_zone", None) else col.dt.replace_time_zone("UTC")

    ended = utc(c.UPDATED_AT) if c.UPDATED_AT in history.columns else pl.lit(None, pl.Datetime("us", "UTC"))
    if c.SUBMITTED_AT in history.columns and c.RUNTIME_HOURS in history.columns:
        ended = pl.coalesce(ended, utc(c.SUBMITTED_AT) + pl.duration(seconds=pl.col(c.RUNTIME_HOURS) * 3600.0))
    if c.SUBMITTED_AT in history.columns:  # no end and no run time: it ended after it was submitted (review 65b S2-1)
        ended = pl.coalesce(ended, utc(c.SUBMITTED_AT))
    bound = pl.lit(until).dt.convert_time_zone("UTC") if until.tzinfo else pl.lit(until).dt.replace_time_zone("UTC")
    return ended.is_null() | (ended <= bound)


def labelled(history: pl.DataFrame, target: str, options: TrainOptions, until: datetime | None = None) -> pl.DataFrame:
    """The jobs with `target` measured and model features logged, with the feature set's columns (built here
    when missing). Jobs without model features (contract v4, `model_type` unknown) teach a champion nothing
    about them and blur what it learns from the others: the scheduler's history forecasts them (`history.py`).
    `until`: a backfill's night (its clock): only the jobs completed by then (`known_by`), what that night could
    have learnt from; None (a live night): every one."""
    if until is not None:
        history = history.filter(known_by(history, until))
    if not set(FEATURE_SETS[options.features].names) <= set(history.columns):
        history = features.build(history)
    rows = labelled_rows(history, target)
    rows = rows.filter(~featureless(rows))
    extra = reference_rows(options)
    if extra.rows is None or target not in extra.rows.columns:  # the set measures memory and FLOPs, not run times
        return rows
    return pl.concat([rows, labelled_rows(extra.rows, target)], how="diagonal_relaxed")


def reference_rows(options: TrainOptions) -> reference.ReferenceSet:
    """The reference set's rows that train beside the history (`options.reference_weight` of them, a sample
    seeded by `options.seed`), or none and why (`warning`: the set is missing or corrupt; None when not asked for).
    They only ever train: they are never history rows of the warehouse, and never forecast."""
    if options.reference_weight <= 0:
        return reference.ReferenceSet(None, None)
    ref = _load_reference(options.reference_set or str(REFERENCE_SET), options.reference_traced)
    if ref.rows is None or options.reference_weight >= 1:
        return ref
    return reference.ReferenceSet(ref.rows.sample(fraction=options.reference_weight, seed=options.seed), None)


_REFERENCE_CACHE: dict[tuple, reference.ReferenceSet] = {}


def _load_reference(path: str, traced_prior: bool) -> reference.ReferenceSet:
    """`reference.load`, once per file version in a process (every target of a night reads it)."""
    try:
        stamp = Path(path).stat().st_mtime_ns
    except OSError:
        stamp = None
    key = (path, stamp, traced_prior)
    if key not in _REFERENCE_CACHE:
        _REFERENCE_CACHE.clear()
        _REFERENCE_CACHE[key] = reference.load(Path(path), traced_prior=traced_prior)
    return _REFERENCE_CACHE[key]


def reference_note(options: TrainOptions, note: str | None = None) -> str | None:
    """`note` (the run's message so far) and what it says of the reference set: why it was left out (missing or
    corrupt), or how many of its rows trained; nothing when the run does not use it."""
    words = None
    if options.reference_weight > 0:
        ref = reference_rows(options)
        words = ref.warning if ref.rows is None else (f"learned beside {ref.rows.height} rows of the reference set "
                                                      f"(weight {options.reference_weight:g})")
    return "; ".join(filter(None, (note, words))) or None


def too_few(rows: pl.DataFrame, options: TrainOptions) -> str | None:
    """Why a target gets no model comparison (fewer labelled jobs than `min_labelled`, or than the folds need:
    `MIN_ROWS_PER_FOLD` a fold outside the generalisation holdout), else None."""
    if rows.height < options.min_labelled:
        return (f"{rows.height} labelled COMPLETED jobs, fewer than the minimum {options.min_labelled} "
                f"(set --min-labelled to change it)")
    folded = rows.height - int(generalisation_holdout(rows, options.seed)[0].sum())
    if folded < FOLDS * MIN_ROWS_PER_FOLD:
        return (f"{folded} labelled COMPLETED jobs outside the generalisation holdout, fewer than {FOLDS} folds "
                f"of {MIN_ROWS_PER_FOLD} need")
    return None


def fit_one(rows: pl.DataFrame, target: str, options: TrainOptions, model: str, repeat: int, *, threads: int,
            budget_ends_at: float | None = None, progress: Callable[[str], None] = log.info) -> FitOutcome:
    """Fit `model` on repeat `repeat`'s fit rows of `target` (`fold_split`) and forecast its held-out fold and the
    generalisation holdout; the metrics of both (the held-out fold as "validation" and "test").

    Pure: it needs the labelled rows only, so it runs anywhere (a Dask worker included), on `threads`
    cores. `budget_ends_at` (a `time.time()` instant: the night budget's end): a fit that would start
    after it is skipped, and the network stops at it.
    """
    max_seconds = options.nn_max_seconds
    if budget_ends_at is not None:
        left = budget_ends_at - time.time()
        if left <= 0:
            return FitSkipped(target, model, repeat, "the night budget ran out before it started")
        max_seconds = min(max_seconds, left) if max_seconds else left
    seed = options.seed + repeat
    held, held_name = generalisation_holdout(rows, options.seed)  # neither fitted nor in the folds: forecast
    fit_idx, test_idx = fold_split(rows.height, held, options.seed, repeat)
    held_idx = np.flatnonzero(held)
    encoder = FeatureEncoder(options.features).fit(rows[fit_idx])
    X = encoder.transform(rows)
    y = rows[target].to_numpy().astype(np.float64)
    t0 = time.perf_counter()
    est = unfitted.model(model, encoder, target, options, registry.Build(seed=seed, threads=threads, progress=progress,
                                                                  max_seconds=max_seconds)).fit(X[fit_idx], y[fit_idx])
    seconds = time.perf_counter() - t0
    used = getattr(est, "device_", "cpu")
    cost = score_cost(est)
    test_pred = est.predict(X[test_idx])
    held_pred = est.predict(X[held_idx]) if len(held_idx) else np.empty(0)
    out = tuple(MetricRow(model=model, preset=options.preset if model == registry.NN else None,
                          features=options.features, repeat=repeat, seed=seed, split=split_name,
                          **metrics(y[idx], pred), rows_train=len(fit_idx), rows_eval=len(idx),
                          train_seconds=seconds, device=used, epochs=getattr(est, "epochs_run_", None),
                          score_seconds_per_million=cost)
                for split_name, idx, pred in (("validation", test_idx, test_pred), ("test", test_idx, test_pred),
                                              (held_name, held_idx, held_pred))
                if len(idx))
    return FitResult(target, model, repeat, out, test_pred, seconds, used, getattr(est, "stopped_by_", None),
                     test_idx=test_idx, holdout_idx=held_idx, holdout_pred=held_pred)


def describe_fit(outcome: FitOutcome, repeats: int) -> str:
    """The progress line of one finished (or skipped) fit."""
    where = f"{outcome.target}: repeat {outcome.repeat + 1}/{repeats} {outcome.model}"
    if isinstance(outcome, FitSkipped):
        return f"{where} skipped: {outcome.reason}"
    return f"{where} trained in {outcome.seconds:.1f} s on {outcome.device}" + (f" ({outcome.stopped})" if outcome.stopped else "")


@dataclass
class Finished:
    """A target's outcome before it is saved: the result, and the refitted champion with its encoder
    (None when the target was skipped). Made on a worker; saved by the flow's process."""

    result: TargetResult
    estimator: object | None = None
    encoder: FeatureEncoder | None = None
    sample: np.ndarray | None = None  # encoded calibration rows: a compiled model is checked on them


def finish_target(rows: pl.DataFrame, target: str, options: TrainOptions, outcomes: list[FitOutcome],
                  holdout: list[str] | None = None, *, threads: int, progress: Callable[[str], None] = log.info) -> Finished:
    """From the fits' outcomes: the metrics, the champion (`CHAMPION_RULE` on the out-of-fold forecasts of the
    repeats each model finished), the gate's predictions, and the champion refitted and calibrated.
    Skipped fits are kept in `result.skipped_fits` with their reason. Too few labelled jobs for the folds
    (`too_few`): the plain LightGBM alone, no comparison, and the reason says so. Pure, like `fit_one`."""
    result = TargetResult(target=target, rows=rows.height)
    build = registry.Build(seed=options.seed, threads=threads, progress=progress)
    if reason := too_few(rows, options):
        result.skipped = reason
        if rows.height >= PLAIN_ALONE_MIN_ROWS:  # issue 50: the plain baseline alone, said
            result.skipped += f"; the plain LightGBM ({registry.PLAIN}) alone scores it, no model comparison"
            result.choice_reason = result.skipped
            progress(f"{target}: {result.skipped}")
            return _refit(rows, target, options, registry.PLAIN, result, build)
        # one labelled job or none: nothing to fit and calibrate on; the prior scores it where it can
        if FEATURE_SETS[options.features].prior_column(target) is None or rows.is_empty():
            progress(f"{target}: skipped: {result.skipped}")
            return Finished(result)
        result.skipped += "; the analytic prior scores it"
        progress(f"{target}: {result.skipped}")
        return _refit(rows, target, options, registry.PRIOR, result, build)
    order = {m: i for i, m in enumerate(options.model_names)}
    fitted = sorted((o for o in outcomes if isinstance(o, FitResult)), key=lambda o: (o.repeat, order[o.model]))
    result.metrics = [m for o in fitted for m in o.metrics]
    result.skipped_fits = [o for o in outcomes if isinstance(o, FitSkipped)]
    priced = sorted({o.model for o in result.skipped_fits if o.priced_out})
    # a model priced out of the scoring budget (fitted once) competes only where tonight's count is within it: else its
    # one repeat stays out of the comparison (the rows every model forecast would shrink to that repeat's)
    apart = _over_tonight(fitted, priced, options.score_budget())
    done = [o for o in fitted if o.model not in apart]
    first = [o for o in fitted if o.repeat == 0 and o.test_idx is not None]
    y = rows[target].to_numpy().astype(np.float64)
    if first:  # repeat 0's held-out fold: the same rows for every model of the repeat
        result.test_predictions = pl.DataFrame({"actual": y[first[0].test_idx], **{o.model: o.test_pred for o in first}})
    if not done:  # (a priced-out model's one fit alone is no comparison)
        result.skipped = "no model finished a fit within the night budget" + (
            f" (not run, priced out of the scoring budget: {', '.join(priced)})" if priced else "")
        if FEATURE_SETS[options.features].prior_column(target) is None:
            progress(f"{target}: skipped: {result.skipped}")
            return Finished(result)
        result.skipped += "; the analytic prior scores it"
        return _refit(rows, target, options, registry.PRIOR, result, build)
    # the blend of the network and the best trees, cross-fitted on their out-of-fold forecasts: one more candidate
    pooled = pool_out_of_fold(done, y, FOLDS)
    budget = options.score_budget()  # what scoring tonight's queue may cost
    mix = blend.candidate(pooled, _mean_costs(done), options.seed, budget)
    mixed = blend.holdout(mix, done)  # its holdout forecasts: judged there like every model (review 57 S3)
    result.metrics += blend.metric_rows(mix, y, done, mixed)  # its figures beside the others' (leaderboard, champions)
    choice = champion_choice(done, y, folds=FOLDS, target=target, extra={blend.NAME: mix.oof} if mix.oof else None,
                             costs={blend.NAME: mix.cost} if mix.cost is not None else None,
                             extra_holdout={blend.NAME: mixed} if mixed else None,
                             groups=holdout_groups(rows, options.seed), budget=budget)
    champion, result.most_accurate = choice.champion, choice.lowest
    result.choice_reason = f"{choice.describe()}; {mix.describe()}"
    if priced:  # said where the choice is read
        result.choice_reason += ("; fits not run tonight, over the scoring budget at their last counted cost (table "
                                 "skipped_fits), each fitted once: "
                                 + ", ".join(f"{m} (not competing: over it at tonight's count too)" if m in apart
                                             else f"{m} (within it at tonight's count: competing)" for m in priced))
    result.champion_tied = choice.tied
    progress(f"{target}: champion {champion} ({result.choice_reason}); refitting it")
    if holdout:
        result.gate_predictions = _predict_held_out(rows, y, target, options, champion, holdout, build, mix)
    own = mix.oof if champion == blend.NAME else pooled.by_model.get(champion)
    return _refit(rows, target, options, champion, result, build, mix, out_of_fold(own, y),
                  held_out_shapes(rows, options.seed, done, champion, mix, y))


def held_out_shapes(rows: pl.DataFrame, seed: int, fits: list[FitResult], champion: str, mix: blend.Candidate,
                    y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(truth, forecast, row) of the champion's forecasts of the generalisation holdout (per job and pass of folds the
    mean of the pass's fits', so a held-out job weighs what an out-of-fold one does; a blend's the weighted sum of its
    members'), for the memory groups large by shape (`intervals.calibrate`'s `held_out`), where the
    holdout is whole shape clusters: only those jobs whose model type the folds hold. Why (issue 50 item 5, session
    7): the shape-cluster holdout takes whole clusters of similar shapes out of the folds, often the largest (the
    public set's seed 1: 19 of the 32 CNNs in the history's top quarter by batch x side²), so the out-of-fold group
    never sees them, while every fit forecast them without having learned from them. Not the latest week (the folds
    hold every shape) nor held-out families (a model type no fit saw is not the refitted champion's case); None
    there, or without holdout forecasts."""
    held, name = generalisation_holdout(rows, seed)
    if name != "holdout" or not held.any() or ood.FAMILY not in rows.columns:
        return None
    family = rows[ood.FAMILY].cast(pl.String).fill_null("unknown").to_numpy()
    known = np.isin(family, np.unique(family[~held]))  # a family the folds hold: shape clusters, not whole families
    forecasts = blend.holdout(mix, fits) if champion == blend.NAME else pool_holdout(fits, y).by_model.get(champion)
    by: dict[tuple[int, int], list[float]] = {}
    for (repeat, i), p in (forecasts or {}).items():
        by.setdefault((repeat // FOLDS, i), []).append(p)
    keys = sorted(k for k in by if known[k[1]])
    if not keys:
        return None
    job = np.array([k[1] for k in keys], dtype=np.int64)
    return y[job], np.array([float(np.mean(by[k])) for k in keys]), job


def out_of_fold(forecasts: Mapping[tuple[int, int], float] | None,
                y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(truth, forecast, row) of a model's out-of-fold forecasts (keys (pass, row), `champion.pool_out_of_fold`'s),
    for the large jobs' own P90 (`intervals.calibrate`'s `out_of_fold`: the rows let it count a job forecast once per
    pass once); None without any."""
    if not forecasts:
        return None
    keys = sorted(forecasts)
    rows = np.array([k[1] for k in keys], dtype=np.int64)
    return y[rows], np.array([forecasts[k] for k in keys], dtype=np.float64), rows


def _predict_held_out(rows: pl.DataFrame, y: np.ndarray, target: str, options: TrainOptions, champion: str,
                      holdout: list[str], build: registry.Build, mix: blend.Candidate | None = None) -> pl.DataFrame:
    """job_id and P50 of the champion fitted without the `holdout` jobs, for those jobs (the gate's check)."""
    held = rows[c.JOB_ID].is_in(holdout).to_numpy()
    if not held.any() or held.all():
        return pl.DataFrame(schema={c.JOB_ID: pl.String, "p50": pl.Float64})
    fit = np.flatnonzero(~held)
    encoder = FeatureEncoder(options.features).fit(rows[fit])
    X = encoder.transform(rows)
    est = unfitted.champion(champion, encoder, target, options, build, mix).fit(X[fit], y[fit])
    build.progress(f"{target}: {champion} fitted without the {int(held.sum()):,} jobs of the backtest window, for the gate")
    return pl.DataFrame({c.JOB_ID: rows[c.JOB_ID].filter(pl.Series(held)), "p50": est.predict(X[held])})


def _over_tonight(fitted: Sequence[FitResult], priced: Sequence[str], budget: ScoreBudget | None) -> set[str]:
    """Of the models priced out (`priced`: fitted once), those whose counted cost tonight (`_mean_costs` of their one
    fit) is over `budget` too, or not counted: they do not compete."""
    tonight = _mean_costs([o for o in fitted if o.model in priced])
    return {m for m in priced if budget is None or m not in tonight or not budget.fits(tonight[m])}


def _refit(rows: pl.DataFrame, target: str, options: TrainOptions, champion: str, result: TargetResult,
           build: registry.Build, mix: blend.Candidate | None = None,
           oof: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
           held: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> Finished:
    """Refit the champion on every labelled job but the calibration slice; calibrate its intervals
    (and the prior's) on that slice, the large jobs' P90 on the champion's out-of-fold forecasts `oof` where given
    (`intervals.large_out_of_fold`; the groups large by shape also on its shape-cluster holdout forecasts `held`,
    `held_out_shapes`); fit the OOD detector and measure, on held-out families, which estimate
    out-of-distribution jobs get (`held_out_evidence`), and where the correction of LLM jobs' per-GPU prior beats
    it out of fold (`llm_evidence`)."""
    from gpucast.tasks.learn.models.estimators import PriorModel  # (scikit-learn: the `ml` extra)

    y = rows[target].to_numpy().astype(np.float64)
    refit_idx, cal_idx = calibration_split(rows.height, options.seed, learns=champion != registry.PRIOR)
    encoder = FeatureEncoder(options.features).fit(rows[refit_idx] if len(refit_idx) else rows)
    X = encoder.transform(rows)
    t0 = time.perf_counter()
    if champion == registry.PRIOR:  # nothing to learn, and no jobs set aside to learn from
        est = PriorModel.on(FEATURE_SETS[options.features].prior_column(target), X.shape[1])
    else:
        est = unfitted.champion(champion, encoder, target, options, build, mix).fit(X[refit_idx], y[refit_idx])
    floor = float(y[refit_idx].min()) if len(refit_idx) else float(y.min(initial=1.0))
    groups = {g: rows[g].gather(cal_idx).to_list() for g in intervals.CATEGORIES if g in rows.columns}
    shape = (c.MODEL_TYPE, *intervals.LARGE_SHAPE_COLUMNS)  # memory: the large-by-shape groups (issue 50 item 5)
    shapes = ({g: rows[g].to_numpy() for g in shape}
              if target == c.PEAK_GPU_MEM_GB and set(shape) <= set(rows.columns) else None)
    lm = priors.language_model_gb(rows) if shapes is not None else None  # memory: the recurrent LMs' correction
    result.calibration[champion] = intervals.calibrate(y[cal_idx], est.predict(X[cal_idx]), floor, groups, history=y,
                                                       out_of_fold=oof, shapes=shapes, held_out=held,
                                                       language_model=None if lm is None else (lm[cal_idx], lm),
                                                       calibration_rows=cal_idx)
    prior_column = FEATURE_SETS[options.features].prior_column(target)
    if prior_column is not None and champion != registry.PRIOR:  # the fallback for out-of-distribution jobs
        prior = PriorModel.on(prior_column, X.shape[1])
        result.calibration[registry.PRIOR] = intervals.calibrate(y[cal_idx], prior.predict(X[cal_idx]), floor,
                                                                 groups, history=y)
    detector = ood.fit(rows.gather(refit_idx) if len(refit_idx) else rows, options.features)
    detector = replace(detector, ceiling=ood.fit_ceiling(rows, target))  # every labelled job: what any job of its kind used
    result.champion = champion
    result.refit = Refit(len(refit_idx), len(cal_idx), round(time.perf_counter() - t0, 2))
    if champion != registry.PRIOR and (evidence := held_out_evidence(rows[refit_idx], target, options, champion, build)):
        detector = replace(detector, fallback=evidence)  # what out-of-distribution jobs get: tasks/learn/ood.py `held_out_best`
    if target == c.PEAK_GPU_MEM_GB and champion != registry.PRIOR:  # issue 51: the correction kept where it helps
        detector = replace(detector, llm_correction=llm_evidence(rows[refit_idx], target, options, champion, build, mix))
    result.ood = detector
    build.progress(f"{target}: {champion} refitted on {len(refit_idx):,} jobs, intervals calibrated on {len(cal_idx):,}")
    return Finished(result, est, encoder, X[cal_idx][: compiled.SAMPLE_ROWS])


def save_champion(folder: Path, target: str, options: TrainOptions, finished: Finished, *, threads: int) -> None:
    """Write the refitted champion, its encoder, the test predictions and the metadata to `folder`
    (the registry's target folder); sets `result.model_dir`. A tree champion is compiled on `threads`."""
    result = finished.result
    result.model_dir = str(folder)
    path = store.save_model(folder, result.champion, finished.estimator)
    tree = result.champion in compiled.COMPILABLE or result.champion in compiled.STAYS_NATIVE
    if options.compile_trees and finished.sample is not None and result.champion == blend.NAME:  # each tree member
        result.compiled = blend.compile_members(folder, finished.estimator, finished.sample, threads)
    elif options.compile_trees and tree and finished.sample is not None:  # (a family that stays native records why)
        result.compiled = compiled.compile_model(result.champion, path, finished.estimator.regressor_, finished.sample,
                                                 threads)
    store.save_encoder(folder, finished.encoder)
    if result.test_predictions is not None:
        store.save_test_predictions(folder, result.test_predictions)
    store.save_metadata(folder, _metadata(target, options, result, finished.estimator))


def edges_of(estimator) -> dict[str, dict]:
    """Per saved model (the champion, or each member of a blend), the residual's edge rule beyond the history's
    prior (`LogTarget.edges`, issue 50), which `store.load_model` restores; models without a base have none."""
    members = estimator.estimators if isinstance(estimator, blend.Blend) else {"": estimator}
    return {name: saved for name, est in members.items()
            if callable(getattr(est, "edges", None)) and (saved := est.edges()) is not None}


def _metadata(target: str, options: TrainOptions, result: TargetResult, estimator=None) -> dict:
    edges = edges_of(estimator) if estimator is not None else {}
    return {
        "target": target,
        "features": list(FEATURE_SETS[options.features].names),
        "feature_set": options.features,
        "models": list(options.model_names),
        "refit": asdict(result.refit),
        "preset": options.preset,
        "champion": result.champion,
        "champion_metric": CHAMPION_RULE,
        "champion_tied": list(result.champion_tied),
        "most_accurate": result.most_accurate,
        "choice_reason": result.choice_reason,
        "rows": result.rows,
        "python": platform.python_version(),
        "versions": store.library_versions(),
        "metrics": [asdict(m) for m in result.metrics],
        "calibration": result.calibration,
        "ood": result.ood.to_json() if result.ood else None,  # the one writer (tasks/learn/ood.py `Detector`)
        "compiled": asdict(result.compiled) if result.compiled else None,
        "edges": {name or result.champion: saved for name, saved in edges.items()},
    }
