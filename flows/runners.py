"""Where task runs go: Dask (a cluster given by address, or a local one) or this process.

One decision for training and scoring (`choose_runner`), and the Dask plumbing both use: sharing
rows with every worker, routing network fits to GPU workers, ordering by priority, collecting
results as they finish. Training fans out to a local cluster when no address is given (fits are
independent CPU work); scoring only uses a cluster it is given (in one process it is as fast).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from prefect.futures import PrefectFuture, as_completed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from gpucast.flows import children
from gpucast.flows.environment import cores_here
from gpucast.flows.settings import Cluster

DASK_CONNECT_TIMEOUT_S = 10
DASHBOARD_PORT = 8787  # Dask's own: the local cluster's dashboard when it is free (`dashboard_address`)


@dataclass(frozen=True)
class RunnerChoice:
    """The task runner chosen, and a note when it is not the one asked for (said in the run's message)."""

    runner: TaskRunner | None  # None: this process, without a task runner of its own
    note: str | None = None


def choose_runner(cluster: Cluster, local_cluster: bool, scratch: Path | None = None) -> RunnerChoice:
    """The runner for a fan-out, from the cluster settings.

    `train_runner=local`: this process, one task after another. A `dask_address`: that scheduler when it
    answers within `DASK_CONNECT_TIMEOUT_S`, else this process with the reason as the note. No address:
    a local cluster of `dask_workers` processes (one per core by default), one thread each, reporting to
    this run's Prefect API, its dashboard on `dask_dashboard_host` (127.0.0.1), its workers' scratch space
    in `scratch` (the run's staging folder, under GPUCAST_HOME and removed with it; Dask's default,
    `$TMPDIR/dask-scratch-space`, stayed behind outside the data directory), when `local_cluster`; else
    this process.
    """
    if cluster.train_runner == "local" and local_cluster:
        return RunnerChoice(ThreadPoolTaskRunner(max_workers=1))
    from prefect_dask import DaskTaskRunner  # imported when fanning out, not by every CLI command

    logging.getLogger("distributed").setLevel(logging.WARNING)  # the scheduler's INFO lines drown the run's
    if cluster.dask_address:
        if problem := dask_unreachable(cluster.dask_address, DASK_CONNECT_TIMEOUT_S):
            return RunnerChoice(ThreadPoolTaskRunner(max_workers=1) if local_cluster else None, (
                f"Dask scheduler {cluster.dask_address} (GPUCAST_DASK_ADDRESS) did not answer within "
                f"{DASK_CONNECT_TIMEOUT_S} s ({problem}): ran in-process"))
        return RunnerChoice(DaskTaskRunner(address=cluster.dask_address))
    if not local_cluster:
        return RunnerChoice(None)
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:  # the temporary local API's URL, when that is what runs
        api_url = str(client.api_url)
    workers = cluster.dask_workers or os.cpu_count() or 1
    env = {"PREFECT_API_URL": api_url, "DASK_LOGGING__DISTRIBUTED": "warning"}
    # the dashboard on GPUCAST_DASK_DASHBOARD_HOST (this machine by default): Dask's own default listens on
    # every interface (0.0.0.0:8787) while printing http://127.0.0.1:8787/status
    kwargs = {"n_workers": workers, "threads_per_worker": 1, "processes": True, "env": env,
              "dashboard_address": dashboard_address(cluster.dask_dashboard_host, DASHBOARD_PORT),
              "preload": [children.__name__]}  # preload: out of our group
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
        kwargs["local_directory"] = str(scratch)  # the workers' (and their nannies')
        kwargs["scheduler_kwargs"] = {"local_directory": str(scratch)}  # the scheduler's, in this process
    return RunnerChoice(DaskTaskRunner(cluster_kwargs=kwargs))


def dashboard_address(host: str, port: int) -> str:
    """The local cluster's dashboard address: `port` on `host` when it is free there, else any free port (`:0`).
    Dask itself, given a port in use, takes another one but warns "Port 8787 is already in use. Perhaps you already
    have a cluster running?" (a second gpucast run, a notebook's cluster), which nobody can act on: the run's
    message carries the link it took (`describe`). A host that does not resolve is left for Dask to refuse."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError):
        free = True
    else:
        free = all(_can_bind(family, address) for family, _, _, _, address in addresses)
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port if free else 0}"


def _can_bind(family: int, address: tuple) -> bool:
    """Whether a listening socket could bind `address` now (as Tornado binds Dask's dashboard: SO_REUSEADDR)."""
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError):
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            probe.bind(address)
        except OSError:
            return False
    return True


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


def threads_here() -> int:
    """Cores one task may use where it runs: one on a Dask worker (a worker runs as many tasks at once as
    it has threads, so each keeps to one, as Dask's nanny also tells OpenMP), else `cores_here()`."""
    try:
        from distributed import get_worker

        get_worker()
        return 1
    except (ImportError, ValueError):  # ValueError: not on a worker
        return cores_here()


def on_dask(runner) -> bool:
    from prefect_dask import DaskTaskRunner

    return isinstance(runner, DaskTaskRunner)


def share(runner, rows: dict[str, pl.DataFrame]) -> dict:
    """The rows, sent once to a Dask cluster and copied to every worker (each task of a key refers to
    that copy). Sent as a small task rather than `scatter`ed: a worker lost with the only copy of
    scattered data took every task depending on it with it ("lost dependencies", seen in
    tests/flows/test_dask_training.py), while a task's result is recomputed from its spec."""
    if not on_dask(runner):
        return rows
    shared = {k: runner.client.submit(_same, r, key=f"rows-{k}-{uuid.uuid4().hex[:8]}") for k, r in rows.items()}
    runner.client.replicate(list(shared.values()))  # waits for them, then copies them to every worker
    return shared


def _same(rows: pl.DataFrame) -> pl.DataFrame:
    return rows


def gpu_resource(runner) -> dict | None:
    """{"GPU": 1} when a worker of the Dask cluster advertises a GPU resource (`dask worker
    --resources GPU=1`): network fits then wait for such a worker. Otherwise None (they run on CPU)."""
    if not on_dask(runner):
        return None
    workers = runner.client.scheduler_info(n_workers=-1)["workers"].values()
    return {"GPU": 1} if any(w.get("resources", {}).get("GPU", 0) >= 1 for w in workers) else None


def describe(runner) -> str:
    """Where the tasks run, in words (with the Dask dashboard's link when there is one)."""
    if not on_dask(runner):
        return "this process (one fit at a time)"
    info = runner.client.scheduler_info(n_workers=-1)
    where = runner.address or "a local cluster"
    link = runner.client.dashboard_link if "dashboard" in info.get("services", {}) else None
    return f"Dask at {where}: {len(info['workers'])} worker(s)" + (f", dashboard {link}" if link else "")


@contextlib.contextmanager
def annotate(runner, annotations: dict):
    """Dask annotations (priority keeps the night's order; resources route network fits to GPUs)."""
    if on_dask(runner):
        import dask

        with dask.annotate(**annotations):
            yield
    else:
        yield


def as_finished(pending: dict[PrefectFuture, object]) -> Iterator[tuple[object, object | BaseException]]:
    """(what each future was for, its result or the exception it raised), as each future ends."""
    for future in as_completed(list(pending)):
        try:
            yield pending[future], future.result()
        except Exception as exc:  # noqa: BLE001  (handed to the caller, which records it)
            yield pending[future], exc
