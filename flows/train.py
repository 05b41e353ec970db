"""Prefect flow `train-models`: every registry model on every target, compared on the same splits."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from gpucast.tasks.learn import features, gate
from gpucast.tasks.learn import train as steps
from gpucast.tasks.learn.models import registry, store
from gpucast.tasks.learn.train import TrainOptions
from gpucast.tasks.report import render
from gpucast.warehouse import backtest, db, forecast, queries, runs, training
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.publish import publish_snapshot
from gpucast.warehouse.settings import Settings


def resolve(options: TrainOptions, settings: Settings) -> TrainOptions:
    """Options with what they leave to the settings and the warehouse filled in: the network's time
    budget, and whether tree champions are compiled for scoring (auto: when the pending queue is
    large enough for the minute of compiling to pay, `steps.COMPILE_MIN_PENDING`)."""
    update = {}
    if options.nn_max_minutes is None:
        update["nn_max_minutes"] = settings.nn_max_minutes
    if options.compile_trees is None:
        with db.writer(settings) as con:
            update["compile_trees"] = training.count_pending(con) >= steps.COMPILE_MIN_PENDING
    return options.model_copy(update=update) if update else options


@task(name="read-history")
def read_history(settings: Settings, max_rows: int | None, out: Path) -> str:
    """The labelled history, read once per train run and staged as Parquet for every target's step."""
    with db.writer(settings) as con:
        history = training.read_training_jobs(con, max_rows)
    features.build(history).write_parquet(out)
    return str(out)


@task(name="gate-windows")
def gate_windows(settings: Settings, targets: tuple[str, ...]) -> dict[str, dict]:
    """Per target with a champion: that champion, and the jobs of the backtest window it forecast
    before they ran, with its P50 and their actual values (the gate's evidence, `tasks/learn/gate.py`)."""
    with db.writer(settings) as con:
        backtest.run(con, settings.backtest_days, datetime.now(UTC))
        champions = {ch.target: ch for ch in forecast.latest_champions(con)}
        windows = {t: backtest.champion_window(con, t, champions[t].train_run_id, settings.backtest_days)
                   for t in targets if t in champions}
    return {t: {"champion": champions[t], **w.to_dict(as_series=False)} for t, w in windows.items()}


@task(name="fit", task_run_name="{target} {model} repeat {repeat}", cache_policy=NO_CACHE, retries=1,
      retry_delay_seconds=5)
def fit_model(rows: pl.DataFrame, target: str, options: TrainOptions, model: str, repeat: int,
              deadline: float | None) -> dict:
    """One fit (target x model x repeat) on whichever worker has room: data in, metrics out."""
    return steps.fit_one(rows, target, options, model, repeat, deadline, progress=get_run_logger().info)


@task(name="refit-champion", task_run_name="refit {target}", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=5)
def refit_champion(rows: pl.DataFrame, target: str, options: TrainOptions, outcomes: list[dict],
                   holdout: list[str] | None) -> steps.Finished:
    """Choose the target's champion from its fits and refit it; the model comes back to the flow."""
    return steps.finish_target(rows, target, options, outcomes, holdout, progress=get_run_logger().info)


