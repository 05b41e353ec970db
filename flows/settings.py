"""Every gpucast setting, read once at the edge, held by small frozen objects, one per concern.

`Settings.from_env()` reads the `GPUCAST_*` variables (the only place that does), once per process start: the
CLI where the command starts (`flows/cli/process.py` `run_command`, the flags on top with `Settings.override`), or
a deployment's run at its start (`Settings.given`, only for the concerns nobody handed it); every subflow gets its
concerns from its parent. Every value is checked when it is built, and a bad one stops the run with the variable's
(or the flag's) name and the rule it broke: `GPUCAST_MAX_REJECT_FRACTION='nan' is not a number between 0 and 1`.
Tasks and the warehouse never read the environment.

`SPECS` is the table of settings: variable, concern, name, default, rule and meaning. Each variable is written
out once, in its row (`grep GPUCAST_SQL_THREADS` lands there; tests/flows/test_settings.py checks every one), and
a setting's name is the same from its variable and its flag down to the code that uses it
(`GPUCAST_SQL_TIMEOUT_S` is `sql.timeout_s`; `GPUCAST_PLAN_DAYS` and `--plan-days` are `planning.plan_days`).
The concerns, and who gets each (a function takes the one it needs, never the whole bundle):

| concern | object | what it says | used by |
|---|---|---|---|
| storage | `Storage`* | where the data directory's parts live, the writer's lock wait and memory, what is kept | every warehouse function |
| sql | `SqlSandbox`* | the limits of one planner query (`gpucast sql`) | `warehouse/queries.py` |
| cluster | `Cluster` | where training's fits and large scoring runs go (Dask); the Prefect API's answer bound | runners.py, cli |
| planning | `Planning` | GPU memory of unknown GPUs (scoring's, the plan's), the plan's days, the inventory file | scoring, the plan |
| quality | `Quality` | rejected-rows limit, backtest window, how far ahead a timestamp may be | nightly, backtest, ingest |
| training | `TrainOptions`** | the time limits a run's train options leave unset (network minutes, night budget) | the CLI, train |
| tracing | `Tracing` | the time bounds of the traced prior's traces (one trace, one night) | `flows/stage.py` |
| alerts | `Alerts` | where a failed night is announced | the nightly's failure hook |

*The warehouse's two concerns are defined in `warehouse/concerns.py` as plain values with no defaults (the
warehouse imports nothing of `flows/` and reads no environment); this module fills them from the table and
checks them when it builds a `Settings`. The other concerns live here, beside the edge that uses them.

**The training concern is `TrainOptions` itself (`tasks/learn/options.py`), the one type for what a train run does:
`settings.training` is the options a run gets unless it says otherwise, with the two time limits from the table.
A run's options leave a limit None to mean "the setting's"; the edge fills it (`with_time_limits`): the CLI from
its settings, a deployment's run from the environment it reads once. (There was a second type, `TrainingDefaults`,
holding only those two fields beside TrainOptions' own two: two names for one value, copied from one to the other.)

The CLI's help text and docs/operations.md's settings table are written from `SPECS`
(tests/flows/test_settings.py checks the docs). Every path the pipeline writes is under one data
directory, `GPUCAST_HOME` (default `./.gpucast`).
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.warehouse.concerns import SqlSandbox, Storage, is_size, size_bytes
from gpucast.warehouse.errors import check_kind

if TYPE_CHECKING:  # imported when the training concern is built (`_concerns`): its module loads pydantic, which the
    # read commands do not need (`ReadSettings`)
    from gpucast.tasks.learn.options import TrainOptions

__all__ = ["CONCERNS", "RUNNERS", "SPECS", "SPEC_BY_FIELD", "Alerts", "Cluster", "Planning", "Quality", "ReadSettings",  # noqa: F822 (CONCERNS: `__getattr__`)
           "Settings", "SettingsError", "SqlSandbox", "Storage", "Tracing", "home_from_env", "size_bytes", "with_time_limits"]

DEFAULT_HOME = ".gpucast"


# Where a train run's fits run: on Dask (a local cluster sized to the machine, or the cluster at
# GPUCAST_DASK_ADDRESS), or one after another in the flow's own process.
RUNNERS = ("dask", "local")


class SettingsError(ValueError):
    """A setting's value breaks its rule; the message names the variable or flag."""


