"""The incremental planners' copy (issue 40): the last copy's bytes plus the night's difference, equal to a
full copy, and a full copy whenever the last copy cannot be trusted as a base (warehouse/publish.py)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.settings import Settings, Storage
from gpucast.warehouse import db, forecast, queries, runs
from gpucast.warehouse.publish import (
    FORECAST_FILE_PUBLISHES,
    LATEST,
    LATEST_ARRIVALS,
    PublishFailed,
    publish_snapshot,
    restore_previous,
)
from gpucast.warehouse.schema import LATEST_KEYS
from tests.conftest import key_latest

DAY0 = datetime(2026, 10, 1, tzinfo=UTC)
DUCKDB_HEADERS, DUCKDB_BLOCK = 3 * 4096, 256 * 1024  # DuckDB's file layout: 3 header blocks, then 256 KiB blocks
FORECASTS_PER_RUN = 122_880  # 40,960 jobs x 3 targets: one row group (DuckDB's 122,880 rows) per run


@pytest.fixture
def storage(home) -> Storage:
    return Settings.from_env().ensure().storage


def _score(storage: Storage, day: int, keep_days: int = 30, rows: int = FORECASTS_PER_RUN, by_target: bool = False) -> str:
    """Score run `day` (DAY0 + day) of 40,960 jobs x 3 targets (or `rows` forecasts) through the real publish path
    (retention included), staged as one Parquet part (or, `by_target`, one per target as flows/score.py stages)."""
    run_id, at = f"score-day{day:03d}", DAY0 + timedelta(days=day)
    parts = [storage.staging_dir / f"{run_id}.{k}.parquet" for k in range(3 if by_target else 1)]
    with db.writer(storage) as con:
        runs.start(con, runs.Run("score", run_id, at, None))
        for k, part in enumerate(parts):
            con.execute(f"""COPY (SELECT 'job-' || (i // 3) AS job_id, ([?, ?, ?])[(i % 3) + 1] AS target, 1.0 AS p10,
                            ? + i AS p50, 1e9 AS p90, 'lightgbm' AS model, 't' AS train_run_id, ? AS score_run_id,
                            ?::TIMESTAMPTZ AS scored_at, NULL AS safe_request_gb, NULL AS gpu_mem_gb, NULL AS oom_risk,
                            false AS ood, NULL AS ood_reason, NULL AS arch_inferred, NULL AS arch_match_distance
                            FROM range({rows}) t(i) WHERE i % ? = ?)
                            TO '{part}' (FORMAT parquet)""", [*c.TARGETS, day * 1e6, run_id, at, len(parts), k])
        forecast.publish(con, run_id, parts, rows // 3, list(c.TARGETS), 80.0, keep_days,
                         keep_in=db.forecast_files_dir(storage.published_path))  # as flows/score.py does
    for part in parts:
        part.unlink()  # the staging folder goes at the end of a run; the kept name stays
    return run_id


def _ingest(storage: Storage, run_id: str, jobs: range) -> None:
    """An ingest run loading a new record of each job in `jobs` (as warehouse/load.py merges one)."""
    with db.writer(storage) as con:
        base = con.execute("SELECT coalesce(max(arrival), 0) FROM job_log_records").fetchall()[0][0]
        con.execute(f"""CREATE OR REPLACE TEMP TABLE fresh AS
                        SELECT 'job-' || i AS {c.JOB_ID}, ?::TIMESTAMPTZ AS {c.SUBMITTED_AT}, 'PENDING' AS {c.STATUS},
                               'CNN' AS {c.MODEL_TYPE}, 'h' || i AS record_hash, ? + i AS arrival, 'f' AS source_file,
                               i AS source_row, ? AS ingest_run_id, ?::TIMESTAMPTZ AS loaded_at
                        FROM range(?, ?) t(i)""", [DAY0, base - jobs.start + 1, run_id, DAY0, jobs.start, jobs.stop])
        con.execute("INSERT INTO job_log_records BY NAME SELECT * FROM fresh")
        key_latest(con, "arrival IN (SELECT arrival FROM fresh)")


def _same_as_warehouse(storage: Storage) -> None:
    """Every table of the copy holds the warehouse's rows, every view is there; `forecasts` is a view over the
    runs' Parquet files with the table's columns and rows, `job_logs` a view over the copy's `job_log_records` with the
    warehouse's view's columns and rows (and their arrivals its one table of its own, in place of the warehouse's keys,
    `job_logs_latest`), and the files folder holds no stray file."""
    con = duckdb.connect()
    con.execute(f"ATTACH '{storage.db_path}' AS w (READ_ONLY)")
    con.execute(f"ATTACH '{storage.published_path}' AS p (READ_ONLY)")
    tables = {n for (n,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'w'").fetchall()}
    assert tables - {"forecasts", LATEST_KEYS} | {LATEST_ARRIVALS} == {n for (n,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = 'p'").fetchall()}
    # in each table's own column order: planners `SELECT *` the copy, so a reordered column is a difference
    # (duckdb_columns() lists a view's columns too: `job_logs` is compared with the warehouse's view)
    table_columns = ("SELECT table_name, column_index, column_name, data_type FROM duckdb_columns() "
                     "WHERE database_name = ? AND table_name NOT IN ('forecasts', ?, ?) ORDER BY table_name, column_index")
    assert con.execute(table_columns, ["w", LATEST_ARRIVALS, LATEST_KEYS]).fetchall() == con.execute(
        table_columns, ["p", LATEST_ARRIVALS, LATEST_KEYS]).fetchall()
    for name in tables - {LATEST_KEYS} | {LATEST}:
        assert _rows_differing(con, name) == 0, name
    columns = "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ? AND table_name = 'forecasts'"
    assert con.execute(columns, ["w"]).fetchall() == con.execute(columns, ["p"]).fetchall()
    views = "SELECT view_name, sql FROM duckdb_views() WHERE database_name = '{}' AND NOT internal ORDER BY 1"
    assert [v for v in con.execute(views.format("w")).fetchall() if v[0] != LATEST] == [
        v for v in con.execute(views.format("p")).fetchall() if v[0] not in ("forecasts", LATEST)]
    assert not list(db.forecast_files_dir(storage.published_path).glob(".*")), "a temporary file left behind"
    con.close()


def _rows_differing(con, name: str) -> int:
    """How many distinct rows table `name` holds a different number of times in the warehouse (`w`) and the copy
    (`p`): 0 when the two hold the same rows, each as often (what `w EXCEPT ALL p` and `p EXCEPT ALL w` both empty
    say). One pass over both (each row counted +1 in `w`, -1 in `p`, grouped by every column): the two EXCEPT ALLs
    took ~4x its CPU on the runs' 122,880 forecasts, 28 times in this module (docs/testing.md, "Fifth pass")."""
    cols = ", ".join(f'"{col}"' for (col,) in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = 'w' AND table_name = ? ORDER BY column_index",
        [name]).fetchall())
    return con.execute(f"""SELECT count(*) FROM (SELECT {cols} FROM (SELECT {cols}, 1 AS side FROM w.{name}
                           UNION ALL SELECT {cols}, -1 AS side FROM p.{name}) GROUP BY ALL HAVING sum(side) <> 0)""").fetchone()[0]


