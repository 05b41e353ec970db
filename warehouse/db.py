"""DuckDB connections: one locked writer, any number of read-only readers.

DuckDB lets one process hold a database file read-write, and then nobody else can open it, even
read-only (shared/STACK-NOTES.md). Writers therefore take an advisory file lock first, so a second
writer waits (or gives up with a clear message) instead of failing on DuckDB's own lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import duckdb

from gpucast.warehouse.settings import Settings

LOCK_TIMEOUT_ENV = "GPUCAST_LOCK_TIMEOUT_S"
MEMORY_ENV = "GPUCAST_DUCKDB_MEMORY"
DEFAULT_MEMORY = "1GB"  # DuckDB spills to disk beyond this; its own default is 80% of RAM
DEFAULT_LOCK_TIMEOUT_S = 600.0


class WarehouseBusy(RuntimeError):
    """Another gpucast writer holds the warehouse."""


def schema_sql() -> str:
    return resources.files("gpucast.warehouse").joinpath("sql/schema.sql").read_text()


@contextlib.contextmanager
def writer_lock(settings: Settings, timeout_s: float | None = None) -> Iterator[None]:
    """Hold the warehouse's writer lock; wait up to `timeout_s` (env GPUCAST_LOCK_TIMEOUT_S)."""
    if timeout_s is None:
        timeout_s = float(os.environ.get(LOCK_TIMEOUT_ENV, DEFAULT_LOCK_TIMEOUT_S))
    settings.home.mkdir(parents=True, exist_ok=True)
    with open(settings.lock_path, "a+") as f:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    f.seek(0)
                    holder = f.read().strip() or "unknown"
                    raise WarehouseBusy(
                        f"another gpucast writer ({holder}) has held {settings.lock_path} for over "
                        f"{timeout_s:.0f} s; wait for it to finish or raise {LOCK_TIMEOUT_ENV}"
                    ) from None
                time.sleep(0.2)
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}")
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def connect_writer(settings: Settings) -> duckdb.DuckDBPyConnection:
    """A read-write connection with the schema applied. Hold `writer_lock` around its use."""
    settings.home.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(
        str(settings.db_path), config={"memory_limit": os.environ.get(MEMORY_ENV, DEFAULT_MEMORY)}
    )
    con.execute(schema_sql())
    return con


def connect_reader(db_path: Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection that cannot touch other files or databases (planners' SQL)."""
    if not db_path.exists():
        raise FileNotFoundError(
            f"no warehouse at {db_path}: run `gpucast ingest` (or `gpucast demo`) first, "
            "or point GPUCAST_HOME at the data directory"
        )
    con = duckdb.connect(str(db_path), read_only=True)
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


@contextlib.contextmanager
def writer(settings: Settings, timeout_s: float | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """The writer lock and a read-write connection, released together."""
    with writer_lock(settings, timeout_s):
        con = connect_writer(settings)
        try:
            yield con
        finally:
            con.close()


def ingested_sha256s(settings: Settings) -> set[str]:
    """Content hashes of every file an earlier run loaded, rejected or found empty."""
    if not settings.db_path.exists():
        return set()
    with writer(settings) as con:
        return {s for (s,) in con.execute("SELECT DISTINCT source_sha256 FROM ingest_files").fetchall()}
