"""The inventory file (records/inventory.py): every mistake is an `InventoryError` naming the file and
the line, never a YAML library's traceback, and a count is bounded (issue 27, item 6)."""

from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucast.records.inventory import MAX_COUNT, Inventory, InventoryError, load_inventory

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


@pytest.mark.parametrize("text, line, message", [
    # issue 48 item 9: each was a queue of its own with no jobs, while the real queue `gpu` showed owned = null
    ("queues:\n  'gpu ':\n    - {gpu_type: A100-80GB, count: 8}\n", 2, "queue 'gpu ' begins or ends with white space"),
    ("queues:\n  \" gpu\":\n    - {gpu_type: A100-80GB, count: 8}\n", 2, "queue ' gpu' begins or ends with white space"),
    ("queues:\n  gp\u0443:\n    - {gpu_type: A100-80GB, count: 8}\n", 2,
     r"queue 'gp\u0443' mixes Cyrillic and Latin letters"),
    ("queues:\n  \u03b1100:\n    - {gpu_type: A100-80GB, count: 8}\n", 2, None),  # Greek alone: one script, allowed
    ("queues:\n  a\u03b1:\n    - {gpu_type: A100-80GB, count: 8}\n", 2, r"queue 'a\u03b1' mixes Greek and Latin letters"),
    ("queues:\n  \"gpu\\u200b\":\n    - {gpu_type: A100-80GB, count: 8}\n", 2,
     r"queue 'gpu\u200b' holds an invisible or control character (U+200B)"),
    ("queues:\n  \"g\\tpu\":\n    - {gpu_type: A100-80GB, count: 8}\n", 2,
     r"queue 'g\tpu' holds an invisible or control character (U+0009)"),
    ("queues:\n  gpu:\n    - {gpu_type: 'A100-80GB ', count: 8}\n", 3, "gpu_type 'A100-80GB ' begins or ends with"),
    ("queues:\n  gpu:\n    - {gpu_type: \u0410100-80GB, count: 8}\n", 3, r"gpu_type '\u0410100-80GB' mixes Cyrillic and"),
    # a key given twice (plain_yaml, every configuration file): the first was dropped silently
    ("queues:\n  a:\n    - {gpu_type: A100-80GB, count: 1}\nqueues:\n  b:\n    - {gpu_type: A100-80GB, count: 2}\n", 4,
     "'queues' is given twice in one mapping (first on line 1)"),
    ("queues:\n  a:\n    - {gpu_type: A100-80GB, count: 48, count: 2}\n", 3, "'count' is given twice"),
    ("queues:\n  a:\n    - {gpu_type: A100-80GB, count: 4}\n  a:\n    - {gpu_type: L4-24GB, count: 4}\n", 4,
     "'a' is given twice"),
])
def test_a_look_alike_name_or_a_repeated_key_is_refused(tmp_path, text, line, message):
    path = tmp_path / "inventory.yaml"
    path.write_text(text, encoding="utf-8")
    if message is None:
        assert load_inventory(path).owned
        return
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    assert str(caught.value).startswith(f"{path}:{line}: {message}"), str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_name_with_spaces_inside_and_other_scripts_is_a_name(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text("queues:\n  night shift 2:\n    - {gpu_type: A100-80GB, count: 8}\n"
                    "  \u65e5\u672c-gpu:\n    - {gpu_type: a100 80gb, count: 8}\n", encoding="utf-8")
    assert [o.queue for o in load_inventory(path).owned] == ["night shift 2", "\u65e5\u672c-gpu"]
