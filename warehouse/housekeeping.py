"""Run exclusivity, staging folders that survive a killed process, and crash-test failpoints.

* `exclusive_run`: one nightly run at a time. A second one exits at once with a message naming
  the holder (the lock is an `fcntl` lock: the kernel drops it when its process dies, even by
  SIGKILL, so a crashed run never blocks the next night).
* `claim_staging` / `sweep_orphans`: each run stages under `staging/<run id>/` with an
  `owner.pid` file; runs remove their own folder, and every run first removes folders whose owner
  is no longer alive (a run killed half-way), plus temporary copies of a killed publish.
* `close_abandoned_runs`: ingest, train and score runs record their pid and host; a run still
  `running` whose process on this host is gone is marked `crashed`, so on-call never reads a
  killed run as one still going. (Runs of another host, such as a GPU worker sharing the data
  directory, are left to that host: a pid means nothing elsewhere.)
* `failpoint`: when `GPUCAST_FAILPOINT` names a point, the process announces it (writes its pid to
  `GPUCAST_FAILPOINT_MARKER`) and waits there to be killed. Only the crash-safety tests set it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from gpucast.warehouse.db import WarehouseBusy, file_lock, writer
from gpucast.warehouse.settings import Settings

FAILPOINT_ENV = "GPUCAST_FAILPOINT"
FAILPOINT_MARKER_ENV = "GPUCAST_FAILPOINT_MARKER"
OWNER_FILE = "owner.pid"


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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner() -> tuple[int, str]:
    """(pid, host) of this process, as the run tables record them."""
    return os.getpid(), socket.gethostname()


RUN_TABLES = {"ingest_runs": "run_id", "train_runs": "train_run_id", "score_runs": "score_run_id"}


def close_abandoned_runs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Mark `crashed` every run left `running` by a process of this host that no longer exists."""
    pid, host = owner()
    closed = []
    for table, key in RUN_TABLES.items():
        rows = con.execute(f"SELECT {key}, pid FROM {table} WHERE status = 'running' AND host = ? AND pid <> ?",
                           [host, pid]).fetchall()
        for run_id, dead in ((r, p) for r, p in rows if not _alive(p)):
            con.execute(f"UPDATE {table} SET status = 'crashed', finished_at = ?, message = ? WHERE {key} = ?",
                        [datetime.now(UTC), f"process {dead} on {host} ended before finishing this run (killed, out of "
                         "memory or a restart); nothing of it was published; rerunning is safe", run_id])
            closed.append(run_id)
    return closed


def sweep_orphans(settings: Settings) -> list[Path | str]:
    """Before a run: remove staging folders of dead processes and temporaries of a killed publish,
    and mark runs of dead processes `crashed`; return what was removed or closed."""
    removed: list[Path | str] = []
    if settings.db_path.exists():
        with writer(settings) as con:
            removed += close_abandoned_runs(con)
    if settings.staging_dir.exists():
        for folder in settings.staging_dir.iterdir():
            owner = folder / OWNER_FILE
            try:
                pid = int(owner.read_text())
            except (OSError, ValueError):
                # no owner file: older than this scheme, or killed before writing it; judge by age
                if time.time() - folder.stat().st_mtime < 3600:
                    continue
                pid = -1
            if pid != os.getpid() and (pid < 0 or not _alive(pid)):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    for tmp in settings.home.glob(f".{settings.published_path.name}.*.tmp"):
        pid = tmp.name.split(".")[-2]
        if not (pid.isdigit() and _alive(int(pid))):
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
