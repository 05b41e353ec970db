"""`gpucast`: the command line for data engineers, planners and on-call staff.

This module only parses, calls and prints. Defaults shown in `--help` come from the settings table
(`flows/settings.py`) and the training options (`tasks/learn/train.py`); the environment is read
after parsing, so `--help` works whatever it holds, and a bad value ends with its variable's name.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
from datetime import date
from pathlib import Path
from typing import NoReturn

from gpucast.expectations.results import IngestResult, NightResult
from gpucast.flows import children
from gpucast.flows.environment import configure, configured_prefect_api, prefect_api_in_use
from gpucast.flows.nightly_steps import NIGHTLY_CHAIN
from gpucast.flows.settings import RUNNERS, SPEC_BY_FIELD, Settings
from gpucast.tasks.ingest import DEFAULT_CHUNK_ROWS
from gpucast.tasks.learn.features import FEATURE_SETS
from gpucast.tasks.learn.models.presets import PRESET_NAMES
from gpucast.tasks.learn.score import DEFAULT_BATCH_ROWS
from gpucast.tasks.learn.train import TrainOptions
from gpucast.tasks.simulate import FORMATS, Rhythm, SimConfig
from gpucast.warehouse.errors import environment_error, printable, storage_error

# Flags that override a setting: flag -> setting name. Their defaults are the settings' own.
SETTING_FLAGS = {"--gpu-mem-gb": "gpu_mem_gb", "--max-reject-fraction": "max_reject_fraction",
                 "--runner": "train_runner", "--dask-address": "dask_address"}
# Flags of train options whose default is a setting (filled in by the train flow, `flows/train.py`
# `resolve`): flag -> the TrainOptions field, which has the setting's name.
TRAIN_SETTING_FLAGS = {"--nn-max-minutes": "nn_max_minutes", "--night-budget-minutes": "night_budget_minutes"}
# Older spellings a flag still answers to (scripts and deployments that use them keep working).
FLAG_ALIASES = {"--night-budget-minutes": ("--budget-minutes",)}
TRAIN_DEFAULTS = TrainOptions()
# the demo's simulated history: 8 weeks with a rhythm (weekly seasonality to learn), about as many rows as the flat week
# of 500 jobs it had, in the past (ingest refuses times after its clock): Friday 2026-09-04 to Thursday 2026-10-29, so
# night 1's last day is a weekday (the most pending jobs for night 2, Friday, to start and the backtest to check)
# The demo's history: 8 weeks at 80 jobs a weekday (about the rows of the flat week it had). Half of each day's jobs
# wait a day and 90% of those start then, so night 2 completes ~36 of night 1's queued jobs: enough (>= 30) for
# the champion gate's backtest to judge on jobs completed since they were forecast, not on validation alone.
DEMO = SimConfig(days=56, jobs_per_day=80, pending_fraction=0.5, dirty_fraction=0.02, rhythm=Rhythm(),
                 start=date(2026, 9, 4), start_next_day=0.9)
ML_MODULES = {"torch", "sklearn", "xgboost", "lightgbm", "catboost", "crepes", "skops"}  # the `ml` extra
STATUS_API_TIMEOUT_S = 5.0  # `gpucast status` waits this long per request for a configured Prefect API
SQL_MAX_ROWS = 1000  # rows `gpucast sql` prints as a table unless told otherwise
# The demo's training (issue 31, item 5: two nights within 5 minutes on 2 cores): 2 repeats, the fewest that give
# the champion rule a standard error; the network's `tuned` preset (4-5x faster an epoch than `paper` on the demo's
# rows, measured: docs/benchmarks.md "The demo's time"), capped at 12 epochs as `paper` was
DEMO_REPEATS, DEMO_EPOCHS, DEMO_PRESET = 2, 12, "tuned"


def settings_from(args: argparse.Namespace) -> Settings:
    """The environment's settings with this command's flags on top (errors name the flag)."""
    values = {field: getattr(args, field, None) for field in SETTING_FLAGS.values()}
    return Settings.from_env().override({f: flag for flag, f in SETTING_FLAGS.items()}, **values)


def train_options(args: argparse.Namespace) -> TrainOptions:
    """`TrainOptions` from the flags given (the rest keep their defaults); errors name the flag."""
    import pydantic

    given = {k: getattr(args, k) for k in TrainOptions.model_fields if getattr(args, k, None) is not None}
    for field, flag in (("targets", "target"), ("models", "models")):
        given.pop(field, None)
        if names := _csv(getattr(args, flag, None)):
            given[field] = names
    if given.get("max_rows") == 0:
        given["max_rows"] = None  # --max-rows 0: every labelled job
    try:
        return TrainOptions(**given)
    except pydantic.ValidationError as exc:
        flags = {"targets": "--target"}
        raise ValueError("; ".join(f"{flags.get(str(e['loc'][0]), '--' + str(e['loc'][0]).replace('_', '-'))}: "
                                   f"{e['msg'].removeprefix('Value error, ')}" for e in exc.errors())) from None


def _csv(text: str | None) -> tuple[str, ...] | None:
    return tuple(x.strip() for x in text.split(",") if x.strip()) if text else None


# Commands --------------------------------------------------------------------------------------

def _require_ml() -> None:
    """Fail before any flow starts when the `ml` extra is missing (main() turns it into exit 5 and one line)."""
    import importlib.util

    for name in sorted(ML_MODULES):
        try:
            found = importlib.util.find_spec(name) is not None
        except ValueError:  # a module set to None in sys.modules
            found = False
        if not found:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _simulate(args: argparse.Namespace) -> int:
    from gpucast.tasks.simulate import write_logs

    rhythm = None if args.flat else Rhythm(weekend_factor=args.weekend_factor, trend_per_week=args.trend_per_week,
                                           burst_chance=args.burst_chance, burst_factor=args.burst_factor)
    cfg = SimConfig(days=args.history_days, jobs_per_day=args.jobs_per_day, pending_fraction=args.pending_fraction,
                    dirty_fraction=args.dirty_fraction, seed=args.seed, fmt=args.format, rhythm=rhythm)
    paths = write_logs(Path(args.out), cfg)
    print(f"wrote {len(paths)} file(s) to {args.out}")
    return 0


def _warm_up_validation() -> None:
    """Great Expectations' import and context (3-4 s) in a thread, for a command about to start a flow: the flow's
    first seconds are Prefect's temporary server starting, mostly a wait on another process."""
    from gpucast.expectations.validate import warm_up

    def quietly() -> None:  # a failure here (GX missing, say) comes back where validation runs, as one line
        with contextlib.suppress(Exception):
            warm_up()

    threading.Thread(target=quietly, name="gx-warm-up").start()


