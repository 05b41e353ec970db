"""Prefect flow `ingest-job-logs`: files -> staged, validated rows -> DuckDB + Parquet lake."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prefect import get_run_logger, task
from prefect.utilities.annotations import quote

from gpucast.flows.errors import no_retry_on_environment
from gpucast.flows.parameters import flow  # Prefect's, its parameters recorded without importing FastAPI
from gpucast.flows.settings import Quality, Settings, Storage
from gpucast.records.outcomes import FileResult, LoadTotals, RunCheck
from gpucast.records.results import IngestResult
from gpucast.tasks.ingest import staging
from gpucast.tasks.ingest.readers import DEFAULT_CHUNK_ROWS
from gpucast.tasks.sources.mapping import Mapping, check_files, load_mapping
from gpucast.warehouse import db, load, runs
from gpucast.warehouse.errors import LakeRefreshFailed
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.publish import publish_if


@task(name="find-files")
def find_files(paths: list[str] | None, storage: Storage) -> list[str]:
    """The files named (files, folders, globs), else the inbox's files not taken in before. Inbox
    files whose content was ingested before are archived at once (`staging.archive`), unread."""
    if paths:
        return _text_named(staging.discover(paths))
    moved = staging.make_archive_room(storage.inbox_dir)
    if moved:
        print(f"the inbox held a file named {staging.ARCHIVE!r} where its archive folder goes: renamed {moved.name}, "
              "read as any inbox file")
    new, seen = staging.inbox_files(storage.inbox_dir, db.ingested_sha256s(storage))
    staging.archive(seen, storage.inbox_dir)
    if seen:
        print(f"{len(seen)} inbox file(s) with content ingested before moved to {storage.inbox_dir / staging.ARCHIVE}")
    return _text_named(new)


def _text_named(files: list[Path]) -> list[str]:
    """`files` as text, those whose names are not left out with a warning each (`staging.utf8_named`)."""
    kept, said = staging.utf8_named(files)
    for line in said:
        get_run_logger().warning(line)
    return [str(p) for p in kept]


def mapping_source(mapping: str | None, paths: list[str] | None) -> Mapping | None:
    """The parsed mapping file, or None; a mapping needs the files it describes (the inbox holds any export)."""
    if mapping is None:
        return None
    if not paths:
        raise ValueError("--mapping needs the files it describes: gpucast ingest PATH... --mapping FILE "
                         "(the inbox is read without a mapping)")
    return load_mapping(mapping)


@task(name="stage-file", task_run_name="stage {path}")
def stage_file(path: str, staging_dir: Path, index: int, chunk_rows: int, not_after: datetime,
               mapping: Mapping | None = None) -> FileResult:
    """Read (through `mapping`, if any), normalise and validate one file into the run's staging folder."""
    logger = get_run_logger()
    result = staging.stage_file(Path(path), staging_dir, index, chunk_rows, progress=logger.info, not_after=not_after,
                              mapping=mapping)
    if result.status == "rejected":
        logger.warning("file rejected: %s: %s", path, result.reason)
    return result


@task(name="stage-files", task_run_name="stage {count} small files from {first}")
def stage_small_files(paths: list[str], staging_dir: Path, first_index: int, chunk_rows: int, not_after: datetime,
                      first: str, count: int, mapping: Mapping | None = None) -> list[FileResult]:
    """Read each of a batch of small files, then normalise, validate and write their rows together."""
    logger = get_run_logger()
    results = staging.stage_files([Path(p) for p in paths], staging_dir, first_index, chunk_rows, progress=logger.info,
                                not_after=not_after, mapping=mapping)
    for r in results:
        if r.status == "rejected":
            logger.warning("file rejected: %s: %s", r.path, r.reason)
    return results


def stage_all(files: list[str], staging_dir: Path, chunk_rows: int, not_after: datetime,
              mapping: Mapping | None = None) -> list[FileResult]:
    """Every file staged in order: large ones one task each, runs of small ones one task per batch."""
    results: list[FileResult] = []
    for group in staging.batches([Path(f) for f in files]):
        if len(group) == 1:
            results.append(stage_file(files[group[0]], staging_dir, group[0], chunk_rows, not_after, mapping))
        else:
            names = [files[i] for i in group]
            results += stage_small_files(names, staging_dir, group[0], chunk_rows, not_after, Path(names[0]).name,
                                         len(names), mapping)
    return results


@task(name="validate-run")
def validate_run(staging_dir: Path, results: list[FileResult]) -> RunCheck:
    """Great Expectations once over the run's checked rows, on DuckDB, agreeing with the row rules that sorted
    them (`staging.check_run`); a disagreement fails the run before anything is loaded."""
    check = staging.check_run(staging_dir, results)
    if check.rows:
        print(f"Great Expectations (on DuckDB) judged the run's {check.rows:,} checked rows once: "
              f"{check.expectations} expectations, each as the row rules found ({check.seconds:.2f} s)")
    return check


