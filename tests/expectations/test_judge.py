"""GX's judge runs in a process of its own, so a process with torch and our validation exits clean (issue 52).

duckdb-engine (GX's way into DuckDB) and torch in one process print ~40 "nanobind: leaked ... DuckDBPyType"
lines at exit (expectations/judge.py says why); a nightly, the demo and the tests import torch. This runs what
a nightly does, torch imported and then a validation through GX on DuckDB, in a fresh interpreter (leaks show at
its exit only), and reads its stderr.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import torch  # noqa: F401 (what a nightly has imported when it validates)
from gpucast.expectations import validate
from tests.expectations.test_job_logs_suite import GOOD_ROWS, typed
from tests.sample_jobs import record

good = validate.validate_frame(typed(*GOOD_ROWS))
bad = validate.validate_frame(typed(*GOOD_ROWS, record(job_id="bad", batch_size=0)))
print("verdicts", good.success, bad.success, sorted(bad.reasons))
print("duckdb_engine here", "duckdb_engine" in sys.modules)
"""


def test_torch_and_a_validation_on_duckdb_exit_without_nanobind_lines():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verdicts True False [3]" in done.stdout, done.stdout
    assert "duckdb_engine here False" in done.stdout, done.stdout  # GX's DuckDB side lives in the judge only
    assert "nanobind" not in done.stderr, done.stderr[-3000:]


def test_a_judge_that_ends_without_answering_fails_the_validation_and_the_next_one_starts_again():
    """A judge that dies mid-request (killed, out of memory) is an error where validation runs, never a verdict;
    the next request starts a judge again. A real process that reads the request and exits stands in for it."""
    from gpucast.expectations.validate import _Worker

    worker = _Worker((sys.executable, "-c", "import sys; sys.stdin.readline()"))
    with pytest.raises(RuntimeError, match="judge .* ended, exit code 0"):
        worker.send({"suite": {}})
        worker.answer()
    worker.send({"suite": {}})
    with pytest.raises(RuntimeError, match="ended"):
        worker.answer()
    assert worker.starts == 2
    worker.close()


def test_a_judge_asked_only_to_warm_up_is_stopped_at_the_end_not_waited_for():
    """`gpucast ingest` starts the judge before its flow: a command that ends before it validates (a file
    that is missing, an API that does not answer) must not wait for the judge's build (3-5 CPU-s) at its exit. A
    process that reads the warm-up and keeps building stands in for it."""
    import time

    from gpucast.expectations.validate import _Worker

    worker = _Worker((sys.executable, "-c", "import sys, time; sys.stdin.readline(); time.sleep(60)"))
    worker.send({"suite": {}})
    process = worker.process
    t0 = time.perf_counter()
    worker.close()
    assert time.perf_counter() - t0 < 10 and process.poll() is not None