def _ingest(args: argparse.Namespace) -> int:
    from gpucast.flows.ingest import ingest_job_logs, mapping_source
    from gpucast.tasks.ingest.staging import discover
    from gpucast.tasks.sources.mapping import check_files

    if source := mapping_source(args.mapping, args.paths):  # a bad mapping or a file it does not fit: one line, before any run
        check_files(source, discover(args.paths))
    _warm_up_validation()
    settings = settings_from(args)
    s = ingest_job_logs(paths=args.paths or None, chunk_rows=args.chunk_rows, mapping=args.mapping,
                        storage=settings.storage, quality=settings.quality)
    print(f"run {s.run_id}: {s.files} file(s), {s.rows_read:,} rows read: {s.rows_loaded:,} loaded, "
          f"{s.rows_rejected:,} rejected, {s.rows_duplicate:,} duplicate; {s.files_rejected} file(s) rejected")
    if s.rows_rejected or s.files_rejected:
        print("see why: gpucast sql \"SELECT source_file, source_row, reason_text FROM rejected_job_logs "
              f"WHERE ingest_run_id = '{s.run_id}' LIMIT 20\"")
    return 0


def _import_slurm(args: argparse.Namespace) -> int:
    from gpucast.flows.imports import MlflowJoin, import_slurm

    if bool(args.file) == bool(args.sacct):
        raise ValueError("give the sacct --parsable2 output to import (FILE), or --sacct to run sacct; not both")
    if args.since and not args.sacct:
        raise ValueError("--since is for --sacct (a FILE holds the jobs its export chose)")
    if args.mlflow_experiment and not args.mlflow_uri:
        raise ValueError("--mlflow-experiment needs --mlflow-uri (the tracking URI of the runs the jobs ran)")
    join = MlflowJoin(args.mlflow_uri, tuple(args.mlflow_experiment or ()), args.join_tag) if args.mlflow_uri else None
    done = import_slurm(args.file, since=args.since, mapping=args.mapping, settings=settings_from(args), join=join)
    if join:
        print(f"mlflow {join.tracking_uri}: {done.joined:,} job(s) joined to their run by the tag {join.tag} "
              "(model features from the run's params)")
    p, s = done.parsed, done.run
    print(f"slurm: {p.lines:,} sacct line(s): {p.jobs.height:,} GPU job(s), {p.steps - p.orphan_steps:,} step(s) folded "
          f"into their job, {len(p.no_gpu):,} job(s) without GPUs not loaded"
          + (f", {p.orphan_steps:,} step(s) without their job line not loaded" if p.orphan_steps else "")
          + (f", {p.superseded:,} line(s) superseded by a later record of their job" if p.superseded else "")
          + f"; {len(p.no_gpu_mem):,} finished job(s) without GPU memory (loaded without peak_gpu_mem_gb)"
          + (f"; {len(p.elapsed_from_times):,} finished job(s) without a usable Elapsed (missing, zero or unreadable): "
             "run time from End - Start" if p.elapsed_from_times else ""))
    return _imported_run(s)


