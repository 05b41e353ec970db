"""`gpucast import slurm` and `gpucast import mlflow`: a scheduler's accounting and an experiment tracker's
runs read into contract rows, staged, and ingested like any file.

Wiring only: sacct's lines come from a file or from `sacct` as it prints them (read once, a line at a time,
never held whole), MLflow's runs from MLflow's own client
(imported lazily: the `mlflow` extra is optional); `tasks/sources/` turns them into rows; the rows are
written as one Parquet file in a staging folder of this process and ingested through
`ingest_job_logs`, so validation, quarantine, duplicates and reconciliation are exactly those of any file.
Everything that can be wrong with the input is found before the ingest run starts (nothing half-loaded).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from gpucast.flows.environment import child_environment, configure_mlflow
from gpucast.flows.errors import SourceUnavailable
from gpucast.flows.settings import Settings
from gpucast.records.results import IngestResult, SourcesResult
from gpucast.tasks.sources.mapping import load_mapping
from gpucast.tasks.sources.mlflow import (
    JOIN_TAG,
    JobRuns,
    MlflowImport,
    MlflowRun,
    gpu_memory_keys,
    job_runs,
    join_runs,
    runs_to_jobs,
    series_peak,
)
from gpucast.tasks.sources.slurm import SACCT_FIELDS, SCHEMA, SacctReader, SlurmImport, lines_of, retired_ranges, stored_arrays
from gpucast.tasks.sources.sources_file import Source, SourcesError, load_sources
from gpucast.warehouse.errors import printable, redact
from gpucast.warehouse.housekeeping import claim_staging
from gpucast.warehouse.load import start_columns
from gpucast.warehouse.runs import describe, record_failed_run
from gpucast.warehouse.sources import stored_array_ranges
from gpucast.warehouse.watermarks import read_watermarks, save_watermarks

SACCT_TIMEOUT_S = 600
STAGED_SCHEMA = pa.schema([(n, pa.string()) for n in SCHEMA])  # the Slurm import's staged file: every field text
SEARCH_PAGE = 1000  # runs per MLflow search page
OVERLAP_MS = 3600_000  # an import re-reads the hour before its watermark: the clocks of the machines that log differ


@dataclass(frozen=True)
class Imported:
    """What `gpucast import slurm` read and what its ingest run did."""

    parsed: SlurmImport
    run: IngestResult
    joined: int = 0  # jobs whose model features came from their MLflow run
    ambiguous: int = 0  # jobs not joined: several clusters' jobs have their JobID and the run names no cluster


def sacct_command(since: str) -> list[str]:
    """The `sacct` command `--sacct` runs: every user's jobs and steps since `since`, the recommended fields."""
    return ["sacct", "--parsable2", "--allusers", f"--format={','.join(SACCT_FIELDS)}",
            f"--starttime={since}", "--endtime=now"]


def read_sacct(since: str) -> Iterator[bytes]:
    """The lines `sacct` prints (times in UTC), read as it prints them (never held whole); `SourceUnavailable`
    (exit 5) without sacct, when it fails (raised once its output is read: nothing is ingested), or when it runs
    longer than SACCT_TIMEOUT_S."""
    if shutil.which("sacct") is None:
        raise SourceUnavailable("sacct is not installed or not on PATH; run on a Slurm login node, or export "
                                "the accounting there (docs/sources.md) and import the file: gpucast import slurm FILE")
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(sacct_command(since), stdout=subprocess.PIPE, stderr=err,
                                    env=child_environment(TZ="UTC", SLURM_TIME_FORMAT="standard"))
        except OSError as exc:
            raise SourceUnavailable(f"sacct could not be run ({exc}); check the Slurm client, then rerun") from None
        late = threading.Event()
        timer = threading.Timer(SACCT_TIMEOUT_S, lambda: (late.set(), proc.kill()))
        timer.start()
        try:
            assert proc.stdout is not None
            yield from lines_of(proc.stdout)
            code = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:  # abandoned (an error while reading): stopped, not left running
                proc.kill()
                proc.wait()
            proc.stdout.close()
        if late.is_set():
            raise SourceUnavailable(f"sacct could not be run (it did not finish within {SACCT_TIMEOUT_S} s); check "
                                    "that slurmdbd is reachable, or import a shorter period (--since)")
        if code != 0:
            err.seek(0)
            said = (err.read().decode(errors="replace").strip().splitlines() or ["no message"])[0][:300]
            raise SourceUnavailable(f"sacct failed (exit {code}): {said}; check that slurmdbd is reachable")