def test_rows_differing_counts_a_row_missing_added_twice_or_changed():
    """The comparison `_same_as_warehouse` makes: any row the two databases do not hold equally often counts."""
    con = duckdb.connect()
    for db_name in ("w", "p"):
        con.execute(f"ATTACH ':memory:' AS {db_name}")
        con.execute(f"CREATE TABLE {db_name}.t AS SELECT range AS i, range::VARCHAR AS s, NULL::DOUBLE AS x FROM range(5)")
    assert _rows_differing(con, "t") == 0
    con.execute("INSERT INTO p.t VALUES (1, '1', NULL)")  # a row twice in the copy
    assert _rows_differing(con, "t") == 1
    con.execute("DELETE FROM p.t WHERE i = 1")  # now missing from the copy
    assert _rows_differing(con, "t") == 1
    con.execute("INSERT INTO p.t VALUES (1, '1', 0.0)")  # back, with a value where the warehouse has NULL
    assert _rows_differing(con, "t") == 2


def _runs_in(path) -> list[str]:
    with duckdb.connect(str(path), read_only=True) as con:
        return [r for (r,) in con.execute("SELECT DISTINCT score_run_id FROM forecasts ORDER BY 1").fetchall()]


def _corrupt_a_block_of(storage: Storage, run_id: str) -> None:
    """Overwrite one data block of run `run_id`'s P50s in the working warehouse, as a failing disk would."""
    with db.writer(storage) as con:
        con.execute("CHECKPOINT")
        (block,), = con.execute("SELECT min(block_id) FROM pragma_storage_info('forecasts') WHERE column_name = 'p50' "
                                "AND row_group_id = (SELECT min(row_group_id) FROM pragma_storage_info('forecasts')) "
                                "AND block_id >= 0").fetchall()
        assert con.execute("SELECT min(score_run_id) FROM forecasts").fetchone() == (run_id,)  # the first row group's run
    with open(storage.db_path, "r+b") as f:
        f.seek(DUCKDB_HEADERS + block * DUCKDB_BLOCK + 8)  # past the block checksum, into the data it covers
        f.write(b"\xff" * 64)
        f.flush()
        os.fsync(f.fileno())


