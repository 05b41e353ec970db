"""Ingest steps that touch no warehouse: find files, then read -> normalise -> validate -> stage.

`stage_file` streams one file chunk by chunk and writes two kinds of Parquet files into the run's
staging folder: valid rows (typed contract columns) and rejected rows (with every broken rule).
Nothing is loaded until `warehouse.load.load_run` commits the whole run, so a file that turns out
to be unreadable half-way (a truncated gzip) contributes nothing but a file-level rejection.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
from tqdm import tqdm

from gpucast.expectations import contract as c
from gpucast.expectations.validate import ExpectationOutcome, check_rows, validate_staged
from gpucast.records.files import ChangedWhileCopied, move
from gpucast.records.outcomes import GONE_STATUS, FileResult, RunCheck
from gpucast.tasks.ingest.normalize import normalize
from gpucast.tasks.ingest.readers import (
    CUT_MARK,
    DEFAULT_CHUNK_ROWS,
    MAX_RAW_CHARS,
    MAX_REASON_CHARS,
    FileInfo,
    FileRejected,
    file_sha256,
    read_chunks,
)
from gpucast.tasks.sources.mapping import Mapping

log = logging.getLogger(__name__)
SUITE = "job_logs"
FAILED = "failed"  # staging files of rejected rows the suite's rules judged, typed: GX judges them with the valid ones
# The staging files live for one run (GX and the warehouse read them once; the lake's files are DuckDB's, written by the
# merge): LZ4 writes a 100,000-row chunk in 0.06 CPU-s where Polars' default zstd took 0.09, and reads faster, for
# files ~1.5x larger (issue 52)
STAGED_COMPRESSION = "lz4"


def discover(paths: Iterable[str]) -> list[Path]:
    """Expand files, folders (recursively) and globs into a sorted list of files.

    Raises FileNotFoundError naming every argument that matched nothing.
    """
    found: set[Path] = set()
    missing = []
    for arg in paths:
        p = Path(arg).expanduser()
        if p.is_file():
            found.add(p.resolve())
        elif p.is_dir():
            found.update(_listed(p))
        else:
            matches = [Path(m) for m in glob.glob(str(p), recursive=True)]
            files = [m.resolve() for m in matches if m.is_file()]
            files += [f.resolve() for m in matches if m.is_dir() for f in m.rglob("*") if f.is_file()]
            if not files:
                missing.append(arg)
            found.update(files)
    if missing:
        raise FileNotFoundError("no such file, folder or glob match: " + ", ".join(repr(m) for m in missing))
    return sorted(found)


ARCHIVE = "archive"  # inbox/archive/YYYY-MM-DD/: files already ingested, out of the inbox's scan


def make_archive_room(inbox: Path) -> Path | None:
    """Where the inbox's top holds a *file* named `archive` (or a link to one, or a dangling link), rename it `archive.1`
    (`.2` ...) so the archive folder can be made, and return its new path: it is then an inbox file like any other, read
    and archived by content (a job log loads; anything else, a link included, is rejected whole, as any other would be).
    Left as it was, it stopped every night after the load (review 77 S1-7: the archive move, NotADirectoryError)."""
    spot = inbox / ARCHIVE
    if spot.is_dir() or not (spot.exists() or spot.is_symlink()):  # a folder, or a link to one (an archive on another
        return None  # disk): the archive as meant
    return _move(spot, inbox, Path(ARCHIVE))  # the name itself is taken (by `spot`): archive.1, archive.2 ...


def inbox_files(inbox: Path, already_ingested: set[str]) -> tuple[list[Path], list[Path]]:
    """The inbox's files (not under `archive/`) as (new, already ingested by content)."""
    if not inbox.is_dir():
        return [], []
    new, seen = [], []
    for f in sorted(p for p in _listed(inbox) if p.relative_to(inbox.resolve()).parts[0] != ARCHIVE):
        try:
            key = content_key(f)
        except FileNotFoundError:  # deleted between the listing and its hash: not there to read
            continue
        (seen if key in already_ingested else new).append(f)
    return new, seen