# Rules a parsed value must keep. Every number and size has an upper bound as well as a lower one: a
# setting far past any real use (GPUCAST_SQL_THREADS=1000000 started 29,610 threads) is a typing error,
# refused at load with the variable and the rule, never tried.
def _between(low: float, high: float, *, above: bool = False, whole: bool = False) -> tuple[Callable[[Any], bool], str]:
    """(rule, the rule in words) of a number from `low` (excluded when `above`) to `high`."""
    def rule(v: float) -> bool:
        return math.isfinite(v) and (v > low if above else v >= low) and v <= high

    kind = "a whole number" if whole else "a finite number"
    return rule, f"{kind} {'>' if above else '>='} {low:g} and <= {high:g}"


def _fraction(v: float) -> bool:
    return math.isfinite(v) and 0 <= v <= 1


def machine_memory_bytes() -> int:
    """This machine's physical memory (4TB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 4 * 10**12


# A memory limit: at least MIN_MEMORY (GPUCAST_DUCKDB_MEMORY=0GB was taken, then `gpucast plan` failed with
# DuckDB's multi-line OutOfMemoryException; the publish of 600k keyed rows runs in 16MB, tests/warehouse/
# test_publish.py), at most this machine's memory.
MIN_MEMORY = "16MB"
MAX_TEMP = "100TB"  # a spill cap past any disk


def _size_between(low: str, high: int | str, high_shown: str) -> tuple[Callable[[Any], bool], str]:
    """(rule, words) of a size such as 512MB from `low` to `high` (bytes, or a size)."""
    top = high if isinstance(high, int) else size_bytes(high)

    def rule(v: str) -> bool:
        return is_size(v) and size_bytes(low) <= size_bytes(v) <= top

    return rule, f"a size such as 512MB or 2GB, from {low} to {high_shown}"


_MEMORY = _size_between(MIN_MEMORY, machine_memory_bytes(), f"this machine's memory ({machine_memory_bytes() / 1e9:.1f}GB)")
DAY_S, DAY_MIN = 86_400, 1_440
MAX_THREADS = 256  # GPUCAST_SQL_THREADS and GPUCAST_DASK_WORKERS: far above the cores of any one machine


def _webhook_url(v: str) -> bool:
    return v == "" or re.fullmatch(r"https?://[^\s]+", v) is not None


def _runner(v: str) -> bool:
    return v in RUNNERS


def _dask_address(v: str) -> bool:
    return v == "" or re.fullmatch(r"(tcp|tls|inproc|ucx)://[^\s/]+:\d+|[A-Za-z0-9.\-]+:\d+", v) is not None


def _host(v: str) -> bool:
    return re.fullmatch(r"[A-Za-z0-9.\-:]{1,253}", v) is not None  # a name or an IPv4/IPv6 address


def _any(_: Any) -> bool:
    return True


@dataclass(frozen=True)
class Spec:
    """One setting: its variable (written out, so `grep GPUCAST_SQL_THREADS` finds this row), the concern that
    holds it and its name there, its default, how its text parses, the rule it keeps (and that rule in words, for
    errors), and what it means. `older`: variables an older gpucast read for it, still read when `env` is unset."""

    env: str
    concern: str
    field: str
    default: Any
    parse: Callable[[str], Any]
    rule: Callable[[Any], bool]
    expects: str
    help: str
    older: tuple[str, ...] = ()
    secret: bool = False  # its value is never shown: a webhook's URL carries its token in the path (review 77 S1-9)


SPECS: tuple[Spec, ...] = (
    Spec("GPUCAST_HOME", "storage", "home", Path(DEFAULT_HOME), Path, _any, "a path",
         "the data directory: warehouse, lake, inbox, staging, models, Prefect state (git-ignored)"),
    Spec("GPUCAST_LOCK_TIMEOUT_S", "storage", "lock_timeout_s", 600.0, float, *_between(0, DAY_S, above=True),
         "seconds a writer waits for another writer before giving up (exit code 3)"),
    Spec("GPUCAST_DUCKDB_MEMORY", "storage", "duckdb_memory", "1GB", str, *_MEMORY,
         "DuckDB's memory limit for the pipeline's writer (it spills to disk beyond)"),
    # GPUCAST_GPU_MEM_GB (`--gpu-mem-gb`) once set both of the next two; it still does, where the new name is unset
    Spec("GPUCAST_OOM_GPU_MEM_GB", "planning", "oom_gpu_mem_gb", 80.0, float, *_between(0, 10_000, above=True),
         "the GPU memory (GB) `oom_risk` is judged against for a job whose GPU the catalogue does not know "
         "(`--oom-gpu-mem-gb`: `gpucast score`, the nightly)", older=("GPUCAST_GPU_MEM_GB",)),
    Spec("GPUCAST_DEFAULT_GPU_MEM_GB", "planning", "default_gpu_mem_gb", 80.0, float, *_between(0, 10_000, above=True),
         "the GPU memory (GB) of the GPUs a queue without an inventory is planned on (`--default-gpu-mem-gb`: "
         "`gpucast plan`, the nightly)", older=("GPUCAST_GPU_MEM_GB",)),
    Spec("GPUCAST_MAX_REJECT_FRACTION", "quality", "max_reject_fraction", 0.2, float, _fraction, "a number between 0 and 1",
         "the nightly run fails above this share of rejected rows, or of files rejected whole (`--max-reject-fraction`)"),
    Spec("GPUCAST_KEEP_TRAIN_RUNS", "storage", "keep_train_runs", 7, int, *_between(1, 1_000, whole=True),
         "model folders kept in the registry: the last N successful train runs, plus any current champion's"),
    Spec("GPUCAST_NN_MAX_MINUTES", "training", "nn_max_minutes", 20.0, float, *_between(0, DAY_MIN),
         "the Transformer-BiGRU's time budget per fit, in minutes; 0 = none (`--nn-max-minutes`)"),
    Spec("GPUCAST_BACKTEST_DAYS", "quality", "backtest_days", 7, int, *_between(1, 3_660, whole=True),
         "the backtest window: jobs completed in the last N days of the logs (`gpucast backtest --backtest-days`)"),
    Spec("GPUCAST_FUTURE_TOLERANCE_HOURS", "quality", "future_tolerance_hours", 24.0, float, *_between(0, 8_760),
         "a timestamp more than N hours after the ingest's own time rejects its row (a clock or typing error: 2099)"),
    Spec("GPUCAST_ALERT_WEBHOOK_URL", "alerts", "webhook_url", "", str, _webhook_url, "an http(s) URL, or empty",
         "where a failed or crashed nightly run is announced (a JSON POST through Prefect's Custom Webhook block); "
         "empty: no alert, only the run's state", secret=True),
    Spec("GPUCAST_KEEP_FORECAST_DAYS", "storage", "keep_forecast_days", 30, int, *_between(1, 3_660, whole=True),
         "score runs (and their forecasts) older than N days are pruned at each score run; the latest is always kept"),
    Spec("GPUCAST_SQL_MEMORY", "sql", "memory", "2GB", str, *_MEMORY,
         "`gpucast sql`: DuckDB's memory limit for one planner query (it spills to disk beyond), and the most its "
         "fetched result may hold (a larger result is refused, exit code 2)"),
    Spec("GPUCAST_SQL_THREADS", "sql", "threads", 2, int, *_between(1, MAX_THREADS, whole=True),
         "`gpucast sql`: threads one planner query may use"),
    Spec("GPUCAST_SQL_TEMP_LIMIT", "sql", "temp_limit", "4GB", str, *_size_between("0MB", MAX_TEMP, MAX_TEMP),
         "`gpucast sql`: the most a query may spill to its temporary folder ($GPUCAST_HOME/tmp/sql-<pid>)"),
    Spec("GPUCAST_SQL_TIMEOUT_S", "sql", "timeout_s", 300.0, float, *_between(0, DAY_S, above=True),
         "`gpucast sql`: a query running longer is interrupted (exit code 2)"),
    Spec("GPUCAST_NIGHT_BUDGET_MINUTES", "training", "night_budget_minutes", 30.0, float, *_between(0, DAY_MIN),
         "minutes the training step may spend comparing models; fits not finished by then are skipped and recorded "
         "(table skipped_fits), then the champions are refitted, scored and published; 0 = no budget (`--night-budget-minutes`)"),
    # 10 s: at issue 52's 1M pending jobs a model of up to 10 CPU-s per 1M jobs competes (the forests, the blends of
    # trees, CatBoost, XGBoost, the plain LightGBM), the network (168-650) does not; at the demo's ~220 every model does
    Spec("GPUCAST_SCORE_BUDGET_S", "training", "score_budget_s", 10.0, float, *_between(0, DAY_S),
         "CPU seconds on one core that a target's champion's predict may cost on the pending queue, counted from each "
         "fitted model (its predict's CPU-s per 1M jobs x the jobs pending when training runs); a model over it does "
         "not compete for champion (the plain LightGBM always does), and one over twice it at its last count is fitted "
         "once, not on every repeat; 0 = no budget (`--score-budget-s`)"),
    Spec("GPUCAST_TRAIN_RUNNER", "cluster", "train_runner", "dask", str, _runner, "one of: " + ", ".join(RUNNERS),
         "where training's fits run: dask (a local Dask cluster sized to the machine, or GPUCAST_DASK_ADDRESS's), "
         "local (one after another in the flow's process) (`--train-runner`)"),
    Spec("GPUCAST_DASK_ADDRESS", "cluster", "dask_address", "", str, _dask_address, "a Dask scheduler address such as tcp://host:8786",
         "an existing Dask scheduler to fan training out to; empty: a local cluster started for the run (`--dask-address`)"),
    Spec("GPUCAST_DASK_WORKERS", "cluster", "dask_workers", 0, int, *_between(0, MAX_THREADS, whole=True),
         "workers of the local Dask cluster (one thread each); 0 = one per CPU core"),
    # 15 s: a server started moments before (a site's restart, the crash-safety tests' own) took 5-8 s to answer its
    # first request on a busy 2-core machine (its app starts while the request waits in the socket's queue)
    Spec("GPUCAST_PREFECT_API_CHECK_S", "cluster", "prefect_api_check_s", 15.0, float, *_between(0, 600, above=True),
         "seconds a configured Prefect API (PREFECT_API_URL) has to answer its health check before a flow command "
         "starts; no answer by then: the command ends in one line, exit 5"),
    Spec("GPUCAST_DASK_DASHBOARD_HOST", "cluster", "dask_dashboard_host", "127.0.0.1", str, _host, "a host name or IP address",
         "the address the local Dask cluster's dashboard listens on: this machine only by default; 0.0.0.0 shows it "
         "to the network (the dashboard has no login)"),
    Spec("GPUCAST_INVENTORY", "planning", "inventory", "", str, _any, "a path to a YAML file, or empty",
         "the GPUs each queue owns (docs/planners.md); empty: $GPUCAST_HOME/inventory.yaml when it exists, else "
         "the plan shows GPUs needed without GPUs owned"),
    Spec("GPUCAST_SOURCES", "storage", "sources", "", str, _any, "a path to a YAML file, or empty",
         "the sources the nightly pulls besides the inbox: MLflow tracking URIs, Slurm exports or sacct "
         "(docs/sources.md); empty: $GPUCAST_HOME/sources.yaml when it exists, else the inbox only"),
    Spec("GPUCAST_PLAN_DAYS", "planning", "plan_days", 14, int, *_between(1, 366, whole=True),
         "days the capacity plan covers from the latest forecasts' day (`gpucast plan --plan-days`, `gpucast demand --plan-days`)"),
    Spec("GPUCAST_TRACE_SECONDS", "tracing", "trace_seconds", 60.0, float, *_between(0, 3_600, above=True),
         "the traced prior: seconds one architecture's trace may run (in a child process, killed past it; the "
         "timeout is cached with its reason)"),
    Spec("GPUCAST_TRACE_NIGHT_SECONDS", "tracing", "trace_night_seconds", 600.0, float, *_between(0, DAY_S),
         "the traced prior: seconds all of a night's new traces may take together; configurations not reached "
         "are traced on a later night (their jobs get the analytic prior tonight); 0: no new traces (cached "
         "ones are still used)"),
)
SPEC_BY_FIELD = {s.field: s for s in SPECS}
assert len(SPEC_BY_FIELD) == len(SPECS), "a setting's name is unique across concerns (override takes bare names)"
HOME_ENV = SPEC_BY_FIELD["home"].env  # the data directory's variable, read alone first (`home_from_env`)


def _check(spec: Spec, value: Any, source: str, shown: str | None = None) -> Any:
    """`value` if it keeps its rule, else a SettingsError naming `source` (a variable or a flag)."""
    if not spec.rule(value):
        said = "<its value, not shown: it may hold a token>" if spec.secret else (shown or repr(value))
        raise SettingsError(f"{source}={said} is not {spec.expects} (default {spec.default})")
    return value


def parse(spec: Spec, raw: str, source: str) -> Any:
    """A setting's text, parsed and checked; errors name `source`."""
    try:
        value = spec.parse(raw.strip())
    except ValueError:
        said = "<its value, not shown: it may hold a token>" if spec.secret else repr(raw)
        raise SettingsError(f"{source}={said} is not {spec.expects} (default {spec.default})") from None
    return _check(spec, value, source, repr(raw))