def test_nights_of_new_runs_pruned_runs_and_updated_jobs_publish_what_a_full_copy_would(storage):
    _ingest(storage, "ingest-1", range(0, 1000))
    _score(storage, 0, keep_days=2)
    publish_snapshot(storage, full=True)
    for day in (1, 2, 3, 4):
        _ingest(storage, f"ingest-{day + 1}", range(day * 300, day * 300 + 500))  # new jobs and newer records of old ones
        _score(storage, day, keep_days=2)  # from day 3 on, the run of 3 days before is pruned
        publish_snapshot(storage)
        _same_as_warehouse(storage)
    assert _runs_in(storage.published_path) == ["score-day002", "score-day003", "score-day004"]
    assert _runs_in(storage.home / "published.prev.duckdb") == ["score-day001", "score-day002", "score-day003"]


def test_only_what_changed_is_read_back_and_a_full_publish_reads_everything(storage):
    """An incremental publish does not read past runs' forecasts again (that is its speed): a block of the
    first run corrupted in the warehouse after it was published does not reach planners, who keep that run
    as it was verified; a full publish reads it and refuses to publish (planners keep their copy)."""
    first = _score(storage, 0)
    publish_snapshot(storage)
    _score(storage, 1)
    _corrupt_a_block_of(storage, first)

    publish_snapshot(storage)
    assert _runs_in(storage.published_path) == [first, "score-day001"]
    with duckdb.connect(str(storage.published_path), read_only=True) as con:
        assert con.execute("SELECT sum(p50) FROM forecasts WHERE score_run_id = ?", [first]).fetchone() == (
            sum(range(FORECASTS_PER_RUN)),)
    before = storage.published_path.read_bytes()
    with pytest.raises(PublishFailed, match="could not read .*warehouse.duckdb back whole"):
        publish_snapshot(storage, full=True)
    assert storage.published_path.read_bytes() == before


def test_a_copy_someone_wrote_into_is_not_built_on(storage):
    _ingest(storage, "ingest-0", range(0, 10))
    _score(storage, 0)
    publish_snapshot(storage)
    os.chmod(storage.published_path, 0o644)  # root, or a planner who changed the mode, writes and closes cleanly
    with duckdb.connect(str(storage.published_path)) as con:
        con.execute("CREATE TABLE mine AS SELECT 1 AS x")
        con.execute("DELETE FROM job_log_records")
        con.execute("CREATE OR REPLACE VIEW forecasts AS SELECT * FROM range(3)")
        con.execute("CHECKPOINT")
    _score(storage, 1)
    publish_snapshot(storage)
    _same_as_warehouse(storage)  # neither the planner's table, the deleted rows nor the replaced view carried over


def test_a_run_changed_after_it_was_published_and_a_changed_column_are_copied_again(storage):
    first = _score(storage, 0)
    _ingest(storage, "ingest-1", range(0, 100))
    publish_snapshot(storage)
    with db.writer(storage) as con:  # neither happens in gpucast today; the publish must not miss them if they do
        con.execute("DELETE FROM forecasts WHERE score_run_id = ? AND p50 < 10", [first])
        # (records gone from the history go from `job_logs` too: its rows are rows of the history, whose copy the
        # copy's `job_logs` reads; `test_a_latest_row_missing_from_the_history_fails_the_publish_naming_job_logs`)
        con.execute("DELETE FROM job_log_records WHERE arrival < 5")
        con.execute("DELETE FROM job_logs_latest WHERE arrival < 5")
        con.execute("ALTER TABLE forecasts ADD COLUMN note VARCHAR DEFAULT 'new'")
    _score(storage, 1)  # the new column gets its default
    publish_snapshot(storage)
    _same_as_warehouse(storage)


