"""The one reader of an ISO 8601 time given as text: a flag (`--as-of`, `--since`) or a scheduler's export (sacct).

The contract's timestamp columns are parsed column-wise by `tasks/ingest/normalize.py` (polars, several layouts);
this is for one value at a time. Every layer may import it (records/).
"""

from __future__ import annotations

from datetime import UTC, datetime

# The warehouse's clock as a column: the latest `submitted_at` / `updated_at` of any job, when the jobs still running
# were last known to run. One definition, the `warehouse_clock` view (warehouse/sql/schema.sql), read by `job_demand`
# and by `warehouse/training.py` `read_running`, whose staged rows carry it to `tasks/learn/history.py`.
KNOWN_AT = "known_at"


def parse_iso(text: str) -> datetime:
    """`text` as an aware datetime: Python's `datetime.fromisoformat`, with `Z` read as UTC (`2026-11-08T02:00:00Z`,
    and a date with it, `2026-11-08Z`); a time without a zone is UTC. Raises ValueError for anything else (the
    caller says which input it was). Surrounding spaces are not removed: a caller that allows them strips first."""
    return as_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


def as_utc(when: datetime | None) -> datetime | None:
    """`when` with a zone: a time without one is UTC (the rule `parse_iso` reads text by). For a flow's datetime
    parameter at its edge: a deployment run given ISO text without a zone gets a naive datetime from Prefect, which the
    warehouse's aware timestamps cannot be compared with (TypeError)."""
    return when if when is None or when.tzinfo else when.replace(tzinfo=UTC)
