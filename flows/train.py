"""Prefect flow `train-models`: every registry model on every target, compared on the same splits."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from gpucast.tasks import contract as c
from gpucast.tasks import train as steps
from gpucast.tasks.models.registry import REGISTRY
from gpucast.tasks.models.transformer_bigru import pick_device
from gpucast.warehouse import db, training
from gpucast.warehouse.housekeeping import failpoint, sweep_orphans
from gpucast.warehouse.publish import publish_snapshot
from gpucast.warehouse.report import train_report
from gpucast.warehouse.settings import Settings, env_number


@task(name="train-target", task_run_name="train {target}", retries=1, retry_delay_seconds=10)
def train_target(run_id: str, target: str, models: list[str], preset: str, repeats: int, seed: int,
                 min_labelled: int, device: str | None, epochs: int | None,
                 max_rows: int | None = training.DEFAULT_MAX_TRAIN_ROWS, nn_max_minutes: float = 0.0) -> dict:
    """Train and evaluate on one target; write models to the registry and metrics to the warehouse."""
    logger = get_run_logger()
    settings = Settings.from_env()
    job_logs = training.read_training_jobs(settings, max_rows)
    result = steps.train_target(job_logs, target, models, settings.models_dir / run_id, preset=preset,
                                repeats=repeats, seed=seed, min_labelled=min_labelled, device=device,
                                epochs=epochs, progress=logger.info, nn_max_seconds=nn_max_minutes * 60 or None)
    if result.test_predictions is not None:
        result.test_predictions.write_parquet(Path(result.model_dir) / "test_predictions.parquet")
    with db.writer(settings) as con:
        training.record_target(con, run_id, result)
    return {"target": target, "champion": result.champion, "skipped": result.skipped, "rows": result.rows}


@flow(name="train-models", log_prints=True)
def train_models(
    targets: list[str] | None = None,
    models: list[str] | None = None,
    preset: str = "paper",
    repeats: int = 3,
    seed: int = 0,
    min_labelled: int = steps.DEFAULT_MIN_LABELLED,
    device: str | None = None,
    epochs: int | None = None,
    publish: bool = True,
    max_rows: int | None = training.DEFAULT_MAX_TRAIN_ROWS,
    nn_max_minutes: float | None = None,
) -> dict:
    """Retrain every model on the warehouse's labelled jobs; record metrics and champions.

    `publish` refreshes the planners' copy at the end (the nightly flow publishes once, itself).
    `max_rows` caps the labelled history to the most recent COMPLETED jobs (None: all of them).
    `nn_max_minutes` is the Transformer-BiGRU's time budget per fit (default: env
    GPUCAST_NN_MAX_MINUTES, else 20; 0: no limit).
    """
    if nn_max_minutes is None:
        nn_max_minutes = env_number(steps.NN_MAX_MINUTES_ENV, steps.DEFAULT_NN_MAX_MINUTES)
    targets = targets or list(c.TARGETS)
    models = models or list(REGISTRY)
    unknown = [t for t in targets if t not in c.TARGETS] + [m for m in models if m not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown target(s) or model(s): {', '.join(unknown)}; targets: {', '.join(c.TARGETS)}; "
                         f"models: {', '.join(REGISTRY)}")
    settings = Settings.from_env().ensure()
    run_id = f"train-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    used = pick_device(device)
    sweep_orphans(settings)
    with db.writer(settings) as con:
        training.start_train_run(con, run_id, models, preset, repeats, used)
    print(f"{run_id}: {len(models)} model(s) x {len(targets)} target(s), preset {preset}, {repeats} repeat(s), on {used}")
    try:
        outcomes = []
        for t in targets:
            outcomes.append(train_target(run_id, t, models, preset, repeats, seed, min_labelled, device, epochs, max_rows,
                                         nn_max_minutes))
            failpoint("train:after-first-target")
    except Exception as exc:
        with db.writer(settings) as con:
            training.finish_train_run(con, run_id, "failed", f"{type(exc).__name__}: {exc}"[:2000])
        if publish:
            publish_snapshot(settings)
        raise
    skipped = "; ".join(f"{o['target']}: {o['skipped']}" for o in outcomes if o["skipped"]) or None
    keep = env_number(training.KEEP_RUNS_ENV, training.DEFAULT_KEEP_RUNS, int)
    with db.writer(settings) as con:
        training.finish_train_run(con, run_id, "succeeded", skipped)
        pruned = training.prune_model_folders(con, settings.models_dir, keep)
    if pruned:
        print(f"removed the model folders of {len(pruned)} older train run(s) (keeping {keep}, {training.KEEP_RUNS_ENV})")
    if publish:
        publish_snapshot(settings)
    report = train_report(settings, run_id)
    create_markdown_artifact(key="train-report", markdown=report, description=f"metrics of {run_id}")
    return {"train_run_id": run_id, "device": used, "targets": outcomes}


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


def train_where_possible(pickup_timeout_s: float = 600, timeout_s: float = 6 * 3600, **parameters) -> dict:
    """Hand training to the `gpu` pool's deployment when a worker serves it, else train in-process.

    A worker that is online but does not start the run within `pickup_timeout_s` (busy, or
    serving another queue) counts as absent: the run is cancelled and training happens here, so
    a stuck GPU worker never costs the night's forecasts. A run that starts there and fails
    fails this call (it is a real training failure, not a missing worker). The deployment writes
    its results to the warehouse and the registry, so both paths leave the same tables behind.
    """
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.states import Cancelled

    logger = _logger()
    if not gpu_worker_online():
        logger.info(f"no online worker in work pool {GPU_POOL!r}: training in-process")
        return {"where": "in-process", **train_models(**parameters)}

    flow_run = run_deployment(GPU_DEPLOYMENT, parameters=parameters, timeout=0, as_subflow=True)
    logger.info(f"training handed to work pool {GPU_POOL!r}: flow run {flow_run.id}")
    with get_client(sync_client=True) as client:
        run = _wait(client, flow_run.id, time.monotonic() + pickup_timeout_s, waiting=True)
        if run.state is None or run.state.type.value in _WAITING:
            client.set_flow_run_state(flow_run.id, Cancelled(message="no gpu worker picked it up"), force=True)
            logger.warning(f"work pool {GPU_POOL!r} did not start flow run {flow_run.id} within "
                           f"{pickup_timeout_s:.0f} s: cancelled it, training in-process")
            return {"where": "in-process", "cancelled_flow_run_id": str(flow_run.id), **train_models(**parameters)}
        run = _wait(client, flow_run.id, time.monotonic() + timeout_s, waiting=False)
    if not (run.state and run.state.is_completed()):
        state = run.state.name if run.state else "unknown"
        raise RuntimeError(f"training on the {GPU_POOL!r} pool ended {state} (flow run {flow_run.id}); "
                           f"see: prefect flow-run inspect {flow_run.id}")
    return {"where": f"work pool {GPU_POOL}", "flow_run_id": str(flow_run.id)}
