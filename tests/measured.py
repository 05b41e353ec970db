"""The measured jobs (`tests/data/measured_jobs.csv`) as contract rows, for the accuracy bar and benchmark."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import features

DATA = Path(__file__).resolve().parent / "data" / "measured_jobs.csv"


def load(path: Path = DATA) -> pl.DataFrame:
    """The measured jobs as contract rows (COMPLETED, no hardware context), features built."""
    df = pl.read_csv(path)
    df = df.with_columns(pl.lit("COMPLETED").alias(c.STATUS), pl.col(c.REGULARIZATION).cast(pl.Boolean),
                         pl.col(c.DATA_AUGMENTATION).cast(pl.Boolean))
    for name in c.HARDWARE:
        df = df.with_columns(pl.lit(None, dtype=pl.String if name == c.GPU_TYPE else pl.Float64).alias(name))
    return features.build(df)