def _imported_run(s: IngestResult) -> int:
    """An import's ingest run in one line, and where its rejected rows are."""
    print(f"run {s.run_id}: {s.rows_read:,} rows read: {s.rows_loaded:,} loaded, "
          f"{s.rows_rejected:,} rejected, {s.rows_duplicate:,} duplicate")
    if s.rows_rejected:
        print("see why: gpucast sql \"SELECT job_id, reason_text FROM rejected_job_logs "
              f"WHERE ingest_run_id = '{s.run_id}' LIMIT 20\"")
    return 0


def _import_mlflow(args: argparse.Namespace) -> int:
    from gpucast.flows.imports import import_mlflow

    done = import_mlflow(args.tracking_uri, tuple(args.experiment or ()), since=args.since, mapping=args.mapping,
                         settings=settings_from(args))
    p, s = done.parsed, done.run
    print(f"mlflow {args.tracking_uri}: {len(done.experiments):,} experiment(s), {done.runs_read:,} run(s) new or "
          f"changed: {p.jobs.height:,} job(s), {len(p.not_started):,} run(s) not started (not loaded); "
          f"{len(p.no_gpu_metrics):,} finished run(s) without GPU metrics (loaded without peak_gpu_mem_gb)")
    return _imported_run(s)


def _status(args: argparse.Namespace) -> int:
    from gpucast.flows.report import warehouse_status

    settings = settings_from(args)
    print(warehouse_status(settings.storage, args.limit, settings.quality.backtest_days))
    api = configured_prefect_api()
    if args.flows is None and api is None:
        print("\nPrefect flow runs: skipped (no Prefect API is configured, so runs here use a temporary server; "
              "`gpucast status --flows` starts one to read this machine's run history, about 20 s)")
    elif args.flows is not False:
        from gpucast.flows.status import flow_runs_text

        print()
        print(flow_runs_text(limit=args.limit, timeout_s=STATUS_API_TIMEOUT_S if api else None))
    return 0


def _sql(args: argparse.Namespace) -> int:
    from gpucast.tasks.report.render import query_result_parts
    from gpucast.warehouse.queries import check_table_size, run_sql

    settings = settings_from(args)
    max_rows = args.max_rows if args.format == "table" and args.max_rows > 0 else None
    storage = settings.storage
    df, total = run_sql(storage.query_path, args.query, settings.sql, storage.sql_temp_dir, max_rows)
    if args.format == "table":
        check_table_size(df, settings.sql)
    for part in query_result_parts(df, args.format, total):  # a piece at a time: never the whole text at once
        sys.stdout.write(part)
    return 0