def home_from_env(environ: Mapping[str, str] | None = None) -> Path:
    """Only the data directory (for Prefect's defaults, set before anything else is read)."""
    environ = os.environ if environ is None else environ
    return Path(environ.get(HOME_ENV) or DEFAULT_HOME).expanduser().resolve()


def _default(name: str) -> Any:
    return SPEC_BY_FIELD[name].default


def check_concern(concern: Any) -> None:
    """Every field of a concern keeps its spec's rule; a SettingsError naming the field else."""
    for f in fields(concern):
        _check(SPEC_BY_FIELD[f.name], getattr(concern, f.name), f.name)


class _Checked:
    """A concern of the edge's own: every field keeps its spec's rule (checked when the object is built).
    The warehouse's concerns (`Storage`, `SqlSandbox`) are plain values: `Settings` checks them."""

    def __post_init__(self) -> None:
        check_concern(self)


@dataclass(frozen=True)
class Cluster(_Checked):
    """Where training's fits (and large scoring runs) go, and how long a configured Prefect API has to answer."""

    train_runner: str = _default("train_runner")
    dask_address: str = _default("dask_address")
    dask_workers: int = _default("dask_workers")
    dask_dashboard_host: str = _default("dask_dashboard_host")
    prefect_api_check_s: float = _default("prefect_api_check_s")


