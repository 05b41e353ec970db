"""The benchmarks are scripts no test runs: a name they import from gpucast that a refactor moved (b86c064 moved
`train._build`; bench_accuracy, bench_champion and bench_llm_memory then failed at their first line) is caught here,
by reading their imports, without running them."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).parent / "benchmarks").glob("*.py"))


def _gpucast_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from gpucast... import name` in `path`, at any depth (functions import lazily)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpucast"):
            found += [(node.module, alias.name) for alias in node.names]
    return found


def test_there_are_benchmarks_and_they_import_gpucast():
    assert len(BENCHMARKS) > 20 and sum(len(_gpucast_imports(p)) for p in BENCHMARKS) > 50


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_every_name_a_benchmark_imports_from_gpucast_exists(path):
    missing = []
    for module, name in _gpucast_imports(path):
        loaded = importlib.import_module(module)
        if not hasattr(loaded, name):
            try:
                importlib.import_module(f"{module}.{name}")  # `from package import submodule`
            except ModuleNotFoundError:
                missing.append(f"{module}.{name}")
    assert missing == [], f"{path.name} imports names gpucast no longer has: {missing}"
