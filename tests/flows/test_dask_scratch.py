"""Where the local Dask cluster of `gpucast train` writes its scratch space (flows/runners.py `choose_runner`)."""

from __future__ import annotations

import tempfile

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


def test_the_local_clusters_scratch_space_is_the_folder_it_is_given(tmp_path, monkeypatch):
    """Issue 48 item 11: the local cluster wrote `$TMPDIR/dask-scratch-space` (the scheduler's and every worker's),
    outside GPUCAST_HOME, and left it there. Training gives it its run's staging folder (removed with the run)."""
    from gpucast.flows.runners import choose_runner
    from gpucast.flows.settings import Cluster

    tmp, scratch = tmp_path / "tmp", tmp_path / "home" / "staging" / "train-1" / "dask"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # this process's cached answer (the scheduler runs here)
    choice = choose_runner(Cluster(dask_workers=1), local_cluster=True, scratch=scratch)
    with choice.runner:
        (worker_dir,) = choice.runner.client.run(lambda dask_worker: dask_worker.local_directory).values()
        scheduler_dir = choice.runner.client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.local_directory)
    assert worker_dir.startswith(str(scratch / "dask-scratch-space"))
    assert scheduler_dir.startswith(str(scratch / "dask-scratch-space"))
    assert list(tmp.iterdir()) == []
