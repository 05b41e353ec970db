"""Every YAML configuration file gpucast reads (the GPU inventory, mapping files, sources.yaml, what-if scenario
files) is opened by one reader (`records/plain_yaml.py` `read_config`) and names a problem the same way: `file:line: rule` (each
kind's own rules, tags and shapes, are tested beside its reader)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucast.records.inventory import InventoryError, load_inventory
from gpucast.records.plain_yaml import compose, where
from gpucast.records.scenario import ScenarioError, load_scenarios
from gpucast.tasks.sources.mapping import MappingError, load_mapping
from gpucast.tasks.sources.sources_file import SourcesError, load_sources

READERS = [pytest.param(load_inventory, InventoryError, id="inventory"),
           pytest.param(load_mapping, MappingError, id="mapping"),
           pytest.param(load_sources, SourcesError, id="sources"),
           pytest.param(load_scenarios, ScenarioError, id="scenarios")]


@pytest.mark.parametrize("read, error", READERS)
@pytest.mark.parametrize("content, line, rule", [
    (b"a: 1\nb: [\n", 3, "not valid YAML"),
    (b"a: 1\nb: caf\xe9\n", 2, "not UTF-8 text"),
])
def test_each_file_kind_names_the_file_and_line_of_a_problem_alike(tmp_path, read, error, content, line, rule):
    path = tmp_path / "config.yaml"
    path.write_bytes(content)
    with pytest.raises(error) as caught:
        read(path)
    message = str(caught.value)
    assert message.startswith(f"{where(path, line)}: ") and rule in message and "\n" not in message, message


@pytest.mark.parametrize("read, error", READERS)
@pytest.mark.parametrize("content, line, key, first", [
    ("a: 1\nb: 2\na: 3\n", 3, "a", 1),  # at the top level: two `queues:` blocks dropped the first
    ("a:\n  - {count: 48, count: 2}\n", 2, "count", 2),  # in a flow mapping: the inventory owned 2
    ("a:\n  - x: 1\n    'x': 2\n", 3, "x", 2),  # quoted or not, the same key
])
def test_a_key_given_twice_is_refused_in_every_file_kind(tmp_path, read, error, content, line, key, first):
    """Issue 48 item 9: YAML keeps the last of two equal keys silently; every configuration file refuses them, with
    the file, the line of the second, the key and the line of the first (the mapping file alone did before)."""
    path = tmp_path / "config.yaml"
    path.write_text(content)
    with pytest.raises(error) as caught:
        read(path)
    message = str(caught.value)
    assert message.startswith(f"{where(path, line)}: {key!r} is given twice in one mapping (first on line {first})"), \
        message
    assert "\n" not in message


def test_keys_that_differ_in_type_are_not_the_same_key():
    """`1` and `"1"` are two keys in YAML (an int and a string): not a repeat (each file kind's own rules judge
    them); an alias used twice is one node, read once."""
    assert compose("a: {1: x, '1': y}\nb: &s {k: 1}\nc: *s\nd: *s\n") is not None


@pytest.mark.parametrize("read, error", READERS)
def test_a_missing_file_is_named(tmp_path, read, error):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "nope.yaml")) + " not found"):
        read(tmp_path / "nope.yaml")


def test_where_is_file_colon_line():
    assert where(Path("/etc/gpucast/sources.yaml"), 7) == "/etc/gpucast/sources.yaml:7"
