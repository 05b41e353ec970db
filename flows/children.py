"""The temporary Prefect API server a command runs against, started and stopped by gpucast itself.

Where no Prefect API is configured (`PREFECT_API_URL`, in the environment or the active profile), a
flow command needs a local one (SQLite under `PREFECT_HOME`). Prefect would start its own
(`SubprocessASGIServer`, a uvicorn child in the caller's process group). Two things went wrong with
that (issue 27):

* a SIGTERM to the whole group (what `timeout`, systemd, Kubernetes and Prefect's own cancellation
  send) reached the server as well as `gpucast`: the server exited while `gpucast` was still recording
  the run as crashed, and Prefect's client then retried the dead API with exponential back-off for
  minutes (every thread idle, seen with py-spy in `PrefectHttpxSyncClient._send_with_retry`);
* a SIGKILL to `gpucast` left the server running, reparented to pid 1, listening, ~250 MB each.

So gpucast starts the server itself, with public means only (issue 39, item 3: no patching of
Prefect's modules): `python -m uvicorn --factory gpucast.flows.children:create_server_app` on a free
loopback port, in a session of its own (`start_new_session`: signals sent to `gpucast`'s group do not
reach it), the factory being Prefect's public `create_app(ephemeral=True)` (no UI, no background
services, as Prefect's own temporary server) plus a thread that stops the server as soon as its parent
is gone (kill -9 included: `tasks/learn/parent_watch.py`, which says why it polls `os.getppid()`). The command
runs with `PREFECT_API_URL` pointing at it (`temporary_settings` in this
process, the environment for the processes it starts), so Prefect never starts a server of its own;
the server is stopped when the interpreter exits (atexit, as Prefect's own; `cli/process.py` `_exit_stopped` runs
those hooks after a SIGTERM, once the run is recorded).

The server is started before the command imports what it needs (`start`), so its child imports
Prefect's server (~5-8 s of CPU here) on the other core meanwhile. Nothing waits for it: gpucast makes
the listening socket and hands it to uvicorn (`--fd`), so the first flow's first request waits in the
socket's queue until the app serves it (a request never meets a refused connection).

Dask's local workers leave `gpucast`'s process group as they start (`dask_setup`, loaded by each worker as a
Dask preload module): a SIGTERM to the group killed them at once, their nannies (in `gpucast`'s process) restarted
them while `gpucast` was stopping, and the two new workers' imports on a busy 2-core machine delayed the stop past
10 s (seen in tests/reliability/test_sigterm.py). Out of the group, they are stopped by the cluster's close as
`gpucast` unwinds; after a SIGKILL, `distributed` exits each worker when the pipe from its parent closes
(`distributed.process.AsyncProcess`). The tests in `tests/reliability/test_sigterm.py` check both kinds of child
with real processes.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from gpucast.warehouse.errors import redact

FACTORY = "gpucast.flows.children:create_server_app"
PARENT_PID = "_GPUCAST_SERVER_PARENT_PID"  # a hand-over to the child, not a setting
# uvicorn waits for open connections on SIGTERM without limit; with a night's Dask workers connected
# a stop took 5 s: bounded at 1 s here.
GRACEFUL_S = 1
STOP_WAIT_S = 5.0  # then it is killed (Prefect's own `stop` gives it as long)
POLL_S = 0.5  # how often the server looks for its parent
GRACE_S = 5.0  # what it then gets to stop cleanly
BACKLOG = 128  # requests the listening socket queues while the server starts (a night's Dask workers included)


@dataclass
class TemporaryServer:
    """A temporary API server: its process and its API address (`http://127.0.0.1:PORT/api`)."""

    process: subprocess.Popen
    url: str

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM (uvicorn's clean shutdown, bounded by GRACEFUL_S), then SIGKILL after STOP_WAIT_S."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_server: TemporaryServer | None = None  # the one this process started, reused by later commands in it


def launch() -> TemporaryServer:
    """Start a temporary API server of its own (not this process's shared one: `start`). It does not wait for
    the server to answer: the listening socket is made here and handed to uvicorn (`--fd`), so a request
    sent while the server starts waits in the socket's queue until Prefect's app serves it (uvicorn
    accepts once the app's lifespan has started). Stopped when the interpreter exits, or by `stop()`."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(BACKLOG)
        port = listener.getsockname()[1]
        command = [sys.executable, "-m", "uvicorn", "--factory", FACTORY, "--fd", str(listener.fileno()),
                   "--log-level", "error", "--lifespan", "on", "--timeout-graceful-shutdown", str(GRACEFUL_S)]
        process = subprocess.Popen(command, env={**os.environ, PARENT_PID: str(os.getpid())},
                                   pass_fds=(listener.fileno(),), start_new_session=True)
    # (closed here: once the server has exited, nobody holds the socket and a request fails at once)
    server = TemporaryServer(process, f"http://127.0.0.1:{port}/api")
    atexit.register(server.stop)
    return server


def start() -> TemporaryServer:
    """This process's temporary API server, the one its commands share: started by the first (`launch`),
    returned to the later ones while it runs."""
    global _server
    if _server is None or not _server.alive():
        _server = launch()
    return _server


def temporary_url() -> str | None:
    """The API address of the temporary server this process runs, if it runs one."""
    return _server.url if _server is not None and _server.alive() else None


@contextlib.contextmanager
def serving(server: TemporaryServer | None) -> Iterator[None]:
    """Run what is inside against `server`: Prefect's settings in this process (its flow and
    task runs, Dask workers through the serialised settings context) and PREFECT_API_URL in the environment
    of the processes started meanwhile; flow-run heartbeats off for this process's flow runs
    (`without_heartbeats`: a setting the environment cannot carry, so a process started meanwhile keeps Prefect's
    default; gpucast starts none that runs a flow). Nothing when `server` is None (an API is configured: its
    site's settings, heartbeats included, stay as they are)."""
    if server is None:
        yield
        return
    from prefect.settings import PREFECT_API_URL, temporary_settings

    before = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = server.url
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.url}), without_heartbeats():
            yield
    finally:
        if before is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = before


