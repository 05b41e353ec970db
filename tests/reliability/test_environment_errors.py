"""Disk full, permissions, a missing extra: exit code 5, one line saying what to do, the run recorded truly."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import uuid

import duckdb
import polars as pl
import pytest

from gpucast.flows.cli import main
from gpucast.flows.cli.process import _exit_code
from gpucast.tasks.simulate import SimConfig, write_logs


@pytest.mark.parametrize("exc", [
    OSError(errno.ENOSPC, "No space left on device", "/data/warehouse.duckdb"),
    PermissionError(errno.EACCES, "Permission denied", "/data/inbox/a.jsonl"),
    duckdb.TransactionException('Failed to commit: Could not write file "w.duckdb.wal": No space left on device'),
    # a staging file's Parquet write filling the disk (Polars wraps the OS error)
    pl.exceptions.ComputeError("parquet: File out of specification: underlying IO error: No space left on device "
                               "(os error 28)"),
    RuntimeError("publish failed"),  # the cause is what counts
])
def test_environment_errors_get_exit_5_and_one_line(exc):
    if isinstance(exc, RuntimeError):
        try:
            try:
                raise OSError(errno.EROFS, "Read-only file system", "/data")
            except OSError as cause:
                raise exc from cause
        except RuntimeError as chained:
            exc = chained
    code, line = _exit_code(exc)
    assert code == 5 and "\n" not in line and line.endswith("free space or fix permissions, then rerun")


def test_an_sql_error_that_quotes_the_words_is_not_an_environment_error():
    code, line = _exit_code(duckdb.ParserException("syntax error at or near \"'Permission denied'\""))
    assert code == 2 and "ParserException" in line
    # nor a Polars computation's error that quotes them without the OS's own error (a column named so)
    assert _exit_code(pl.exceptions.ComputeError("column 'No space left on device' not found"))[0] != 5


def test_a_missing_ml_extra_names_the_install_command():
    code, line = _exit_code(ModuleNotFoundError("No module named 'torch'", name="torch"))
    assert code == 5 and "pip install 'gpucast[ml]'" in line
    assert _exit_code(ModuleNotFoundError("No module named 'nosuch'", name="nosuch"))[0] == 1  # ours: a bug


def test_sql_errors_are_sql_errors(home, capsys):
    from gpucast.flows.settings import Settings
    from gpucast.warehouse import db

    with db.writer(Settings.from_env().ensure().storage):
        pass
    assert main(["sql", "SELEC 1"]) == 2
    assert capsys.readouterr().err.startswith("gpucast sql: ParserException: Parser Error: syntax error")
    # DuckDB's lines (the error, its candidates) joined, not written as `\n` (newcomer 22's S3)
    assert main(["sql", "SELECT nope FROM (SELECT 1 AS yes)"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\\n" not in err and "clause!; Candidate bindings: " in err


@pytest.fixture
def tiny_disk(tmp_path):
    """A 3 MB file system (tmpfs) to fill; skipped where this user may not mount one."""
    where = tmp_path / "tiny"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", f"tiny-{uuid.uuid4().hex[:6]}", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill here ({mounted.stderr.strip() or 'mount failed'})")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_full_disk_ends_the_ingest_with_exit_5_and_the_run_says_so(tiny_disk, tmp_path, monkeypatch, capsys):
    """The load fills the disk: DuckDB's commit fails at its checkpoint and the disk stays full. The room the run
    reserved at its start (`runs.reserve_room`), released with its staged files, takes the failure row (without it
    the run stayed `running`: docs/reliability.md, the regression of 2026-11-28)."""
    write_logs(tmp_path / "logs", SimConfig(days=1, jobs_per_day=20000, seed=4))  # ~12 MB of JSON Lines
    home = tiny_disk / "home"
    monkeypatch.setenv("GPUCAST_HOME", str(home))
    assert main(["ingest", str(tmp_path / "logs")]) == 5
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("gpucast ingest: No space left on device") and "free space" in last

    # the run is recorded with the real error (not the ROLLBACK's), once space is back
    shutil.copytree(home, tmp_path / "rescued", ignore=shutil.ignore_patterns("lake", "staging", "inbox"))
    with duckdb.connect(str(tmp_path / "rescued" / "warehouse.duckdb"), read_only=True) as con:
        ((status, message),) = con.execute("SELECT status, message FROM ingest_runs").fetchall()
    assert status == "failed" and "No space left on device" in message and "rollback" not in message.lower()


def test_a_disk_without_room_for_the_failure_row_refuses_the_run_before_it_starts(tiny_disk, monkeypatch):
    """Less free than `runs.ROOM_BYTES`: the run is refused (ENOSPC, which the command line makes exit 5 and one
    line) before its `running` row is written, so no run is left that nothing could mark failed. With room, the run
    holds ROOM_BYTES of real blocks in its staging folder while it runs, and leaves nothing behind."""
    from gpucast.flows.settings import Settings
    from gpucast.warehouse import db, runs

    monkeypatch.setenv("GPUCAST_HOME", str(tiny_disk / "home"))
    storage = Settings.from_env().ensure().storage
    with db.writer(storage):
        pass
    with runs.lifecycle(storage, "demand") as run:
        room = (run.staging / runs.ROOM_FILE).stat()
        assert room.st_size == runs.ROOM_BYTES and room.st_blocks * 512 >= runs.ROOM_BYTES
        with db.writer(storage) as con:
            runs.finish(con, "demand", run.run_id, "succeeded")
    filler = tiny_disk / "filler"
    filler.write_bytes(bytes(shutil.disk_usage(tiny_disk).free - runs.ROOM_BYTES // 2))
    with pytest.raises(OSError) as refused, runs.lifecycle(storage, "demand"):
        pytest.fail("the run started without room for its failure row")
    assert refused.value.errno == errno.ENOSPC and _exit_code(refused.value)[0] == 5
    filler.unlink()
    with duckdb.connect(str(storage.db_path), read_only=True) as con:
        assert con.execute("SELECT demand_run_id, status FROM demand_runs").fetchall() == [(run.run_id, "succeeded")]
    assert list(storage.staging_dir.iterdir()) == []


BLOCK_ML = """
import sys
for name in {modules!r}:
    sys.modules[name] = None  # as if the `ml` extra were not installed: importing it raises ModuleNotFoundError