def _restore(args: argparse.Namespace) -> int:
    from gpucast.warehouse.publish import restore_previous

    print(f"restored the previous published copy: {restore_previous(settings_from(args).storage)}")
    return 0


def _train(args: argparse.Namespace) -> int:
    _require_ml()
    from gpucast.flows.train import train_models

    s = settings_from(args)
    out = train_models(train_options(args), storage=s.storage, cluster=s.cluster, quality=s.quality, training=s.training,
                       tracing=s.tracing)
    if out.note:
        print(f"note: {out.note}")
    print(f"train run {out.train_run_id} on {out.device}, fits on {out.fits_on}:")
    for t in out.targets:
        what = f"skipped ({t.skipped})" if t.skipped else f"champion {t.champion} ({t.rows:,} labelled jobs)"
        cut = f"; {t.skipped_fits} fit(s) skipped (table skipped_fits)" if t.skipped_fits else ""
        print(f"  {t.target}: {what}{cut}")
    print("see: gpucast report")
    return 0


def _report(args: argparse.Namespace) -> int:
    _require_ml()
    from gpucast.flows.report import write_train_report

    text, written = write_train_report(settings_from(args).storage, args.run, Path(args.out) if args.out else None)
    print(text)
    print("\nwrote " + ", ".join(str(p) for p in written))
    return 0


def _score(args: argparse.Namespace) -> int:
    _require_ml()
    from gpucast.flows.score import score_pending
    from gpucast.tasks.learn.score import warm_up

    warm_up()  # while the temporary Prefect server starts (flows/children.py)
    s = settings_from(args)
    out = score_pending(batch_rows=args.batch_rows, device=args.device, as_of=_as_of(args.as_of), storage=s.storage,
                        planning=s.planning, cluster=s.cluster, quality=s.quality, tracing=s.tracing)
    print(f"score run {out.score_run_id}: {out.forecasts:,} forecasts for {out.pending_jobs:,} pending jobs "
          f"({', '.join(f'{t}: {m}' for t, m in out.champions.items())})")
    print('see: gpucast sql "SELECT * FROM capacity_daily ORDER BY ALL"')
    return 0


def _backtest(args: argparse.Namespace) -> int:
    from gpucast.flows.report import backtest_text

    settings = settings_from(args).override({"backtest_days": "--window-days"}, backtest_days=args.window_days)
    print(backtest_text(settings.storage, settings.quality.backtest_days))
    return 0


def _as_of(text: str | None):
    from datetime import UTC, datetime

    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--as-of={text!r} is not an ISO 8601 time (e.g. 2026-11-08T02:00:00Z)") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _run_nightly(args: argparse.Namespace, settings: Settings, as_of=None) -> NightResult:
    from gpucast.flows.nightly import nightly

    return nightly(paths=args.paths or None, options=train_options(args), retrain=not args.no_train, settings=settings,
                   as_of=as_of or _as_of(getattr(args, "as_of", None)))


def _nightly(args: argparse.Namespace) -> int:
    _require_ml()
    from gpucast.flows.report import capacity_summary

    settings = settings_from(args)
    _warm_up_validation()
    out = _run_nightly(args, settings)
    print(out.report)
    print(capacity_summary(settings.storage), end="")
    return 0


