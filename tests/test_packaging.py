"""The wheel a GPU worker would `pip install` holds every module and runs, with no editable install behind it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UNTRACKED = (".git", ".venv", "build", "*.egg-info", ".gpucast", "__pycache__", ".pytest_cache", ".ruff_cache", ".bench")

IMPORT_EVERYTHING = """
import importlib, pkgutil, sys
import gpucast.flows, gpucast.tasks, gpucast.warehouse, gpucast.expectations
names = []
for top in (gpucast.flows, gpucast.tasks, gpucast.warehouse, gpucast.expectations):
    names.append(top.__name__)
    names += [m.name for m in pkgutil.walk_packages(top.__path__, top.__name__ + ".")]
for name in names:
    importlib.import_module(name)
from gpucast.tasks.learn.train import REFERENCE_SET
print(len(names), gpucast.tasks.__file__, REFERENCE_SET.is_file(), REFERENCE_SET)
"""


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.mark.slow
def test_the_built_wheel_installs_imports_every_module_and_runs(tmp_path):
    # built from a clean copy of the tree: a `build/` folder left by an earlier build would hide a missing package
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*UNTRACKED))
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", tmp_path / "dist", src)
    (wheel,) = (tmp_path / "dist").glob("gpucast-*.whl")
    venv = tmp_path / "venv"
    # a venv without pip of its own (ensurepip's install was ~6 s of this test); this environment's pip installs into it
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    py = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index", "--quiet", wheel)
    # The third-party dependencies come from this environment's site-packages folders, added as plain
    # paths: Python does not run the .pth files of such a path, so this environment's editable gpucast stays out.
    site = Path(run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    deps = [p for p in sys.path if p.endswith("site-packages")] or [sysconfig.get_paths()["purelib"]]
    (site / "_gpucast_test_deps.pth").write_text("\n".join(deps) + "\n")

    count, location, found, path = run(py, "-c", IMPORT_EVERYTHING, cwd=tmp_path).stdout.split()
    assert Path(location).is_relative_to(venv), location  # the wheel's copy, not the source tree
    modules = [p for layer in ("flows", "tasks", "warehouse", "expectations") for p in (ROOT / layer).rglob("*.py")]
    assert int(count) >= len(modules)  # every module (and package) of the tree is in the wheel and imports
    # the shipped data training reads (the zoo's reference set, issue 37) is in the wheel, not only in the tree
    assert found == "True" and Path(path).is_relative_to(venv), path
    help_text = run(venv / "bin" / "gpucast", "--help", cwd=tmp_path).stdout
    assert "usage: gpucast" in help_text


def _requirement_names() -> list[str]:
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return [Requirement(r).name for r in reqs]


def _constraints() -> dict[str, str]:
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_every_dependency_is_pinned_exactly_and_the_install_matches():
    """Reproducible installs: every requirement has an exact version in constraints.txt, `make setup` uses
    the file, and the environment running the tests holds exactly those versions."""
    import importlib.metadata as md

    from packaging.utils import canonicalize_name

    pins = _constraints()
    assert [n for n in _requirement_names() if canonicalize_name(n) not in pins] == []
    assert "-c constraints.txt" in (ROOT / "Makefile").read_text()
    drift = {}
    for name, version in pins.items():
        try:
            installed = md.version(name).split("+")[0]
        except md.PackageNotFoundError:
            continue  # a package of another platform's resolution, not installed here
        if installed != version:
            drift[name] = (version, installed)
    assert drift == {}, f"installed versions differ from constraints.txt (pinned, installed): {drift}"
