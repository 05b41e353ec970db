"""`gpucast import slurm`: Slurm accounting read into contract rows, staged, and ingested like any file.

Wiring only: the text comes from a file or from running `sacct`; `tasks/sources/slurm.py` parses it; the
parsed jobs are written as one Parquet file in a staging folder of this process and ingested through
`ingest_job_logs`, so validation, quarantine, duplicates and reconciliation are exactly those of any file.
Everything that can be wrong with the input is found before the ingest run starts (nothing half-loaded).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gpucast.flows.environment import child_environment
from gpucast.flows.errors import SourceUnavailable
from gpucast.tasks.sources.mapping import load_mapping
from gpucast.tasks.sources.slurm import SACCT_FIELDS, NotSacctOutput, SlurmImport, parse_sacct
from gpucast.warehouse.housekeeping import claim_staging
from gpucast.warehouse.settings import Settings

SACCT_TIMEOUT_S = 600


@dataclass
class Imported:
    """What an import read and what its ingest run did."""

    parsed: SlurmImport
    run: dict


def sacct_command(since: str) -> list[str]:
    """The `sacct` command `--sacct` runs: every user's jobs and steps since `since`, the recommended fields."""
    return ["sacct", "--parsable2", "--allusers", f"--format={','.join(SACCT_FIELDS)}",
            f"--starttime={since}", "--endtime=now"]


def read_sacct(since: str) -> tuple[str, str]:
    """(text, source name) from running `sacct` with times in UTC; `SourceUnavailable` (exit 5) without it."""
    if shutil.which("sacct") is None:
        raise SourceUnavailable("sacct is not installed or not on PATH; run on a Slurm login node, or export "
                                "the accounting there (docs/sources.md) and import the file: gpucast import slurm FILE")
    try:
        done = subprocess.run(sacct_command(since), capture_output=True, text=True, timeout=SACCT_TIMEOUT_S,
                              env=child_environment(TZ="UTC", SLURM_TIME_FORMAT="standard"), check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceUnavailable(f"sacct could not be run ({exc}); check the Slurm client, then rerun") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[0][:300]
        raise SourceUnavailable(f"sacct failed (exit {done.returncode}): {said}; check that slurmdbd is reachable")
    return done.stdout, f"sacct --starttime={since}"


def read_file(path: str) -> str:
    """An exported sacct file's text; a file that is not text is not sacct output (exit 2)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{path}: no such file; give the sacct --parsable2 output to import")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise NotSacctOutput(f"{path}: not sacct --parsable2 output (not UTF-8 text); export it with "
                             "`sacct --parsable2` (docs/sources.md)") from None


def import_slurm(path: str | None = None, since: str | None = None, mapping: str | None = None,
                 settings: Settings | None = None) -> Imported:
    """Import one sacct output (a file, or `sacct` run when `path` is None) into the warehouse (source `slurm`)."""
    from gpucast.flows.ingest import ingest_job_logs

    settings = (settings or Settings.from_env()).ensure()
    parsed_mapping = load_mapping(mapping) if mapping else None  # a bad mapping: one line, before anything
    text, source = (read_file(path), path) if path else read_sacct(since or "now-1days")
    parsed = parse_sacct(text, source, parsed_mapping)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = claim_staging(settings.storage.staging_dir / f"import-slurm-{os.getpid()}-{stamp}")
    try:
        name = f"slurm-{Path(path).name}.parquet" if path else f"slurm-sacct-{stamp}.parquet"
        staged = folder / name
        parsed.jobs.write_parquet(staged)
        run = ingest_job_logs(paths=[str(staged)], settings=settings, source="slurm", source_mapping=mapping)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return Imported(parsed, run)
