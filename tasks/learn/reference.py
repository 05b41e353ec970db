"""The zoo's reference set as training rows (issue 37): named architectures' traced training steps
(`tests/data/make_reference_archs.py` -> `reference_archs.csv`) in the contract's columns, each with its own
trace as the traced prior, ready to stand beside a site's history.

`load` never raises for a bad file: a missing or unreadable set, or one missing a column or holding a
bad value, comes back as no rows and a one-line warning naming the file (and the row), so training goes
on without it and the nightly report says why.

The set's own truth (`peak_gpu_mem_gb`) is the measured set's convention: the traced tensor peak plus a
0.3-1.0 GB context draw, no caching allocator. A site's history is what its GPUs *report* (the allocator's
reserve included: x1.15 on the H100, docs/models.md "Traced against a real GPU"), so `load` puts the truth on
that convention by default (`gpu_convention`): `traced.reported_gb` of the tensor peak, the same figure the
traced prior gives a job of the site.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import features, priors, traced

TENSOR_PEAK_GB = "tensor_peak_gb"
REQUIRED = (c.ARCH, c.MODEL_TYPE, c.PARAMS_MILLION, c.BATCH_SIZE, c.INPUT_DIM, c.NUM_LAYERS, c.ITERATIONS, c.PRECISION,
            c.OPTIMIZER, c.PEAK_GPU_MEM_GB, priors.GFLOP_PER_ITERATION, TENSOR_PEAK_GB)
POSITIVE = (c.PARAMS_MILLION, c.BATCH_SIZE, c.INPUT_DIM, c.NUM_LAYERS, c.PEAK_GPU_MEM_GB, priors.GFLOP_PER_ITERATION,
            TENSOR_PEAK_GB)
JOB_ID_PREFIX = "zoo-"  # apart from any site's job ids


@dataclass(frozen=True)
class ReferenceSet:
    """The reference set's rows (contract columns, features built, COMPLETED), or None and why."""

    rows: pl.DataFrame | None
    warning: str | None


def _problem(df: pl.DataFrame) -> str | None:
    """The first thing wrong with the frame, in words (row numbers are the file's lines)."""
    missing = [n for n in REQUIRED if n not in df.columns]
    if missing:
        return f"missing column(s) {', '.join(missing)}"
    if df.is_empty():
        return "no rows"
    for name in POSITIVE:
        values = df[name].cast(pl.Float64, strict=False)
        bad = (values.is_null() | ~values.is_finite() | (values <= 0)).arg_true()
        if len(bad):
            return f"line {int(bad[0]) + 2}: {name} must be a positive number, got {df[name][int(bad[0])]!r}"
    return None


def load(path: Path | None, gpu_convention: bool = True, traced_prior: bool = True) -> ReferenceSet:
    """The reference set at `path` as training rows; `ReferenceSet(None, warning)` when it cannot be used.
    `gpu_convention`: the truth is what a GPU would report for the traced step (`on_gpu_convention`);
    `traced_prior`: each row's prior is its own trace (else the analytic prior, as for a job not recognised)."""
    if path is None:
        return ReferenceSet(None, None)
    why = "training goes on without it"
    if not path.exists():
        return ReferenceSet(None, f"reference set {path} is missing: {why}")
    try:
        df = pl.read_csv(path, infer_schema_length=None)
    except (OSError, pl.exceptions.PolarsError, UnicodeDecodeError) as exc:
        return ReferenceSet(None, f"reference set {path} is unreadable ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}): {why}")
    if problem := _problem(df):
        return ReferenceSet(None, f"reference set {path} is corrupt ({problem}): {why}")
    return ReferenceSet(as_rows(on_gpu_convention(df) if gpu_convention else df, traced_prior), None)


def on_gpu_convention(df: pl.DataFrame) -> pl.DataFrame:
    """The set with `peak_gpu_mem_gb` replaced by what a GPU reports for its traced tensor peak."""
    reported = [traced.reported_gb(gb * priors.GB) for gb in df[TENSOR_PEAK_GB].cast(pl.Float64).to_list()]
    return df.with_columns(pl.Series(c.PEAK_GPU_MEM_GB, reported, dtype=pl.Float64))


def as_rows(df: pl.DataFrame, traced_prior: bool = True) -> pl.DataFrame:
    """Contract rows of the set (COMPLETED, no hardware logged), features built with each row's own trace
    (`traced_prior`), else with the analytic prior."""
    df = df.with_columns(pl.format(f"{JOB_ID_PREFIX}{{}}", pl.col(c.JOB_ID) if c.JOB_ID in df.columns else pl.int_range(pl.len()))
                         .alias(c.JOB_ID), pl.lit("COMPLETED").alias(c.STATUS),
                         *[pl.col(n).cast(pl.Boolean) for n in (c.REGULARIZATION, c.DATA_AUGMENTATION) if n in df.columns],
                         *[pl.col(n).cast(pl.Float64) for n in (c.PARAMS_MILLION, c.ITERATIONS, c.PEAK_GPU_MEM_GB)])
    for name in (*c.HARDWARE, c.LEARNING_RATE, c.REGULARIZATION, c.DATA_AUGMENTATION):
        if name not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=pl.String if name == c.GPU_TYPE else
                                        pl.Boolean if name in (c.REGULARIZATION, c.DATA_AUGMENTATION) else pl.Float64).alias(name))
    if not traced_prior:
        return features.build(df.with_columns(pl.lit(None, pl.String).alias(c.ARCH)), trace=None)
    n = df.height
    trace = pl.DataFrame({
        traced.TRACED_MEM_GB: [traced.reported_gb(gb * priors.GB) for gb in df[TENSOR_PEAK_GB].cast(pl.Float64).to_list()],
        traced.TRACED_GFLOP_PER_ITER: df[priors.GFLOP_PER_ITERATION].cast(pl.Float64),
        traced.TRACED_PARAMS_MILLION: df[c.PARAMS_MILLION], traced.TRACED_NUM_LAYERS: df[c.NUM_LAYERS].cast(pl.Int64),
        traced.TRACED_INPUT_DIM: df[c.INPUT_DIM].cast(pl.Int64), traced.TRACE_STATUS: [traced.CACHED] * n,
        traced.ARCH_INFERRED: [None] * n, traced.ARCH_MATCH_DISTANCE: [None] * n, traced.ARCH_INFERENCE: [None] * n,
    }, schema=traced.TRACE_SCHEMA)
    return features.build(df, trace=trace)