@flow(name="fit-models", log_prints=True)
def fit_models(history_path: str, options: TrainOptions, windows: dict[str, dict], previous: dict[str, str],
               budget_minutes: float) -> dict:
    """Every fit of the run as its own task run on this flow's task runner (Dask, or in-process),
    in `order_fits`'s order, within the night budget; then each target's champion refitted.

    Workers get the labelled rows and return metrics and models; the warehouse stays with the
    caller. A fit that fails (twice: one retry) or whose worker is lost is recorded as skipped with
    its error; the night goes on with the fits that finished.
    """
    runner = FlowRunContext.get().task_runner
    history = pl.read_parquet(history_path)
    rows = {t: steps.labelled(history, t, options) for t in options.targets}
    shared = _share(runner, rows)
    started = time.time()
    deadline = started + budget_minutes * 60 if budget_minutes else None
    fits = [f for f in steps.order_fits(options, previous) if steps.too_few(rows[f.target], options) is None]
    gpu = _gpu_resource(runner)
    where = _describe(runner)
    print(f"{len(fits)} fits on {where}" + (f", night budget {budget_minutes:g} min" if deadline else ""))
    pending = []
    for i, fit in enumerate(fits):
        annotations = {"priority": len(fits) - i, **({"resources": gpu} if gpu and fit.model == registry.NN else {})}
        with _annotate(runner, annotations):
            pending.append((fit, fit_model.submit(shared[fit.target], fit.target, options, fit.model, fit.repeat, deadline)))
    outcomes: dict[str, list[dict]] = {t: [] for t in options.targets}
    for n, (fit, outcome) in enumerate(_as_finished(pending), start=1):
        outcomes[fit.target].append(outcome)
        print(f"[{n}/{len(fits)}, {(time.time() - started) / 60:.1f} min] {steps.describe_fit(outcome, options.repeats)}")
    fit_seconds = round(time.time() - started, 1)
    every = [o for target_outcomes in outcomes.values() for o in target_outcomes]
    failed = [o for o in every if o.get("skipped", "").startswith("failed:")]
    if every and len(failed) == len(every):  # not a lost worker: something every fit trips on (a bad option)
        raise RuntimeError(f"every fit of the run failed; the first: {failed[0]['skipped'].removeprefix('failed: ')}")
    holdout = {t: windows[t]["job_id"] if t in windows else None for t in options.targets}
    refits = {t: refit_champion.submit(shared[t], t, options, outcomes[t], holdout[t]) for t in options.targets}
    finished = {}
    for t, future in refits.items():
        try:
            finished[t] = future.result()
        except Exception as exc:  # noqa: BLE001  (the refit is the night's model: it is done here instead)
            get_run_logger().warning(f"{t}: the refit failed on the cluster ({type(exc).__name__}: {exc}); refitting here")
            finished[t] = steps.finish_target(rows[t], t, options, outcomes[t], holdout[t], progress=print)
    return {"where": where, "finished": finished, "fit_seconds": fit_seconds}


def _on_dask(runner) -> bool:
    from prefect_dask import DaskTaskRunner  # imported when training, not by every CLI command

    return isinstance(runner, DaskTaskRunner)


def _share(runner, rows: dict[str, pl.DataFrame]) -> dict:
    """The labelled rows, sent once to a Dask cluster and copied to every worker (each fit of a
    target refers to that copy). Sent as a small task rather than `scatter`ed: a worker lost with
    the only copy of scattered data took every fit depending on it with it ("lost dependencies",
    seen in tests/flows/test_dask_training.py), while a task's result is recomputed from its spec."""
    if not _on_dask(runner):
        return rows
    shared = {t: runner.client.submit(_same, r, key=f"labelled-rows-{t}-{uuid.uuid4().hex[:8]}") for t, r in rows.items()}
    runner.client.replicate(list(shared.values()))  # waits for them, then copies them to every worker
    return shared


def _same(rows: pl.DataFrame) -> pl.DataFrame:
    return rows


def _gpu_resource(runner) -> dict | None:
    """{"GPU": 1} when a worker of the Dask cluster advertises a GPU resource (`dask worker
    --resources GPU=1`): network fits then wait for such a worker. Otherwise None (they run on CPU)."""
    if not _on_dask(runner):
        return None
    workers = runner.client.scheduler_info(n_workers=-1)["workers"].values()
    return {"GPU": 1} if any(w.get("resources", {}).get("GPU", 0) >= 1 for w in workers) else None


