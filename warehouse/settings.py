"""Every gpucast setting in one frozen object, built once at the edge and passed down.

`Settings.from_env()` reads the `GPUCAST_*` variables (the only place that does); CLI flags and
flow parameters go on top with `Settings.override(...)`. Every value is checked when the object is
built, and a bad one stops the run with the variable's (or the flag's) name and the rule it broke:
`GPUCAST_MAX_REJECT_FRACTION='nan' is not a number between 0 and 1`. Tasks never read the
environment; they get what they need from the flows, which got it from here.

`SPECS` is the table of settings: variable, default, rule and meaning. The CLI's help text and the
README's settings table are written from it (tests/warehouse/test_settings.py checks the README).
Every path the pipeline writes is under one data directory, `GPUCAST_HOME` (default `./.gpucast`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

HOME_ENV = "GPUCAST_HOME"
DEFAULT_HOME = ".gpucast"


# Where a train run's fits run: on Dask (a local cluster sized to the machine, or the cluster at
# GPUCAST_DASK_ADDRESS), or one after another in the flow's own process.
RUNNERS = ("dask", "local")


class SettingsError(ValueError):
    """A setting's value breaks its rule; the message names the variable or flag."""


# Rules a parsed value must keep.
def _positive(v: float) -> bool:
    return math.isfinite(v) and v > 0


def _non_negative(v: float) -> bool:
    return math.isfinite(v) and v >= 0


def _fraction(v: float) -> bool:
    return math.isfinite(v) and 0 <= v <= 1


def _at_least_one(v: int) -> bool:
    return v >= 1


def _memory_size(v: str) -> bool:
    return re.fullmatch(r"\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)", v, re.IGNORECASE) is not None


def _webhook_url(v: str) -> bool:
    return v == "" or re.fullmatch(r"https?://[^\s]+", v) is not None


def _runner(v: str) -> bool:
    return v in RUNNERS


def _dask_address(v: str) -> bool:
    return v == "" or re.fullmatch(r"(tcp|tls|inproc|ucx)://[^\s/]+:\d+|[A-Za-z0-9.\-]+:\d+", v) is not None


def _non_negative_int(v: int) -> bool:
    return v >= 0


def _any(_: Any) -> bool:
    return True


@dataclass(frozen=True)
class Spec:
    """One setting: its field, variable, default, how its text parses, the rule it keeps (and that
    rule in words, for errors), and what it means."""

    field: str
    env: str
    default: Any
    parse: Callable[[str], Any]
    rule: Callable[[Any], bool]
    expects: str
    help: str


