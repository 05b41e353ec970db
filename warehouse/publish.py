"""The planners' copy of the warehouse: built from a verified read, replaced atomically, kept twice.

DuckDB lets one process write a database file and, while it does, no other process may open that
file, not even read-only (shared/STACK-NOTES.md). So planners do not query the pipeline's working
file: at the end of each *successful* run the pipeline publishes a copy, holding the writer lock
so nothing changes meanwhile:

0. check the paths it writes before writing anything (`check_paths`): `published_forecasts` a file, or
   `published.duckdb`, `published.prev.duckdb`, its WAL or `published.state.json` a folder, ends the publish with
   the OS's error naming the path (exit code 5, one line), with nothing renamed in and no `.tmp` left;
1. checkpoint `warehouse.duckdb`;
2. write, verify or take the forecast files of every score run the warehouse holds (`_forecast_files`): the
   copy's `forecasts` is not a table but a view over immutable Parquet files per score run in
   `published_forecasts/` beside it (`FORECASTS` below), so a publish no longer writes a night's millions of
   forecasts into the copy (issue 40's goal); `gpucast sql` may read that folder and no other file. A run's files
   the last publishes wrote are reused once verified, cheaply but really: each must be there with its size, and
   one whose identity (device, inode, size, modification and change times) is not the one noted when it was
   written is read whole and its SHA-256 compared with the one noted then. Any write into a file, a truncation or
   a reset of its modification time gives it a new change time, which no process can set back, so a night reads
   only the files something touched (none, usually), and the night's new run's files once, to note their
   SHA-256 (~0.1 s a run of 3M forecasts here; reading all of 30M, 1 GiB, took ~1 CPU-s, `bench_publish.py
   --rehash`). A file missing, cut short or with other bytes is written again from the warehouse (and said in
   the note: `gpucast status` shows it, `copy_health`); one with no noted checksum (written by an older gpucast,
   or by a publish that did not finish) is written again too. A bad block *below* the file system that changes no
   time is not seen until the file's run is written again;
3. build the new copy under a temporary name beside `published.duckdb`, in one of three ways:
   * **in place** (the usual night, issue 40): the file that is `published.prev.duckdb` (the copy before the
     current one, so two publishes old) is taken: it gets the temporary name and loses the name
     `published.prev.duckdb`, which goes to the current copy's file at once (step 5, moved first). Then,
     with `ATTACH ... (READ_ONLY)` on the warehouse and in one transaction, it is brought up to date: the
     tables of `INCREMENTAL` (the job tables) gain the runs the warehouse added and lose the runs retention
     pruned (`DELETE` in place; DuckDB reuses the freed blocks), and every other table and every view is
     made again from the warehouse. Only what changed is read back and written: no copy of the whole file.
     Taken only when it is still exactly the file the last publish noted (step 8) and no session holds it
     (DuckDB's lock, checked by opening it): a planner's session that opened it two publishes ago keeps
     reading it, and this publish makes a byte copy instead;
   * **byte copy** (no usable previous copy: the second publish, after a failed one, a session holds it, or it
     is damaged): byte-copy the current `published.duckdb` (disk speed: 10 s for 1.2 GiB with its fsync here;
     the file planners hold open is only read), then bring the copy up to date the same way;
   * **full** (the first publish, when the current copy is not the one the last publish wrote, see below, or
     when bringing the byte copy up to date failed): one `CREATE TABLE ... AS SELECT *` per table, then every
     view.
   An earlier copy is only a head start: an error while one is brought up to date (a bad block in it fails its
   checksum) drops it for the next way down, and is said in the note, never blamed on the warehouse. A block that
   fails its checksum in the *warehouse* fails the publish at once (`PublishFailed`, exit code 6, naming the
   warehouse): DuckDB's error gives the block's location and stored checksum but not the file, and the one of the two
   files that holds that checksum there is the damaged one (`_damaged_file`). Any other error with an earlier copy is
   taken for the copy's; only the full build reads nothing but the warehouse, so its failure is the warehouse's.
   Either way every row that goes into the copy is read back from the warehouse, with each block's
   checksum checked, so a corrupted warehouse fails the publish instead of reaching planners (a byte
   copy of the *warehouse* would carry the corruption over), and the copy's row counts must equal the
   warehouse's, table by table and, for `forecasts`, run by run. The copy's tables have the
   warehouse's columns and rows but not its keys and constraints (but `job_logs`, a view over the copy's
   `job_log_records` with the warehouse's view's columns and rows: `LATEST`): nothing writes the copy, and a
   primary key's index must fit in memory (`COPY FROM DATABASE`, which rebuilds them, failed on 9 M
   forecasts under the 1 GB limit, so a site scoring 1 M jobs a night lost its copy on night 3);
4. make it read-only on disk (mode 0444);
5. keep the current copy as `published.prev.duckdb` (a hard link to its file, so no bytes are
   copied; `gpucast restore` puts it back);
6. remove a stale `published.duckdb.wal`: one left by a planner's session that wrote into the copy
   and was killed. DuckDB would replay it into the *new* file at the next open (planners would see
   the old session's tables and rows in tonight's copy), so it goes before the rename;
7. rename the temporary file over `published.duckdb`. A rename is atomic: a planner's open session
   keeps reading the copy it opened, new sessions see the new one, nobody ever sees a half-written
   file, and no open session can block the nightly run;
8. note the identity (device, inode, size, modification time) of the new file and of the previous
   copy's in `published.state.json`, with the forecast files of the last publishes' copies, each file's size,
   SHA-256 and identity, and what this publish and the last ones found damaged and repaired (then the files
   none of the copies reads are removed). The next publish builds on a copy only if it is still exactly that
   file (for the byte copy: unchanged before and after it; in place: once locked); a copy someone wrote
   into (root, or a planner who changed its mode), a restored one, or one of an older gpucast is not
   built on.

A publish that fails or is killed leaves `published.duckdb` as it was (the file being written only ever
had a temporary name; a kill inside the transaction is rolled back by DuckDB's WAL, and the temporary file
and its WAL are swept by the next run); a forecast file it wrote again holds the bytes the damaged one should
have held (the run's rows, from the warehouse), renamed over it, so a session reading the old file keeps it.
After a failed *in-place* publish `published.prev.duckdb` is a second name of `published.duckdb` (its older
file was the one being written, and is dropped): `gpucast restore` has nothing older until the next publish,
which then makes a byte copy. A run whose part was damaged gets one file of its own; `published.prev.duckdb`
still reads the damaged part until it ages out (`gpucast restore` brings that copy back as it was).

Planners who want tables of their own keep them in a scratch database that attaches the published
copy read-only (README "Your own tables"); anything written into `published.duckdb` itself is
replaced at the next publish.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import struct
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from gpucast.records.files import replacing, temp_beside, write_text
from gpucast.warehouse import db
from gpucast.warehouse.concerns import Storage
from gpucast.warehouse.db import connect_writer, forecast_files_dir, previous_copy, sql_name, sql_string, transaction, writer_lock
from gpucast.warehouse.errors import check_kind, environment_error
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.reference import refresh_gpu_catalog
from gpucast.warehouse.schema import LATEST_KEYS

READ_ONLY_MODE = 0o444

# Tables the copy keeps between publishes, bringing each up to date run by run (`_apply_runs`): per table,
# the column naming the run that wrote a row, and the column that identifies a row (None: none needed).
# * `forecasts` gains a score run in one transaction and loses it whole when retention prunes it
#   (warehouse/forecast.py); a published run's forecasts never change.
# * `job_log_records` (history) only gains rows, an ingest run's at a time (`arrival` numbers every record version
#   once, so it identifies a row).
# Every other table is small, or rewritten in place by its step, and is copied whole, but the keys of `job_logs` (`LATEST`).
INCREMENTAL: dict[str, tuple[str, str | None]] = {
    "job_log_records": ("ingest_run_id", "arrival"),
}

# The copy's `job_logs` is not a second copy of the rows but a view: the rows of the copy's `job_log_records` whose
# arrival is one of those the warehouse's `job_logs_latest` holds (`LATEST_KEYS`), kept in the copy's table
# `LATEST_ARRIVALS` (one BIGINT a job). The warehouse's `job_logs` is the same view over its own keys (schema.sql, since
# session 15; warehouse/load.py inserts each batch's records first and keys a job's latest among them; nothing deletes
# a record), so the copy's holds the same rows, columns and column order; its row count is checked against the
# warehouse's keys (`_LatestOutOfStep`). Copying the rows again cost 2.4-3.0 CPU-s a million jobs at each full publish,
# and as much per million updated at each incremental one (issue 52); the arrivals cost a tenth of that. Planners read
# `job_logs` by that name, as before. The warehouse's view is not copied (`_copy_views`): the copy reads its own
# arrivals, not the keys table, which is not copied.
LATEST = "job_logs"
LATEST_ARRIVALS = "job_logs_arrivals"

# The forecasts are not copied into the copy at all (issue 40: writing a night's 3M forecasts into it again was
# most of a publish's time). Each score run the warehouse holds is written once (again only when damaged, step 2 of
# the module doc), taken from its score run or read back from the warehouse, as immutable Parquet files in
# `published_forecasts/` (`db.forecast_files_dir`), named by the run, the forecasts table's columns (a digest of names
# and types) and its row count, so a run that changed, or a new column, gets a new file. The copy's `forecasts` is a
# view over the files of the runs the warehouse holds (absolute paths, the warehouse's column types). A file stays
# while a copy of the last `FORECAST_FILE_PUBLISHES` publishes names it: `published.prev.duckdb` and planners'
# sessions opened up to that many publishes ago keep reading their runs.
FORECASTS = "forecasts"
FORECAST_FILE_PUBLISHES = 4

SOURCE_TABLES = ("SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'source' "
                 "ORDER BY schema_name, table_name")
COLUMNS = ("SELECT database_name, schema_name, table_name, column_name, data_type FROM duckdb_columns() "
           "WHERE database_name IN ('copy', 'source') ORDER BY database_name, schema_name, table_name, column_index")


class PublishFailed(RuntimeError):
    """The warehouse could not be read back whole; the planners' copy was left as it was."""


