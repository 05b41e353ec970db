"""--as-of and --since read a time the same way (records/times.py `parse_iso`), each refusing with its own line."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpucast.flows.cli.pipeline import _as_of
from gpucast.tasks.sources.mlflow_client import since_ms


@pytest.mark.parametrize("text", ["2026-11-08", "2026-11-08T02:00:00", "2026-11-08T02:00:00Z", "2026-11-08T03:00:00+01:00"])
def test_as_of_and_since_give_the_same_instant(text: str) -> None:
    assert since_ms(text) == int(_as_of(text).timestamp() * 1000)
    assert _as_of(text).tzinfo is not None


def test_no_zone_is_utc_and_a_bad_time_names_its_flag() -> None:
    assert _as_of("2026-11-08T02:00:00") == datetime(2026, 11, 8, 2, tzinfo=UTC) and _as_of(None) is None
    with pytest.raises(ValueError, match=r"--as-of='yesterday' is not an ISO 8601 time"):
        _as_of("yesterday")
    with pytest.raises(ValueError, match=r"--since 'yesterday' is not an ISO 8601 time"):
        since_ms("yesterday")
