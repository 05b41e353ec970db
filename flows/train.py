"""Prefect flow `train-models`: every registry model asked for on every target, compared on the same splits
(a model priced out of the scoring budget fitted once: `tasks/learn/fanout.py`).

Where the fits run is `flows/runners.py`'s decision (Dask or this process); handing the whole run to
the `gpu` work pool is `flows/gpu_pool.py`'s. The night budget keeps one name from its variable to
its use: `GPUCAST_NIGHT_BUDGET_MINUTES` -> `TrainOptions.night_budget_minutes` (filled in by
`resolve` when the run does not set it) -> the instant it ends, `budget_ends_at`, which every fit
compares with the clock (`tasks/learn/train.py` `fit_one`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext

from gpucast.flows import runners
from gpucast.flows.backtest import refresh_backtest
from gpucast.flows.errors import no_retry_on_environment
from gpucast.flows.settings import Cluster, Quality, Settings, Storage, Tracing, limits_given, with_time_limits
from gpucast.flows.stage import HISTORY, stage_features
from gpucast.records.outcomes import FitOutcome, GateWindow, GateWindows
from gpucast.records.results import TrainedTarget, TrainResult
from gpucast.records.times import as_utc
from gpucast.tasks.learn import fanout, gate, train
from gpucast.tasks.learn.models import store
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.report import render
from gpucast.warehouse import backtest, db, forecast, queries, runs, training
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.publish import publish_if


def resolve(options: TrainOptions, settings: Settings) -> TrainOptions:
    """Options with what they leave open filled in: the time limits and the scoring budget (`flows/settings.py`
    `with_time_limits`), the pending queue the budget is judged at (`pending_jobs`: the jobs pending now, which the
    night's score run forecasts), and whether tree champions are compiled for scoring (auto: when the pending queue
    is large enough for the minute of compiling to pay, `train.compile_trees_for`)."""
    options = with_time_limits(options, settings.training)
    if options.pending_jobs is None:
        with db.writer(settings.storage) as con:
            options = options.model_copy(update={"pending_jobs": training.count_pending(con)})
    if options.compile_trees is None:
        options = options.model_copy(update={"compile_trees": train.compile_trees_for(options.pending_jobs)})
    return options


@task(name="gate-windows")
def gate_windows(settings: Settings, targets: tuple[str, ...], refresh: bool = True,
                 as_of: datetime | None = None) -> GateWindows:
    """Per target with a champion: that champion, and the jobs of the backtest window it forecast
    before they ran, with its P50 and their actual values (the gate's evidence, `tasks/learn/gate.py`).
    `refresh`: recompute the window first (False where the caller did this night: the nightly's backtest step).
    `as_of`: the night's clock (a backfill's `--as-of`): the window read is the one the backtest step wrote, ending
    there, and the champion judged the one in place then (`forecast.champions_as_of`); None: a live night (now, the
    latest champion)."""
    days, now = settings.quality.backtest_days, as_of or datetime.now(UTC)
    if refresh:
        refresh_backtest(settings.storage, days, now, until=as_of)
    with db.writer(settings.storage) as con:
        champions = gate.gated(forecast.champions_as_of(con, as_of), targets)
        return GateWindows({ch.target: GateWindow(ch, backtest.champion_window(con, ch.target, ch.train_run_id, days, now,
                                                                                until=as_of),
                                                  training.champion_cost(con, ch.target, ch.train_run_id, ch.model))
                            for ch in champions})


@task(name="fit", task_run_name="{target} {model} repeat {repeat}", cache_policy=NO_CACHE, retries=1,
      retry_delay_seconds=5,
      retry_condition_fn=no_retry_on_environment)
def fit_model(rows: pl.DataFrame, target: str, options: TrainOptions, model: str, repeat: int,
              budget_ends_at: float | None) -> FitOutcome:
    """One fit (target x model x repeat) on whichever worker has room: data in, metrics out."""
    return train.fit_one(rows, target, options, model, repeat, threads=runners.threads_here(), budget_ends_at=budget_ends_at,
                         progress=get_run_logger().info)


@task(name="refit-champion", task_run_name="refit {target}", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=5,
      retry_condition_fn=no_retry_on_environment)
def refit_champion(rows: pl.DataFrame, target: str, options: TrainOptions, outcomes: list[FitOutcome],
                   holdout: list[str] | None) -> train.Finished:
    """Choose the target's champion from its fits and refit it; the model comes back to the flow."""
    return train.finish_target(rows, target, options, outcomes, holdout, threads=runners.threads_here(),
                               progress=get_run_logger().info)


@dataclass(frozen=True)
class Fitted:
    """What `fit-models` hands back to `train-models` (in this process): each target's finished fits."""

    where: str  # where the fits ran, in words
    finished: dict[str, train.Finished]  # target -> its champion refitted (or why none)
    fit_seconds: float  # wall seconds of the fits (the refits not included)


@flow(name="fit-models", log_prints=True)
def fit_models(history_path: str, options: TrainOptions, holdout: dict[str, list[str] | None],
               previous: dict[str, str], until: datetime | None = None,
               priced: dict[str, dict[str, float]] | None = None) -> Fitted:
    """Every fit of the run as its own task run on this flow's task runner (Dask, or in-process),
    in `order_fits`'s order, within `options.night_budget_minutes`; then each target's champion refitted
    (`holdout`: target -> the gate window's job ids, predicted by the champion fitted without them).
    `until`: a backfill's night: the fits learn only from the jobs completed by its clock (`train.labelled`).
    `priced`: target -> the models priced out of the scoring budget (`fanout.priced_out`): fitted once, their other
    repeats recorded as not run (`fanout.priced_out_fits`).

    Workers get the labelled rows and return metrics and models; the warehouse stays with the
    caller. A fit that fails (twice: one retry) or whose worker is lost is recorded as skipped with
    its error; the night goes on with the fits that finished (`tasks/learn/fanout.py`).
    """
    runner = FlowRunContext.get().task_runner
    history = pl.read_parquet(history_path)
    rows = {t: train.labelled(history, t, options, until) for t in options.targets}
    shared = runners.share(runner, rows)
    started = time.time()
    budget = options.night_budget_minutes
    budget_ends_at = fanout.budget_end(started, budget)
    fits = fanout.runnable_fits(options, previous, rows, priced)
    where = runners.describe(runner)
    print(f"{len(fits)} fits on {where}" + (f", night budget {budget:g} min" if budget_ends_at else ""))
    unfitted = fanout.priced_out_fits(options, priced or {})
    for line in fanout.describe_not_run(unfitted):
        print(line)
    failpoint("train:cluster-up")  # the fits' workers are running (a signal test stops here)
    outcomes = _run_fits(runner, fits, shared, options, budget_ends_at, started)
    for t, skipped in unfitted.items():
        outcomes[t].extend(skipped)
    fanout.check_outcomes(outcomes)  # every fit failed: the run stops
    fit_seconds = round(time.time() - started, 1)
    refits = {t: refit_champion.submit(shared[t], t, options, outcomes[t], holdout[t]) for t in options.targets}
    finished = {}
    for t, future in refits.items():
        try:
            finished[t] = future.result()
        except Exception as exc:  # noqa: BLE001  (the refit is the night's model: it is done here instead)
            get_run_logger().warning(f"{t}: the refit failed on the cluster ({type(exc).__name__}: {exc}); refitting here")
            finished[t] = train.finish_target(rows[t], t, options, outcomes[t], holdout[t], threads=runners.threads_here(),
                                              progress=print)
    return Fitted(where=where, finished=finished, fit_seconds=fit_seconds)


def _run_fits(runner, fits: list[train.Fit], shared: dict, options: TrainOptions, budget_ends_at: float | None,
              started: float) -> dict[str, list[FitOutcome]]:
    """Submit every fit (network fits to GPU workers when the cluster has them), collect each outcome as
    it ends; a fit that raised, or whose worker died, comes back as failed with its error."""
    gpu = runners.gpu_resource(runner)
    pending = {}
    for i, fit in enumerate(fits):
        with runners.annotate(runner, fanout.annotations(fits, i, gpu)):
            future = fit_model.submit(shared[fit.target], fit.target, options, fit.model, fit.repeat, budget_ends_at)
        pending[future] = fit
    outcomes: dict[str, list[FitOutcome]] = {t: [] for t in options.targets}
    for n, (fit, finished) in enumerate(runners.as_finished(pending), start=1):
        outcome = fanout.outcome_of(fit, finished)
        outcomes[fit.target].append(outcome)
        print(f"[{n}/{len(fits)}, {(time.time() - started) / 60:.1f} min] {train.describe_fit(outcome, options.repeats)}")
    return outcomes


@flow(name="train-models", log_prints=True)
def train_models(options: TrainOptions | None = None, history_path: str | None = None, publish: bool = True,
                 storage: Storage | None = None, cluster: Cluster | None = None, quality: Quality | None = None,
                 tracing: Tracing | None = None,
                 backtest_fresh: bool = False, as_of: datetime | None = None) -> TrainResult:
    """Retrain every model on the warehouse's labelled jobs; record metrics and champions.

    `history_path`: the labelled history already staged by the caller (the nightly's features
    step); else it is staged here, once. `publish` refreshes the planners' copy at the end (the
    nightly flow publishes once, itself). `cluster`: where the fits run (default: the settings',
    GPUCAST_TRAIN_RUNNER / GPUCAST_DASK_ADDRESS / GPUCAST_DASK_WORKERS); the GPU pool's run gets the
    nightly's (`flows/gpu_pool.py`). `quality`: the backtest window the champion gate looks at
    (default: the settings', GPUCAST_BACKTEST_DAYS; the GPU pool's run gets the nightly's). `storage`, `tracing`
    and the time limits `options` leaves None (the training concern is `TrainOptions` itself, flows/settings.py):
    default the environment's. Each concern is
    a JSON object on a deployment (prefect.yaml's `gpu-train`, the pool's hand-off). `backtest_fresh`: the caller
    recomputed the backtest window this night (the nightly's backtest step): the gate reads it as it is, instead
    of recomputing it (one backtest a night). `as_of`: the night's clock (the nightly's `--as-of`, a backfill's
    past night; a time without a zone is UTC): the champion gate's backtest window ends there, as the backtest step's
    did (default now).
    """
    as_of = as_utc(as_of)  # a deployment run's zone-less ISO text arrives naive
    options = options or TrainOptions()
    settings = Settings.given(storage=storage, cluster=cluster, quality=quality, tracing=tracing,
                              training=limits_given(options)).ensure()
    cluster = settings.cluster
    options = resolve(options, settings)
    used = options.run_device()
    with runs.lifecycle(settings.storage, "train", models=list(options.model_names), preset=options.preset,
                        repeats=options.repeats, device=used, night_budget_minutes=options.night_budget_minutes,
                        score_budget_s=options.score_budget_s, pending_jobs=options.pending_jobs,
                        train_runner=cluster.train_runner, dask_address=cluster.dask_address or None,
                        flow_run_id=str(FlowRunContext.get().flow_run.id), as_of=as_of) as run:
        print(f"{run.run_id}: {len(options.model_names)} model(s) x {len(options.targets)} target(s), preset "
              f"{options.preset}, {options.repeats} repeat(s), on {used}")
        history = history_path or stage_features(settings.storage, run.staging, (HISTORY,), options.max_rows,
                                                         tracing=settings.tracing).history_path
        windows = gate_windows(settings, options.targets, refresh=not backtest_fresh, as_of=as_of)
        choice = runners.choose_runner(cluster, local_cluster=True, scratch=run.staging / "dask")
        if choice.note:
            get_run_logger().warning(choice.note)
        fitted = fit_models.with_options(task_runner=choice.runner)(history, options, windows.holdouts(options.targets),
                                                                     windows.previous_models(), until=as_of,
                                                                     priced=_priced_out(options, settings))
        outcomes = []
        for target in options.targets:
            outcomes.append(_record(run.run_id, target, options, fitted.finished[target], windows, settings))
            failpoint("train:after-first-target")
        note = train.reference_note(options, choice.note)  # where the fits ran, and the reference set's use
        _finish(run.run_id, outcomes, note, fitted.where, settings)
    publish_if(publish, settings.storage)
    report = render.train_markdown(run.run_id, *queries.train_tables(settings.storage.db_path, run.run_id))
    create_markdown_artifact(key="train-report", markdown=report, description=f"metrics of {run.run_id}")
    return TrainResult(train_run_id=run.run_id, targets=tuple(outcomes), device=used, fits_on=fitted.where,
                       fit_seconds=fitted.fit_seconds, note=note)


def _priced_out(options: TrainOptions, settings: Settings) -> dict[str, dict[str, float]]:
    """Target -> the models tonight's run fits once, priced out of the scoring budget at their last counted cost
    (`fanout.priced_out`, the costs the warehouse recorded: `training.last_costs`; none without a budget)."""
    with db.writer(settings.storage) as con:
        costs = training.last_costs(con, options.preset, options.features)
    return fanout.priced_out(options, costs)


def _finish(run_id: str, outcomes: list[TrainedTarget], note: str | None, fits_on: str, settings: Settings) -> None:
    """Mark the run succeeded with what on-call should know, and prune old model folders."""
    storage = settings.storage
    with db.writer(storage) as con:  # under the lock, so no run can start between the two
        runs.finish(con, "train", run_id, "succeeded", fanout.run_message(outcomes, note), fits_on=fits_on)
        pruned = store.prune(storage.models_dir, training.runs_to_keep(con, storage.keep_train_runs))
    if pruned:
        print(f"removed the model folders of {len(pruned)} older train run(s) (keeping {storage.keep_train_runs}, "
              "GPUCAST_KEEP_TRAIN_RUNS)")


def _record(run_id: str, target: str, options: TrainOptions, finished: train.Finished, windows: GateWindows,
            settings: Settings) -> TrainedTarget:
    """Save the target's champion in the registry, gate it against the current one, and write the
    metrics, the skipped fits and the decision to the warehouse (this process: the one writer)."""
    result = finished.result
    if finished.estimator is not None:
        train.save_champion(store.target_folder(settings.storage.models_dir, run_id, target), target, options, finished,
                            threads=runners.threads_here())
        if result.compiled:  # built once here, beside the model: scoring runs never compile
            print(f"{target}: {result.champion} " + (f"compiled for scoring in {result.compiled.compile_seconds} s"
                  if result.compiled.used else f"scores natively: {result.compiled.reason}"))
    # None: nothing to gate; a current champion over tonight's scoring budget does not stay
    decision = gate.judge(windows.of(target), result, options.score_budget())
    if decision is not None:
        print(f"{target}: gate: {decision.verdict} - {decision.reason}")
    with db.writer(settings.storage) as con:
        training.record_target(con, run_id, result, options.features, decision, windows.champion(target))
    cut, priced = fanout.not_run(result.skipped_fits)
    return TrainedTarget(target=target, champion=result.champion, skipped=result.skipped, rows=result.rows,
                         skipped_fits=cut, decision=gate.verdict(decision), choice_reason=result.choice_reason,
                         priced_out=priced)

