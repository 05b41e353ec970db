"""One run lifecycle for ingest, train, score, plan and demand: id, owner, staging folder, failure row, cleanup.

    with runs.lifecycle(storage, "score") as run:
        ...                      # stage under run.staging; commit with the run's own transaction
                                 # (which marks it succeeded / published)

On entry: orphans of dead processes are swept, the run gets an id (`score-20261101T020000Z-1a2b3c`),
a staging folder owned by this process, and a `running` row carrying its pid and host. On an
error, the row is marked `failed` with the real error as its message (if the warehouse itself is
what failed, e.g. another writer holds it, the error is raised without a row: there is nowhere to
write it). On exit, the staging folder is removed. A run whose process is killed stays `running`
until the next run marks it `crashed` (`close_abandoned_runs`).

Room for the failure row is reserved before the run starts (`reserve_room`: ROOM_BYTES in the run's staging
folder, on the warehouse's disk) and released, with the run's staged files, before the row is written: a load
that fills the disk may leave it full (DuckDB's commit fails at the checkpoint it starts, and the file keeps
what that checkpoint wrote), and the failure row needs room in DuckDB's log.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from gpucast.warehouse.concerns import Storage
from gpucast.warehouse.db import WarehouseBusy, writer
from gpucast.warehouse.errors import printable, redact
from gpucast.warehouse.housekeeping import claim_staging, sweep_staging
from gpucast.warehouse.schema import RUN_TABLES  # kind -> (table, key column)

log = logging.getLogger(__name__)

MESSAGE_CHARS = 2000

# Room kept for a run's failure row on a disk its run filled: the row in DuckDB's log, and the checkpoint at close
# (a few 256 KiB blocks). In tests/reliability/test_environment_errors.py (a 3 MB disk filled by a load) 64 KiB
# released was enough; 1 MiB is the margin. A disk with less free than this refuses a run at its start (exit 5).
ROOM_BYTES = 1 << 20
ROOM_FILE = "room.reserve"


@dataclass(frozen=True)
class Run:
    kind: str
    run_id: str
    started_at: datetime
    staging: Path


def owner() -> tuple[int, str]:
    """(pid, host) of this process, as the run tables record them."""
    return os.getpid(), socket.gethostname()


def new_run_id(kind: str, now: datetime) -> str:
    return f"{kind}-{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def start(con: duckdb.DuckDBPyConnection, run: Run, **columns) -> None:
    """Record `run` as running (once: a retried step finds it there), with its kind's own columns, text ones with any
    URI's secrets masked (`finish`): a train run's `dask_address` is GPUCAST_DASK_ADDRESS, which may hold them."""
    table, key = RUN_TABLES[run.kind]
    names = [key, "started_at", "status", "pid", "host", *columns]
    con.execute(f"INSERT OR IGNORE INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
                [run.run_id, run.started_at, "running", *owner(), *_masked(columns.values())])


def finish(con: duckdb.DuckDBPyConnection, kind: str, run_id: str, status: str, message: str | None = None,
           **columns) -> None:
    """Set a run's end state, message and any of its kind's columns (counts, ...). The message and every text column
    (where fits ran, ...) are stored with any URI's secrets masked (`redact`): planners read the run tables in the
    published copy."""
    table, key = RUN_TABLES[kind]
    sets = ["finished_at = ?", "status = ?", "message = ?", *[f"{c} = ?" for c in columns]]
    con.execute(f"UPDATE {table} SET {', '.join(sets)} WHERE {key} = ?",
                [datetime.now(UTC), status, redact(message)[:MESSAGE_CHARS] if message else None,
                 *_masked(columns.values()), run_id])


def _masked(values) -> list:
    """Run columns' values as stored: text with any URI's secrets masked (`redact`), the others as they are."""
    return [redact(v) if isinstance(v, str) else v for v in values]


def add_note(con: duckdb.DuckDBPyConnection, kind: str, run_id: str, note: str) -> None:
    """Append `note` to a run's message (a warning about a run that still succeeded), secrets masked (`finish`)."""
    table, key = RUN_TABLES[kind]
    con.execute(f"UPDATE {table} SET message = left(concat_ws('; ', message, ?), ?) WHERE {key} = ?",
                [redact(note), MESSAGE_CHARS, run_id])


STOP_SIGNALS = ("TerminationSignal", "Terminated")  # Prefect's SIGTERM handler's exception, or the CLI's


