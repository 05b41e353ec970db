"""What an importer reads back from the warehouse before it loads: the Slurm array ranges an older gpucast stored
as one pending job (`tasks/sources/slurm.py` `retired_ranges` retires them)."""

from __future__ import annotations

import polars as pl

from gpucast.expectations import contract as c
from gpucast.warehouse.concerns import Storage
from gpucast.warehouse.db import writer

# Each contract column as the contract's text (as an importer's rows are written: tasks/sources/), a time in UTC
_AS_TEXT = ", ".join(f"strftime(timezone('UTC', {f.name}), '%Y-%m-%dT%H:%M:%S.%fZ') AS {f.name}" if f.kind == "timestamp"
                     else f"CAST({f.name} AS VARCHAR) AS {f.name}" for f in c.FIELDS)
# A job id with `_[`: an array range record as sacct prints it (`7000_[3-1000]`), stored whole before issue 48
STORED_RANGES = (f"SELECT {_AS_TEXT} FROM job_logs "
                 f"WHERE {c.STATUS} = 'PENDING' AND starts_with({c.JOB_ID}, 'slurm-') AND contains({c.JOB_ID}, '_[') "
                 f"ORDER BY {c.JOB_ID}")


def stored_array_ranges(storage: Storage) -> pl.DataFrame:
    """The latest records (contract columns, as the contract's text) of the pending jobs that are Slurm array ranges stored whole
    (`slurm-hpc1-7000_[1-1000]`); none without a warehouse (one is not made for this). Read under the writer lock,
    as `read_watermarks` reads: a read-only connection is refused at once while another gpucast writes (DuckDB
    locks the file against every other process), and a warehouse of an older gpucast has its schema brought up
    to date before its contract columns are read. The import reads this before it starts `sacct` (flows/imports.py)."""
    if not storage.db_path.exists():
        return pl.DataFrame()
    with writer(storage) as con:
        return con.sql(STORED_RANGES).pl()