@dataclass(frozen=True)
class Planning(_Checked):
    """What the memory advice and the capacity plan assume."""

    oom_gpu_mem_gb: float = _default("oom_gpu_mem_gb")
    default_gpu_mem_gb: float = _default("default_gpu_mem_gb")
    inventory: str = _default("inventory")
    plan_days: int = _default("plan_days")


@dataclass(frozen=True)
class Quality(_Checked):
    """How much bad input a night tolerates, and how far back forecasts are checked."""

    max_reject_fraction: float = _default("max_reject_fraction")
    backtest_days: int = _default("backtest_days")
    future_tolerance_hours: float = _default("future_tolerance_hours")


@dataclass(frozen=True)
class Alerts(_Checked):
    """Where a failed night is announced."""

    webhook_url: str = _default("webhook_url")


@dataclass(frozen=True)
class Tracing(_Checked):
    """The time bounds of the traced prior (`tasks/learn/traced.py`): one trace, and all of a night's."""

    trace_seconds: float = _default("trace_seconds")
    trace_night_seconds: float = _default("trace_night_seconds")


# Every concern but training: plain frozen dataclasses (what a read command's settings hold, `ReadSettings`).
READ_CONCERNS: dict[str, type] = {"storage": Storage, "sql": SqlSandbox, "cluster": Cluster, "planning": Planning,
                                  "quality": Quality, "alerts": Alerts, "tracing": Tracing}
