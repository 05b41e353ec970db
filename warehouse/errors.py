"""Errors that are the machine's fault, not the input's or the code's: disk full, permissions.

The command line turns them into exit code 5 with one line (`flows/cli.py`), tasks that retry
transient failures do not retry them (`flows/errors.py`), and the publish does not mistake them
for a corrupted warehouse (`warehouse/publish.py`).
"""

from __future__ import annotations

import errno
import os

ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS}
# DuckDB reports a full disk as an IOException / TransactionException whose text carries the OS error
IO_ERROR_TYPES = ("IOException", "TransactionException", "FatalException")  # DuckDB's, by name
ENVIRONMENT_PHRASES = ("No space left on device", "Disk quota exceeded", "Permission denied", "Read-only file system")


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
