"""Fixtures the flow tests of several modules share."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

from tests.conftest import seed_prefect_home

# The night the tests below start from, and their xdist group: a session fixture is built once per worker, so the
# tests that read it run on one (tests/conftest.py, docs/testing.md).
QUICK_NIGHT = "quick_night"
SHARES_THE_QUICK_NIGHT = pytest.mark.xdist_group(QUICK_NIGHT)
# The real `prefect server start` below, and the xdist group of the tests that use it (one worker starts it).
SHARES_THE_PREFECT_SERVER = pytest.mark.xdist_group("prefect_server")


@dataclass(frozen=True)
class Night:
    """A data directory after one trained nightly (copy it before changing it), what the command printed and the
    artifacts it left (read when it ended: later runs of the session replace Prefect's artifacts of the same key)."""

    home: Path
    out: str
    report: str
    capacity_page: str
    capacity_plan: str | None

    def copy_to(self, home: Path) -> Path:
        shutil.copytree(self.home, home)
        return home


@pytest.fixture(scope="session")
def quick_night(prefect_harness, tmp_path_factory) -> Night:
    """`gpucast nightly` with two fast models on 2 days x 250 simulated jobs (20% pending) and the demo inventory:
    what tests/flows/test_nightly.py::test_nightly_publishes_forecasts_views_and_an_artifact and
    tests/flows/test_plan_flow.py::test_the_nightly_plans_capacity_and_writes_a_page_a_browser_shows each ran for
    themselves (the same night, but for the inventory and the memory flag: ~1 min of a loaded machine each); the
    nights of tests/flows/test_hostile_strings.py score with its champions (without its inventory)."""
    from prefect.artifacts import Artifact

    from gpucast.flows.cli import main
    from gpucast.tasks.simulate import SimConfig, write_logs

    home = tmp_path_factory.mktemp(QUICK_NIGHT) / "home"
    home.mkdir()
    (home / "inventory.yaml").write_text(
        resources.files("gpucast.records").joinpath("reference/demo_inventory.yaml").read_text())
    write_logs(home / "inbox" / "week", SimConfig(days=2, jobs_per_day=250, pending_fraction=0.2, seed=4))
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(printed):
        mp.setenv("GPUCAST_HOME", str(home))
        assert main(["nightly", "--models", "lightgbm,linear_fs", "--repeats", "1", "--min-labelled", "50",
                     "--train-runner", "local", "--oom-gpu-mem-gb", "40"]) == 0
    plan = Artifact.get("capacity-plan")
    return Night(home, printed.getvalue(), Artifact.get("nightly-report").data, Artifact.get("capacity-page").data,
                 plan.data if plan is not None else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def without_prefect_settings(**extra: str) -> dict[str, str]:
    """This environment without any Prefect setting (the test session's own harness among them)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1", **extra}


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory, prefect_db_template):
    """`prefect server start` on a free loopback port (its own home and database, Prefect's defaults); its API URL.
    Stopped after. What tests/flows/test_running_server.py's commands use as the configured API and where
    tests/flows/test_nightly.py deploys the schedule: one server for both (each start was ~10-20 s of a fresh
    database and the server's imports), the tests in one xdist group (`SHARES_THE_PREFECT_SERVER`)."""
    import httpx

    home = tmp_path_factory.mktemp("prefect-server")
    seed_prefect_home(home, prefect_db_template)  # its database migrated already, when a harness kept one
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
                               str(port)], env=without_prefect_settings(PREFECT_HOME=str(home)),
                              stdout=subprocess.DEVNULL, stderr=open(home / "server.log", "wb"),  # noqa: SIM115
                              start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 180
    try:
        while True:  # its health endpoint, asked until it answers (a fresh database takes ~10-20 s here)
            assert server.poll() is None, (home / "server.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "prefect server start did not answer within 180 s"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.25)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
