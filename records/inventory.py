"""The GPU inventory: which GPUs each queue owns. Configuration the data engineer owns.

A small YAML file (default `$GPUCAST_HOME/inventory.yaml`, or `GPUCAST_INVENTORY`):

    queues:
      a100-80g:
        - gpu_type: A100-80GB     # a name of the GPU catalogue (reference/gpu_catalog.csv), any spelling
          count: 32               # GPUs owned, a whole number >= 0
          gpus_per_node: 8        # optional: GPUs a node holds (a multi-GPU job is reserved on one node when it fits)
    scenarios:                    # optional: the what-ifs every plan draws beside it (records/scenario.py)
      - name: buy 16 H100
        add: [{queue: a100-80g, gpu_type: H100-80GB, count: 16}]

Each GPU's memory comes from the catalogue. Any mistake (an unknown GPU type, a negative, fractional
or absurd count, a missing field, an unknown key, broken YAML, a YAML tag such as `!!python/name:...`)
is an `InventoryError` naming the file and the line, raised before anything is planned: nothing is
published half. So is a key given twice (`plain_yaml`, for every configuration file) and a queue or GPU type
name with white space at either end, an invisible or control character, or Latin, Greek and Cyrillic letters
mixed (`plain_yaml.name_problem`): a look-alike of a queue the logs name. Nothing in the file is ever
constructed as a Python object: it is composed into YAML nodes, every node's tag is checked against the
plain YAML types, and only then are scalars read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from gpucast.records import catalog
from gpucast.records.plain_yaml import first_unplain, line_of, name_problem, read_config, shown_tag, where
from gpucast.records.scenario import Scenario, scenarios_of

ENTRY_KEYS = ("gpu_type", "count")
OPTIONAL_KEYS = ("gpus_per_node",)  # missing: nodes not known (the plan treats the type's GPUs as one pool)
# GPUs of one type one queue may own: far above any cluster, far below what overflows a 64-bit count
# (a count of 10**29 passed and overflowed Polars at the plan step).
MAX_COUNT = 1_000_000
class InventoryError(ValueError):
    """The inventory file breaks its rules; the message names the file and line."""


@dataclass(frozen=True)
class Owned:
    queue: str
    gpu_type: str  # canonical catalogue name
    count: int
    memory_gb: float
    gpus_per_node: int | None = None  # None: not known
    added: bool = False  # a type a what-if adds to a queue owning none of it (tasks/plan/capacity.py: planned last)


@dataclass(frozen=True)
class Inventory:
    source: str  # the file it was read from
    owned: tuple[Owned, ...]
    scenarios: tuple[Scenario, ...] = ()  # `scenarios:`: the what-ifs every plan draws (records/scenario.py)

    def queues(self) -> dict[str, list[Owned]]:
        out: dict[str, list[Owned]] = {}
        for o in self.owned:
            out.setdefault(o.queue, []).append(o)
        return out


def _fail(path: Path, node: yaml.Node, message: str) -> InventoryError:
    return InventoryError(f"{where(path, line_of(node))}: {message}")


def _check_tags(path: Path, root: yaml.Node) -> None:
    """Refuse any node whose tag is not a plain YAML type (`plain_yaml.first_unplain`)."""
    if (node := first_unplain(root)) is not None:
        raise _fail(path, node, f"tag {shown_tag(node.tag)} is not allowed: the inventory holds plain text, "
                                "whole numbers, lists and mappings")


def _value(path: Path, node: yaml.Node):
    """A scalar node's value (its tag already checked plain); None for a list or mapping."""
    if not isinstance(node, yaml.ScalarNode):
        return None
    try:
        return yaml.safe_load(yaml.serialize(node))
    except Exception as exc:  # noqa: BLE001  (an explicit tag on text it cannot read: `!!timestamp 0`, `!!int x`)
        raise _fail(path, node, f"{node.value!r} is not a valid {shown_tag(node.tag)} value "
                                f"({type(exc).__name__})") from None


def load_inventory(path: Path) -> Inventory:
    """Read and check an inventory file (see the module doc)."""
    path = Path(path)
    root = _compose(path)
    _check_tags(path, root)
    top = dict((_value(path, k), v) for k, v in root.value) if isinstance(root, yaml.MappingNode) else {}
    if "queues" not in top or set(top) - {"queues", "scenarios"} or not isinstance(top["queues"], yaml.MappingNode):
        raise _fail(path, root, "the file must hold the key `queues:`, mapping each queue to a list of "
                                "{gpu_type, count} (and may hold `scenarios:`, the what-ifs every plan draws)")
    owned, seen = [], set()
    for qnode, entries in top["queues"].value:
        queue = _value(path, qnode)
        if not isinstance(queue, str) or not queue.strip():
            raise _fail(path, qnode, f"a queue name must be text, got {queue!r}")
        _check_name(path, qnode, "queue", queue)
        if not isinstance(entries, yaml.SequenceNode) or not entries.value:
            raise _fail(path, entries, f"queue {queue!r} needs a list of {{gpu_type, count}} entries")
        for entry in entries.value:
            row = _owned(path, queue, entry)
            if (queue, row.gpu_type) in seen:
                raise _fail(path, entry, f"queue {queue!r} lists {row.gpu_type} twice")
            seen.add((queue, row.gpu_type))
            owned.append(row)
    scenarios = scenarios_of(path, top["scenarios"], InventoryError) if "scenarios" in top else ()
    return Inventory(str(path), tuple(owned), scenarios)


