"""The inventory file (expectations/inventory.py): every mistake is an `InventoryError` naming the file and
the line, never a YAML library's traceback, and a count is bounded (issue 27, item 6)."""

from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucast.expectations.inventory import MAX_COUNT, Inventory, InventoryError, load_inventory

GOOD = "queues:\n  big:\n    - gpu_type: A100-80GB\n      count: 2\n"


@pytest.mark.parametrize("text, line, message", [
    # a YAML scalar tag asking the loader to build a Python object: refused with its line, never constructed
    ("queues:\n  big:\n    - gpu_type: A100-80GB\n      count: !!python/name:os.system ''\n", 4,
     "tag !!python/name:os.system"),
    ("queues:\n  big:\n    - gpu_type: !!python/str A100-80GB\n      count: 2\n", 3, "tag !!python/str"),
    ("queues: !!python/object/apply:os.system [echo hi]\n", 1, "tag !!python/object/apply:os.system"),
    ("queues:\n  big: !custom\n    - gpu_type: A100-80GB\n      count: 2\n", 2, "tag !custom"),
    # a count no cluster owns: a typing error, not a plan (it overflowed Polars at the plan step)
    ("queues:\n  big:\n    - gpu_type: A100-80GB\n      count: 100000000000000000000000000000\n", 4,
     f"count must be at most {MAX_COUNT:,}"),
    ("queues:\n  big:\n    - gpu_type: A100-80GB\n      count: 2\n   bad: [\n", 5, "not valid YAML"),
    ("", 1, "empty"),
])
def test_a_hostile_inventory_is_an_inventory_error_with_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    with pytest.raises(InventoryError, match=rf"inventory.yaml:{line}: .*{re.escape(message)}"):
        load_inventory(path)


def test_the_largest_count_allowed_is_kept(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text(GOOD.replace("count: 2", f"count: {MAX_COUNT}"))
    assert load_inventory(path).owned[0].count == MAX_COUNT


# Documents built over the inventory's own shape, with every kind of value and tag a person (or an
# exporter) might put in them: whatever comes out, it is an Inventory or an InventoryError naming the
# file and a line; nothing else escapes, and an accepted count is a sane whole number.
TAGS = st.sampled_from(["", "!!python/name:os.system ", "!!python/str ", "!!str ", "!!int ", "!!float ", "!!binary ",
                        "!!set ", "!!omap ", "!custom ", "!!timestamp ", "!!null ", "!!bool "])
SCALARS = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["A100-80GB", "a100 80gb", "H100", "L4-24GB", "yes", "null", "~", "''", ".inf", "-.nan",
                     "0x1F", "0o17", "1_000", "2026-11-01", "&a x", "*a", "*undefined", "<<", "[", "{", "'", "\"",
                     "- x", ": x", "? x", "%TAG", "\t", "12.5", "-4", "1e400"]),
    st.text(max_size=12),
)


def _scalar(draw) -> str:
    return draw(TAGS) + draw(SCALARS)


@st.composite
def documents(draw) -> str:
    lines = [draw(st.sampled_from(["queues:", "queues: " + _scalar(draw), _scalar(draw) + ":", "gpus: 3"]))]
    for _ in range(draw(st.integers(0, 3))):
        lines.append(f"  {draw(st.sampled_from(['big', 'a100-80g', '', '- x', '[a]']))}:{draw(st.sampled_from(['', ' ' + _scalar(draw)]))}")
        for _ in range(draw(st.integers(0, 3))):
            keys = draw(st.lists(st.sampled_from(["gpu_type", "count", "colour", "Count", "<<"]), max_size=4))
            for i, key in enumerate(keys):
                lines.append(("    - " if i == 0 else "      ") + f"{key}: {_scalar(draw)}")
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n---\nqueues: {}\n", "\n..."]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=documents())
def test_any_inventory_document_is_accepted_or_refused_with_file_and_line(tmp_path, text):
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    try:
        inventory = load_inventory(path)
    except InventoryError as exc:
        assert re.match(rf"{re.escape(str(path))}:\d+: \S", str(exc)), str(exc)
        return
    assert isinstance(inventory, Inventory)
    assert all(type(o.count) is int and 0 <= o.count <= MAX_COUNT for o in inventory.owned)


def test_the_safe_loader_alone_would_raise_on_these(tmp_path):
    """Why the check is needed: PyYAML's safe loader refuses a Python tag with its own error type."""
    with pytest.raises(yaml.constructor.ConstructorError):
        yaml.safe_load("count: !!python/name:os.system ''")
