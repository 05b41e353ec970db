"""Runs left `running` by a dead process are marked `crashed`; staging of dead processes is swept."""

from __future__ import annotations

import socket
import subprocess
import sys
from datetime import UTC, datetime

from gpucast.warehouse import db, forecast, load, training
from gpucast.warehouse.housekeeping import claim_staging, close_abandoned_runs, sweep_orphans
from gpucast.warehouse.settings import Settings


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_runs_of_dead_processes_are_marked_crashed_and_no_others(home):
    settings = Settings.from_env()
    now, dead = datetime.now(UTC), _dead_pid()
    with db.writer(settings) as con:
        load.start_run(con, "ingest-mine", now, 1)  # this process: still going
        training.start_train_run(con, "train-dead", ["lightgbm"], "paper", 1, "cpu")
        forecast.start_run(con, "score-dead", now)
        forecast.start_run(con, "score-elsewhere", now)
        con.execute("UPDATE train_runs SET pid = ? WHERE train_run_id = 'train-dead'", [dead])
        con.execute("UPDATE score_runs SET pid = ? WHERE score_run_id = 'score-dead'", [dead])
        # a GPU worker on another host sharing the data directory: its pid means nothing here
        con.execute("UPDATE score_runs SET pid = ?, host = 'gpu-worker-7' WHERE score_run_id = 'score-elsewhere'", [dead])

        assert sorted(close_abandoned_runs(con)) == ["score-dead", "train-dead"]
        status = dict(con.execute("SELECT train_run_id, status FROM train_runs UNION ALL "
                                  "SELECT score_run_id, status FROM score_runs UNION ALL "
                                  "SELECT run_id, status FROM ingest_runs").fetchall())
        message = con.execute("SELECT message FROM train_runs WHERE train_run_id = 'train-dead'").fetchone()[0]
    assert status == {"ingest-mine": "running", "train-dead": "crashed", "score-dead": "crashed",
                      "score-elsewhere": "running"}
    assert f"process {dead} on {socket.gethostname()} ended before finishing" in message


def test_sweep_removes_staging_of_dead_processes_only(home):
    settings = Settings.from_env().ensure()
    mine = claim_staging(settings.staging_dir / "run-mine")
    theirs = claim_staging(settings.staging_dir / "run-dead")
    (theirs / "owner.pid").write_text(str(_dead_pid()))
    removed = sweep_orphans(settings)
    assert removed == [theirs] and mine.exists() and not theirs.exists()


def test_old_model_folders_are_pruned_but_never_a_champions_or_a_running_one(home):
    from datetime import timedelta

    settings = Settings.from_env().ensure()
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    runs = {"r1": "succeeded", "r2": "succeeded", "r3": "failed", "r4": "succeeded", "r5": "succeeded", "r6": "running"}
    with db.writer(settings) as con:
        for i, (run, status) in enumerate(runs.items()):
            training.start_train_run(con, run, ["lightgbm"], "paper", 1, "cpu")
            con.execute("UPDATE train_runs SET started_at = ?, status = ? WHERE train_run_id = ?",
                        [t0 + timedelta(days=i), status, run])
            (settings.models_dir / run).mkdir(parents=True)
        # r1 trained the only champion of runtime_hours (later runs skipped that target): scoring needs it
        con.execute("INSERT INTO model_champions (train_run_id, target, model, labelled_rows, model_dir) "
                    "VALUES ('r1', 'runtime_hours', 'lightgbm', 500, ?)", [str(settings.models_dir / "r1")])
        removed = training.prune_model_folders(con, settings.models_dir, keep=2)
    assert [p.name for p in removed] == ["r2", "r3"]
    assert sorted(p.name for p in settings.models_dir.iterdir()) == ["r1", "r4", "r5", "r6"]
