"""Errors that are the machine's fault, not the input's or the code's: disk full, permissions.

The command line turns them into exit code 5 with one line (`flows/cli.py`), and tasks that retry
transient failures do not retry them (`no_retry_on_environment`): a full disk stays full.
"""

from __future__ import annotations

import errno
import os

ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS}
# DuckDB reports a full disk as an IOException / TransactionException whose text carries the OS error
ENVIRONMENT_PHRASES = ("No space left on device", "Disk quota exceeded", "Permission denied", "Read-only file system")


def environment_error(exc: BaseException) -> str | None:
    """One line for a disk-full or permission error found on `exc` or anything that caused it, else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in ENVIRONMENT_ERRNOS:
            return f"{os.strerror(seen.errno)}: {seen.filename or seen}; free space or fix permissions, then rerun"
        text = str(seen)
        for phrase in ENVIRONMENT_PHRASES:
            if phrase in text:
                return f"{phrase}: {text.splitlines()[0][:300]}; free space or fix permissions, then rerun"
        seen = seen.__cause__ or seen.__context__
    return None


def no_retry_on_environment(task, task_run, state) -> bool:
    """Prefect `retry_condition_fn`: retry a failed task unless the machine is what failed."""
    try:
        state.result()
    except Exception as exc:  # noqa: BLE001  (the failed task's own exception, re-raised by Prefect)
        return environment_error(exc) is None
    return True
