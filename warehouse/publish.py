"""The planners' copy of the warehouse, replaced atomically.

DuckDB lets one process write a database file and, while it does, no other process may open that
file, not even read-only (shared/STACK-NOTES.md). So planners do not query the pipeline's working
file: at the end of each run the pipeline checkpoints `warehouse.duckdb`, copies it (holding the
writer lock, so nothing changes during the copy) to a temporary file beside `published.duckdb`
and renames it over `published.duckdb`. A rename is atomic: a planner's open session keeps
reading the copy it opened, new sessions see the new one, nobody ever sees a half-written file,
and no open session can block the nightly run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from gpucast.warehouse.db import connect_writer, writer_lock
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.reference import refresh_gpu_catalog
from gpucast.warehouse.settings import Settings


def publish_snapshot(settings: Settings) -> Path:
    """Copy the warehouse to `published.duckdb` atomically; return its path."""
    target = settings.published_path
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with writer_lock(settings):
        con = connect_writer(settings)
        try:
            refresh_gpu_catalog(con)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        try:
            with open(settings.db_path, "rb") as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, length=16 << 20)
                dst.flush()
                os.fsync(dst.fileno())
            failpoint("publish:before-rename")
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    return target