def note_stop(exc: BaseException, where: str) -> None:
    """On a SIGTERM's exception unwinding through a run or step: a note of `where` it stopped (`add_note`), which
    the command line prints in its one line (flows/cli/process.py `stopped_line`)."""
    if type(exc).__name__ in STOP_SIGNALS:
        exc.add_note(where)


def describe(exc: BaseException) -> str:
    """The error as on-call should read it: its type and message, on one line, any URI's secrets masked (`printable`)."""
    if type(exc).__name__ in STOP_SIGNALS:
        return f"stopped by SIGTERM ({type(exc).__name__}); nothing of this run was published; rerunning is safe"
    return printable(f"{type(exc).__name__}: {exc}") if str(exc) else type(exc).__name__


def record_failure(storage: Storage, run: Run, exc: BaseException) -> None:
    """Mark `run` failed with `exc` as its message; never raise over the error being reported."""
    if isinstance(exc, WarehouseBusy):
        return  # the warehouse is what failed: there is nowhere to write the row
    try:
        with writer(storage, timeout_s=min(storage.lock_timeout_s, 60.0)) as con:
            finish(con, run.kind, run.run_id, "failed", describe(exc))
    except Exception as write_error:  # noqa: BLE001  (report the original error, not this one)
        log.warning("could not record %s as failed (%s); its error was: %s", run.run_id, describe(write_error),
                    describe(exc))


def record_failed_run(storage: Storage, kind: str, message: str, **start_columns) -> str:
    """A `kind` run that failed before it could start (a source the nightly could not read): its row,
    failed with `message`, so `gpucast status` names it. Returns its id."""
    now = datetime.now(UTC)
    run_id = new_run_id(kind, now)
    with writer(storage) as con:
        start(con, Run(kind, run_id, now, storage.staging_dir / run_id), **start_columns)
        finish(con, kind, run_id, "failed", message)
    return run_id


@contextlib.contextmanager
def lifecycle(storage: Storage, kind: str, **start_columns) -> Iterator[Run]:
    """Sweep orphans, start a `kind` run, yield it; mark it failed on an error; remove its staging."""
    sweep_orphans(storage)
    now = datetime.now(UTC)
    run_id = new_run_id(kind, now)
    run = Run(kind, run_id, now, claim_staging(storage.staging_dir / run_id))
    try:
        reserve_room(run.staging)
        with writer(storage) as con:
            start(con, run, **start_columns)
        yield run
    except BaseException as exc:
        shutil.rmtree(run.staging, ignore_errors=True)  # the run is over: its staged files and reserved room free
        record_failure(storage, run, exc)
        note_stop(exc, f"{kind} run {run_id}")
        raise
    finally:
        shutil.rmtree(run.staging, ignore_errors=True)


def reserve_room(folder: Path) -> Path:
    """Hold ROOM_BYTES of disk in `folder` (a run's staging folder) for the run's failure row (module docstring).
    A disk without that much free raises OSError ENOSPC here, before the run starts."""
    room = folder / ROOM_FILE
    fd = os.open(room, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        if hasattr(os, "posix_fallocate"):  # blocks allocated, not a sparse file (glibc writes them where the
            os.posix_fallocate(fd, 0, ROOM_BYTES)  # file system cannot allocate)
        else:  # macOS
            os.pwrite(fd, bytes(ROOM_BYTES), 0)
    finally:
        os.close(fd)
    return room


def close_abandoned_runs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Mark `crashed` every run left `running` by a process of this host that no longer exists.

    (Runs of another host, such as a GPU worker sharing the data directory, are left to that host:
    a pid means nothing elsewhere.)
    """
    pid, host = owner()
    closed = []
    for kind, (table, key) in RUN_TABLES.items():
        rows = con.execute(f"SELECT {key}, pid FROM {table} WHERE status = 'running' AND host = ? AND pid <> ?",
                           [host, pid]).fetchall()
        for run_id, dead in ((r, p) for r, p in rows if not _alive(p)):
            finish(con, kind, run_id, "crashed", f"process {dead} on {host} ended before finishing this run (killed, "
                   "out of memory or a restart); nothing of it was published; rerunning is safe")
            closed.append(run_id)
    return closed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_orphans(storage: Storage) -> list[Path | str]:
    """Before a run: mark runs of dead processes `crashed`, remove staging folders of dead processes
    and temporary copies of a killed publish; return what was closed or removed."""
    closed: list[Path | str] = []
    if storage.db_path.exists():
        with writer(storage) as con:
            closed += close_abandoned_runs(con)
    return closed + sweep_staging(storage, _alive)
