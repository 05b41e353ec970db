"""`gpucast import slurm FILE | --sacct`: Slurm accounting through the real ingest flow."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import duckdb
import polars as pl
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
    assert ("slurm: 28 sacct line(s): 11 GPU job(s), 1 array range(s) expanded into 2 task(s), 14 step(s) folded into "
            "their job, 2 job(s) without GPUs not loaded; 2 finished job(s) without GPU memory (loaded without "
            "peak_gpu_mem_gb)") in out
    assert "13 rows read: 13 loaded, 0 rejected, 0 duplicate" in out

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
        # the array's pending range 1010_[3-4]: a row per task, each counted in the demand (issue 48 item 3)
        **{f"slurm-hpc1-1010_{k}": ("PENDING", None, "gpu-l4", "vision", "CNN", "L4-24GB", 1, None, None, t(20, 13, 0),
                                    t(20, 13, 0)) for k in (3, 4)},
        "slurm-hpc1-1020+0": ("COMPLETED", None, "gpu-a100", "nlp", "Transformer", "a100", 1,
                              pytest.approx(30720 * MIB), 1.0, t(20, 14, 0), t(20, 15, 0, 2)),
    }
    assert rows(home, "SELECT count(*) FROM rejected_job_logs") == [(0,)]
    (run,) = rows(home, "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate, source FROM ingest_runs")
    assert run == (13, 13, 0, 0, "slurm") and run[0] == run[1] + run[2] + run[3]
    assert not list((home / "staging").iterdir())  # the staged Parquet is gone with its run

    # the same accounting again: every record a duplicate, nothing loaded twice
    assert main(["import", "slurm", str(SACCT)]) == 0
    assert "13 rows read: 0 loaded, 0 rejected, 13 duplicate" in capsys.readouterr().out
    assert rows(home, "SELECT count(*) FROM job_logs") == [(13,)]


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
    assert "13 rows read: 13 loaded, 0 rejected, 0 duplicate" in capsys.readouterr().out
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
    assert [v.rows_loaded for v in pulled.runs.values()] == [13]  # job 1005 (no model type) loads as unknown (v4)
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


# Issue 48: the sacct import's hostile corpus (the job-log corpus is tests/reliability/test_hostile_inputs.py) ----

HEAD48 = "JobID|JobName|Cluster|Partition|Account|State|Submit|Start|End|Elapsed|AllocTRES|TRESUsageInMax|Comment\n"


def sacct_line(job: str, name: str = "train", cluster: str = "hpc1", state: str = "COMPLETED", mem: str = "",
               comment: str = '{"model_type": "CNN"}', gpus: int = 1, started: bool = True) -> str:
    times = ("2026-11-01T01:00:00|2026-11-01T02:00:00|01:00:00" if started and state != "RUNNING" else
             "2026-11-01T01:00:00|Unknown|01:00:00" if started else "Unknown|Unknown|00:00:00")
    return f"{job}|{name}|{cluster}|gpu|nlp|{state}|2026-11-01T00:00:00|{times}|gres/gpu={gpus}|{mem}|{comment}\n"


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_the_hostile_sacct_corpus_in_one_import(home, tmp_path, capsys):
    """Issue 48 items 1, 2, 3, in one export and one import: a Comment nested 2,000 levels deep (it was exit 1, a
    RecursionError) and a Latin-1 JobName (exit 2 for the whole file) quarantine their line alone, the rest loads;
    JobID 5001 of hpc1 and of hpc2 (`sacct -M all`) are two jobs, each with its own steps' memory (one job, with
    hpc2's 73.4 GB); an array range counts its 1,000 tasks (it was one pending job). Each is also a unit test in
    tests/tasks/sources/test_slurm.py (with a range over the cap, lower-case states, headers inside the output)."""
    text = (HEAD48 + sacct_line("1") + sacct_line("2", comment='{"model_type": ' + "[" * 2000 + "]" * 2000 + "}")
            + sacct_line("3", name="caf\xe9")
            + sacct_line("5001") + sacct_line("5001.0", mem="gres/gpumem=2000M", comment="")
            + sacct_line("5001", cluster="hpc2") + sacct_line("5001.0", cluster="hpc2", mem="gres/gpumem=70000M",
                                                             comment="")
            + sacct_line("7000_[1-1000%20]", state="PENDING", gpus=2, started=False))
    path = tmp_path / "sacct.txt"
    path.write_bytes(text.encode("latin-1"))
    assert main(["import", "slurm", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert ("slurm: 8 sacct line(s): 4 GPU job(s) (1 quarantined by the import, with the reason), 1 array range(s) "
            "expanded into 1,000 task(s), 2 step(s) folded into their job, 0 job(s) without GPUs not loaded, 1 "
            "unreadable line(s) quarantined;") in out
    assert "1,005 rows read: 1,003 loaded, 2 rejected, 0 duplicate" in out
    assert rows(home, "SELECT job_id, reason_text FROM rejected_job_logs ORDER BY job_id") == [
        ("slurm-hpc1-2", f"{path} line 3: Comment: JSON nested 2,001 levels deep, more than "
                         "the 100 read; write the job's Comment as a flat JSON object of names and values"),
        ("slurm-hpc1-3", f"{path} line 4: JobName holds byte 0xe9 (byte 6 of the line), which is not "
                         "UTF-8; export with a UTF-8 locale (LANG=C.UTF-8 sacct ...) or convert the file (iconv -f "
                         "latin1 -t utf-8)")]
    assert rows(home, "SELECT job_id, round(peak_gpu_mem_gb, 2) FROM job_logs WHERE job_id LIKE '%5001' ORDER BY 1") == [
        ("slurm-hpc1-5001", 2.1), ("slurm-hpc2-5001", 73.4)]
    assert rows(home, "SELECT count(*), sum(gpu_count), min(job_id), max(job_id) FROM job_logs WHERE status = 'PENDING'"
                ) == [(1000, 2000, "slurm-hpc1-7000_1", "slurm-hpc1-7000_999")]
    assert rows(home, "SELECT count(*) FROM job_logs WHERE job_id LIKE '%[%'") == [(0,)]  # no range is a job


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_an_array_s_tasks_leave_its_pending_range_night_by_night(home, tmp_path, capsys):
    """Issue 48 item 3: night 1 `7000_[1-1000]` pending with 2 GPUs; night 2 tasks 1 and 2 run, `7000_[3-1000]`
    pending. Both range records stayed PENDING and the score counted 2 pending jobs for 998 queued tasks."""
    from gpucast.warehouse.training import count_pending

    night1 = write(tmp_path / "night1.txt", HEAD48 + sacct_line("7000_[1-1000]", state="PENDING", gpus=2, started=False))
    night2 = write(tmp_path / "night2.txt", HEAD48 + "".join(
        sacct_line(f"7000_{k}", state="RUNNING", gpus=2) for k in (1, 2))
        + sacct_line("7000_[3-1000]", state="PENDING", gpus=2, started=False))
    assert main(["import", "slurm", str(night1)]) == 0
    assert "1000 rows read: 1000 loaded" in capsys.readouterr().out.replace(",", "")
    assert main(["import", "slurm", str(night2)]) == 0
    out = capsys.readouterr().out
    assert "3 sacct line(s): 2 GPU job(s), 1 array range(s) expanded into 998 task(s)" in out
    assert "1,000 rows read: 2 loaded, 0 rejected, 998 duplicate" in out  # the tasks still pending: unchanged
    assert rows(home, "SELECT status, count(*), sum(gpu_count) FROM job_logs GROUP BY ALL ORDER BY ALL") == [
        ("PENDING", 998, 1996), ("RUNNING", 2, 4)]
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        assert count_pending(con) == 998  # what `gpucast score` scores


def test_sacct_that_fails_after_printing_loads_nothing(home, tmp_path, monkeypatch, capsys):
    """Issue 48 item 10: sacct's output is read as it prints it; when it then fails, nothing is ingested."""
    write(tmp_path / "bin" / "sacct", f"#!/bin/sh\ncat {SACCT}\necho 'sacct: error: slurmdbd: lost connection' >&2\n"
                                      "exit 1\n").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    assert main(["import", "slurm", "--sacct"]) == 5
    assert capsys.readouterr().err == ("gpucast import: sacct failed (exit 1): sacct: error: slurmdbd: lost connection; "
                                       "check that slurmdbd is reachable\n")
    assert not (home / "warehouse.duckdb").exists() and not list((home / "staging").iterdir())