def read_file(path: str) -> Iterator[bytes]:
    """An exported sacct file's lines, read one at a time (never held whole); a file that is not there is
    refused here, before anything is read."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{path}: no such file; give the sacct --parsable2 output to import")
    return _file_lines(p)


def _file_lines(p: Path) -> Iterator[bytes]:
    with p.open("rb") as f:
        yield from lines_of(f)


def import_slurm(path: str | None = None, since: str | None = None, mapping: str | None = None,
                 settings: Settings | None = None, join: MlflowJoin | None = None) -> Imported:
    """Import one sacct output (a file, or `sacct` run when `path` is None) into the warehouse (source `slurm`).
    `join`: the MLflow runs the jobs ran, whose params give the jobs' model features (docs/sources.md).

    What the import needs besides the output is read first: the warehouse's array ranges stored whole (which may
    wait for the writer lock) and the MLflow runs. Only then is the output opened: `sacct` writes into a pipe, and
    stops when the pipe is full until it is read, while its time limit runs (a wait there read as "sacct did not
    finish"). The output is read once, a line at a time, and its rows written to the staged Parquet file a chunk
    at a time (`SacctReader`): memory grows with the jobs, not with the file. Its header is read first (not sacct
    output: exit 2), and the whole output before the ingest run starts (nothing half-loaded)."""
    settings = (settings or Settings.from_env()).ensure()
    parsed_mapping = load_mapping(mapping) if mapping else None  # a bad mapping: one line, before anything
    since = since or "now-1days"
    file = read_file(path) if path else None  # not there: refused before anything is read
    stored = stored_array_ranges(settings.storage)  # ranges an older gpucast stored as one job: retired
    runs = job_runs((r for r, _ in read_runs(join.tracking_uri, join.experiments, tagged=join.tag)), join.tag) \
        if join else None
    lines, source = (file, path) if file else (read_sacct(since), f"sacct --starttime={since}")
    with contextlib.closing(lines):
        reader = SacctReader(source, parsed_mapping)
        reader.start(lines)
        reader.asked = stored_arrays(stored)
        staging = SacctStaging(reader, lines, runs, stored)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        name = f"slurm-{Path(path).name}.parquet" if path else f"slurm-sacct-{stamp}.parquet"
        run = ingest_written(staging.write, name, "slurm", mapping, settings)
    return Imported(reader.out, run, staging.joined, staging.ambiguous)


@dataclass
class SacctStaging:
    """Writes the rest of a sacct output (its header read) to the staged Parquet file, a chunk at a time: its jobs
    (with their MLflow runs' features when joined), then the array ranges an older gpucast stored as one job that
    this output's arrays retire (`stored`: the warehouse's, read before)."""

    reader: SacctReader
    lines: Iterator[bytes]
    runs: JobRuns | None  # the MLflow runs that name a job (`--mlflow-uri`), indexed once
    stored: pl.DataFrame
    joined: int = 0  # jobs whose model features came from their MLflow run
    ambiguous: int = 0  # jobs not joined: their JobID is several clusters' and the run names no cluster

    def write(self, staged: Path) -> None:
        with pq.ParquetWriter(staged, STAGED_SCHEMA) as self._out:
            self.reader.read(self.lines, self._emit)
            if self.reader.arrays and (retired := retired_ranges(self.stored, self.reader.arrays)).height:
                self._out.write_table(retired.to_arrow().cast(STAGED_SCHEMA))
                self.reader.out.retired = retired.height

    def _emit(self, rows: pl.DataFrame) -> None:
        if self.runs is not None:  # the runs' params by MLflow's usual names: the mapping describes the sacct side
            done = join_runs(rows, self.runs, self.reader.shared)
            rows, self.joined, self.ambiguous = done.jobs, self.joined + done.joined, self.ambiguous + done.ambiguous
        self._out.write_table(rows.to_arrow().cast(STAGED_SCHEMA))


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
class MlflowJoin:
    """Where the runs of Slurm jobs are: tracking URI, experiments (none: all), the tag naming the job."""

    tracking_uri: str
    experiments: tuple[str, ...] = ()
    tag: str = JOIN_TAG


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
    client = mlflow_client(tracking_uri)
    found = resolve_experiments(client, tracking_uri, experiments)
    location = redact(tracking_uri)  # the watermarks' key: a password or token in the URI is no part of the store's name
    marks = read_watermarks(settings.storage, "mlflow", location)
    runs: list[MlflowRun] = []
    seen: dict[str, int] = {}
    for exp_id in found:
        floor = floor_ms if since else (marks[exp_id] - OVERLAP_MS if exp_id in marks else None)
        got = _search(client, tracking_uri, exp_id, floor)
        runs += [r for r, _ in got]
        if mark := max([marks.get(exp_id, 0), *(t for _, t in got)]):
            seen[exp_id] = mark  # an experiment without runs has none yet
    parsed = runs_to_jobs(runs, parsed_mapping)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run = ingest_frame(parsed.jobs, f"mlflow-{stamp}.parquet", "mlflow", mapping, settings)
    save_watermarks(settings.storage, "mlflow", location, seen, run.run_id)
    return MlflowImported(parsed, run, len(runs), found)


def since_ms(since: str) -> int:
    """`--since` (ISO 8601; no zone means UTC) as ms since the epoch."""
    try:
        when = datetime.fromisoformat(since.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since {since!r} is not an ISO 8601 time (e.g. 2026-11-01 or 2026-11-01T02:00:00Z)") from None
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp() * 1000)


def mlflow_client(tracking_uri: str):
    """MLflow's client for `tracking_uri` (imported here only: the `mlflow` extra is optional). A local
    store is only read: one that is not an existing MLflow store is refused (exit 2) before MLflow sees
    it, since MLflow creates what it lacks (a `.trash` in any folder, an `mlflow.db` for an empty URI)."""
    configure_mlflow()
    from mlflow.tracking import MlflowClient

    if problem := not_a_local_store(tracking_uri):
        raise FileNotFoundError(f"mlflow {tracking_uri}: {problem}; give the tracking URI the runs were logged to "
                                "(file:///path/mlruns, sqlite:////path/mlflow.db or http://host:5000)")
    try:
        return MlflowClient(tracking_uri=tracking_uri)  # a database store is opened here
    except Exception as exc:  # noqa: BLE001  (see resolve_experiments)
        raise _unreachable(tracking_uri, exc) from None


def not_a_local_store(tracking_uri: str) -> str | None:
    """Why `tracking_uri` names no existing local MLflow store, or None (a server URL, or a store that is one).

    A file store (`file:` or a bare path) must be a folder holding an experiment (`<id>/meta.yaml`, as
    MLflow writes `0/meta.yaml` for its Default); a SQLite store (`sqlite:///`) a file holding MLflow's
    `experiments` table, opened read-only to look."""
    from urllib.parse import urlparse

    if not tracking_uri.strip():
        return "an empty tracking URI (MLflow would create ./mlflow.db)"
    where = urlparse(tracking_uri)
    if where.scheme == "sqlite":
        path = Path(tracking_uri.removeprefix("sqlite:///"))
        if not path.is_file():
            return f"no MLflow store at {path}"
        import sqlite3

        try:
            with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as con:
                tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.Error as exc:
            return f"{path} is not an MLflow store (not an SQLite database: {exc})"
        return None if "experiments" in tables else f"{path} is not an MLflow store (no experiments table)"
    if where.scheme not in ("file", "") and len(where.scheme) > 1:  # a server (http, databricks ...); C:\ is a path
        return None
    path = Path(where.path if where.scheme == "file" else tracking_uri).expanduser()
    if not path.is_dir():
        return f"no MLflow store at {path}"
    if not any((d / "meta.yaml").is_file() for d in path.iterdir() if d.is_dir() and d.name != ".trash"):
        return f"{path} is not an MLflow store (no experiment folder with a meta.yaml)"
    return None


def _unreachable(tracking_uri: str, exc: Exception) -> SourceUnavailable:
    said = (redact(str(exc)).strip().splitlines() or [type(exc).__name__])[0][:300]  # masked before the cut
    return SourceUnavailable(f"mlflow {tracking_uri}: cannot be read ({said}); check the tracking URI and that the "
                             "tracking server (or the store's disk) is reachable, then rerun")


def resolve_experiments(client, tracking_uri: str, names: tuple[str, ...]) -> dict[str, str]:
    """{experiment id: name} of the experiments named (none: every active one); an unknown name: exit 2."""
    try:
        every = {e.name: e.experiment_id for e in client.search_experiments()}
    except Exception as exc:  # noqa: BLE001  (MLflow raises its own, requests' and SQLAlchemy's errors)
        raise _unreachable(tracking_uri, exc) from None
    unknown = [n for n in names if n not in every]
    if unknown:
        raise ValueError(f"mlflow {tracking_uri}: no experiment named {', '.join(map(repr, unknown))} (experiments: "
                         f"{', '.join(sorted(every)) or 'none'}); give --experiment one of them, or none for all")
    return {every[n]: n for n in (names or tuple(every))}


def read_runs(tracking_uri: str, experiments: tuple[str, ...] = (), tagged: str | None = None
              ) -> list[tuple[MlflowRun, int]]:
    """Every active run of the experiments (none: all), or only those carrying the tag `tagged`."""
    client = mlflow_client(tracking_uri)
    found = resolve_experiments(client, tracking_uri, experiments)
    return [got for exp_id in found for got in _search(client, tracking_uri, exp_id, None, tagged)]


def _search(client, tracking_uri: str, exp_id: str, floor_ms: int | None, tagged: str | None = None
            ) -> list[tuple[MlflowRun, int]]:
    """(run, its latest start or end time) of the runs that started or ended at or after `floor_ms` (all
    when None): two searches, as MLflow's filter has no OR; a run still going is read again when it ends."""
    filters = ([f"attributes.start_time >= {floor_ms}", f"attributes.end_time >= {floor_ms}"]
               if floor_ms is not None else [""])
    if tagged:
        filters = [" and ".join(x for x in (f, f"tags.`{tagged}` LIKE '%'") if x) for f in filters]
    runs = {}
    try:
        for text in filters:
            token = None
            while True:
                page = client.search_runs([exp_id], filter_string=text, max_results=SEARCH_PAGE, page_token=token)
                runs.update({r.info.run_id: r for r in page})
                if not (token := page.token):
                    break
        return [(_run(client, r), max(r.info.start_time or 0, r.info.end_time or 0)) for r in runs.values()]
    except Exception as exc:  # noqa: BLE001  (see resolve_experiments)
        raise _unreachable(tracking_uri, exc) from None


def _run(client, run) -> MlflowRun:
    """One MLflow run as `tasks/sources/mlflow.py` reads it: each GPU memory series as one figure (`series_peak`)."""
    keys = gpu_memory_keys(run.data.metrics)
    peaks = {gpu: series_peak(m.value for m in client.get_metric_history(run.info.run_id, key))
             for gpu, key in keys.items()}
    return MlflowRun(run.info.run_id, run.info.status, run.info.start_time, run.info.end_time,
                     dict(run.data.params), dict(run.data.tags), peaks)


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
            if source.problem:  # an entry that cannot be used (sources_file.py): it fails alone
                raise SourcesError(source.problem)
            runs.update(_pull(source, settings))
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
    o = source.options
    if source.kind == "mlflow":
        done = import_mlflow(o["tracking_uri"], tuple(o.get("experiments") or ()), since=o.get("since"),
                             mapping=o.get("mapping"), settings=settings)
        return {redact(source.name): done.run}  # the name holds the tracking URI (sources_file.py)
    join = (MlflowJoin(o["mlflow_uri"], tuple(o.get("mlflow_experiments") or ()), o.get("join_tag") or JOIN_TAG)
            if o.get("mlflow_uri") else None)
    if o.get("sacct"):
        return {source.name: import_slurm(None, o.get("since"), o.get("mapping"), settings, join).run}
    files = sorted(glob.glob(str(Path(o["files"]).expanduser())))
    if not files:
        raise FileNotFoundError(f"no file matches {o['files']}")
    return {f"slurm {f}": import_slurm(f, None, o.get("mapping"), settings, join).run for f in files}
