"""Prefect flow `nightly`: ingest → validate → features → train → score → publish.

Each step is a flow or task of its own, so the Prefect UI (and `gpucast status`) shows which one
failed. Transient steps retry (loading, scoring, publishing); a validation failure does not: it
fails the run with the reason, and the planners keep the previous night's forecasts.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact

from gpucast.flows.ingest import ingest_job_logs
from gpucast.flows.score import score_pending
from gpucast.flows.train import train_where_possible
from gpucast.tasks.score import DEFAULT_GPU_MEM_GB
from gpucast.tasks.train import DEFAULT_MIN_LABELLED
from gpucast.warehouse import training
from gpucast.warehouse.housekeeping import exclusive_run
from gpucast.warehouse.publish import publish_snapshot
from gpucast.warehouse.report import markdown_table, nightly_tables, top_rejection_reasons
from gpucast.warehouse.settings import Settings, env_number

MAX_REJECT_ENV = "GPUCAST_MAX_REJECT_FRACTION"
DEFAULT_MAX_REJECT_FRACTION = 0.2
ARTIFACT_KEY = "nightly-report"


class ValidationFailed(RuntimeError):
    """Too much of tonight's input broke the contract to trust a retrain on it."""


@task(name="check-validation")
def check_validation(ingest: dict, max_reject_fraction: float) -> list[str]:
    """Fail when the rejected share of tonight's rows exceeds the limit; return warnings otherwise."""
    read = ingest["rows_read"]
    share = ingest["rows_rejected"] / read if read else 0.0
    warnings = []
    if ingest["files_rejected"]:
        warnings.append(f"{ingest['files_rejected']} file(s) rejected whole: see rejected_files")
    if share > max_reject_fraction:
        top = top_rejection_reasons(Settings.from_env(), ingest["run_id"])
        reasons = "; ".join(f"{n:,} x {r}" for r, n in top)
        raise ValidationFailed(
            f"validation failed: {ingest['rows_rejected']:,} of {read:,} rows rejected ({share:.1%}), more than "
            f"{max_reject_fraction:.0%} ({MAX_REJECT_ENV}); most common: {reasons}. Rows are in rejected_job_logs "
            f"(ingest_run_id = '{ingest['run_id']}'); fix the exporter or raise the limit, then rerun.")
    if ingest["rows_rejected"]:
        warnings.append(f"{ingest['rows_rejected']:,} row(s) rejected ({share:.1%}): see rejected_job_logs")
    return warnings


@task(name="features")
def feature_summary() -> dict:
    """What tonight's models will learn from and score: labelled jobs per target, pending jobs."""
    return training.feature_summary(Settings.from_env())


@task(name="publish", retries=2, retry_delay_seconds=5)
def publish() -> str:
    return str(publish_snapshot(Settings.from_env()))


def _report(ingest: dict | None, features: dict | None, train: dict | None, score: dict | None,
            warnings: list[str], seconds: dict[str, float], error: str | None) -> str:
    lines = ["# gpucast nightly", ""]
    lines.append(f"**FAILED**: {error}" if error else "**Succeeded**")
    if ingest:
        lines += ["", "## Ingest", f"run `{ingest['run_id']}`: {ingest['files']} file(s), rows read {ingest['rows_read']:,} = "
                  f"loaded {ingest['rows_loaded']:,} + rejected {ingest['rows_rejected']:,} + duplicate "
                  f"{ingest['rows_duplicate']:,}; files rejected {ingest['files_rejected']}"]
    if features:
        lines += ["", "## Features", f"{features['jobs']:,} jobs, {features['pending']:,} pending; labelled: "
                  + ", ".join(f"{t} {n:,}" for t, n in features["labelled"].items())]
    if train:
        lines += ["", "## Training", f"where: {train['where']}; run `{train.get('train_run_id', train.get('flow_run_id'))}`"]
    board, totals = nightly_tables(Settings.from_env())
    if board.height:
        lines += ["", "## Leaderboard (latest train run per target)", markdown_table(board)]
    if score:
        lines += ["", "## Forecasts", f"score run `{score['score_run_id']}`: {score['forecasts']:,} forecasts for "
                  f"{score['pending_jobs']:,} pending jobs", "", markdown_table(totals)]
    if seconds:
        lines += ["", "## Time per step", ", ".join(f"{step} {s:,.1f} s" for step, s in seconds.items())]
    if warnings:
        lines += ["", "## Warnings", *[f"- {w}" for w in warnings]]
    return "\n".join(lines) + "\n"


@flow(name="nightly", log_prints=True)
def nightly(
    paths: list[str] | None = None,
    models: list[str] | None = None,
    preset: str = "paper",
    repeats: int = 3,
    epochs: int | None = None,
    nn_max_minutes: float | None = None,
    min_labelled: int = DEFAULT_MIN_LABELLED,
    gpu_mem_gb: float = DEFAULT_GPU_MEM_GB,
    max_reject_fraction: float | None = None,
    train: bool = True,
) -> dict:
    """The nightly run. Leaves a markdown artifact `nightly-report` whether it succeeds or fails."""
    if max_reject_fraction is None:
        max_reject_fraction = env_number(MAX_REJECT_ENV, DEFAULT_MAX_REJECT_FRACTION)
    settings = Settings.from_env().ensure()
    with exclusive_run(settings, "nightly"):
        return _nightly(paths, models, preset, repeats, epochs, nn_max_minutes, min_labelled, gpu_mem_gb,
                        max_reject_fraction, train)


@contextlib.contextmanager
def _timed(seconds: dict[str, float], step: str) -> Iterator[None]:
    """Record the wall seconds of one step (also when it fails) for the report."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        seconds[step] = round(time.perf_counter() - t0, 1)


def _nightly(paths, models, preset, repeats, epochs, nn_max_minutes, min_labelled, gpu_mem_gb, max_reject_fraction,
             train) -> dict:
    ingest = features = trained = scored = None
    warnings: list[str] = []
    seconds: dict[str, float] = {}
    try:
        with _timed(seconds, "ingest"):
            ingest = ingest_job_logs(paths=paths, publish=False)
        with _timed(seconds, "validate"):
            warnings += check_validation(ingest, max_reject_fraction)
        with _timed(seconds, "features"):
            features = feature_summary()
        if train:
            with _timed(seconds, "train"):
                trained = train_where_possible(models=models, preset=preset, repeats=repeats, epochs=epochs,
                                               nn_max_minutes=nn_max_minutes, min_labelled=min_labelled, publish=False)
        with _timed(seconds, "score"):
            scored = score_pending(gpu_mem_gb=gpu_mem_gb, publish=False)
    except Exception as exc:
        report = _report(ingest, features, trained, scored, warnings, seconds, f"{type(exc).__name__}: {exc}")
        create_markdown_artifact(key=ARTIFACT_KEY, markdown=report, description="nightly run (failed)")
        publish()
        raise
    with _timed(seconds, "publish"):
        where = publish()
    report = _report(ingest, features, trained, scored, warnings, seconds, None)
    create_markdown_artifact(key=ARTIFACT_KEY, markdown=report, description="nightly run")
    print(f"published {where}")
    return {"ingest": ingest, "features": features, "train": trained, "score": scored, "warnings": warnings,
            "published": where, "seconds": seconds, "report": report}
