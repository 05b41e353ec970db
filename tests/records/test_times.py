"""records/times.py: the one reader of an ISO 8601 time given as text (--as-of, --since, sacct's times)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from gpucast.records.times import parse_iso


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-11-08T02:00:00Z", datetime(2026, 11, 8, 2, tzinfo=UTC)),
    ("2026-11-08T02:00:00", datetime(2026, 11, 8, 2, tzinfo=UTC)),  # no zone: UTC
    ("2026-11-08", datetime(2026, 11, 8, tzinfo=UTC)),
    ("2026-11-08Z", datetime(2026, 11, 8, tzinfo=UTC)),  # a date with Z: what --since always took
    ("2026-11-08 02:00:00.5Z", datetime(2026, 11, 8, 2, 0, 0, 500000, tzinfo=UTC)),
    ("2026-11-08T02:00:00+01:00", datetime(2026, 11, 8, 2, tzinfo=timezone(timedelta(hours=1)))),  # kept, not converted
])
def test_an_iso_time_is_read_aware(text: str, expected: datetime) -> None:
    when = parse_iso(text)
    assert when == expected and when.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize("text", ["", "yesterday", "2026-13-01", "2026-11-08T02:00:00z", " 2026-11-08", "Unknown"])
def test_anything_else_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_iso(text)