def archive(files: Iterable[Path], inbox: Path, day: str | None = None,
            changed: list[Path] | None = None) -> list[Path]:
    """Move ingested inbox files to `inbox/archive/<day>/` (default: today, UTC), keeping their relative paths (a name
    taken there gets a `.1`, `.2` ... suffix); return where they went. Their content hashes stay
    recorded, so the same content dropped again is still recognised. A file written to while it was copied to an
    archive on another disk stays, added to `changed`; one the archive cannot take (a file in the way of its folders, a
    link on a disk that holds none) stays, said."""
    inbox = inbox.resolve()
    day = day or f"{datetime.now(UTC):%Y-%m-%d}"
    moved = []
    for f in files:
        rel = f.relative_to(inbox) if f.is_relative_to(inbox) else Path(f.name)
        try:
            moved.append(_move_or_hash_name(f, inbox / ARCHIVE / day, rel))
        except FileNotFoundError:
            continue  # deleted since it was listed or read (a clean-up job): nothing left to move
        except (FileExistsError, NotADirectoryError) as exc:  # a file where the archive needs a folder (review 83)
            log.warning("%s is left in the inbox: %s is a file where the archive needs a folder; move it away",
                        f, exc.filename or exc)
        except ChangedWhileCopied:
            log.warning("%s was written to while it was copied to the archive: left for the next run to read whole", f)
            if changed is not None:
                changed.append(f)
        except OSError as exc:
            if not (f.is_symlink() and exc.errno in NO_LINKS):
                raise
            log.warning("%s is a link and the archive's disk holds none: left in the inbox (unread, as every link); "
                        "remove it", f)  # (review 81: raised after the load, then every night in find-files)
    return moved


# What `os.symlink` raises where a file system holds no links (vfat, exFAT, SMB without unix extensions)
NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS}


def _move_or_hash_name(f: Path, folder: Path, rel: Path) -> Path:
    """`_move`, or, where a path or name is too long for the archive's deeper folder or a `.1` suffix passes 255 bytes
    (review 77 S1-2: it failed the run after its load committed, and every later run in `find-files`), `_move` to the
    day's folder by the content's hash."""
    try:
        return _move(f, folder, rel)
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        return _move(f, folder, Path(f"{content_key(f)[:16]}{''.join(f.suffixes)[-16:]}"))


def _move(f: Path, folder: Path, rel: Path) -> Path:
    """`f` moved to `folder / rel`, or `rel` with a `.1`, `.2` ... suffix when that name is taken; where it went. An
    archive on another disk (review 79: a rename cannot cross file systems, and every night failed after its load)
    gets a flushed copy, a link moved as a link (review 80: the copy followed links), and a file written to while it
    was copied stays (`records.files.move`)."""
    target = folder / rel
    n = 0
    while target.exists() or target.is_symlink():
        n += 1
        target = folder / rel.with_name(f"{rel.name}.{n}")
    target.parent.mkdir(parents=True, exist_ok=True)
    before = stat_key(f)
    move(f, target, unchanged=lambda: stat_key(f) == before)
    return target


def archive_read(results: Iterable[FileResult], inbox: Path) -> list[Path]:
    """After a run that read the inbox: archive each file it read (`archive`: out of the next run's way, and never
    hashed again), unless its content changed while it was read (an exporter still writing it: its tail would be
    lost). Return those left in the inbox, for the next run to read whole."""
    changed = []
    for r in results:  # each checked just before its own move (review 83: all were checked, then all moved)
        path = Path(r.path)
        try:
            same = content_key(path) == r.sha256 and (r.stat_before is None or stat_key(path) == r.stat_before)
        except (FileNotFoundError, NotADirectoryError):  # gone before it was read (`GONE`), or deleted (or a folder of
            continue  # its path made a file) since: nothing to move (review 84)
        if not same:
            changed.append(path)
        else:  # (a file written to while it was copied to an archive on another disk is left, and said, too)
            archive([path], inbox, changed=changed)
    return changed


# `FileResult.seconds`' keys: read = decode the file; normalise = type the strings (parsing rules); rules = the
# expectation suite's row rules and the sort into valid and rejected rows; write = the staging Parquet files
STAGE_STEPS = ("read", "normalise", "rules", "write")


def stage_seconds(results: Iterable[FileResult]) -> dict[str, float]:
    """The wall seconds staging the files took, summed over them per step (`STAGE_STEPS`)."""
    results = list(results)
    return {k: round(sum(r.seconds.get(k, 0.0) for r in results), 2) for k in STAGE_STEPS}


def _listed(folder: Path) -> set[Path]:
    """The files under `folder`, hidden ones left out; symbolic links kept as links (not resolved), so
    `stage_file` can refuse them: a link in a folder could point at any file this user may read."""
    folder = folder.resolve()
    return {f if f.is_symlink() else f.resolve() for f in folder.rglob("*")
            if (f.is_symlink() or f.is_file()) and not _hidden(f, folder)}