assert all({f.name for f in fields(cls)} == {s.field for s in SPECS if s.concern == name}
           for name, cls in READ_CONCERNS.items())
# the TrainOptions fields that are settings: the two time limits and the scoring budget
TRAINING_SETTINGS = tuple(s.field for s in SPECS if s.concern == "training")


@functools.cache
def _concerns() -> dict[str, type]:
    """Every concern's type (`CONCERNS`), the training concern's (`TrainOptions`) imported when first asked for."""
    from gpucast.tasks.learn.options import TrainOptions

    assert set(TRAINING_SETTINGS) <= set(TrainOptions.model_fields)
    return {**READ_CONCERNS, "training": TrainOptions}


def __getattr__(name: str) -> Any:
    """`CONCERNS`, every concern's type, made when first read (`_concerns`): its training concern, `TrainOptions`,
    loads pydantic, 0.1-0.2 CPU-s that `gpucast status` and `gpucast sql` (which may take 0.5 s in all, issue 52 item 4)
    do not need."""
    if name == "CONCERNS":
        return _concerns()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def with_time_limits(options: TrainOptions, training: TrainOptions) -> TrainOptions:
    """`options` with the time limits it leaves None (GPUCAST_NN_MAX_MINUTES, GPUCAST_NIGHT_BUDGET_MINUTES) taken
    from the settings' (`training`). Done where the run was asked for: a run handed to the GPU pool gets them filled
    in, so the worker's own environment never changes them."""
    update = {name: getattr(training, name) for name in TRAINING_SETTINGS if getattr(options, name) is None}
    return options.model_copy(update=update) if update else options


