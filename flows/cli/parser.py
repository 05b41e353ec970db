"""The argparse tree: every command, its flags and their defaults, and the handler it calls.

Defaults in `--help`: the settings table (flows/settings.py), the train options; nothing here reads the environment.

A command's flags are added when that command is used (`_Command`: parsed, or its help printed), each by its own
function here, which imports the handler's module and the modules its defaults come from (the simulator's, scoring's:
Polars and numpy, 0.4-0.8 s). `gpucast --help`, `gpucast status` and `gpucast sql` so load only what they run
(docs/benchmarks.md "The command line's start-up"; tests/flows/test_cli_startup.py). `build_parser()` adds every
command's flags at once (what the tests walk); `build_parser(lazy=True)` is the console script's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from gpucast.flows.cli.flags import (
    _days_flag,
    _nightly_flags,
    _Refused,
    _rhythm_flags,
    _setting_flag,
    _split_flag,
    _train_defaults,
    _training_flags,
)
from gpucast.flows.cli.process import EXIT_CODES
from gpucast.flows.nightly_steps import NIGHTLY_CHAIN

DESCRIPTION = "`gpucast`: the command line for data engineers, planners and on-call staff."


class _Command(argparse.ArgumentParser):
    """A command's parser whose flags and handler (`flags(parser)`) are added the first time it is used: parsed, or its
    help or usage printed (until then: its name and its line in `gpucast --help`); an unknown flag is its error."""

    def __init__(self, *args, flags: Callable[[argparse.ArgumentParser], None] | None = None, **kw):
        super().__init__(*args, **kw)
        self._flags = flags

    def filled(self) -> _Command:
        """This command with its flags added (once)."""
        if self._flags is not None:
            flags, self._flags = self._flags, None
            flags(self)
        return self

    def parse_known_args(self, args=None, namespace=None):  # an unknown flag: this command's usage, not the top's
        parsed, extra = super(_Command, self.filled()).parse_known_args(args, namespace)
        return (parsed, extra) if not extra else self.error(f"unrecognized arguments: {' '.join(extra)}")

    def format_usage(self) -> str:
        return super(_Command, self.filled()).format_usage()

    def format_help(self) -> str:
        return super(_Command, self.filled()).format_help()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpucast")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """`--version`: the installed distribution's version, looked up only when asked (importlib.metadata: ~50 ms)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        parser._print_message(f"gpucast {_version()}\n", sys.stdout)
        parser.exit()


def build_parser(lazy: bool = False) -> argparse.ArgumentParser:
    """The whole tree; `lazy`: each command's flags added when it is used (`_Command`), as the console script runs."""
    p = argparse.ArgumentParser(prog="gpucast", description=DESCRIPTION, epilog=EXIT_CODES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version, help="show program's version number and exit")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Command)
    for name, help_, flags in COMMANDS:
        command = sub.add_parser(name, help=help_, flags=flags)
        if not lazy:
            _fill_all(command.filled())
    return p