def utf8_named(files: Iterable[Path]) -> tuple[list[Path], list[str]]:
    """`files` whose full name is text (UTF-8), and a warning naming each other one with its bytes escaped: such a name
    (a Latin-1 exporter, an SMB share) cannot be stored, logged or published, and stopped the whole ingest, every
    night (review 77 S1-1). Left where it is, unread, until it is renamed; the other files load."""
    kept, said = [], []
    for f in files:
        try:
            str(f).encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(f).decode("utf-8", "backslashreplace")
            said.append(f"file left unread: its name is not UTF-8 text ({shown}); rename it and it is read next time")
            continue
        kept.append(f)
    return kept, said


def content_key(path: Path) -> str:
    """What de-duplicates a file: its content's sha256; for a symbolic link, the link itself (never followed)."""
    if path.is_symlink():
        # (the bytes the file system holds: a name or target that is not UTF-8 stopped every night, review 82)
        return hashlib.sha256(b"symlink:" + os.fsencode(path) + b"->" + os.fsencode(os.readlink(path))).hexdigest()
    return file_sha256(path)


def stat_key(path: Path) -> tuple[int, int] | None:
    """A file's (size, mtime_ns): taken before its reading starts, so a write during the read is seen even where the
    content hash (computed beside the read, `stage_file`) already holds the written tail. A link: None (never
    followed; `content_key` is the link itself)."""
    if path.is_symlink():
        return None
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _raw_text(chunk: pl.DataFrame) -> pl.Series:
    """The records' original text: the JSONL line, else the source values as JSON."""
    source = [n for n in chunk.columns if not n.startswith("_")]
    rebuilt = pl.struct(source).struct.json_encode() if source else pl.lit("{}")
    return chunk.select(pl.coalesce(pl.col("_raw"), rebuilt).str.slice(0, MAX_RAW_CHARS)).to_series()


def _cut_reason(reason: pl.Expr) -> pl.Expr:
    """A reason past MAX_REASON_CHARS cut there, marked with the length it had (CUT_MARK)."""
    n = reason.str.len_chars()
    before, after = CUT_MARK.split("{}")
    return pl.when(n > MAX_REASON_CHARS).then(
        pl.concat_str(reason.str.slice(0, MAX_REASON_CHARS), pl.lit(before), n.cast(pl.String), pl.lit(after))
    ).otherwise(reason)


def stage_file(
    path: Path,
    staging_dir: Path,
    index: int,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    progress: Callable[[str], None] | None = None,
    not_after: datetime | None = None,
    mapping: Mapping | None = None,
) -> FileResult:
    """Read, normalise and validate one file; write its valid and rejected rows to `staging_dir`.
    A symbolic link found in a folder is rejected whole, unread. `not_after`: a timestamp after it breaks
    the time rule (the ingest's clock plus the tolerance, from the caller). `mapping`: the export's
    mapping file (tasks/sources/mapping.py), applied as the file is read.

    The file's content hash (`content_key`, a whole pass over its bytes: ~1 s for 815 MB) is computed by a thread
    while the first chunk is read and checked (hashlib releases the GIL), not before the reading starts; the first
    staging file written waits for it (its rows carry it). Because the hash may read a tail appended after the
    reader passed it, the file's size and mtime are taken before either starts (`FileResult.stat_before`):
    `archive_read` leaves a file whose hash or stat changed in the inbox, for the next run to read whole."""
    if path.is_symlink():
        result = FileResult(path=str(path), sha256=content_key(path), index=index)
        _refuse_link(result, path)
        return result
    result = FileResult(path=str(path), sha256="", index=index)
    try:
        started = _take_started(path, chunk_rows, mapping)  # a reading begun before the run (`start_reading`), if any
        result.stat_before = started.stat_before if started else stat_key(path)
    except FileNotFoundError:
        return _gone(result)
    with ThreadPoolExecutor(1, thread_name_prefix="gpucast-sha256") as hashing:
        digest = hashing.submit(content_key, path)
        staged = _stage_read(result, path, staging_dir, chunk_rows, progress, not_after, mapping, digest, started)
        # a reading error propagates as itself (the hash's own error, if any, stays in its future)
        try:
            staged.sha256 = staged.sha256 or digest.result()
        except FileNotFoundError:  # deleted between the reader's open and the hash's (an empty file: a file with rows
            return _gone(staged)  # waits for the hash before its first staging file, `_Staged.add`)
        return staged


