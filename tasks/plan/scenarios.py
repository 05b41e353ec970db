"""What-if plans (issue 53, item 4): each scenario (records/scenario.py) planned beside the baseline, from the same
pending jobs, forecasts and demand forecast (nothing scored again), and summed up per day for `plan_scenarios`.

A scenario edits the inventory, in the order move, remove, add (`edited_inventory`):

* `move {queue, gpu_type, count}`: the queue's GPUs become `count` GPUs of `gpu_type` (left out: as many as the
  queue owns now, all types together: the same number of GPUs, of another type); its jobs are planned on them.
* `remove {queue, gpu_type, count}`: `count` (or `all`) fewer; more than the queue owns is the scenario's failure.
  A type removed to 0 leaves the queue, whose jobs go to its other types; the queue's only type stays, owning 0.
* `add {queue, gpu_type, count}`: `count` more, a new type of the queue when it has none. A new type is `added`
  (records/inventory.py): the queue's jobs and expected arrivals stay on its own types, the added GPUs take the
  jobs none of those holds, and their spare GPUs cover the shortfall of its types of no more memory
  (tasks/plan/capacity.py, arrivals.py), so GPUs added never raise a day's shortfall of the jobs some GPU already
  held, nor the jobs that fit no GPU (session 14: 16 H100s added to the demo's a100-80g raised it, issue 53 item
  4). Jobs no GPU held that the added GPUs hold (or, removing them, that none holds any longer) move between the
  two figures: a day's `gpus_short_p90` + `gpus_unplaceable` (the GPUs those jobs ask for, on the days they would
  run: `unplaceable_gpus`) never rises when GPUs are
  added to a queue the inventory lists (review 64b S2-1: 2 H200s added for ten 120 GB jobs turn 10 unplaceable GPUs
  into 8 short; a queue it does not list was planned with GPUs owned unknown, so its shortfall goes from null to a
  number, docs/planners.md).

`scale {queue, factor}` multiplies the queue's expected arrivals (the demand forecast's P50 and P90 GPU-hours);
`plan_days` plans that many days. The scenario's plan is the baseline's steps on the edited inventory: the packing
(`capacity.plan_capacity`, sharing the baseline's packings of every queue whose GPU types did not change: the
count owned does not change a packing), the expected arrivals (`arrivals.add_expected`, the baseline's packing
efficiencies) and the waits (`starts`). A scenario that fails (a remove past what is owned, anything raised while
planning it) is recorded as failed with its reason; the baseline and the other scenarios are planned all the same.

Per scenario and day (`SCENARIO_COLUMNS`), over every queue and GPU type: GPUs needed (known + expected: the queues'
P50s summed, and the site total's own P50 and P90, `gpus_site_p50` and `gpus_total_p90`, `arrivals.by_day`), owned,
short (`gpus_short_*`: the rows' `shortfall_total_*` summed), the jobs that fit no GPU of their queue (and the GPUs
they would hold that day, `gpus_unplaceable`: from their first day for their P90 run time) and the pending
jobs that cannot start (their queue owns no GPU of their type, or fewer than they ask for), the expected wait of a job
submitted that day (the queues' `expected_wait_hours` weighted by their expected arrivals; equal weights on a day with
none) and the longest one with its queue; then what changed from the baseline: the edits in words and the differences
of the day's figures.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date

import numpy as np
import polars as pl

from gpucast.records import catalog
from gpucast.records.inventory import Inventory, Owned
from gpucast.records.scenario import BASELINE, Scenario, ScenarioError, unknown_queues
from gpucast.tasks.plan import arrivals, capacity, starts

SCENARIO_COLUMNS = ("scenario", "status", "day", "gpus_total_p50", "gpus_site_p50", "gpus_total_p90", "gpus_owned",
                    "gpus_short_p50",
                    "gpus_short_p90", "unplaceable_jobs", "gpus_unplaceable", "jobs_without_start", "expected_wait_hours",
                    "longest_wait_hours", "longest_wait_queue", "changes", "gpus_short_p90_vs_baseline",
                    "gpus_owned_vs_baseline", "expected_wait_hours_vs_baseline", "unplaceable_jobs_vs_baseline",
                    "reason")
SCENARIO_SCHEMA = {"scenario": pl.String, "status": pl.String, "day": pl.Date, "gpus_total_p50": pl.Int64,
                   "gpus_site_p50": pl.Int64,
                   "gpus_total_p90": pl.Int64, "gpus_owned": pl.Int64, "gpus_short_p50": pl.Int64,
                   "gpus_short_p90": pl.Int64, "unplaceable_jobs": pl.Int64, "gpus_unplaceable": pl.Int64,
                   "jobs_without_start": pl.Int64,
                   "expected_wait_hours": pl.Float64, "longest_wait_hours": pl.Float64,
                   "longest_wait_queue": pl.String, "changes": pl.String, "gpus_short_p90_vs_baseline": pl.Int64,
                   "gpus_owned_vs_baseline": pl.Int64, "expected_wait_hours_vs_baseline": pl.Float64,
                   "unplaceable_jobs_vs_baseline": pl.Int64, "reason": pl.String}


class ScenarioFailed(ValueError):
    """A scenario that cannot be planned on this inventory (a remove past what is owned)."""


@dataclass(frozen=True)
class PlanInputs:
    """What every plan of one run is made from (the baseline and each scenario): read once."""

    jobs: pl.DataFrame  # capacity.JOB_COLUMNS (+ submitted_at)
    running: pl.DataFrame  # starts.RUNNING_COLUMNS
    forecast: pl.DataFrame  # arrivals.FORECAST_COLUMNS
    recent: pl.DataFrame  # arrivals.PACKING_COLUMNS
    start: date
    gpu_types: list[str] | None
    default_gb: float


@dataclass(frozen=True)
class PlanOutcome:
    """One plan of the run: the packing with arrivals and waits on its rows, and the pending jobs' starts."""

    plan: capacity.Plan
    starts: starts.Starts


