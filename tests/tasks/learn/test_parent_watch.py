"""`watch_parent`: the one watch that the temporary Prefect server and a trace's child keep on their parent. The real
processes, killed with SIGKILL, are tested in tests/tasks/learn/test_traced.py and tests/reliability/test_sigterm.py."""

from __future__ import annotations

import os
import threading

from gpucast.tasks.learn.parent_watch import watch_parent


def test_the_watch_acts_once_the_parent_is_gone_and_not_before():
    orphaned, kept = threading.Event(), threading.Event()
    watch_parent(os.getppid(), kept.set, 0.01, "test-parent-here")  # our parent: still there
    watch_parent(-1, orphaned.set, 0.01, "test-parent-gone")  # a parent that is not ours (any more)
    assert orphaned.wait(2.0)
    assert not kept.wait(0.2)
