"""Sets of measured jobs as contract rows, for the accuracy bar and the benchmarks: the shipped measured set
(`tests/data/measured_jobs.csv`) and a public one, GPUMemNet's MLP and CNN runs (`tests/data/gpumemnet_sample.csv`,
tests/data/README.md)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import features

DATA = Path(__file__).resolve().parent / "data" / "measured_jobs.csv"
GPUMEMNET = Path(__file__).resolve().parent / "data" / "gpumemnet_sample.csv"


def load(path: Path = DATA) -> pl.DataFrame:
    """The measured jobs as contract rows (COMPLETED, no hardware context), features built."""
    df = pl.read_csv(path, schema_overrides={c.ITERATIONS: pl.Float64})  # a set may leave it empty throughout
    df = df.with_columns(pl.lit("COMPLETED").alias(c.STATUS), pl.col(c.REGULARIZATION).cast(pl.Boolean),
                         pl.col(c.DATA_AUGMENTATION).cast(pl.Boolean))
    for name in c.HARDWARE:
        df = df.with_columns(pl.lit(None, dtype=pl.String if name == c.GPU_TYPE else pl.Float64).alias(name))
    return features.build(df)


def gpumemnet(path: Path = GPUMEMNET) -> pl.DataFrame:
    """GPUMemNet's measured MLP and CNN runs (one target: `peak_gpu_mem_gb`) as contract rows, features built."""
    return load(path)
