"""The argparse tree: every command, its flags and their defaults, and the handler it calls.

Defaults shown in `--help` come from the settings table (`flows/settings.py`) and the training options
(`tasks/learn/options.py`); nothing here reads the environment, so `--help` works whatever it holds.
"""

from __future__ import annotations

import argparse

from gpucast.flows.cli.ops import _restore
from gpucast.flows.cli.options import FLAG_ALIASES, SETTING_FLAGS, SPLIT_FLAGS, TRAIN_SETTING_FLAGS, dest
from gpucast.flows.cli.pipeline import (
    DEMO,
    DEMO_EPOCHS,
    DEMO_PRESET,
    DEMO_REPEATS,
    _demo,
    _import_mlflow,
    _import_slurm,
    _ingest,
    _nightly,
    _score,
    _simulate,
    _train,
)
from gpucast.flows.cli.planning import _demand, _plan, _site
from gpucast.flows.cli.process import EXIT_CODES
from gpucast.flows.cli.query import SQL_MAX_ROWS, STATUS_API_TIMEOUT_S, _backtest, _report, _sql, _status
from gpucast.flows.nightly_steps import NIGHTLY_CHAIN
from gpucast.flows.settings import RUNNERS, SPEC_BY_FIELD
from gpucast.tasks.ingest import DEFAULT_CHUNK_ROWS
from gpucast.tasks.learn.features import FEATURE_SETS
from gpucast.tasks.learn.models.presets import PRESET_NAMES
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.score import DEFAULT_BATCH_ROWS
from gpucast.tasks.simulate import FORMATS, Rhythm, SimConfig

DESCRIPTION = "`gpucast`: the command line for data engineers, planners and on-call staff."
TRAIN_DEFAULTS = TrainOptions()


def _older_spellings(p: argparse.ArgumentParser, flag: str, **kw) -> None:
    """The older spellings of `flag` (`FLAG_ALIASES`), hidden from the help: each sets what `flag` sets."""
    for old in FLAG_ALIASES.get(flag, ()):
        p.add_argument(old, dest=dest(flag), default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kw)


def _setting_flag(p: argparse.ArgumentParser, flag: str, what: str, kind: type = float, **kw) -> None:
    """A flag named as its setting, whose default is the setting (a setting itself, or a train option the setting
    defaults), with its older spellings hidden."""
    spec = SPEC_BY_FIELD[SETTING_FLAGS.get(flag) or TRAIN_SETTING_FLAGS[flag]]
    assert dest(flag) == spec.field, f"{flag} is not named as its setting {spec.field}"
    p.add_argument(flag, dest=spec.field, type=kind, default=None,
                   help=f"{what} (env {spec.env}, default {spec.default or 'none'})", **kw)
    _older_spellings(p, flag, type=kind, **kw)


def _split_flag(p: argparse.ArgumentParser, old: str) -> None:
    """A flag that set two settings before they were split (`SPLIT_FLAGS`), hidden: it sets each of them this
    command has a flag for (`options.command_settings`)."""
    assert old in SPLIT_FLAGS
    p.add_argument(old, dest=dest(old), type=float, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


class _Refused(argparse.Action):
    """A flag a command accepts only to refuse, hidden: it means nothing there, and once was taken and silently
    ignored. `process.run_command` answers it with one line (its `why`) and exit code 2, before anything runs."""

    def __init__(self, option_strings, dest, why: str, **kw):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kw)
        self.why = why

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.refused = f"{option_string}: {self.why}"


def _days_flag(p: argparse.ArgumentParser, flag: str, default: int, what: str) -> None:
    """A count of days that is not a setting (the simulated history), with its older spelling `--days` hidden."""
    p.add_argument(flag, type=int, default=default, metavar="N", help=f"{what} (default {default})")
    _older_spellings(p, flag, type=int)


