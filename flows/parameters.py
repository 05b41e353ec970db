"""How a flow run's parameters are written to Prefect's API: the same JSON as Prefect's, without importing FastAPI.

Prefect records a flow run's parameters (`prefect flow-run inspect`, the UI's Parameters tab) through
`Flow.serialize_parameters`, which imports FastAPI's `jsonable_encoder` for every call: 0.32 CPU-s of FastAPI's
import on the path of `gpucast ingest` before the first row is read, where nothing else in the command uses
FastAPI (issue 52, the fixed cost; docs/benchmarks.md, session 20). `Flow` encodes the kinds of values gpucast's
flows take (None, str, int, float, bool, lists, tuples, str-keyed dicts, dataclasses such as `Storage`, paths)
as `jsonable_encoder` does, and hands anything else (a pydantic model, a datetime, an enum, a future) to
Prefect's own method, so a run's record is the same either way (tests/flows/test_parameters.py compares them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from enum import Enum
from pathlib import PurePath
from typing import Any

import prefect.flows


class NotPlain(TypeError):
    """A value `plain_json` leaves to Prefect's own encoder."""


def plain_json(value: Any) -> Any:
    """`value` as FastAPI's `jsonable_encoder` (default options) gives it, for plain values, dataclasses and paths;
    raises `NotPlain` for any other kind. The checks keep `jsonable_encoder`'s order: a dataclass, then an enum
    (left to it), a path, then str / int / float / None (bool is an int: kept as it is)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain_json(dataclasses.asdict(value))
    if isinstance(value, Enum):
        raise NotPlain(type(value).__name__)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (str, int, float, type(None))):
        return value
    if isinstance(value, dict) and all(type(k) is str for k in value):  # a str subclass key (a StrEnum): Prefect's way
        return {k: plain_json(v) for k, v in value.items() if not k.startswith("_sa")}  # (as jsonable_encoder: SQLAlchemy's)
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]
    raise NotPlain(type(value).__name__)


class Flow(prefect.flows.Flow):
    """Prefect's `Flow`, whose parameters are recorded by `plain_json` when every one is plain (module doc)."""

    def serialize_parameters(self, parameters: dict[str, Any]) -> dict[str, Any]:
        try:
            return {key: plain_json(value) for key, value in parameters.items()}
        except Exception:  # not plain (`NotPlain`), or a value the walk cannot take (a cycle, say): Prefect's own way
            return super().serialize_parameters(parameters)


def flow(**options: Any) -> Callable[[Callable[..., Any]], Flow]:
    """`prefect.flow(**options)` making a `Flow` of this module (keyword options only)."""
    return lambda fn: Flow(fn, **options)
