"""`gpucast import slurm` and `gpucast import mlflow`: a scheduler's accounting and an experiment tracker's
runs read into contract rows, staged, and ingested like any file.

Wiring only: `tasks/sources/` reads sacct's lines (a file, or `sacct` as it prints them: `sacct_input.py`) and
MLflow's runs (MLflow's own client, imported lazily: the `mlflow` extra is optional; `mlflow_client.py`) and turns
them into rows; this module reads and writes what lives in the warehouse (the array ranges stored whole, the
watermarks, a failed source's run), writes the rows as one Parquet file in a staging folder of this process and
ingests it through `ingest_job_logs`, so validation, quarantine, duplicates and reconciliation are exactly those
of any file. Everything that can be wrong with the input is found before the ingest run starts (nothing
half-loaded).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from gpucast.flows.environment import child_environment, configure_mlflow
from gpucast.flows.errors import SourceUnavailable
from gpucast.flows.settings import Settings
from gpucast.records.results import IngestResult, SourcesResult
from gpucast.tasks.sources.errors import TrackerUnreachable
from gpucast.tasks.sources.mapping import load_mapping
from gpucast.tasks.sources.mlflow import MlflowImport, MlflowJoin, job_runs, runs_to_jobs
from gpucast.tasks.sources.mlflow_client import open_client, read_runs, resolve_experiments, runs_since, since_ms
from gpucast.tasks.sources.sacct_input import SacctStaging, sacct_output
from gpucast.tasks.sources.slurm import SacctReader, SlurmImport, stored_arrays
from gpucast.tasks.sources.sources_file import MlflowSource, SlurmSource, Source, load_sources
from gpucast.warehouse.errors import printable, redact
from gpucast.warehouse.housekeeping import claim_staging
from gpucast.warehouse.load import start_columns
from gpucast.warehouse.runs import describe, record_failed_run
from gpucast.warehouse.sources import stored_array_ranges
from gpucast.warehouse.watermarks import read_watermarks, save_watermarks

__all__ = ["Imported", "MlflowImported", "MlflowJoin", "import_mlflow", "import_slurm", "pull_sources"]


@dataclass(frozen=True)
class Imported:
    """What `gpucast import slurm` read and what its ingest run did."""

    parsed: SlurmImport
    run: IngestResult
    joined: int = 0  # jobs whose model features came from their MLflow run
    ambiguous: int = 0  # jobs not joined: several clusters' jobs have their JobID and the run names no cluster


def import_slurm(path: str | None = None, since: str | None = None, mapping: str | None = None,
                 settings: Settings | None = None, join: MlflowJoin | None = None) -> Imported:
    """Import one sacct output (a file, or `sacct` run when `path` is None) into the warehouse (source `slurm`).
    `join`: the MLflow runs the jobs ran, whose params give the jobs' model features (docs/sources.md).

    What the import needs besides the output is read first: the warehouse's array ranges stored whole (which may
    wait for the writer lock) and the MLflow runs. Only then is the output opened: `sacct` writes into a pipe, and
    stops when the pipe is full until it is read, while its time limit runs (a wait there read as "sacct did not
    finish"). The output is read once, a line at a time, and its rows written to the staged Parquet file a chunk
    at a time (`SacctReader`, `SacctStaging`): memory grows with the jobs, not with the file. Its header is read
    first (not sacct output: exit 2), and the whole output before the ingest run starts (nothing half-loaded)."""
    settings = (settings or Settings.from_env()).ensure()
    parsed_mapping = load_mapping(mapping) if mapping else None  # a bad mapping: one line, before anything
    output = sacct_output(path, since, child_environment())  # a file that is not there: refused before anything is read
    stored = stored_array_ranges(settings.storage)  # ranges an older gpucast stored as one job: retired
    runs = _job_runs(join) if join else None
    with contextlib.closing(output.lines):
        reader = SacctReader(output.source, parsed_mapping)
        reader.start(output.lines)
        reader.asked = stored_arrays(stored)
        staging = SacctStaging(reader, output.lines, runs, stored)
        run = ingest_written(staging.write, output.staged_name, "slurm", mapping, settings)
    return Imported(reader.out, run, staging.joined, staging.ambiguous)


def _job_runs(join: MlflowJoin):
    """The runs of `join`'s experiments that name a job, indexed once (`tasks/sources/mlflow.py` `job_runs`)."""
    configure_mlflow()
    with _reachable(join.tracking_uri):
        return job_runs((r for r, _ in read_runs(join.tracking_uri, join.experiments, tagged=join.tag)), join.tag)


def ingest_frame(jobs: pl.DataFrame, name: str, source: str, mapping: str | None, settings: Settings) -> IngestResult:
    """Write an importer's rows as one Parquet file in a staging folder of this process and ingest it
    (validation, quarantine, duplicates and reconciliation of any file); the ingest run's summary."""
    return ingest_written(jobs.write_parquet, name, source, mapping, settings)


def ingest_written(write: Callable[[Path], object], name: str, source: str, mapping: str | None,
                   settings: Settings) -> IngestResult:
    """`write` an importer's rows to one Parquet file (`name`) in a staging folder of this process, then ingest it;
    the ingest run's summary. What `write` raises stops it before the ingest run starts; the folder goes either way."""
    from gpucast.flows.ingest import ingest_job_logs

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = claim_staging(settings.storage.staging_dir / f"import-{source}-{os.getpid()}-{stamp}")
    try:
        staged = folder / name
        write(staged)
        return ingest_job_logs(paths=[str(staged)], source=source, source_mapping=mapping, storage=settings.storage,
                               quality=settings.quality)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# MLflow ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MlflowImported:
    """What `gpucast import mlflow` read and what its ingest run did."""

    parsed: MlflowImport
    run: IngestResult
    runs_read: int
    experiments: dict[str, str]  # id -> name


def import_mlflow(tracking_uri: str, experiments: tuple[str, ...] = (), since: str | None = None,
                  mapping: str | None = None, settings: Settings | None = None) -> MlflowImported:
    """Import the runs new or changed since the last import (or since `since`, an ISO time) of each
    experiment (none: every active one) into the warehouse (source `mlflow`); then move the watermarks."""
    settings = (settings or Settings.from_env()).ensure()
    parsed_mapping = load_mapping(mapping) if mapping else None
    floor_ms = since_ms(since) if since else None
    configure_mlflow()
    with _reachable(tracking_uri):
        client = open_client(tracking_uri)
        found = resolve_experiments(client, tracking_uri, experiments)
        location = redact(tracking_uri)  # the watermarks' key: a password or token in the URI is no part of the store's name
        new = runs_since(client, tracking_uri, found, read_watermarks(settings.storage, "mlflow", location), floor_ms)
    parsed = runs_to_jobs(new.runs, parsed_mapping)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run = ingest_frame(parsed.jobs, f"mlflow-{stamp}.parquet", "mlflow", mapping, settings)
    save_watermarks(settings.storage, "mlflow", location, new.marks, run.run_id)
    return MlflowImported(parsed, run, len(new.runs), found)


@contextlib.contextmanager
def _reachable(tracking_uri: str) -> Iterator[None]:
    """What MLflow's client raised (`TrackerUnreachable`) as one line (exit 5): its first line, masked before the
    cut (a cut could hide the `@` that marks a password)."""
    try:
        yield
    except TrackerUnreachable as exc:
        said = (redact(str(exc.cause)).strip().splitlines() or [type(exc.cause).__name__])[0][:300]
        raise SourceUnavailable(f"mlflow {exc.tracking_uri}: cannot be read ({said}); check the tracking URI and "
                                "that the tracking server (or the store's disk) is reachable, then rerun") from None


# Sources the nightly pulls (sources.yaml) -------------------------------------------------------

def pull_sources(settings: Settings) -> SourcesResult:
    """Import every source the sources file lists (none without one). A source that fails (or a sources file
    that cannot be read) is recorded as a failed ingest run naming it (`gpucast status`) and returned in
    `failed`; the other sources load regardless, and the night goes on with what loaded."""
    runs: dict[str, IngestResult] = {}
    failed: dict[str, str] = {}
    path = settings.sources_path
    if path is None:
        return SourcesResult()
    try:
        sources = load_sources(path)
    except (OSError, ValueError) as exc:
        _failed(failed, settings, f"sources file {path}", "sources", exc)
        return SourcesResult(runs, failed)
    for source in sources:
        try:
            runs.update(_pull(source, settings))  # an entry that cannot be used (sources_file.py) fails alone
        except Exception as exc:  # noqa: BLE001  (one source's failure, whatever it is, must not stop the others)
            _failed(failed, settings, redact(source.name), source.kind, exc)
    return SourcesResult(runs, failed)


def _failed(failed: dict[str, str], settings: Settings, name: str, kind: str, exc: Exception) -> None:
    why = printable(f"{name} failed: {describe(exc)}")  # the source's name is the file's text
    failed[name] = why
    record_failed_run(settings.storage, "ingest", why, **start_columns(0, source=kind))
    print(why)


def _pull(source: Source, settings: Settings) -> dict[str, IngestResult]:
    """Import one source of the sources file: {name: ingest run summary} (one per file of a Slurm glob)."""
    options = source.usable()
    if isinstance(options, MlflowSource):
        done = import_mlflow(options.tracking_uri, options.experiments, since=options.since, mapping=options.mapping,
                             settings=settings)
        return {redact(source.name): done.run}  # the name holds the tracking URI (sources_file.py)
    return _pull_slurm(source.name, options, settings)


def _pull_slurm(name: str, options: SlurmSource, settings: Settings) -> dict[str, IngestResult]:
    """A `slurm:` entry: `sacct` run, else each file its glob matches (none: an error naming the glob)."""
    if options.sacct:
        return {name: import_slurm(None, options.since, options.mapping, settings, options.join()).run}
    return {f"slurm {f}": import_slurm(f, None, options.mapping, settings, options.join()).run
            for f in options.matched_files()}
