"""Run lifecycle: runs of dead processes marked `crashed`, failures recorded truly, staging swept, registry pruned."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from gpucast.flows.settings import Settings
from gpucast.tasks.learn.models import store
from gpucast.warehouse import db, runs, training
from gpucast.warehouse.housekeeping import claim_staging


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _start(con, kind: str, run_id: str, **columns) -> None:
    runs.start(con, runs.Run(kind, run_id, datetime.now(UTC), None), **columns)


def test_runs_of_dead_processes_are_marked_crashed_and_no_others(home):
    settings = Settings.from_env().storage
    dead = _dead_pid()
    with db.writer(settings) as con:
        _start(con, "ingest", "ingest-mine", files=1, files_rejected=0, rows_read=0, rows_loaded=0, rows_rejected=0,
               rows_duplicate=0)  # this process: still going
        _start(con, "train", "train-dead", models=["lightgbm"])
        _start(con, "score", "score-dead")
        _start(con, "score", "score-elsewhere")
        con.execute("UPDATE train_runs SET pid = ? WHERE train_run_id = 'train-dead'", [dead])
        con.execute("UPDATE score_runs SET pid = ? WHERE score_run_id = 'score-dead'", [dead])
        # a GPU worker on another host sharing the data directory: its pid means nothing here
        con.execute("UPDATE score_runs SET pid = ?, host = 'gpu-worker-7' WHERE score_run_id = 'score-elsewhere'", [dead])

        assert sorted(runs.close_abandoned_runs(con)) == ["score-dead", "train-dead"]
        status = dict(con.execute("SELECT train_run_id, status FROM train_runs UNION ALL "
                                  "SELECT score_run_id, status FROM score_runs UNION ALL "
                                  "SELECT run_id, status FROM ingest_runs").fetchall())
        message = con.execute("SELECT message FROM train_runs WHERE train_run_id = 'train-dead'").fetchone()[0]
    assert status == {"ingest-mine": "running", "train-dead": "crashed", "score-dead": "crashed",
                      "score-elsewhere": "running"}
    assert f"process {dead} on {socket.gethostname()} ended before finishing" in message


def test_a_failed_run_records_its_own_error_and_removes_its_staging(home):
    settings = Settings.from_env().ensure().storage
    with pytest.raises(ValueError), runs.lifecycle(settings, "score") as run:
        assert run.staging.is_dir()
        (run.staging / "part.parquet").write_text("x")
        raise ValueError("a bad batch")
    assert not run.staging.exists()
    with db.writer(settings) as con:
        row = con.execute("SELECT status, message, pid FROM score_runs WHERE score_run_id = ?", [run.run_id]).fetchone()
    assert row[:2] == ("failed", "ValueError: a bad batch") and row[2] == runs.owner()[0]


def test_a_failed_rollback_never_hides_the_error_that_caused_it(home):
    settings = Settings.from_env().ensure().storage
    with db.writer(settings) as con, pytest.raises(RuntimeError, match="the real error"):
        with db.transaction(con):
            con.execute("COMMIT")  # the transaction is gone: ROLLBACK will fail too
            raise RuntimeError("the real error")


def test_sweep_removes_staging_of_dead_processes_only(home):
    settings = Settings.from_env().ensure().storage
    mine = claim_staging(settings.staging_dir / "run-mine")
    theirs = claim_staging(settings.staging_dir / "run-dead")
    (theirs / "owner.pid").write_text(str(_dead_pid()))
    live_query = settings.home / "tmp" / f"sql-{os.getpid()}"
    killed_query = settings.home / "tmp" / f"sql-{_dead_pid()}"  # a `gpucast sql` killed mid-spill
    for spill in (live_query, killed_query):
        spill.mkdir(parents=True)
        (spill / "duckdb_temp_block.tmp").write_bytes(b"x" * 1024)
    removed = runs.sweep_orphans(settings)
    assert sorted(map(str, removed)) == sorted([str(theirs), str(killed_query)])
    assert mine.exists() and not theirs.exists() and live_query.exists() and not killed_query.exists()


def test_old_model_folders_are_pruned_but_never_a_champions_or_a_running_one(home):
    settings = Settings.from_env().ensure().storage
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    ids = {f"r{i}": runs.new_run_id("train", t0 + timedelta(days=i)) for i in range(1, 7)}  # as a run names itself
    statuses = {"r1": "succeeded", "r2": "succeeded", "r3": "failed", "r4": "succeeded", "r5": "succeeded",
                "r6": "running"}
    with db.writer(settings) as con:
        for i, (run, status) in enumerate(statuses.items()):
            _start(con, "train", ids[run], models=["lightgbm"])
            con.execute("UPDATE train_runs SET started_at = ?, status = ? WHERE train_run_id = ?",
                        [t0 + timedelta(days=i), status, ids[run]])
            (settings.models_dir / ids[run]).mkdir(parents=True)
        # r1 trained the only champion of runtime_hours (later runs skipped that target): scoring needs it
        con.execute("INSERT INTO model_champions (train_run_id, target, model, labelled_rows, model_dir) "
                    "VALUES (?, 'runtime_hours', 'lightgbm', 500, ?)", [ids["r1"], str(settings.models_dir / ids["r1"])])
        keep = training.runs_to_keep(con, 2)
    # issue 48 item 11: what gpucast did not write there was deleted too (every folder not kept went)
    foreign = ["traces", "my-experiments", "train-old", ids["r2"] + "-copy"]
    for name in foreign:
        (settings.models_dir / name).mkdir()
        (settings.models_dir / name / "notes.txt").write_text("mine")
    (settings.models_dir / "traces.json").write_text("{}")
    removed = store.prune(settings.models_dir, keep)
    assert [p.name for p in removed] == [ids["r2"], ids["r3"]]
    assert sorted(p.name for p in settings.models_dir.iterdir()) == sorted(
        [ids[r] for r in ("r1", "r4", "r5", "r6")] + foreign + ["traces.json"])
    assert all((settings.models_dir / name / "notes.txt").read_text() == "mine" for name in foreign)


def test_a_run_folders_name_is_what_a_train_run_is_named():
    """`store.RUN_FOLDER` (tasks may not import the warehouse) recognises `runs.new_run_id`'s train ids, only them."""
    now = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
    assert store.RUN_FOLDER.fullmatch(runs.new_run_id("train", now))
    assert not store.RUN_FOLDER.fullmatch(runs.new_run_id("score", now))