def test_the_copys_job_logs_is_a_view_of_the_history_and_a_latest_row_missing_from_it_fails_the_publish(storage):
    """Planners read `job_logs` in the copy by that name, with its columns and rows, and the copy holds them once:
    a view over its `job_log_records` by the latest arrivals (`LATEST_ARRIVALS`), not a second table of the rows
    (issue 52). A warehouse whose `job_logs_latest` keys a record its history lacks (gpucast never writes one: its own
    `job_logs` view drops the job) cannot be published that way: the publish fails naming the keys, and the copy is left
    as it was."""
    _ingest(storage, "ingest-1", range(0, 100))
    _ingest(storage, "ingest-2", range(50, 150))  # a newer record of jobs 50-99: their older rows leave `job_logs`
    publish_snapshot(storage)
    _same_as_warehouse(storage)
    with duckdb.connect(str(storage.published_path), read_only=True) as con:
        assert con.execute("SELECT table_type FROM information_schema.tables WHERE table_name = ?",
                           [LATEST]).fetchall() == [("VIEW",)]
        assert con.execute(f"SELECT count(*), count(DISTINCT job_id), min(ingest_run_id) FILTER (WHERE job_id = 'job-60') "
                           f"FROM {LATEST}").fetchone() == (150, 150, "ingest-2")
    published = storage.published_path.read_bytes()
    with db.writer(storage) as con:
        con.execute("DELETE FROM job_log_records WHERE arrival = (SELECT min(arrival) FROM job_logs)")
    with pytest.raises(PublishFailed, match="job_logs_latest has 150 rows but 149 were published") as failed:
        publish_snapshot(storage)
    assert storage.published_path.read_bytes() == published
    # the warehouse's fault said as such, not a disk's (review 61 N2)
    assert "latest record that is not in job_log_records" in str(failed.value)
    assert "Check the disk" not in str(failed.value)


def test_a_job_keyed_twice_in_job_logs_latest_fails_the_publish_and_leaves_the_copy(storage):
    """Two keys for one job would show it twice in the planners' `job_logs` while every count still matched (review 65b
    S3-4): gpucast never writes them (the load replaces a job's key), so only a hand edit or a bug could, and the
    publish refuses them, naming the table, leaving the copy as it was."""
    _ingest(storage, "ingest-1", range(0, 100))
    publish_snapshot(storage)
    _ingest(storage, "ingest-2", range(50, 150))
    publish_snapshot(storage)  # the first copy is now `published.prev.duckdb`
    published = storage.published_path.read_bytes()
    with db.writer(storage) as con:  # job-60's older record keyed beside its latest one
        con.execute("INSERT INTO job_logs_latest SELECT job_id, arrival, submitted_at FROM job_log_records "
                    "WHERE job_id = 'job-60' AND ingest_run_id = 'ingest-1'")
        assert con.execute("SELECT count(*) FROM job_logs WHERE job_id = 'job-60'").fetchone() == (2,)
    previous = storage.published_path.with_name("published.prev.duckdb")
    kept = previous.read_bytes()
    with pytest.raises(PublishFailed, match="job_logs_latest holds 1 more key") as failed:
        publish_snapshot(storage)
    assert "Rebuild the warehouse" in str(failed.value)
    assert storage.published_path.read_bytes() == published
    # refused before any copy is touched: the earlier copy `gpucast restore` brings back is still the earlier one
    assert previous.read_bytes() == kept  # (review 66a S3-3)


def _inode(path) -> int:
    return os.stat(path).st_ino


def test_each_publish_brings_the_previous_copy_up_to_date_in_place_and_retention_prunes_it_in_place(storage):
    """The two copies take turns (no byte copy of the current one): tonight's copy is the file that was
    `published.prev.duckdb`, brought up to date in place; the current one becomes the previous one. Pruned runs
    are deleted in place and their space is reused: with a run pruned each night the file does not grow."""
    _score(storage, 0, keep_days=1)
    publish_snapshot(storage)
    _score(storage, 1, keep_days=1)
    publish_snapshot(storage)  # a byte copy of the first (no previous copy yet to bring up to date)
    sizes = []
    for day in range(2, 8):
        _ingest(storage, f"ingest-{day}", range(day * 100, day * 100 + 300))
        _score(storage, day, keep_days=1)  # the run of 2 days before is pruned
        current, previous = _inode(storage.published_path), _inode(storage.home / "published.prev.duckdb")
        publish_snapshot(storage)
        assert (_inode(storage.published_path), _inode(storage.home / "published.prev.duckdb")) == (previous, current)
        assert _runs_in(storage.published_path) == [f"score-day{day - 1:03d}", f"score-day{day:03d}"]
        assert _runs_in(storage.home / "published.prev.duckdb") == [f"score-day{day - 2:03d}", f"score-day{day - 1:03d}"]
        assert stat.S_IMODE(os.stat(storage.published_path).st_mode) == 0o444
        _same_as_warehouse(storage)
        with duckdb.connect(str(storage.published_path), read_only=True) as con:  # the file's blocks, used or free
            sizes.append(con.execute("SELECT total_blocks FROM pragma_database_size()").fetchone()[0])
    # each run takes a few blocks; were pruned runs' blocks not reused, each file would gain them every other night
    assert max(sizes[3:]) <= max(sizes[:3]), f"the copy grows night after night (blocks per night: {sizes})"


