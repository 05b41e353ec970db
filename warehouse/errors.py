"""Storage errors as the layers above see them: only this module knows DuckDB's exception types.

* `environment_error`: the machine's fault, not the input's or the code's (disk full, permissions).
  The command line turns it into exit code 5 with one line (`flows/cli/process.py`), tasks that retry
  transient failures do not retry it (`flows/errors.py`), and the publish does not mistake it for a
  corrupted warehouse (`warehouse/publish.py`).
* `StorageError` and its kinds: a DuckDB or file operation of the warehouse failed (`QueryError`, a
  planner's SQL; `LakeRefreshFailed`, the Parquet copy of the records). `storage_error` says whether
  any other exception is DuckDB's, in one line, for the command line (exit code 2).
"""

from __future__ import annotations

import errno
import os

ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS}
# DuckDB reports a full disk as an IOException / TransactionException whose text carries the OS error
IO_ERROR_TYPES = ("IOException", "TransactionException", "FatalException")  # DuckDB's, by name
ENVIRONMENT_PHRASES = ("No space left on device", "Disk quota exceeded", "Permission denied", "Read-only file system")


def printable(text: str) -> str:
    """`text` safe to print on a terminal or a log line: every character that is not printable (newlines, tabs,
    ESC and the other C0/C1 controls, bidi overrides) written as its Python escape (`\\n`, `\\x1b`, `\\u202e`),
    so a name read from a store (an MLflow experiment, a file name, a queue) can neither break the one line an
    error is nor drive the terminal. Printable text, accents and CJK included, is kept as it is."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def environment_error(exc: BaseException) -> str | None:
    """One line for a disk-full or permission error found on `exc` or anything that caused it, else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in ENVIRONMENT_ERRNOS:
            return f"{os.strerror(seen.errno)}: {seen.filename or seen}; free space or fix permissions, then rerun"
        # only errors of I/O carry the OS's words; an SQL error that merely quotes them is not one
        if isinstance(seen, OSError) or type(seen).__name__ in IO_ERROR_TYPES:
            text = str(seen)
            for phrase in ENVIRONMENT_PHRASES:
                if phrase in text:
                    return f"{phrase}: {text.splitlines()[0][:300]}; free space or fix permissions, then rerun"
        seen = seen.__cause__ or seen.__context__
    return None


class StorageError(RuntimeError):
    """A warehouse operation failed; the message is DuckDB's (or the file system's), with its type."""


class QueryError(StorageError):
    """A planner's SQL failed: a syntax error, an unknown table, a statement the sandbox refuses."""


class LakeRefreshFailed(StorageError):
    """Rewriting the Parquet lake failed; the warehouse holds every row and the next ingest retries."""


def storage_error(exc: BaseException) -> str | None:
    """One line for a StorageError or a DuckDB error (the warehouse's, unwrapped), else None."""
    import duckdb

    if isinstance(exc, StorageError):
        return str(exc)
    if isinstance(exc, duckdb.Error):
        return f"{type(exc).__name__}: {exc}"
    return None
