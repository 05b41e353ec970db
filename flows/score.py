"""Prefect flow `score-pending`: every PENDING job gets P10/P50/P90 per target from its champion."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl
from prefect import flow, get_run_logger, task

from gpucast.expectations.records import Champion
from gpucast.flows.errors import no_retry_on_environment
from gpucast.tasks import features
from gpucast.tasks import score as steps
from gpucast.tasks.score import Scorer
from gpucast.warehouse import db, forecast, runs, training
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.publish import publish_snapshot
from gpucast.warehouse.settings import Settings


@task(name="read-pending")
def read_pending(settings: Settings, out: Path) -> str:
    """The pending jobs, staged as Parquet for every target's step."""
    with db.writer(settings) as con:
        pending = training.read_pending(con)
    features.build(pending).write_parquet(out)
    return str(out)


@task(name="read-champions")
def read_champions(settings: Settings) -> list[Champion]:
    with db.writer(settings) as con:
        champions = forecast.latest_champions(con)
    if not champions:
        raise FileNotFoundError("no trained champion in the warehouse: run `gpucast train` (or `gpucast nightly`) first")
    return champions


@task(name="score-target", task_run_name="score {champion.target}", retries=1, retry_delay_seconds=10)
def score_target(champion: Champion, pending_path: str, out: str, score_run_id: str, scored_at: datetime,
                 gpu_mem_gb: float, batch_rows: int, device: str | None) -> int:
    """Score the staged pending jobs with one champion; stage the forecasts as Parquet; return how many
    jobs were out of the champion's distribution."""
    pending = pl.read_parquet(pending_path)
    scored = Scorer(champion, device=device).score(pending, batch_rows=batch_rows, progress=get_run_logger().info)
    scored = steps.memory_advice(scored, steps.job_gpu_memory(pending, gpu_mem_gb)).with_columns(
        pl.lit(score_run_id).alias("score_run_id"), pl.lit(scored_at).alias("scored_at"))
    scored.select(forecast.FORECAST_COLUMNS).write_parquet(out)
    return int(scored["ood"].sum())


@task(name="publish-forecasts", retries=2, retry_delay_seconds=5, retry_condition_fn=no_retry_on_environment)
def publish_forecasts(score_run_id: str, parts: list[str], pending_jobs: int, targets: list[str], gpu_mem_gb: float,
                      settings: Settings) -> int:
    """Publish the run's forecasts; prune runs past GPUCAST_KEEP_FORECAST_DAYS (never within the backtest window)."""
    keep_days = max(settings.keep_forecast_days, settings.backtest_days)
    with db.writer(settings) as con:
        n, pruned = forecast.publish(con, score_run_id, [Path(p) for p in parts], pending_jobs, targets, gpu_mem_gb,
                                     keep_days)
    if pruned:
        print(f"pruned the forecasts of {pruned} score run(s) older than {keep_days} days (GPUCAST_KEEP_FORECAST_DAYS)")
    return n


@flow(name="score-pending", log_prints=True)
def score_pending(gpu_mem_gb: float | None = None, batch_rows: int = steps.DEFAULT_BATCH_ROWS,
                  device: str | None = None, pending_path: str | None = None, publish: bool = True,
                  as_of: datetime | None = None, settings: Settings | None = None) -> dict:
    """Forecast every PENDING job with each target's champion; publish all forecasts at once.

    `gpu_mem_gb` is the GPU size `oom_risk` is judged against (default: the GPUCAST_GPU_MEM_GB
    setting). `pending_path`: the pending jobs already staged by the caller (the nightly's features
    step); else they are read here. `publish` refreshes the planners' copy after a successful run
    (the nightly flow publishes once, itself). `as_of`: the time the forecasts are stamped with
    (default: now), for a backfill or a demo replaying past days; the backtest compares it with the
    jobs' start times.
    """
    settings = (settings or Settings.from_env()).override(gpu_mem_gb=gpu_mem_gb).ensure()
    with runs.lifecycle(settings, "score") as run:
        champions = read_champions(settings)
        pending_path = pending_path or read_pending(settings, run.staging / "pending.parquet")
        pending_jobs = pl.scan_parquet(pending_path).select(pl.len()).collect().item()
        print(f"{run.run_id}: {pending_jobs:,} pending job(s) x {len(champions)} target(s): "
              + ", ".join(f"{ch.target} by {ch.model} ({ch.train_run_id})" for ch in champions))
        parts, ood = [], {}
        for ch in champions:
            out = run.staging / f"{ch.target}.parquet"
            ood[ch.target] = score_target(ch, pending_path, str(out), run.run_id, as_of or run.started_at,
                                          settings.gpu_mem_gb, batch_rows, device)
            parts.append(str(out))
        failpoint("score:after-staging")
        n = publish_forecasts(run.run_id, parts, pending_jobs, [ch.target for ch in champions], settings.gpu_mem_gb,
                              settings)
    if publish:
        publish_snapshot(settings)
    print(f"{run.run_id}: published {n:,} forecasts for {pending_jobs:,} pending job(s)")
    return {"score_run_id": run.run_id, "pending_jobs": pending_jobs, "forecasts": n,
            "ood_forecasts": sum(ood.values()), "ood_by_target": ood,
            "champions": {ch.target: ch.model for ch in champions}}