def _describe(runner) -> str:
    if not _on_dask(runner):
        return "this process (one fit at a time)"
    info = runner.client.scheduler_info(n_workers=-1)
    where = runner.address or "a local cluster"
    link = runner.client.dashboard_link if "dashboard" in info.get("services", {}) else None
    workers = info["workers"]
    return f"Dask at {where}: {len(workers)} worker(s)" + (f", dashboard {link}" if link else "")


@contextlib.contextmanager
def _annotate(runner, annotations: dict):
    """Dask annotations (priority keeps the night's order; resources route network fits to GPUs)."""
    if _on_dask(runner):
        import dask

        with dask.annotate(**annotations):
            yield
    else:
        yield


def _as_finished(pending: list[tuple[steps.Fit, object]]) -> Iterator[tuple[steps.Fit, dict]]:
    """(fit, outcome) as each fit ends. A fit that raised, or whose worker died, comes back as
    skipped with the error as its reason (the night does not fail for one fit)."""
    left = list(pending)
    while left:
        done = [(fit, fut) for fit, fut in left if fut.wrapped_future.done()]
        if not done:
            time.sleep(0.2)
            continue
        for fit, fut in done:
            left.remove((fit, fut))
            try:
                yield fit, fut.result()
            except Exception as exc:  # noqa: BLE001  (recorded as the fit's outcome, see the docstring)
                yield fit, {"target": fit.target, "model": fit.model, "repeat": fit.repeat,
                            "skipped": f"failed: {type(exc).__name__}: {str(exc)[:300]}"}


def task_runner(settings: Settings) -> tuple[TaskRunner, str | None]:
    """The task runner training's fits run on, and a note when it is not the one asked for.

    `GPUCAST_TRAIN_RUNNER=local`: one fit after another in this process. Else Dask: the scheduler
    at `GPUCAST_DASK_ADDRESS` when it answers within `DASK_CONNECT_TIMEOUT_S` (else in-process,
    with the reason as the note), or a local cluster of `GPUCAST_DASK_WORKERS` worker processes
    (one per core by default), one thread each, which report to this run's Prefect API.
    """
    from prefect_dask import DaskTaskRunner

    if settings.train_runner == "local":
        return ThreadPoolTaskRunner(max_workers=1), None
    logging.getLogger("distributed").setLevel(logging.WARNING)  # the scheduler's INFO lines drown the run's
    if settings.dask_address:
        if problem := dask_unreachable(settings.dask_address, DASK_CONNECT_TIMEOUT_S):
            return ThreadPoolTaskRunner(max_workers=1), (
                f"Dask scheduler {settings.dask_address} (GPUCAST_DASK_ADDRESS) did not answer within "
                f"{DASK_CONNECT_TIMEOUT_S} s ({problem}): trained in-process")
        return DaskTaskRunner(address=settings.dask_address), None
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:  # the temporary local API's URL, when that is what runs
        api_url = str(client.api_url)
    workers = settings.dask_workers or os.cpu_count() or 1
    env = {"PREFECT_API_URL": api_url, "DASK_LOGGING__DISTRIBUTED": "warning"}
    return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True,
                                          "env": env}), None


DASK_CONNECT_TIMEOUT_S = 10


def dask_unreachable(address: str, timeout_s: float) -> str | None:
    """Why the Dask scheduler at `address` cannot be used, or None when a client connected.

    The attempt runs in a daemon thread watched by a wall clock: `Client(timeout=...)` bounds the
    TCP connect, but a peer that accepts and never speaks (a wrong port, a hung scheduler) held it
    for minutes here. A thread still stuck after `timeout_s` is abandoned; the night goes on."""
    from distributed import Client

    outcome: list[str | None] = []

    def attempt() -> None:
        try:
            Client(address, timeout=f"{timeout_s}s").close()
            outcome.append(None)
        except Exception as exc:  # noqa: BLE001  (any failure means: not usable tonight)
            outcome.append(f"{type(exc).__name__}: {str(exc)[:200]}")

    worker = threading.Thread(target=attempt, name="dask-connect", daemon=True)
    worker.start()
    worker.join(timeout_s + 2)
    return outcome[0] if outcome else "no handshake"


