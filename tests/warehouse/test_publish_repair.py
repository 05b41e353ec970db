"""A damaged part of the planners' copy is repaired by the next publish, never blamed on the warehouse, and shown
by `gpucast status` (issue 48, item 4; warehouse/publish.py): a forecast file deleted, cut short or overwritten
behind the publish's back is written again from the warehouse; an earlier copy with a bad block is not built on."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from gpucast.flows.cli import main
from gpucast.flows.cli.process import _exit_code
from gpucast.flows.settings import Settings, Storage
from gpucast.warehouse import db, publish
from gpucast.warehouse.publish import PublishFailed, copy_health, publish_snapshot
from tests.warehouse.test_publish_incremental import (
    DUCKDB_BLOCK,
    DUCKDB_HEADERS,
    _corrupt_a_block_of,
    _ingest,
    _same_as_warehouse,
    _score,
)

ROWS = 3000  # forecasts per score run: 1,000 jobs x 3 targets, a few pages per file


@pytest.fixture
def storage(home) -> Storage:
    return Settings.from_env().ensure().storage


def _as_written(path: Path) -> tuple[int, int]:
    """`path`'s access and modification times (ns, as `os.utime(ns=...)` takes them), to put back after its bytes
    were changed."""
    st = os.stat(path)
    return st.st_atime_ns, st.st_mtime_ns


def _damage(path: Path, how: str) -> None:
    """Damage a forecast file as a person or a failing disk would."""
    if how == "deleted":
        path.unlink()
    elif how == "cut short":
        os.truncate(path, path.stat().st_size // 2)
    else:  # overwritten in the middle, its Parquet footer intact, its size and modification time as they were
        times = _as_written(path)
        with open(path, "r+b") as f:
            f.seek(path.stat().st_size // 3)
            f.write(b"\xa5" * 256)
        os.utime(path, ns=times)


def _read_files(storage: Storage) -> list[Path]:
    """The forecast files the current copy's `forecasts` view reads."""
    with duckdb.connect(str(storage.published_path), read_only=True) as con:
        (sql,), = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'forecasts'").fetchall()
    return sorted(p for p in db.forecast_files_dir(storage.published_path).iterdir() if str(p) in sql)


def _forecasts_are_the_warehouses(storage: Storage) -> None:
    """The copy's forecasts are the warehouse's, row for row."""
    con = duckdb.connect()
    con.execute(f"ATTACH '{storage.db_path}' AS w (READ_ONLY)")
    con.execute(f"ATTACH '{storage.published_path}' AS p (READ_ONLY)")
    for a, b in (("w", "p"), ("p", "w")):
        assert con.execute(f"SELECT count(*) FROM (FROM {a}.forecasts EXCEPT ALL FROM {b}.forecasts)").fetchone() == (0,)
    con.close()


@pytest.mark.parametrize("how", ["deleted", "cut short", "overwritten"])
def test_a_damaged_forecast_file_is_written_again_from_the_warehouse_and_status_shows_it(storage, how, capsys):
    """Before: a deleted or cut file failed every later publish with exit 6 blaming the warehouse; an overwritten
    one with its footer intact was taken as it was, and planners' queries of `forecasts` failed or read garbage."""
    first = _score(storage, 0, rows=ROWS, by_target=True)  # three parts
    publish_snapshot(storage)
    victim = next(p for p in _read_files(storage) if p.name.startswith(first))
    _damage(victim, how)
    (problem,) = copy_health(storage.published_path).problems  # `gpucast status` shows it before any publish
    assert str(victim) in problem

    _score(storage, 1, rows=ROWS)
    publish_snapshot(storage)
    _same_as_warehouse(storage)
    _forecasts_are_the_warehouses(storage)
    health = copy_health(storage.published_path)
    assert health.problems == []
    (when, what), = health.repairs
    assert str(victim) in what and f"run {first}'s forecasts written again from the warehouse" in what
    assert main(["status", "--no-flows"]) == 0
    assert str(victim) in capsys.readouterr().out


def test_a_file_touched_but_intact_is_read_once_and_kept(storage):
    """A new change time alone (the file's other name removed, `touch`) makes the publish read the file and compare
    its checksum: intact, it is kept (not written again) and nothing is reported."""
    first = _score(storage, 0, rows=ROWS)
    publish_snapshot(storage)
    victim = next(p for p in _read_files(storage) if p.name.startswith(first))
    inode = victim.stat().st_ino
    os.utime(victim)
    assert copy_health(storage.published_path).problems == []  # read and compared: as written
    _score(storage, 1, rows=ROWS)
    publish_snapshot(storage)
    assert victim.stat().st_ino == inode and victim in _read_files(storage)
    assert copy_health(storage.published_path).repairs == []
    _forecasts_are_the_warehouses(storage)


def test_a_damaged_file_that_cannot_be_written_again_is_named_with_the_warehouse(storage):
    """The run's rows cannot be read back (a bad block in the warehouse): exit 6 names the warehouse and the damaged
    file, and planners keep their copy."""
    first = _score(storage, 0, rows=ROWS)
    publish_snapshot(storage)
    victim = next(p for p in _read_files(storage) if p.name.startswith(first))
    _corrupt_a_block_of(storage, first)
    victim.unlink()
    before = storage.published_path.read_bytes()
    with pytest.raises(PublishFailed, match="could not read .*warehouse.duckdb back whole") as failed:
        publish_snapshot(storage)
    assert f"{victim}: missing" in str(failed.value)
    assert storage.published_path.read_bytes() == before


