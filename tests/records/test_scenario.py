"""What-if scenario files (records/scenario.py, issue 53 item 4): what a good file holds, and every mistake the file
itself shows refused in one line naming the file, line, scenario and field (the CLI exits 2 on it)."""

from __future__ import annotations

import re

import pytest

from gpucast.records.inventory import InventoryError, load_inventory
from gpucast.records.scenario import GpuChange, Move, Scale, ScenarioError, load_scenarios, unknown_queues

GOOD = """scenarios:
  - name: buy 16 H100
    add: [{queue: a100-80g, gpu_type: h100 80gb, count: 16}]
  - name: retire and move
    remove:
      - {queue: a100-40g, gpu_type: A100-40GB, count: all}
    move: {queue: l4-24g, gpu_type: A100-80GB}
  - name: busy month
    scale: [{queue: a100-80g, factor: 1.3}]
    plan_days: 28
"""


def _write(tmp_path, text: str):
    path = tmp_path / "what-if.yaml"
    path.write_text(text)
    return path


def test_a_good_file_reads_as_typed_edits(tmp_path):
    buy, retire, busy = load_scenarios(_write(tmp_path, GOOD))
    assert buy.add == (GpuChange("a100-80g", "H100-80GB", 16),)  # any catalogue spelling, kept canonical
    assert retire.remove == (GpuChange("a100-40g", "A100-40GB", None),)  # `all`
    assert retire.move == (Move("l4-24g", "A100-80GB", None),)  # one edit without its list
    assert busy.scale == (Scale("a100-80g", 1.3),) and busy.plan_days == 28
    assert buy.source.endswith("what-if.yaml:2") and busy.queues() == ["a100-80g"]
    assert retire.changes() == "l4-24g moved to A100-80GB (as many as it owns); -all A100-40GB in a100-40g"
    assert busy.changes() == "a100-80g arrivals x1.3; 28 days"


@pytest.mark.parametrize("edit, line, message", [
    # the issue's: an unknown GPU type names it and the known ones; negative counts, factor <= 0 or NaN name the field
    ("add: [{queue: q, gpu_type: A100-81GB, count: 1}]", 3, "add[0].gpu_type: unknown GPU type 'A100-81GB' (the "
                                                             "catalogue knows: "),
    ("add: [{queue: q, gpu_type: A100-80GB, count: -4}]", 3, "add[0].count must be a whole number of GPUs 1-"),
    ("remove: [{queue: q, gpu_type: A100-80GB, count: -1}]", 3, "remove[0].count must be a whole number of GPUs 1-"),
    ("move: [{queue: q, gpu_type: A100-80GB, count: -2}]", 3, "move[0].count must be a whole number of GPUs 0-"),
    ("add: [{queue: q, gpu_type: A100-80GB, count: 1.5}]", 3, "add[0].count must be a whole number"),
    ("scale: [{queue: q, factor: 0}]", 3, "scale[0].factor must be a number > 0"),
    ("scale: [{queue: q, factor: -1.5}]", 3, "scale[0].factor must be a number > 0"),
    ("scale: [{queue: q, factor: .nan}]", 3, "scale[0].factor must be a number > 0 and at most 100, got nan"),
    ("scale: [{queue: q, factor: .inf}]", 3, "scale[0].factor must be a number > 0"),
    ("scale: [{queue: q, factor: '2'}]", 3, "scale[0].factor must be a number > 0"),
    ("scale: [{queue: q}]", 3, "scale[0] has no factor"),
    ("scale: [{queue: q, factor: 2, colour: red}]", 3, "scale[0]: unknown key 'colour'"),
    ("plan_days: 0", 3, "plan_days must be a whole number of days 1-366, got 0"),
    ("add: [{queue: \"q \", gpu_type: A100-80GB, count: 1}]", 3, "add[0].queue 'q ' begins or ends with white space"),
    ("colour: red", 3, "a scenario: unknown key 'colour'"),
])
def test_a_bad_edit_names_the_file_line_scenario_and_field(tmp_path, edit, line, message):
    path = _write(tmp_path, f"scenarios:\n  - name: s\n    {edit}\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenarios(path)
    said = str(caught.value)
    assert said.startswith(f"{path}:{line}: ") and message in said and "\n" not in said, said


@pytest.mark.parametrize("text, line, message", [
    ("scenarios:\n  - name: s\n", 2, "scenario 's' changes nothing"),
    ("scenarios:\n  - name: baseline\n    plan_days: 3\n", 2, "'baseline' is the plan on file"),
    ("scenarios:\n  - name: s\n    plan_days: 3\n  - name: s\n    plan_days: 4\n", 4,
     "scenario 's' is given twice (first on line 2)"),
    ("scenarios: []\n", 1, "must be a list of scenarios"),
    ("queues: {}\n", 1, "one key, `scenarios:` (found 'queues')"),
    ("scenarios:\n  - name: s\n    plan_days: [\n", 4, "not valid YAML"),
    ("scenarios:\n  - name: s\n    plan_days: !!python/name:os.system ''\n", 3, "tag !!python/name:os.system"),
    # anchors nested in each other: refused by counting, before anything is built (plain_yaml.MAX_VALUES)
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, n in zip("abcde", "bcdef", strict=True)) + "scenarios: [{name: s, plan_days: 3, x: *f}]\n", 1,
     "expands to more than 10,000 values"),
])
def test_a_bad_file_is_refused_like_every_configuration_file(tmp_path, text, line, message):
    path = _write(tmp_path, text)
    with pytest.raises(ScenarioError, match=rf"what-if.yaml:{line}: .*{re.escape(message)}"):
        load_scenarios(path)


def test_a_queue_the_plan_does_not_know_is_one_line_naming_the_known_ones(tmp_path):
    scenarios = load_scenarios(_write(tmp_path, GOOD))
    lines = unknown_queues(scenarios, {"a100-80g", "a100-40g"})
    assert lines == [f"{scenarios[1].source}: scenario 'retire and move': unknown queue 'l4-24g' (the queues known: "
                     "a100-40g, a100-80g)"]


def test_the_inventory_carries_the_scenarios_every_plan_draws(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text("queues:\n  q: [{gpu_type: A100-80GB, count: 2}]\n"
                    "scenarios:\n  - name: more\n    add: [{queue: q, gpu_type: A100-80GB, count: 2}]\n")
    assert [s.name for s in load_inventory(path).scenarios] == ["more"]
    path.write_text("queues:\n  q: [{gpu_type: A100-80GB, count: 2}]\n"
                    "scenarios:\n  - name: more\n    scale: [{queue: q, factor: 0}]\n")
    with pytest.raises(InventoryError, match=r"inventory.yaml:5: scenario 'more': scale\[0\]\.factor must be"):
        load_inventory(path)
