"""Where a Prefect server runs, commands use it (issue 40, decision 1).

A real `prefect server start` on a free loopback port; `gpucast ingest` in a fresh process with
`PREFECT_API_URL` pointing at it starts no temporary API server (no uvicorn child, Prefect's
`SubprocessASGIServer` never started) and its flow run is recorded by that server. Without the
setting, the same command starts its temporary server (gpucast's, `flows/children.py`): the check tells
the two apart. A configured API that cannot be used (a dead port, a server answering 404, one that accepts and never
answers) ends the command at once: exit 5 and one line (issue 48, item 6).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gpucast.flows import children
from tests.flows.conftest import SHARES_THE_PREFECT_SERVER
from tests.flows.conftest import free_port as _free_port
from tests.flows.conftest import without_prefect_settings as _clean_env
from tests.sample_jobs import jsonl, record

pytestmark = pytest.mark.slow

# `gpucast ingest ARGS` as the console script runs it; once `main` returns (the temporary server, if
# one was started, still runs until the interpreter exits) it writes what was started to the file named first.
COMMAND = """
import json, sys
import psutil
out = sys.argv.pop(1)
sys.argv[0] = "gpucast"
from gpucast.flows.cli import main
code = main()
server = sys.modules.get("prefect.server.api.server")
started = [s.port for s in server.SubprocessASGIServer._instances.values() if s.server_process] if server else []
uvicorn = [p.pid for p in psutil.Process().children(recursive=True) if "uvicorn" in " ".join(p.cmdline())]
open(out, "w").write(json.dumps({"code": code, "started": started, "uvicorn": uvicorn}))
sys.exit(code)
"""


def ingest(tmp_path: Path, name: str, **env: str) -> dict:
    """`gpucast ingest` of two records in a fresh process and data directory; what it started (and, under "output",
    what it printed)."""
    work = tmp_path / name
    logs = work / "logs.jsonl"
    logs.parent.mkdir(parents=True, exist_ok=True)
    logs.write_text(jsonl(record(job_id="a"), record(job_id="b")))
    out = work / "started.json"
    done = subprocess.run([sys.executable, "-c", COMMAND, str(out), "ingest", str(logs)], capture_output=True, text=True,
                          env=_clean_env(GPUCAST_HOME=str(work / "home"), **env), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 loaded" in done.stdout, done.stdout
    # GX's one validation of the run on DuckDB (duckdb-engine) leaves nothing alive past DuckDB's teardown (issue 52)
    assert "nanobind" not in done.stdout + done.stderr, done.stderr[-3000:]
    return json.loads(out.read_text()) | {"output": done.stdout + done.stderr}


@SHARES_THE_PREFECT_SERVER
def test_a_running_server_is_used_no_temporary_server_starts_and_its_password_is_never_printed(prefect_server, tmp_path):
    """The command uses the configured server: no temporary one starts, and its flow run is the server's. And Prefect's
    "View at <UI>" line is derived from PREFECT_API_URL, user info included (issue 48, item 5): every line on the
    console (and sent to the API's logs) has it masked. One process for both (the address has a password; the server
    asks for none): each was a test with a `gpucast ingest` process of its own, ~10 s of imports."""
    with_password = prefect_server.replace("http://", "http://alice:S3cretPw@")
    started = ingest(tmp_path, "with-server", PREFECT_API_URL=with_password)
    assert started | {"output": ""} == {"code": 0, "started": [], "uvicorn": [], "output": ""}
    runs = httpx.post(f"{prefect_server}/flow_runs/filter",
                      json={"flows": {"name": {"any_": ["ingest-job-logs"]}}}, timeout=30).json()
    assert [r["state_type"] for r in runs] == ["COMPLETED"]  # the run is the server's
    assert "View at http://***@127.0.0.1:" in started["output"], started["output"][-3000:]
    assert "S3cretPw" not in started["output"]
    logs = httpx.post(f"{prefect_server}/logs/filter", json={"limit": 200}, timeout=30).json()
    assert logs and not [r["message"] for r in logs if "S3cretPw" in r["message"]]


def test_without_a_configured_api_the_command_starts_its_temporary_server(tmp_path):
    """gpucast's own (flows/children.py), never Prefect's `SubprocessASGIServer` (issue 39, item 3). On a new Prefect
    home, as a site's first command: the server creates and migrates its database within the start's wait (the one
    test that starts gpucast's server on a new database on purpose; the others may start from the run's migrated
    copy, tests/conftest.py)."""
    started = ingest(tmp_path, "temporary")
    assert started["started"] == [] and len(started["uvicorn"]) == 1, started


@contextlib.contextmanager
def _answering_404() -> Iterator[int]:
    """An HTTP server on a free loopback port answering 404 to everything (not a Prefect API); its port."""
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def _never_answering() -> Iterator[int]:
    """A socket on a free loopback port that accepts connections and never answers; its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # closed at the end
            while True:
                held.append(listener.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        for conn in held:
            conn.close()


@contextlib.contextmanager
def _dead_port() -> Iterator[int]:
    yield _free_port()  # closed: nothing listens there


CHECK_S = 2  # GPUCAST_PREFECT_API_CHECK_S for the API that never answers: its line after 2 s, not the default 15 s


@pytest.mark.parametrize(("api", "check_s", "says"), [
    (_dead_port, None, "cannot be reached (ConnectError"),
    (_answering_404, None, "answered HTTP 404 to its health check"),
    (_never_answering, CHECK_S, f"did not answer its health check within {CHECK_S:g} s (ReadTimeout)"),
])
def test_an_unusable_configured_api_ends_the_command_in_one_line_at_once(tmp_path, api, check_s, says):
    """Before this, exit 1 and Prefect's 113-line traceback (dead port, 404) or 437 s of silence first (never
    answering). The line names the API (its password masked) and what to do; no flow starts. The bound is the
    setting's (`GPUCAST_PREFECT_API_CHECK_S`): the API that never answers is given 2 s, the others the default."""
    logs = tmp_path / "logs.jsonl"
    logs.write_text(jsonl(record(job_id="a")))
    bound = {"GPUCAST_PREFECT_API_CHECK_S": str(check_s)} if check_s else {}
    with api() as port:
        url = f"http://alice:S3cretPw@127.0.0.1:{port}/api"
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "gpucast.flows.cli", "ingest", str(logs)], capture_output=True,
                              text=True, env=_clean_env(GPUCAST_HOME=str(tmp_path / "home"), PREFECT_API_URL=url,
                                                        **bound), timeout=120)
        seconds = time.monotonic() - t0
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 5 and len(lines) == 1, done.stdout + done.stderr[-3000:]
    assert lines[0].startswith(f"gpucast ingest: the Prefect API at http://***@127.0.0.1:{port}/api (PREFECT_API_URL) "
                               f"{says}"), lines[0]
    assert "unset it to run with a temporary local server" in lines[0] and "S3cretPw" not in lines[0]
    # the process's start (~2-4 s; 15 s on this 2-core machine under 5 helpers' load) and the health check; it was 437 s
    assert seconds < (check_s or 15) + 25, seconds