def publish_snapshot(storage: Storage, *, full: bool = False) -> Path:
    """Publish the warehouse to `published.duckdb` (steps in the module doc); return its path. `full`
    builds the copy from nothing and writes every run's forecast file again, even when the current ones could
    be used."""
    target = storage.published_path
    tmp = temp_beside(target)  # built over several steps (a hard link, a verified copy), renamed in by hand below
    with writer_lock(storage):
        check_paths(target)  # before anything is written: nothing half done over a path of the wrong kind
        con = connect_writer(storage)
        try:
            _each_job_keyed_once(con, storage)  # before the earlier copies are touched (review 66a S3-3)
            refresh_gpu_catalog(con)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        try:
            note = _read_note(target)
            noted = _noted(target, note)
            forecasts = _forecast_files(storage, note.checks, rewrite=full)
            repairs = list(forecasts.repairs)
            previous = not full and noted is not None and _take_previous_copy(target, tmp, noted)
            if previous:
                try:
                    _verified_copy(storage, tmp, forecasts, base=True, in_place_of=noted[1])
                except _CopyInUse as exc:  # a session holds the previous copy's file, wrote into it, or it is damaged
                    tmp.unlink()  # only our name for it: a session keeps reading its file
                    previous = False
                    if exc.damaged:
                        repairs.append(f"{previous_copy(target)} could not be brought up to date ({exc}): tonight's copy "
                                       "was made from the current one instead, and the damaged file dropped")
            if not previous:
                base = not full and noted is not None and _byte_copy_of_last_publish(target, tmp, noted[0])
                try:
                    _verified_copy(storage, tmp, forecasts, base=base)
                except _CopyInUse as exc:  # only with a base: the copy of the current one did not take the night
                    repairs.append(f"{target} could not be brought up to date ({exc}): tonight's copy was built from "
                                   "the warehouse instead")
                    _verified_copy(storage, tmp, forecasts, base=False)
            os.chmod(tmp, READ_ONLY_MODE)
            failpoint("publish:before-rename")
            if target.exists() and not previous:  # a second name for the current copy's file: no bytes copied
                _keep_as_previous(target)
            Path(f"{target}.wal").unlink(missing_ok=True)
            os.replace(tmp, target)
            # the copy this one replaced, now published.prev.duckdb, is the base of the next publish when unchanged
            kept = [forecasts.names, *(note.forecast_files or [])][:FORECAST_FILE_PUBLISHES]
            _note_published(target, noted[0] if noted is not None and copy_identity(previous_copy(target)) == noted[0] else None,
                            kept, forecasts.checks, repairs, note.repairs)
            if note.forecast_files is not None:  # else an older gpucast's note, or none: what older copies read is unknown
                _sweep_forecast_files(target, kept)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(tmp, 0o644)
                tmp.unlink()
    return target