@flow(name="train-models", log_prints=True)
def train_models(options: TrainOptions | None = None, history_path: str | None = None, publish: bool = True,
                 settings: Settings | None = None) -> dict:
    """Retrain every model on the warehouse's labelled jobs; record metrics and champions.

    `history_path`: the labelled history already staged by the caller (the nightly's features
    step); else it is read here, once. `publish` refreshes the planners' copy at the end (the
    nightly flow publishes once, itself). The fits fan out on `task_runner(settings)`.
    """
    from gpucast.tasks.learn.models.transformer_bigru import pick_device

    settings = (settings or Settings.from_env()).ensure()
    options = resolve(options or TrainOptions(), settings)
    used = pick_device(options.device)
    with runs.lifecycle(settings, "train", models=list(options.model_names), preset=options.preset,
                        repeats=options.repeats, device=used) as run:
        print(f"{run.run_id}: {len(options.model_names)} model(s) x {len(options.targets)} target(s), preset "
              f"{options.preset}, {options.repeats} repeat(s), on {used}")
        history = history_path or read_history(settings, options.max_rows, run.staging / "history.parquet")
        windows = gate_windows(settings, options.targets)
        previous = {t: w["champion"].model for t, w in windows.items()}
        runner, note = task_runner(settings)
        if note:
            get_run_logger().warning(note)
        fitted = fit_models.with_options(task_runner=runner)(history, options, windows, previous,
                                                              settings.night_budget_minutes)
        finished = fitted["finished"]
        outcomes = []
        for target in options.targets:
            outcomes.append(_record(run.run_id, target, options, finished[target], windows.get(target), settings))
            failpoint("train:after-first-target")
        skipped = "; ".join(f"{o['target']}: {o['skipped']}" for o in outcomes if o["skipped"])
        cut = sum(o["skipped_fits"] for o in outcomes)
        message = "; ".join(m for m in (note, skipped, f"{cut} fit(s) skipped: see skipped_fits" if cut else None) if m)
        with db.writer(settings) as con:  # under the lock, so no run can start between the two
            runs.finish(con, "train", run.run_id, "succeeded", message or None)
            pruned = store.prune(settings.models_dir, training.runs_to_keep(con, settings.keep_train_runs))
    if pruned:
        print(f"removed the model folders of {len(pruned)} older train run(s) (keeping {settings.keep_train_runs}, "
              "GPUCAST_KEEP_TRAIN_RUNS)")
    if publish:
        publish_snapshot(settings)
    report = render.train_markdown(run.run_id, *queries.train_tables(settings.db_path, run.run_id))
    create_markdown_artifact(key="train-report", markdown=report, description=f"metrics of {run.run_id}")
    return {"train_run_id": run.run_id, "device": used, "fits_on": fitted["where"], "fit_seconds": fitted["fit_seconds"],
            "targets": outcomes, "note": note}


def _record(run_id: str, target: str, options: TrainOptions, finished: steps.Finished, window: dict | None,
            settings: Settings) -> dict:
    """Save the target's champion in the registry, gate it against the current one, and write the
    metrics, the skipped fits and the decision to the warehouse (this process: the one writer)."""
    result = finished.result
    if finished.estimator is not None:
        steps.save_champion(store.target_folder(settings.models_dir, run_id, target), target, options, finished)
    decision = None
    if window and result.champion and result.gate_predictions is not None:
        mine = pl.DataFrame({k: window[k] for k in ("job_id", "p50", "actual")}).join(
            result.gate_predictions.rename({"p50": "challenger"}), on="job_id")
        decision = gate.decide(mine["actual"].to_numpy(), mine["p50"].to_numpy(), mine["challenger"].to_numpy())
        print(f"{target}: gate: {'promoted' if decision.promote else 'kept'} - {decision.reason}")
    with db.writer(settings) as con:
        training.record_target(con, run_id, result, options.features, decision, window["champion"] if window else None)
    return {"target": target, "champion": result.champion, "skipped": result.skipped, "rows": result.rows,
            "skipped_fits": len(result.skipped_fits),
            "decision": None if decision is None else ("promoted" if decision.promote else "kept")}


