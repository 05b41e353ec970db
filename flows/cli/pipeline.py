"""The commands that run the pipeline's flows on data: simulate, ingest, import, train, score, nightly, demo.

Each parses nothing and exits nowhere: it calls a flow, prints what it did and returns 0 (`process.py` turns an
error into its exit code and one line).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from datetime import date
from pathlib import Path

from gpucast.flows.cli.options import _require_ml, train_options
from gpucast.flows.settings import Settings
from gpucast.records.results import IngestResult, NightResult
from gpucast.tasks.simulate import Rhythm, SimConfig
from gpucast.warehouse.errors import redact

# the demo's simulated history: 8 weeks with a rhythm (weekly seasonality to learn), about as many rows as the flat week
# of 500 jobs it had, in the past (ingest refuses times after its clock): Friday 2026-09-04 to Thursday 2026-10-29, so
# night 1's last day is a weekday (the most pending jobs for night 2, Friday, to start and the backtest to check)
# The demo's history: 8 weeks at 80 jobs a weekday (about the rows of the flat week it had). Half of each day's jobs
# wait a day and 90% of those start then, so night 2 completes ~36 of night 1's queued jobs: enough (>= 30) for
# the champion gate's backtest to judge on jobs completed since they were forecast, not on validation alone.
DEMO = SimConfig(days=56, jobs_per_day=80, pending_fraction=0.5, dirty_fraction=0.02, rhythm=Rhythm(),
                 start=date(2026, 9, 4), start_next_day=0.9)
# The demo's training (issue 31, item 5: two nights within 5 minutes on 2 cores): 2 repeats, the fewest that give
# the champion rule a standard error; the network's `tuned` preset (4-5x faster an epoch than `paper` on the demo's
# rows, measured: docs/benchmarks.md "The demo's time"), capped at 12 epochs as `paper` was
DEMO_REPEATS, DEMO_EPOCHS, DEMO_PRESET = 2, 12, "tuned"


def _simulate(args: argparse.Namespace, settings: None = None) -> int:
    """(Reads no setting: `settings` is None, and a bad GPUCAST_* variable does not stop it.)"""
    from gpucast.tasks.simulate import write_logs

    rhythm = None if args.flat else Rhythm(weekend_factor=args.weekend_factor, trend_per_week=args.trend_per_week,
                                           burst_chance=args.burst_chance, burst_factor=args.burst_factor)
    cfg = SimConfig(days=args.history_days, jobs_per_day=args.jobs_per_day, pending_fraction=args.pending_fraction,
                    dirty_fraction=args.dirty_fraction, seed=args.seed, fmt=args.format, rhythm=rhythm)
    paths = write_logs(Path(args.out), cfg)
    print(f"wrote {len(paths)} file(s) to {args.out}")
    return 0


def _warm_up_validation() -> None:
    """Great Expectations' judge (its import and context, 3-5 CPU-s, in a process of its own) started from a thread,
    for a command about to start a flow: `gpucast ingest` before Prefect's import and server (`_ingest_early`), so a
    small file's validation finds it ready; `nightly` and `demo` before their flows. A command that ends before it
    validates stops the judge (`validate._Worker.close`), not waiting for its build."""
    from gpucast.expectations.validate import warm_up

    def quietly() -> None:  # a failure here (GX missing, say) comes back where validation runs, as one line
        with contextlib.suppress(Exception):
            warm_up()

    threading.Thread(target=quietly, name="gx-warm-up").start()


def _ingest_early(args: argparse.Namespace) -> None:
    """What `gpucast ingest` starts before Prefect's import and the API's check (process.py `before_prefect`): the
    reading of the first file named, if it is staged alone (one file named, or a large one: `staging.batches`) and
    read without a mapping (`staging.start_reading`: its first chunks wait, bounded, for the flow's staging task), then
    GX's judge (`_warm_up_validation`). A path that matches nothing ends the command here (exit 2), before either."""
    from gpucast.tasks.ingest import staging

    if args.chunk_rows < 1:  # (0 crashed deep in the reader: review 72 S2-5)
        raise ValueError(f"--chunk-rows {args.chunk_rows}: rows per chunk must be a whole number >= 1")
    if args.paths and not args.mapping:
        files = staging.discover(args.paths)
        if files and staging.batches(files)[0] == [0]:
            staging.start_reading(files[0], args.chunk_rows)
    _warm_up_validation()


def _ingest_done(args: argparse.Namespace) -> None:
    """What `gpucast ingest` runs on every way out (process.py `after_command`): a reading `_ingest_early` began that
    no staging took (the API check's exit 5, Ctrl-C during Prefect's start, a run that failed first) is stopped, so
    its thread is not inside DuckDB or Polars when the interpreter exits (review 72 S1-1: an abort, exit -6)."""
    if (staging := sys.modules.get("gpucast.tasks.ingest.staging")) is not None:  # nothing to stop if never imported
        staging.stop_reading()


def _ingest(args: argparse.Namespace, settings: Settings) -> int:
    from gpucast.flows.ingest import ingest_job_logs, mapping_source
    from gpucast.tasks.ingest.staging import discover
    from gpucast.tasks.sources.mapping import check_files

    if source := mapping_source(args.mapping, args.paths):  # a bad mapping or a file it does not fit: one line, before any run
        check_files(source, discover(args.paths))
    s = ingest_job_logs(paths=args.paths or None, chunk_rows=args.chunk_rows, mapping=args.mapping,
                        storage=settings.storage, quality=settings.quality)
    print(f"run {s.run_id}: {s.files} file(s), {s.rows_read:,} rows read: {s.rows_loaded:,} loaded, "
          f"{s.rows_rejected:,} rejected, {s.rows_duplicate:,} duplicate; {s.files_rejected} file(s) rejected")
    if s.rows_rejected or s.files_rejected:
        print("see why: gpucast sql \"SELECT source_file, source_row, reason_text FROM rejected_job_logs "
              f"WHERE ingest_run_id = '{s.run_id}' LIMIT 20\"")
    return 0


def _import_slurm(args: argparse.Namespace, settings: Settings) -> int:
    from gpucast.flows.imports import MlflowJoin, import_slurm
    from gpucast.tasks.sources.mlflow import CLUSTER_TAG

    if bool(args.file) == bool(args.sacct):
        raise ValueError("give the sacct --parsable2 output to import (FILE), or --sacct to run sacct; not both")
    if args.since and not args.sacct:
        raise ValueError("--since is for --sacct (a FILE holds the jobs its export chose)")
    if args.mlflow_experiment and not args.mlflow_uri:
        raise ValueError("--mlflow-experiment needs --mlflow-uri (the tracking URI of the runs the jobs ran)")
    join = MlflowJoin(args.mlflow_uri, tuple(args.mlflow_experiment or ()), args.join_tag) if args.mlflow_uri else None
    done = import_slurm(args.file, since=args.since, mapping=args.mapping, settings=settings, join=join)
    if join:
        print(f"mlflow {redact(join.tracking_uri)}: {done.joined:,} job(s) joined to their run by the tag {join.tag} "
              "(model features from the run's params)" + (
                  f"; {done.ambiguous:,} job(s) not joined: other clusters' jobs have their JobID and the run names no "
                  f"cluster (tag the runs {CLUSTER_TAG})" if done.ambiguous else ""))
    p, s = done.parsed, done.run
    print(f"slurm: {p.summary()}")  # what became of every line (tasks/sources/slurm.py)
    return _imported_run(s)


def _imported_run(s: IngestResult) -> int:
    """An import's ingest run in one line, and where its rejected rows are."""
    print(f"run {s.run_id}: {s.rows_read:,} rows read: {s.rows_loaded:,} loaded, "
          f"{s.rows_rejected:,} rejected, {s.rows_duplicate:,} duplicate")
    if s.rows_rejected:
        print("see why: gpucast sql \"SELECT job_id, reason_text FROM rejected_job_logs "
              f"WHERE ingest_run_id = '{s.run_id}' LIMIT 20\"")
    return 0


def _import_mlflow(args: argparse.Namespace, settings: Settings) -> int:
    from gpucast.flows.imports import import_mlflow

    done = import_mlflow(args.tracking_uri, tuple(args.experiment or ()), since=args.since, mapping=args.mapping,
                         settings=settings)
    p, s = done.parsed, done.run
    print(f"mlflow {redact(args.tracking_uri)}: {len(done.experiments):,} experiment(s), {done.runs_read:,} run(s) new or "
          f"changed: {p.jobs.height:,} job(s), {len(p.not_started):,} run(s) not started (not loaded); "
          f"{len(p.no_gpu_metrics):,} finished run(s) without GPU metrics (loaded without peak_gpu_mem_gb)")
    return _imported_run(s)


def _train(args: argparse.Namespace, s: Settings) -> int:
    _require_ml()
    from gpucast.flows.train import train_models

    out = train_models(train_options(args, s), storage=s.storage, cluster=s.cluster, quality=s.quality, tracing=s.tracing)
    if out.note:
        print(f"note: {out.note}")
    print(f"train run {out.train_run_id} on {out.device}, fits on {out.fits_on}:")
    for t in out.targets:
        what = f"skipped ({t.skipped})" if t.skipped else f"champion {t.champion} ({t.rows:,} labelled jobs)"
        cut = f"; {t.skipped_fits} fit(s) skipped (table skipped_fits)" if t.skipped_fits else ""
        priced = f"; fits not run, over the scoring budget: {', '.join(t.priced_out)}" if t.priced_out else ""
        print(f"  {t.target}: {what}{cut}{priced}")
    print("see: gpucast report")
    return 0


def _score(args: argparse.Namespace, s: Settings) -> int:
    _require_ml()
    from gpucast.flows import children
    from gpucast.flows.score import score_pending
    from gpucast.tasks.learn.score import warm_up

    # while the temporary Prefect server starts (flows/children.py); with a running one, skops only if a champion needs it
    warm_up(skops=children.temporary_url() is not None)
    out = score_pending(batch_rows=args.batch_rows, device=args.device, as_of=_as_of(args.as_of), storage=s.storage,
                        planning=s.planning, cluster=s.cluster, quality=s.quality, tracing=s.tracing)
    champions = ", ".join(f"{t}: {m}" for t, m in out.champions.items()) or (  # none: it printed "()" (issue 48)
        "no champion yet: jobs without model features are forecast from the scheduler's history; run `gpucast train` "
        "(or `gpucast nightly`) to forecast jobs with model features")
    print(f"score run {out.score_run_id}: {out.forecasts:,} forecasts for {out.pending_jobs:,} pending jobs ({champions})")
    print('see: gpucast sql "SELECT * FROM capacity_daily ORDER BY ALL"')
    return 0


def _as_of(text: str | None):
    from gpucast.records.times import parse_iso

    if text is None:
        return None
    try:
        return parse_iso(text)  # no zone: UTC
    except ValueError:
        raise ValueError(f"--as-of={text!r} is not an ISO 8601 time (e.g. 2026-11-08T02:00:00Z)") from None


def _run_nightly(args: argparse.Namespace, settings: Settings, as_of=None) -> NightResult:
    from gpucast.flows.nightly import nightly

    return nightly(paths=args.paths or None, options=train_options(args, settings), retrain=not args.no_train, settings=settings,
                   as_of=as_of or _as_of(getattr(args, "as_of", None)))


def _nightly(args: argparse.Namespace, settings: Settings) -> int:
    _require_ml()
    from gpucast.flows.report import capacity_summary

    _warm_up_validation()
    out = _run_nightly(args, settings)
    print(out.report)
    print(capacity_summary(settings.storage), end="")
    return 0


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    _require_ml()
    from gpucast.flows.demo import run_demo
    from gpucast.flows.report import capacity_summary
    from gpucast.tasks.report.render import capacity_plan_lines, page_line

    sim = SimConfig(days=args.history_days, jobs_per_day=args.jobs_per_day, dirty_fraction=args.dirty_fraction,
                    pending_fraction=args.pending_fraction, seed=args.seed, rhythm=DEMO.rhythm, start=DEMO.start,
                    start_next_day=DEMO.start_next_day)
    _warm_up_validation()
    nights = run_demo(settings, sim, train_options(args, settings))
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
Where to look next{_on_path_hint()}:
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


def _on_path_hint() -> str:
    """Words for the demo's "Where to look next" when `gpucast` is not on PATH (`make demo` runs the venv's
    without activating it): the lines below say `gpucast`, so say how to get it."""
    import shutil

    here = Path(sys.argv[0]).resolve().parent
    if shutil.which("gpucast") or not (here / "activate").exists():
        return ""
    return f" (first `source {here / 'activate'}`, which puts `gpucast` on PATH)"
