"""A score run's staged parts fill whole row groups of `forecasts` (issue 52 item 5, review 57 S4): warehouse/forecast.py
`write_staged`, `STAGED_ROW_GROUP_ROWS`."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import duckdb
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.settings import Settings, Storage
from gpucast.warehouse import db, forecast, runs

BATCH = 125_008  # `Scorer.score`'s batches of 250,000 jobs: Polars' default splits each into two such row groups
RUN = "score-20261129T000000Z-rowgroups"


@pytest.fixture
def storage(home) -> Storage:
    return Settings.from_env().ensure().storage


def _scored(batches: int) -> pl.DataFrame:
    """A target's forecasts as `score_target` holds them: one chunk per scored batch."""
    at = datetime(2026, 11, 29, tzinfo=UTC)
    parts = [pl.DataFrame({c.JOB_ID: [f"job-{k * BATCH + i}" for i in range(BATCH)]}).with_columns(
        pl.lit(c.RUNTIME_HOURS).alias("target"), pl.lit(1.0).alias("p10"), pl.lit(2.0).alias("p50"),
        pl.lit(3.0).alias("p90"), pl.lit("lightgbm").alias("model"), pl.lit("t").alias("train_run_id"),
        pl.lit(RUN).alias("score_run_id"), pl.lit(at).alias("scored_at"),
        *[pl.lit(None, pl.Float64).alias(n) for n in ("safe_request_gb", "gpu_mem_gb", "arch_match_distance")],
        pl.lit(None, pl.Boolean).alias("oom_risk"), pl.lit(False).alias("ood"),
        *[pl.lit(None, pl.String).alias(n) for n in ("ood_reason", "arch_inferred")]) for k in range(batches)]
    return pl.concat(parts, rechunk=False)


def _row_groups(storage: Storage, staged: pl.DataFrame) -> int:
    """How many row groups of `forecasts` the run's insert made (before the writer's close, DuckDB's checkpoint,
    which merges partly filled ones by rewriting them)."""
    part = storage.staging_dir / "runtime_hours.parquet"
    forecast.write_staged(staged, part)
    with db.writer(storage) as con:
        runs.start(con, runs.Run("score", RUN, datetime.now(UTC), None))
        assert forecast.publish(con, RUN, [part], staged.height, [c.RUNTIME_HOURS], 80.0, 30) == (staged.height, 0)
        return con.execute("SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('forecasts')").fetchone()[0]


def test_a_runs_staged_forecasts_fill_whole_row_groups(storage):
    """Before: Polars' row groups of 125,008 rows left a 2,128-row group after each full one (4 here, 18 a target at
    1M jobs), which the writer's close rewrote: 2.8-3.2 CPU-s and the score's peak RSS at 1M jobs x 3 targets."""
    staged = _scored(2)
    assert _row_groups(storage, staged) == math.ceil(staged.height / forecast.STAGED_ROW_GROUP_ROWS)
    with duckdb.connect(str(storage.db_path), read_only=True) as con:  # and the rows are the staged ones
        assert con.execute("SELECT count(*), count(DISTINCT job_id) FROM forecasts").fetchone() == (2 * BATCH, 2 * BATCH)