def _corrupt_history_of(path: Path) -> None:
    """Overwrite the block that holds `job_log_records.ingest_run_id` in the database at `path` (which the next publish
    reads to bring the copy up to date, run by run; the copy's `job_logs` is a view over that table), its mode, size and
    modification time kept: a copy still looks like the file published."""
    with duckdb.connect(str(path), read_only=True) as con:
        (block,), = con.execute("SELECT min(block_id) FROM pragma_storage_info('job_log_records') "
                                "WHERE column_name = 'ingest_run_id' AND block_id >= 0").fetchall()
    mode, times = path.stat().st_mode, _as_written(path)
    os.chmod(path, 0o644)
    with open(path, "r+b") as f:
        f.seek(DUCKDB_HEADERS + block * DUCKDB_BLOCK + 8)  # past the block checksum, into the data it covers
        f.write(b"\xff" * 64)
    os.chmod(path, mode)
    os.utime(path, ns=times)


@pytest.mark.parametrize("damaged", ["published.prev.duckdb", "published.duckdb"])
def test_a_damaged_earlier_copy_is_not_built_on_nor_blamed_on_the_warehouse(storage, damaged):
    """Before: a bad block in `published.prev.duckdb` (brought up to date in place) or `published.duckdb` (byte-copied
    when the previous one is gone) failed the publish with exit 6 "restore the warehouse". Each is only a head start:
    the publish builds from the next best base, the warehouse is read whole, and status says what was found."""
    for day in (0, 1):
        _ingest(storage, f"ingest-{day}", range(day * 100, day * 100 + 300))
        _score(storage, day, rows=ROWS)
        publish_snapshot(storage)
    _corrupt_history_of(storage.home / damaged)
    if damaged == "published.duckdb":
        (storage.home / "published.prev.duckdb").unlink()  # so the current copy is the base (a byte copy of it)
    _ingest(storage, "ingest-2", range(200, 500))
    _score(storage, 2, rows=ROWS)
    publish_snapshot(storage)
    _same_as_warehouse(storage)
    _forecasts_are_the_warehouses(storage)
    (when, what), = copy_health(storage.published_path).repairs
    assert what.startswith(f"{storage.home / damaged} could not be brought up to date"), what


@pytest.mark.parametrize("base", ["in place", "byte copy"])
def test_a_damaged_warehouse_fails_the_publish_at_once_naming_it(storage, base, monkeypatch):
    """Before: a bad block in the warehouse, met while an earlier copy was brought up to date, was taken for the
    copy's: the publish tried in place, then a byte copy of `published.duckdb` (~10 s a GiB), then a full build, the
    first two blaming the copies, before exit 6. DuckDB's checksum error names the block's location, not the file:
    the file that holds that block with that stored checksum is the damaged one, so the first try ends the publish."""
    for day in (0, 1):
        _ingest(storage, f"ingest-{day}", range(day * 100, day * 100 + 300))
        _score(storage, day, rows=ROWS)
        publish_snapshot(storage)
    if base == "byte copy":
        (storage.home / "published.prev.duckdb").unlink()  # so the current copy is the base (a byte copy of it)
    _ingest(storage, "ingest-2", range(200, 500))
    _score(storage, 2, rows=ROWS)
    with db.writer(storage) as con:
        con.execute("CHECKPOINT")  # the history's block damaged below is one the publish reads
    _corrupt_history_of(storage.db_path)
    tries = []
    build = publish._verified_copy
    monkeypatch.setattr(publish, "_verified_copy", lambda *a, **k: tries.append(k["base"]) or build(*a, **k))
    before = storage.published_path.read_bytes()
    with pytest.raises(PublishFailed) as failed:
        publish_snapshot(storage)
    assert tries == [True]  # the copy tonight's was built on, and no other
    code, line = _exit_code(failed.value)
    assert code == 6 and line.startswith(f"could not read {storage.db_path} back whole (Error: Corrupt database file")
    assert "could not be brought up to date" not in line
    assert storage.published_path.read_bytes() == before
    assert copy_health(storage.published_path).repairs == []


def test_after_a_restore_status_checks_the_forecast_files_the_restored_copy_reads(storage):
    """`gpucast restore` puts the previous copy back: `copy_health` says so and checks that copy's forecast files, the
    ones it reads (review 76: the restore test had none), not tonight's."""
    for day in (0, 1):
        _score(storage, day, rows=ROWS)
        publish_snapshot(storage)
    tonight = {p.name for p in _read_files(storage)}
    publish.restore_previous(storage)
    restored = _read_files(storage)
    only_tonight = sorted(tonight - {p.name for p in restored})
    assert restored and only_tonight, "the two copies read different files"
    health = copy_health(storage.published_path)
    assert health.problems == [] and health.restored is not None
    (db.forecast_files_dir(storage.published_path) / only_tonight[0]).unlink()  # not read by the copy put back
    assert copy_health(storage.published_path).problems == []
    restored[0].unlink()
    (problem,) = copy_health(storage.published_path).problems
    assert problem.startswith(f"{restored[0]}: ") and copy_health(storage.published_path).restored is not None
