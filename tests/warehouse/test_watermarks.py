"""How far incremental sources have been read (`warehouse/watermarks.py`, table `source_watermarks`)."""

from __future__ import annotations

from gpucast.flows.settings import Settings
from gpucast.warehouse.watermarks import read_watermarks, save_watermarks


def test_a_watermark_per_location_and_scope_replaced_by_the_next_import(home):
    storage = Settings.from_env().ensure().storage
    assert read_watermarks(storage, "mlflow", "sqlite:///a.db") == {}
    save_watermarks(storage, "mlflow", "sqlite:///a.db", {"1": 1_000, "2": 2_000}, "ingest-1")
    save_watermarks(storage, "mlflow", "sqlite:///b.db", {"1": 5_000}, "ingest-2")
    save_watermarks(storage, "mlflow", "sqlite:///a.db", {"1": 3_000}, "ingest-3")  # experiment 2 had nothing new
    assert read_watermarks(storage, "mlflow", "sqlite:///a.db") == {"1": 3_000, "2": 2_000}
    assert read_watermarks(storage, "mlflow", "sqlite:///b.db") == {"1": 5_000}
    assert read_watermarks(storage, "slurm", "sqlite:///a.db") == {}
