"""`gpucast plan --scenario FILE` and the inventory's `scenarios:` as planners meet them (issue 53, items 4 and 5): the
what-ifs planned beside the plan and recorded per day, the bad input the issue names refused in one line with exit 2,
a failing scenario recorded while the plan goes on, and each pending job's expected start in pending_forecasts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpucast.flows.cli import main
from tests.flows.test_plan_flow import _demo_inventory, _queue_two_jobs_and_forecast_demand, _rows

SCENARIOS = """scenarios:
  - name: buy 4
    add: [{queue: a100-80g, gpu_type: A100-80GB, count: 4}]
  - name: busier
    scale: [{queue: a100-80g, factor: 3}]
    plan_days: 7
"""


@pytest.mark.usefixtures("prefect_harness")
def test_scenarios_are_planned_beside_the_plan_recorded_and_published(home, tmp_path, capsys):
    inventory = _demo_inventory(home)  # its queues and GPUs, and a scenario of its own that fails
    owned = inventory.read_text().split("scenarios:")[0]
    inventory.write_text(owned + "scenarios:\n  - name: retire too many\n"
                                 "    remove: [{queue: l4-24g, gpu_type: L4-24GB, count: 99}]\n")
    start = datetime.now(UTC).date()
    _queue_two_jobs_and_forecast_demand(start, forecast=False)
    _queue_two_jobs_and_forecast_demand(start, forecast=True)
    what_if = tmp_path / "what-if.yaml"
    what_if.write_text(SCENARIOS)
    assert main(["plan", "--plan-days", "14", "--scenario", str(what_if)]) == 0
    printed = capsys.readouterr().out
    # (a long scenario name wraps in its cell: "retire too" / "many")
    assert "what if:" in printed and "buy 4" in printed and "retire too" in printed and "failed" in printed
    published = home / "published.duckdb"
    runs = _rows(published, "SELECT scenario, status, count(*), count(day), min(reason) FROM current_plan_scenarios "
                            "GROUP BY ALL ORDER BY scenario")
    # the baseline and each scenario: a row per day; the inventory's failing one: one row with its reason, the plan made
    assert runs == [("baseline", "planned", 14, 14, None), ("busier", "planned", 7, 7, None),
                    ("buy 4", "planned", 14, 14, None),
                    ("retire too many", "failed", 1, 0, "remove: 99 L4-24GB from queue 'l4-24g', which owns 24")]
    assert _rows(published, "SELECT DISTINCT gpus_owned_vs_baseline, changes FROM current_plan_scenarios "
                            "WHERE scenario = 'buy 4'") == [(4, "+4 A100-80GB in a100-80g")]
    # 48 GPU-hours expected a day on a100-80g, three times as many: 4 more GPUs at P50 every day (2 -> 6)
    assert _rows(published, "SELECT DISTINCT b.gpus_total_p50 - a.gpus_total_p50 FROM current_plan_scenarios a "
                            "JOIN current_plan_scenarios b USING (day) WHERE a.scenario = 'baseline' AND "
                            "b.scenario = 'busier' AND a.day > ?", [start]) == [(4,)]
    # the two queued jobs (unknown size: a day each) start at once on the 48 A100-80GB: no wait
    assert _rows(published, "SELECT job_id, expected_start, expected_wait_hours FROM current_job_starts "
                            "ORDER BY job_id") == [("p1", start, 0.0), ("p2", start, 0.0)]
    assert _rows(published, "SELECT count(*) FROM current_capacity_plan WHERE expected_wait_hours IS NULL") == [(0,)]


@pytest.mark.parametrize("text, said", [
    # the bad input: an unknown GPU type or queue names it and the known ones; a count or factor names the field
    ("scenarios:\n  - name: s\n    add: [{queue: a100-80g, gpu_type: A100-81GB, count: 1}]\n",
     ":3: scenario 's': add[0].gpu_type: unknown GPU type 'A100-81GB' (the catalogue knows: "),
    ("scenarios:\n  - name: s\n    scale: [{queue: nope, factor: 2}]\n",
     ":2: scenario 's': unknown queue 'nope' (the queues known: a100-40g, a100-80g, l4-24g)"),
    ("scenarios:\n  - name: s\n    add: [{queue: a100-80g, gpu_type: A100-80GB, count: -3}]\n",
     ":3: scenario 's': add[0].count must be a whole number of GPUs 1-1,000,000, got -3"),
    ("scenarios:\n  - name: s\n    scale: [{queue: a100-80g, factor: .nan}]\n",
     ":3: scenario 's': scale[0].factor must be a number > 0 and at most 100, got nan"),
    ("scenarios:\n  - name: s\n    scale: [{queue: a100-80g, factor: 0}]\n", "scale[0].factor must be a number > 0"),
    ("scenarios: [\n", ":2: not valid YAML"),
])
@pytest.mark.usefixtures("prefect_harness")
def test_a_bad_scenario_file_exits_2_with_one_line(home, tmp_path, capsys, text, said):
    _demo_inventory(home)
    what_if = tmp_path / "what-if.yaml"
    what_if.write_text(text)
    assert main(["plan", "--scenario", str(what_if)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"gpucast plan: {what_if}") and said in err[-1], err