def plan_once(inputs: PlanInputs, inventory: Inventory | None, days: int, forecast: pl.DataFrame | None = None,
              cache: dict | None = None, progress=None) -> PlanOutcome:
    """The plan's steps on one inventory: pack, add the expected arrivals, the jobs' starts and the days' waits (the
    flow runs the same steps as tasks for the baseline)."""
    forecast = inputs.forecast if forecast is None else forecast
    plan = capacity.plan_capacity(inputs.jobs, inventory, inputs.start, days, inputs.gpu_types, inputs.default_gb,
                                  progress=progress, queues=arrivals.forecast_queues(forecast), cache=cache)
    added = {(o.queue, o.gpu_type) for o in inventory.owned if o.added} if inventory else set()
    rows, notes = arrivals.add_expected(plan.rows, forecast, inputs.recent, added)
    return with_starts(inputs, inventory, replace(plan, rows=rows, notes=[*plan.notes, *notes]))


def with_starts(inputs: PlanInputs, inventory: Inventory | None, plan: capacity.Plan) -> PlanOutcome:
    """The pending jobs' expected starts on the inventory's GPUs, and each plan row's day wait (tasks/plan/starts.py)."""
    found = starts.job_starts(inputs.jobs, inputs.running, inventory, inputs.start, inputs.gpu_types,
                              inputs.default_gb)
    return PlanOutcome(replace(plan, rows=starts.add_waits(plan.rows, found.free), notes=[*plan.notes, *found.notes]),
                       found)


def drawn(inventory: Inventory | None, files: tuple[Scenario, ...]) -> tuple[Scenario, ...]:
    """The scenarios a plan draws: the inventory's `scenarios:`, then those of `--scenario` files; a name given twice
    is a `ScenarioError` naming both places (exit 2)."""
    out: dict[str, Scenario] = {}
    for s in (*(inventory.scenarios if inventory else ()), *files):
        if s.name in out:
            raise ScenarioError(f"{s.source}: scenario {s.name!r} is given twice (also at {out[s.name].source})")
        out[s.name] = s
    return tuple(out.values())


def known_queues(inputs: PlanInputs, inventory: Inventory | None) -> set[str]:
    """The queues a scenario may name: the inventory's, the pending and running jobs' and the demand forecast's."""
    return ({o.queue for o in inventory.owned} if inventory else set()) | set(inputs.jobs["queue"].to_list()) \
        | set(inputs.running["queue"].to_list()) | set(arrivals.forecast_queues(inputs.forecast))