SPECS: tuple[Spec, ...] = (
    Spec("home", HOME_ENV, Path(DEFAULT_HOME), Path, _any, "a path",
         "the data directory: warehouse, lake, inbox, staging, models, Prefect state (git-ignored)"),
    Spec("lock_timeout_s", "GPUCAST_LOCK_TIMEOUT_S", 600.0, float, _positive, "a finite number > 0",
         "seconds a writer waits for another writer before giving up (exit code 3)"),
    Spec("duckdb_memory", "GPUCAST_DUCKDB_MEMORY", "1GB", str, _memory_size, "a size such as 512MB or 2GB",
         "DuckDB's memory limit for the pipeline's writer (it spills to disk beyond)"),
    Spec("gpu_mem_gb", "GPUCAST_GPU_MEM_GB", 80.0, float, _positive, "a finite number > 0",
         "the GPU memory (GB) `oom_risk` is judged against (`--gpu-mem-gb`)"),
    Spec("max_reject_fraction", "GPUCAST_MAX_REJECT_FRACTION", 0.2, float, _fraction, "a number between 0 and 1",
         "the nightly run fails above this share of rejected rows (`--max-reject-fraction`)"),
    Spec("keep_train_runs", "GPUCAST_KEEP_TRAIN_RUNS", 7, int, _at_least_one, "a whole number >= 1",
         "model folders kept in the registry: the last N successful train runs, plus any current champion's"),
    Spec("nn_max_minutes", "GPUCAST_NN_MAX_MINUTES", 20.0, float, _non_negative, "a finite number >= 0",
         "the Transformer-BiGRU's time budget per fit, in minutes; 0 = none (`--nn-max-minutes`)"),
    Spec("backtest_days", "GPUCAST_BACKTEST_DAYS", 7, int, _at_least_one, "a whole number >= 1",
         "the backtest window: jobs completed in the last N days of the logs (`gpucast backtest --days`)"),
    Spec("alert_webhook_url", "GPUCAST_ALERT_WEBHOOK_URL", "", str, _webhook_url, "an http(s) URL, or empty",
         "where a failed or crashed nightly run is announced (a JSON POST through Prefect's Custom Webhook block); "
         "empty: no alert, only the run's state"),
    Spec("keep_forecast_days", "GPUCAST_KEEP_FORECAST_DAYS", 30, int, _at_least_one, "a whole number >= 1",
         "score runs (and their forecasts) older than N days are pruned at each score run; the latest is always kept"),
    Spec("sql_memory", "GPUCAST_SQL_MEMORY", "2GB", str, _memory_size, "a size such as 512MB or 2GB",
         "`gpucast sql`: DuckDB's memory limit for one planner query (it spills to disk beyond)"),
    Spec("sql_threads", "GPUCAST_SQL_THREADS", 2, int, _at_least_one, "a whole number >= 1",
         "`gpucast sql`: threads one planner query may use"),
    Spec("sql_temp_limit", "GPUCAST_SQL_TEMP_LIMIT", "4GB", str, _memory_size, "a size such as 512MB or 2GB",
         "`gpucast sql`: the most a query may spill to its temporary folder ($GPUCAST_HOME/tmp/sql-<pid>)"),
    Spec("sql_timeout_s", "GPUCAST_SQL_TIMEOUT_S", 300.0, float, _positive, "a finite number > 0",
         "`gpucast sql`: a query running longer is interrupted (exit code 2)"),
    Spec("night_budget_minutes", "GPUCAST_NIGHT_BUDGET_MINUTES", 30.0, float, _non_negative, "a finite number >= 0",
         "minutes the training step may spend comparing models; fits not finished by then are skipped and recorded "
         "(table skipped_fits), then the champions are refitted, scored and published; 0 = no budget (`--budget-minutes`)"),
    Spec("train_runner", "GPUCAST_TRAIN_RUNNER", "dask", str, _runner, "one of: " + ", ".join(RUNNERS),
         "where training's fits run: dask (a local Dask cluster sized to the machine, or GPUCAST_DASK_ADDRESS's), "
         "local (one after another in the flow's process) (`--runner`)"),
    Spec("dask_address", "GPUCAST_DASK_ADDRESS", "", str, _dask_address, "a Dask scheduler address such as tcp://host:8786",
         "an existing Dask scheduler to fan training out to; empty: a local cluster started for the run (`--dask-address`)"),
    Spec("dask_workers", "GPUCAST_DASK_WORKERS", 0, int, _non_negative_int, "a whole number >= 0",
         "workers of the local Dask cluster (one thread each); 0 = one per CPU core"),
    Spec("inventory", "GPUCAST_INVENTORY", "", str, _any, "a path to a YAML file, or empty",
         "the GPUs each queue owns (docs/planners.md); empty: $GPUCAST_HOME/inventory.yaml when it exists, else "
         "the plan shows GPUs needed without GPUs owned"),
    Spec("plan_days", "GPUCAST_PLAN_DAYS", 14, int, _at_least_one, "a whole number >= 1",
         "days the capacity plan covers from the latest forecasts' day (`gpucast plan --days`)"),
)
SPEC_BY_FIELD = {s.field: s for s in SPECS}


def _check(spec: Spec, value: Any, source: str, shown: str | None = None) -> Any:
    """`value` if it keeps its rule, else a SettingsError naming `source` (a variable or a flag)."""
    if not spec.rule(value):
        raise SettingsError(f"{source}={shown or repr(value)} is not {spec.expects} (default {spec.default})")
    return value


def parse(spec: Spec, raw: str, source: str) -> Any:
    """A setting's text, parsed and checked; errors name `source`."""
    try:
        value = spec.parse(raw.strip())
    except ValueError:
        raise SettingsError(f"{source}={raw!r} is not {spec.expects} (default {spec.default})") from None
    return _check(spec, value, source, repr(raw))


