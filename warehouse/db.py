"""DuckDB connections: one locked writer, any number of read-only readers.

DuckDB lets one process hold a database file read-write, and then nobody else can open it, even
read-only (shared/STACK-NOTES.md). Writers therefore take an advisory file lock first, so a second
writer waits (or gives up with a clear message) instead of failing on DuckDB's own lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from gpucast.warehouse.concerns import Storage
from gpucast.warehouse.schema import (
    backfill_forecasts_at,
    latest_keys,
    redact_stored,
    rehash_steps,
    rehash_stored,
    schema_fingerprint,
    schema_sql,
)


def sql_string(path: Path | str) -> str:
    """A quoted SQL string literal of a path (or file name) we made, for where DuckDB takes no bound value (COPY ... TO,
    ATTACH, FILENAME_PATTERN)."""
    return "'" + str(path).replace("'", "''") + "'"


def sql_name(*parts: str) -> str:
    """A quoted, dotted SQL identifier (`"schema"."table"`) of a name read from our own catalog."""
    return ".".join('"' + part.replace('"', '""') + '"' for part in parts)


class WarehouseBusy(RuntimeError):
    """Another gpucast writer holds the warehouse."""


@contextlib.contextmanager
def file_lock(path: Path, timeout_s: float, busy: Callable[[str], Exception]) -> Iterator[None]:
    """Hold an exclusive `fcntl` lock on `path`, waiting up to `timeout_s`, else raise `busy(holder)`.

    The file names its holder (pid and start time) for the message of whoever waits. The kernel
    drops the lock when its process dies, SIGKILL included, so a crash never leaves it stuck.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    f.seek(0)
                    raise busy(f.read().strip() or "unknown holder") from None
                time.sleep(0.2)
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} since {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC")
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def writer_lock(storage: Storage, timeout_s: float | None = None) -> contextlib.AbstractContextManager[None]:
    """Hold the warehouse's writer lock; wait up to `timeout_s` (default: the lock_timeout_s setting)."""
    timeout_s = storage.lock_timeout_s if timeout_s is None else timeout_s
    return file_lock(storage.lock_path, timeout_s, lambda holder: WarehouseBusy(
        f"another gpucast writer ({holder}) has held {storage.lock_path} for over "
        f"{timeout_s:.0f} s; wait for it to finish or raise GPUCAST_LOCK_TIMEOUT_S"))


def connect_writer(storage: Storage, timeout_s: float | None = None) -> duckdb.DuckDBPyConnection:
    """A read-write connection with the schema applied. Hold `writer_lock` around its use.

    A process that opened `warehouse.duckdb` itself (a planner's DuckDB session, even read-only)
    blocks every writer; we wait for it like for another writer, then say who it is and where
    planners should read instead.
    """
    timeout_s = storage.lock_timeout_s if timeout_s is None else timeout_s
    storage.home.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            con = duckdb.connect(str(storage.db_path), config={"memory_limit": storage.duckdb_memory})
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            if time.monotonic() >= deadline:
                holder = re.search(r"\(PID (\d+)\)", str(exc))
                raise WarehouseBusy(
                    f"another process (pid {holder.group(1) if holder else '?'}) has {storage.db_path} open, so "
                    f"the pipeline cannot write it (waited {timeout_s:.0f} s). Planners should query "
                    f"{storage.published_path} (`gpucast sql`), which the pipeline replaces atomically, "
                    "and close sessions on the working file"
                ) from None
            time.sleep(0.5)
    # every writer in UTC (a day is a UTC day: the plan's input, the lake's partitions): the schema's own SET runs only
    # where the DDL is applied, so a second writer kept the host's zone (review 86 S1-2: on a New York host a night
    # scored at 02:00 UTC planned from the day before)
    con.execute("SET TimeZone = 'UTC'")
    apply_schema(con)
    return con


def apply_schema(con: duckdb.DuckDBPyConnection) -> bool:
    """Apply the DDL and `migrate`, unless the warehouse records that this very DDL was applied (its fingerprint
    in `schema_applied`); True when applied. The DDL is ~120 statements, 12 of them views replaced: applied
    on every writer connection it cost ~0.15 s each. A warehouse of an older gpucast (no record, or another
    fingerprint) gets it, as always; the record is written last, so a writer stopped before it applies the
    (idempotent) DDL again."""
    fingerprint = schema_fingerprint()
    try:
        recorded = con.execute("SELECT fingerprint FROM schema_applied").fetchall()
    except duckdb.CatalogException:
        recorded = []
    if recorded == [(fingerprint,)]:
        return False
    with transaction(con):  # one commit, not one per statement: on a new warehouse 0.10-0.27 s against 0.48-0.93 s of
        latest_keys(con)  # an older gpucast's `job_logs` table, turned into the keys of the view (schema.py)
        con.execute(schema_sql())  # wall clock, mostly disk flushes (issue 52: the ingest's fixed cost)
    migrate(con)
    for step in rehash_steps(con):  # records an older gpucast hashed otherwise, hashed again: once (schema.py)
        with transaction(con):
            rehash_stored(con, *step)
    with transaction(con):
        redact_stored(con)  # URI secrets an older gpucast stored, masked with the record: once (schema.py)
        backfill_forecasts_at(con)  # score runs published before their forecast time was kept: once (schema.py)
        con.execute("CREATE OR REPLACE TABLE schema_applied (fingerprint VARCHAR NOT NULL)")
        con.execute("INSERT INTO schema_applied VALUES (?)", [fingerprint])
    return True


# Tables whose primary key was dropped after they were first made (why: schema.sql beside each). `migrate`
# rebuilds such a table once, keeping its columns, rows and NOT NULLs (DuckDB cannot drop a key in place;
# `schema_sql` only adds).
DROPPED_KEYS = ("forecasts",)


A_MAIN_TABLE = "database_name = current_database() AND schema_name = 'main' AND table_name = ?"  # (the name bound)


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Rebuild, each in one transaction, the tables of `DROPPED_KEYS` that a warehouse made by an older
    gpucast still keys; return their names."""
    rebuilt = []
    for table in DROPPED_KEYS:
        if not con.execute(f"SELECT count(*) FROM duckdb_constraints() WHERE {A_MAIN_TABLE} AND constraint_type = 'PRIMARY KEY'",
                           [table]).fetchall()[0][0]:
            continue
        required = [name for (name,) in con.execute(
            f"SELECT column_name FROM duckdb_columns() WHERE {A_MAIN_TABLE} AND NOT is_nullable ORDER BY column_index",
            [table]).fetchall()]
        keyless = f"{table}__keyless"
        with transaction(con):
            con.execute(f"CREATE TABLE {sql_name(keyless)} AS SELECT * FROM {sql_name(table)}")
            con.execute(f"DROP TABLE {sql_name(table)}")
            con.execute(f"ALTER TABLE {sql_name(keyless)} RENAME TO {sql_name(table)}")
            for name in required:
                con.execute(f"ALTER TABLE {sql_name(table)} ALTER COLUMN {sql_name(name)} SET NOT NULL")
        rebuilt.append(table)
    return rebuilt


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


def previous_copy(path: Path) -> Path:
    """`published.duckdb` -> `published.prev.duckdb`: the copy the last publish replaced."""
    return path.with_suffix(".prev" + path.suffix)


def forecast_files_dir(path: Path) -> Path:
    """`published.duckdb` -> `published_forecasts/`: the Parquet files, one per published score run, that the
    copies' `forecasts` view reads (warehouse/publish.py). Readers may read them, and nothing else on disk."""
    return path.with_name(path.stem + "_forecasts")


def forecast_file_stem(run: str) -> str:
    """How a score run's files in `forecast_files_dir` begin: the run id when it is made of ASCII letters, digits,
    '-' and '_' (gpucast's own ids are), else a digest of it."""
    if run and run.isascii() and all(ch.isalnum() or ch in "-_" for ch in run):
        return run
    return "run-" + hashlib.sha256(run.encode()).hexdigest()[:16]


def connect_reader(db_path: Path, warn: Callable[[str], None] | None = None,
                   limits: dict[str, object] | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection that cannot touch other files or databases (planners' SQL); `limits`
    are DuckDB settings (memory_limit, threads, temp_directory ...) fixed before it is handed out.

    When another process holds `db_path` read-write (a planner's session opened without
    `read_only`), DuckDB refuses every other open; readers then fall back to the previous published
    copy, if there is one, and say so through `warn`, instead of failing.
    """
    if not db_path.exists():
        raise FileNotFoundError(
            f"no warehouse at {db_path}: run `gpucast ingest` (or `gpucast demo`) first, "
            "or point GPUCAST_HOME at the data directory"
        )
    try:
        con = duckdb.connect(str(db_path), read_only=True)
    except duckdb.IOException as exc:
        prev = previous_copy(db_path)
        if "lock" not in str(exc).lower() or not prev.exists():
            raise
        holder = re.search(r"\(PID (\d+)\)", str(exc))
        (warn or _to_stderr)(
            f"{db_path} is held read-write by another process (pid {holder.group(1) if holder else '?'}); "
            f"reading the previous copy {prev} instead. Open the published copy read-only "
            "(`duckdb -readonly`, `read_only=True`) so everyone can read it")
        con = duckdb.connect(str(prev), read_only=True)
    con.execute("SET TimeZone = 'UTC'")
    for key, value in (limits or {}).items():
        con.execute(f"SET {key} = ?", [value])  # keys are ours (warehouse/queries.py), values bound
    # the copy's `forecasts` is a view over Parquet files (warehouse/publish.py): readable, and no other file
    con.execute("SET allowed_directories = ?", [[f"{forecast_files_dir(db_path)}{os.sep}"]])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


@contextlib.contextmanager
def writer(storage: Storage, timeout_s: float | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """The writer lock and a read-write connection, released together."""
    with writer_lock(storage, timeout_s):
        con = connect_writer(storage, timeout_s)
        try:
            yield con
        finally:
            con.close()


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN ... COMMIT, or ROLLBACK on any error. A ROLLBACK that fails itself (DuckDB may already
    have ended the transaction: disk full, a fatal error) never hides the error that caused it."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def ingested_sha256s(storage: Storage) -> set[str]:
    """Content hashes of every file an earlier run loaded, rejected or found empty."""
    if not storage.db_path.exists():
        return set()
    from gpucast.records.outcomes import GONE_STATUS  # here: outcomes loads numpy and Polars, which `status` never needs

    with writer(storage) as con:
        return {s for (s,) in con.execute(
            "SELECT DISTINCT source_sha256 FROM ingest_files WHERE status <> ?", [GONE_STATUS]).fetchall()}  # no hash
