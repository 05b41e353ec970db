"""gpucast's temporary Prefect API server (`flows/children.py`), started by public means (issue 39, item 3).

A flow command starts it before importing what it needs and does not wait for it: the listening socket is
gpucast's, handed to uvicorn, so a request sent while the server starts waits until Prefect's app answers it.
The server runs in a session of its own, Prefect never starts its own `SubprocessASGIServer`, a flow run
inside `serving` is recorded by that server without flow-run heartbeats, and the server is gone once the
process has exited.
(Signals and kill -9: tests/reliability/test_sigterm.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import psutil

CODE = textwrap.dedent("""
    import json, os, sys
    import httpx, psutil
    from gpucast.flows.environment import configure
    configure()
    from gpucast.flows import children
    server = children.start()
    asked_at_once = httpx.get(server.url + "/health", timeout=120).status_code  # no wait before it
    same = children.start() is server  # a second command in this process reuses it
    from prefect import flow
    from prefect.settings import get_current_settings

    heartbeat_before = get_current_settings().flows.heartbeat_frequency

    @flow(name="thin-check")
    def check() -> tuple:
        return 7, get_current_settings().flows.heartbeat_frequency

    with children.serving(server):
        result, heartbeat_inside = check()
        url_inside = os.environ["PREFECT_API_URL"]
    runs = httpx.post(server.url + "/flow_runs/filter", json={"flows": {"name": {"any_": ["thin-check"]}}},
                      timeout=30).json()
    print(json.dumps({"status": asked_at_once, "same": same, "result": result, "url_inside": url_inside,
                      "url": server.url, "url_after": os.environ.get("PREFECT_API_URL"),
                      "heartbeat_before": heartbeat_before, "heartbeat_inside": heartbeat_inside,
                      "heartbeat_after": get_current_settings().flows.heartbeat_frequency,
                      "runs": [r["state_type"] for r in runs], "pid": server.process.pid,
                      "own_session": os.getsid(server.process.pid) != os.getsid(0),
                      "prefect_server_module": "prefect.server.api.server" in sys.modules}))
""")


def test_the_temporary_server_answers_at_once_runs_apart_and_records_the_flow(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {"GPUCAST_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == 200 and out["same"] and out["result"] == 7, out
    assert out["url_inside"] == out["url"] and out["url_after"] is None, out  # the environment is given back
    assert out["runs"] == ["COMPLETED"], out  # the flow ran against gpucast's server
    # no heartbeats for a server that ends with the command (each flow run's end waited ~0.4 s for the thread);
    # Prefect's default (on) before and after, as a configured server's runs keep it
    assert out["heartbeat_before"] is not None and out["heartbeat_inside"] is None, out
    assert out["heartbeat_after"] == out["heartbeat_before"], out
    assert out["own_session"], "the server shares gpucast's session: a group SIGTERM would reach it"
    assert not out["prefect_server_module"], "Prefect's server module was imported in gpucast's process"
    assert not psutil.pid_exists(out["pid"]) or psutil.Process(out["pid"]).status() == psutil.STATUS_ZOMBIE, \
        "the server outlived the process that started it"