def _fill_all(parser: argparse.ArgumentParser) -> None:
    """Every command below `parser` (`import slurm`, `import mlflow`) with its flags added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                _fill_all(command.filled() if isinstance(command, _Command) else command)


# Data: getting logs in and looking at the warehouse.
def _simulate_flags(s: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.pipeline import _simulate
    from gpucast.tasks.simulate import FORMATS, SimConfig

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


def _ingest_flags(i: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.pipeline import _ingest, _ingest_done, _ingest_early
    from gpucast.tasks.ingest import DEFAULT_CHUNK_ROWS

    i.add_argument("paths", nargs="*", help="files, folders or globs; none means $GPUCAST_HOME/inbox")
    i.add_argument("--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS, help="rows per chunk (bounds memory)")
    i.add_argument("--mapping", metavar="FILE", help="a YAML mapping file for an export in other names and units: "
                   "source columns to contract fields, units, value maps, constants (docs/sources.md)")
    i.set_defaults(func=_ingest, before_prefect=_ingest_early, after_command=_ingest_done)  # (pipeline.py, process.py)


def _status_flags(st: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.query import STATUS_API_TIMEOUT_S, _status

    st.add_argument("--limit", type=int, default=10)
    st.add_argument("--flows", action=argparse.BooleanOptionalAction, default=None,
                    help="recent Prefect flow runs too (default: when a Prefect API is configured, PREFECT_API_URL, "
                         f"asked with a {STATUS_API_TIMEOUT_S:.0f} s timeout; --flows without one starts a temporary "
                         "server, about 20 s); --no-flows: only the warehouse")
    st.set_defaults(func=_status)


def _sql_flags(q: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.query import SQL_MAX_ROWS, _sql

    q.add_argument("query")
    q.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="table (at most --max-rows rows), csv or json (every row)")
    q.add_argument("--max-rows", type=int, default=SQL_MAX_ROWS,
                   help=f"rows a table shows (default {SQL_MAX_ROWS:,}; 0: all); the row count is always printed")
    q.set_defaults(func=_sql)


def _restore_flags(r: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.ops import _restore

    r.set_defaults(func=_restore)


def _import_flags(p: argparse.ArgumentParser) -> None:
    """import slurm, import mlflow: a scheduler's and a tracker's own records."""
    from gpucast.flows.cli.pipeline import _import_mlflow, _import_slurm

    im = p.add_subparsers(dest="source", required=True, parser_class=argparse.ArgumentParser)
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


# Models: train, report, score, backtest.
def _train_flags(t: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.pipeline import _train

    d = _train_defaults()
    t.add_argument("--target", help="comma-separated targets (default: all three)")
    _training_flags(t)
    t.add_argument("--seed", type=int, default=None, help=f"base seed of the splits (default {d.seed})")
    t.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    t.add_argument("--max-rows", type=int, default=None,
                   help=f"train on at most this many of the most recent COMPLETED jobs (default {d.max_rows:,}; "
                        "0: all)")
    t.set_defaults(func=_train)


def _report_flags(r: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.query import _report

    r.add_argument("--out", default=None, help="folder (default: $GPUCAST_HOME/reports/<run>)")
    r.add_argument("--run", default=None, help="train run id (default: the latest successful one)")
    r.set_defaults(func=_report)


def _score_flags(sc: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.pipeline import _score
    from gpucast.tasks.learn.score import DEFAULT_BATCH_ROWS

    _setting_flag(sc, "--oom-gpu-mem-gb", "GPU memory oom_risk is judged against for a job whose GPU is unknown")
    _split_flag(sc, "--gpu-mem-gb")
    sc.add_argument("--batch-rows", type=int, default=DEFAULT_BATCH_ROWS, help="rows per scoring batch (bounds memory)")
    sc.add_argument("--device", default=None, help="cuda or cpu for the Transformer-BiGRU")
    sc.add_argument("--as-of", default=None, help="the time forecasts are stamped with (default now; for backfills)")
    sc.set_defaults(func=_score)


def _backtest_flags(b: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.query import _backtest

    _setting_flag(b, "--backtest-days", "the window: jobs completed in the last N days of the logs", int, metavar="N")
    b.set_defaults(func=_backtest)


# The nightly chain and the demo.
def _nightly_command_flags(n: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.pipeline import _nightly

    n.add_argument("paths", nargs="*", help="files, folders or globs; none means new files in $GPUCAST_HOME/inbox")
    _nightly_flags(n)
    n.add_argument("--no-train", action="store_true", help="score with the current champions, do not retrain")
    n.add_argument("--as-of", default=None, help="the time forecasts are stamped with (default now; for backfills)")
    n.set_defaults(func=_nightly)


def _demo_flags(d: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.pipeline import DEMO, DEMO_EPOCHS, DEMO_PRESET, DEMO_REPEATS, _demo

    _days_flag(d, "--history-days", DEMO.days, "days of simulated history before night 1")
    d.add_argument("--jobs-per-day", type=int, default=DEMO.jobs_per_day)
    d.add_argument("--pending-fraction", type=float, default=DEMO.pending_fraction)
    d.add_argument("--dirty-fraction", type=float, default=DEMO.dirty_fraction)
    d.add_argument("--seed", type=int, default=DEMO.seed)
    _nightly_flags(d, repeats=DEMO_REPEATS, epochs=DEMO_EPOCHS, preset=DEMO_PRESET)
    d.add_argument("--no-train", action=_Refused, why="the demo trains on its first night, to have champions to "
                   "score with; `gpucast nightly --no-train` scores with the current ones")
    d.set_defaults(func=_demo)


# What planners act on: plan, demand, site.
def _plan_flags(pl_: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.planning import _plan

    _setting_flag(pl_, "--plan-days", "days planned from the latest forecasts' day", int, metavar="N")
    pl_.add_argument("--gpu-types", default=None, help="comma-separated catalogue GPU types to plan on (default: the inventory's)")
    pl_.add_argument("--scenario", action="append", default=None, metavar="FILE",
                     help="a what-if scenario file (YAML; docs/planners.md 'What if'), planned beside the plan; repeatable")
    _setting_flag(pl_, "--default-gpu-mem-gb", "GPU memory a queue without an inventory is planned on")
    _split_flag(pl_, "--gpu-mem-gb")
    pl_.set_defaults(func=_plan)


def _demand_flags(de: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.planning import _demand

    _setting_flag(de, "--plan-days", "days forecast after the last full day of history", int, metavar="N")
    de.set_defaults(func=_demand)


def _site_flags(si: argparse.ArgumentParser) -> None:
    from gpucast.flows.cli.planning import _site

    si.add_argument("--out", default=None, help="folder (default: $GPUCAST_HOME/site)")
    si.set_defaults(func=_site)


# Every command, in the order `gpucast --help` lists them: (name, its line there, the function adding its flags).
COMMANDS: tuple[tuple[str, str, Callable[[argparse.ArgumentParser], None]], ...] = (
    ("simulate", "write simulated job logs", _simulate_flags),
    ("ingest", "ingest job-log files, folders or globs (default: new inbox files)", _ingest_flags),
    ("import", "import jobs from a scheduler's or a tracker's own records (slurm, mlflow)", _import_flags),
    ("status", "recent runs (ingest, train, score, flows), failures and their errors", _status_flags),
    ("sql", "run a read-only SQL query on the planners' copy of the warehouse", _sql_flags),
    ("restore", "put back the previous published copy (published.prev.duckdb) when the current one is broken or wrong",
     _restore_flags),
    ("train", "retrain every model, compare them, pick a champion per target", _train_flags),
    ("report", "Markdown table and charts of the latest (or a given) train run", _report_flags),
    ("score", "forecast every PENDING job (P10/P50/P90 per target) with the champions", _score_flags),
    ("backtest", "compare the jobs that completed since they were forecast with their forecasts", _backtest_flags),
    ("nightly", NIGHTLY_CHAIN, _nightly_command_flags),
    ("demo", "simulate 8 weeks of logs and run the nightly flow on them (CPU, minutes)", _demo_flags),
    ("plan", "GPUs needed per day, queue and GPU type at P50/P90 vs owned (capacity_plan)", _plan_flags),
    ("demand", "forecast daily GPU-hours per queue and GPU type (P10/P50/P90) and backtest it", _demand_flags),
    ("site", "write the planners' page (self-contained HTML) from the published copy", _site_flags),
)
