"""SIGKILL a real `gpucast nightly` process in the middle of ingest, training, scoring and publishing,
then run it again: the warehouse must end as an uninterrupted run leaves it.

The kill points are failpoints (`warehouse/housekeeping.py`): the process stops there, announces
itself, and the test kills its whole process group.

The nightlies run against one Prefect API server for the module (`PREFECT_API_URL`, as where a server runs:
issue 40, decision 1) instead of each starting its own temporary one: that server's start was ~6 CPU-s and
~10 s of each night's ~38 s (py-spy), 16 times. A killed run's flow run stays 'Running' there, which only this
module's server sees; what a temporary server does when its command is killed is tests/reliability/test_sigterm.py's
subject.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest

from gpucast.flows import children
from gpucast.tasks.simulate import SimConfig, write_logs
from tests import failpoints
from tests.conftest import seed_prefect_home

pytestmark = pytest.mark.slow

# In-process fits: a local Dask cluster costs each night ~25 s to start and stop, and its workers dying with the
# group is tests/reliability/test_sigterm.py's subject, not this one's. One fast model: what a killed night leaves
# and how the next one recovers do not depend on the model (lightgbm beside it was ~40% of each night's training:
# its fits, its refit's held-out families, its compiled champion).
ARGS = ["--models", "linear_fs", "--repeats", "1", "--min-labelled", "50", "--runner", "local"]
# One kill point per phase that leaves something behind: each is the latest point of its phase, so the state it
# leaves holds what an earlier kill in the phase leaves (the run recorded 'running', its staged files) and more
# (an open transaction). `ingest:after-staging` and `score:after-staging` were kill points too; a kill there leaves
# a subset of what the `before-commit` kill of the same run leaves, recovered by the same code (the next run marks
# the run crashed and sweeps its staging folder), so they proved nothing the chain does not (two nights fewer).
KILL_POINTS = [
    "ingest:before-commit",        # files staged, inside the load transaction
    "train:after-first-target",    # one target's models and metrics written, two to go
    "score:before-commit",         # forecasts staged, inside the publish transaction
    "publish:before-rename",       # the planners' copy written to a temporary file, not renamed
]


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("logs")
    write_logs(out, SimConfig(days=2, jobs_per_day=250, pending_fraction=0.2, dirty_fraction=0.02, seed=11))
    return out


@pytest.fixture(scope="module")
def prefect_home(prefect_harness, tmp_path_factory) -> Path:
    """The module server's home, its database a copy of the run's migrated one (tests/conftest.py)."""
    home = tmp_path_factory.mktemp("prefect")
    seed_prefect_home(home, prefect_harness)
    return home


@pytest.fixture(scope="module")
def module_server(prefect_home) -> Iterator[children.TemporaryServer]:
    """The module's Prefect API server (gpucast's temporary server, started once, its database under
    `prefect_home`), launched and not waited for (`prefect_api` waits). Not the test session's harness, whose runs
    other tests read."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PREFECT_HOME", str(prefect_home))
        server = children.launch()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def prefect_api(module_server, reference) -> str:
    """The module's server's URL once it answers. Launched first (the arguments' order), the server starts (a fresh
    database, Prefect's server imports) while `reference` runs its night in this process; waited for before the night,
    its start idled this process (docs/testing.md, session 10). The overlap rests on pytest setting up a test's
    fixtures in its arguments' order: a test that names `reference` before `prefect_api` runs the night first and
    loses the overlap (not the correctness), so the tests here name `prefect_api` first (review 60 N5)."""
    # the nightlies check a configured API before they start (`children.api_problem`): wait here until it
    # answers, so the server's own start is not timed by a nightly's health check
    deadline = time.monotonic() + 120
    while (problem := children.api_problem(module_server.url, timeout_s=5)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert problem is None, problem
    return module_server.url


def nightly(home: Path, logs: Path, prefect_api: str, failpoint: str, marker: Path) -> subprocess.Popen:
    """A `gpucast nightly` process in a session of its own that stops at `failpoint` (`tests/failpoints.py`)."""
    env = {**os.environ, "GPUCAST_HOME": str(home), "PREFECT_API_URL": prefect_api}
    return subprocess.Popen(failpoints.command(failpoint, marker, "nightly", str(logs), *ARGS), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def state(home: Path) -> dict[str, pl.DataFrame]:
    """What planners and the next run depend on, without run ids, timestamps and arrival order."""
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        def q(sql):
            return con.sql(sql).pl()

        return {
            "job_logs": q("SELECT * EXCLUDE (loaded_at, ingest_run_id, arrival) FROM job_logs ORDER BY job_id"),
            # the full record history, every record once, each with where it came from
            "records": q("SELECT * EXCLUDE (arrival, ingest_run_id, loaded_at) FROM job_log_records ORDER BY ALL"),
            "rejected": q("SELECT source_row, reason_text FROM rejected_job_logs ORDER BY ALL"),
            "forecasts": q("SELECT job_id, target, model, round(p10, 6) AS p10, round(p50, 6) AS p50, round(p90, 6) AS p90, "
                           "safe_request_gb, oom_risk FROM pending_forecasts ORDER BY job_id, target"),
            "leaderboard": q("SELECT target, model, rank, round(validation_rmse, 6) AS v FROM model_leaderboard ORDER BY ALL"),
            "lake": lake(home),
        }


VOLATILE = {"arrival", "ingest_run_id", "loaded_at"}  # run ids, load times and arrival order differ run to run


def lake(home: Path) -> pl.DataFrame:
    """Every row of the Parquet lake (partition columns included), in a stable order."""
    files = sorted((home / "lake").rglob("*.parquet"))
    assert files, f"no Parquet under {home / 'lake'}"
    with duckdb.connect() as con:
        rows = con.sql("SELECT * FROM read_parquet(?, hive_partitioning = true, union_by_name = true)",
                       params=[[str(f) for f in files]]).pl()
    rows = rows.drop([c for c in rows.columns if c in VOLATILE])
    return rows.sort(rows.columns, nulls_last=True)


@pytest.fixture(scope="module")
def reference(prefect_harness, tmp_path_factory, logs) -> tuple[Path, dict[str, pl.DataFrame]]:
    """An uninterrupted night: its data directory (copy it before changing it) and its state.

    Run as `main` in this process, against the session's Prefect harness: a `gpucast nightly` process of its own paid
    ~10 CPU-s of imports, and what the tests compare is the warehouse, the lake and the planners' copy it leaves, not
    how its process ended (the killed and finishing runs of the chain are processes)."""
    from gpucast.flows.cli import main

    home = tmp_path_factory.mktemp("reference") / "home"
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(printed):
        mp.setenv("GPUCAST_HOME", str(home))
        code = main(["nightly", str(logs), *ARGS])
    assert code == 0, printed.getvalue()[-4000:]
    return home, state(home)


def kill_at(point: str, home: Path, logs: Path, prefect_api: str, marker: Path,
            while_held: Callable[[subprocess.Popen], None] | None = None) -> None:
    """Run a nightly until it stops at the failpoint `point`, call `while_held` (if any), then SIGKILL the run's
    process group."""
    marker.unlink(missing_ok=True)
    proc = nightly(home, logs, prefect_api, point, marker)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"the run ended before {point}: {proc.stdout.read().decode(errors='replace')[-3000:]}")
            assert time.monotonic() < deadline, f"never reached {point}"
            time.sleep(0.2)
        if while_held:
            while_held(proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()


def _main(home: Path, *args: str) -> tuple[int, str]:
    """`gpucast ARGS` as `main` in this process (under the session's Prefect harness) on the data directory `home`:
    its exit code and what it printed."""
    from gpucast.flows.cli import main

    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        mp.setenv("GPUCAST_HOME", str(home))
        code = main(list(args))
    return code, printed.getvalue()


@pytest.mark.usefixtures("prefect_harness")
def test_killed_nightlies_then_a_rerun_equal_an_uninterrupted_run(tmp_path, logs, prefect_api, reference):
    """A night killed at each point in turn (every run after a kill is the next night, the on-call rerun, which
    is killed further on), then one that finishes: the warehouse ends as one uninterrupted night leaves it, and
    each killed run is on record as crashed.

    One chain instead of a kill and a full rerun per point (13 nights to 5): each run starts from what the
    runs killed before it left, so every recovery is exercised, and after several crashes in a row too. While
    one run is held inside training, a second nightly on the same data directory must refuse to start.

    The killed runs are `gpucast nightly` processes (a SIGKILL ends a process); the refused second nightly and the
    finishing rerun run as `main` in this process, another process than the one holding the lock and than those
    killed before (each process of their own paid ~10 s of imports: docs/testing.md, "Fourth pass")."""
    home, marker = tmp_path / "home", tmp_path / "marker"

    def second_nightly_refused(first: subprocess.Popen) -> None:
        # (and, free here: the held process trained linear_fs alone, so it never imported torch:
        # `TrainOptions.run_device`, 1.2-1.5 CPU-s a process; its fits, the first target's champion saved and gated)
        assert "torch" not in failpoints.imported(marker).read_text().split()
        code, out = _main(home, "nightly", str(logs), *ARGS)
        assert code == 3, out[-3000:]
        assert f"another nightly run is in progress (pid {first.pid}" in out

    for point in KILL_POINTS:
        kill_at(point, home, logs, prefect_api, marker,
                second_nightly_refused if point == "train:after-first-target" else None)
    code, out = _main(home, "nightly", str(logs), *ARGS)  # the lock died with its process; the leftovers are cleared
    assert code == 0, out[-4000:]

    _, expected_state = reference
    after = state(home)
    for name, expected in expected_state.items():
        assert after[name].equals(expected), f"{name} differs after kills at {', '.join(KILL_POINTS)}"
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        # no job twice, no forecast outside a published run, no run left 'running'
        assert con.execute("SELECT count(*) - count(DISTINCT job_id) FROM job_logs").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM forecasts WHERE score_run_id NOT IN "
                           "(SELECT score_run_id FROM score_runs WHERE status = 'published')").fetchone()[0] == 0
        # each killed run is on record as crashed (not 'running' for ever), and nothing else is; a kill while
        # publishing the planners' copy comes after the score run is recorded
        runs = {t: dict(con.execute(f"SELECT status, count(*) FROM {t} GROUP BY ALL").fetchall())
                for t in ("ingest_runs", "train_runs", "score_runs")}
        killed = Counter({"ingest": "ingest_runs", "train": "train_runs", "score": "score_runs"}.get(p.split(":")[0])
                         for p in KILL_POINTS)
        assert {t: (r.get("crashed", 0), r.get("running", 0)) for t, r in runs.items()} == {
            t: (killed[t], 0) for t in runs}, runs
    # no orphans: the killed runs' staging folders and temporary copies are gone
    assert [p.name for p in (home / "staging").iterdir()] == []
    assert list(home.glob(".published.duckdb.*.tmp")) == []
    # the planners' copy is a complete, current database
    with duckdb.connect(str(home / "published.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM pending_forecasts").fetchone()[0] == expected_state["forecasts"].height


def _hold_open(path: Path, go: Path, max_wait_s: float = 300) -> subprocess.Popen:
    """Another process (a planner's DuckDB session) holding `path` open read-only until the file `go`
    appears. It prints "<forecast count> <time.time()>" once when it has opened and read, and again after `go`."""
    code = (f"import duckdb, os, time; con = duckdb.connect({str(path)!r}, read_only=True)\n"
            "def read(): print(con.execute('SELECT count(*) FROM forecasts').fetchall()[0][0], time.time(), flush=True)\n"
            f"read(); deadline = time.time() + {max_wait_s}\n"
            f"while not os.path.exists({str(go)!r}) and time.time() < deadline: time.sleep(0.05)\n"
            "read()")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def _line(proc: subprocess.Popen) -> tuple[int, float]:
    count, at = proc.stdout.readline().split()
    return int(count), float(at)


@pytest.mark.usefixtures("prefect_harness")
def test_planner_sessions_never_fail_the_run_nor_see_half_a_run(tmp_path, reference, monkeypatch, capsys):
    """The planners' sessions are other processes; the scoring runs are `gpucast score` in this one (`main`: a process
    of its own cost ~10 CPU-s of imports each, and what is tested is between the processes holding the files)."""
    from gpucast.flows.cli import main

    home, go = tmp_path / "home", tmp_path / "go"
    shutil.copytree(reference[0], home)  # a data directory after one night
    monkeypatch.setenv("GPUCAST_HOME", str(home))
    n = reference[1]["forecasts"].height
    published = home / "published.duckdb"
    # on the published copy: the session opens and reads, the rerun publishes, the session reads again
    planner = _hold_open(published, go)
    first_count, opened_at = _line(planner)
    assert first_count == n
    # a scoring run publishes the copy as the nightly does (a whole nightly here cost ~35 s more, no other publish)
    assert main(["score"]) == 0
    published_at = published.stat().st_mtime  # the new copy was written (then renamed in) during that run
    go.touch()
    second_count, read_at = _line(planner)
    planner.wait(timeout=60)
    assert opened_at < published_at < read_at, "the session's open and read did not straddle the publish"
    assert second_count == n  # still its own consistent copy, never a partial one, never an error
    with duckdb.connect(str(published), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM forecasts").fetchone()[0] == 2 * n  # new sessions: both runs

    # on the working file (what planners are told not to do): the run waits, then says what to do
    blocker = _hold_open(home / "warehouse.duckdb", tmp_path / "never")
    blocker.stdout.readline()
    monkeypatch.setenv("GPUCAST_LOCK_TIMEOUT_S", "3")
    capsys.readouterr()
    code = main(["score"])
    blocker.kill()
    blocker.wait()
    err = capsys.readouterr().err
    assert code == 3, err[-3000:]
    assert f"(pid {blocker.pid}) has" in err and "published.duckdb" in err


def _gpucast(home: Path, prefect_api: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPUCAST_HOME": str(home), "PREFECT_API_URL": prefect_api}
    return subprocess.run([sys.executable, "-m", "gpucast.flows.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300)


def _corrupt_a_table(db_path: Path) -> None:
    """A table nothing but the publish reads, one of its blocks overwritten as a failing disk would."""
    with duckdb.connect(str(db_path)) as con:
        con.execute("CREATE TABLE ballast AS SELECT range AS i FROM range(200000)")
        con.execute("CHECKPOINT")
        (block,), = con.execute("SELECT max(block_id) FROM pragma_storage_info('ballast')").fetchall()
    with open(db_path, "r+b") as f:
        f.seek(3 * 4096 + block * 256 * 1024 + 8)  # DuckDB's 3 header blocks, then 256 KiB blocks; past the checksum
        f.write(b"\xff" * 64)


def test_a_publish_failing_after_the_score_committed_is_on_its_run_and_leaks_nothing(tmp_path, prefect_api, reference):
    """Issue 48, items 4 and 7: the score run committed, then the publish of the planners' copy failed (here: a bad
    block in the warehouse, exit 6). The run's record says its forecasts are in the warehouse and reach planners at
    the next successful publish, planners keep their copy, and the error's line is the last: before, ~42
    "nanobind: leaked" lines followed it (DuckDB connections kept alive by the failed run's traceback)."""
    home = tmp_path / "home"
    shutil.copytree(reference[0], home)
    _corrupt_a_table(home / "warehouse.duckdb")
    before = (home / "published.duckdb").read_bytes()
    out = _gpucast(home, prefect_api, "score")
    assert out.returncode == 6, out.stderr[-3000:]
    assert "nanobind" not in out.stderr + out.stdout
    (line,) = [line for line in out.stderr.splitlines() if line.startswith("gpucast score:")]
    assert line.startswith(f"gpucast score: could not read {home / 'warehouse.duckdb'} back whole"), line
    assert (home / "published.duckdb").read_bytes() == before
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        status, message = con.execute("SELECT status, message FROM score_runs ORDER BY started_at DESC LIMIT 1").fetchone()
    assert status == "published", message
    assert "forecasts are in the warehouse, but the planners' copy was not refreshed" in message
    assert "they reach planners at the next successful publish" in message


@pytest.mark.usefixtures("prefect_harness")
def test_a_forecast_folder_that_is_a_file_stops_the_score_before_it_starts(tmp_path, reference, monkeypatch, capsys):
    """Issue 48, items 7 and 8: with `published_forecasts` a file, `gpucast score` committed its forecasts, then a
    retry of the commit's step said "staged twice ... nothing was published" (exit 2), the run was marked failed and
    its forecasts reached planners later. Now: exit 5, one line naming the file, and nothing is scored. (`main` in this
    process: a path of the wrong kind as the real command in a process of its own is
    tests/reliability/test_environment_errors.py's.)"""
    from gpucast.flows.cli import main

    home = tmp_path / "home"
    shutil.copytree(reference[0], home)
    monkeypatch.setenv("GPUCAST_HOME", str(home))
    shutil.rmtree(home / "published_forecasts")
    (home / "published_forecasts").write_text("")
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        runs_before = con.execute("SELECT score_run_id, status FROM score_runs ORDER BY ALL").fetchall()
    code = main(["score"])
    err = capsys.readouterr().err
    assert code == 5, err[-3000:]
    assert [line for line in err.splitlines() if line.startswith("gpucast score:")] == [
        f"gpucast score: {home / 'published_forecasts'} is a file where gpucast needs a folder; move the file away "
        "(gpucast makes the folder), then rerun"]
    assert "Traceback" not in err
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT score_run_id, status FROM score_runs ORDER BY ALL").fetchall() == runs_before
