"""A child process's watch on the process that started it: act once that parent is gone, however it ended.

Used by a trace's child process (`tasks/learn/traced.py`: it exits at once) and the temporary Prefect server
(`flows/children.py`: it stops cleanly), so neither outlives a `kill -9` of gpucast. It lives with the trace, its
first user (tasks/ is grouped by stage, tests/test_layout.py).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable


def watch_parent(parent: int, on_orphan: Callable[[], object], poll_s: float, name: str) -> threading.Thread:
    """Start a daemon thread (named `name`) that calls `on_orphan` once `parent` is no longer this process's parent:
    reparented to pid 1 or a subreaper, as a process is once its parent has died, SIGKILL included. `parent` is
    handed over by the parent itself (its pid) rather than read here, as it may be gone already by now.

    Polling `os.getppid()` every `poll_s` seconds rather than Linux's PR_SET_PDEATHSIG: that signal fires when the
    *thread* that started the child ends, and children are started from Prefect's and Dask's worker threads, which
    may end while the process goes on (a healthy child would be killed); it is Linux-only too, and this works on
    macOS. The thread runs as long as the process's own work lets Python threads run (every few milliseconds in
    the pure-Python code of a trace or a server)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        on_orphan()

    thread = threading.Thread(target=watch, name=name, daemon=True)
    thread.start()
    return thread
