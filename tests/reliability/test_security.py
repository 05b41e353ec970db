"""Security properties that are cheap to break by accident: each one is asserted here.

Covered elsewhere: SQL-looking strings and path-looking job ids in job logs
(test_hostile_inputs.py), `gpucast sql` cannot write, ATTACH, COPY or read files
(tests/flows/test_cli.py), skops refuses types outside the allow-list (tests/tasks/test_models.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class Payload:
    """Unpickling this would run code."""

    def __reduce__(self):
        return (print, ("pwned",))


def test_a_checkpoint_with_pickled_objects_is_refused(tmp_path):
    import pickle

    import torch

    from gpucast.tasks.models.transformer_bigru import TransformerBiGRURegressor

    path = tmp_path / "transformer_bigru.pt"
    torch.save({"preset": "tiny", "evil": Payload()}, path)
    with pytest.raises(pickle.UnpicklingError):
        TransformerBiGRURegressor.load(path)


def test_every_server_the_readme_starts_listens_on_loopback():
    starts = [line for line in (ROOT / "README.md").read_text().splitlines() if "prefect server start" in line]
    assert starts, "the README should show how to start the server"
    assert all("--host 127.0.0.1" in line for line in starts), starts


def test_prefect_temporary_server_binds_loopback():
    from prefect.settings import PREFECT_SERVER_API_HOST

    import gpucast.flows  # noqa: F401  (our Prefect defaults)

    assert PREFECT_SERVER_API_HOST.value() == "127.0.0.1"


def test_warehouse_sql_binds_values():
    """SQL text is built only from contract names and paths we create; values travel as parameters.

    A heuristic guard: no f-string SQL in warehouse/ or flows/ interpolates a variable whose name
    says it carries a value from outside (job ids, reasons, files named by users).
    """
    suspicious = re.compile(r"f\"[^\"]*(SELECT|INSERT|UPDATE|DELETE|WHERE)[^\"]*\{(job_id|reason|source_file|query|row)\b")
    offenders = []
    for folder in ("warehouse", "flows", "tasks"):
        for path in (ROOT / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if suspicious.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []
