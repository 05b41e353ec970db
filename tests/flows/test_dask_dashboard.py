"""The local Dask cluster's dashboard (flows/runners.py `dashboard_address`): on Dask's port 8787 when it is free,
else on any free port, without Dask's "Port 8787 is already in use" warning in the run's output."""

from __future__ import annotations

import contextlib
import socket
import warnings
from collections.abc import Iterator

import pytest

from gpucast.flows import runners
from gpucast.flows.settings import Cluster


@contextlib.contextmanager
def held_port() -> Iterator[int]:
    """A port on 127.0.0.1 that something else listens on (as a second run's or a notebook's cluster would)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_port_when_free_any_port_when_taken() -> None:
    port = free_port()
    assert runners.dashboard_address("127.0.0.1", port) == f"127.0.0.1:{port}"
    with held_port() as taken:
        assert runners.dashboard_address("127.0.0.1", taken) == "127.0.0.1:0"
    assert runners.dashboard_address("::1", port).startswith("[::1]:")  # an IPv6 host in brackets, as before
    assert runners.dashboard_address("no-such-host.invalid", port) == f"no-such-host.invalid:{port}"  # Dask refuses it


def test_a_taken_port_gives_a_dashboard_elsewhere_and_no_warning() -> None:
    distributed = pytest.importorskip("distributed")
    with held_port() as taken, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with distributed.LocalCluster(n_workers=0, processes=False,
                                      dashboard_address=runners.dashboard_address("127.0.0.1", taken)) as cluster:
            link = cluster.dashboard_link
    assert not [w for w in caught if "already in use" in str(w.message)]
    assert link.endswith("/status") and f":{taken}/" not in link  # the dashboard is kept, on another port


def test_the_local_cluster_is_given_that_address(monkeypatch) -> None:
    pytest.importorskip("prefect_dask")

    class Api:  # the run's Prefect API, without starting one
        api_url = "http://127.0.0.1:4200/api"

    monkeypatch.setattr("prefect.client.orchestration.get_client", lambda sync_client: contextlib.nullcontext(Api()))
    with held_port() as taken:
        monkeypatch.setattr(runners, "DASHBOARD_PORT", taken)
        choice = runners.choose_runner(Cluster(dask_workers=1), local_cluster=True)
    assert choice.runner.cluster_kwargs["dashboard_address"] == "127.0.0.1:0"
