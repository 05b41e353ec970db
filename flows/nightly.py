"""Prefect flow `nightly`: the steps of `NIGHTLY_STEPS` (`flows/nightly_steps.py`), in that order.

Each step is a flow or task of its own, so the Prefect UI (and `gpucast status`) shows which one
failed. Transient steps retry (loading, scoring, publishing); the quality gate does not: it fails
the run with the reason. A night that fails does not publish, so planners keep the previous
night's copy; the one exception is the quality gate, which fails after a successful ingest: that
warehouse is sound, and publishing it lets on-call read the rejected rows with `gpucast sql` (no
forecast changes). The failure report is written from what the steps returned, without touching
the warehouse (which may be what failed). The demand forecast is the one step whose failure does not
fail the night: it becomes a warning, and planners keep the previous forecast (`flows/demand.py`).
"""

from __future__ import annotations

import contextlib
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact

from gpucast.flows.backtest import backtest_step
from gpucast.flows.demand import demand_step
from gpucast.flows.errors import ValidationFailed, no_retry_on_environment
from gpucast.flows.gpu_pool import train_where_possible
from gpucast.flows.imports import pull_sources
from gpucast.flows.ingest import ingest_job_logs
from gpucast.flows.nightly_steps import NIGHTLY_STEPS
from gpucast.flows.plan import capacity_plan, write_site
from gpucast.flows.score import score_pending
from gpucast.flows.settings import Alerts, Quality, Settings, Storage, with_time_limits
from gpucast.flows.stage import stage_features
from gpucast.records.inventory import read_inventory
from gpucast.records.results import IngestResult, NightResult
from gpucast.records.times import as_utc
from gpucast.tasks.ingest.gate import RejectGate
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.report import render
from gpucast.warehouse import db, queries
from gpucast.warehouse.errors import check_kind, redact
from gpucast.warehouse.housekeeping import claim_staging, exclusive_run
from gpucast.warehouse.publish import copy_identity, publish_snapshot
from gpucast.warehouse.runs import note_stop

ARTIFACT_KEY = "nightly-report"


@task(name="quality-gate")
def quality_gate(ingest: IngestResult, quality: Quality, storage: Storage) -> list[str]:
    """Fail when the rejected share of tonight's rows exceeds the limit (`tasks/ingest/gate.py`), with the most
    common reasons; return warnings otherwise."""
    gate = RejectGate(ingest.rows_read, ingest.rows_rejected, ingest.files_rejected, quality.max_reject_fraction,
                      files=ingest.files)
    if gate.failed:
        with db.writer(storage) as con:
            top = queries.top_rejection_reasons(con, ingest.run_id)
        raise ValidationFailed(gate.failure(top, ingest.run_id))
    return gate.warnings()


@task(name="publish", retries=2, retry_delay_seconds=5, retry_condition_fn=no_retry_on_environment)
def publish_night(storage: Storage) -> str:
    """The night's step `publish`: the planners' copy replaced by the warehouse's (`publish` alone is the flows'
    parameter saying whether a flow publishes itself; the nightly passes `publish=False` and publishes once, here)."""
    return str(publish_snapshot(storage))


NIGHTLY_TIMEOUT_S = 6 * 3600  # a night that runs past 08:00 (cron 02:00 UTC) is stopped and reported as failed


# Each nightly run's alert settings in this process, by flow run id, kept when the run starts: a hook gets the run,
# not the flow's locals, and announces a failure with the settings the run had (handed over by the CLI, or built
# from the environment at its start), not by reading the environment again. Removed when the run ends.
_RUN_ALERTS: dict[str, Alerts] = {}
# What each nightly run in this process had published when it failed, by flow run id: the planners' copy's file
# just before the run's publish step (`copy_identity`; a publish renames a new one in), and whether its page was
# written. Its alert says what planners now read (review 85 S1-1; review 86 S3-1: decided from the copy itself, so a
# publish that failed after its rename counts as published). Removed by the run's last hook.
_RUN_PUBLISH: dict[str, _Publish] = {}
KEPT_COPY = "planners keep the last published copy"
PUBLISHED_BEFORE_PAGE = ("the night had published tonight's forecasts and plan (SQL reads them) but the planners' page "
                         "still shows the previous night's: fix the cause, then `gpucast site`")
PUBLISHED_WITH_PAGE = "the night had published tonight's forecasts, plan and page before the step that failed"


