"""Prefect flow `capacity-plan` and the planners' page.

`capacity_plan` reads the pending jobs with their latest forecasts, packs them onto each queue's GPUs
(`tasks/plan/capacity.py`), adds the arrivals the latest demand forecast expects (`tasks/plan/arrivals.py`;
none without a forecast, and the run's message says so), the pending jobs' expected starts and the days' waits on
the GPUs owned (`tasks/plan/starts.py`), plans each what-if scenario beside it from the same inputs
(`tasks/plan/scenarios.py`: the inventory's `scenarios:` and `gpucast plan --scenario FILE`; a failing scenario is
recorded as failed, never stops the plan), and writes it all in one transaction (`warehouse/plan.py`): a failed plan run
leaves the previous plan in the planners' views. It leaves a table artifact of the plan's first day.
`write_site` renders `$GPUCAST_HOME/site/index.html` (or `--out`) from the planners' published copy
and leaves a link artifact to it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_link_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from gpucast.flows.errors import no_retry_on_environment
from gpucast.flows.settings import Planning, Settings, Storage
from gpucast.records import catalog
from gpucast.records.inventory import Inventory, read_inventory
from gpucast.records.results import PlanResult
from gpucast.records.scenario import Scenario
from gpucast.tasks.plan import arrivals, capacity, scenarios
from gpucast.tasks.report.literal import visible_frame
from gpucast.tasks.report.site import render_site
from gpucast.warehouse import db, queries
from gpucast.warehouse import plan as plan_tables
from gpucast.warehouse.publish import publish_if
from gpucast.warehouse.runs import lifecycle

PLAN_ARTIFACT_KEY = "capacity-plan"
SITE_ARTIFACT_KEY = "capacity-page"


def gpu_type_names(names: list[str] | None) -> list[str] | None:
    """`--gpu-types` as catalogue names; an unknown one is an error listing the known ones."""
    if not names:
        return None
    out = []
    for name in names:
        canonical = catalog.canonical(name)
        if canonical not in catalog.gpus():
            raise ValueError(f"--gpu-types: unknown GPU type {name!r} (the catalogue knows: {', '.join(catalog.gpus())})")
        out.append(canonical)
    return out


@task(name="read-plan-input")
def read_plan_input(storage: Storage):
    with db.writer(storage) as con:
        return plan_tables.plan_input(con)


@task(name="read-running-jobs")
def read_running(storage: Storage):
    with db.writer(storage) as con:
        return plan_tables.running_input(con)


@task(name="read-demand-forecast")
def read_demand_input(storage: Storage, start: date):
    with db.writer(storage) as con:
        return plan_tables.demand_input(con, arrivals.RECENT_PLAN_DAYS, start)


@task(name="pack-jobs", cache_policy=NO_CACHE)
def pack_jobs(inputs: scenarios.PlanInputs, inventory: Inventory | None, days: int, cache: dict) -> capacity.Plan:
    return capacity.plan_capacity(inputs.jobs, inventory, inputs.start, days, inputs.gpu_types, inputs.default_gb,
                                  progress=get_run_logger().info, queues=arrivals.forecast_queues(inputs.forecast),
                                  cache=cache)


@task(name="add-expected-arrivals", cache_policy=NO_CACHE)
def add_expected(plan: capacity.Plan, forecast, recent) -> capacity.Plan:
    rows, notes = arrivals.add_expected(plan.rows, forecast, recent)
    return replace(plan, rows=rows, notes=[*plan.notes, *notes])


@task(name="expected-starts", cache_policy=NO_CACHE)
def expected_starts(inputs: scenarios.PlanInputs, inventory: Inventory | None,
                    plan: capacity.Plan) -> scenarios.PlanOutcome:
    return scenarios.with_starts(inputs, inventory, plan)


@task(name="plan-scenarios", cache_policy=NO_CACHE)
def plan_what_ifs(inputs: scenarios.PlanInputs, inventory: Inventory | None, days: int,
                  baseline: scenarios.PlanOutcome, drawn: tuple[Scenario, ...], cache: dict):
    return scenarios.plan_scenarios(inputs, inventory, days, baseline, drawn, cache, progress=get_run_logger().info)


@task(name="record-plan", retries=2, retry_delay_seconds=5, cache_policy=NO_CACHE,
      retry_condition_fn=no_retry_on_environment)
def record_plan(storage: Storage, run_id: str, outcome: scenarios.PlanOutcome, what_ifs, **summary) -> None:
    plan = outcome.plan
    with db.writer(storage) as con:
        plan_tables.record(con, run_id, plan.rows, plan.unplaceable, plan.colocation, outcome.starts.jobs, what_ifs,
                           **summary)


@flow(name="capacity-plan", log_prints=True)
def capacity_plan(gpu_types: list[str] | None = None, publish: bool = True, inventory: Inventory | None = None,
                  storage: Storage | None = None, planning: Planning | None = None,
                  scenario_files: tuple[Scenario, ...] = ()) -> PlanResult:
    """Plan the GPUs the pending jobs need for `planning.plan_days` days from the day of the latest
    forecasts. `inventory`: already read by the caller (the nightly reads it first, so a bad file stops
    the night before anything runs); else read here. `storage`, `planning`: default the environment's
    (GPUCAST_PLAN_DAYS, GPUCAST_DEFAULT_GPU_MEM_GB, GPUCAST_INVENTORY; `gpucast plan --plan-days` sets the days).
    `scenario_files`: the scenarios of `gpucast plan --scenario FILE`, planned with the inventory's own; one naming
    a queue the plan does not know is refused (exit 2) before anything is planned."""
    settings = Settings.given(storage=storage, planning=planning).ensure()
    types = gpu_type_names(gpu_types)
    inventory = inventory or read_inventory(settings.inventory_path)
    drawn = scenarios.drawn(inventory, scenario_files)
    storage, days = settings.storage, settings.planning.plan_days
    with lifecycle(storage, "plan", days=days, gpu_types=types,
                   inventory=inventory.source if inventory else None) as run:
        jobs, score_run_id, start = read_plan_input(storage)
        forecast, demand_run_id, recent = read_demand_input(storage, start)
        inputs = scenarios.PlanInputs(jobs, read_running(storage), forecast, recent, start, types,
                                      settings.planning.default_gpu_mem_gb)
        scenarios.refuse_unknown_queues(scenario_files, inputs, inventory)
        cache: dict = {}  # the packings the scenarios share with the baseline
        plan = pack_jobs(inputs, inventory, days, cache)
        plan = add_expected(plan, forecast, recent)
        outcome = expected_starts(inputs, inventory, plan)
        what_ifs = plan_what_ifs(inputs, inventory, days, outcome, drawn, cache)
        plan = outcome.plan
        note = "; ".join(plan.notes) or None
        record_plan(storage, run.run_id, outcome, what_ifs, start_day=start, score_run_id=score_run_id,
                    demand_run_id=demand_run_id, jobs=plan.jobs, unknown_size_jobs=plan.unknown_size_jobs,
                    unplaceable_jobs=plan.unplaceable.height, message=note)
    first = visible_frame(capacity.first_day(plan.rows))  # queue names as data: no control character in an artifact
    create_table_artifact(key=PLAN_ARTIFACT_KEY, table=first.with_columns(pl.col("day").cast(str)).to_dicts(),
                          description=f"GPUs needed on {start} per queue and GPU type ({run.run_id})")
    publish_if(publish, storage)
    print(f"{run.run_id}: planned {plan.jobs:,} pending job(s) over {days} day(s) from {start}; "
          f"{plan.unknown_size_jobs:,} of unknown size, {plan.unplaceable.height:,} fit no GPU of their queue"
          + (f"; {len(drawn)} what-if scenario(s), {scenarios.failed_count(what_ifs)} failed" if drawn else "")
          + (f" ({note})" if note else ""))
    return PlanResult(plan_run_id=run.run_id, start_day=start, days=days, jobs=plan.jobs,
                      unknown_size_jobs=plan.unknown_size_jobs, unplaceable_jobs=plan.unplaceable.height, rows=plan.rows,
                      note=note, scenarios=what_ifs)


def write_site(storage: Storage, out: Path | None = None, artifact: bool = True) -> Path:
    """Render the planners' page from the published copy into `out` (default $GPUCAST_HOME/site);
    written to a temporary name and renamed, so a reader never sees half a page."""
    folder = Path(out) if out else storage.site_dir
    if folder.exists() and not folder.is_dir():  # not a traceback (FileExistsError) and never written over
        raise ValueError(f"{'--out ' if out else 'the site folder '}{folder} is a file, not a folder; give a folder "
                         "(the page is written as <folder>/index.html)")
    folder.mkdir(parents=True, exist_ok=True)
    html = render_site(queries.site_frames(storage.query_path), datetime.now(UTC))
    page = folder / "index.html"
    tmp = folder / ".index.html.tmp"
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(page)
    if artifact:
        create_link_artifact(key=SITE_ARTIFACT_KEY, link=page.resolve().as_uri(), link_text="GPU capacity page",
                             description="the planners' page of the latest run")
    return page
