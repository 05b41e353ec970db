"""Run exclusivity, staging folders that survive a killed process, and crash-test failpoints.

* `exclusive_run`: one nightly run at a time. A second one exits at once with a message naming
  the holder (the lock is an `fcntl` lock: the kernel drops it when its process dies, even by
  SIGKILL, so a crashed run never blocks the next night).
* `claim_staging` / `sweep_staging`: each run stages under `staging/<run id>/` with an
  `owner.pid` file; runs remove their own folder (`runs.lifecycle`), and every run first removes
  folders whose owner is no longer alive (a run killed half-way), plus temporary copies of a
  killed publish.
* `failpoint`: a named point where a crash test may stop the process (after staging, inside a
  commit, before a rename). It does nothing unless a test installed a hook (`install_failpoint_hook`,
  from `tests/failpoints.py`, which runs the CLI with one); production code never reads a failpoint
  from the environment or anywhere else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from gpucast.warehouse.concerns import Storage
from gpucast.warehouse.db import WarehouseBusy, file_lock

OWNER_FILE = "owner.pid"
UNOWNED_GRACE_S = 3600  # a staging folder without an owner file is left alone this long


class AlreadyRunning(WarehouseBusy):
    """Another run of the same kind holds its lock."""


EXCLUSIVE_RUNS = ("nightly",)  # the runs of which one at a time may run (`exclusive_run`)


def run_lock_path(storage: Storage, name: str) -> Path:
    """`<home>/<name>.lock`: the lock of the exclusive run `name`."""
    return storage.home / f"{name}.lock"


def exclusive_run(storage: Storage, name: str) -> contextlib.AbstractContextManager[None]:
    """Hold `<home>/<name>.lock` for the duration, or raise AlreadyRunning naming the holder at once."""
    path = run_lock_path(storage, name)
    return file_lock(path, 0.0, lambda holder: AlreadyRunning(
        f"another {name} run is in progress ({holder}; lock {path}); this one exits without touching "
        "anything: wait for it, or check it with `gpucast status`"))


def claim_staging(folder: Path) -> Path:
    """Create a run's staging folder and mark it as this process's."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / OWNER_FILE).write_text(str(os.getpid()))
    return folder


def sweep_staging(storage: Storage, alive: Callable[[int], bool]) -> list[Path]:
    """Remove staging folders whose owner process is gone, temporaries of a killed publish, and spill
    folders of killed `gpucast sql` queries."""
    removed: list[Path] = []
    if storage.staging_dir.exists():
        for folder in storage.staging_dir.iterdir():
            try:
                pid = int((folder / OWNER_FILE).read_text())
            except (OSError, ValueError):
                # no owner file: older than this scheme, or killed before writing it; judge by age
                if time.time() - folder.stat().st_mtime < UNOWNED_GRACE_S:
                    continue
                pid = -1
            if pid != os.getpid() and (pid < 0 or not alive(pid)):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    for spill in storage.sql_temp_dir.parent.glob("sql-*"):  # `gpucast sql` spill folders of killed queries
        pid = spill.name.removeprefix("sql-")
        if not (pid.isdigit() and alive(int(pid))):
            shutil.rmtree(spill, ignore_errors=True)
            removed.append(spill)
    # the copy and the kept previous, and the WAL of a copy killed while written
    for tmp in [*storage.home.glob(f".{storage.published_path.stem}*.tmp"), *storage.home.glob(f".{storage.published_path.stem}*.tmp.wal")]:
        pid = tmp.name.removesuffix(".wal").split(".")[-2]
        if not (pid.isdigit() and alive(int(pid))):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


_failpoint_hook: Callable[[str], None] | None = None


def install_failpoint_hook(hook: Callable[[str], None] | None) -> None:
    """Tests only: call `hook(name)` at every failpoint of this process (None removes it)."""
    global _failpoint_hook
    _failpoint_hook = hook


def failpoint(name: str) -> None:
    """A point a crash test may stop at (see the module doc); nothing happens without a test's hook."""
    if _failpoint_hook is not None:
        _failpoint_hook(name)