def limits_given(options: TrainOptions) -> TrainOptions | None:
    """`options` as the training concern a caller handed over when it sets every time limit (the CLI's and a parent
    flow's do), else None: the limits are then the environment's (`Settings.given`)."""
    return options if all(getattr(options, name) is not None for name in TRAINING_SETTINGS) else None


def table_defaults(concern: str) -> Any:
    """A concern with every setting at the table's default: the only defaults the warehouse's concerns get
    (`warehouse/concerns.py` defines none)."""
    return _concerns()[concern](**{s.field: s.default for s in SPECS if s.concern == concern})


def _values_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every `GPUCAST_*` variable that is set (empty counts as unset), parsed and checked, by setting name."""
    environ = os.environ if environ is None else environ
    if HOME_ENV in environ and not environ[HOME_ENV].strip():
        # set but empty: a deployment job variable rendered from a variable unset at `prefect deploy`
        # time would otherwise send the run to an empty ./.gpucast in the worker's folder
        raise SettingsError(f"{HOME_ENV} is set but empty: set it to the data directory, or unset it for the "
                            f"default ./{DEFAULT_HOME} (a deployment: set it before `prefect deploy`)")
    values: dict[str, Any] = {"home": home_from_env(environ)}
    for spec in SPECS[1:]:
        source = next((name for name in (spec.env, *spec.older) if environ.get(name, "").strip()), None)
        if source:
            values[spec.field] = parse(spec, environ[source], source)
    return values


def _by_concern(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The table's defaults with `values` (bare setting names) on top, grouped by concern."""
    by_concern: dict[str, dict[str, Any]] = {}
    for name, value in ({s.field: s.default for s in SPECS} | dict(values)).items():
        by_concern.setdefault(SPEC_BY_FIELD[name].concern, {})[name] = value
    return by_concern


@dataclass(frozen=True)
class ReadSettings:
    """The settings of a command that only reads the warehouse (`gpucast status`, `gpucast sql`: flows/cli/options.py
    `READ_COMMANDS`): every concern but training, read from the environment and checked as `Settings.from_env` reads
    and checks them (a bad variable stops them the same way). The training concern's type, `TrainOptions`, loads
    pydantic: 0.1-0.2 CPU-s of the 0.5 s these commands may take (issue 52 item 4), for settings they never use."""

    storage: Storage
    sql: SqlSandbox
    cluster: Cluster
    planning: Planning
    quality: Quality
    alerts: Alerts
    tracing: Tracing

    def __post_init__(self) -> None:
        check_concern(self.storage)  # as `Settings` does: the warehouse's concerns do not check themselves
        check_concern(self.sql)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ReadSettings:
        """Defaults, then every `GPUCAST_*` variable that is set (those of the training concern checked, not kept)."""
        return cls(**{name: READ_CONCERNS[name](**given) for name, given in _by_concern(_values_from_env(environ)).items()
                      if name in READ_CONCERNS})


