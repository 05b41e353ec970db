"""Reference data the warehouse carries for planners: the GPU catalogue, as table `gpu_catalog`."""

from __future__ import annotations

import duckdb

from gpucast.records import catalog
from gpucast.warehouse.db import transaction

COLUMNS = ("gpu_type", "vendor", "memory_gb", "fp64_tflops", "fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops",
           "memory_bandwidth_gbs", "source")


def refresh_gpu_catalog(con: duckdb.DuckDBPyConnection) -> int:
    """Replace `gpu_catalog`'s rows with the shipped catalogue's, in one transaction; return the count."""
    rows = [(g.gpu_type, g.vendor, g.memory_gb, *[g.tflops.get(k) for k in ("fp64", "fp32", "tf32", "fp16", "bf16")],
             g.memory_bandwidth_gbs, g.source) for g in catalog.gpus().values()]
    with transaction(con):
        con.execute("DELETE FROM gpu_catalog")
        con.executemany(f"INSERT INTO gpu_catalog ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})", rows)
    return len(rows)