# A file listed by the run but deleted or moved before it was read (a clean-up job, an exporter rotating its files):
# not a bad file and not the night's failure (review 77 S2-8). Nothing of it is read or loaded; `ingest_files` records
# it with status `gone`; it is not archived, and a file of that name and content is read by a later run.
GONE = "gone before it was read: deleted or moved after the run listed it; nothing of it was read"


def _gone(result: FileResult) -> FileResult:
    """`result` as a file that was gone when read: no rows, no hash."""
    result.status, result.reason, result.sha256 = GONE_STATUS, GONE, ""
    result.rows_read = result.rows_valid = result.rows_rejected = 0
    result.outcomes = []
    return result


def gone(results: Iterable[FileResult]) -> list[str]:
    """The names of the run's files that were gone when read (`GONE`)."""
    return [Path(r.path).name for r in results if r.status == GONE_STATUS]


def _vanished(exc: BaseException, path: Path) -> bool:
    """Whether an error is `path`'s absence (raised as itself, or as a `FileRejected` the reader made of it); not
    another file's (a staging file whose folder a clean-up removed is the run's failure, not a file gone)."""
    err = exc if isinstance(exc, FileNotFoundError) else exc.__cause__
    if not isinstance(err, FileNotFoundError):
        return False
    return Path(os.fsdecode(err.filename)) == path if err.filename is not None else not path.exists()


def _stage_read(result: FileResult, path: Path, staging_dir: Path, chunk_rows: int,
                progress: Callable[[str], None] | None, not_after: datetime | None, mapping: Mapping | None,
                digest: Future[str], started: _Started | None = None) -> FileResult:
    """`stage_file`'s reading, checking and writing of a file that is not a link; `digest`: its content hash, to be;
    `started`: its reading, begun before the run (`start_reading`), else it begins here."""
    info = started.info if started else FileInfo(path, mapping=mapping)
    chunks = started.chunks if started else ReadAhead(read_chunks(path, info, chunk_rows))
    staging_dir.mkdir(parents=True, exist_ok=True)
    staged = _Staged(result, staging_dir, digest)
    bar = tqdm(desc=path.name, unit=" rows", unit_scale=True, leave=False, disable=None)  # a terminal only
    try:
        for k, chunk in enumerate(_timed(iter(chunks), staged.clock)):
            staged.add(chunk, k, not_after)
            bar.update(chunk.height)
            if progress:
                progress(f"{path.name}: {result.rows_read:,} rows read, {result.rows_rejected:,} rejected")
    except (FileRejected, FileNotFoundError) as exc:
        gone = not isinstance(exc, FileRejected) and _vanished(exc, path)  # once: the file may come back meanwhile
        if not (gone or isinstance(exc, FileRejected)):
            raise
        staged.discard(GONE if gone else exc.reason)  # nothing of it is loaded
        return _gone(result) if gone else result
    finally:
        chunks.close()
        bar.close()
    _finish(result, info, staged.counts, staged.clock)
    return result


class ReadAhead:
    """`chunks`, the next one read by a thread (started at once) while the caller checks and writes this one: the same
    chunks in the same order (iterate once), and a reading error raised where it was met (after the chunks before it).
    Reading holds Python's lock to split lines (`readers._line_blocks`) while checking and writing mostly run in
    Polars, which releases it: on two cores the two overlap. At most one chunk waits in the queue while the reader
    holds the next (memory: up to two chunks more than before; three are made while the caller holds the first).
    `close` stops the thread (a caller that stops early, or a reading never taken: `start_reading`)."""

    _DONE = object()

    def __init__(self, chunks: Iterator[pl.DataFrame]) -> None:
        self._chunks = chunks
        self._ahead: queue.Queue = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="gpucast-read-ahead", daemon=True)
        self._thread.start()

    def _put(self, item: tuple) -> bool:
        """Hand `item` over, unless the caller has stopped reading (then False)."""
        while not self._stop.is_set():
            try:
                self._ahead.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _read(self) -> None:
        try:
            for chunk in self._chunks:
                if not self._put((chunk, None)):
                    return
            self._put((self._DONE, None))
        except BaseException as exc:  # handed to the caller, raised there
            self._put((self._DONE, exc))

    def __iter__(self) -> Iterator[pl.DataFrame]:
        while True:
            chunk, error = self._ahead.get()
            if error is not None:
                raise error
            if chunk is self._DONE:
                return
            yield chunk

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        if hasattr(self._chunks, "close"):
            self._chunks.close()


