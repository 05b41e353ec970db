"""Handing a night's training to the `gpu` work pool, when a worker serves it.

The nightly calls `train_where_possible`: when a worker of the pool is online, the `train-models/gpu-train`
deployment runs with the nightly's own train options (the night budget and the network's minutes
included) and cluster settings (`--train-runner`, `--dask-address`, the worker count), so the GPU machine
trains exactly as the nightly would have; only the machine differs. Its results go to the shared
warehouse and model registry (the worker reads the history from the shared GPUCAST_HOME), so both
paths leave the same tables behind (`train_runs` records what each run was given).
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from datetime import datetime

from gpucast.flows.settings import Settings, with_time_limits
from gpucast.flows.train import train_models
from gpucast.records.results import IN_PROCESS, TrainResult
from gpucast.tasks.learn.options import TrainOptions
from gpucast.warehouse import db, training

GPU_POOL = "gpu"
GPU_DEPLOYMENT = "train-models/gpu-train"
ON_THE_POOL = f"work pool {GPU_POOL}"  # `TrainResult.where` of a run the pool's worker trained
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


def handoff_parameters(options: TrainOptions, settings: Settings, backtest_fresh: bool = False,
                       as_of: datetime | None = None) -> dict:
    """The deployment run's parameters: everything the nightly was given about training, its time
    limits filled in from the nightly's settings (not left to the worker's environment), where the fits
    run, and the backtest window the champion gate reads (`backtest_fresh`: the nightly recomputed it; `as_of`: the
    night's clock the window is anchored at, ISO 8601, sent only when given, so a live night's hand-off still
    suits a worker whose checkout predates the parameter). Storage is not sent: the worker has its own path to the
    shared GPUCAST_HOME."""
    given = {"as_of": as_of.isoformat()} if as_of else {}
    return {"options": with_time_limits(options, settings.training).model_dump(mode="json"),
            "cluster": asdict(settings.cluster), "quality": asdict(settings.quality), "publish": False,
            "backtest_fresh": backtest_fresh, **given}


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
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_logger

    try:
        return get_run_logger()
    except MissingContextError:
        return get_logger("gpucast.train")


def train_where_possible(options: TrainOptions, settings: Settings, history_path: str | None = None,
                         pickup_timeout_s: float = 600, timeout_s: float = 6 * 3600,
                         backtest_fresh: bool = False, as_of: datetime | None = None) -> TrainResult:
    """Hand training to the `gpu` pool's deployment when a worker serves it, else train in-process.

    A worker that is online but does not start the run within `pickup_timeout_s` (busy, or
    serving another queue) counts as absent: the run is cancelled and training happens here, so
    a stuck GPU worker never costs the night's forecasts. A run that starts there and fails
    fails this call (it is a real training failure, not a missing worker). Either way the result is a
    `TrainResult`: the pool's is read back from what its run wrote to the shared warehouse (`pool_result`).
    `backtest_fresh`: the caller recomputed the backtest window this night (the nightly): the run's gate reads it.
    `as_of`: the night's clock (a backfill's `--as-of`): the gate's window ends there, as the backtest step's did.
    """
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.states import Cancelled

    logger = _logger()
    options = with_time_limits(options, settings.training)  # the time limits it leaves None: the nightly's settings'
    here = {"options": options, "history_path": history_path, "publish": False, "storage": settings.storage,
            "cluster": settings.cluster, "quality": settings.quality, "tracing": settings.tracing,
            "backtest_fresh": backtest_fresh, "as_of": as_of}
    if not gpu_worker_online():
        logger.info(f"no online worker in work pool {GPU_POOL!r}: training in-process")
        return replace(train_models(**here), where=IN_PROCESS)
    flow_run = run_deployment(GPU_DEPLOYMENT, parameters=handoff_parameters(options, settings, backtest_fresh, as_of),
                              timeout=0, as_subflow=True)
    logger.info(f"training handed to work pool {GPU_POOL!r}: flow run {flow_run.id}")
    with get_client(sync_client=True) as client:
        run = _wait(client, flow_run.id, time.monotonic() + pickup_timeout_s, waiting=True)
        if run.state is None or run.state.type.value in _WAITING:
            client.set_flow_run_state(flow_run.id, Cancelled(message="no gpu worker picked it up"), force=True)
            logger.warning(f"work pool {GPU_POOL!r} did not start flow run {flow_run.id} within "
                           f"{pickup_timeout_s:.0f} s: cancelled it, training in-process")
            return replace(train_models(**here), where=IN_PROCESS, cancelled_flow_run_id=str(flow_run.id))
        run = _wait(client, flow_run.id, time.monotonic() + timeout_s, waiting=False)
    if not (run.state and run.state.is_completed()):
        state = run.state.name if run.state else "unknown"
        raise RuntimeError(f"training on the {GPU_POOL!r} pool ended {state} (flow run {flow_run.id}); "
                           f"see: prefect flow-run inspect {flow_run.id}")
    return pool_result(settings, str(flow_run.id), options.targets)


def pool_result(settings: Settings, flow_run_id: str, targets: tuple[str, ...]) -> TrainResult:
    """The `TrainResult` of the pool's completed flow run, from what it wrote to the shared warehouse (its
    `train_runs` row, found by the flow run's id, and the champions and gate decisions it recorded): the same
    type the in-process path returns, `where` saying the pool trained."""
    with db.writer(settings.storage) as con:
        result = training.train_result(con, flow_run_id, ON_THE_POOL, targets)
    if result is None:
        raise RuntimeError(f"training on the {GPU_POOL!r} pool completed (flow run {flow_run_id}) but no succeeded train "
                           f"run of it is in {settings.storage.db_path}: does the worker's GPUCAST_HOME name the "
                           "nightly's warehouse?")
    return result