def _training_flags(p: argparse.ArgumentParser, repeats: int | None = None, epochs: int | None = None,
                    preset: str | None = None) -> None:
    """The train options' flags. Each keeps its value under the name of the `TrainOptions` field it sets (`--repeats`:
    repeats, tasks/learn/options.py); `options.train_options` builds the run's options from them."""
    d = TRAIN_DEFAULTS
    p.add_argument("--models", help="comma-separated registry names (default: all)")
    p.add_argument("--preset", default=preset, choices=PRESET_NAMES,
                   help=f"Transformer-BiGRU preset (default {preset or d.preset})")
    p.add_argument("--features", default=None, choices=tuple(FEATURE_SETS),
                   help=f"what models learn from: contract (the 11), hardware (+ GPU), priors (+ analytic priors), "
                        f"residual (priors, learning actual/prior) (default {d.features})")
    p.add_argument("--repeats", type=int, default=repeats, help=f"repeated 70/30 holdouts (default {repeats or d.repeats})")
    p.add_argument("--epochs", type=int, default=epochs, help="cap the Transformer-BiGRU's epochs")
    _setting_flag(p, "--nn-max-minutes", "the Transformer-BiGRU's time budget per fit, in minutes; 0: no limit")
    _setting_flag(p, "--night-budget-minutes", "minutes training may spend comparing models; fits not finished are skipped "
                                         "and recorded (skipped_fits); 0: no budget")
    _setting_flag(p, "--train-runner", "where the fits run: dask (a local Dask cluster, or --dask-address's) or local "
                                 "(one after another in this process)", str, choices=RUNNERS)
    _setting_flag(p, "--dask-address", "an existing Dask scheduler to fan the fits out to (tcp://host:8786)", str)
    p.add_argument("--compile-trees", action=argparse.BooleanOptionalAction, default=None,
                   help="compile a tree champion (LightGBM; RandomForest, ExtraTrees up to 200k nodes) to native code for "
                        "faster scoring (default: when 200,000 or more jobs are pending; compiling takes minutes)")
    p.add_argument("--min-labelled", type=int, default=None,
                   help=f"skip a target with fewer labelled jobs (default {d.min_labelled})")


def _nightly_flags(p: argparse.ArgumentParser, repeats: int | None = None, epochs: int | None = None,
                   preset: str | None = None) -> None:
    _training_flags(p, repeats, epochs, preset)
    _setting_flag(p, "--oom-gpu-mem-gb", "GPU memory oom_risk is judged against for a job whose GPU is unknown")
    _setting_flag(p, "--default-gpu-mem-gb", "GPU memory a queue without an inventory is planned on")
    _split_flag(p, "--gpu-mem-gb")
    _setting_flag(p, "--max-reject-fraction", "fail the run above this share of rejected rows")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpucast")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpucast", description=DESCRIPTION, epilog=EXIT_CODES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"gpucast {_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    _data_commands(sub)
    _model_commands(sub)
    _nightly_commands(sub)
    _plan_commands(sub)
    return p


def _rhythm_flags(p: argparse.ArgumentParser) -> None:
    """The arrivals' calendar (tasks/simulate.py `Rhythm`): each volume is Poisson around its mean."""
    r = Rhythm()
    p.add_argument("--weekend-factor", type=float, default=r.weekend_factor,
                   help=f"a weekend day's volume as a share of a weekday's (default {r.weekend_factor})")
    p.add_argument("--trend-per-week", type=float, default=r.trend_per_week,
                   help=f"growth of the volume per week, compounding (default {r.trend_per_week}; 0: none)")
    p.add_argument("--burst-chance", type=float, default=r.burst_chance,
                   help=f"chance that a day is a deadline (default {r.burst_chance}, about one a month)")
    p.add_argument("--burst-factor", type=float, default=r.burst_factor,
                   help=f"volume multiplier on the 3 days before a deadline (default {r.burst_factor})")
    p.add_argument("--flat", action="store_true", help="no rhythm: exactly --jobs-per-day jobs every day")


