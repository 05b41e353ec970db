"""Prefect flow `score-pending`: every PENDING job gets P10/P50/P90 per target from its champion."""

from __future__ import annotations

import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger, task

from gpucast.tasks import score as steps
from gpucast.tasks.score import Champion, Scorer
from gpucast.warehouse import db, forecast
from gpucast.warehouse.housekeeping import claim_staging, failpoint, sweep_orphans
from gpucast.warehouse.publish import publish_snapshot
from gpucast.warehouse.settings import Settings


@task(name="score-target", task_run_name="score {champion.target}", retries=1, retry_delay_seconds=10)
def score_target(champion: Champion, pending_path: str, out: str, score_run_id: str, scored_at: datetime,
                 gpu_mem_gb: float, batch_rows: int, device: str | None) -> int:
    """Score the staged pending jobs with one champion; stage the forecasts as Parquet."""
    import polars as pl

    logger = get_run_logger()
    pending = pl.read_parquet(pending_path)
    scored = Scorer(champion, device=device).score(pending, batch_rows=batch_rows, progress=logger.info)
    scored = steps.memory_advice(scored, gpu_mem_gb).with_columns(
        pl.lit(score_run_id).alias("score_run_id"), pl.lit(scored_at).alias("scored_at"))
    scored.select(forecast.FORECAST_COLUMNS).write_parquet(out)
    return scored.height


@task(name="publish-forecasts", retries=2, retry_delay_seconds=5)
def publish_forecasts(score_run_id: str, started_at: datetime, parts: list[str], pending_jobs: int,
                      targets: list[str], gpu_mem_gb: float) -> int:
    settings = Settings.from_env()
    with db.writer(settings) as con:
        return forecast.publish(con, score_run_id, started_at, datetime.now(UTC), [Path(p) for p in parts],
                                pending_jobs, targets, gpu_mem_gb)


@flow(name="score-pending", log_prints=True)
def score_pending(gpu_mem_gb: float = steps.DEFAULT_GPU_MEM_GB, batch_rows: int = steps.DEFAULT_BATCH_ROWS,
                  device: str | None = None, publish: bool = True) -> dict:
    """Forecast every PENDING job with each target's champion; publish all forecasts at once.

    `gpu_mem_gb` is the GPU size `oom_risk` is judged against. `publish` refreshes the planners'
    copy at the end (the nightly flow publishes once, itself).
    """
    settings = Settings.from_env().ensure()
    started_at = datetime.now(UTC)
    score_run_id = f"score-{started_at:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    sweep_orphans(settings)
    staging = claim_staging(settings.staging_dir / score_run_id)
    try:
        with db.writer(settings) as con:
            forecast.start_run(con, score_run_id, started_at)
            champions = forecast.latest_champions(con)
            pending = forecast.read_pending(con)
        if not champions:
            raise FileNotFoundError("no trained champion in the warehouse: run `gpucast train` (or `gpucast nightly`) first")
        pending_path = staging / "pending.parquet"
        pending.write_parquet(pending_path)
        print(f"{score_run_id}: {pending.height:,} pending job(s) x {len(champions)} target(s): "
              + ", ".join(f"{ch.target} by {ch.model} ({ch.train_run_id})" for ch in champions))
        parts = []
        for ch in champions:
            out = staging / f"{ch.target}.parquet"
            score_target(ch, str(pending_path), str(out), score_run_id, started_at, gpu_mem_gb, batch_rows, device)
            parts.append(str(out))
        failpoint("score:after-staging")
        n = publish_forecasts(score_run_id, started_at, parts, pending.height, [ch.target for ch in champions], gpu_mem_gb)
    except Exception as exc:
        with db.writer(settings) as con:
            forecast.record_failure(con, score_run_id, started_at, datetime.now(UTC), f"{type(exc).__name__}: {exc}")
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if publish:
            publish_snapshot(settings)
    print(f"{score_run_id}: published {n:,} forecasts for {pending.height:,} pending job(s)")
    return {"score_run_id": score_run_id, "pending_jobs": pending.height, "forecasts": n,
            "champions": {ch.target: ch.model for ch in champions}}
