"""What-if scenarios for the capacity plan (issue 53, item 4): edits of the inventory and of the arrivals a planner
wants compared with the plan on file. Configuration the planners own.

A scenario file (`gpucast plan --scenario FILE`), or the `scenarios:` key of the inventory file (the ones every
nightly plan draws), holds a list of scenarios:

    scenarios:
      - name: buy 16 H100                 # unique, at most 60 characters; `baseline` is the plan on file
        add:                              # GPUs bought: N more of a type in a queue
          - {queue: a100-80g, gpu_type: H100-80GB, count: 16}
        remove:                           # GPUs retired: N (or `all`) of a type the queue owns
          - {queue: a100-40g, gpu_type: A100-40GB, count: all}
        move:                             # a queue's jobs onto another type: its GPUs become `count` of that type
          - {queue: l4-24g, gpu_type: L40S-48GB}    # count left out: as many as the queue owns now
        scale:                            # a queue's expected arrivals (the demand forecast) times a factor
          - {queue: a100-80g, factor: 1.3}
        plan_days: 28                     # the plan's horizon in days (default: the baseline's)

Edits apply in the order move, remove, add (tasks/plan/scenarios.py). Every mistake the file itself shows is a
`ScenarioError` naming `file:line`, the scenario and the field: a GPU type the catalogue does not know (with the
ones it knows), a count that is negative, fractional or absurd, a factor <= 0, NaN, infinite or above
`MAX_FACTOR`, an unknown key, a name given twice; not YAML, a tag that is not plain YAML or anchors expanding past
`plain_yaml.MAX_VALUES` values are refused as in every configuration file (`plain_yaml.read_config`,
`plain_yaml.plain_value`). A queue is checked against the queues the plan knows when it is planned
(`unknown_queues`): those are the inventory's, the pending jobs' and the demand forecast's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpucast.records import catalog
from gpucast.records.plain_yaml import YamlRefused, line_of, name_problem, plain_value, read_config, where

BASELINE = "baseline"  # the plan on file; no scenario may take its name
SCENARIO_KEYS = ("name", "add", "remove", "move", "scale", "plan_days")
EDIT_KEYS = {"add": ("queue", "gpu_type", "count"), "remove": ("queue", "gpu_type", "count"),
             "move": ("queue", "gpu_type", "count"), "scale": ("queue", "factor")}
REQUIRED = {"add": ("queue", "gpu_type", "count"), "remove": ("queue", "gpu_type", "count"),
            "move": ("queue", "gpu_type"), "scale": ("queue", "factor")}
MAX_SCENARIOS = 20  # each is a plan of its own: more is a typing error, not a question
MAX_NAME = 60
MAX_COUNT = 1_000_000  # as the inventory's (records/inventory.py)
MAX_FACTOR = 100.0  # a queue's arrivals times more than 100: a typing error
MAX_DAYS = 366  # as GPUCAST_PLAN_DAYS
DOCS = "see docs/planners.md, 'What if'"


class ScenarioError(ValueError):
    """A scenario breaks its rules; the message names the file, line, scenario and field (one line: exit 2)."""


@dataclass(frozen=True)
class GpuChange:
    """`add` or `remove`: `count` GPUs of `gpu_type` (canonical) in `queue`; None: all of them (remove only)."""

    queue: str
    gpu_type: str
    count: int | None


@dataclass(frozen=True)
class Move:
    """The queue's GPUs become `count` GPUs of `gpu_type` (None: as many as it owns now, all types)."""

    queue: str
    gpu_type: str
    count: int | None


@dataclass(frozen=True)
class Scale:
    queue: str
    factor: float  # > 0, finite, at most MAX_FACTOR


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str  # file:line it was read from
    add: tuple[GpuChange, ...] = ()
    remove: tuple[GpuChange, ...] = ()
    move: tuple[Move, ...] = ()
    scale: tuple[Scale, ...] = ()
    plan_days: int | None = None

    def queues(self) -> list[str]:
        """Every queue the scenario names, in the order it names them."""
        return list(dict.fromkeys(e.queue for e in (*self.move, *self.remove, *self.add, *self.scale)))

    def changes(self) -> str:
        """What the scenario changes from the baseline, in words (the `changes` column of `plan_scenarios`)."""
        parts = [f"{m.queue} moved to {m.gpu_type} ({'as many as it owns' if m.count is None else m.count})"
                 for m in self.move]
        parts += [f"-{'all' if r.count is None else r.count} {r.gpu_type} in {r.queue}" for r in self.remove]
        parts += [f"+{a.count} {a.gpu_type} in {a.queue}" for a in self.add]
        parts += [f"{s.queue} arrivals x{s.factor:g}" for s in self.scale]
        if self.plan_days is not None:
            parts.append(f"{self.plan_days} days")
        return "; ".join(parts)