def test_exit_5_stops_the_reading_begun_before_the_api_check(tmp_path, monkeypatch):
    """Review 72 S1-1: `gpucast ingest FILE` begins reading before the API check; its exit 5 (and Ctrl-C during
    Prefect's start) returned without stopping that reading, whose thread was then inside DuckDB or Polars as the
    interpreter exited (an abort, exit -6, in 3 of 7 Ctrl-C runs). Every way out stops it now (`after_command`)."""
    from gpucast.flows.cli import main
    from gpucast.tasks.ingest import staging

    logs = tmp_path / "logs.jsonl"
    logs.write_text(jsonl(*[record(job_id=f"j{i}") for i in range(3)]))
    monkeypatch.setenv("GPUCAST_HOME", str(tmp_path / "home"))
    started = []
    monkeypatch.setattr(staging, "start_reading", lambda *a, _f=staging.start_reading, **k: (started.append(a), _f(*a, **k)))
    with _dead_port() as port:
        monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{port}/api")
        assert main(["ingest", str(logs)]) == 5
    assert started and not staging._STARTED  # it began, and was dropped at the exit
    assert not [t for t in threading.enumerate() if t.name == "gpucast-read-ahead" and t.is_alive()]


@pytest.mark.parametrize("url", [
    "http://alice:S3cretPw@[bad/api",  # Prefect's settings refused it: pydantic's ValidationError, a traceback, exit 1
    "http://alice:S3cretPw/x@127.0.0.1/api",  # the URL parser reads `S3cretPw` as a port and quotes it
    "http://127.0.0.1:99999/api",
    "127.0.0.1:4200/api",
])
def test_an_address_that_is_no_url_is_one_line_without_its_password(url):
    """Review of issue 48, W 10: the check never raises, and its line names no secret."""
    line = children.api_problem(url, 15)
    assert line.startswith("the Prefect API at ") and "(PREFECT_API_URL) is not " in line, line
    assert "S3cretPw" not in line and "\n" not in line


def test_an_error_quoting_the_address_is_masked_before_it_is_cut(monkeypatch):
    """The error's text was cut to 200 characters first: a cut inside `user:password@` hid the `@` redact looks for."""
    said = "x" * 180 + " http://alice:S3cretPw-long-enough-to-be-cut@127.0.0.1:4200/api/health"
    monkeypatch.setattr(children, "_health_check", lambda url, timeout_s: ConnectionError(said))
    line = children.api_problem("http://alice:S3cretPw@127.0.0.1:4200/api", 15)
    assert "cannot be reached (ConnectionError: " in line and "S3cret" not in line, line


def test_status_with_flows_prints_the_warehouse_whatever_the_api_does(tmp_path):
    """Review of issue 48, W 9: `gpucast status --flows` with a configured API that cannot be used ended at the flow
    commands' health check (exit 5, one line) and never printed the warehouse's part, which status always prints."""
    with _dead_port() as port:
        done = subprocess.run([sys.executable, "-m", "gpucast.flows.cli", "status", "--flows"], capture_output=True,
                              text=True, timeout=120, env=_clean_env(GPUCAST_HOME=str(tmp_path / "home"),
                                                                    PREFECT_API_URL=f"http://127.0.0.1:{port}/api"))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.lower().startswith("no warehouse at ") and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert f"Prefect flow runs: the API at http://127.0.0.1:{port}/api did not answer" in done.stdout, done.stdout