@dataclass
class _Publish:
    copy: Path
    before: list[int] | None  # the copy's identity before the publish step
    page: bool = False

    def outcome(self) -> str:
        """What planners read after the run failed, in the alert's words."""
        if copy_identity(self.copy) == self.before:
            return KEPT_COPY
        return PUBLISHED_WITH_PAGE if self.page else PUBLISHED_BEFORE_PAGE


def _published_outcome(run_id: str) -> str:
    publish = _RUN_PUBLISH.pop(run_id, None)
    return KEPT_COPY if publish is None else publish.outcome()


def alert_on_failure(flow, flow_run, state) -> None:
    """Prefect `on_failure` / `on_crashed` hook: announce the failed night on the run's alert webhook
    (GPUCAST_ALERT_WEBHOOK_URL, `settings.alerts`).

    Sent through Prefect's Custom Webhook notification block (a JSON POST of subject and body), so any
    chat or paging tool that takes a webhook can receive it. The alert must never hide the failure
    it reports: an unreachable endpoint is logged, not raised. A run that failed before it had settings
    (Prefect refused its parameters) is announced with those it would have built: the environment's.
    """
    alerts = _RUN_ALERTS.pop(str(flow_run.id), None) or Settings.from_env().alerts
    outcome = _published_outcome(str(flow_run.id))
    url = alerts.webhook_url
    if not url:
        return
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    subject = f"gpucast nightly {state.name.lower()}: {flow_run.name}"
    body = (f"flow run {flow_run.name} ({flow_run.id}) ended {state.name}: {redact(state.message or 'no message')}. "
            f"See `gpucast status` for the failing step; {outcome}.")  # the
    # error's text may quote a tracking URI or an API address with its password
    hook = CustomWebhookNotificationBlock(name="gpucast-alerts", url=url,
                                          json_data={"subject": "{{subject}}", "body": "{{body}}"})
    try:
        hook.notify(body=body, subject=subject)
    except Exception as exc:  # noqa: BLE001  (see the docstring)
        # the URL itself never: a Slack, Teams or Discord webhook carries its token in the path (review 77 S1-9)
        where = f"the webhook at {urlsplit(url).hostname or '?'} (GPUCAST_ALERT_WEBHOOK_URL)"
        print(f"could not send the failure alert to {where}: {type(exc).__name__}: "
              f"{redact(str(exc).replace(url, '<the webhook URL>'))}")


def _forget_alerts(flow, flow_run, state) -> None:
    """Prefect `on_completion` / `on_cancellation` hook: the run needs no alert settings any more."""
    _RUN_ALERTS.pop(str(flow_run.id), None)
    _RUN_PUBLISH.pop(str(flow_run.id), None)


@flow(name="nightly", log_prints=True, timeout_seconds=NIGHTLY_TIMEOUT_S, on_failure=[alert_on_failure],
      on_crashed=[alert_on_failure], on_completion=[_forget_alerts], on_cancellation=[_forget_alerts])
def nightly(paths: list[str] | None = None, options: TrainOptions | None = None, retrain: bool = True,
            as_of: datetime | None = None, settings: Settings | None = None) -> NightResult:
    """The nightly run. Leaves a markdown artifact `nightly-report` whether it succeeds or fails.

    `options`: what training does (prefect.yaml's `options:`; the time limits it leaves None are the settings');
    `settings`: every concern (it runs every step): the CLI's (the environment with its flags on top, read once
    where the command started); a deployment's run, which is handed none, builds them here, once, from the
    environment (GPUCAST_* in its work pool's `job_variables.env`). `as_of` stamps the forecasts (default: now;
    the demo replays past days; a time without a zone is UTC, as `--as-of` reads it). Each step gets only the concerns
    it uses, and every subflow every concern it takes.
    """
    from prefect.runtime import flow_run

    settings = settings or Settings.from_env()
    as_of = as_utc(as_of)  # a deployment run's zone-less ISO text arrives naive
    _RUN_ALERTS[str(flow_run.id)] = settings.alerts  # for the failure hook
    settings = settings.ensure()
    check_kind(settings.storage.site_dir, folder=True)  # a site that is a file stopped the night after its publish
    options = with_time_limits(options or TrainOptions(), settings.training)
    inventory = read_inventory(settings.inventory_path)  # a bad inventory stops the night before anything runs
    with exclusive_run(settings.storage, "nightly"), _staging(settings.storage) as staging:
        return _steps(paths, options, retrain, settings, staging, as_of, inventory, str(flow_run.id))