@task(name="load-run", retries=2, retry_delay_seconds=10, retry_condition_fn=no_retry_on_environment)
def load_run(run_id: str, staging_dir: Path, results: list[FileResult], storage: Storage) -> LoadTotals:
    """Commit the staged run to the warehouse in one transaction (idempotent: a retry after the
    commit loads nothing twice), then refresh the lake with the Parquet files the load wrote and loaded (rows
    move once). The lake is a copy of the warehouse's records: when its refresh fails the run still succeeds,
    says so in its message, and the next ingest rewrites every stale day (`load.stale_lake_days`)."""
    with db.writer(storage) as con:
        t0 = time.perf_counter()
        totals = load.load_run(con, run_id, staging_dir, results)
        t1 = time.perf_counter()
        try:
            days = load.refresh_lake(con, storage.lake_dir, run_id, staging_dir)
        except LakeRefreshFailed as exc:
            note = (f"lake refresh failed ({exc}); the warehouse holds every row, and the next ingest "
                    "rewrites the stale days of the lake")
            runs.add_note(con, "ingest", run_id, note)
            get_run_logger().warning(note)
            days = []
        seconds = {"warehouse": round(t1 - t0, 2), "lake": round(time.perf_counter() - t1, 2)}
    return replace(totals, lake_days=len(days), load_seconds=seconds)


@flow(name="ingest-job-logs", log_prints=True)
def ingest_job_logs(paths: list[str] | None = None, chunk_rows: int = DEFAULT_CHUNK_ROWS, publish: bool = True,
                    mapping: str | None = None, source: str | None = None, source_mapping: str | None = None,
                    storage: Storage | None = None, quality: Quality | None = None) -> IngestResult:
    """Ingest job-log files (or the inbox's new files) into the lake and the warehouse.

    `publish` refreshes the planners' copy after a successful run (the nightly flow publishes once,
    itself). `storage`, `quality` (how far ahead a timestamp may be) default to the environment's. `mapping`: a mapping
    file (docs/sources.md) that every file of `paths` is read through; checked before the run starts.
    `source`: the importer whose staged files `paths` are (`slurm`, `flows/imports.py`), recorded in
    `ingest_runs.source` with `source_mapping`, the mapping file that importer applied (if any).
    """
    settings = Settings.given(storage=storage, quality=quality).ensure()
    storage = settings.storage
    # the run's own clock: a timestamp beyond it plus the tolerance is a clock or typing error (rejected)
    not_after = datetime.now(UTC) + timedelta(hours=settings.quality.future_tolerance_hours)
    importer, source = source, mapping_source(mapping, paths)
    files = find_files(paths, storage)
    if source:
        check_files(source, files)
    described = source or (load_mapping(source_mapping) if source_mapping else None)
    with runs.lifecycle(storage, "ingest", **load.start_columns(len(files), *(
            (str(Path(described.path).resolve()), described.sha256) if described else ()), source=importer)) as run:
        print(f"{run.run_id}: {len(files)} file(s) to ingest" + (f" through {source.path}" if source else ""))
        results = stage_all(files, run.staging, chunk_rows, not_after, source)
        check = validate_run(run.staging, quote(results))
        failpoint("ingest:after-staging")
        # quoted: Prefect would otherwise walk every file's every outcome looking for futures, twice (31 s of
        # 62 s for 2,000 one-row files); the task gets the list itself
        totals = load_run(run.run_id, run.staging, quote(results), storage)
    vanished = staging.gone(results)
    if vanished:
        print(f"{len(vanished)} file(s) {staging.GONE}: {', '.join(vanished[:10])}" + (" ..." if len(vanished) > 10 else ""))
    if not paths:  # from the inbox: the files read move out of its way, unless they changed while read
        left = staging.archive_read(results, storage.inbox_dir)
        if left:
            print(f"{len(left)} inbox file(s) changed while they were read: left in the inbox for the "
                  "next run (exporters should write a dot-file and rename it when complete)")
    t0 = time.perf_counter()
    publish_if(publish, storage)
    totals = replace(totals, load_seconds={**totals.load_seconds, "publish": round(time.perf_counter() - t0, 2)})
    print(f"{run.run_id}: read {totals.rows_read:,} rows = loaded {totals.rows_loaded:,} "
          f"+ rejected {totals.rows_rejected:,} + duplicate {totals.rows_duplicate:,}; "
          f"{totals.files_rejected} file(s) rejected")
    # GX's one validation of the run is the step after staging: its seconds beside the staging steps'
    # the files read: a file gone before it was read is not one (nor in the gate's share of files rejected whole)
    return IngestResult.of(run.run_id, len(files) - len(vanished), totals,
                           {**staging.stage_seconds(results), "gx": check.seconds})
