"""Shared fixtures: an isolated data directory per test, one Prefect test server per session."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Before anything imports gpucast.flows (which reads these to configure Prefect).
if "GPUCAST_HOME" not in os.environ:
    _session_home = tempfile.mkdtemp(prefix="gpucast-test-home-")
    os.environ["GPUCAST_HOME"] = _session_home
    atexit.register(shutil.rmtree, _session_home, ignore_errors=True)
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")

from gpucast.flows.environment import configure  # noqa: E402

configure()  # Prefect's defaults under the session's home, before any test module imports a flow

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh, empty GPUCAST_HOME for one test."""
    path = tmp_path / "home"
    monkeypatch.setenv("GPUCAST_HOME", str(path))
    return path


@pytest.fixture(scope="session")
def prefect_harness():
    """A temporary Prefect API (SQLite) for the whole session: flows run for real against it."""
    from prefect.logging.configuration import setup_logging
    from prefect.testing.utilities import prefect_test_harness


    # Bind Prefect's console handler to the session's stream now; a handler first made inside a
    # test that uses `capsys` would keep writing to that test's closed stream.
    setup_logging(incremental=False)
    with prefect_test_harness(server_startup_timeout=90):
        yield


def write(path: Path, text: str | bytes) -> Path:
    """Write a small fixture file (bytes are written as they are)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path