def _read_ahead(chunks: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    """`chunks` through a `ReadAhead` (its thread starts with the first chunk asked for), closed when the caller stops."""
    ahead = ReadAhead(chunks)
    try:
        yield from ahead
    finally:
        ahead.close()


@dataclass
class _Started:
    """A file whose reading began before its staging task (`start_reading`)."""

    info: FileInfo
    stat_before: tuple[int, int] | None
    identity: tuple[int, ...]
    chunk_rows: int
    chunks: ReadAhead


_STARTED: dict[str, _Started] = {}  # by the file's path (as `discover` gives it): at most one, taken once


def start_reading(path: Path, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> None:
    """Start reading `path` now, before the run that stages it (`gpucast ingest FILE`: beside Prefect's import and the
    flow's start, flows/cli/pipeline.py): its first chunks wait, bounded (`ReadAhead`: the chunk in the queue and the
    one the thread holds), until `stage_file` takes the reading, with the file's size and mtime from before it began.
    Nothing is decoded that the run would not decode: the same chunks, in the same order. A reading still untaken is
    dropped by the next `start_reading` or by `stop_reading`; a link is never read (stage_file refuses it)."""
    stop_reading()
    path = Path(path)
    if path.is_symlink() or not path.is_file():
        return
    info, stat, identity = FileInfo(path), stat_key(path), _identity(path)
    _STARTED[str(path)] = _Started(info, stat, identity, chunk_rows, ReadAhead(read_chunks(path, info, chunk_rows)))


def _identity(path: Path) -> tuple[int, ...]:
    """Which file `path` is, and whether it was written: device, inode, size, mtime and ctime. Size and mtime alone miss
    a file replaced by one of the same size and time (`cp -p`, `rsync -t`: review 72 S2-2), whose old rows an early
    reading would stage under the new file's hash; a rename gives another inode, a copy over it another ctime."""
    st = path.stat()
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def stop_reading() -> None:
    """Drop any reading `start_reading` began that no staging took (the run failed first, or read other files)."""
    while _STARTED:
        _STARTED.popitem()[1].chunks.close()


def _take_started(path: Path, chunk_rows: int, mapping: Mapping | None) -> _Started | None:
    """The reading `start_reading` began for `path`, if it reads what this staging would (the same chunk size, no
    mapping) and it is the same file, unchanged since it began (`_identity`); else None (and a reading that does not
    fit is dropped)."""
    started = _STARTED.pop(str(path), None)
    if started is None:
        return None
    try:
        fits = started.chunk_rows == chunk_rows and mapping is None and _identity(path) == started.identity
    except FileNotFoundError:  # deleted since the reading began (the caller's `gone`): its thread is stopped here
        started.chunks.close()  # (review 79 S3-6: it held the open file until the process ended)
        raise
    if not fits:
        started.chunks.close()
        return None
    return started


def _timed(chunks: Iterator[pl.DataFrame], clock: dict[str, float]) -> Iterator[pl.DataFrame]:
    """`chunks`, adding the time each takes to read to `clock["read"]`."""
    while True:
        t0 = time.perf_counter()
        chunk = next(chunks, None)
        clock["read"] += time.perf_counter() - t0
        if chunk is None:
            return
        yield chunk


@dataclass
class _Staged:
    """One large file being staged chunk by chunk: its result, its expectations' running counts, the
    seconds spent checking and writing, and the staging files written so far."""

    result: FileResult
    folder: Path
    digest: Future[str] | None = None  # the file's content hash, computed beside the reading (`stage_file`)
    counts: dict[tuple, dict] = field(default_factory=dict)
    clock: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGE_STEPS, 0.0))
    written: list[Path] = field(default_factory=list)

    def add(self, chunk: pl.DataFrame, k: int, not_after: datetime | None) -> None:
        """Split chunk `k` into valid and rejected rows, count them, write each kind as a staging file."""
        t0, before = time.perf_counter(), self.clock["normalise"]
        valid, rejected, failed, outcomes = _split(chunk.with_columns(pl.lit(0, dtype=pl.Int64).alias("_file")), not_after,
                                                   self.clock)
        _count(self.counts, outcomes[0])
        t1 = time.perf_counter()
        r = self.result
        r.rows_read, r.rows_valid, r.rows_rejected = r.rows_read + chunk.height, r.rows_valid + valid.height, \
            r.rows_rejected + rejected.height
        if not r.sha256 and self.digest is not None:
            r.sha256 = self.digest.result()  # the staging files carry it
        for kind, frame in (("valid", valid), ("rejected", rejected), (FAILED, failed)):
            if frame.height:
                out = self.folder / f"{kind}-{r.index:05d}-{k:05d}.parquet"
                frame.drop("_file").with_columns(
                    pl.lit(r.path).alias("source_file"),
                    pl.lit(r.sha256).alias("source_sha256"),
                    pl.lit(r.index, dtype=pl.Int64).alias("file_index"),
                ).write_parquet(out, compression=STAGED_COMPRESSION)
                self.written.append(out)
        self.clock["rules"] += t1 - t0 - (self.clock["normalise"] - before)
        self.clock["write"] += time.perf_counter() - t1

    def discard(self, reason: str) -> None:
        """The file turned out unreadable part-way: remove what was staged, reject it whole."""
        for out in self.written:
            out.unlink(missing_ok=True)
        self.result.status, self.result.reason = "rejected", reason
        self.result.rows_read = self.result.rows_valid = self.result.rows_rejected = 0