def refuse_unknown_queues(scenarios: tuple[Scenario, ...], inputs: PlanInputs, inventory: Inventory | None) -> None:
    """`ScenarioError` (exit 2, one line) for the first queue a scenario names that the plan does not know."""
    if lines := unknown_queues(scenarios, known_queues(inputs, inventory)):
        raise ScenarioError(lines[0])


def failed_count(rows: pl.DataFrame) -> int:
    return rows.filter(pl.col("status") == "failed").height


def edited_inventory(inventory: Inventory | None, scenario: Scenario) -> Inventory:
    """The inventory as the scenario has it (see the module doc); `ScenarioFailed` for a remove past what is owned."""
    owned: dict[str, dict[str, int]] = {}
    for o in inventory.owned if inventory else ():
        owned.setdefault(o.queue, {})[o.gpu_type] = o.count
    for m in scenario.move:
        owned[m.queue] = {m.gpu_type: sum(owned.get(m.queue, {}).values()) if m.count is None else m.count}
    for r in scenario.remove:
        have = owned.get(r.queue, {})
        if r.gpu_type not in have:
            held = ", ".join(f"{n} {t}" for t, n in have.items()) or "no GPUs on file"
            raise ScenarioFailed(f"remove: queue {r.queue!r} owns no {r.gpu_type} (it owns {held})")
        n = have[r.gpu_type] if r.count is None else r.count
        if n > have[r.gpu_type]:
            raise ScenarioFailed(f"remove: {n} {r.gpu_type} from queue {r.queue!r}, which owns {have[r.gpu_type]}")
        if have[r.gpu_type] == n and len(have) > 1:
            del have[r.gpu_type]
        else:
            have[r.gpu_type] -= n
    for a in scenario.add:
        have = owned.setdefault(a.queue, {})
        have[a.gpu_type] = have.get(a.gpu_type, 0) + a.count
    source = f"{inventory.source if inventory else 'no inventory'} with scenario {scenario.name!r}"
    # node sizes as the inventory gives them per queue x type; only GPUs the scenario adds to or moves into a queue
    # that had none of that type take the type's size elsewhere on file (a queue is never given another's nodes)
    on_file = {(o.queue, o.gpu_type): o.gpus_per_node for o in (inventory.owned if inventory else ())}
    by_type = {t: n for (_, t), n in on_file.items() if n}
    # a type an `add` gives a queue owning none of it is `added` (tasks/plan/capacity.py: the queue's jobs and
    # expected arrivals stay on its own types; the added GPUs take what those miss and cover their shortfall)
    added = {(a.queue, a.gpu_type) for a in scenario.add} - set(on_file) - {(m.queue, m.gpu_type) for m in scenario.move}
    return Inventory(source, tuple(
        Owned(q, t, n, catalog.gpus()[t].memory_gb, on_file[q, t] if (q, t) in on_file else by_type.get(t),
              (q, t) in added and len(types) > 1)
        for q, types in owned.items() for t, n in types.items()))


def scaled_forecast(forecast: pl.DataFrame, scenario: Scenario) -> pl.DataFrame:
    """The demand forecast with each scaled queue's GPU-hours (P50, P90 and their shares of the totals) times its
    factor."""
    factors = {s.queue: s.factor for s in scenario.scale}
    if not factors or forecast.is_empty():
        return forecast
    factor = pl.col("queue").replace_strict(factors, default=1.0, return_dtype=pl.Float64)
    scaled = ("gpu_hours_p50", "gpu_hours_p90", *arrivals.SHARES)
    return forecast.with_columns((pl.col(c) * factor).alias(c) for c in scaled if c in forecast.columns)


