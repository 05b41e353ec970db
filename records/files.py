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
import os
from collections.abc import Iterator
from pathlib import Path


def temp_beside(path: Path) -> Path:
    """The name `path` is written under before it is renamed over it: `.<name>.<pid>.tmp` in the same folder."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """Yield the temporary name beside `path` (`temp_beside`) for the body to write (by any means: Python, a DuckDB
    `COPY ... TO`, a copy of another file); then flush it to disk and rename it over `path`. When the body (or the
    flush, or the rename) raises, the temporary file is removed and `path` is left as it was."""
    tmp = temp_beside(path)
    try:
        yield tmp
        with open(tmp, "rb") as f:  # (fsync needs a descriptor; a read-only file can still be flushed)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8) whole or not at all (`replacing`)."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