def publish_if(asked: bool, storage: Storage, on_failure: Callable[[Exception], object] | None = None) -> Path | None:
    """The one publish a command's run ends with: `publish_snapshot` when it was asked to (a flow's `publish`: a run
    on its own publishes; the nightly's steps do not, and the night publishes once, itself), else nothing.
    `on_failure` is told what a failed publish raised before it is raised (a score run notes it on its committed
    run: `flows/score.py`)."""
    if not asked:
        return None
    try:
        return publish_snapshot(storage)
    except Exception as exc:
        if on_failure is not None:
            on_failure(exc)
        raise


def check_paths(target: Path) -> None:
    """Raise the OS's error for the first path beside the copy `target` that a publish could not write because it
    is of the wrong kind: the forecast files' folder a file (`NotADirectoryError`), or the copy, its previous one, its
    WAL or the note a folder (`IsADirectoryError`), each naming the path (exit code 5 and one line, `warehouse/errors.py`).
    Checked before anything is written, so such a publish leaves nothing half done: no copy renamed in, no `.tmp`."""
    check_kind(forecast_files_dir(target), folder=True)
    check_kind(target, previous_copy(target), Path(f"{target}.wal"), state_path(target), folder=False)


def restore_previous(storage: Storage) -> Path:
    """Put `published.prev.duckdb` back as `published.duckdb` (the copy before the last publish)."""
    target = storage.published_path
    prev = previous_copy(target)
    if not prev.exists():
        raise FileNotFoundError(f"no previous copy at {prev}: it appears after the second publish")
    if target.exists() and prev.samefile(target):  # a failed in-place publish: the module doc (review 76 S2-2)
        raise FileNotFoundError(f"nothing older to restore: {prev.name} is a second name of {target.name}, the copy "
                                "planners read now (the last publish failed before replacing it, and took the older "
                                "file); the next publish makes a copy that `gpucast restore` can put back")
    with writer_lock(storage):
        _replace_with_copy(prev, target)
        Path(f"{target}.wal").unlink(missing_ok=True)
        _note_restored(target)
    return target


def _note_restored(target: Path) -> None:
    """Add to the last publish's note when `gpucast restore` put the previous copy back and that copy's identity, so
    `gpucast status` says so instead of calling the copy unknown (`copy_health`). The rest of the note stays as the
    publish wrote it: its identity no longer matches the copy, so the next publish builds the copy again from the
    warehouse, and its note replaces this one."""
    try:
        raw = json.loads(state_path(target).read_text())
    except (OSError, ValueError):
        raw = {}
    raw = raw if isinstance(raw, dict) else {}
    raw["restored"] = [f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC", copy_identity(target)]
    write_text(state_path(target), json.dumps(raw))


def state_path(target: Path) -> Path:
    """`published.duckdb` -> `published.state.json`: the identity of the file the last publish wrote."""
    return target.with_suffix(".state.json")


def copy_identity(path: Path) -> list[int] | None:
    """A copy's file as device, inode, size and modification time (None: no such file): a publish renames a new
    file in, so the planners' copy's identity changes exactly when a publish has replaced it (the nightly's
    alert tells the two apart by it: `flows/nightly.py`)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


@dataclass(frozen=True)
class _Check:
    """A forecast file as the publish that wrote it saw it: its size and SHA-256, and its identity when last
    verified (device, inode, size, modification and change times: `_file_identity`)."""

    size: int
    sha256: str
    identity: list[int]


def _file_identity(path: Path) -> list[int] | None:
    """A forecast file's device, inode, size, modification and change times (None: no such file). Any write
    into the file, a truncation, a rename over it or a reset of its modification time (`touch -d`, `os.utime`)
    gives it a new change time, which no process can set back: while its identity is what the publish that
    verified it noted, nothing wrote the file since, and it need not be read again."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            digest.update(chunk)  # hashlib lets go of the GIL on large chunks: files are hashed in parallel
    return digest.hexdigest()


def _sha256s(paths: list[Path]) -> list[str]:
    """The SHA-256 of each file, a few at a time (reading and hashing ~0.7 GB/s a core here)."""
    if len(paths) < 2:
        return [_sha256(p) for p in paths]
    with ThreadPoolExecutor(max_workers=min(len(paths), os.cpu_count() or 1, 4)) as pool:
        return list(pool.map(_sha256, paths))


def _damage(identity: list[int] | None, check: _Check, sha256: str | None) -> str | None:
    """What is wrong with a forecast file noted as `check`, whose identity is now `identity` (None: nothing);
    `sha256`, its bytes' digest, is needed only when its identity is not the noted one."""
    if identity is None:
        return "missing"
    if identity[2] != check.size:
        return f"{identity[2]:,} bytes where {check.size:,} were written (cut short or overwritten)"
    if identity != check.identity and sha256 != check.sha256:
        return "its bytes are not those written (SHA-256 differs: overwritten or damaged)"
    return None


@dataclass
class _Note:
    """`published.state.json` as the last publish wrote it (step 8); its parts None or empty where missing
    (no publish yet, a note of an older gpucast, or one that cannot be read)."""

    identity: list[int] | None = None
    previous: list[int] | None = None
    forecast_files: list[list[str]] | None = None  # per copy of the last publishes, newest first, the files it reads
    checks: dict[str, _Check] = field(default_factory=dict)  # per forecast file, as written (`_Check`)
    repairs: list[list[str]] = field(default_factory=list)  # [when (UTC), what was found and done], newest first
    restored: tuple[str, list[int]] | None = None  # `gpucast restore`: when (UTC), and the identity of the copy it put back


REPAIRS_KEPT = 10  # the note keeps the last publishes' repairs for `gpucast status` (`copy_health`)


def _read_note(target: Path) -> _Note:
    """The last publish's note; what of it cannot be read is left out (the publish then trusts less of what is on
    disk: a copy it cannot identify is not built on, a forecast file without a checksum is written again)."""
    try:
        raw = json.loads(state_path(target).read_text())
    except (OSError, ValueError):
        return _Note()
    if not isinstance(raw, dict):
        return _Note()
    note = _Note(_ints(raw.get("identity")), _ints(raw.get("previous")))
    files = raw.get("forecast_files")
    if isinstance(files, list) and all(isinstance(f, list) and all(isinstance(n, str) for n in f) for f in files):
        note.forecast_files = files
    for name, check in (raw.get("forecast_checks") or {}).items() if isinstance(raw.get("forecast_checks"), dict) else []:
        with contextlib.suppress(TypeError, ValueError):
            size, sha256, identity = check
            if isinstance(size, int) and isinstance(sha256, str) and _ints(identity):
                note.checks[name] = _Check(size, sha256, identity)
    repairs = raw.get("repairs")
    if isinstance(repairs, list):
        note.repairs = [r for r in repairs if isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r)]
    restored = raw.get("restored")
    if isinstance(restored, list) and len(restored) == 2 and isinstance(restored[0], str) and _ints(restored[1]):
        note.restored = (restored[0], restored[1])
    return note


