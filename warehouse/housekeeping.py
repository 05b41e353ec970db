"""Run exclusivity, staging folders that survive a killed process, and crash-test failpoints.

* `exclusive_run`: one nightly run at a time. A second one exits at once with a message naming
  the holder (the lock is an `fcntl` lock: the kernel drops it when its process dies, even by
  SIGKILL, so a crashed run never blocks the next night).
* `claim_staging` / `sweep_staging`: each run stages under `staging/<run id>/` with an
  `owner.pid` file; runs remove their own folder (`runs.lifecycle`), and every run first removes
  folders whose owner is no longer alive (a run killed half-way), plus temporary copies of a
  killed publish.
* `failpoint`: when `GPUCAST_FAILPOINT` names a point, the process announces it (writes its pid to
  `GPUCAST_FAILPOINT_MARKER`) and waits there to be killed. Only the crash-safety tests set it;
  it is a test seam, not a setting, so it is read here and nowhere else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from gpucast.warehouse.db import WarehouseBusy, file_lock
from gpucast.warehouse.settings import Settings

FAILPOINT_ENV = "GPUCAST_FAILPOINT"
FAILPOINT_MARKER_ENV = "GPUCAST_FAILPOINT_MARKER"
OWNER_FILE = "owner.pid"
UNOWNED_GRACE_S = 3600  # a staging folder without an owner file is left alone this long


class AlreadyRunning(WarehouseBusy):
    """Another run of the same kind holds its lock."""


def exclusive_run(settings: Settings, name: str) -> contextlib.AbstractContextManager[None]:
    """Hold `<home>/<name>.lock` for the duration, or raise AlreadyRunning naming the holder at once."""
    path = settings.home / f"{name}.lock"
    return file_lock(path, 0.0, lambda holder: AlreadyRunning(
        f"another {name} run is in progress ({holder}; lock {path}); this one exits without touching "
        "anything: wait for it, or check it with `gpucast status`"))


def claim_staging(folder: Path) -> Path:
    """Create a run's staging folder and mark it as this process's."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / OWNER_FILE).write_text(str(os.getpid()))
    return folder


def sweep_staging(settings: Settings, alive: Callable[[int], bool]) -> list[Path]:
    """Remove staging folders whose owner process is gone, temporaries of a killed publish, and spill
    folders of killed `gpucast sql` queries."""
    removed: list[Path] = []
    if settings.staging_dir.exists():
        for folder in settings.staging_dir.iterdir():
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
    for spill in settings.sql_temp_dir.parent.glob("sql-*"):  # `gpucast sql` spill folders of killed queries
        pid = spill.name.removeprefix("sql-")
        if not (pid.isdigit() and alive(int(pid))):
            shutil.rmtree(spill, ignore_errors=True)
            removed.append(spill)
    for tmp in settings.home.glob(f".{settings.published_path.stem}*.tmp"):  # the copy and the kept previous
        pid = tmp.name.split(".")[-2]
        if not (pid.isdigit() and alive(int(pid))):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def failpoint(name: str) -> None:
    """Crash-test hook (see module doc); does nothing unless GPUCAST_FAILPOINT equals `name`."""
    if os.environ.get(FAILPOINT_ENV) != name:
        return
    marker = os.environ.get(FAILPOINT_MARKER_ENV)
    if marker:
        Path(marker).write_text(str(os.getpid()))
    while True:
        time.sleep(60)
