"""The two settings concerns the warehouse uses, as it receives them: `Storage` (where the data directory's
parts live, how the one writer behaves, what is kept) and `SqlSandbox` (the limits of one planner query).

They are plain frozen values that take every value and define none: no defaults, no rules. Reading them from
the environment, their defaults and rules (the settings table, `flows/settings.py` `SPECS`) and the other concerns
(cluster, planning, quality, ...) are the edge's: `gpucast.flows.settings` builds these objects once
(`Settings.from_env`; a test or a script: `Settings.from_env({"GPUCAST_HOME": ...}).storage`) and hands each
warehouse function the one it needs. Nothing here reads the environment, and no warehouse function takes the whole
`Settings` (tests/test_layout.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)", re.IGNORECASE)
_UNIT_BYTES = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # as DuckDB reads them (300MB: 286.1 MiB)


def is_size(v: str) -> bool:
    """Whether `v` reads as a size such as 512MB or 2GiB."""
    return _SIZE.fullmatch(v) is not None


def size_bytes(v: str) -> int:
    """A size such as 512MB or 2GiB, in bytes."""
    number, unit = _SIZE.fullmatch(v.strip()).groups()
    return int(float(number) * _UNIT_BYTES[unit.lower()])


@dataclass(frozen=True)
class Storage:
    """Where the data directory's parts live, and how the pipeline's one writer behaves."""

    home: Path
    lock_timeout_s: float
    duckdb_memory: str
    keep_train_runs: int
    keep_forecast_days: int
    sources: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "home", Path(self.home).expanduser().resolve())

    @property
    def db_path(self) -> Path:
        return self.home / "warehouse.duckdb"

    @property
    def lake_dir(self) -> Path:
        return self.home / "lake" / "job_logs"

    @property
    def inbox_dir(self) -> Path:
        return self.home / "inbox"

    @property
    def staging_dir(self) -> Path:
        return self.home / "staging"

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    @property
    def trace_cache_path(self) -> Path:
        """The traced prior's cache: one entry per traced configuration (`tasks/learn/traced.py`)."""
        return self.models_dir / "traces.json"

    @property
    def reports_dir(self) -> Path:
        return self.home / "reports"

    @property
    def site_dir(self) -> Path:
        """The planners' page: index.html, written by every nightly run and `gpucast site`."""
        return self.home / "site"

    @property
    def published_path(self) -> Path:
        """The planners' copy: replaced atomically at the end of each run (see warehouse/publish.py)."""
        return self.home / "published.duckdb"

    @property
    def query_path(self) -> Path:
        """What people query: the published copy once one exists, else the working file."""
        return self.published_path if self.published_path.exists() else self.db_path

    @property
    def sql_temp_dir(self) -> Path:
        """`gpucast sql`'s spill folder: one per process, removed when the query ends."""
        return self.home / "tmp" / f"sql-{os.getpid()}"

    @property
    def lock_path(self) -> Path:
        return self.home / "writer.lock"

    def ensure(self) -> Storage:
        for d in (self.home, self.inbox_dir, self.staging_dir, self.lake_dir):
            d.mkdir(parents=True, exist_ok=True)
        return self


@dataclass(frozen=True)
class SqlSandbox:
    """The limits of one planner query (`gpucast sql`)."""

    memory: str
    threads: int
    temp_limit: str
    timeout_s: float

    @property
    def memory_bytes(self) -> int:
        """`memory` in bytes: also the most a query's fetched result may hold (`queries.run_sql`)."""
        return size_bytes(self.memory)