def _ints(value: object) -> list[int] | None:
    return value if isinstance(value, list) and value and all(isinstance(v, int) for v in value) else None


def _note_published(target: Path, previous: list[int] | None, forecast_files: list[list[str]],
                    checks: dict[str, _Check], repairs: list[str], earlier: list[list[str]]) -> None:
    """Write the identity of the new copy's file and of the previous copy's (step 8), the forecast files of the
    last publishes' copies (newest first) with their checks, and the repairs of this publish and the last ones,
    replacing the note atomically."""
    read = {name for names in forecast_files for name in names}
    now = f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC"
    write_text(state_path(target), json.dumps({
        "identity": copy_identity(target), "previous": previous, "forecast_files": forecast_files,
        "forecast_checks": {n: [c.size, c.sha256, c.identity] for n, c in sorted(checks.items()) if n in read},
        "repairs": ([[now, r] for r in repairs] + earlier)[:REPAIRS_KEPT]}))


def _sweep_forecast_files(target: Path, kept: list[list[str]]) -> None:
    """Remove the forecast files no copy of the last publishes reads, and files left by a publish that was killed."""
    folder = forecast_files_dir(target)
    read = {name for names in kept for name in names}
    for path in folder.iterdir() if folder.is_dir() else []:
        if path.name not in read and (path.suffix == ".parquet" or path.name.endswith(".tmp")):
            path.unlink(missing_ok=True)


def _noted(target: Path, note: _Note) -> tuple[list[int], list[int] | None] | None:
    """The identities the last publish noted for the current copy and the previous one, if the current copy is
    still that file (else None: no copy yet, no note from an older gpucast, or a copy written into or restored)."""
    return (note.identity, note.previous) if note.identity is not None and copy_identity(target) == note.identity else None


def _keep_as_previous(target: Path) -> None:
    """Give the current copy's file the name `published.prev.duckdb` too (a hard link: no bytes copied)."""
    keep = temp_beside(previous_copy(target))  # a second name, not a write: `replacing` does not fit
    keep.unlink(missing_ok=True)
    os.link(target, keep)
    os.replace(keep, previous_copy(target))


def _take_previous_copy(target: Path, tmp: Path, noted: tuple[list[int], list[int] | None]) -> bool:
    """Take the previous copy's file (the copy before the current one) to bring up to date in place at `tmp`, if it is
    still the file the last publish noted and not the current one; the current copy becomes the previous one at once.
    Return whether it was taken (False: nothing at `tmp`, nothing renamed)."""
    prev = previous_copy(target)
    if noted[1] is None or copy_identity(prev) != noted[1] or noted[1][:2] == noted[0][:2]:
        return False
    tmp.unlink(missing_ok=True)
    os.link(prev, tmp)
    _keep_as_previous(target)  # prev's old file now has one name, `tmp`; a session that opened it keeps reading it
    if copy_identity(tmp) != noted[1]:  # written into between the look and the link
        tmp.unlink()
        return False
    os.chmod(tmp, 0o644)
    return True


def _byte_copy_of_last_publish(target: Path, tmp: Path, noted: list[int]) -> bool:
    """Copy `target` to `tmp` if it is, unchanged before and after the copy, the file the last publish wrote (its
    identity `noted`); return whether it was (False: nothing usable at `tmp`, build the copy in full)."""
    if copy_identity(target) != noted:
        return False
    tmp.unlink(missing_ok=True)
    shutil.copyfile(target, tmp)  # in-kernel copy (sendfile); the file planners hold open is only read
    os.chmod(tmp, 0o644)
    if copy_identity(target) != noted:  # written into while we copied
        tmp.unlink()
        return False
    return True


@dataclass(frozen=True)
class _ForecastFiles:
    """The forecast files tonight's copy reads (`_forecast_files`): their paths, the forecasts table's columns
    (name, type), the checks of every file as noted after this publish, and what was found damaged and rebuilt."""

    paths: list[Path]
    columns: list[tuple[str, str]]
    checks: dict[str, _Check]
    repairs: list[str]

    @property
    def names(self) -> list[str]:
        return sorted(p.name for p in self.paths)


