"""SIGTERM to a CLI run: the run is recorded as stopped, and Prefect's temporary API server stops too."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time

import duckdb
import pytest

from gpucast.tasks.simulate import SimConfig, write_logs
from tests import failpoints


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_sigterm_stops_the_run_and_its_temporary_server(tmp_path):
    write_logs(tmp_path / "logs", SimConfig(days=1, jobs_per_day=500, seed=21))
    home, marker = tmp_path / "home", tmp_path / "stopped-here"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    # the run waits at a known point (after staging, inside the flow) until it is signalled: no race
    # with how fast this machine ingests; unbuffered so the server's address is read as it is printed
    env.update(GPUCAST_HOME=str(home), PREFECT_HOME=str(tmp_path / "prefect"), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(failpoints.command("ingest:after-staging", marker, "ingest", str(tmp_path / "logs")), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port, seen = None, []
    for line in proc.stdout:  # Prefect names its temporary server when it starts
        seen.append(line)
        if m := re.search(r"temporary server on http://127\.0\.0\.1:(\d+)", line):
            port = int(m.group(1))
            break
    assert port, "".join(seen)
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), "the run never reached its failpoint"
    assert _listening(port)
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=120)[0]
    assert proc.returncode == 128 + signal.SIGTERM, "".join(seen) + rest
    deadline = time.monotonic() + 30
    while _listening(port) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _listening(port), f"the temporary server on port {port} outlived the command"
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        ((status, message),) = con.execute("SELECT status, message FROM ingest_runs").fetchall()
    assert status == "failed" and "stopped by SIGTERM" in message