def _check_name(path: Path, node: yaml.Node, key: str, name: str) -> None:
    """A queue or GPU type name as the job logs would spell it (`plain_yaml.name_problem`): `"gpu "` or `gpу` (a
    Cyrillic у) was planned as a queue of its own with no jobs, while the real queue showed owned = null."""
    if problem := name_problem(name):
        raise _fail(path, node, f"{key} {ascii(name)} {problem}; write the name exactly as the job logs spell it")


def _compose(path: Path) -> yaml.Node:
    """The file's YAML node tree (`plain_yaml.read_config`, the one reader); an empty file is an InventoryError."""
    root, _ = read_config(path, InventoryError, "inventory", "see docs/planners.md")
    if root is None:
        raise InventoryError(f"{where(path, 1)}: empty; it needs a `queues:` mapping (see docs/planners.md)")
    return root


def _owned(path: Path, queue: str, entry: yaml.Node) -> Owned:
    """One `{gpu_type, count}` entry of `queue`, checked: a catalogue GPU type and a whole count in range."""
    if not isinstance(entry, yaml.MappingNode):
        raise _fail(path, entry, f"queue {queue!r}: an entry must be a mapping with gpu_type and count")
    fields = {_value(path, k): (k, v) for k, v in entry.value}
    extra = sorted(set(fields) - set(ENTRY_KEYS) - set(OPTIONAL_KEYS), key=str)
    if extra:
        raise _fail(path, fields[extra[0]][0], f"unknown key {extra[0]!r} (an entry has gpu_type and count, and "
                                               "may have gpus_per_node)")
    missing = [k for k in ENTRY_KEYS if k not in fields]
    if missing:
        raise _fail(path, entry, f"queue {queue!r}: the entry has no {missing[0]}")
    type_node, count_node = fields["gpu_type"][1], fields["count"][1]
    name = _value(path, type_node)
    if isinstance(name, str):
        _check_name(path, type_node, "gpu_type", name)
    gpu_type = catalog.canonical(str(name)) if name is not None else None
    if gpu_type is None or gpu_type not in catalog.gpus():
        raise _fail(path, type_node, f"unknown GPU type {name!r} (the catalogue knows: {', '.join(catalog.gpus())})")
    count = _value(path, count_node)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise _fail(path, count_node, f"count must be a whole number >= 0, got {count!r}")
    if count > MAX_COUNT:
        raise _fail(path, count_node, f"count must be at most {MAX_COUNT:,} GPUs (a typing error?), got {count:,}")
    per_node = None
    if "gpus_per_node" in fields:
        node = fields["gpus_per_node"][1]
        per_node = _value(path, node)
        if isinstance(per_node, bool) or not isinstance(per_node, int) or not 1 <= per_node <= 1024:
            raise _fail(path, node, f"gpus_per_node must be a whole number from 1 to 1024, got {per_node!r}")
    return Owned(queue, gpu_type, count, catalog.gpus()[gpu_type].memory_gb, per_node)


def read_inventory(path: Path | None) -> Inventory | None:
    """The inventory file's GPUs (errors name the file and line), or None when there is none (`path` None: no
    GPUCAST_INVENTORY and no $GPUCAST_HOME/inventory.yaml); a file named that does not exist is an error."""
    if path is None:
        return None
    if not path.exists():
        raise FileNotFoundError(f"GPUCAST_INVENTORY names {path}, which does not exist (an example: "
                                "records/reference/demo_inventory.yaml; docs/planners.md explains the format)")
    return load_inventory(path)


def largest_memory_gb(inventory: Inventory | None) -> dict[str, float]:
    """Each queue's largest GPU memory (GB) in `inventory` (none without one): what a job of the queue that logs no GPU
    type is judged against for `oom_risk` (tasks/learn/score.py `job_gpu_memory`), the type the plan puts such a job on
    when its size is unknown (`capacity.largest_index`)."""
    return {queue: max(o.memory_gb for o in owned) for queue, owned in (inventory.queues() if inventory else {}).items()}