def _forecast_files(storage: Storage, checks: dict[str, _Check], rewrite: bool) -> _ForecastFiles:
    """The Parquet files of each score run the warehouse holds (see `FORECASTS`), verified, taken or written
    before the copy is built (so a copy that must be built again does not redo them). Per run, unless `rewrite`:
    1. the files the last publishes noted for it (same run, columns and row count), each verified cheaply but
       really (`_verified`): nothing is read or written while each is the file noted;
    2. else, for a run no publish wrote yet, the parts its score run staged and kept (`forecast.keep_staged`),
       when they hold every column and as many rows as the warehouse: flushed to disk and renamed;
    3. else (a noted file damaged or missing, a file without a noted checksum, a run changed, and always when
       `rewrite`) one file read back from the warehouse (block checksums checked), written under a temporary
       name, flushed to disk and renamed over any damaged one.
    The SHA-256 of each file taken or written is noted; every run's row count in its files is then checked
    against the warehouse's."""
    folder = forecast_files_dir(storage.published_path)
    verified, damaged = ({}, {}) if rewrite else _verified(folder, checks)
    found = [f"{folder / name}: {problem}" for name, problem in sorted(damaged.items())]
    con = duckdb.connect(config={"memory_limit": storage.duckdb_memory, "temp_directory": str(storage.staging_dir)})
    try:
        con.execute(f"ATTACH {sql_string(storage.db_path)} AS source (READ_ONLY)")
        columns = con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = 'source' "
                              "AND schema_name = 'main' AND table_name = ? ORDER BY column_index", [FORECASTS]).fetchall()
        digest = hashlib.sha256(json.dumps(columns).encode()).hexdigest()[:12]
        source = sql_name("source", "main", FORECASTS)
        want = dict(con.execute(f"SELECT score_run_id, count(*) FROM {source} GROUP BY ALL ORDER BY 1").fetchall())
        folder.mkdir(parents=True, exist_ok=True)
        files: dict[str, list[Path]] = {}
        fresh: list[Path] = []  # taken or written now: their checksums are taken below
        repairs: list[str] = []
        for run, rows in want.items():
            stem = f"{db.forecast_file_stem(run)}.{digest}.{rows}"
            names = [] if rewrite else _noted_run_files(checks, stem)
            if names and not any(n in damaged for n in names):
                files[run] = [folder / n for n in names]
                continue
            repairs += [f"{folder / n}: {damaged[n]}; run {run}'s forecasts written again from the warehouse"
                        for n in names if n in damaged]
            run_files = None if rewrite or names else _adopt_staged(con, folder, run, stem, rows, [n for n, _ in columns])
            files[run] = run_files or [_export_run(con, source, run, folder / f"{stem}.parquet")]
            fresh += files[run]
        verified.update({p.name: _Check(i[2], sha, i) for p, sha in zip(fresh, _sha256s(fresh), strict=True)
                         if (i := _file_identity(p)) is not None})
        paths = [p for run_files in files.values() for p in run_files]
        counts = dict(con.execute("SELECT file_name, num_rows FROM parquet_file_metadata(?)",
                                  [[str(p) for p in paths]]).fetchall()) if paths else {}
        wrong = [run for run, run_files in files.items() if sum(counts.get(str(p), 0) for p in run_files) != want[run]]
        if wrong:
            raise duckdb.InvalidInputException(
                f"{FORECASTS} of run(s) {', '.join(wrong)} were not published whole (files "
                f"{', '.join(p.name for r in wrong for p in files[r])})")
    except duckdb.Error as exc:
        if environment_error(exc):
            raise  # a full disk or a permission error: said as such (exit 5), not as corruption
        raise _not_read_back(storage, exc, found) from exc
    finally:
        con.close()
    return _ForecastFiles(paths, columns, verified, repairs)


def _noted_run_files(checks: dict[str, _Check], stem: str) -> list[str]:
    """The files the last publishes noted for a run whose file names begin with `stem`: its own file (written from
    the warehouse) if noted, else its parts (taken from its score run); none for a run no publish wrote yet."""
    if f"{stem}.parquet" in checks:
        return [f"{stem}.parquet"]
    return sorted(n for n in checks if n.startswith(f"{stem}.part") and n.endswith(".parquet"))


def _verified(folder: Path, checks: dict[str, _Check]) -> tuple[dict[str, _Check], dict[str, str]]:
    """Verify the noted forecast files `checks` in `folder`: each must exist and have its size; one whose identity
    is the noted one was written by nobody since and is not read; any other (the identity changes when a file is
    written, and also when its other name is removed, it is copied back, or touched) must have its noted SHA-256.
    Return (the checks of the good files, with their identity now; per damaged file what is wrong)."""
    identities = {name: _file_identity(folder / name) for name in checks}
    unsure = [n for n, i in identities.items() if i is not None and i[2] == checks[n].size and i != checks[n].identity]
    sha256s = dict(zip(unsure, _sha256s([folder / n for n in unsure]), strict=True))
    good, damaged = {}, {}
    for name, check in checks.items():
        if (problem := _damage(identities[name], check, sha256s.get(name))) is None:
            good[name] = _Check(check.size, check.sha256, identities[name])
        else:
            damaged[name] = problem
    return good, damaged


def _not_read_back(storage: Storage, exc: duckdb.Error, found: Sequence[str] = ()) -> PublishFailed:
    """The error of a publish that could not read the warehouse back whole, with the forecast files it `found`
    damaged (which it could then not write again)."""
    damaged = f"; found damaged: {'; '.join(found)}" if found else ""
    return PublishFailed(
        f"could not read {storage.db_path} back whole ({type(exc).__name__}: {exc}){damaged}; the planners' copy was "
        "left as it was. Check the disk, then restore the warehouse from the lake or a backup (docs/operations.md)")