def test_sacct_that_runs_past_its_time_is_stopped(home, tmp_path, monkeypatch, capsys):
    from gpucast.tasks.sources import sacct_input

    write(tmp_path / "bin" / "sacct", f"#!/bin/sh\nhead -3 {SACCT}\nexec sleep 60\n").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setattr(sacct_input, "SACCT_TIMEOUT_S", 1)
    started = time.monotonic()
    assert main(["import", "slurm", "--sacct"]) == 5
    assert time.monotonic() - started < 30
    assert capsys.readouterr().err.startswith("gpucast import: sacct could not be run (it did not finish within 1 s)")
    assert not (home / "warehouse.duckdb").exists()


def test_sacct_is_started_after_what_the_import_reads_first(home, tmp_path, monkeypatch):
    """Review of issue 48 (W 7): sacct was started and its header read, and only then did the import wait for the
    warehouse's writer lock (the ranges stored whole) and read the MLflow runs. sacct, its pipe full, stopped while
    its time limit ran: a false "sacct did not finish within 600 s". Here the warehouse read takes 3 s and sacct's
    limit is 2 s; sacct prints ~300 kB, more than a pipe holds."""
    from gpucast.flows import imports
    from gpucast.tasks.sources import sacct_input

    header, *body = SACCT.read_text().splitlines(keepends=True)
    out = write(tmp_path / "out.txt", header + "".join(body) * (300_000 // len("".join(body))))
    write(tmp_path / "bin" / "sacct", f"#!/bin/sh\ncat {out}\n").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setattr(sacct_input, "SACCT_TIMEOUT_S", 2)

    def slow_read(storage):  # as a wait for the writer lock while the nightly holds it
        time.sleep(3)
        return pl.DataFrame()

    monkeypatch.setattr(imports, "stored_array_ranges", slow_read)
    staged = tmp_path / "staged.parquet"
    monkeypatch.setattr(imports, "ingest_written", lambda write, *_: write(staged))  # the rows, not their ingest
    done = imports.import_slurm(None)
    assert done.parsed.lines == out.read_text().count("\n") - 1
    assert pl.read_parquet(staged).height == 13  # the fixture's jobs, each line of the repeats superseded


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_range_stored_whole_by_an_older_gpucast_is_retired_by_its_array_s_next_records(home, tmp_path, capsys):
    """Before issue 48 `7000_[1-1000]` was stored as one pending job, and no later record ever carried that id. The
    first import with a record of array 7000 (of that cluster) retires it: CANCELLED, saying why; another array's
    and another cluster's stored ranges stay."""
    old = [{"job_id": f"slurm-{cl}-{job}", "submitted_at": "2026-11-01T00:00:00Z", "updated_at": "2026-11-01T00:00:00Z",
            "status": "PENDING", "queue": "gpu", "team": "nlp", "gpu_count": 2, "model_type": "CNN"}
           for cl, job in (("hpc1", "7000_[1-1000]"), ("hpc2", "7000_[1-5]"), ("hpc1", "8000_[1-3]"))]
    assert main(["ingest", str(write(tmp_path / "old.jsonl", "".join(json.dumps(r) + "\n" for r in old)))]) == 0
    night2 = write(tmp_path / "night2.txt", HEAD48 + "".join(
        sacct_line(f"7000_{k}", state="RUNNING", gpus=2) for k in (1, 2))
        + sacct_line("7000_[3-1000]", state="PENDING", gpus=2, started=False))
    capsys.readouterr()
    assert main(["import", "slurm", str(night2)]) == 0
    out = capsys.readouterr().out
    assert ("; 1 array range(s) stored as one job by an older gpucast retired (CANCELLED: their tasks are jobs of their "
            "own)") in out
    assert "1,001 rows read: 1,001 loaded, 0 rejected, 0 duplicate" in out
    assert rows(home, "SELECT job_id, status, failure_reason, gpu_count, queue FROM job_logs WHERE job_id LIKE '%[%' "
                      "ORDER BY job_id") == [
        ("slurm-hpc1-7000_[1-1000]", "CANCELLED", "superseded: gpucast loads a pending array range as one job per "
         "task since issue 48 (the tasks are jobs of their own: slurm-hpc1-7000_<task>)", 2, "gpu"),
        ("slurm-hpc1-8000_[1-3]", "PENDING", None, 2, "gpu"), ("slurm-hpc2-7000_[1-5]", "PENDING", None, 2, "gpu")]
    assert rows(home, "SELECT count(*) FROM job_logs WHERE status = 'PENDING' AND job_id LIKE 'slurm-hpc1-7000%'") == [
        (998,)]