def api_problem(url: str, timeout_s: float) -> str | None:
    """Why the configured Prefect API at `url` cannot run a command's flows, as the start of one line (any URI's
    secrets masked); None when it answers its health check (`GET <url>/health`) within `timeout_s` (the command's
    `GPUCAST_PREFECT_API_CHECK_S`, `Cluster.prefect_api_check_s`: 15 s unless set).

    Asked once, before a flow command starts, through Prefect's own client (a site's auth, headers and TLS settings
    apply) with `timeout_s` per request and no retries, as `gpucast status` asks (`flows/status.py`). Without it, an
    API at a dead port or answering 404 ended the command in Prefect's traceback (exit 1, 113 lines) after ~10 s of
    retries, and a server that accepts connections and never answers held it silent for 437 s first (issue 48,
    item 6). Never raises: a URL Prefect's settings refuse (`http://[bad`) raised pydantic's ValidationError from
    inside Prefect, a traceback and exit 1."""
    if why := _url_problem(url):
        return f"the Prefect API at {redact(url)} (PREFECT_API_URL) {why}"
    try:
        failed = _health_check(url, timeout_s)
    except Exception as exc:  # noqa: BLE001  (anything Prefect's client raises is this one line, not a traceback)
        failed = exc
    if failed is None:
        return None
    import httpx

    status = getattr(getattr(failed, "response", None), "status_code", None)
    said = (redact(str(failed)).strip().splitlines() or [""])[0][:200]  # masked before the cut (`redact`)
    if status:
        why = f"answered HTTP {status} to its health check (is it the server's API address, ending in /api?)"
    elif isinstance(failed, httpx.TimeoutException):
        why = f"did not answer its health check within {timeout_s:g} s ({type(failed).__name__})"
    else:
        why = f"cannot be reached ({type(failed).__name__}: {said})"
    return f"the Prefect API at {redact(url)} (PREFECT_API_URL) {why}"


def _url_problem(url: str) -> str | None:
    """Why `url` cannot be an API's address at all, else None. The URL parser's own words are not quoted: they may
    hold a piece of a password (a port "that cannot be cast" is what follows the first `:` of `user:password`)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (reading it checks it)
    except ValueError:
        return ("is not a valid URL: its host or port cannot be read (a password holding `/`, `?`, `#` or `@` must be "
                "percent-encoded)")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL with a host, such as http://127.0.0.1:4200/api"
    return None


def _health_check(url: str, timeout_s: float) -> BaseException | None:
    """Prefect's health check of the API at `url`, `timeout_s` per request and no retries: its error, or None."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_REQUEST_TIMEOUT, PREFECT_API_URL, PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    bounded = {PREFECT_API_URL: url, PREFECT_API_REQUEST_TIMEOUT: timeout_s, PREFECT_CLIENT_MAX_RETRIES: 0}
    with temporary_settings(updates=bounded), get_client(sync_client=True) as client:
        return client.api_healthcheck()


def without_heartbeats():
    """Prefect's settings with flow-run heartbeats off, for runs against a server that ends with its process.

    In the Prefect installed here (3.9.1; the default became 180 s in PrefectHQ/prefect#21058) every flow run
    starts a thread that sends a heartbeat event at once and then every 180 s (`PREFECT_FLOWS_HEARTBEAT_FREQUENCY`),
    for an automation on a long-lived server to mark a run whose process died as crashed. The thread sleeps in
    1-second steps and a synchronous flow run waits for it (up to 2 s) to notice its end: ~0.4 s per flow run
    measured, 5 to 7 flow runs a nightly (docs/testing.md). A temporary server
    stops with its command, so no automation can ever read those heartbeats: they are switched off there. The
    setting cannot say "off" through the environment (it takes whole seconds >= 30), hence Prefect's
    `temporary_settings`."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    return temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})


# In the server process ---------------------------------------------------------------------------

def create_server_app():
    """uvicorn's factory in the server child: Prefect's app as its temporary server has it (no UI, no
    background services), and a thread that stops this server when the process that started it is gone."""
    from gpucast.tasks.learn.parent_watch import watch_parent

    parent = int(os.environ.pop(PARENT_PID, "0")) or os.getppid()
    watch_parent(parent, _stop_orphaned, POLL_S, "gpucast-parent-watch")
    from prefect.server.api.server import create_app

    return create_app(ephemeral=True, final=True)


def _stop_orphaned() -> None:
    """The server's parent is gone: uvicorn's own clean shutdown, and exit `GRACE_S` later whatever it is doing."""
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_S)
    os._exit(1)


def dask_setup(worker) -> None:
    """Dask's preload hook, run in each local worker process as it starts (`flows/runners.py` passes this module as
    `preload`): the worker leaves `gpucast`'s process group, so a signal to the group reaches `gpucast` alone and
    `gpucast` stops its workers (see the module's doc)."""
    os.setpgid(0, 0)