def _each_job_keyed_once(con: duckdb.DuckDBPyConnection, storage: Storage) -> None:
    """Refuse a warehouse whose `job_logs_latest` keys a job twice: its `job_logs` would show the job twice while every
    count still matched (review 65b S3-4). gpucast never writes two (the load replaces a job's key): only a hand edit or
    a bug could. Checked on the warehouse before a copy is built, so `published.prev.duckdb` stays the older copy."""
    twice, = con.execute(f"SELECT count(*) - count(DISTINCT job_id) FROM {sql_name(LATEST_KEYS)}").fetchone()
    if twice:
        raise PublishFailed(
            f"main.{LATEST_KEYS} holds {twice:,} more key(s) than jobs: a job keyed twice would show twice in {LATEST} "
            f"({storage.db_path}); the planners' copy was left as it was. Rebuild the warehouse from the Parquet lake "
            "(docs/operations.md)")


class _LatestOutOfStep(duckdb.InvalidInputException):
    """The copy's `job_logs` view (`LATEST`) finds fewer rows than the warehouse's `job_logs_latest` holds keys: a
    latest record's key whose record is not in `job_log_records`. In an incremental publish the copy is rebuilt first
    (its history could be the one short); built from nothing, the warehouse itself is out of step (review 61 N2):
    its own `job_logs` view drops the job. (Two keys for one job: `_each_job_keyed_once`.)"""


class _CopyInUse(Exception):
    """The earlier copy a publish builds on cannot be used: open in a session (DuckDB's lock) or written into before
    we locked it; or, `damaged`, unreadable or failing while brought up to date (a block of it that fails its checksum,
    or any other error not traced to a block of the warehouse: `_damaged_file`)."""

    def __init__(self, message: str, damaged: bool = False) -> None:
        super().__init__(message)
        self.damaged = damaged


# DuckDB's error for a block that fails its checksum (SingleFileBlockManager): the block's byte offset in its file and
# the checksum stored in the block's first 8 bytes, but not the file's name
BAD_BLOCK = re.compile(r"does not match stored checksum (\d+) in block at location (\d+)")


def _damaged_file(exc: duckdb.Error, paths: Sequence[Path]) -> Path | None:
    """The one file of `paths` that a checksum error `exc` is about: the one holding the checksum the error quotes at
    the location it names (another file holds other bytes there; two files holding the same checksum at the same
    place would be the same block). None for another error, or when not exactly one file does."""
    if (bad := BAD_BLOCK.search(str(exc))) is None:
        return None
    stored, at = int(bad[1]), int(bad[2])
    holders = [p for p in paths if _stored_checksum(p, at) == stored]
    return holders[0] if len(holders) == 1 else None


def _stored_checksum(path: Path, at: int) -> int | None:
    """The little-endian 64-bit number at byte `at` of `path` (a block's stored checksum); None if none can be read."""
    try:
        with open(path, "rb") as f:
            f.seek(at)
            raw = f.read(8)
    except OSError:
        return None
    return struct.unpack("<Q", raw)[0] if len(raw) == 8 else None


def _verified_copy(storage: Storage, tmp: Path, forecasts: _ForecastFiles, *, base: bool,
                   in_place_of: list[int] | None = None) -> None:
    """Bring the database file at `tmp` to every table (its columns and rows, without keys or constraints) and
    every view of the warehouse: from an earlier copy at `tmp` when `base` (a byte copy of the last publish, or the
    previous copy's own file, whose identity is `in_place_of`), else from nothing; within the pipeline's DuckDB
    memory limit (spilling to the staging folder). `forecasts` becomes a view over the runs' Parquet files
    (`_forecast_files`). An earlier copy that cannot be used raises `_CopyInUse`: held by a session, changed, or
    any error while it is brought up to date but a block of the warehouse failing its checksum (`_damaged_file`),
    which is `PublishFailed` at once, as is any error when built from nothing (it reads only the warehouse)."""
    if not base:
        tmp.unlink(missing_ok=True)
    con = duckdb.connect(config={"memory_limit": storage.duckdb_memory, "temp_directory": str(storage.staging_dir)})
    try:
        try:
            con.execute(f"ATTACH {sql_string(tmp)} AS copy")
        except duckdb.Error as exc:
            # the earlier copy's file locked by a session, or unreadable (corrupt, cut short): it is only a head
            # start, so the publish takes another way instead of failing over it
            if base and not environment_error(exc):
                raise _CopyInUse(f"{type(exc).__name__}: {exc}", damaged="lock" not in str(exc).lower()) from exc
            raise
        if in_place_of is not None and copy_identity(tmp) != in_place_of:  # now locked: written into before we locked it
            raise _CopyInUse(f"{tmp} changed")
        con.execute(f"ATTACH {sql_string(storage.db_path)} AS source (READ_ONLY)")
        try:
            # incremental: one transaction, so the copy's WAL is written and synced once, not once per
            # statement (~30 tables); full: a statement per table, as before (each commit frees its memory)
            with transaction(con) if base else contextlib.nullcontext():
                _drop_views(con)
                _copy_tables(con)
                _forecasts_view(con, forecasts)
                failpoint("publish:before-commit")
            _copy_views(con)
            con.execute("CHECKPOINT copy")
        except duckdb.Error as exc:
            if environment_error(exc):
                raise  # a full disk or a permission error: said as such (exit 5), not as corruption
            if base and _damaged_file(exc, [tmp, storage.db_path]) != storage.db_path:
                raise _CopyInUse(f"{type(exc).__name__}: {str(exc)[:300]}", damaged=True) from exc
            if isinstance(exc, _LatestOutOfStep):  # built from nothing: the warehouse's own tables disagree
                raise PublishFailed(
                    f"{exc}: the warehouse's {LATEST_KEYS} names a latest record that is not in job_log_records "
                    f"({storage.db_path}); the planners' copy was left as it was. Rebuild the warehouse from the Parquet "
                    "lake (docs/operations.md)") from exc
            raise _not_read_back(storage, exc) from exc  # built from nothing, or a bad block of the warehouse
    finally:
        con.close()


