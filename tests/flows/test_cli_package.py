"""`flows/cli/` is a small package by command group, with process control in one module (issue 39, item 3).

Process control is what a command does to the process rather than to data: `os._exit`, `os.kill`, `sys.exit`,
`atexit`, `signal`. It lives in `flows/cli/process.py` only, so a reader finds how gpucast exits, stops on
SIGTERM and tears down in one place; a command group that needs to exit raises an error `process.py` maps.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "flows" / "cli"
MAX_LINES = 300
PROCESS_MODULES = ("atexit", "signal")
PROCESS_CALLS = {("os", "_exit"), ("os", "kill"), ("os", "abort"), ("sys", "exit")}
# `python -m gpucast.flows.cli` hands main's exit code to the interpreter, as the console script's wrapper does
ALLOWED = {"__main__.py": ["sys.exit"]}


def process_control(source: str) -> list[str]:
    """'line: what' for each use of process control in a module's source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in PROCESS_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module in PROCESS_MODULES:
            found.append(f"{node.lineno}: from {node.module} import")
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "sys"):
            found += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names
                      if (node.module, a.name) in PROCESS_CALLS]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                node.value.id in PROCESS_MODULES or (node.value.id, node.attr) in PROCESS_CALLS):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def leaks(files: list[Path]) -> list[str]:
    """Process control outside `process.py` (and what `ALLOWED` lets a module do), as 'file:line: what'."""
    bad = []
    for path in files:
        if path.name == "process.py":
            continue
        allowed = ALLOWED.get(path.name, [])
        bad += [f"{path.name}:{use}" for use in process_control(path.read_text()) if use.split(": ", 1)[1] not in allowed]
    return bad


def modules() -> list[Path]:
    return sorted(PACKAGE.glob("*.py"))


def test_the_cli_is_a_package_whose_process_control_is_in_process_py():
    assert (PACKAGE / "__init__.py").is_file() and (PACKAGE / "process.py").is_file()
    assert process_control((PACKAGE / "process.py").read_text())  # the check sees the real thing where it lives
    assert leaks(modules()) == []


@pytest.mark.parametrize("planted", ["os._exit(3)", "sys.exit(2)", "signal.signal(signal.SIGINT, signal.SIG_IGN)",
                                     "atexit.register(print)", "from os import _exit"])
def test_the_check_finds_process_control_planted_in_a_command_group(tmp_path, planted):
    """Not vacuous: a command module that exits or handles a signal by itself is reported, naming file and line."""
    module = tmp_path / "pipeline.py"
    module.write_text((PACKAGE / "pipeline.py").read_text())
    assert leaks([module]) == []
    module.write_text(module.read_text() + f"\n{planted}\n")
    line = len(module.read_text().splitlines())
    assert leaks([module]) and all(leak.startswith(f"pipeline.py:{line}: ") for leak in leaks([module]))
    assert leaks([module.rename(tmp_path / "process.py")]) == []


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.name)
def test_each_module_of_the_package_is_small(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_the_package_map_names_every_module():
    """The package docstring is the map a reader starts from: a module it does not name is one nobody finds."""
    import gpucast.flows.cli

    assert [p.name for p in modules() if p.name != "__init__.py" and p.name not in gpucast.flows.cli.__doc__] == []