def load_scenarios(path: str | Path) -> tuple[Scenario, ...]:
    """Read and check a scenario file: one key, `scenarios:`, a list of scenarios (see the module doc)."""
    root, _ = read_config(path, ScenarioError, "scenario file", DOCS)
    if not isinstance(root, yaml.MappingNode):
        raise ScenarioError(f"{where(path, line_of(root) if root is not None else 1)}: the file must hold one key, "
                            f"`scenarios:`, a list of scenarios ({DOCS})")
    _check_plain(path, root)
    top = {_scalar(path, k): v for k, v in root.value}
    if set(top) != {"scenarios"}:
        other = sorted(str(k) for k in top if k != "scenarios")
        raise ScenarioError(f"{where(path, line_of(root))}: the file must hold one key, `scenarios:`"
                            + (f" (found {other[0]!r})" if other else "") + f" ({DOCS})")
    return scenarios_of(path, top["scenarios"], ScenarioError)


def scenarios_of(path: str | Path, node: yaml.Node, error: type[ValueError] = ScenarioError) -> tuple[Scenario, ...]:
    """The scenarios of a `scenarios:` list node (the inventory's key reads it too, raising its own `error`)."""
    try:
        _check_plain(path, node)
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            raise _fail(path, node, "`scenarios:` must be a list of scenarios, each a mapping with a `name`")
        if len(node.value) > MAX_SCENARIOS:
            raise _fail(path, node.value[MAX_SCENARIOS], f"at most {MAX_SCENARIOS} scenarios, got {len(node.value)}")
        out, seen = [], {}
        for entry in node.value:
            scenario = _scenario(path, entry)
            if scenario.name in seen:
                raise _fail(path, entry, f"scenario {scenario.name!r} is given twice (first on line {seen[scenario.name]})")
            seen[scenario.name] = line_of(entry)
            out.append(scenario)
        return tuple(out)
    except ScenarioError as exc:
        raise (exc if error is ScenarioError else error(str(exc))) from None


def unknown_queues(scenarios: tuple[Scenario, ...], known: set[str]) -> list[str]:
    """One line per queue a scenario names that the plan does not know, naming the known ones (exit 2)."""
    shown = ", ".join(sorted(known)[:30]) + (f" and {len(known) - 30} more" if len(known) > 30 else "")
    return [f"{s.source}: scenario {s.name!r}: unknown queue {q!r} (the queues known: {shown or 'none'})"
            for s in scenarios for q in s.queues() if q not in known]


def _fail(path: str | Path, node: yaml.Node, message: str) -> ScenarioError:
    return ScenarioError(f"{where(path, line_of(node))}: {message} ({DOCS})")


def _check_plain(path: str | Path, node: yaml.Node) -> None:
    """Tags and alias expansion checked as for every configuration file (`plain_yaml.plain_value`)."""
    try:
        plain_value(node)
    except YamlRefused as exc:
        raise ScenarioError(f"{where(path, exc.line)}: {exc.problem} ({DOCS})") from None


def _scalar(path: str | Path, node: yaml.Node):
    """A scalar node's plain value; None for a list or mapping."""
    if not isinstance(node, yaml.ScalarNode):
        return None
    try:
        return plain_value(node)
    except YamlRefused as exc:
        raise ScenarioError(f"{where(path, exc.line)}: {exc.problem} ({DOCS})") from None


def _fields(path: str | Path, node: yaml.Node, allowed: tuple[str, ...], what: str) -> dict[str, yaml.Node]:
    if not isinstance(node, yaml.MappingNode):
        raise _fail(path, node, f"{what} must be a mapping with {', '.join(allowed)}")
    fields = {}
    for k, v in node.value:
        key = _scalar(path, k)
        if key not in allowed:
            raise _fail(path, k, f"{what}: unknown key {key!r} (it takes {', '.join(allowed)})")
        fields[key] = v
    return fields


