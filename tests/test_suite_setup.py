"""The test suite's own set-up: parallel workers (pytest-xdist) never share a data directory or Prefect home."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = '''
import json, os
from pathlib import Path


def test_where_this_worker_keeps_its_state():
    out = Path(os.environ["PROBE_OUT"]) / (os.environ.get("PYTEST_XDIST_WORKER", "main") + ".json")
    out.write_text(json.dumps({k: os.environ.get(k) for k in ("GPUCAST_HOME", "PREFECT_HOME")}))
'''


def test_each_worker_has_its_own_data_directory_and_prefect_home(tmp_path):
    """The session's conftest, under `-n 2 --dist each` (the probe runs once on each worker): two homes, two
    Prefect homes, and neither is the one the calling session (or xdist's controller) made for itself."""
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_probe.py").write_text(PROBE)
    (tmp_path / "out").mkdir()
    env = {**os.environ, "PROBE_OUT": str(tmp_path / "out")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "each",
                           "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "out").glob("*.json")}
    assert sorted(seen) == ["gw0", "gw1"], seen
    for key in ("GPUCAST_HOME", "PREFECT_HOME"):
        values = {worker[key] for worker in seen.values()}
        assert len(values) == 2 and os.environ[key] not in values, (key, seen)