def summary(outcome: PlanOutcome) -> pl.DataFrame:
    """Per day over every queue and GPU type: the figures of SCENARIO_COLUMNS from `day` to `longest_wait_queue`."""
    rows = outcome.plan.rows
    weight = pl.col("expected_gpu_hours_p50").fill_null(0.0)
    waited = rows.filter(pl.col("expected_wait_hours").is_not_null())
    waits = waited.group_by("day").agg(
        pl.when(weight.sum() > 0).then((pl.col("expected_wait_hours") * weight).sum() / weight.sum())
        .otherwise(pl.col("expected_wait_hours").mean()).alias("expected_wait_hours"),
        pl.col("expected_wait_hours").max().alias("longest_wait_hours"),
        pl.col("queue").sort_by("expected_wait_hours", "queue", descending=[True, False]).first()
        .alias("longest_wait_queue"))
    without = outcome.starts.jobs.filter(pl.col("expected_wait_hours").is_null() & pl.col("gpu_type").is_not_null())
    owned_known = rows.filter(pl.col("gpus_owned").is_not_null())
    return (rows.group_by("day").agg(
        # the site's P90 total (tasks/plan/arrivals.py: the rows' parts of it), not their P90s summed (issue 53), and
        # its pair, the site total's own P50 (session 14), beside the queues' own P50s summed (gpus_total_p50)
        pl.col("gpus_total_p50").sum(),
        pl.col("shortfall_total_p50").sum().alias("gpus_short_p50"),
        pl.col("shortfall_total_p90").sum().alias("gpus_short_p90"))
        .join(arrivals.site_gpus(rows).rename({"gpus_site_p90": "gpus_total_p90"}), on="day", how="left")
        .join(owned_known.group_by("day").agg(pl.col("gpus_owned").sum()), on="day", how="left")
        .join(waits, on="day", how="left")
        .join(unplaceable_gpus(outcome.plan.unplaceable, rows["day"].unique()), on="day", how="left")
        .with_columns(pl.lit(outcome.plan.unplaceable.height, pl.Int64).alias("unplaceable_jobs"),
                      pl.col("gpus_unplaceable").fill_null(0),
                      pl.lit(without.height if _owned_known(rows) else None, pl.Int64).alias("jobs_without_start"))
        .sort("day"))


def unplaceable_gpus(unplaceable: pl.DataFrame, days: pl.Series) -> pl.DataFrame:
    """Per plan day (`day`, `gpus_unplaceable`): the GPUs the jobs that fit no GPU of their queue would hold that day
    had a GPU held them from their first day for their P90 run time (unknown: one day, as the packing counts it): the
    GPU counts of the jobs running that day. Never below what a packing of them needs that day, so GPUs added that
    hold them never raise a day's short plus this (review 66a S2-1: one figure for the whole plan, charged on every
    day, grew with the horizon instead of with the work)."""
    if not unplaceable.height or not days.len():
        return pl.DataFrame(schema={"day": pl.Date, "gpus_unplaceable": pl.Int64})
    start = days.min()
    offset = (unplaceable["first_day"] - start).dt.total_days().to_numpy().astype(np.int64)
    hours = unplaceable["hours_p90"].fill_nan(None).fill_null(capacity.DAY_HOURS).to_numpy().astype(np.float64)
    row, day, _ = capacity.segments(offset, hours, days.len())
    gpus = unplaceable["gpu_count"].fill_null(1).clip(1).to_numpy()[row]
    return (pl.DataFrame({"day": day, "gpus": gpus}).group_by("day").agg(pl.col("gpus").sum().alias("gpus_unplaceable"))
            .select((pl.lit(start) + pl.duration(days=pl.col("day"))).alias("day"),
                    pl.col("gpus_unplaceable").cast(pl.Int64)))


def _owned_known(rows: pl.DataFrame) -> bool:
    return rows["gpus_owned"].null_count() < rows.height