def _demo(args: argparse.Namespace) -> int:
    _require_ml()
    from gpucast.flows.demo import run_demo
    from gpucast.flows.report import capacity_summary
    from gpucast.tasks.report.render import capacity_plan_lines, page_line

    settings = settings_from(args)
    sim = SimConfig(days=args.history_days, jobs_per_day=args.jobs_per_day, dirty_fraction=args.dirty_fraction,
                    pending_fraction=args.pending_fraction, seed=args.seed, rhythm=DEMO.rhythm, start=DEMO.start,
                    start_next_day=DEMO.start_next_day)
    _warm_up_validation()
    nights = run_demo(settings, sim, train_options(args))
    for night, result in enumerate(nights, 1):
        ing, sc, back, train = result.ingest, result.score, result.backtest, result.train
        decisions = ", ".join(f"{o.target} {o.decision}" for o in train.targets if o.decision)
        trained = train.where + (f" (fits on {train.fits_on})" if train.fits_on else "")
        print(f"\nnight {night}: ingested {ing.rows_read:,} rows ({ing.rows_loaded:,} loaded, {ing.rows_rejected:,} "
              f"rejected, {ing.rows_duplicate:,} duplicate); backtest: {back.forecast:,} completions checked against "
              f"their forecasts, {back.not_forecast:,} not forecast; trained {trained}"
              + (f" (gate: {decisions})" if decisions else "")
              + f"; {sc.forecasts:,} forecasts for {sc.pending_jobs:,} pending jobs, {sc.ood_forecasts:,} out of "
              "distribution")
        print(f"night {night} took {sum(result.seconds.values()):.0f} s: "
              + ", ".join(f"{step} {sec:.0f} s" for step, sec in result.seconds.items()))
    last = nights[-1]  # its plan as the night's report shows it, from the plan's own result
    plan = [*capacity_plan_lines(last.plan), *(["", page_line(last.page)] if last.page else [])] if last.plan else []
    print("\n" + "\n".join(plan) if plan else "")
    print(capacity_summary(settings.storage), end="")
    print(f"""
Where to look next:
  {nights[-1].page}   # the planners' page: open it in a browser
  gpucast sql "SELECT * FROM current_capacity_plan ORDER BY ALL"   # GPUs needed vs owned per day, queue, GPU type
  gpucast sql "SELECT * FROM capacity_daily ORDER BY ALL"          # per day and queue
  gpucast sql "SELECT * FROM pending_forecasts WHERE oom_risk"       # jobs that will not fit
  gpucast sql "SELECT * FROM pending_forecasts WHERE ood"            # jobs unlike anything trained on, and why
  gpucast sql "SELECT * FROM model_leaderboard ORDER BY target, rank"
  gpucast backtest                                                   # last night's forecasts against what ran
  gpucast status                                                     # runs, failures, the champions' gate
  gpucast report                                                     # charts of the training run
  planners' database: {settings.storage.published_path} (read-only copy, replaced atomically each run)""")
    return 0


# The parser -------------------------------------------------------------------------------------

def _setting_flag(p: argparse.ArgumentParser, flag: str, what: str, kind: type = float, **kw) -> None:
    """A flag whose default is a setting (a setting itself, or a train option the setting defaults)."""
    spec = SPEC_BY_FIELD[SETTING_FLAGS.get(flag) or TRAIN_SETTING_FLAGS[flag]]
    p.add_argument(flag, *FLAG_ALIASES.get(flag, ()), dest=spec.field, type=kind, default=None,
                   help=f"{what} (env {spec.env}, default {spec.default or 'none'})", **kw)


