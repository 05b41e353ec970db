"""The planners' copy of the warehouse: built from a verified read, replaced atomically, kept twice.

DuckDB lets one process write a database file and, while it does, no other process may open that
file, not even read-only (shared/STACK-NOTES.md). So planners do not query the pipeline's working
file: at the end of each *successful* run the pipeline publishes a copy, holding the writer lock
so nothing changes meanwhile:

1. checkpoint `warehouse.duckdb`;
2. build the new copy in a temporary file beside `published.duckdb` with `ATTACH ... (READ_ONLY)`,
   one `CREATE TABLE ... AS SELECT *` per table, then every view: DuckDB reads every row of every
   table back, checking each block's checksum, so a corrupted warehouse fails the publish instead of
   reaching planners (a byte copy would carry the corruption over). The copy's tables have the
   warehouse's columns and rows but not its keys and constraints: nothing writes the copy, and a
   primary key's index must fit in memory (`COPY FROM DATABASE`, which rebuilds them, failed on 9 M
   forecasts under the 1 GB limit, so a site scoring 1 M jobs a night lost its copy on night 3);
3. make it read-only on disk (mode 0444);
4. keep the current copy as `published.prev.duckdb` (a hard link to its file, so no bytes are
   copied; `gpucast restore` puts it back);
5. remove a stale `published.duckdb.wal`: one left by a planner's session that wrote into the copy
   and was killed. DuckDB would replay it into the *new* file at the next open (planners would see
   the old session's tables and rows in tonight's copy), so it goes before the rename;
6. rename the temporary file over `published.duckdb`. A rename is atomic: a planner's open session
   keeps reading the copy it opened, new sessions see the new one, nobody ever sees a half-written
   file, and no open session can block the nightly run.

Planners who want tables of their own keep them in a scratch database that attaches the published
copy read-only (README "Your own tables"); anything written into `published.duckdb` itself is
replaced at the next publish.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import duckdb

from gpucast.warehouse.db import connect_writer, previous_copy, sql_name, sql_string, writer_lock
from gpucast.warehouse.errors import environment_error
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.reference import refresh_gpu_catalog
from gpucast.warehouse.settings import Storage

READ_ONLY_MODE = 0o444


class PublishFailed(RuntimeError):
    """The warehouse could not be read back whole; the planners' copy was left as it was."""


def publish_snapshot(storage: Storage) -> Path:
    """Publish the warehouse to `published.duckdb` (steps in the module doc); return its path."""
    target = storage.published_path
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with writer_lock(storage):
        con = connect_writer(storage)
        try:
            refresh_gpu_catalog(con)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        try:
            _verified_copy(storage, tmp)
            os.chmod(tmp, READ_ONLY_MODE)
            failpoint("publish:before-rename")
            if target.exists():  # a second name for the current copy's file: no bytes copied
                keep = target.with_name(f".{previous_copy(target).name}.{os.getpid()}.tmp")
                keep.unlink(missing_ok=True)
                os.link(target, keep)
                os.replace(keep, previous_copy(target))
            Path(f"{target}.wal").unlink(missing_ok=True)
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(tmp, 0o644)
                tmp.unlink()
    return target


def restore_previous(storage: Storage) -> Path:
    """Put `published.prev.duckdb` back as `published.duckdb` (the copy before the last publish)."""
    target = storage.published_path
    prev = previous_copy(target)
    if not prev.exists():
        raise FileNotFoundError(f"no previous copy at {prev}: it appears after the second publish")
    with writer_lock(storage):
        _replace_with_copy(prev, target)
        Path(f"{target}.wal").unlink(missing_ok=True)
    return target


def _verified_copy(storage: Storage, tmp: Path) -> None:
    """Write every table (its columns and rows, without keys or constraints) and every view of the warehouse
    into a new database file at `tmp`, within the pipeline's DuckDB memory limit (spilling to the staging folder)."""
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(config={"memory_limit": storage.duckdb_memory, "temp_directory": str(storage.staging_dir)})
    try:
        con.execute(f"ATTACH {sql_string(tmp)} AS copy")
        con.execute(f"ATTACH {sql_string(storage.db_path)} AS source (READ_ONLY)")
        try:
            _copy_tables(con)
            _copy_views(con)
        except duckdb.Error as exc:
            if environment_error(exc):
                raise  # a full disk or a permission error: said as such (exit 5), not as corruption
            raise PublishFailed(
                f"could not read {storage.db_path} back whole ({type(exc).__name__}: {exc}); the planners' copy was "
                "left as it was. Check the disk, then restore the warehouse from the lake or a backup "
                "(docs/operations.md)") from exc
        con.execute("CHECKPOINT copy")
    finally:
        con.close()


def _copy_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Every table of `source`, read back whole into `copy` (one statement each: no index to hold in memory)."""
    tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'source' "
                         "ORDER BY schema_name, table_name").fetchall()
    for schema, name in tables:
        if schema != "main":
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {sql_name('copy', schema)}")
        con.execute(f"CREATE TABLE {sql_name('copy', schema, name)} AS SELECT * FROM {sql_name('source', schema, name)}")


def _copy_views(con: duckdb.DuckDBPyConnection) -> None:
    """Every view of `source`, defined again in `copy` from its own SQL. A view that reads another view
    defined after it fails until that one exists, so the views are retried while each round adds one."""
    pending = [sql for (sql,) in con.execute("SELECT sql FROM duckdb_views() WHERE database_name = 'source' "
                                             "AND NOT internal ORDER BY view_oid").fetchall()]
    con.execute("USE copy")
    while pending:
        failed = []
        for sql in pending:
            try:
                con.execute(sql)
            except duckdb.CatalogException:
                failed.append(sql)
        if len(failed) == len(pending):
            con.execute(failed[0])  # no progress: raise the first one's own error
        pending = failed


def _replace_with_copy(src: Path, dst: Path) -> None:
    """Copy `src` to a temporary file (flushed to disk), make it read-only, and rename it over `dst`."""
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    with open(src, "rb") as f, open(tmp, "wb") as g:
        shutil.copyfileobj(f, g, length=16 << 20)
        g.flush()
        os.fsync(g.fileno())
    os.chmod(tmp, READ_ONLY_MODE)
    os.replace(tmp, dst)