def _data_commands(sub) -> None:
    """simulate, ingest, status, sql: getting logs in and looking at the warehouse."""
    s = sub.add_parser("simulate", help="write simulated job logs")
    s.add_argument("--out", required=True, help="folder to write into")
    _days_flag(s, "--history-days", SimConfig.days, "days of logs to write, one file a day")
    s.add_argument("--jobs-per-day", type=int, default=SimConfig.jobs_per_day,
                   help=f"jobs a weekday gets at the start (default {SimConfig.jobs_per_day}; with --flat: every day)")
    s.add_argument("--pending-fraction", type=float, default=SimConfig.pending_fraction)
    s.add_argument("--dirty-fraction", type=float, default=SimConfig.dirty_fraction, help="share of bad records to inject")
    s.add_argument("--seed", type=int, default=SimConfig.seed, help="also part of every job id, so seeds never collide")
    s.add_argument("--format", choices=FORMATS, default=SimConfig.fmt)
    _rhythm_flags(s)
    s.set_defaults(func=_simulate)

    i = sub.add_parser("ingest", help="ingest job-log files, folders or globs (default: new inbox files)")
    i.add_argument("paths", nargs="*", help="files, folders or globs; none means $GPUCAST_HOME/inbox")
    i.add_argument("--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS, help="rows per chunk (bounds memory)")
    i.add_argument("--mapping", metavar="FILE", help="a YAML mapping file for an export in other names and units: "
                   "source columns to contract fields, units, value maps, constants (docs/sources.md)")
    i.set_defaults(func=_ingest)

    _import_commands(sub)

    st = sub.add_parser("status", help="recent runs (ingest, train, score, flows), failures and their errors")
    st.add_argument("--limit", type=int, default=10)
    st.add_argument("--flows", action=argparse.BooleanOptionalAction, default=None,
                    help="recent Prefect flow runs too (default: when a Prefect API is configured, PREFECT_API_URL, "
                         f"asked with a {STATUS_API_TIMEOUT_S:.0f} s timeout; --flows without one starts a temporary "
                         "server, about 20 s); --no-flows: only the warehouse")
    st.set_defaults(func=_status)

    q = sub.add_parser("sql", help="run a read-only SQL query on the planners' copy of the warehouse")
    q.add_argument("query")
    q.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="table (at most --max-rows rows), csv or json (every row)")
    q.add_argument("--max-rows", type=int, default=SQL_MAX_ROWS,
                   help=f"rows a table shows (default {SQL_MAX_ROWS:,}; 0: all); the row count is always printed")
    q.set_defaults(func=_sql)

    r = sub.add_parser("restore", help="put back the previous published copy (published.prev.duckdb) "
                                       "when the current one is broken or wrong")
    r.set_defaults(func=_restore)


def _import_commands(sub) -> None:
    """import slurm, import mlflow: a scheduler's and a tracker's own records."""
    im = sub.add_parser("import", help="import jobs from a scheduler's or a tracker's own records (slurm, mlflow)").add_subparsers(
        dest="source", required=True)
    sl = im.add_parser("slurm", help="Slurm accounting: a sacct --parsable2 file, or --sacct (docs/sources.md)")
    sl.add_argument("file", nargs="?", help="sacct --parsable2 output (any field order; docs/sources.md shows the "
                    "recommended --format)")
    sl.add_argument("--sacct", action="store_true", help="run sacct (it must be on PATH) instead of reading a file")
    sl.add_argument("--since", help="with --sacct: sacct's --starttime (default now-1days)")
    sl.add_argument("--mapping", metavar="FILE", help="a YAML mapping file naming the Comment keys or sacct fields "
                    "(WCKey, JobName) that model features come from, with units and value maps (docs/sources.md)")
    sl.add_argument("--mlflow-uri", metavar="URI", help="the MLflow tracking URI of the runs the jobs ran: a job's "
                    "model features come from the run tagged with its JobID (docs/sources.md)")
    sl.add_argument("--mlflow-experiment", metavar="NAME", action="append", help="with --mlflow-uri: an experiment "
                    "to look in (repeatable; default: all)")
    sl.add_argument("--join-tag", default="slurm_job_id", help="with --mlflow-uri: the run tag holding the JobID")
    sl.set_defaults(func=_import_slurm)
    ml = im.add_parser("mlflow", help="MLflow runs: params, tags, system metrics (needs gpucast[mlflow]; "
                       "docs/sources.md)")
    ml.add_argument("--tracking-uri", required=True, metavar="URI",
                    help="file:///path/mlruns, sqlite:////path/mlflow.db or http(s)://host:5000")
    ml.add_argument("--experiment", metavar="NAME", action="append", help="an experiment to import (repeatable; "
                    "default: every active one)")
    ml.add_argument("--since", metavar="TS", help="read the runs started or ended since TS (ISO 8601) instead of "
                    "since the last import's watermark")
    ml.add_argument("--mapping", metavar="FILE", help="a YAML mapping file naming the params or tags that contract "
                    "fields come from, with units and value maps (docs/sources.md)")
    ml.set_defaults(func=_import_mlflow)