from gpucast.flows.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_with_the_core_install_sql_errors_stay_sql_errors_and_train_names_the_extra(home):
    """Without the `ml` extra (torch, scikit-learn, ... unimportable) a planner's SQL typo is still an
    SQL error, and `gpucast train` says which extra to install, with no traceback."""
    from gpucast.flows.cli.options import ML_MODULES
    from gpucast.flows.settings import Settings
    from gpucast.warehouse import db

    with db.writer(Settings.from_env().ensure().storage):
        pass
    script = BLOCK_ML.format(modules=sorted(ML_MODULES))
    typo = subprocess.run([sys.executable, "-c", script, "sql", "SELEC 1"], capture_output=True, text=True)
    assert typo.returncode == 2 and typo.stderr.startswith("gpucast sql: ParserException"), typo.stderr[-2000:]
    train = subprocess.run([sys.executable, "-c", script, "train", "--models", "lightgbm"], capture_output=True, text=True)
    assert train.returncode == 5, train.stderr[-2000:]
    assert any(line.startswith("gpucast train: this command needs the `ml` extra (") and "pip install 'gpucast[ml]'" in line
               for line in train.stderr.splitlines()), train.stderr[-2000:]
    assert "Traceback" not in train.stderr


# A file where gpucast needs a folder, or a folder where it needs a file (issue 48, item 8): (what is in the way,
# is it a folder). Each was exit 1 and a traceback. A flow command checks them all (`Settings.ensure`) before a Prefect
# server or flow starts: the unit test below; two cases run as the real command in a fresh process.
WRONG_KIND = [
    ("", False),  # GPUCAST_HOME itself a file
    ("inbox", False),
    ("staging", False),
    ("lake", False),
    ("writer.lock", True),
    ("nightly.lock", True),
]


def _in_the_way(home, name: str, folder: bool):
    """Put a file (or a folder) where gpucast needs the other kind; the path."""
    blocker = home / name if name else home
    blocker.parent.mkdir(parents=True, exist_ok=True)
    if folder:
        (blocker / "x").mkdir(parents=True)
    else:
        blocker.write_text("")
    return blocker


def _wrong_kind_line(blocker, folder: bool) -> str:
    kind, needed = ("folder", "file") if folder else ("file", "folder")
    return f"{blocker} is a {kind} where gpucast needs a {needed}; move the {kind} away (gpucast makes the {needed}), then rerun"


@pytest.mark.parametrize(("name", "folder"), WRONG_KIND)
def test_a_path_of_the_wrong_kind_is_refused_before_anything_starts(tmp_path, name, folder):
    """What every flow command checks first (`flows/cli/process.py` `run_command`): the OS's error naming the path,
    which is exit 5 and one line."""
    from gpucast.flows.settings import Settings

    home = tmp_path / "home"
    blocker = _in_the_way(home, name, folder)
    with pytest.raises(OSError) as raised:
        Settings.from_env({"GPUCAST_HOME": str(home)}).ensure()
    assert _exit_code(raised.value) == (5, _wrong_kind_line(blocker, folder))


