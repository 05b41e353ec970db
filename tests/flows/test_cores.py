"""How many cores a fit in this process uses: OMP_NUM_THREADS when set, else the cores the process may run on."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpucast.flows.runners import cores_here, threads_here


@pytest.mark.parametrize("value, expected", [("3", 3), ("1", 1)])
def test_omp_num_threads_sets_the_cores_a_fit_uses(monkeypatch, value, expected):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert cores_here() == expected and threads_here() == expected  # not on a Dask worker: every core given


@pytest.mark.parametrize("value", ["", "0", "two", "-1"])
def test_without_a_usable_omp_num_threads_every_core_the_process_may_run_on(monkeypatch, value):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert cores_here() == len(os.sched_getaffinity(0))


def test_parallel_test_workers_each_get_their_share_of_the_cores():
    """The conftest gives each xdist worker the cores it may run on // workers OpenMP threads (at least 1)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "GPUCAST_TEST_SESSION_SET")}
    env["PYTEST_XDIST_WORKER_COUNT"] = "2"
    probe = ("import os, sys; sys.path.insert(0, 'tests'); import conftest; "
             "print(os.environ['OMP_NUM_THREADS'])")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert int(out) == max(1, len(os.sched_getaffinity(0)) // 2)