@dataclass(frozen=True)
class Settings:
    """Every concern's settings, built once at the edge (`from_env`); pass each function only the
    concern it needs (`settings.storage`, `settings.sql`, ...)."""

    storage: Storage
    sql: SqlSandbox = field(default_factory=lambda: table_defaults("sql"))
    cluster: Cluster = Cluster()
    planning: Planning = Planning()
    quality: Quality = Quality()
    training: TrainOptions = field(default_factory=lambda: table_defaults("training"))
    alerts: Alerts = Alerts()
    tracing: Tracing = Tracing()

    def __post_init__(self) -> None:
        check_concern(self.storage)  # the warehouse's concerns do not check themselves (warehouse/concerns.py)
        check_concern(self.sql)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults, then every `GPUCAST_*` variable that is set (empty counts as unset)."""
        return cls._build(_values_from_env(environ))

    @classmethod
    def _build(cls, values: Mapping[str, Any]) -> Settings:
        """From bare setting names to the concern objects."""
        return cls(**{name: _concerns()[name](**given) for name, given in _by_concern(values).items()})

    @classmethod
    def given(cls, **concerns: Any) -> Settings:
        """A flow's settings from the concerns its caller handed over (None: not handed over). A flow takes the concern
        objects it needs (`storage=`, `cluster=`, ...), never the bundle and never the same values again as scalars
        (issue 39), and builds its view with this, once, at its start. Its callers (the CLI, a parent flow) hand over
        every one, and nothing is read here; a run nobody handed them to (a deployment's: Prefect calls the flow with
        prefect.yaml's parameters; the GPU pool's hand-off, whose storage is the worker's) gets the ones it lacks from
        the environment, read once, here (`from_env`)."""
        unknown = set(concerns) - set(_concerns())
        if unknown:
            raise TypeError(f"not a settings concern: {', '.join(sorted(unknown))}; concerns: {', '.join(_concerns())}")
        handed = {name: c for name, c in concerns.items() if c is not None}
        if len(handed) == len(concerns):
            return cls(**handed)
        return replace(cls.from_env(), **handed)

    def override(self, sources: Mapping[str, str] | None = None, **values: Any) -> Settings:
        """A copy with `values` (bare setting names) on top; None keeps the current value. `sources`
        names each setting's origin (e.g. its CLI flag) for the error message."""
        given = {k: v for k, v in values.items() if v is not None}
        if not given:
            return self
        for name, value in given.items():
            if name not in SPEC_BY_FIELD:
                raise SettingsError(f"unknown setting {name!r}; settings: {', '.join(SPEC_BY_FIELD)}")
            _check(SPEC_BY_FIELD[name], value, (sources or {}).get(name, name))
        changed = {}
        for name in {SPEC_BY_FIELD[k].concern for k in given}:
            concern, update = getattr(self, name), {k: v for k, v in given.items() if SPEC_BY_FIELD[k].concern == name}
            changed[name] = concern.model_copy(update=update) if name == "training" else replace(concern, **update)
        return replace(self, **changed)

    @property
    def inventory_path(self) -> Path | None:
        """The inventory file: GPUCAST_INVENTORY's (it must exist), else $GPUCAST_HOME/inventory.yaml if
        it exists, else None."""
        if self.planning.inventory:
            return Path(self.planning.inventory).expanduser()
        default = self.storage.home / "inventory.yaml"
        return default if default.exists() else None

    @property
    def sources_path(self) -> Path | None:
        """The sources file: GPUCAST_SOURCES's (it must exist), else $GPUCAST_HOME/sources.yaml if it
        exists, else None (the nightly reads the inbox only)."""
        if self.storage.sources:
            return Path(self.storage.sources).expanduser()
        default = self.storage.home / "sources.yaml"
        return default if default.exists() else None

    def ensure(self) -> Settings:
        """Make the data directory's folders (`Storage.ensure`), and refuse gpucast's lock files (`writer.lock`,
        `nightly.lock`) that are folders; another folder named `*.lock` is the user's, left alone. A file where a
        folder goes, or that folder, raises the OS's error, which `environment_error` (warehouse/errors.py) words as
        one line naming the path: exit code 5."""
        from gpucast.warehouse.housekeeping import EXCLUSIVE_RUNS, run_lock_path

        self.storage.ensure()
        check_kind(self.storage.lock_path, *(run_lock_path(self.storage, n) for n in EXCLUSIVE_RUNS), folder=False)
        return self
