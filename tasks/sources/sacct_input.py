"""Where `gpucast import slurm` reads sacct's lines from, and how its rows reach the staged Parquet file.

The lines come from an exported file or from `sacct` as it prints them (`sacct_output`: read once, a line at a
time, never held whole); `tasks/sources/slurm.py` turns them into rows, and `SacctStaging` writes those to one
Parquet file a chunk at a time (with their MLflow runs' features when joined, and the array ranges an older gpucast
stored as one job that the output retires). The flow (`flows/imports.py`) reads what needs the warehouse first (the
stored ranges), then ingests the staged file like any other.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from gpucast.tasks.sources.errors import SourceUnavailable
from gpucast.tasks.sources.mlflow import JobRuns, join_runs
from gpucast.tasks.sources.slurm import SACCT_FIELDS, SCHEMA, SacctReader, lines_of, retired_ranges

SACCT_TIMEOUT_S = 600
DEFAULT_SINCE = "now-1days"  # `--sacct` without `--since`: the last day's jobs
STAGED_SCHEMA = pa.schema([(n, pa.string()) for n in SCHEMA])  # the Slurm import's staged file: every field text


def sacct_command(since: str) -> list[str]:
    """The `sacct` command `--sacct` runs: every user's jobs and steps since `since`, the recommended fields."""
    return ["sacct", "--parsable2", "--allusers", f"--format={','.join(SACCT_FIELDS)}",
            f"--starttime={since}", "--endtime=now"]


@dataclass(frozen=True)
class SacctOutput:
    """One sacct output to import: its lines (nothing is read, nor `sacct` started, before the first is asked for),
    its name in messages, and the name of the Parquet file its rows are staged in."""

    lines: Iterator[bytes]
    source: str
    staged_name: str


def sacct_output(path: str | None, since: str | None, environment: Mapping[str, str]) -> SacctOutput:
    """The exported file `path` (one that is not there is refused here, before anything is read), or, when `path`
    is None, `sacct` run for the jobs since `since` (default `DEFAULT_SINCE`) in `environment` (this process's,
    given by the flow) with times in UTC."""
    if path:
        return SacctOutput(read_file(path), path, f"slurm-{Path(path).name}.parquet")
    since = since or DEFAULT_SINCE
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return SacctOutput(read_sacct(since, environment), f"sacct --starttime={since}", f"slurm-sacct-{stamp}.parquet")


def read_sacct(since: str, environment: Mapping[str, str]) -> Iterator[bytes]:
    """The lines `sacct` prints (times in UTC), read as it prints them (never held whole); `SourceUnavailable`
    (exit 5) without sacct, when it fails (raised once its output is read: nothing is ingested), or when it runs
    longer than SACCT_TIMEOUT_S."""
    if shutil.which("sacct") is None:
        raise SourceUnavailable("sacct is not installed or not on PATH; run on a Slurm login node, or export "
                                "the accounting there (docs/sources.md) and import the file: gpucast import slurm FILE")
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(sacct_command(since), stdout=subprocess.PIPE, stderr=err,
                                    env={**environment, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"})
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
