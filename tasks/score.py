"""Score pending jobs with a target's champion: P10 / P50 / P90 per job, in vectorised batches.

The champion of a target is loaded from its registry folder (code-free formats only, see
`models/registry.py`) together with the feature encoder fitted at training time and the interval
calibration measured on its validation rows (`train.calibrate`). A job's interval is
`prediction * exp(q)` for the 10th, 50th and 90th percentile `q` of the held-out log residuals:
split-conformal prediction, so [P10, P90] covers about 80% of outcomes and P90 alone about 90%,
when tomorrow's jobs look like the ones the champion was calibrated on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.expectations.records import Champion
from gpucast.tasks.models import store
from gpucast.tasks.train import interval

DEFAULT_BATCH_ROWS = 250_000
# Memory advice. PyTorch's caching allocator reserves more than the tensors it holds
# (fragmentation, workspace of cuDNN/cuBLAS); 10% over the P90 peak, rounded up to the next
# 0.5 GB, is the headroom we add before comparing with a GPU's memory.
ALLOCATOR_HEADROOM = 0.10
REQUEST_STEP_GB = 0.5


class Scorer:
    """One target's champion, its encoder and its interval calibration, ready to score frames."""

    def __init__(self, champion: Champion, device: str | None = None):
        loaded = store.load_model(Path(champion.model_dir), champion.model, device=device)
        self.champion = champion
        self.calibration = loaded.calibration
        self.encoder = loaded.encoder
        self.estimator = loaded.estimator

    def score(self, rows: pl.DataFrame, batch_rows: int = DEFAULT_BATCH_ROWS,
              progress: Callable[[str], None] | None = None) -> pl.DataFrame:
        """job_id, target, p10, p50, p90, model, train_run_id for every row of `rows`."""
        parts = []
        for start in range(0, rows.height, batch_rows):
            batch = rows.slice(start, batch_rows)
            pred = np.asarray(self.estimator.predict(self.encoder.transform(batch)), dtype=np.float64)
            p10, p50, p90 = interval(pred, self.calibration)
            parts.append(pl.DataFrame({c.JOB_ID: batch[c.JOB_ID], "p10": p10, "p50": p50, "p90": p90}))
            if progress:
                progress(f"{self.champion.target}: scored {min(start + batch_rows, rows.height):,}/{rows.height:,} jobs")
        out = pl.concat(parts) if parts else pl.DataFrame(schema={c.JOB_ID: pl.String, "p10": pl.Float64,
                                                                   "p50": pl.Float64, "p90": pl.Float64})
        return out.with_columns(pl.lit(self.champion.target).alias("target"), pl.lit(self.champion.model).alias("model"),
                                pl.lit(self.champion.train_run_id).alias("train_run_id"))


def safe_request_gb(p90_gb: np.ndarray | float) -> np.ndarray:
    """P90 peak memory plus allocator headroom, rounded up to the next 0.5 GB."""
    raw = np.asarray(p90_gb, dtype=np.float64) * (1.0 + ALLOCATOR_HEADROOM)
    return np.ceil(raw / REQUEST_STEP_GB - 1e-9) * REQUEST_STEP_GB


def memory_advice(forecasts: pl.DataFrame, gpu_mem_gb: float) -> pl.DataFrame:
    """Add safe_request_gb, gpu_mem_gb and oom_risk to the peak_gpu_mem_gb rows (null elsewhere)."""
    if not (gpu_mem_gb > 0 and math.isfinite(gpu_mem_gb)):
        raise ValueError(f"gpu_mem_gb must be a positive number of GB, got {gpu_mem_gb!r}")
    is_mem = pl.col("target") == c.PEAK_GPU_MEM_GB
    safe = pl.col("p90").map_batches(lambda s: pl.Series(safe_request_gb(s.to_numpy())), return_dtype=pl.Float64)
    return forecasts.with_columns(
        pl.when(is_mem).then(safe).alias("safe_request_gb"),
        pl.when(is_mem).then(pl.lit(float(gpu_mem_gb))).alias("gpu_mem_gb"),
    ).with_columns(pl.when(is_mem).then(pl.col("safe_request_gb") > gpu_mem_gb).alias("oom_risk"))
