"""Every Prefect task that retries asks first whether a retry can help (review 85 S2-6)."""

from __future__ import annotations

import importlib
import pkgutil

from prefect import Task

import gpucast.flows as flows_package
from gpucast.flows.errors import no_retry_on_environment


def test_every_task_that_retries_skips_a_full_disk_a_permission_error_and_a_damaged_model():
    """`record-plan` and `record-demand` retried a full disk twice (docs/operations.md: "Disk-full and permission
    errors are not retried"), `score-target` a damaged metadata.json after a 10 s wait."""
    retrying = {}
    for info in pkgutil.walk_packages(flows_package.__path__, f"{flows_package.__name__}."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, Task) and value.retries:
                retrying[value.name] = value.retry_condition_fn
    assert {"record-plan", "record-demand", "score-target", "refit-champion", "publish", "load-run"} <= set(retrying)
    assert {name for name, fn in retrying.items() if fn is not no_retry_on_environment} == set()