@contextlib.contextmanager
def _staging(storage: Storage) -> Iterator[Path]:
    folder = claim_staging(storage.staging_dir / f"nightly-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _timed(seconds: dict[str, float], step: str) -> Iterator[None]:
    """Record the wall seconds of one step (also when it fails) for the report."""
    if step not in NIGHTLY_STEPS:
        raise ValueError(f"{step!r} is not a nightly step: add it to NIGHTLY_STEPS (flows/nightly_steps.py)")
    t0 = time.perf_counter()
    try:
        yield
    except BaseException as exc:
        note_stop(exc, f"step {step}")  # a SIGTERM: the command line names the step it stopped
        raise
    finally:
        seconds[step] = round(time.perf_counter() - t0, 1)


def _steps(paths: list[str] | None, options: TrainOptions, retrain: bool, settings: Settings, staging: Path,
           as_of: datetime | None, inventory, run_id: str) -> NightResult:
    night = NightResult()  # what the steps returned, filled in as they run (a failed night is reported from it)
    warnings: list[str] = []
    seconds: dict[str, float] = {}
    try:
        with _timed(seconds, "ingest"):
            night = replace(night, ingest=ingest_job_logs(paths=paths, publish=False, storage=settings.storage,
                                                          quality=settings.quality))
            if paths is None:  # the inbox's night also pulls sources.yaml's sources (GPUCAST_SOURCES): one
                pulled = pull_sources(settings)  # that fails is a warning and a failed ingest run; the rest load
                night = replace(night, sources=pulled.runs)
                warnings += pulled.failed.values()
        with _timed(seconds, "quality-gate"):
            warnings += quality_gate(night.ingest, settings.quality, settings.storage)
        with _timed(seconds, "backtest"):
            backtest = backtest_step(settings.storage, settings.quality.backtest_days, as_of)
            night = replace(night, backtest=backtest)
            warnings += backtest.warnings
        with _timed(seconds, "features"):
            staged = stage_features(settings.storage, staging, max_rows=options.max_rows, tracing=settings.tracing)
            night = replace(night, features=staged)
        if retrain:
            with _timed(seconds, "train"):
                night = replace(night, train=train_where_possible(options, settings, staged.history_path,
                                                                  backtest_fresh=True, as_of=as_of))  # the backtest step's window
        with _timed(seconds, "score"):
            night = replace(night, score=score_pending(
                pending_path=staged.pending_path, publish=False, history_path=staged.history_path, as_of=as_of,
                storage=settings.storage, planning=settings.planning, cluster=settings.cluster, quality=settings.quality,
                tracing=settings.tracing, untrained=night.untrained()))
        with _timed(seconds, "demand"):
            demand, failed = demand_step(settings, as_of)
            night = replace(night, demand=demand)
            warnings += failed
        with _timed(seconds, "plan"):
            night = replace(night, plan=capacity_plan(publish=False, inventory=inventory, storage=settings.storage,
                                                      planning=settings.planning))
        publish = _RUN_PUBLISH[run_id] = _Publish(settings.storage.published_path,
                                                  copy_identity(settings.storage.published_path))
        with _timed(seconds, "publish"):
            where = publish_night(settings.storage)
        with _timed(seconds, "page"):
            page = str(write_site(settings.storage))
            night = replace(night, page=page)
            publish.page = True
    except Exception as exc:
        night = replace(night, warnings=tuple(warnings), seconds=seconds)
        report = render.nightly_report(night, f"{type(exc).__name__}: {redact(str(exc))}")  # the UI's artifact
        create_markdown_artifact(key=ARTIFACT_KEY, markdown=report, description="nightly run (failed)")
        if isinstance(exc, ValidationFailed):
            publish_night(settings.storage)  # the ingest committed: show on-call its rejected rows (see the module doc)
        if run_id in _RUN_PUBLISH and (outcome := _RUN_PUBLISH[run_id].outcome()) != KEPT_COPY:
            print(f"the night failed after its publish: {outcome}")
        raise
    night = replace(night, warnings=tuple(warnings), seconds=seconds, published=where)
    report = render.nightly_report(night, None, *queries.leaderboard_and_capacity(settings.storage.published_path))
    create_markdown_artifact(key=ARTIFACT_KEY, markdown=report, description="nightly run")
    print(f"published {where}; planners' page: {page}")
    return replace(night, report=report)