def _days_flag(p: argparse.ArgumentParser, flag: str, default: int | None, what: str) -> None:
    """A count of days, named for what it counts on this command. `--days`, the name every such flag once had,
    still answers (hidden from the help), so scripts that use it keep working."""
    dest = flag.removeprefix("--").replace("-", "_")
    p.add_argument(flag, type=int, default=default, metavar="N", help=what + (f" (default {default})" if default else ""))
    p.add_argument("--days", type=int, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _training_flags(p: argparse.ArgumentParser, repeats: int | None = None, epochs: int | None = None,
                    preset: str | None = None) -> None:
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
    _setting_flag(p, "--runner", "where the fits run: dask (a local Dask cluster, or --dask-address's) or local "
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
    _setting_flag(p, "--gpu-mem-gb", "GPU memory oom_risk is judged against")
    _setting_flag(p, "--max-reject-fraction", "fail the run above this share of rejected rows")
    p.add_argument("--no-train", action="store_true", help="score with the current champions, do not retrain")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpucast")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpucast", description=__doc__.splitlines()[0], epilog=EXIT_CODES,
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
    _setting_flag(sc, "--gpu-mem-gb", "GPU memory oom_risk is judged against")
    sc.add_argument("--batch-rows", type=int, default=DEFAULT_BATCH_ROWS, help="rows per scoring batch (bounds memory)")
    sc.add_argument("--device", default=None, help="cuda or cpu for the Transformer-BiGRU")
    sc.add_argument("--as-of", default=None, help="the time forecasts are stamped with (default now; for backfills)")
    sc.set_defaults(func=_score)

    b = sub.add_parser("backtest", help="compare the jobs that completed since they were forecast with their forecasts")
    _days_flag(b, "--window-days", None, "the window: jobs completed in the last N days of the logs (env "
                                          f"GPUCAST_BACKTEST_DAYS, default {SPEC_BY_FIELD['backtest_days'].default})")
    b.set_defaults(func=_backtest)


def _plan(args: argparse.Namespace) -> int:
    from gpucast.flows.plan import capacity_plan
    from gpucast.tasks.plan.arrivals import by_day
    from gpucast.tasks.plan.capacity import first_day
    from gpucast.tasks.report.render import text_table

    s = settings_from(args).override({"plan_days": "--horizon-days"}, plan_days=args.horizon_days)
    out = capacity_plan(gpu_types=_csv(args.gpu_types), storage=s.storage, planning=s.planning)
    rows = out.rows
    print(text_table(first_day(rows).select("day", "queue", "gpu_type", "jobs", "gpus_needed_p50", "gpus_needed_p90",
                                  "lower_bound_p90", "gpus_owned", "shortfall_p90")))
    print("every day, all queues: GPUs for the queued jobs (known) + the demand forecast's arrivals (expected)")
    print(text_table(by_day(rows)))
    print("whole plan: gpucast sql \"SELECT * FROM current_capacity_plan ORDER BY ALL\"; jobs that fit nowhere: "
          "current_unplaceable_jobs; co-location candidates: current_colocation")
    if out.note:  # what the plan lacks (no demand forecast, or one whose days miss the plan's): last, not lost
        print(f"note: {out.note}")
    return 0


def _demand(args: argparse.Namespace) -> int:
    from gpucast.flows.demand import demand_forecast
    from gpucast.tasks.demand.forecast import summary
    from gpucast.tasks.report.render import text_table

    s = settings_from(args).override({"plan_days": "--horizon-days"}, plan_days=args.horizon_days)
    out = demand_forecast(storage=s.storage, planning=s.planning)
    print(text_table(summary(out.forecast).select("queue", "gpu_type", "day1_p10", "day1_p50", "day1_p90", "all_days_p50", "jobs_p50",
                                  "method", "jobs_method", "fallback_reason")))
    print(f"GPU-hours a day from {out.history_end} + 1 (day1) and over {out.days} day(s) (all_days); every day: "
          "gpucast sql \"SELECT * FROM current_demand_forecast ORDER BY ALL\"; how good it is: "
          "gpucast sql \"SELECT * FROM demand_backtest_summary WHERE queue IS NULL ORDER BY horizon\"")
    return 0


def _site(args: argparse.Namespace) -> int:
    from gpucast.flows.plan import write_site

    print(f"wrote {write_site(settings_from(args).storage, Path(args.out) if args.out else None, artifact=False)}")
    return 0


def _plan_commands(sub) -> None:
    """plan, demand, site: what planners act on."""
    pl_ = sub.add_parser("plan", help="GPUs needed per day, queue and GPU type at P50/P90 vs owned (capacity_plan)")
    _days_flag(pl_, "--horizon-days", None, "days planned from the latest forecasts' day (env GPUCAST_PLAN_DAYS, "
                                            f"default {SPEC_BY_FIELD['plan_days'].default})")
    pl_.add_argument("--gpu-types", default=None, help="comma-separated catalogue GPU types to plan on (default: the inventory's)")
    _setting_flag(pl_, "--gpu-mem-gb", "GPU memory a queue without an inventory is planned on")
    pl_.set_defaults(func=_plan)
    de = sub.add_parser("demand", help="forecast daily GPU-hours per queue and GPU type (P10/P50/P90) and backtest it")
    _days_flag(de, "--horizon-days", None, "days forecast after the last full day of history (env GPUCAST_PLAN_DAYS, "
                                           f"default {SPEC_BY_FIELD['plan_days'].default})")
    de.set_defaults(func=_demand)
    si = sub.add_parser("site", help="write the planners' page (self-contained HTML) from the published copy")
    si.add_argument("--out", default=None, help="folder (default: $GPUCAST_HOME/site)")
    si.set_defaults(func=_site)


def _nightly_commands(sub) -> None:
    """nightly, demo."""
    n = sub.add_parser("nightly", help=NIGHTLY_CHAIN)
    n.add_argument("paths", nargs="*", help="files, folders or globs; none means new files in $GPUCAST_HOME/inbox")
    _nightly_flags(n)
    n.add_argument("--as-of", default=None, help="the time forecasts are stamped with (default now; for backfills)")
    n.set_defaults(func=_nightly)

    d = sub.add_parser("demo", help="simulate 8 weeks of logs and run the nightly flow on them (CPU, minutes)")
    _days_flag(d, "--history-days", DEMO.days, "days of simulated history before night 1")
    d.add_argument("--jobs-per-day", type=int, default=DEMO.jobs_per_day)
    d.add_argument("--pending-fraction", type=float, default=DEMO.pending_fraction)
    d.add_argument("--dirty-fraction", type=float, default=DEMO.dirty_fraction)
    d.add_argument("--seed", type=int, default=DEMO.seed)
    _nightly_flags(d, repeats=DEMO_REPEATS, epochs=DEMO_EPOCHS, preset=DEMO_PRESET)
    d.set_defaults(func=_demo)


EXIT_CODES = """exit codes:
  0  success
  1  an unexpected error (a traceback follows: please report it)
  2  bad input: a missing file, a bad setting or flag, an SQL error or a statement that writes, a query past
     GPUCAST_SQL_TIMEOUT_S or a result past GPUCAST_SQL_MEMORY
  3  busy: another gpucast writer or run holds the warehouse (wait, or see `gpucast status`)
  4  failed validation: too many rejected rows tonight (rows are in rejected_job_logs)
  5  environment: disk full, permission denied, read-only file system, or a missing install extra
  6  not published: the warehouse could not be read back whole; planners keep their copy (docs/operations.md)
  143  stopped by SIGTERM (the run is recorded as failed; rerunning is safe)"""

class Terminated(SystemExit):
    """SIGTERM (a scheduler's stop, `kill`): unwinds like an error, so runs are recorded as failed,
    locks are released and Prefect's temporary API server is stopped (its atexit hook runs)."""

    def __str__(self) -> str:
        return f"stopped by SIGTERM (exit code {self.code})"


STOP_DEADLINE_S = 8.0  # after SIGTERM, exit by then even if unwinding has not finished (SIGKILL often follows at 10 s)


def _terminate(signum: int, frame) -> None:
    deadline = threading.Timer(STOP_DEADLINE_S, _stop_now, (128 + signum,))
    deadline.daemon = True
    deadline.start()
    raise Terminated(128 + signum)


def _stop_now(code: int) -> None:
    """The unwinding after SIGTERM took too long (closing a local Dask cluster alone took 4-6 s on 2 busy
    cores): exit now. The run stays `running` until the next run marks it crashed, as after a SIGKILL;
    Prefect's server and Dask's workers notice their parent is gone and stop (flows/children.py)."""
    print(f"gpucast: still stopping {STOP_DEADLINE_S:g} s after SIGTERM; exiting now (the next run marks this "
          "one crashed)", file=sys.stderr, flush=True)
    os._exit(code)


def stopped_line(command: str, stop: BaseException) -> str:
    """The one line a SIGTERM ends with: the step and run it stopped (the notes `note_stop` left on the way out,
    on this exception or Prefect's it replaced) and what planners have meanwhile."""
    notes, seen = [], stop
    while seen is not None:
        notes += [n for n in getattr(seen, "__notes__", ()) if n not in notes]
        seen = seen.__context__
    steps = [n for n in notes if n.startswith("step ")]  # the nightly's (outermost last)
    runs = [n for n in notes if not n.startswith("step ")]
    where = " at " + steps[-1] if steps else ""
    if runs:
        where += f" ({', '.join(runs)}: recorded as failed)"
    kept = ("the night was published before it stopped; only its page was not rewritten" if steps == ["step page"]
            else "nothing of it was published: planners keep the previous copy")
    return printable(f"gpucast {command}: stopped by SIGTERM{where}; {kept}; rerunning is safe")


def _exit_stopped(stop: Terminated) -> NoReturn:
    """The end of a SIGTERM: the unwinding has recorded the run, released the locks and closed the Dask
    cluster; the atexit hooks stop Prefect's temporary server. Then exit without the interpreter's
    teardown, which took 3-4 s after a night's imports (torch, Dask) on 2 busy cores: deployments
    send SIGKILL 10 s after SIGTERM (issue 27). A second SIGTERM meanwhile is ignored."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(stop.code)
FLOW_COMMANDS = {"ingest", "import", "train", "score", "nightly", "demo", "plan", "demand"}  # the commands that run Prefect flows


class ExpectedErrors(logging.Filter):
    """On the console: drop Prefect's own ERROR record of a failed flow or task run ("Encountered exception
    during execution", "Task run failed with exception") when its error is one `main` answers with a clear
    exit code (2-6) and one line, so the person sees that line and no traceback. The run's state keeps the
    error (`gpucast status`, the Prefect UI), and Prefect's API handler, on the run loggers themselves, has
    already sent the record before it reaches the console. An unexpected error (exit 1) keeps its traceback."""

    LOGGERS = ("prefect.flow_runs", "prefect.task_runs")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name not in self.LOGGERS or not record.exc_info or record.exc_info[1] is None:
            return True
        return _exit_code(record.exc_info[1])[0] == 1


def quiet_expected_errors() -> None:
    """Install `ExpectedErrors` on the root logger's handlers (Prefect's console handler lives there; the run
    loggers propagate to it). Sets up Prefect's logging first (as its first flow would); idempotent."""
    from prefect.logging.configuration import ensure_logging_setup

    ensure_logging_setup()

    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, ExpectedErrors) for f in handler.filters):
            handler.addFilter(ExpectedErrors())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure()  # Prefect's defaults, before any flow module imports Prefect
    server = None
    if args.command in FLOW_COMMANDS or getattr(args, "flows", None):  # (the others never call Prefect's API)
        if prefect_api_in_use() is None:  # start the temporary server now: it starts while we import
            server = children.start()
        quiet_expected_errors()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    try:
        with children.serving(server):
            return args.func(args)
    except Terminated as stop:
        print(stopped_line(args.command, stop), file=sys.stderr, flush=True)
        _exit_stopped(stop)
    except Exception as exc:  # noqa: BLE001  (the last line a person sees must say what failed)
        code, message = _exit_code(exc)
        if code == 1:
            raise
        print(f"gpucast {args.command}: {printable(message)}", file=sys.stderr)  # store names may hold controls
        return code