def scenario_rows(baseline: PlanOutcome, planned: dict[str, PlanOutcome | str],
                  scenarios: tuple[Scenario, ...], notes: dict[str, str] | None = None) -> pl.DataFrame:
    """`plan_scenarios`' rows (SCENARIO_COLUMNS): the baseline's days, then each scenario's, with what changed from
    the baseline; a failed scenario (its value in `planned` is the reason) as one row with no day. A planned
    row's `reason` (the baseline's too) is its words in `notes` (`coverage`: the days past the demand forecast), else
    null."""
    base = summary(baseline)
    frames = [_labelled(base.with_columns(pl.lit((notes or {}).get(BASELINE), pl.String).alias("reason")), BASELINE,
                        "planned", "the inventory on file")]
    compared = base.select("day", *[pl.col(c).alias(f"_{c}") for c in
                                    ("gpus_short_p90", "gpus_owned", "expected_wait_hours", "unplaceable_jobs")])
    for s in scenarios:
        got = planned[s.name]
        if isinstance(got, str):
            frames.append(pl.DataFrame([{"scenario": s.name, "status": "failed", "changes": s.changes(), "reason": got}],
                                       schema=SCENARIO_SCHEMA))
            continue
        rows = summary(got).join(compared, on="day", how="left").with_columns(
            *[(pl.col(c) - pl.col(f"_{c}")).alias(f"{c}_vs_baseline") for c in
              ("gpus_short_p90", "gpus_owned", "expected_wait_hours", "unplaceable_jobs")])
        said = pl.lit((notes or {}).get(s.name), pl.String).alias("reason")
        frames.append(_labelled(rows.with_columns(said), s.name, "planned", s.changes()))
    return pl.concat([f.select(SCENARIO_COLUMNS) for f in frames], how="vertical")


def _labelled(frame: pl.DataFrame, name: str, status: str, changes: str) -> pl.DataFrame:
    frame = frame.with_columns(pl.lit(name).alias("scenario"), pl.lit(status).alias("status"),
                               pl.lit(changes).alias("changes"))
    return frame.with_columns(*[pl.lit(None, dtype).alias(c) for c, dtype in SCENARIO_SCHEMA.items()
                                if c not in frame.columns]).select(SCENARIO_COLUMNS).cast(SCENARIO_SCHEMA)


def plan_scenarios(inputs: PlanInputs, inventory: Inventory | None, days: int, baseline: PlanOutcome,
                   scenarios: tuple[Scenario, ...], cache: dict | None = None, progress=None) -> pl.DataFrame:
    """Every scenario planned beside `baseline` (see the module doc): `plan_scenarios`' rows. `cache`: the baseline's
    packings (`capacity.plan_capacity`). Never raises for a scenario: one that fails (a queue the plan does not know
    tonight, a remove past what is owned, anything raised while planning it) is a `failed` row with the reason."""
    known = known_queues(inputs, inventory)
    planned: dict[str, PlanOutcome | str] = {}
    said = coverage(inputs.forecast, baseline)
    notes: dict[str, str] = {BASELINE: said} if said else {}
    for s in scenarios:
        try:
            if unknown := unknown_queues((s,), known):
                raise ScenarioFailed(unknown[0].split(": ", 1)[1])
            planned[s.name] = plan_once(inputs, edited_inventory(inventory, s), s.plan_days or days,
                                        scaled_forecast(inputs.forecast, s), cache)
            if said := coverage(inputs.forecast, planned[s.name]):
                notes[s.name] = said
        except Exception as exc:  # noqa: BLE001  (a failing scenario never stops the baseline: recorded as failed)
            planned[s.name] = str(exc) if isinstance(exc, ScenarioFailed) else f"{type(exc).__name__}: {exc}"
        if progress:
            got = planned[s.name]
            progress(f"scenario {s.name!r}: " + (f"failed: {got}" if isinstance(got, str) else "planned")
                     + (f" ({notes[s.name]})" if s.name in notes else ""))
    return scenario_rows(baseline, planned, scenarios, notes)


def coverage(forecast: pl.DataFrame, outcome: PlanOutcome) -> str | None:
    """The plan's days the demand forecast does not cover (a `plan_days` past it: no expected arrivals on them), in
    a few words for the what-if table (the plan's own note, `arrivals.coverage_notes`, says it at length, once);
    None when it covers them all, or when there is no forecast at all (the plan's note says so for every row alike)."""
    if forecast.is_empty() or outcome.plan.rows.is_empty():
        return None
    days, known = outcome.plan.rows["day"].unique(), forecast["day"]
    missed = days.filter(~days.is_in(known.implode())).len()
    if not missed:
        return None
    return (f"{missed} of its {days.len()} days outside the demand forecast ({known.min()} to {known.max()}): "
            f"no expected arrivals on them")
