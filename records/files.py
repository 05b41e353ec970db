"""A file replaced whole or not at all: written under a temporary name beside it, flushed to disk, renamed over it.

A reader (a planner's session on `published.duckdb`, the next night reading a note or the trace cache) sees the
old file or the new one, never half of one, and a crash mid-write leaves the old file. The temporary name is
hidden, this process's own and on the same file system as the target (so the rename is atomic):
`.<name>.<pid>.tmp` (`temp_beside`); the publish sweeps a killed run's leftovers by that suffix.

Every layer writes such files (the warehouse's publish and forecast files, the traced prior's cache), so the
one helper lives here, the package every layer may import.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path


def temp_beside(path: Path) -> Path:
    """The name `path` is written under before it is renamed over it: `.<name>.<pid>.tmp` in the same folder; a name
    over 200 bytes cut there and a hash of it added (a name near the 255-byte limit still has a temporary one), its
    bytes as the file system gives them (a name that is not UTF-8 too: review 82)."""
    name = os.fsencode(path.name)
    if len(name) > 200:  # cut, told apart from another name of the same first 200 bytes by a hash of the whole
        name = name[:200] + b"." + hashlib.sha1(name).hexdigest()[:8].encode()
    return path.with_name(f".{os.fsdecode(name)}.{os.getpid()}.tmp")


# A folder whose file system cannot flush it by itself (some FUSE and network mounts): its renames are as durable as
# that file system makes them, and nothing more can be asked.
UNFLUSHABLE = {errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF}


def flush(path: Path) -> None:
    """A file's contents, or a folder's names (a rename into it), flushed to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if not (path.is_dir() and exc.errno in UNFLUSHABLE):
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """Yield the temporary name beside `path` (`temp_beside`) for the body to write (by any means: Python, a DuckDB
    `COPY ... TO`, a copy of another file); then flush it to disk and rename it over `path`. When the body (or the
    flush, or the rename) raises, the temporary file is removed and `path` is left as it was."""
    tmp = temp_beside(path)
    try:
        yield tmp
        flush(tmp)  # (a read-only file can still be flushed)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8) whole or not at all (`replacing`)."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


class ChangedWhileCopied(Exception):
    """A file written to while `move` copied it across file systems: left where it was, the copy removed."""


def move(file: Path, target: Path, *, copy_in: Path | None = None, unchanged: Callable[[], bool] | None = None) -> None:
    """Rename `file` to `target` (atomic). Across file systems, which a rename cannot cross (EXDEV: an inbox archive or
    a lake on another disk): a link is made again at `target`, never followed; a file is copied into `copy_in` (default:
    beside `target`, `temp_beside`), flushed, asked `unchanged()` (False: the copy removed, `ChangedWhileCopied`, `file`
    left), renamed in and its folder flushed, and only then is `file` removed. A crash at any point leaves the file
    whole where it was, or where it went, or in both; never only in a copy the disk may not hold."""
    try:
        os.replace(file, target)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    if file.is_symlink():
        os.symlink(os.readlink(file), target)
    else:
        copy = copy_in / f".copy-{uuid.uuid4().hex}" if copy_in else temp_beside(target)
        try:
            shutil.copyfile(file, copy)
            with contextlib.suppress(OSError):  # times and mode kept where the file system takes them (vfat: not)
                shutil.copystat(file, copy)
            flush(copy)
            if unchanged is not None and not unchanged():
                raise ChangedWhileCopied(file)
            os.replace(copy, target)
        except BaseException:
            copy.unlink(missing_ok=True)
            raise
    flush(target.parent)
    file.unlink()
