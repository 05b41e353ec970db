"""Where a Slurm import's lines come from (`tasks/sources/sacct_input.py`): an exported file, or `sacct` run (a
stand-in script on PATH here). The command's own tests (tests/flows/test_import_slurm.py) import through them."""

from __future__ import annotations

import os

import polars as pl
import pytest

from gpucast.tasks.sources import sacct_input
from gpucast.tasks.sources.errors import SourceUnavailable
from gpucast.tasks.sources.sacct_input import SacctStaging, sacct_command, sacct_output
from gpucast.tasks.sources.slurm import SacctReader
from tests.conftest import write

HEADER = "JobID|State|Submit\n"


def test_a_file_is_refused_at_once_when_it_is_not_there(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file; give the sacct --parsable2 output to import"):
        sacct_output(str(tmp_path / "none.txt"), None, {})
    out = sacct_output(str(write(tmp_path / "jobs.txt", HEADER + "1|PENDING|2026-11-01T00:00:00\n")), None, {})
    assert out.source == str(tmp_path / "jobs.txt") and out.staged_name == "slurm-jobs.txt.parquet"
    assert list(out.lines) == [HEADER.encode(), b"1|PENDING|2026-11-01T00:00:00\n"]


def test_sacct_is_run_in_utc_for_the_last_day_unless_told(tmp_path, monkeypatch):
    """Nothing runs before the first line is asked for; sacct gets the process's environment with TZ=UTC."""
    write(tmp_path / "bin" / "sacct", "#!/bin/sh\necho \"JobID|State|Submit\"\necho \"$TZ $*\"\n").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    out = sacct_output(None, None, dict(os.environ))
    assert out.source == "sacct --starttime=now-1days" and out.staged_name.startswith("slurm-sacct-")
    header, said = list(out.lines)
    assert header == HEADER.encode() and said.decode().startswith("UTC --parsable2 --allusers --format=JobID,")
    assert said.decode().endswith("--starttime=now-1days --endtime=now\n")
    assert sacct_command("2026-11-01")[-2:] == ["--starttime=2026-11-01", "--endtime=now"]


@pytest.mark.parametrize(("script", "says"), [
    (None, "sacct is not installed or not on PATH"),
    ("#!/bin/sh\necho 'sacct: error: slurmdbd down' >&2\nexit 1\n", "sacct failed (exit 1): sacct: error: slurmdbd down; "),
    ("#!/bin/sh\nexec /bin/sleep 30\n", "sacct could not be run (it did not finish within 1 s)"),
])
def test_sacct_that_cannot_give_its_output_is_unavailable(tmp_path, monkeypatch, script, says):
    (tmp_path / "bin").mkdir()
    if script:
        write(tmp_path / "bin" / "sacct", script).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(sacct_input, "SACCT_TIMEOUT_S", 1)
    with pytest.raises(SourceUnavailable, match=f"^{says}".replace("(", r"\(").replace(")", r"\)")):
        list(sacct_output(None, "now-2days", {"PATH": str(tmp_path / "bin")}).lines)


def test_the_staged_file_holds_every_job_as_text(tmp_path):
    lines = iter([b"JobID|State|Submit|AllocTRES\n", b"1|PENDING|2026-11-01T00:00:00|gres/gpu=1\n",
                  b"2|COMPLETED|2026-11-01T01:00:00|gres/gpu=2\n", b"3|COMPLETED|2026-11-01T01:00:00|cpu=4\n"])
    reader = SacctReader("jobs.txt")
    reader.start(lines)
    staging = SacctStaging(reader, lines, None, pl.DataFrame())
    staging.write(tmp_path / "staged.parquet")
    staged = pl.read_parquet(tmp_path / "staged.parquet")
    assert staged["job_id"].to_list() == ["slurm-local-1", "slurm-local-2"]  # job 3 used no GPU: not loaded
    assert set(staged.schema.values()) == {pl.String} and staging.joined == staging.ambiguous == 0
