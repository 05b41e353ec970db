"""On-call view of Prefect: recent flow runs with state, duration and the failing step's error."""

from __future__ import annotations

from datetime import UTC

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterParentTaskRunId,
    FlowRunFilterState,
    FlowRunFilterStateType,
    TaskRunFilter,
    TaskRunFilterState,
    TaskRunFilterStateType,
)
from prefect.client.schemas.objects import StateType
from prefect.client.schemas.sorting import FlowRunSort

from gpucast.records.results import FlowRunLine, ScheduledRun
from gpucast.tasks.report.render import flow_runs_lines
from gpucast.warehouse.errors import printable, redact

FAILED = {StateType.FAILED, StateType.CRASHED}


def recent_flow_runs(limit: int = 10) -> list[FlowRunLine]:
    """Top-level flow runs, newest first: flow, run name, state, start, seconds, failing step, error."""
    rows = []
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_task_run_id=FlowRunFilterParentTaskRunId(is_null_=True)),
            sort=FlowRunSort.START_TIME_DESC, limit=limit)
        flows = {f.id: f.name for f in client.read_flows(limit=200)}
        for run in runs:
            state = run.state.type if run.state else None
            failed = _failing_step(client, run) if state in FAILED else (None, None)  # asked of failed runs only
            rows.append(FlowRunLine(flow=flows.get(run.flow_id, str(run.flow_id)), run=run.name,
                                    state=run.state.name if run.state else "?", started=run.start_time,
                                    seconds=round(run.total_run_time.total_seconds(), 1), id=str(run.id),
                                    failed_step=failed[0], error=failed[1]))
    return rows


def _failing_step(client, run) -> tuple[str | None, str | None]:
    """The failed task runs (subflows appear as tasks of their parent) and the run's own message."""
    failed = client.read_task_runs(
        flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])),
        task_run_filter=TaskRunFilter(state=TaskRunFilterState(type=TaskRunFilterStateType(any_=list(FAILED)))))
    steps = ", ".join(sorted({t.name for t in failed})) or None
    message = run.state.message if run.state else None
    return steps, message


def next_scheduled_runs(limit: int = 3) -> list[ScheduledRun]:
    """The soonest scheduled flow runs (a deployment's schedule creates them ahead): flow, deployment, when."""
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED]))),
            sort=FlowRunSort.EXPECTED_START_TIME_ASC, limit=limit)
        flows = {f.id: f.name for f in client.read_flows(limit=200)} if runs else {}
        deployments = {d.id: d.name for d in client.read_deployments(limit=200)} if runs else {}
    return [ScheduledRun(flow=flows.get(r.flow_id, str(r.flow_id)), deployment=deployments.get(r.deployment_id),
                         at=r.expected_start_time.astimezone(UTC)) for r in runs]


def flow_runs_text(limit: int = 10, timeout_s: float | None = None) -> str:
    """Recent flow runs and the next scheduled one, as on-call reads them. `timeout_s` bounds each API
    request (no retries): an API that does not answer is reported in one line, not waited for."""
    from prefect.settings import PREFECT_API_REQUEST_TIMEOUT, PREFECT_API_URL, PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    bounded = {PREFECT_API_REQUEST_TIMEOUT: timeout_s, PREFECT_CLIENT_MAX_RETRIES: 0} if timeout_s else {}
    with temporary_settings(updates=bounded):
        try:
            rows = recent_flow_runs(limit)
            upcoming = next_scheduled_runs()
        except Exception as exc:  # noqa: BLE001  (status must print what it has; the warehouse part is above)
            return printable(f"Prefect flow runs: the API at {PREFECT_API_URL.value()} did not answer within "
                             f"{timeout_s} s ({type(exc).__name__}: {redact(str(exc))[:200]}); check it with "
                             "`prefect server status` or rerun with --no-flows")
    return redact(flow_runs_lines(rows, upcoming))  # a run's error may quote an address with its password