GPU_POOL = "gpu"
GPU_DEPLOYMENT = "train-models/gpu-train"
_WAITING = {"SCHEDULED", "PENDING", "LATE", "AWAITINGRETRY"}


def gpu_worker_online(pool: str = GPU_POOL) -> bool:
    """True when the work pool exists and at least one of its workers is online."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import WorkerStatus
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(pool)
        except ObjectNotFound:
            return False
        workers = client.read_workers_for_work_pool(work_pool_name=pool)
    return any(w.status == WorkerStatus.ONLINE for w in workers)


def _wait(client, flow_run_id, until: float, waiting: bool):
    """Poll a flow run until it leaves the waiting states (waiting=True) or finishes, or `until` passes."""
    while True:
        run = client.read_flow_run(flow_run_id)
        state = run.state.type.value if run.state else "SCHEDULED"
        done = state not in _WAITING if waiting else run.state is not None and run.state.is_final()
        if done or time.monotonic() >= until:
            return run
        time.sleep(2)


def _logger():
    """The run logger inside a flow or task (so lines reach the Prefect UI), else a plain one."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_logger

    try:
        return get_run_logger()
    except MissingContextError:
        return get_logger("gpucast.train")


def train_where_possible(options: TrainOptions, settings: Settings, history_path: str | None = None,
                         pickup_timeout_s: float = 600, timeout_s: float = 6 * 3600) -> dict:
    """Hand training to the `gpu` pool's deployment when a worker serves it, else train in-process.

    A worker that is online but does not start the run within `pickup_timeout_s` (busy, or
    serving another queue) counts as absent: the run is cancelled and training happens here, so
    a stuck GPU worker never costs the night's forecasts. A run that starts there and fails
    fails this call (it is a real training failure, not a missing worker). The deployment writes
    its results to the warehouse and the registry, so both paths leave the same tables behind
    (the worker reads its own settings and the history from the shared GPUCAST_HOME).
    """
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.states import Cancelled

    logger = _logger()
    if not gpu_worker_online():
        logger.info(f"no online worker in work pool {GPU_POOL!r}: training in-process")
        return {"where": "in-process", **train_models(options, history_path, publish=False, settings=settings)}

    parameters = {"options": options.model_dump(mode="json"), "publish": False}
    flow_run = run_deployment(GPU_DEPLOYMENT, parameters=parameters, timeout=0, as_subflow=True)
    logger.info(f"training handed to work pool {GPU_POOL!r}: flow run {flow_run.id}")
    with get_client(sync_client=True) as client:
        run = _wait(client, flow_run.id, time.monotonic() + pickup_timeout_s, waiting=True)
        if run.state is None or run.state.type.value in _WAITING:
            client.set_flow_run_state(flow_run.id, Cancelled(message="no gpu worker picked it up"), force=True)
            logger.warning(f"work pool {GPU_POOL!r} did not start flow run {flow_run.id} within "
                           f"{pickup_timeout_s:.0f} s: cancelled it, training in-process")
            return {"where": "in-process", "cancelled_flow_run_id": str(flow_run.id),
                    **train_models(options, history_path, publish=False, settings=settings)}
        run = _wait(client, flow_run.id, time.monotonic() + timeout_s, waiting=False)
    if not (run.state and run.state.is_completed()):
        state = run.state.name if run.state else "unknown"
        raise RuntimeError(f"training on the {GPU_POOL!r} pool ended {state} (flow run {flow_run.id}); "
                           f"see: prefect flow-run inspect {flow_run.id}")
    return {"where": f"work pool {GPU_POOL}", "flow_run_id": str(flow_run.id)}
