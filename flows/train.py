"""Prefect flow `train-models`: every registry model on every target, compared on the same splits."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from gpucast.tasks import features, gate, render
from gpucast.tasks import train as steps
from gpucast.tasks.models import store
from gpucast.tasks.train import TrainOptions
from gpucast.warehouse import backtest, db, forecast, queries, runs, training
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.publish import publish_snapshot
from gpucast.warehouse.settings import Settings


def resolve(options: TrainOptions, settings: Settings) -> TrainOptions:
    """Options with what they leave to the settings filled in (the network's time budget)."""
    if options.nn_max_minutes is None:
        return options.model_copy(update={"nn_max_minutes": settings.nn_max_minutes})
    return options


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
    before they ran, with its P50 and their actual values (the gate's evidence, `tasks/gate.py`)."""
    with db.writer(settings) as con:
        backtest.run(con, settings.backtest_days, datetime.now(UTC))
        champions = {ch.target: ch for ch in forecast.latest_champions(con)}
        windows = {t: backtest.champion_window(con, t, champions[t].train_run_id, settings.backtest_days)
                   for t in targets if t in champions}
    return {t: {"champion": champions[t], **w.to_dict(as_series=False)} for t, w in windows.items()}


@task(name="train-target", task_run_name="train {target}", retries=1, retry_delay_seconds=10)
def train_target(run_id: str, target: str, options: TrainOptions, history_path: str, settings: Settings,
                 window: dict | None = None) -> dict:
    """Train and evaluate on one target, gate the new champion against the current one, write the
    models to the registry and the metrics and decision to the warehouse."""
    folder = store.target_folder(settings.models_dir, run_id, target)
    result = steps.train_target(pl.read_parquet(history_path), target, options, folder, progress=get_run_logger().info,
                                holdout=window["job_id"] if window else None)
    decision = None
    if window and result.champion and result.gate_predictions is not None:
        mine = pl.DataFrame({k: window[k] for k in ("job_id", "p50", "actual")}).join(
            result.gate_predictions.rename({"p50": "challenger"}), on="job_id")
        decision = gate.decide(mine["actual"].to_numpy(), mine["p50"].to_numpy(), mine["challenger"].to_numpy())
        get_run_logger().info(f"{target}: gate: {'promoted' if decision.promote else 'kept'} - {decision.reason}")
    with db.writer(settings) as con:
        training.record_target(con, run_id, result, options.features, decision, window["champion"] if window else None)
    return {"target": target, "champion": result.champion, "skipped": result.skipped, "rows": result.rows,
            "decision": None if decision is None else ("promoted" if decision.promote else "kept")}


@flow(name="train-models", log_prints=True)
def train_models(options: TrainOptions | None = None, history_path: str | None = None, publish: bool = True,
                 settings: Settings | None = None) -> dict:
    """Retrain every model on the warehouse's labelled jobs; record metrics and champions.

    `history_path`: the labelled history already staged by the caller (the nightly's features
    step); else it is read here, once. `publish` refreshes the planners' copy at the end (the
    nightly flow publishes once, itself).
    """
    from gpucast.tasks.models.transformer_bigru import pick_device

    settings = (settings or Settings.from_env()).ensure()
    options = resolve(options or TrainOptions(), settings)
    used = pick_device(options.device)
    with runs.lifecycle(settings, "train", models=list(options.model_names), preset=options.preset,
                        repeats=options.repeats, device=used) as run:
        print(f"{run.run_id}: {len(options.model_names)} model(s) x {len(options.targets)} target(s), preset "
              f"{options.preset}, {options.repeats} repeat(s), on {used}")
        history = history_path or read_history(settings, options.max_rows, run.staging / "history.parquet")
        windows = gate_windows(settings, options.targets)
        outcomes = []
        for target in options.targets:
            outcomes.append(train_target(run.run_id, target, options, history, settings, windows.get(target)))
            failpoint("train:after-first-target")
        skipped = "; ".join(f"{o['target']}: {o['skipped']}" for o in outcomes if o["skipped"]) or None
        with db.writer(settings) as con:  # under the lock, so no run can start between the two
            runs.finish(con, "train", run.run_id, "succeeded", skipped)
            pruned = store.prune(settings.models_dir, training.runs_to_keep(con, settings.keep_train_runs))
    if pruned:
        print(f"removed the model folders of {len(pruned)} older train run(s) (keeping {settings.keep_train_runs}, "
              "GPUCAST_KEEP_TRAIN_RUNS)")
    if publish:
        publish_snapshot(settings)
    report = render.train_markdown(run.run_id, *queries.train_tables(settings.db_path, run.run_id))
    create_markdown_artifact(key="train-report", markdown=report, description=f"metrics of {run.run_id}")
    return {"train_run_id": run.run_id, "device": used, "targets": outcomes}


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
