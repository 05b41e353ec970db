"""Where things live: one settings object, read from the environment in one place.

Every path the pipeline writes is under one data directory, `GPUCAST_HOME` (default `./.gpucast`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "GPUCAST_HOME"
DEFAULT_HOME = ".gpucast"


def env_number(name: str, default: float, kind: type = float) -> float:
    """A numeric setting from the environment (`kind` float or int); unset or empty gives `default`.
    A value that does not parse is an error naming the variable, not a bare ValueError."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return kind(default)
    try:
        return kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise ValueError(f"{name}={raw!r} is not {what}; fix it or unset it for the default ({default})") from None


@dataclass(frozen=True)
class Settings:
    """Paths of the data directory. Build with `Settings.from_env()`."""

    home: Path

    @classmethod
    def from_env(cls) -> Settings:
        return cls(home=Path(os.environ.get(HOME_ENV) or DEFAULT_HOME).expanduser().resolve())

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
    def reports_dir(self) -> Path:
        return self.home / "reports"

    @property
    def published_path(self) -> Path:
        """The planners' copy: replaced atomically at the end of each run (see warehouse/publish.py)."""
        return self.home / "published.duckdb"

    @property
    def query_path(self) -> Path:
        """What people query: the published copy once one exists, else the working file."""
        return self.published_path if self.published_path.exists() else self.db_path

    @property
    def lock_path(self) -> Path:
        return self.home / "writer.lock"

    def ensure(self) -> Settings:
        for d in (self.home, self.inbox_dir, self.staging_dir, self.lake_dir):
            d.mkdir(parents=True, exist_ok=True)
        return self
