"""What-if plans (tasks/plan/scenarios.py, issue 53 item 4): the inventory edits, each scenario planned beside the
baseline from the same inputs, a failing one recorded and never stopping the others, and what changed."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta

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
    assert (site["gpus_total_p90"] + 1).to_list() == own.sort("day")["gpus_total_p90"].to_list()
    # its pair (session 14): gpus_site_p50 the site total's own P50 (by_day's gpus_site_p50), here half of big's own
    # 48 GPU-hours a day (1 GPU, not 2) beside gpus_total_p50, the queues' own P50s summed
    halved = replace(inputs, forecast=inputs.forecast.with_columns((pl.col("gpu_hours_p50") / 2).alias(
        "gpu_hours_p50_of_total")))
    outcome = scenarios.plan_once(halved, INVENTORY, 3)
    site = scenarios.summary(outcome).sort("day")
    assert site["gpus_site_p50"].to_list() == arrivals.by_day(outcome.plan.rows)["gpus_site_p50"].to_list()
    assert (site["gpus_site_p50"] + 1).to_list() == site["gpus_total_p50"].to_list()
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
