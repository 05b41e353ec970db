"""What-if plans (tasks/plan/scenarios.py, issue 53 item 4): the inventory edits, each scenario planned beside the
baseline from the same inputs, a failing one recorded and never stopping the others, and what changed."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from gpucast.records.inventory import Inventory, Owned
from gpucast.records.scenario import GpuChange, Move, Scale, Scenario
from gpucast.tasks.plan import arrivals, capacity, scenarios
from gpucast.tasks.plan.arrivals import FORECAST_SCHEMA, PACKING_SCHEMA
from gpucast.tasks.plan.starts import RUNNING_SCHEMA

START = date(2026, 11, 23)
INVENTORY = Inventory("inventory.yaml", (Owned("big", "A100-80GB", 2, 80.0), Owned("small", "L4-24GB", 1, 24.0),
                                         Owned("small", "A100-40GB", 3, 40.0)))


def _scenario(name: str, **edits) -> Scenario:
    return Scenario(name, f"what-if.yaml:{len(name)}", **edits)


def _inputs(forecast_p50: float = 48.0) -> scenarios.PlanInputs:
    # big: 4 one-day jobs of 70 GB (one per GPU); small: a 20 GB job (L4) and a 30 GB one (A100-40GB)
    jobs = pl.DataFrame([(f"b{i}", "big", START, 1, 70.0, 24.0, 24.0) for i in range(4)]
                        + [("s1", "small", START, 1, 20.0, 5.0, 6.0), ("s2", "small", START, 1, 30.0, 5.0, 6.0)],
                        schema=dict(zip(capacity.JOB_COLUMNS, (pl.String, pl.String, pl.Date, pl.Int64, pl.Float64,
                                                               pl.Float64, pl.Float64), strict=True)), orient="row")
    forecast = pl.DataFrame([(START + timedelta(days=d), "big", "A100-80GB", forecast_p50, forecast_p50)
                             for d in range(3)], schema=FORECAST_SCHEMA, orient="row")
    return scenarios.PlanInputs(jobs, pl.DataFrame(schema=RUNNING_SCHEMA), forecast, pl.DataFrame(schema=PACKING_SCHEMA),
                                START, None, 80.0)


def test_the_edits_apply_move_then_remove_then_add():
    s = _scenario("s", move=(Move("big", "H100-80GB", None),), remove=(GpuChange("small", "L4-24GB", None),),
                  add=(GpuChange("big", "H100-80GB", 2), GpuChange("new", "L4-24GB", 1)))
    got = {(o.queue, o.gpu_type): o.count for o in scenarios.edited_inventory(INVENTORY, s).owned}
    # big's 2 A100s become 2 H100s, +2; small's L4s all retired (its A100-40GBs stay); a queue with none gets its own
    assert got == {("big", "H100-80GB"): 4, ("small", "A100-40GB"): 3, ("new", "L4-24GB"): 1}
    only = scenarios.edited_inventory(INVENTORY, _scenario("t", remove=(GpuChange("big", "A100-80GB", None),)))
    assert ("big", "A100-80GB", 0) in {(o.queue, o.gpu_type, o.count) for o in only.owned}  # its only type: owns 0


def test_node_sizes_stay_with_their_queue_and_only_new_gpus_borrow_the_types():
    nodes = Inventory("inventory.yaml", (Owned("a", "H100-80GB", 16, 80.0, 8), Owned("b", "H100-80GB", 4, 80.0)))
    s = _scenario("s", add=(GpuChange("a", "H100-80GB", 8), GpuChange("c", "H100-80GB", 8)))
    got = {(o.queue, o.gpu_type): o.gpus_per_node for o in scenarios.edited_inventory(nodes, s).owned}
    # b's H100s have no node size on file and get none (not a's 8); c's new H100s take the type's size on file
    assert got == {("a", "H100-80GB"): 8, ("b", "H100-80GB"): None, ("c", "H100-80GB"): 8}


@pytest.mark.parametrize("remove, reason", [
    (GpuChange("small", "L4-24GB", 5), "remove: 5 L4-24GB from queue 'small', which owns 1"),
    (GpuChange("small", "H100-80GB", 1), "remove: queue 'small' owns no H100-80GB (it owns 1 L4-24GB, 3 A100-40GB)"),
])
def test_removing_what_a_queue_does_not_own_fails_the_scenario(remove, reason):
    with pytest.raises(scenarios.ScenarioFailed, match=reason.replace("(", r"\(").replace(")", r"\)")):
        scenarios.edited_inventory(INVENTORY, _scenario("s", remove=(remove,)))


def _site_by_hand(rows: pl.DataFrame, q: str) -> list[int]:
    """The site's GPUs a day at `q`: the rows' parts of the site total's forecast summed, at least one queue's own
    GPUs (its rows' `gpus_total_{q}` summed; newcomer 26 P2: a total is never below one of its parts)."""
    parts = rows.group_by("day").agg(pl.col(f"gpus_total_{q}_of_total").sum()).sort("day")
    queue = rows.group_by("day", "queue").agg(pl.col(f"gpus_total_{q}").sum()).group_by("day").agg(
        pl.col(f"gpus_total_{q}").max()).sort("day")
    return [max(a, b) for a, b in zip(parts[f"gpus_total_{q}_of_total"], queue[f"gpus_total_{q}"], strict=True)]


def test_scenarios_are_planned_beside_the_baseline_and_a_failing_one_stops_nothing():
    inputs, cache = _inputs(), {}
    baseline = scenarios.plan_once(inputs, INVENTORY, 3, cache=cache)
    drawn = (_scenario("buy 2", add=(GpuChange("big", "A100-80GB", 2),)),
             _scenario("too many", remove=(GpuChange("small", "L4-24GB", 5),)),
             _scenario("nowhere", scale=(Scale("ghost", 2.0),)),
             _scenario("double", scale=(Scale("big", 2.0),), plan_days=2))
    rows = scenarios.plan_scenarios(inputs, INVENTORY, 3, baseline, drawn, cache)
    by = {name: sub.sort("day") for (name,), sub in rows.partition_by("scenario", as_dict=True).items()}
    base = by["baseline"]
    # the names (issue 53 item 3): a scenario's gpus_total_p90 is the site's P90 total (`by_day`'s gpus_site_p90, the
    # rows' gpus_total_p90_of_total summed), not capacity_plan's gpus_total_p90 (each row's own P90) summed; its
    # gpus_short_p90 the queues' own shortfalls summed (`by_day`'s shortfall_total_p90), not the site's short
    days = arrivals.by_day(baseline.plan.rows)
    assert base["gpus_total_p90"].to_list() == days["gpus_site_p90"].to_list()
    assert base["gpus_short_p90"].to_list() == days["shortfall_total_p90"].to_list()
    # ... told apart where big's part of the site total's P90 (24 GPU-hours a day: 1 GPU) is below its own (48: 2)
    shared = replace(inputs, forecast=inputs.forecast.with_columns((pl.col("gpu_hours_p90") / 2).alias(
        "gpu_hours_p90_of_total")))
    outcome = scenarios.plan_once(shared, INVENTORY, 3)
    site, own = scenarios.summary(outcome).sort("day"), outcome.plan.rows.group_by("day").agg(pl.col("gpus_total_p90").sum())
    assert site["gpus_total_p90"].to_list() == arrivals.by_day(outcome.plan.rows)["gpus_site_p90"].to_list()
    assert site["gpus_total_p90"].to_list() == _site_by_hand(outcome.plan.rows, "p90")
    assert (site["gpus_total_p90"] < own.sort("day")["gpus_total_p90"]).any()  # told apart from the own P90s summed
    # its pair (session 14): gpus_site_p50 the site total's own P50 (by_day's gpus_site_p50), here half of big's own
    # 48 GPU-hours a day (1 GPU, not 2) beside gpus_total_p50, the queues' own P50s summed
    halved = replace(inputs, forecast=inputs.forecast.with_columns((pl.col("gpu_hours_p50") / 2).alias(
        "gpu_hours_p50_of_total")))
    outcome = scenarios.plan_once(halved, INVENTORY, 3)
    site = scenarios.summary(outcome).sort("day")
    assert site["gpus_site_p50"].to_list() == arrivals.by_day(outcome.plan.rows)["gpus_site_p50"].to_list()
    assert site["gpus_site_p50"].to_list() == _site_by_hand(outcome.plan.rows, "p50")
    assert (site["gpus_site_p50"] < site["gpus_total_p50"]).any()
    assert base["gpus_site_p50"].to_list() == base["gpus_total_p50"].to_list()  # no total forecast: the same sum
    # big: 4 one-day jobs on day 1 + 48 GPU-hours expected a day (2 GPUs) against 2 owned: 4 short on day 1, then 0
    assert base.filter(pl.col("day") == START)["gpus_short_p90"].item() >= 4
    buy = by["buy 2"]
    assert buy["gpus_owned_vs_baseline"].to_list() == [2, 2, 2]
    assert (buy["gpus_short_p90_vs_baseline"] <= 0).all() and buy["gpus_short_p90_vs_baseline"][0] == -2
    assert buy["expected_wait_hours_vs_baseline"][0] < 0  # more GPUs: a shorter wait
    assert buy["changes"][0] == "+2 A100-80GB in big"
    failed = {n: by[n].row(0, named=True) for n in ("too many", "nowhere")}
    assert all(r["status"] == "failed" and r["day"] is None for r in failed.values())
    assert failed["too many"]["reason"] == "remove: 5 L4-24GB from queue 'small', which owns 1"
    assert failed["nowhere"]["reason"].startswith("scenario 'nowhere': unknown queue 'ghost' (the queues known: big")
    double = by["double"]
    assert double.height == 2  # its own horizon
    assert (double["gpus_total_p50"] - base["gpus_total_p50"][:2]).to_list() == [2, 2]  # 96 GPU-hours a day: 2 more
    assert base["reason"].is_null().all() and buy["reason"].is_null().all() and double["reason"].is_null().all()


def test_a_scenario_planning_past_the_demand_forecast_says_so():
    """A `plan_days` longer than the demand forecast plans days with no expected arrivals: the scenario's `reason`
    and its progress line say which (newcomer 25: a 21-day scenario beside a 14-day forecast read as a quiet week)."""
    inputs, said = _inputs(), []
    baseline = scenarios.plan_once(inputs, INVENTORY, 3)
    rows = scenarios.plan_scenarios(inputs, INVENTORY, 3, baseline, (_scenario("longer", plan_days=5),),
                                    progress=said.append)
    longer = rows.filter(pl.col("scenario") == "longer")
    assert longer.height == 5 and longer["reason"].n_unique() == 1
    assert longer["reason"][0] == (f"2 of its 5 days outside the demand forecast ({START} to {START + timedelta(days=2)}): "
                                   "no expected arrivals on them")
    assert said == [f"scenario 'longer': planned ({longer['reason'][0]})"]
    from gpucast.tasks.report.render import scenario_table

    table = scenario_table(rows)
    assert table.filter(pl.col("scenario") == "longer")["reason"].item() == longer["reason"][0]
    assert table.filter(pl.col("scenario") == "baseline")["reason"].item() is None
    # a baseline past the forecast says so too, as does a scenario of its length; a scenario within it does not
    # (review 76 S2-1: judged against the baseline's, the baseline and the same length said nothing)
    past = scenarios.plan_once(inputs, INVENTORY, 5)
    rows = scenarios.plan_scenarios(inputs, INVENTORY, 5, past, (_scenario("same", scale=(Scale("big", 2.0),)),
                                                                 _scenario("two", plan_days=2)))
    said = {name: sub["reason"].unique().to_list() for (name,), sub in rows.partition_by("scenario", as_dict=True).items()}
    assert said["baseline"] == said["same"] == [longer["reason"][0]] and said["two"] == [None]


def test_a_scenario_that_only_changes_counts_packs_nothing_again(monkeypatch):
    inputs, cache = _inputs(), {}
    baseline = scenarios.plan_once(inputs, INVENTORY, 3, cache=cache)
    packed = []
    real = capacity._plan_queue
    monkeypatch.setattr(capacity, "_plan_queue", lambda queue, *a, **k: packed.append(queue) or real(queue, *a, **k))
    scenarios.plan_scenarios(inputs, INVENTORY, 3, baseline, (
        _scenario("buy", add=(GpuChange("big", "A100-80GB", 2),)),
        _scenario("move", move=(Move("small", "A100-80GB", None),))), cache)
    assert packed == ["small"]  # the count owned does not change a packing; a move does, for its queue only


# --- adding GPUs never makes the plan worse (issue 53 item 4, session 14: the demo's "buy 16 H100" raised a100-80g's
# P90 shortfall: the H100s, 80 GB like the A100s and last by name, became the queue's "largest" type, took its
# `unknown` series, and its two rows then each kept their series' own P90 instead of the queue's)

def _two_series_inputs() -> scenarios.PlanInputs:
    """big: 3 known 70 GB one-day jobs a day and one of unknown size on day 1; its demand forecast in two series, the
    A100-80GB one whose own P90 (240 GPU-hours) is above its part of the queue's P90 (120 of the queue's 144)."""
    days = range(3)
    jobs = pl.DataFrame([(f"b{d}{i}", "big", START + timedelta(days=d), 1, 70.0, 24.0, 24.0) for d in days for i in range(3)]
                        + [("u", "big", START, 1, None, 24.0, 24.0)],
                        schema=dict(zip(capacity.JOB_COLUMNS, (pl.String, pl.String, pl.Date, pl.Int64, pl.Float64,
                                                               pl.Float64, pl.Float64), strict=True)), orient="row")
    forecast = pl.DataFrame(
        [(START + timedelta(days=d), "big", t, p50, p90, p90_q) for d in days
         for t, p50, p90, p90_q in (("A100-80GB", 48.0, 240.0, 120.0), ("unknown", 12.0, 48.0, 24.0))],
        schema={**FORECAST_SCHEMA, "gpu_hours_p90_of_queue": pl.Float64}, orient="row")
    return scenarios.PlanInputs(jobs, pl.DataFrame(schema=RUNNING_SCHEMA), forecast, pl.DataFrame(schema=PACKING_SCHEMA),
                                START, None, 80.0)


def _short(outcome: scenarios.PlanOutcome) -> list[tuple[int, int]]:
    """Per day: GPUs short at P90 and at P50 (compared as pairs: neither may rise)."""
    return list(scenarios.summary(outcome).sort("day").select("gpus_short_p90", "gpus_short_p50").iter_rows())


@pytest.mark.parametrize("gpu_type", ["H100-80GB", "A100-80GB", "H200-141GB", "L4-24GB"])
def test_adding_gpus_of_a_type_to_a_queue_never_raises_its_shortfall(gpu_type):
    inputs, owned = _two_series_inputs(), Inventory("inventory.yaml", (Owned("big", "A100-80GB", 4, 80.0),))
    base = scenarios.plan_once(inputs, owned, 3)
    for n in (1, 2, 16):
        got = scenarios.plan_once(inputs, scenarios.edited_inventory(owned, _scenario("buy", add=(GpuChange("big", gpu_type, n),))), 3)
        assert all(g[0] <= b[0] and g[1] <= b[1] for g, b in zip(_short(got), _short(base), strict=True)), \
            (n, _short(got), _short(base))
        assert got.plan.unplaceable.height <= base.plan.unplaceable.height


def _demo_inputs() -> scenarios.PlanInputs:
    """The demo inventory's three queues, each with known jobs of a few sizes that overflow what it owns, jobs of
    unknown size, and a demand forecast in its own type's series and an `unknown` one, the typed series' own P90
    above its part of the queue's P90 (as on the demo's nights)."""
    sizes = {"a100-80g": (70.0, 35.0, 12.0), "a100-40g": (35.0, 18.0), "l4-24g": (20.0, 10.0)}
    types = {"a100-80g": "A100-80GB", "a100-40g": "A100-40GB", "l4-24g": "L4-24GB"}
    jobs = [(f"{q}-{d}-{i}", q, START + timedelta(days=d), 1 + i % 2, sizes[q][i % len(sizes[q])], 20.0, 30.0)
            for q in sizes for d in range(3) for i in range(40)]
    jobs += [(f"{q}-u{i}", q, START, 1, None, 24.0, 24.0) for q in sizes for i in range(3)]
    frame = pl.DataFrame(jobs, schema=dict(zip(capacity.JOB_COLUMNS, (pl.String, pl.String, pl.Date, pl.Int64,
                                                                      pl.Float64, pl.Float64, pl.Float64), strict=True)),
                         orient="row")
    forecast = pl.DataFrame(
        [(START + timedelta(days=d), q, t, p50, p90, p90_q) for d in range(3) for q in sizes
         for t, p50, p90, p90_q in ((types[q], 300.0, 1500.0, 700.0), ("unknown", 40.0, 200.0, 100.0))],
        schema={**FORECAST_SCHEMA, "gpu_hours_p90_of_queue": pl.Float64}, orient="row")
    return scenarios.PlanInputs(frame, pl.DataFrame(schema=RUNNING_SCHEMA), forecast, pl.DataFrame(schema=PACKING_SCHEMA),
                                START, None, 80.0)


@pytest.mark.parametrize("queue", ["a100-80g", "a100-40g", "l4-24g"])
def test_adding_any_gpus_to_a_queue_of_the_demo_never_raises_the_shortfall(queue):
    """Every catalogue type, 1 or 16 of them: the P90 shortfall of no day rises, nor the jobs that fit no GPU."""
    from pathlib import Path

    from gpucast.records import catalog
    from gpucast.records.inventory import load_inventory

    demo = load_inventory(Path(capacity.__file__).parents[2] / "records" / "reference" / "demo_inventory.yaml")
    inputs = _demo_inputs()
    base = scenarios.plan_once(inputs, demo, 3)
    worse = []
    memory = {o.memory_gb for o in demo.owned if o.queue == queue}
    same = sorted(t for t, g in catalog.gpus().items() if g.memory_gb in memory)
    assert len(same) >= 2  # the queue's own type and another of its memory
    for gpu_type in sorted(catalog.gpus()):
        for n in (1, 16):
            got = scenarios.plan_once(inputs, scenarios.edited_inventory(demo, _scenario("buy", add=(GpuChange(queue, gpu_type, n),))), 3)
            if any(g[0] > b[0] or g[1] > b[1] for g, b in zip(_short(got), _short(base), strict=True)) or \
                    got.plan.unplaceable.height > base.plan.unplaceable.height:
                worse.append((gpu_type, n, _short(got), _short(base), got.plan.unplaceable.height))
    assert not worse, worse
    # and 16 of them lower it where the queue was short (their spare GPUs cover its own type's shortfall)
    more = scenarios.plan_once(inputs, scenarios.edited_inventory(demo, _scenario("buy", add=(GpuChange(queue, same[-1], 16),))), 3)
    assert sum(p90 for p90, _ in _short(more)) < sum(p90 for p90, _ in _short(base))
    # ... and shorten the wait of a job submitted on day 1 as 16 more of the queue's own type do (they are lent to it)
    own = scenarios.plan_once(inputs, scenarios.edited_inventory(demo, _scenario("own", add=(
        GpuChange(queue, next(o.gpu_type for o in demo.owned if o.queue == queue), 16),))), 3)
    waits = [scenarios.summary(o)["expected_wait_hours"][0] for o in (base, more, own)]
    assert waits[1] == waits[2] < waits[0]


def test_a_rows_queued_jobs_shortfall_is_covered_like_its_total_and_never_above_it():
    """Review 64b S1-1: a queue of 1 A100-40GB and 10 idle A100-80GB, three 30 GB jobs a day on the 40 GB type: the
    80 GB type's spare GPUs cover the queued jobs' shortfall as they cover the total's (before: 2 short, total 0)."""
    jobs = pl.DataFrame([(f"s{i}", "q", START, 1, 30.0, 24.0, 24.0) for i in range(3)], orient="row",
                        schema=dict(zip(capacity.JOB_COLUMNS, (pl.String, pl.String, pl.Date, pl.Int64, pl.Float64,
                                                               pl.Float64, pl.Float64), strict=True)))
    inputs = scenarios.PlanInputs(jobs, pl.DataFrame(schema=RUNNING_SCHEMA), pl.DataFrame(schema=FORECAST_SCHEMA),
                                  pl.DataFrame(schema=PACKING_SCHEMA), START, None, 80.0)
    inventory = Inventory("i.yaml", (Owned("q", "A100-40GB", 1, 40.0), Owned("q", "A100-80GB", 10, 80.0)))
    rows = scenarios.plan_once(inputs, inventory, 1).plan.rows
    assert rows.filter(pl.col("gpu_type") == "A100-40GB")["gpus_needed_p90"].to_list() == [3]
    for q in ("p50", "p90"):
        assert rows[f"shortfall_{q}"].to_list() == [0, 0]
        assert (rows[f"shortfall_total_{q}"] >= rows[f"shortfall_{q}"]).all()


def test_added_gpus_lend_what_the_jobs_placed_on_them_do_not_ask_for():
    """Review 64b S2-3: 16 H200s added to a queue of A100-80GBs for its one 120 GB job lend the other 15 to its own
    type: the A100s' jobs wait as with 15 more A100s (before: nothing was lent, their waits did not move)."""
    from pathlib import Path

    from gpucast.records.inventory import load_inventory

    demo = load_inventory(Path(capacity.__file__).parents[2] / "records" / "reference" / "demo_inventory.yaml")
    base_inputs = _demo_inputs()
    big = pl.DataFrame([("huge", "a100-80g", START, 1, 120.0, 20.0, 30.0)], schema=base_inputs.jobs.schema, orient="row")
    inputs = replace(base_inputs, jobs=pl.concat([base_inputs.jobs, big]))

    def own_wait(edit: GpuChange | None) -> tuple[float, pl.DataFrame]:
        inv = demo if edit is None else scenarios.edited_inventory(demo, _scenario("s", add=(edit,)))
        got = scenarios.plan_once(inputs, inv, 3)
        row = got.plan.rows.filter((pl.col("queue") == "a100-80g") & (pl.col("gpu_type") == "A100-80GB"))
        return row["expected_wait_hours"][0], got.starts.jobs

    base, _ = own_wait(None)
    h200, jobs = own_wait(GpuChange("a100-80g", "H200-141GB", 16))
    fifteen, _ = own_wait(GpuChange("a100-80g", "A100-80GB", 15))
    assert h200 == fifteen < base
    # the 120 GB job starts on the H200s it is placed on (it fit no GPU of the queue before)
    assert jobs.filter(pl.col("job_id") == "huge")["gpu_type"].to_list() == ["H200-141GB"]
    assert jobs.filter(pl.col("job_id") == "huge")["expected_wait_hours"][0] == 0.0


def test_gpus_added_never_raise_the_shortfall_plus_the_gpus_of_jobs_that_fit_none():
    """Review 64b S2-1: a queue of 4 A100-80GBs with ten 120 GB jobs and two 40 GB ones. 2 H200s added hold the big
    jobs, which then count as short where they counted as unplaceable: the shortfall rises from 0 to 8, but the
    shortfall plus the GPUs of the jobs that fit no GPU (`gpus_unplaceable`, 10) does not; removing the H200s again
    is the mirror case."""
    jobs = pl.DataFrame([(f"big{i}", "big", START, 1, 120.0, 24.0, 24.0) for i in range(10)]
                        + [(f"s{i}", "big", START, 1, 40.0, 24.0, 24.0) for i in range(2)],
                        schema=dict(zip(capacity.JOB_COLUMNS, (pl.String, pl.String, pl.Date, pl.Int64, pl.Float64,
                                                               pl.Float64, pl.Float64), strict=True)), orient="row")
    inputs = scenarios.PlanInputs(jobs, pl.DataFrame(schema=RUNNING_SCHEMA), pl.DataFrame(schema=FORECAST_SCHEMA),
                                  pl.DataFrame(schema=PACKING_SCHEMA), START, None, 80.0)
    owned = Inventory("inventory.yaml", (Owned("big", "A100-80GB", 4, 80.0),))
    base = scenarios.plan_once(inputs, owned, 1)
    for n in (1, 2, 16):
        buy = scenarios.plan_once(inputs, scenarios.edited_inventory(
            owned, _scenario("buy", add=(GpuChange("big", "H200-141GB", n),))), 1)
        rows = scenarios.scenario_rows(base, {"buy": buy}, (_scenario("buy", add=(GpuChange("big", "H200-141GB", n),)),))
        day = {r["scenario"]: r for r in rows.iter_rows(named=True)}
        assert (day["baseline"]["gpus_short_p90"], day["baseline"]["gpus_unplaceable"]) == (0, 10)
        assert day["buy"]["gpus_unplaceable"] == 0 and day["buy"]["gpus_short_p90"] == max(10 - n, 0)
        assert day["buy"]["gpus_short_p90"] + day["buy"]["gpus_unplaceable"] <= 10


def test_an_added_type_keeps_whole_nodes_for_the_gangs_placed_on_it():
    """Review 65a S2-1: 16 H200s in nodes of 8 added for two 5-GPU 120 GB jobs keep two whole nodes (each gang runs
    on one node), so both start at once; keeping their 10 GPUs (a node and a part) made the second wait for the first."""
    from gpucast.records.scenario import Scenario as S
    from gpucast.tasks.plan import starts

    jobs = pl.DataFrame([(g, "q", START, 5, 120.0, 10.0, 10.0) for g in ("g1", "g2")],
                        schema=dict(zip(capacity.JOB_COLUMNS, (pl.String, pl.String, pl.Date, pl.Int64, pl.Float64,
                                                               pl.Float64, pl.Float64), strict=True)), orient="row")
    inv = Inventory("i", (Owned("q", "A100-80GB", 4, 80.0, 8), Owned("other", "H200-141GB", 8, 141.0, 8)))
    edited = scenarios.edited_inventory(inv, S("buy", "x:1", add=(GpuChange("q", "H200-141GB", 16),)))
    got = starts.job_starts(jobs, pl.DataFrame(schema=RUNNING_SCHEMA), edited, START).jobs
    assert got.select("job_id", "gpu_type", "expected_wait_hours").rows() == [
        ("g1", "H200-141GB", 0.0), ("g2", "H200-141GB", 0.0)]
    # without node sizes the GPU counts are kept as they are: 10 of 16, 6 lent; with nodes of 8, the nodes the jobs
    # touch placed at once (review 65b S3-2: single-GPU jobs fill a gang's node): two gangs and two singles 2 nodes,
    # a 5-GPU gang and three singles 1 node, a 12-GPU gang 2 nodes; three 5-GPU gangs on 16 GPUs cannot all start: all
    assert starts._kept(np.array([5, 5]), None, 16) == 10 and starts._kept(np.array([5, 5, 1, 1]), 8, 16) == 16
    assert starts._kept(np.array([5, 1, 1, 1]), 8, 16) == 8 and starts._kept(np.array([1, 1, 1, 5]), 8, 16) == 8
    assert starts._kept(np.array([12]), 8, 16) == 16 and starts._kept(np.array([5, 5, 5]), 8, 16) == 16


def test_an_added_type_keeps_the_nodes_its_running_jobs_hold_before_placing_the_gangs():
    """Review 66a S3-1: four single-GPU running jobs logged on H200 hold the first node's GPUs (as `fcfs` places
    them), so two pending 6-GPU gangs need two more nodes: 24 H200s added in nodes of 8 keep all 24 and both gangs
    start at once (placing the running jobs after the gangs kept 16, and the second gang waited 10 h)."""
    from gpucast.records.scenario import Scenario as S
    from gpucast.tasks.plan import starts

    jobs = pl.DataFrame([(g, "q", START, 6, 120.0, 10.0, 10.0) for g in ("g1", "g2")],
                        schema=dict(zip(capacity.JOB_COLUMNS, (pl.String, pl.String, pl.Date, pl.Int64, pl.Float64,
                                                               pl.Float64, pl.Float64), strict=True)), orient="row")
    running = pl.DataFrame([(f"r{i}", "q", "H200-141GB", 1, datetime(2026, 11, 23), 30.0) for i in range(4)],
                           schema=RUNNING_SCHEMA, orient="row")
    inv = Inventory("i", (Owned("q", "A100-80GB", 4, 80.0, 8), Owned("other", "H200-141GB", 8, 141.0, 8)))
    edited = scenarios.edited_inventory(inv, S("buy", "x:1", add=(GpuChange("q", "H200-141GB", 24),)))
    got = starts.job_starts(jobs, running, edited, START).jobs
    assert got.select("job_id", "expected_wait_hours").rows() == [("g1", 0.0), ("g2", 0.0)]
    assert starts._kept(np.array([6, 6]), 8, 24, held=4) == 24 and starts._kept(np.array([6]), 8, 24, held=4) == 16


def test_the_scenario_table_compares_the_short_plus_the_gpus_of_jobs_that_fit_none_while_they_run():
    """Review 65a S3-1, 66a S2-1: two 72 h 120 GB jobs in a queue of 4 A100-80GBs (6 GPU-days of work). One H200 added
    holds one of them at a time, so the GPU-days short rise from 0 (the jobs fitted no GPU: unplaceable, not short)
    while the short plus the GPUs of jobs that fit none falls from 2 to 1 a day for the 3 days they run: the table's
    `gpu_days_unmet_vs_baseline` is -3 and `day1_unmet_vs_baseline` -1 at any horizon (the jobs' GPUs charged on
    every day of the plan, as before session 17, made it -3, -11, -25 at 3, 7, 14 days)."""
    from gpucast.tasks.report.render import scenario_table

    jobs = pl.DataFrame([(f"big{i}", "big", START, 1, 120.0, 72.0, 72.0) for i in range(2)],
                        schema=dict(zip(capacity.JOB_COLUMNS, (pl.String, pl.String, pl.Date, pl.Int64, pl.Float64,
                                                               pl.Float64, pl.Float64), strict=True)), orient="row")
    inputs = scenarios.PlanInputs(jobs, pl.DataFrame(schema=RUNNING_SCHEMA), pl.DataFrame(schema=FORECAST_SCHEMA),
                                  pl.DataFrame(schema=PACKING_SCHEMA), START, None, 80.0)
    owned = Inventory("inventory.yaml", (Owned("big", "A100-80GB", 4, 80.0),))
    buy = _scenario("buy", add=(GpuChange("big", "H200-141GB", 1),))
    for days in (3, 7, 14):
        rows = scenarios.scenario_rows(scenarios.plan_once(inputs, owned, days), {
            "buy": scenarios.plan_once(inputs, scenarios.edited_inventory(owned, buy), days)}, (buy,))
        baseline_days = rows.filter(pl.col("scenario") == "baseline")["gpus_unplaceable"].to_list()
        assert baseline_days == [2, 2, 2] + [0] * (days - 3)  # held while they would run, then given back
        table = {r["scenario"]: r for r in scenario_table(rows).iter_rows(named=True)}
        assert table["baseline"]["gpu_days_short_p90"] == 0 and table["baseline"]["their_gpus"] == 2
        assert table["buy"]["gpu_days_short_vs_baseline"] == 3  # the jobs now fit a GPU type the queue lacks
        assert (table["baseline"]["gpu_days_unmet_p90"], table["buy"]["gpu_days_unmet_p90"]) == (6, 3)
        assert table["buy"]["gpu_days_unmet_vs_baseline"] == -3 and table["baseline"]["gpu_days_unmet_vs_baseline"] == 0
        assert table["buy"]["day1_unmet_vs_baseline"] == -1 and table["baseline"]["day1_unmet_vs_baseline"] == 0
    old = scenario_table(rows.with_columns(pl.lit(None, pl.Int64).alias("gpus_unplaceable")))  # recorded before 15
    assert old["day1_unmet_vs_baseline"].to_list() == [None, None]
    assert old["gpu_days_unmet_p90"].to_list() == [None, None] == old["gpu_days_unmet_vs_baseline"].to_list()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gpus_added_never_raise_a_days_short_plus_the_gpus_of_jobs_that_fit_none_on_mixed_queues(seed):
    """Review 67a S3-6: the per-day property (a day's `gpus_short_p90` + `gpus_unplaceable` never rises when GPUs are
    added to a queue the inventory lists) on seeded random queues: jobs of 40-300 GB, gangs of 1-12 GPUs, run times
    from half an hour to four days or unknown, first days before and after the plan's, plans of 1-14 days, nodes of 8
    or none, with and without a forecast, one packing cache shared by the scenarios."""
    rng = np.random.default_rng(seed)
    schema = dict(zip(capacity.JOB_COLUMNS, (pl.String, pl.String, pl.Date, pl.Int64, pl.Float64, pl.Float64,
                                             pl.Float64), strict=True))
    for _ in range(6):
        hours = [None if h < 0 else h for h in rng.choice([0.5, 3.0, 23.0, 30.0, 72.0, 100.0, -1.0], 16)]
        jobs = pl.DataFrame([(f"j{i}", "big", START + timedelta(days=int(rng.integers(-2, 5))),
                              int(rng.choice([1, 1, 2, 4, 8, 12])), float(rng.choice([40.0, 100.0, 120.0, 150.0, 300.0])),
                              h, h) for i, h in enumerate(hours)], schema=schema, orient="row")
        days = int(rng.choice([1, 3, 7, 14]))
        forecast = pl.DataFrame([(START + timedelta(days=k), "big", "A100-80GB", 48.0, 96.0) for k in range(days)]
                                if rng.random() < 0.5 else [], schema=FORECAST_SCHEMA, orient="row")
        inputs = scenarios.PlanInputs(jobs, pl.DataFrame(schema=RUNNING_SCHEMA), forecast,
                                      pl.DataFrame(schema=PACKING_SCHEMA), START, None, 80.0)
        owned = Inventory("i.yaml", (Owned("big", "A100-80GB", int(rng.integers(1, 17)), 80.0,
                                           int(rng.choice([0, 8])) or None),))
        cache: dict = {}
        base = scenarios.plan_once(inputs, owned, days, cache=cache)
        for gpu_type, n in (("H200-141GB", 1), ("H200-141GB", 8), ("MI300X-192GB", 2), ("MI300X-192GB", 32)):
            buy = _scenario("buy", add=(GpuChange("big", gpu_type, n),))
            got = scenarios.plan_once(inputs, scenarios.edited_inventory(owned, buy), days, cache=cache)
            unmet = scenarios.scenario_rows(base, {"buy": got}, (buy,)).select(
                "scenario", "day", (pl.col("gpus_short_p90") + pl.col("gpus_unplaceable")).alias("unmet"))
            per_day = unmet.pivot("scenario", index="day", values="unmet")
            assert per_day.height == days and (per_day["buy"] <= per_day["baseline"]).all(), per_day