def _model_commands(sub) -> None:
    """train, report, score."""
    t = sub.add_parser("train", help="retrain every model, compare them, pick a champion per target")
    t.add_argument("--target", help="comma-separated targets (default: all three)")
    _training_flags(t)
    t.add_argument("--seed", type=int, default=None, help=f"base seed of the splits (default {TRAIN_DEFAULTS.seed})")
    t.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    t.add_argument("--max-rows", type=int, default=None,
                   help=f"train on at most this many of the most recent COMPLETED jobs (default {TRAIN_DEFAULTS.max_rows:,}; "
                        "0: all)")
    t.set_defaults(func=_train)

    r = sub.add_parser("report", help="Markdown table and charts of the latest (or a given) train run")
    r.add_argument("--out", default=None, help="folder (default: $GPUCAST_HOME/reports/<run>)")
    r.add_argument("--run", default=None, help="train run id (default: the latest successful one)")
    r.set_defaults(func=_report)

    sc = sub.add_parser("score", help="forecast every PENDING job (P10/P50/P90 per target) with the champions")
    _setting_flag(sc, "--oom-gpu-mem-gb", "GPU memory oom_risk is judged against for a job whose GPU is unknown")
    _split_flag(sc, "--gpu-mem-gb")
    sc.add_argument("--batch-rows", type=int, default=DEFAULT_BATCH_ROWS, help="rows per scoring batch (bounds memory)")
    sc.add_argument("--device", default=None, help="cuda or cpu for the Transformer-BiGRU")
    sc.add_argument("--as-of", default=None, help="the time forecasts are stamped with (default now; for backfills)")
    sc.set_defaults(func=_score)

    b = sub.add_parser("backtest", help="compare the jobs that completed since they were forecast with their forecasts")
    _setting_flag(b, "--backtest-days", "the window: jobs completed in the last N days of the logs", int, metavar="N")
    b.set_defaults(func=_backtest)


def _plan_commands(sub) -> None:
    """plan, demand, site: what planners act on."""
    pl_ = sub.add_parser("plan", help="GPUs needed per day, queue and GPU type at P50/P90 vs owned (capacity_plan)")
    _setting_flag(pl_, "--plan-days", "days planned from the latest forecasts' day", int, metavar="N")
    pl_.add_argument("--gpu-types", default=None, help="comma-separated catalogue GPU types to plan on (default: the inventory's)")
    pl_.add_argument("--scenario", action="append", default=None, metavar="FILE",
                     help="a what-if scenario file (YAML; docs/planners.md 'What if'), planned beside the plan; repeatable")
    _setting_flag(pl_, "--default-gpu-mem-gb", "GPU memory a queue without an inventory is planned on")
    _split_flag(pl_, "--gpu-mem-gb")
    pl_.set_defaults(func=_plan)
    de = sub.add_parser("demand", help="forecast daily GPU-hours per queue and GPU type (P10/P50/P90) and backtest it")
    _setting_flag(de, "--plan-days", "days forecast after the last full day of history", int, metavar="N")
    de.set_defaults(func=_demand)
    si = sub.add_parser("site", help="write the planners' page (self-contained HTML) from the published copy")
    si.add_argument("--out", default=None, help="folder (default: $GPUCAST_HOME/site)")
    si.set_defaults(func=_site)


def _nightly_commands(sub) -> None:
    """nightly, demo."""
    n = sub.add_parser("nightly", help=NIGHTLY_CHAIN)
    n.add_argument("paths", nargs="*", help="files, folders or globs; none means new files in $GPUCAST_HOME/inbox")
    _nightly_flags(n)
    n.add_argument("--no-train", action="store_true", help="score with the current champions, do not retrain")
    n.add_argument("--as-of", default=None, help="the time forecasts are stamped with (default now; for backfills)")
    n.set_defaults(func=_nightly)

    d = sub.add_parser("demo", help="simulate 8 weeks of logs and run the nightly flow on them (CPU, minutes)")
    _days_flag(d, "--history-days", DEMO.days, "days of simulated history before night 1")
    d.add_argument("--jobs-per-day", type=int, default=DEMO.jobs_per_day)
    d.add_argument("--pending-fraction", type=float, default=DEMO.pending_fraction)
    d.add_argument("--dirty-fraction", type=float, default=DEMO.dirty_fraction)
    d.add_argument("--seed", type=int, default=DEMO.seed)
    _nightly_flags(d, repeats=DEMO_REPEATS, epochs=DEMO_EPOCHS, preset=DEMO_PRESET)
    d.add_argument("--no-train", action=_Refused, why="the demo trains on its first night, to have champions to "
                   "score with; `gpucast nightly --no-train` scores with the current ones")
    d.set_defaults(func=_demo)
