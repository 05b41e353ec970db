"""No child process outlives `gpucast`, whatever stops it.

Prefect starts its temporary API server (`prefect.server.api.server.SubprocessASGIServer`, a
`python -m uvicorn` child) in the caller's process group. Two things went wrong with that (issue 27):

* a SIGTERM to the whole group (what `timeout`, systemd, Kubernetes and Prefect's own cancellation
  send) reached the server as well as `gpucast`: the server exited while `gpucast` was still recording
  the run as crashed, and Prefect's client then retried the dead API with exponential back-off for
  minutes (every thread idle, seen with py-spy in `PrefectHttpxSyncClient._send_with_retry`);
* a SIGKILL to `gpucast` left the server running, reparented to pid 1, listening, ~250 MB each.

So the server is started in a session of its own (signals sent to `gpucast`'s group do not reach it:
`gpucast` records the run, then Prefect's atexit hook stops the server), and with a thread inside it
that stops it as soon as its parent is gone (kill -9 included). That thread watches `os.getppid()`,
which, unlike Linux's PR_SET_PDEATHSIG, does not fire early when the *thread* that started the server
ends, and works on macOS too. `install()` arranges both without importing Prefect's server module
(1 s and 80 MB that `gpucast sql` does not need): it patches that module when Prefect imports it.

Dask's local workers need nothing of ours: `distributed` gives each worker process a pipe from its
parent and exits the worker when the pipe closes (`distributed.process.AsyncProcess`); the tests in
`tests/reliability/test_sigterm.py` check both kinds of child with real processes.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

SERVER_MODULE = "prefect.server.api.server"
PREFECT_FACTORY = "prefect.server.api.server:create_app"  # the uvicorn factory Prefect's command names
GUARDED_FACTORY = "gpucast.flows.children:create_server_app"
PARENT_PID = "_GPUCAST_SERVER_PARENT_PID"  # a hand-over to the child, not a setting
# uvicorn waits for open connections on SIGTERM without limit; Prefect's `stop` then waits 5 s and
# kills it. With a night's Dask workers connected that took the whole 5 s: bounded at 1 s here.
GRACEFUL_S = 1
POLL_S = 0.5  # how often the server looks for its parent
GRACE_S = 5.0  # what it then gets to stop cleanly (Prefect's own `stop` gives it as long)


def install() -> None:
    """Guard Prefect's temporary server in this process: now if Prefect's server module is loaded,
    else when Prefect imports it."""
    if SERVER_MODULE in sys.modules:
        guard(sys.modules[SERVER_MODULE])
    elif not any(isinstance(f, _GuardOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _GuardOnImport())


def guard(server_module) -> None:
    """Make `server_module` (Prefect's server module) start its uvicorn child guarded, and its `start`
    one caller at a time (`start_server_early`)."""
    if not isinstance(server_module.subprocess, _GuardedSubprocess):
        server_module.subprocess = _GuardedSubprocess()
    server = server_module.SubprocessASGIServer
    if not getattr(server.start, "_gpucast_serialised", False):
        server.start = _serialised(server.start)


_START_LOCK = threading.Lock()


def _serialised(start):
    """Prefect's `SubprocessASGIServer.start` marks the server running before it answers; a second caller
    (the flow, while `start_server_early`'s thread waits for /health) would take it as up and call a
    server that is not listening yet. Under this lock the second caller waits for the first to finish."""

    def locked(self, *args, **kwargs):
        with _START_LOCK:
            return start(self, *args, **kwargs)

    locked._gpucast_serialised = True
    return locked


def start_server_early() -> threading.Thread | None:
    """Start Prefect's temporary API server now, for a command about to run a flow without a configured
    API: its child imports Prefect's whole server (~5-8 s of CPU here) while this process imports what the
    command needs, on the other core, instead of after it. The flow's own `get_client` then finds it
    running (the same `SubprocessASGIServer` instance; `_serialised` makes it wait until it answers).
    Prefect's server module is imported here, in the caller's thread (the flow imports it anyway): the
    thread only starts the child and waits for it, two threads never import at once. A failure is left
    for the flow's own start to meet and report."""
    try:
        from prefect.server.api.server import SubprocessASGIServer
    except ImportError:
        return None

    def start() -> None:
        with contextlib.suppress(Exception):  # the flow starts it again and says what failed
            SubprocessASGIServer().start()

    thread = threading.Thread(target=start, name="prefect-server-early", daemon=True)
    thread.start()
    return thread


class _GuardedSubprocess:
    """`subprocess` as Prefect's server module sees it: its server command gets its own session and
    gpucast's factory (Prefect's app plus the parent watch); everything else is the real module."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(args, **kwargs) -> subprocess.Popen:  # noqa: N802  (stands in for subprocess.Popen)
        args = list(args)
        if PREFECT_FACTORY in args:
            args[args.index(PREFECT_FACTORY)] = GUARDED_FACTORY
            args += ["--timeout-graceful-shutdown", str(GRACEFUL_S)]
            kwargs["env"] = {**(kwargs.get("env") or os.environ), PARENT_PID: str(os.getpid())}
            kwargs["start_new_session"] = True
        return subprocess.Popen(args, **kwargs)


class _GuardOnImport(importlib.abc.MetaPathFinder):
    """Finds Prefect's server module as the other finders would, and guards it once it has run."""

    def find_spec(self, fullname, path, target=None):
        if fullname != SERVER_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return None
        run = spec.loader.exec_module

        def exec_and_guard(module) -> None:
            run(module)
            guard(module)

        spec.loader.exec_module = exec_and_guard  # this file's own loader instance only
        return spec


# In the server process ---------------------------------------------------------------------------

def create_server_app():
    """uvicorn's factory in the server child: Prefect's app, and a thread that stops this server when
    the process that started it is gone."""
    parent = int(os.environ.pop(PARENT_PID, "0")) or os.getppid()
    threading.Thread(target=_stop_when_orphaned, args=(parent,), name="gpucast-parent-watch", daemon=True).start()
    from prefect.server.api.server import create_app

    return create_app()


def _stop_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:  # reparented (to pid 1 or a subreaper) once the parent has died
        time.sleep(POLL_S)
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's own clean shutdown
    time.sleep(GRACE_S)
    os._exit(1)