def test_a_session_holding_the_previous_copy_keeps_it_and_the_publish_copies_instead(storage):
    _score(storage, 0)
    publish_snapshot(storage)
    _score(storage, 1)
    publish_snapshot(storage)
    held = storage.home / "published.prev.duckdb"  # a planner's session opened it (or opened published.duckdb two nights ago)
    before = _runs_in(held)
    code = (f"import duckdb, sys; con = duckdb.connect({str(held)!r}, read_only=True)\n"
            "print(con.execute('SELECT count(*) FROM forecasts').fetchone()[0], flush=True); sys.stdin.readline()\n"
            "runs = con.execute('SELECT DISTINCT score_run_id FROM forecasts ORDER BY 1').fetchall()\n"
            "print(','.join(r for (r,) in runs), flush=True)")
    planner = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert int(planner.stdout.readline()) == FORECASTS_PER_RUN * len(before)
        held_inode = _inode(held)
        _score(storage, 2)
        publish_snapshot(storage)  # DuckDB's lock says the file is open: not written; a byte copy of the current one
        assert _inode(storage.published_path) != held_inode
        _same_as_warehouse(storage)
        planner.stdin.write("\n")
        planner.stdin.flush()
        assert planner.stdout.readline().strip().split(",") == before  # its own file, unchanged
    finally:
        planner.kill()
        planner.wait()
    _score(storage, 3)
    publish_snapshot(storage)  # and the turns resume
    _same_as_warehouse(storage)


def _publish_killed_at(storage: Storage, point: str, tmp_path) -> None:
    """Run a publish in another process and SIGKILL it at the failpoint `point` (tests/failpoints.py)."""
    marker = tmp_path / "marker"
    code = ("from pathlib import Path; from tests.failpoints import stop_at\n"
            "from gpucast.warehouse.housekeeping import install_failpoint_hook\n"
            "from gpucast.warehouse.publish import publish_snapshot\n"
            "from gpucast.flows.settings import Settings\n"
            f"install_failpoint_hook(stop_at({point!r}, Path({str(marker)!r})))\n"
            f"publish_snapshot(Settings.from_env({{'GPUCAST_HOME': {str(storage.home)!r}}}).storage)")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).parents[2])
    try:
        while not marker.exists():
            assert proc.poll() is None, f"the publish ended before {point}"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("point", ["publish:before-commit", "publish:before-rename"])
def test_a_publish_killed_while_writing_the_previous_copy_in_place_leaves_the_current_copy_as_it_was(storage, point, tmp_path):
    """Killed inside the transaction (DuckDB's WAL rolls it back) or after it, before the rename: planners keep
    tonight's copy byte for byte, `published.prev.duckdb` is a second name of it, the next publish is whole."""
    for day in (0, 1, 2):
        _score(storage, day)
        publish_snapshot(storage)
    _score(storage, 3)
    before = storage.published_path.read_bytes()
    previous_file = _inode(storage.home / "published.prev.duckdb")
    _publish_killed_at(storage, point, tmp_path)
    left = sorted(p.name for p in storage.home.glob(".published*"))
    assert left and all(".tmp" in name for name in left), left  # the file being written (and its WAL), not renamed in
    assert storage.published_path.read_bytes() == before
    assert _inode(storage.home / "published.prev.duckdb") == _inode(storage.published_path) != previous_file
    assert _runs_in(storage.published_path) == ["score-day000", "score-day001", "score-day002"]
    # nothing older is left to restore: `gpucast restore` says so, not "restored" with the same copy (review 76 S2-2)
    with pytest.raises(FileNotFoundError, match="nothing older to restore: published.prev.duckdb is a second name"):
        restore_previous(storage)
    assert storage.published_path.read_bytes() == before

    runs.sweep_orphans(storage)  # as the next run's start does
    assert list(storage.home.glob(".published*")) == []
    publish_snapshot(storage)
    _same_as_warehouse(storage)
    _score(storage, 4)
    publish_snapshot(storage)
    _same_as_warehouse(storage)


