"""A flow run's parameters are recorded as Prefect records them, without FastAPI (flows/parameters.py; issue 52, the
ingest command's fixed cost)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path, PurePosixPath

import prefect.flows
import pytest

from gpucast.flows.parameters import NotPlain, plain_json


class Colour(StrEnum):
    RED = "red"


@dataclass(frozen=True)
class Inner:
    where: Path
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class Outer:
    inner: Inner
    note: str | None
    extra: dict


PLAIN = [None, True, False, 0, -3, 2.5, float("inf"), "text", "", [], (), [1, "a", None], (Path("/a"), 2),
         {"a": 1, "b": [Path("x/y"), {"c": None}]}, {"_sa_hidden": 1, "kept": 2}, PurePosixPath("/p/q"),
         Outer(Inner(Path("/home/x"), (1, 2)), None, {"k": [Path("z")]})]


@pytest.mark.parametrize("value", PLAIN, ids=repr)
def test_plain_values_encode_as_fastapi_encodes_them(value):
    from fastapi.encoders import jsonable_encoder

    from gpucast.flows.ingest import ingest_job_logs

    assert plain_json(value) == jsonable_encoder(value)
    assert type(plain_json(value)) is type(jsonable_encoder(value))
    # and as Prefect's own method records it (a Prefect upgrade that changes how it records a value fails here)
    assert ingest_job_logs.serialize_parameters({"v": value}) == prefect.flows.Flow.serialize_parameters(
        ingest_job_logs, {"v": value})


def test_a_value_the_walk_cannot_take_is_left_to_prefect():
    from gpucast.flows.ingest import ingest_job_logs

    cycle: list = []
    cycle.append(cycle)
    assert ingest_job_logs.serialize_parameters({"v": cycle}) == prefect.flows.Flow.serialize_parameters(
        ingest_job_logs, {"v": cycle})


@pytest.mark.parametrize("value", [Colour.RED, datetime(2026, 11, 30, tzinfo=UTC), {1: "int key"}, {"a"},
                                   [datetime(2026, 1, 1)], {Colour.RED: 1}], ids=repr)
def test_other_kinds_are_left_to_prefect(value):
    with pytest.raises(NotPlain):
        plain_json(value)


def test_an_enum_key_is_recorded_as_a_plain_str_as_prefect_records_it():
    """Review 70 S3-9: a StrEnum key compares equal to its str, but Prefect's record holds the str itself."""
    from gpucast.flows.ingest import ingest_job_logs

    ours = ingest_job_logs.serialize_parameters({"v": {Colour.RED: 1}})
    assert ours == prefect.flows.Flow.serialize_parameters(ingest_job_logs, {"v": {Colour.RED: 1}})
    assert [type(k) for k in ours["v"]] == [str]


def ingest_parameters(home: Path) -> dict:
    from gpucast.flows.settings import Settings

    settings = Settings.from_env({"GPUCAST_HOME": str(home)})
    return {"paths": [str(home / "a.jsonl"), str(home / "logs")], "chunk_rows": 250_000, "publish": True,
            "mapping": None, "source": "slurm", "source_mapping": None, "storage": settings.storage,
            "quality": settings.quality}


def test_the_ingest_flows_parameters_are_recorded_as_prefect_records_them(tmp_path):
    from gpucast.flows.ingest import ingest_job_logs

    params = ingest_parameters(tmp_path)
    assert ingest_job_logs.serialize_parameters(params) == prefect.flows.Flow.serialize_parameters(ingest_job_logs, params)
    with_a_time = {**params, "paths": None, "storage": datetime(2026, 11, 30, tzinfo=UTC)}  # not plain: Prefect's own
    assert (ingest_job_logs.serialize_parameters(with_a_time)
            == prefect.flows.Flow.serialize_parameters(ingest_job_logs, with_a_time))


def test_recording_the_ingest_flows_parameters_imports_no_fastapi(tmp_path):
    """FastAPI's import was 0.32 CPU-s of `gpucast ingest` before its first row (Prefect's `serialize_parameters`);
    nothing else in the command imports it (a fresh interpreter: this test session has imported it)."""
    code = ("import sys\nfrom tests.flows.test_parameters import ingest_parameters\nfrom pathlib import Path\n"
            "from gpucast.flows.ingest import ingest_job_logs\n"
            "ingest_job_logs.serialize_parameters(ingest_parameters(Path(sys.argv[1])))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'fastapi'))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])  # `tests.flows` from the repository root, wherever pytest runs
    assert out.stdout.strip() == "[]"
