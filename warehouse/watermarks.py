"""How far each incremental source has been read (table `source_watermarks`): `gpucast import mlflow`
reads the runs new or changed since its watermark, per tracking URI and experiment."""

from __future__ import annotations

from datetime import UTC, datetime

from gpucast.warehouse.concerns import Storage
from gpucast.warehouse.db import transaction, writer


def read_watermarks(storage: Storage, source: str, location: str) -> dict[str, int]:
    """{scope: watermark (ms since the epoch)} of one source location; empty before its first import."""
    with writer(storage) as con:
        got = con.execute("SELECT scope, watermark_ms FROM source_watermarks WHERE source = ? AND location = ?",
                          [source, location]).fetchall()
    return dict(got)


def save_watermarks(storage: Storage, source: str, location: str, marks: dict[str, int], ingest_run_id: str) -> None:
    """Record each scope's new watermark (after the ingest run that loaded what was read committed)."""
    now = datetime.now(UTC)
    with writer(storage) as con, transaction(con):
        for scope, mark in marks.items():
            con.execute("INSERT OR REPLACE INTO source_watermarks VALUES (?, ?, ?, ?, ?, ?)",
                        [source, location, scope, mark, ingest_run_id, now])
