"""`gpucast import slurm FILE | --sacct`: Slurm accounting through the real ingest flow."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.cli import main
from tests.conftest import FIXTURES, write

SACCT = FIXTURES / "slurm" / "sacct.txt"
MIB = 2**20 / 1e9
COLUMNS = (c.JOB_ID, c.STATUS, c.FAILURE_REASON, c.QUEUE, c.TEAM, c.MODEL_TYPE, c.GPU_TYPE, c.GPU_COUNT,
           c.PEAK_GPU_MEM_GB, c.RUNTIME_HOURS, c.SUBMITTED_AT, c.UPDATED_AT)


def rows(home, sql: str) -> list[tuple]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_sacct_file_loads_field_by_field(home, capsys):
    assert main(["import", "slurm", str(SACCT)]) == 0
    out = capsys.readouterr().out
    assert ("slurm: 28 sacct line(s): 12 GPU job(s), 14 step(s) folded into their job, 2 job(s) without GPUs not "
            "loaded; 2 finished job(s) without GPU memory (loaded without peak_gpu_mem_gb)") in out
    assert "12 rows read: 12 loaded, 0 rejected, 0 duplicate" in out

    got = {r[0]: r[1:] for r in rows(home, f"SELECT {', '.join(COLUMNS)} FROM job_logs ORDER BY job_id")}
    t = lambda d, h, mi, s=0: datetime(2026, 11, d, h, mi, s, tzinfo=UTC)  # noqa: E731
    assert got == {
        "slurm-hpc1-1001": ("COMPLETED", None, "gpu-a100", "nlp", "Transformer", "a100", 2, pytest.approx(40960 * MIB),
                            2.0, t(20, 8, 0), t(20, 10, 5)),
        "slurm-hpc1-1002": ("FAILED", "OOM", "gpu-a100", "vision", "CNN", "a100", 1, pytest.approx(81920 * MIB), 0.5,
                            t(20, 9, 0), t(20, 9, 31)),
        # no GPU memory on record: loaded without it
        "slurm-hpc1-1003": ("CANCELLED", None, "gpu-a100", "nlp", "LSTM", None, 1, None, pytest.approx(1 / 6),
                            t(20, 10, 0), t(20, 10, 12)),
        "slurm-hpc1-1004": ("FAILED", "TIMEOUT", "gpu-l4", "vision", "ResNet", "L4-24GB", 1, 18.5,
                            pytest.approx(24 + 12 / 3600), t(19, 6, 0), t(20, 6, 0, 12)),
        # no Comment: no model features; loaded as `unknown` (contract v4), forecast from the scheduler's history
        "slurm-hpc1-1005": ("FAILED", "NODE_FAIL", "gpu-a100", "speech", "unknown", "a100", 1, None, 0.75,
                            t(20, 11, 0), t(20, 11, 45, 30)),
        "slurm-hpc1-1006": ("FAILED", "exit code 2", "gpu-a100", "speech", "MLP", "a100", 1, pytest.approx(1024 * MIB),
                            pytest.approx(1 / 60), t(20, 12, 0), t(20, 12, 1, 10)),
        "slurm-hpc1-1007": ("PENDING", None, "gpu-a100", "nlp", "Transformer", "a100", 4, None, None, t(21, 7, 0),
                            t(21, 7, 0)),
        "slurm-hpc1-1008": ("RUNNING", None, "gpu-a100", "nlp", "Transformer", "a100", 1, None, None, t(21, 8, 0),
                            t(21, 8, 0, 5)),
        "slurm-hpc1-1010_1": ("COMPLETED", None, "gpu-l4", "vision", "CNN", "L4-24GB", 1, pytest.approx(12288 * MIB),
                              0.5, t(20, 13, 0), t(20, 13, 30, 1)),
        "slurm-hpc1-1010_2": ("COMPLETED", None, "gpu-l4", "vision", "CNN", "L4-24GB", 1, pytest.approx(6144 * MIB),
                              0.75, t(20, 13, 0), t(20, 13, 45, 1)),
        "slurm-hpc1-1010_[3-4]": ("PENDING", None, "gpu-l4", "vision", "CNN", "L4-24GB", 1, None, None, t(20, 13, 0),
                                  t(20, 13, 0)),
        "slurm-hpc1-1020+0": ("COMPLETED", None, "gpu-a100", "nlp", "Transformer", "a100", 1,
                              pytest.approx(30720 * MIB), 1.0, t(20, 14, 0), t(20, 15, 0, 2)),
    }
    assert rows(home, "SELECT count(*) FROM rejected_job_logs") == [(0,)]
    (run,) = rows(home, "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate, source FROM ingest_runs")
    assert run == (12, 12, 0, 0, "slurm") and run[0] == run[1] + run[2] + run[3]
    assert not list((home / "staging").iterdir())  # the staged Parquet is gone with its run

    # the same accounting again: every record a duplicate, nothing loaded twice
    assert main(["import", "slurm", str(SACCT)]) == 0
    assert "12 rows read: 0 loaded, 0 rejected, 12 duplicate" in capsys.readouterr().out
    assert rows(home, "SELECT count(*) FROM job_logs") == [(12,)]


def test_a_csv_that_is_not_sacct_output_is_one_line_and_exit_2(home, tmp_path, capsys):
    other = write(tmp_path / "jobs.csv", "job_id,submitted_at,status,model_type\na,2026-11-01,PENDING,CNN\n")
    assert main(["import", "slurm", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpucast import: {other}: not sacct --parsable2 output: its first line names no JobID, "
                          "State, Submit (found 'job_id,submitted_at,status,model_type'); export it with `sacct "
                          "--parsable2 --format=JobID,JobName,Cluster,")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (home / "warehouse.duckdb").exists()  # nothing started, nothing half-loaded


def test_sacct_not_installed_is_one_line_and_exit_5(home, tmp_path, monkeypatch, capsys):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert main(["import", "slurm", "--sacct", "--since", "2026-11-01"]) == 5
    assert capsys.readouterr().err == (
        "gpucast import: sacct is not installed or not on PATH; run on a Slurm login node, or export the accounting "
        "there (docs/sources.md) and import the file: gpucast import slurm FILE\n")
    assert not (home / "warehouse.duckdb").exists()


@pytest.mark.parametrize(("argv", "says"), [
    (["import", "slurm"], "gpucast import: give the sacct --parsable2 output to import (FILE), or --sacct"),
    (["import", "slurm", "x.txt", "--since", "now-2days"], "gpucast import: --since is for --sacct"),
])
def test_file_or_sacct(home, capsys, argv, says):
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(says)


def test_sacct_is_run_with_the_recommended_fields_in_utc(home, tmp_path, monkeypatch, capsys):
    """A stand-in `sacct` on PATH that records its arguments and TZ, and fails like an unreachable slurmdbd."""
    bin_ = tmp_path / "bin"
    log = tmp_path / "args"
    write(bin_ / "sacct", f'#!/bin/sh\necho "$TZ $*" > {log}\necho "sacct: error: Problem talking to the database: '
                          'Connection refused" >&2\nexit 1\n').chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:/usr/bin:/bin")
    assert main(["import", "slurm", "--sacct", "--since", "2026-11-01"]) == 5
    assert capsys.readouterr().err == ("gpucast import: sacct failed (exit 1): sacct: error: Problem talking to the "
                                       "database: Connection refused; check that slurmdbd is reachable\n")
    assert log.read_text() == (
        "UTC --parsable2 --allusers --format=JobID,JobName,Cluster,Partition,Account,User,State,ExitCode,Submit,Start,"
        "End,Elapsed,Timelimit,AllocTRES,ReqTRES,TRESUsageInMax,WCKey,Comment --starttime=2026-11-01 --endtime=now\n")


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_sacct_run_here_with_a_job_name_mapping(home, tmp_path, monkeypatch, capsys):
    """--sacct reads what sacct prints (a stand-in printing the fixture); the mapping names model_type by job name."""
    write(tmp_path / "bin" / "sacct", f"#!/bin/sh\ncat {SACCT}\n").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    m = write(tmp_path / "names.yaml", "fields:\n  model_type: JobName\nvalues:\n  model_type: {train-gru: GRU}\n")
    assert main(["import", "slurm", "--sacct", "--mapping", str(m)]) == 0
    assert "12 rows read: 12 loaded, 0 rejected, 0 duplicate" in capsys.readouterr().out
    assert rows(home, "SELECT job_id, model_type, status, failure_reason, params_million FROM job_logs "
                      "WHERE job_id IN ('slurm-hpc1-1001', 'slurm-hpc1-1005') ORDER BY job_id") == [
        ("slurm-hpc1-1001", "train-bert", "COMPLETED", None, 110.0),  # a name the map does not list: as written
        ("slurm-hpc1-1005", "GRU", "FAILED", "NODE_FAIL", None)]
    assert rows(home, "SELECT source, mapping_path FROM ingest_runs") == [("slurm", str(m.resolve()))]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_sources_entry_of_the_wrong_type_fails_alone(home, tmp_path, monkeypatch, capsys):
    """`files: 123` was a TypeError (and `tracking_uri: [a, b]` an AttributeError) inside the pull; now that entry
    fails with one line naming file, entry, setting and type, and the next entry loads (issue 38, defect 13)."""
    from gpucast.flows.imports import pull_sources
    from gpucast.flows.settings import Settings

    write(tmp_path / "exports" / "sacct.txt", SACCT.read_text())
    sources = write(tmp_path / "sources.yaml", "mlflow:\n  - tracking_uri: [a, b]\n"
                                               "slurm:\n  - files: {x: 1}\n  - files: exports/*.txt\n")
    monkeypatch.setenv("GPUCAST_SOURCES", str(sources))
    pulled = pull_sources(Settings.from_env().ensure())
    assert pulled.failed == {
        "mlflow entry 1": f"mlflow entry 1 failed: SourcesError: {sources}:2: mlflow entry 1 tracking_uri is a "
                          "single value, not a list",
        "slurm entry 1": f"slurm entry 1 failed: SourcesError: {sources}:4: slurm entry 1 files is a single value, "
                         "not a mapping"}
    assert [v.rows_loaded for v in pulled.runs.values()] == [12]  # job 1005 (no model type) loads as unknown (v4)
    assert rows(home, "SELECT source, status, message FROM ingest_runs WHERE status = 'failed' ORDER BY started_at") == [
        ("mlflow", "failed", pulled.failed["mlflow entry 1"]), ("slurm", "failed", pulled.failed["slurm entry 1"])]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_every_sacct_line_is_accounted_for_and_an_unreadable_elapsed_is_named(home, tmp_path, capsys):
    """Issue 38, defects 8 and 9: one job id on four lines loaded its last line (RUNNING) and the summary left four
    lines out; an unreadable Elapsed loaded a finished job with no run time, silently."""
    head = "JobID|Partition|Account|State|Submit|Start|End|Elapsed|AllocTRES|Comment\n"
    cnn = '{"model_type": "CNN"}'
    text = head + "".join(f"5|gpu|nlp|{state}|2026-11-01T00:00:00|{start}|{end}|{el}|gres/gpu=1|{cnn}\n"
                          for state, start, end, el in (
                              ("COMPLETED", "2026-11-01T01:00:00", "2026-11-01T02:00:00", "01:00:00"),
                              ("FAILED", "2026-11-01T03:00:00", "2026-11-01T06:00:00", "03:00:00"),
                              ("PENDING", "Unknown", "Unknown", "00:00:00"),
                              ("RUNNING", "2026-11-01T05:00:00", "Unknown", "00:30:00")))
    text += (f"6|gpu|nlp|COMPLETED|2026-11-01T00:00:00|2026-11-01T00:00:00|2026-11-01T01:30:00|UNLIMITED|gres/gpu=1|{cnn}\n"
             f"7|gpu|nlp|TIMEOUT|2026-11-01T00:00:00|Unknown|2026-11-01T01:30:00|1:2:3:4|gres/gpu=1|{cnn}\n"
             "7.batch|gpu|nlp|CANCELLED|2026-11-01T00:00:00|Unknown|2026-11-01T01:30:00|1:2:3:4|gres/gpu=1|\n"
             "8|cpu|nlp|COMPLETED|2026-11-01T00:00:00|2026-11-01T00:00:00|2026-11-01T01:30:00|01:30:00||\n")
    assert main(["import", "slurm", str(write(tmp_path / "sacct.txt", text))]) == 0
    out = capsys.readouterr().out
    assert ("slurm: 8 sacct line(s): 3 GPU job(s), 1 step(s) folded into their job, 1 job(s) without GPUs not loaded, "
            "3 line(s) superseded by a later record of their job; 3 finished job(s) without GPU memory (loaded "
            "without peak_gpu_mem_gb); 1 finished job(s) without a usable Elapsed (missing, zero or unreadable): run "
            "time from End - Start") in out
    assert "3 rows read: 2 loaded, 1 rejected, 0 duplicate" in out
    assert rows(home, "SELECT job_id, status, runtime_hours FROM job_logs ORDER BY job_id") == [
        ("slurm-local-5", "FAILED", 3.0), ("slurm-local-6", "COMPLETED", 1.5)]
    assert rows(home, "SELECT job_id, reason_text FROM rejected_job_logs") == [
        ("slurm-local-7", "runtime_hours: 'Elapsed 1:2:3:4' is not a number")]
