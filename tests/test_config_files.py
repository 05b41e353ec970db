"""Every YAML configuration file gpucast reads (the GPU inventory, mapping files, sources.yaml) is opened by one
reader (`expectations/plain_yaml.py` `read_config`) and names a problem the same way: `file:line: rule` (each
kind's own rules, tags and shapes, are tested beside its reader)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucast.expectations.inventory import InventoryError, load_inventory
from gpucast.expectations.plain_yaml import where
from gpucast.tasks.sources.mapping import MappingError, load_mapping
from gpucast.tasks.sources.sources_file import SourcesError, load_sources

READERS = [pytest.param(load_inventory, InventoryError, id="inventory"),
           pytest.param(load_mapping, MappingError, id="mapping"),
           pytest.param(load_sources, SourcesError, id="sources")]


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
def test_a_missing_file_is_named(tmp_path, read, error):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "nope.yaml")) + " not found"):
        read(tmp_path / "nope.yaml")


def test_where_is_file_colon_line():
    assert where(Path("/etc/gpucast/sources.yaml"), 7) == "/etc/gpucast/sources.yaml:7"