# Many small files (an exporter writing one file per job) are staged in batches: each file is still
# read on its own (its rows keep their file and line, a file that cannot be read is rejected alone, its
# `ingest_files` row and validation counts are its own), but the batch's rows are normalised, validated
# and written together, so the fixed cost of a Great Expectations run (~0.25 s here), a Polars plan
# and a Parquet file is paid once per batch instead of once per file (docs/benchmarks.md#ingest).
SMALL_FILE_BYTES = 1 << 20  # a file up to this size (on disk) is staged with others
BATCH_FILES = 1_000  # at most this many files ...
BATCH_BYTES = 64 << 20  # ... and this many bytes on disk in one batch (bounds its memory)


def batches(paths: list[Path]) -> list[list[int]]:
    """The positions of `paths` in staging order, grouped: consecutive small files together (up to
    BATCH_FILES and BATCH_BYTES), every other file alone. Order is kept, so arrival order is too."""
    groups: list[list[int]] = []
    size = 0
    open_batch = False
    for i, path in enumerate(paths):
        try:
            n = path.lstat().st_size
        except OSError:
            n = SMALL_FILE_BYTES + 1  # staged alone: stage_file reports what is wrong with it
        small = n <= SMALL_FILE_BYTES
        if small and open_batch and len(groups[-1]) < BATCH_FILES and size + n <= BATCH_BYTES:
            groups[-1].append(i)
            size += n
            continue
        groups.append([i])
        open_batch, size = small, n
    return groups


def stage_files(
    paths: list[Path],
    staging_dir: Path,
    first_index: int,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    progress: Callable[[str], None] | None = None,
    not_after: datetime | None = None,
    mapping: Mapping | None = None,
) -> list[FileResult]:
    """Stage a batch of small files (see `batches`) as files `first_index`, `first_index + 1`, ...;
    one `FileResult` per file, exactly as `stage_file` would give it."""
    results = [FileResult(path=str(p), sha256="", index=first_index + i) for i, p in enumerate(paths)]
    for r, p in zip(results, paths, strict=True):
        try:
            r.stat_before = stat_key(p)
            r.sha256 = content_key(p)  # after the stat, as in stage_file
        except FileNotFoundError:
            _gone(r)
    frames, read = _read_batch(paths, results, chunk_rows, mapping)
    t1 = time.perf_counter()
    outcomes: dict[int, list] = {}
    valid = rejected = None
    clock = {"normalise": 0.0}
    if frames:
        valid, rejected, failed, outcomes = _split(pl.concat(frames, how="diagonal_relaxed"), not_after, clock)
    t2 = time.perf_counter()
    if frames:
        _write_batch(valid, rejected, failed, results, staging_dir, first_index)
    t3 = time.perf_counter()
    valid_rows, rejected_rows = _rows_per_file(valid), _rows_per_file(rejected)
    share = 1 / max(len(read), 1)  # the batch's check and write time, shared by its files
    for pos, (info, read_seconds) in read.items():
        result = results[pos]
        result.rows_valid, result.rows_rejected = valid_rows.get(pos, 0), rejected_rows.get(pos, 0)
        result.rows_read = result.rows_valid + result.rows_rejected
        counts: dict[tuple, dict] = {}
        if pos in outcomes:
            _count(counts, outcomes[pos])
        _finish(result, info, counts, {"read": read_seconds, "normalise": clock["normalise"] * share,
                                       "rules": (t2 - t1 - clock["normalise"]) * share, "write": (t3 - t2) * share})
    if progress:
        progress(f"{len(paths)} small file(s) {paths[0].name} ... {paths[-1].name}: "
                 f"{sum(r.rows_read for r in results):,} rows read, {sum(r.rows_rejected for r in results):,} rejected")
    return results