def _scenario(path: str | Path, node: yaml.Node) -> Scenario:
    fields = _fields(path, node, SCENARIO_KEYS, "a scenario")
    if "name" not in fields:
        raise _fail(path, node, "a scenario needs a `name`")
    name = _scalar(path, fields["name"])
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise _fail(path, fields["name"], f"a scenario's name must be text of 1-{MAX_NAME} characters, got {name!r}")
    if problem := name_problem(name):
        raise _fail(path, fields["name"], f"scenario name {ascii(name)} {problem}")
    if name.lower() == BASELINE:
        raise _fail(path, fields["name"], f"{BASELINE!r} is the plan on file; give the scenario another name")
    edits = {kind: tuple(_edit(path, name, kind, i, e) for i, e in enumerate(_list(path, name, kind, fields[kind])))
             for kind in EDIT_KEYS if kind in fields}
    days = None
    if "plan_days" in fields:
        days = _scalar(path, fields["plan_days"])
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
            raise _fail(path, fields["plan_days"], f"scenario {name!r}: plan_days must be a whole number of days "
                                                   f"1-{MAX_DAYS}, got {days!r}")
    if not edits and days is None:
        raise _fail(path, node, f"scenario {name!r} changes nothing: give add, remove, move, scale or plan_days")
    return Scenario(name, where(path, line_of(node)), plan_days=days, **edits)


def _list(path: str | Path, name: str, kind: str, node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):  # one edit written without the list around it
        return [node]
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise _fail(path, node, f"scenario {name!r}: {kind} must be a list of {{{', '.join(EDIT_KEYS[kind])}}}")
    return list(node.value)


def _edit(path: str | Path, name: str, kind: str, i: int, node: yaml.Node) -> GpuChange | Move | Scale:
    """One entry of `add`, `remove`, `move` or `scale`, checked field by field (`kind[i].field` in messages)."""
    at = f"scenario {name!r}: {kind}[{i}]"
    fields = _fields(path, node, EDIT_KEYS[kind], at)
    if missing := [k for k in REQUIRED[kind] if k not in fields]:
        raise _fail(path, node, f"{at} has no {missing[0]}")
    queue = _scalar(path, fields["queue"])
    if not isinstance(queue, str) or not queue:
        raise _fail(path, fields["queue"], f"{at}.queue must be a queue's name, got {queue!r}")
    if problem := name_problem(queue):
        raise _fail(path, fields["queue"], f"{at}.queue {ascii(queue)} {problem}")
    if kind == "scale":
        return Scale(queue, _factor(path, at, fields["factor"]))
    raw = _scalar(path, fields["gpu_type"])
    gpu_type = catalog.canonical(str(raw)) if isinstance(raw, str | int | float) and not isinstance(raw, bool) else None
    if gpu_type not in catalog.gpus():
        raise _fail(path, fields["gpu_type"], f"{at}.gpu_type: unknown GPU type {raw!r} (the catalogue knows: "
                                              f"{', '.join(catalog.gpus())})")
    count = _count(path, at, fields["count"], kind) if "count" in fields else None
    return Move(queue, gpu_type, count) if kind == "move" else GpuChange(queue, gpu_type, count)


def _count(path: str | Path, at: str, node: yaml.Node, kind: str) -> int | None:
    count = _scalar(path, node)
    if kind == "remove" and count == "all":
        return None
    least = 0 if kind == "move" else 1
    if isinstance(count, bool) or not isinstance(count, int) or count < least or count > MAX_COUNT:
        also = " or `all`" if kind == "remove" else ""
        raise _fail(path, node, f"{at}.count must be a whole number of GPUs {least}-{MAX_COUNT:,}{also}, got {count!r}")
    return count


def _factor(path: str | Path, at: str, node: yaml.Node) -> float:
    factor = _scalar(path, node)
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not math.isfinite(factor) \
            or not 0 < factor <= MAX_FACTOR:
        raise _fail(path, node, f"{at}.factor must be a number > 0 and at most {MAX_FACTOR:g}, got {factor!r}")
    return float(factor)