@pytest.mark.parametrize(("name", "folder", "command"), [
    ("", False, "status"),  # Prefect's home is made under GPUCAST_HOME by every command, flow command or not
    ("writer.lock", True, "ingest"),
])
def test_a_path_of_the_wrong_kind_is_exit_5_and_one_line_naming_it(tmp_path, name, folder, command):
    """The real command in a fresh process: exit 5 and one line naming the path and what to do, within seconds
    (refused before a Prefect server or flow starts), no traceback."""
    home = tmp_path / "home"
    blocker = _in_the_way(home, name, folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {"GPUCAST_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "gpucast.flows.cli", command], capture_output=True, text=True,
                          env=env, timeout=120)
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 5 and len(lines) == 1, done.stdout + done.stderr[-3000:]
    assert lines[0] == f"gpucast {command}: {_wrong_kind_line(blocker, folder)}"


def test_a_folder_of_the_user_named_like_a_lock_is_left_alone(tmp_path):
    """Review of issue 48, W 13: every folder named `*.lock` in the data directory was refused as a lock file; only
    gpucast's own locks are checked, by name."""
    from gpucast.flows.settings import Settings

    home = tmp_path / "home"
    (home / "backup.lock").mkdir(parents=True)
    assert Settings.from_env({"GPUCAST_HOME": str(home)}).ensure().storage.home == home


def test_check_kind_names_the_first_path_of_the_wrong_kind(tmp_path):
    """The one helper that both the data directory's check and the publish's use (warehouse/errors.py)."""
    from gpucast.warehouse.errors import check_kind

    (tmp_path / "a-file").write_text("")
    (tmp_path / "a-folder").mkdir()
    check_kind(tmp_path / "a-folder", tmp_path / "missing", folder=True)
    check_kind(tmp_path / "a-file", tmp_path / "missing", folder=False)
    with pytest.raises(NotADirectoryError) as raised:
        check_kind(tmp_path / "a-folder", tmp_path / "a-file", folder=True)
    assert _exit_code(raised.value) == (5, _wrong_kind_line(tmp_path / "a-file", False))
    with pytest.raises(IsADirectoryError) as raised:
        check_kind(tmp_path / "a-file", tmp_path / "a-folder", folder=False)
    assert _exit_code(raised.value) == (5, _wrong_kind_line(tmp_path / "a-folder", True))


def test_the_path_in_the_way_is_found_on_the_disk_whatever_raised(tmp_path):
    """Mid-run (a flow started by a deployment, where no command checked first): the OS's error is worded the same
    way wherever it is raised; an EEXIST of a folder that is there is no such error (a bug: exit 1)."""
    (tmp_path / "lake").write_text("")
    (tmp_path / "writer.lock").mkdir()
    below = NotADirectoryError(errno.ENOTDIR, "Not a directory", str(tmp_path / "lake" / "job_logs"))
    assert _exit_code(below) == (5, f"{tmp_path / 'lake'} is a file where gpucast needs a folder; move the file away "
                                    "(gpucast makes the folder), then rerun")
    code, line = _exit_code(IsADirectoryError(errno.EISDIR, "Is a directory", str(tmp_path / "writer.lock")))
    assert code == 5 and line.startswith(f"{tmp_path / 'writer.lock'} is a folder where gpucast needs a file")
    assert _exit_code(FileExistsError(errno.EEXIST, "File exists", str(tmp_path / "writer.lock")))[0] == 1


def test_a_damaged_duckdb_file_met_by_any_step_is_exit_6_with_the_way_back(tmp_path):
    """Review 85 S2-4: a warehouse whose blocks fail their checksums, met by the score step, was exit 2 ("bad input")
    with DuckDB's line alone; met by the publish, exit 6 with the way back. Now every step's is the publish's."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT range AS i, repeat('x', 100) || range AS s FROM range(200000)")
    data = bytearray(path.read_bytes())
    at = len(data) * 3 // 10 // 262_144 * 262_144 + 8  # inside a block of the table's data (256 KiB blocks)
    data[at:at + 4096] = b"\xff" * 4096
    path.write_bytes(bytes(data))
    with pytest.raises(duckdb.Error) as damaged:
        with duckdb.connect(str(path)) as con:
            con.execute("SELECT sum(i), max(s) FROM t").fetchall()
    try:
        raise RuntimeError("score failed") from damaged.value
    except RuntimeError as exc:
        code, line = _exit_code(exc)
    assert code == 6 and "\n" not in line
    assert line.startswith("a DuckDB file is damaged (") and "rebuilt from the Parquet lake" in line, line
    assert "`gpucast restore`" in line