def test_an_unreadable_previous_copy_is_not_built_on_and_the_publish_copies_instead(storage):
    """The previous copy is only a head start: its file cut or garbled behind our back (same size and times, so it
    still looks untouched) makes the publish byte-copy the current one, never fail (review of 2026-11-26)."""
    _score(storage, 0)
    publish_snapshot(storage)
    _score(storage, 1)
    publish_snapshot(storage)
    prev = storage.home / "published.prev.duckdb"
    times = os.stat(prev)
    with open(prev, "r+b") as f:
        f.write(b"\x00" * DUCKDB_HEADERS)  # no DuckDB header left: ATTACH refuses the file
    os.utime(prev, ns=(times.st_atime_ns, times.st_mtime_ns))
    _score(storage, 2)
    publish_snapshot(storage)
    _same_as_warehouse(storage)
    assert _runs_in(storage.published_path) == ["score-day000", "score-day001", "score-day002"]


def test_each_run_is_written_once_and_its_file_kept_while_a_recent_copy_reads_it(storage):
    """The copy's `forecasts` reads one Parquet file per run: a publish writes only the new run's file, leaves the
    others' untouched, and removes a pruned run's file only once no copy of the last `FORECAST_FILE_PUBLISHES`
    publishes reads it; planners' bounded SQL reads the view but no other file."""
    folder = db.forecast_files_dir(storage.published_path)
    seen: dict[str, int] = {}  # file name -> inode when first seen
    read_by: list[set[str]] = []  # per publish, the files its copy reads
    for day in range(8):
        _score(storage, day, keep_days=1)  # from day 2 on, the run of 2 days before is pruned
        publish_snapshot(storage)
        _same_as_warehouse(storage)
        with duckdb.connect(str(storage.published_path), read_only=True) as con:
            (sql,), = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'forecasts'").fetchall()
        read_by.append({p.name for p in folder.iterdir() if str(p) in sql})
        new = {p.name for p in folder.iterdir()} - seen.keys()
        assert len(new) == 1 and next(iter(new)).startswith(f"score-day{day:03d}."), new  # tonight's run only
        assert next(iter(new)).endswith(".part0.parquet")  # the part the score run staged: taken, not written again
        assert all(folder.joinpath(name).stat().st_ino == ino for name, ino in seen.items() if folder.joinpath(name).exists())
        seen.update({name: folder.joinpath(name).stat().st_ino for name in new})
        assert {p.name for p in folder.iterdir()} == set().union(*read_by[-FORECAST_FILE_PUBLISHES:])
    assert not folder.joinpath(min(seen)).exists()  # day 0's run: pruned, and read by no recent copy

    spill = storage.home / "tmp" / "sql-test"
    df, total = queries.run_sql(storage.published_path, "SELECT count(*) AS n FROM forecasts", Settings.from_env({}).sql, spill)
    assert df["n"].to_list() == [FORECASTS_PER_RUN * 2]
    with pytest.raises(queries.QueryError, match="disabled by configuration|Permission"):
        queries.run_sql(storage.published_path, f"SELECT * FROM read_parquet('{storage.staging_dir}/*.parquet')",
                        Settings.from_env({}).sql, spill)


def test_a_kept_part_that_does_not_hold_the_run_is_not_taken_and_the_run_is_written_from_the_warehouse(storage):
    run = _score(storage, 0)
    (kept,) = db.forecast_files_dir(storage.published_path).glob(f"{run}.staged.*.parquet")
    kept.unlink()  # its second name only: replaced by a part that lost rows
    with duckdb.connect(str(storage.db_path), read_only=True) as con:
        con.execute(f"COPY (SELECT * FROM forecasts LIMIT 10) TO '{kept}' (FORMAT parquet)")
    publish_snapshot(storage)
    _same_as_warehouse(storage)
    with duckdb.connect(str(storage.published_path), read_only=True) as con:
        (sql,), = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'forecasts'").fetchall()
    read = [p.name for p in db.forecast_files_dir(storage.published_path).iterdir() if str(p) in sql]
    assert len(read) == 1 and read[0].endswith(f".{FORECASTS_PER_RUN}.parquet"), read  # written, not the part
