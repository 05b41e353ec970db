"""Prefect flow `ingest-job-logs`: files -> staged, validated rows -> DuckDB + Parquet lake."""

from __future__ import annotations

import shutil
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger, task

from gpucast.tasks import ingest as steps
from gpucast.tasks.readers import DEFAULT_CHUNK_ROWS
from gpucast.warehouse import db, load
from gpucast.warehouse.housekeeping import claim_staging, failpoint, sweep_orphans
from gpucast.warehouse.publish import publish_snapshot
from gpucast.warehouse.settings import Settings


@task(name="find-files")
def find_files(paths: list[str] | None, settings: Settings) -> list[str]:
    """The files named (files, folders, globs), else the inbox's files not taken in before."""
    if paths:
        return [str(p) for p in steps.discover(paths)]
    return [str(p) for p in steps.inbox_files(settings.inbox_dir, db.ingested_sha256s(settings))]


@task(name="stage-file", task_run_name="stage {path}")
def stage_file(path: str, staging_dir: Path, index: int, chunk_rows: int) -> steps.FileResult:
    """Read, normalise and validate one file into the run's staging folder."""
    logger = get_run_logger()
    result = steps.stage_file(Path(path), staging_dir, index, chunk_rows, progress=logger.info)
    if result.status == "rejected":
        logger.warning("file rejected: %s: %s", path, result.reason)
    return result


@task(name="load-run", retries=2, retry_delay_seconds=10)
def load_run(
    run_id: str, started_at: datetime, staging_dir: Path, results: list[steps.FileResult], settings: Settings
) -> dict:
    """Commit the staged run to the warehouse in one transaction and refresh the lake."""
    with db.writer(settings) as con:
        t0 = time.perf_counter()
        totals = load.load_run(con, run_id, staging_dir, results)
        t1 = time.perf_counter()
        load.refresh_lake(con, settings.lake_dir, run_id)
        totals["load_seconds"] = {"warehouse": round(t1 - t0, 2), "lake": round(time.perf_counter() - t1, 2)}
    return totals


@task(name="record-failure")
def record_failure(run_id: str, started_at: datetime, files: int, message: str, settings: Settings) -> None:
    """Leave the failed run and its reason in `ingest_runs` for on-call."""
    with db.writer(settings) as con:
        load.start_run(con, run_id, started_at, files)
        load.fail_run(con, run_id, message)


@flow(name="ingest-job-logs", log_prints=True)
def ingest_job_logs(paths: list[str] | None = None, chunk_rows: int = DEFAULT_CHUNK_ROWS, publish: bool = True) -> dict:
    """Ingest job-log files (or the inbox's new files) into the lake and the warehouse.

    `publish` refreshes the planners' copy at the end (the nightly flow publishes once, itself).
    """
    settings = Settings.from_env().ensure()
    started_at = datetime.now(UTC)
    run_id = f"ingest-{started_at:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    sweep_orphans(settings)
    files = find_files(paths, settings)
    print(f"{run_id}: {len(files)} file(s) to ingest")
    with db.writer(settings) as con:
        load.start_run(con, run_id, started_at, len(files))
    staging_dir = claim_staging(settings.staging_dir / run_id)
    try:
        results = [stage_file(f, staging_dir, i, chunk_rows) for i, f in enumerate(files)]
        failpoint("ingest:after-staging")
        totals = load_run(run_id, started_at, staging_dir, results, settings)
    except Exception as exc:
        record_failure(run_id, started_at, len(files), f"{type(exc).__name__}: {exc}", settings)
        raise
    finally:
        shutil.rmtree(staging_dir, ignore_errors=True)
        if publish:
            publish_snapshot(settings)
    print(
        f"{run_id}: read {totals['rows_read']:,} rows = loaded {totals['rows_loaded']:,} "
        f"+ rejected {totals['rows_rejected']:,} + duplicate {totals['rows_duplicate']:,}; "
        f"{totals['files_rejected']} file(s) rejected"
    )
    seconds = {k: round(sum(r.seconds.get(k, 0.0) for r in results), 2) for k in ("read", "check", "write")}
    return {"run_id": run_id, "files": len(files), **totals, "stage_seconds": seconds}