def _read_batch(paths: list[Path], results: list[FileResult], chunk_rows: int,
                mapping: Mapping | None) -> tuple[list[pl.DataFrame], dict[int, tuple[FileInfo, float]]]:
    """Each file of a batch read on its own (a link or an unreadable file is rejected alone, in `results`):
    the chunks, each row tagged with its file's position `_file`, and per file read, (its info, seconds)."""
    frames: list[pl.DataFrame] = []
    read: dict[int, tuple[FileInfo, float]] = {}
    for pos, (path, result) in enumerate(zip(paths, results, strict=True)):
        if result.status == GONE_STATUS:
            continue
        if path.is_symlink():
            _refuse_link(result, path)
            continue
        info = FileInfo(path, mapping=mapping)
        t0 = time.perf_counter()
        try:
            chunks = list(read_chunks(path, info, chunk_rows))
        except (FileRejected, FileNotFoundError) as exc:
            if _vanished(exc, path):
                _gone(result)
            elif isinstance(exc, FileRejected):
                result.status, result.reason = "rejected", exc.reason
            else:
                raise
            continue
        read[pos] = (info, time.perf_counter() - t0)
        # rejected rows of CSV and Parquet get their text rebuilt from their own file's columns (not the batch's)
        frames += [chunk.with_columns(_raw_text(chunk).alias("_raw") if chunk["_raw"].null_count() else pl.col("_raw"),
                                      pl.lit(pos, dtype=pl.Int64).alias("_file")) for chunk in chunks]
    return frames, read


def _write_batch(valid: pl.DataFrame, rejected: pl.DataFrame, failed: pl.DataFrame, results: list[FileResult],
                 staging_dir: Path, first_index: int) -> None:
    """A batch's valid and rejected rows as one staging file each, every row naming its own source file."""
    staging_dir.mkdir(parents=True, exist_ok=True)
    where = pl.DataFrame({"_file": list(range(len(results))), "source_file": [r.path for r in results],
                          "source_sha256": [r.sha256 for r in results], "file_index": [r.index for r in results]},
                         schema={"_file": pl.Int64, "source_file": pl.String, "source_sha256": pl.String,
                                 "file_index": pl.Int64})
    for kind, frame in (("valid", valid), ("rejected", rejected), (FAILED, failed)):
        if frame.height:
            frame.join(where, on="_file", how="left", maintain_order="left").drop("_file").write_parquet(
                staging_dir / f"{kind}-{first_index:05d}-00000.parquet", compression=STAGED_COMPRESSION)


def _rows_per_file(frame: pl.DataFrame | None) -> dict[int, int]:
    if frame is None or not frame.height:
        return {}
    return dict(frame.group_by("_file").len().iter_rows())


def _refuse_link(result: FileResult, path: Path) -> None:
    result.status, result.reason = "rejected", (
        f"a symbolic link (to {os.readlink(path)}), not followed: links in the inbox or a folder could point at "
        "any file; copy or move the log file itself there")


def _finish(result: FileResult, info: FileInfo, counts: dict[tuple, dict], clock: dict[str, float]) -> None:
    result.fmt = info.fmt + (".gz" if info.compressed else "")
    result.ignored_columns = sorted(info.ignored_columns)
    result.outcomes = list(counts.values())
    result.seconds = {k: round(v, 3) for k, v in clock.items()}
    if result.rows_read == 0:
        result.status, result.reason = "empty", "no records in the file"


def check_run(staging_dir: Path, results: list[FileResult]) -> RunCheck:
    """Great Expectations once over the run's checked rows (the `valid` and `FAILED` staging files), on DuckDB;
    it must agree with the row rules' outcomes summed over the run's files, or this raises (`RuleMismatch`, or
    the suite could not run) and the run fails before anything is loaded (expectations/validate.py)."""
    paths = sorted(staging_dir.glob("valid-*.parquet")) + sorted(staging_dir.glob(f"{FAILED}-*.parquet"))
    totals: dict[tuple, dict] = {}
    for result in results:
        for entry in result.outcomes:
            _count(totals, [ExpectationOutcome(**entry)])
    if not paths or not totals:
        return RunCheck(0, 0, 0.0)
    t0 = time.perf_counter()
    outcomes = validate_staged(paths, list(c.COLUMNS), [ExpectationOutcome(**e) for e in totals.values()], SUITE)
    if any(o.error for o in outcomes):
        broken = "; ".join(f"{o.expectation}: {o.error}" for o in outcomes if o.error)
        raise RuntimeError(f"the expectation suite {SUITE!r} could not run: {broken}")
    rows = sum(pl.scan_parquet(p).select(pl.len()).collect().item() for p in paths)
    return RunCheck(rows, len(outcomes), round(time.perf_counter() - t0, 2))