def _forecasts_view(con: duckdb.DuckDBPyConnection, forecasts: _ForecastFiles) -> None:
    """Make `copy.forecasts` a view over the runs' Parquet files (absolute paths, the warehouse's column types)."""
    if forecasts.paths:
        body = (", ".join(f"{sql_name(name)}::{kind} AS {sql_name(name)}" for name, kind in forecasts.columns)
                + f" FROM read_parquet([{', '.join(sql_string(p) for p in forecasts.paths)}], union_by_name = true)")
    else:  # no run yet: the columns, no rows
        body = ", ".join(f"NULL::{kind} AS {sql_name(name)}" for name, kind in forecasts.columns) + " LIMIT 0"
    con.execute(f"CREATE OR REPLACE VIEW {sql_name('copy', 'main', FORECASTS)} AS SELECT {body}")


def _drop_views(con: duckdb.DuckDBPyConnection) -> None:
    """Every view of `copy` (each is defined again from the warehouse's SQL; views are bound when read, so
    dropping them in any order is fine)."""
    for schema, name in con.execute("SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = 'copy' "
                                    "AND NOT internal").fetchall():
        con.execute(f"DROP VIEW {sql_name('copy', schema, name)}")


def _copy_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Every table of `source` into `copy`: the tables of `INCREMENTAL` by their runs' difference where `copy`
    has them with the same columns, every other one read back whole (one statement each: no index to hold in
    memory); then tables `copy` has and `source` does not are dropped, and row counts are compared."""
    columns: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for database, schema, name, column, kind in con.execute(COLUMNS).fetchall():
        columns.setdefault((database, schema, name), []).append((column, kind))
    # views in the copy: `forecasts` (`_forecasts_view`) and `job_logs` (`_latest_view`, over its own arrivals)
    tables = [t for t in con.execute(SOURCE_TABLES).fetchall() if t not in {("main", FORECASTS), ("main", LATEST_KEYS)}]
    for schema, name in tables:
        into, source = sql_name("copy", schema, name), sql_name("source", schema, name)
        by_run = INCREMENTAL.get(name) if schema == "main" else None
        if by_run and columns.get(("copy", schema, name)) == columns[("source", schema, name)]:
            _apply_runs(con, into, source, *by_run)
            continue
        if schema != "main":
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {sql_name('copy', schema)}")
        con.execute(f"DROP TABLE IF EXISTS {into}")
        con.execute(f"CREATE TABLE {into} AS SELECT * FROM {source}")
    wanted = set(tables)
    for schema, name in con.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'copy'").fetchall():
        if (schema, name) not in wanted:  # (a copy of an older gpucast's `job_logs` table too: a view now)
            con.execute(f"DROP TABLE {sql_name('copy', schema, name)}")
    held_by = {}  # (schema, table) of the copy -> the warehouse's table of as many rows
    if ("main", LATEST_KEYS) in [tuple(t) for t in con.execute(SOURCE_TABLES).fetchall()]:
        _latest_view(con, columns[("source", "main", LATEST)])
        tables.append(("main", LATEST))  # its rows counted as a table's: one a key of the warehouse
        held_by[("main", LATEST)] = ("main", LATEST_KEYS)
    counts = " UNION ALL ".join(f"SELECT {i}, (SELECT count(*) FROM {sql_name('copy', schema, name)}), "
                                f"(SELECT count(*) FROM {sql_name('source', *held_by.get((schema, name), (schema, name)))})"
                                for i, (schema, name) in enumerate(tables))
    for i, published, held in con.execute(counts).fetchall() if tables else []:
        if published != held:
            schema, name = held_by.get(tables[i], tables[i])
            out_of_step = _LatestOutOfStep if tables[i] == ("main", LATEST) else duckdb.InvalidInputException
            raise out_of_step(f"{schema}.{name} has {held:,} rows but {published:,} were published")


def _latest_view(con: duckdb.DuckDBPyConnection, columns: list[tuple[str, str]]) -> None:
    """Make `copy.job_logs` a view over the copy's `job_log_records`: the rows whose arrival the warehouse's
    `job_logs_latest` holds (`LATEST_KEYS`), the warehouse's `job_logs`' `columns` in its order. The arrivals are read
    back from the warehouse whole (one column)."""
    con.execute(f"CREATE OR REPLACE TABLE {sql_name('copy', 'main', LATEST_ARRIVALS)} AS "
                f"SELECT arrival FROM {sql_name('source', 'main', LATEST_KEYS)}")
    names = ", ".join(f"r.{sql_name(name)}" for name, _ in columns)
    # Unqualified names: DuckDB binds a view's tables in the view's own database, so the file read alone (planners)
    # reads its own `job_log_records`. An inner join, the same rows as a semi join (`arrival` is unique on both sides):
    # DuckDB may build its hash table on either side, and a count by status over 1M jobs took 0.03 CPU-s against the
    # semi join's 0.08 (which builds on the arrivals).
    con.execute(f"CREATE OR REPLACE VIEW {sql_name('copy', 'main', LATEST)} AS SELECT {names} FROM "
                f"{sql_name(LATEST_ARRIVALS)} a JOIN job_log_records r ON r.arrival = a.arrival")


def _adopt_staged(con: duckdb.DuckDBPyConnection, folder: Path, run: str, stem: str, rows: int,
                  columns: list[str]) -> list[Path] | None:
    """The parts the score run `run` kept (`forecast.keep_staged`), renamed to the run's file names, if they hold
    the table's `columns` and `rows` rows in all; else None (and they are left for the sweep)."""
    from gpucast.warehouse.forecast import STAGED  # (its module loads the results' types, with Polars and numpy:
    # not for `gpucast status`, which reads this module's `copy_health`, issue 52 item 4)

    staged = sorted(folder.glob(f"{db.forecast_file_stem(run)}.{STAGED}.*.parquet"))
    if not staged:
        return None
    paths = [str(p) for p in staged]
    try:
        held = con.execute("SELECT sum(num_rows) FROM parquet_file_metadata(?)", [paths]).fetchall()[0][0]
        names = [{n for (n,) in con.execute("SELECT name FROM parquet_schema(?)", [p]).fetchall()} for p in paths]
    except duckdb.Error:  # unreadable: the run is written from the warehouse instead
        return None
    if held != rows or not all(set(columns) <= n for n in names):
        return None
    adopted = []
    for i, part in enumerate(staged):
        with open(part, "rb") as f:
            os.fsync(f.fileno())
        name = folder / f"{stem}.part{i}.parquet"
        os.replace(part, name)
        adopted.append(name)
    return adopted