def _exit_code(exc: BaseException) -> tuple[int, str]:
    """(exit code, the one line to print) for an error; 1 for one nobody foresaw (re-raised)."""
    from gpucast.flows.errors import SourceUnavailable, ValidationFailed
    from gpucast.warehouse.db import WarehouseBusy
    from gpucast.warehouse.publish import PublishFailed
    from gpucast.warehouse.queries import SqlTimeout, SqlTooLarge

    if isinstance(exc, ModuleNotFoundError) and exc.name and exc.name.split(".")[0] == "mlflow":
        return 5, (f"this command needs the `mlflow` extra ({exc.name} is not installed): "
                   "pip install 'gpucast[mlflow]'")
    if isinstance(exc, ModuleNotFoundError) and exc.name and exc.name.split(".")[0] in ML_MODULES:
        return 5, (f"this command needs the `ml` extra ({exc.name} is not installed): "
                   "pip install 'gpucast[ml]' (or `make setup` in a checkout)")
    if environment := environment_error(exc):
        return 5, environment
    for kind, code in ((ValidationFailed, 4), (WarehouseBusy, 3), (PublishFailed, 6), (SourceUnavailable, 5),
                       ((FileNotFoundError, ValueError, SqlTimeout, SqlTooLarge), 2)):
        if isinstance(exc, kind):
            return code, str(exc)
    if storage := storage_error(exc):  # a failing query, a constraint the input broke
        return 2, storage
    return 1, ""


if __name__ == "__main__":
    sys.exit(main())
