"""A flow command starts Prefect's temporary server while it imports (`flows/children.py start_server_early`).

The flow's own start must then wait for that server to answer, not take "running" for "up": Prefect marks
the server running before its /health answers, so without `_serialised` the flow would call a server that
is not listening yet.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

from gpucast.flows import children


def test_a_second_start_waits_for_the_first_to_finish():
    inside = threading.Event()

    class Server:  # Prefect's contract: `running` is set at once, the server answers later
        running, answered = False, False

        def start(self):
            if self.running:
                return
            self.running = True
            inside.set()
            time.sleep(0.3)  # the server taking its time to answer (what is simulated, not a wait)
            self.answered = True

    start = children._serialised(Server.start)
    server = Server()
    first = threading.Thread(target=start, args=(server,))
    first.start()
    assert inside.wait(30)  # the first caller is inside, waiting for its server
    start(server)
    assert server.answered, "the second caller came back before the server answered"
    first.join()


def test_the_server_started_early_answers_when_the_flow_asks_for_it(tmp_path):
    code = textwrap.dedent("""
        import httpx, psutil
        from gpucast.flows.environment import configure
        configure()
        from gpucast.flows import children
        early = children.start_server_early()
        from prefect.server.api.server import SubprocessASGIServer
        server = SubprocessASGIServer()  # what Prefect's get_client does for a flow run
        server.start()
        servers = [p for p in psutil.Process().children() if "uvicorn" in p.cmdline()]
        print(early is not None, httpx.get(server.api_url + "/health").status_code, len(servers))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {"GPUCAST_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "200", "1"], done.stdout + done.stderr[-2000:]  # one server, answering