def _export_run(con: duckdb.DuckDBPyConnection, source: str, run: str, path: Path) -> Path:
    """Write run `run`'s forecasts, read back from the warehouse, to `path` (a temporary name, flushed, renamed)."""
    lo, hi = con.execute(f"SELECT min(rowid), max(rowid) FROM {source} WHERE score_run_id = ?", [run]).fetchall()[0]
    with replacing(path) as part:
        # the rows of a run were appended together: a row-id range lets the scan skip other runs' row groups
        con.execute(f"COPY (SELECT * FROM {source} WHERE rowid BETWEEN {int(lo)} AND {int(hi)} AND score_run_id = ?) "
                    f"TO {sql_string(part)} (FORMAT parquet)", [run])
    return path


def _apply_runs(con: duckdb.DuckDBPyConnection, into: str, source: str, run: str, key: str | None) -> None:
    """Make `into` hold the rows `source` holds, run by run: delete the runs it no longer has (pruned), insert
    the runs it did not have (new). A run both hold with different row counts lost or gained rows: with a `key`,
    the rows whose key the other side lacks are deleted or inserted; without one, the run is replaced whole.
    Afterwards both must hold the same rows per run."""
    def runs(table: str) -> dict[str, int]:
        return dict(con.execute(f"SELECT {sql_name(run)}, count(*) FROM {table} GROUP BY ALL").fetchall())

    have, want = runs(into), runs(source)
    changed = [r for r in have.keys() & want.keys() if have[r] != want[r]]
    gone = [r for r in have.keys() - want.keys()] + ([] if key else changed)
    new = [r for r in want.keys() - have.keys()] + ([] if key else changed)
    def in_runs(ids: list[str], table: str = source) -> str:
        """A filter on the runs `ids` that reads no other run's rows of `source`: the run column's values share
        their first 8 bytes ('score-20'), so its zone maps cannot skip row groups, but a run's rows were appended
        together and a range of row ids does (the range is read off the run column alone)."""
        where = f"{sql_name(run)} IN ({', '.join(['?'] * len(ids))})"
        if table != source:
            return where
        lo, hi = con.execute(f"SELECT min(rowid), max(rowid) FROM {source} WHERE {where}", ids).fetchall()[0]
        return f"rowid BETWEEN {int(lo)} AND {int(hi)} AND {where}"

    if gone:
        con.execute(f"DELETE FROM {into} WHERE {in_runs(gone, into)}", gone)
    if key and changed:
        k = sql_name(key)
        con.execute(f"DELETE FROM {into} WHERE {in_runs(changed, into)} AND {k} NOT IN "
                    f"(SELECT {k} FROM {source} WHERE {in_runs(changed)})", [*changed, *changed])
        con.execute(f"INSERT INTO {into} SELECT * FROM {source} WHERE {in_runs(changed)} "
                    f"AND {k} NOT IN (SELECT {k} FROM {into} WHERE {in_runs(changed, into)})", [*changed, *changed])
    if new:
        con.execute(f"INSERT INTO {into} SELECT * FROM {source} WHERE {in_runs(new)}", new)
    if runs(into) != want:
        raise duckdb.InvalidInputException(f"{into} does not hold the warehouse's rows per {run} after the publish")


def _copy_views(con: duckdb.DuckDBPyConnection) -> None:
    """Every view of `source` but `job_logs` (the copy's own, over its arrivals: `_latest_view`), defined again in
    `copy` from its own SQL. A view that reads another view defined after it fails until that one exists, so the views
    are retried while each round adds one."""
    pending = [sql for (sql,) in con.execute("SELECT sql FROM duckdb_views() WHERE database_name = 'source' "
                                             "AND NOT internal AND NOT (schema_name = 'main' AND view_name = ?) "
                                             "ORDER BY view_oid", [LATEST]).fetchall()]
    con.execute("USE copy")
    try:
        with transaction(con):  # in one go when each view comes after those it reads (one WAL sync)
            for sql in pending:
                con.execute(sql)
        return
    except duckdb.CatalogException:
        pass
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
    with replacing(dst) as tmp:
        with open(src, "rb") as f, open(tmp, "wb") as g:
            shutil.copyfileobj(f, g, length=16 << 20)
        os.chmod(tmp, READ_ONLY_MODE)


@dataclass(frozen=True)
class CopyHealth:
    """What `gpucast status` says of the planners' copy: what the last publishes found damaged and did about it
    (newest first: when, what), and what is wrong now with the copy and the forecast files it reads."""

    repairs: list[tuple[str, str]]
    problems: list[str]
    restored: str | None = None  # when `gpucast restore` put the previous copy back (UTC), if the copy is that one


def copy_health(target: Path) -> CopyHealth:
    """Look at the copy `target` and the forecast files it reads as the last publish noted them: each file must be
    there with its size, and one whose identity changed since (`_file_identity`) is read to compare its SHA-256
    (the others are not read: no run's forecasts are read back). A copy `gpucast restore` put back is said to be
    that (`restored`), and the files checked are the previous copy's, which it reads."""
    note = _read_note(target)
    problems = []
    identity = copy_identity(target) if target.exists() else None
    restored = note.restored[0] if note.restored is not None and identity == note.restored[1] else None
    if identity is not None and identity != note.identity and restored is None:
        problems.append(f"{target} is not the file the last publish wrote (written into, restored, or no note in "
                        f"{state_path(target).name}): the next publish builds it again from the warehouse")
    folder = forecast_files_dir(target)
    copies = note.forecast_files or [[]]
    read = copies[1] if restored is not None and len(copies) > 1 else copies[0]
    _, damaged = _verified(folder, {n: note.checks[n] for n in read if n in note.checks})
    problems += [f"{folder / name}: {problem}; the next publish writes its run again from the warehouse"
                 for name, problem in sorted(damaged.items())]
    return CopyHealth([(when, what) for when, what in note.repairs], problems, restored)
