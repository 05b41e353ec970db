"""A failure after a score run's commit is not retried into a false message (issue 48, item 7), and a path of the
wrong kind beside the planners' copy stops the publish before anything is written (item 8): warehouse/forecast.py
`publish`, warehouse/publish.py `check_paths`."""

from __future__ import annotations

import os

import duckdb
import pytest

from gpucast.flows.settings import Settings, Storage
from gpucast.warehouse import db, forecast
from gpucast.warehouse.errors import environment_error
from gpucast.warehouse.publish import publish_snapshot
from tests.warehouse.test_publish_incremental import _score

ROWS = 300


@pytest.fixture
def storage(home) -> Storage:
    return Settings.from_env().ensure().storage


def _runs(storage: Storage) -> list[tuple]:
    with duckdb.connect(str(storage.db_path), read_only=True) as con:
        return con.execute("SELECT score_run_id, status, forecasts FROM score_runs ORDER BY 1").fetchall()


def _forecasts(storage: Storage) -> int:
    with duckdb.connect(str(storage.db_path), read_only=True) as con:
        return con.execute("SELECT count(*) FROM forecasts").fetchone()[0]


def test_a_publish_retried_after_its_commit_inserts_nothing_twice(storage):
    """Before: the retry inserted the committed run again, failed the duplicate check ("staged twice ... nothing was
    published") and the flow marked the run failed, though its forecasts were in the warehouse."""
    run = _score(storage, 0, rows=ROWS)
    staged = storage.staging_dir / "again.parquet"  # the run's staged forecasts, as the retried task passes them again
    with db.writer(storage) as con:
        con.execute(f"COPY (FROM forecasts) TO '{staged}' (FORMAT parquet)")
        assert forecast.publish(con, run, [staged], ROWS // 3, ["runtime_hours"], 80.0, 30) == (ROWS, 0)
    assert _runs(storage) == [(run, "published", ROWS)]
    assert _forecasts(storage) == ROWS


def test_a_forecast_folder_that_is_a_file_does_not_fail_the_committed_run(storage):
    """Keeping the staged parts for the planners' copy comes after the commit: with `published_forecasts` a file it
    keeps nothing (before: FileExistsError, which the task retried into "staged twice")."""
    folder = db.forecast_files_dir(storage.published_path)
    folder.write_text("not a folder")
    run = _score(storage, 0, rows=ROWS)  # forecast.publish(..., keep_in=folder)
    assert _runs(storage) == [(run, "published", ROWS)]
    with pytest.raises(NotADirectoryError) as refused:  # and the copy's publish names the file: exit 5, one line
        publish_snapshot(storage)
    assert environment_error(refused.value).startswith(f"{folder} is a file where gpucast needs a folder")
    assert not storage.published_path.exists() and not list(storage.home.glob(".published*"))


@pytest.mark.parametrize("name", ["published.state.json", "published.duckdb", "published.prev.duckdb",
                                  "published.duckdb.wal"])
def test_a_folder_where_the_publish_writes_a_file_stops_it_before_anything_is_renamed_in(storage, name):
    """Before: with `published.state.json` a folder the new copy was renamed in, then the note failed (exit 1, a
    traceback) and left its `.tmp`. Now nothing is written: planners keep their copy byte for byte."""
    _score(storage, 0, rows=ROWS)
    publish_snapshot(storage)
    _score(storage, 1, rows=ROWS)
    publish_snapshot(storage)
    in_the_way = storage.home / name
    if in_the_way.exists():
        os.chmod(in_the_way, 0o644)
        in_the_way.unlink()
    in_the_way.mkdir()
    before = {p.name: p.read_bytes() for p in storage.home.glob("published*") if p.is_file()}
    _score(storage, 2, rows=ROWS)
    with pytest.raises(IsADirectoryError) as refused:
        publish_snapshot(storage)
    assert environment_error(refused.value).startswith(f"{in_the_way} is a folder where gpucast needs a file")
    assert {p.name: p.read_bytes() for p in storage.home.glob("published*") if p.is_file()} == before
    assert not list(storage.home.glob(".published*"))  # no `.tmp` left