def home_from_env(environ: Mapping[str, str] | None = None) -> Path:
    """Only the data directory (for Prefect's defaults, set before anything else is read)."""
    environ = os.environ if environ is None else environ
    return Path(environ.get(HOME_ENV) or DEFAULT_HOME).expanduser().resolve()


@dataclass(frozen=True)
class Settings:
    """Where things live and the limits a run keeps. Build with `Settings.from_env()`."""

    home: Path
    lock_timeout_s: float = SPEC_BY_FIELD["lock_timeout_s"].default
    duckdb_memory: str = SPEC_BY_FIELD["duckdb_memory"].default
    gpu_mem_gb: float = SPEC_BY_FIELD["gpu_mem_gb"].default
    max_reject_fraction: float = SPEC_BY_FIELD["max_reject_fraction"].default
    keep_train_runs: int = SPEC_BY_FIELD["keep_train_runs"].default
    nn_max_minutes: float = SPEC_BY_FIELD["nn_max_minutes"].default
    backtest_days: int = SPEC_BY_FIELD["backtest_days"].default
    alert_webhook_url: str = SPEC_BY_FIELD["alert_webhook_url"].default
    keep_forecast_days: int = SPEC_BY_FIELD["keep_forecast_days"].default
    sql_memory: str = SPEC_BY_FIELD["sql_memory"].default
    sql_threads: int = SPEC_BY_FIELD["sql_threads"].default
    sql_temp_limit: str = SPEC_BY_FIELD["sql_temp_limit"].default
    sql_timeout_s: float = SPEC_BY_FIELD["sql_timeout_s"].default
    night_budget_minutes: float = SPEC_BY_FIELD["night_budget_minutes"].default
    train_runner: str = SPEC_BY_FIELD["train_runner"].default
    dask_address: str = SPEC_BY_FIELD["dask_address"].default
    dask_workers: int = SPEC_BY_FIELD["dask_workers"].default
    inventory: str = SPEC_BY_FIELD["inventory"].default
    plan_days: int = SPEC_BY_FIELD["plan_days"].default

    def __post_init__(self) -> None:
        object.__setattr__(self, "home", Path(self.home).expanduser().resolve())
        for f in fields(self):
            _check(SPEC_BY_FIELD[f.name], getattr(self, f.name), f.name)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults, then every `GPUCAST_*` variable that is set (empty counts as unset)."""
        environ = os.environ if environ is None else environ
        if HOME_ENV in environ and not environ[HOME_ENV].strip():
            # set but empty: a deployment job variable rendered from a variable unset at `prefect deploy`
            # time would otherwise send the run to an empty ./.gpucast in the worker's folder
            raise SettingsError(f"{HOME_ENV} is set but empty: set it to the data directory, or unset it for the "
                                f"default ./{DEFAULT_HOME} (a deployment: set it before `prefect deploy`)")
        values: dict[str, Any] = {"home": home_from_env(environ)}
        for spec in SPECS[1:]:
            raw = environ.get(spec.env, "")
            if raw.strip():
                values[spec.field] = parse(spec, raw, spec.env)
        return cls(**values)

    def override(self, sources: Mapping[str, str] | None = None, **values: Any) -> Settings:
        """A copy with `values` on top; None keeps the current value. `sources` names each field's
        origin (e.g. its CLI flag) for the error message."""
        given = {k: v for k, v in values.items() if v is not None}
        for name, value in given.items():
            if name not in SPEC_BY_FIELD:
                raise SettingsError(f"unknown setting {name!r}; settings: {', '.join(SPEC_BY_FIELD)}")
            _check(SPEC_BY_FIELD[name], value, (sources or {}).get(name, name))
        return replace(self, **given) if given else self

    # Paths of the data directory -------------------------------------------------------------
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
    def inventory_path(self) -> Path | None:
        """The inventory file: GPUCAST_INVENTORY's (it must exist), else $GPUCAST_HOME/inventory.yaml if
        it exists, else None."""
        if self.inventory:
            return Path(self.inventory).expanduser()
        default = self.home / "inventory.yaml"
        return default if default.exists() else None

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

    def ensure(self) -> Settings:
        for d in (self.home, self.inbox_dir, self.staging_dir, self.lake_dir):
            d.mkdir(parents=True, exist_ok=True)
        return self