def _count(counts: dict[tuple, dict], outcomes: list) -> None:
    """Add one chunk's expectation outcomes to a file's running counts."""
    for o in outcomes:
        key = (o.suite, o.expectation, o.column, o.rule)
        entry = counts.setdefault(key, {"suite": o.suite, "expectation": o.expectation, "column": o.column,
                                        "rule": o.rule, "success": True, "unexpected_count": 0, "error": None})
        entry["success"] = entry["success"] and o.success
        entry["unexpected_count"] += o.unexpected_count
        entry["error"] = entry["error"] or o.error


def _split(chunk: pl.DataFrame, not_after: datetime | None = None, clock: dict[str, float] | None = None
           ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, dict[int, list]]:
    """Valid rows (typed) and rejected rows (source_row, job_id, raw_record, reasons) of a chunk, each
    with `_file` (the chunk's files: one, or a batch of small ones); the rejected rows that the suite's rules
    judged, typed (`FAILED`: GX judges them with the valid ones, once per run); and per file, its
    expectation outcomes as if its rows had been validated alone. `clock["normalise"]` (if given) gains the seconds
    the parsing rules took (`normalize`)."""
    t0 = time.perf_counter()
    typed = normalize(chunk, not_after).with_columns(chunk["_file"])  # normalize keeps the input's order
    if clock is not None:
        clock["normalise"] = clock.get("normalise", 0.0) + time.perf_counter() - t0
    # Records that could not even be read (bad JSON, ragged rows) skip the quality suite.
    unreadable = chunk["_read_error"].is_not_null()
    # NaN is a missing value (as GX always read it): staged, and so loaded and judged by GX, as missing
    to_check = typed.filter(~unreadable).with_columns(pl.col(pl.Float32, pl.Float64).fill_nan(None))
    validation = check_rows(to_check.select(c.COLUMNS), SUITE)
    if any(o.error for o in validation.outcomes):
        broken = "; ".join(f"{o.expectation}: {o.error}" for o in validation.outcomes if o.error)
        raise RuntimeError(f"the expectation suite {SUITE!r} could not run: {broken}")
    outcomes = validation.outcomes_by(to_check["_file"], chunk["_file"].unique().to_list())
    suite_reasons = pl.DataFrame(
        {"_pos": list(validation.reasons), "_suite": list(validation.reasons.values())},
        schema={"_pos": pl.Int64, "_suite": pl.List(pl.String)},
    )
    checked = (
        to_check.with_row_index("_pos")
        .with_columns(pl.col("_pos").cast(pl.Int64))
        .join(suite_reasons, on="_pos", how="left")
        .with_columns(pl.concat_list("_errors", pl.col("_suite").fill_null([])).alias("_errors"))
        .drop("_pos", "_suite")
    )
    bad = pl.col("_errors").list.len() > 0
    failed = checked.filter(bad).select(*c.COLUMNS, "_file")  # for GX's run-level check (`check_run`)
    typed = pl.concat([checked, typed.filter(unreadable)]).sort("_file", "_row", maintain_order=True)
    valid = typed.filter(~bad).select("_row", *c.COLUMNS, "_file").rename({"_row": "source_row"})
    rejected = typed.filter(bad).select(
        pl.col("_row").alias("source_row"),
        pl.col(c.JOB_ID).alias("job_id"),
        pl.col("_errors").list.eval(_cut_reason(pl.element())).alias("reasons"),
        "_file",
    )
    # the original text of the rejected rows only (rebuilding it for every row is costly)
    source = chunk.join(rejected.select(pl.col("source_row").alias("_row"), "_file"), on=["_file", "_row"], how="semi",
                        maintain_order="left")
    rejected = rejected.with_columns(_raw_text(source.drop("_file")).alias("raw_record"))
    return valid, rejected, failed, outcomes
