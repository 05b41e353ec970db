"""Rows move once (issue 52, item 3): a run's records are appended to the lake's day partitions as files of their
own; a day written before is not rewritten unless it is stale (then it is rewritten whole, as before)."""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from gpucast.flows.settings import Settings
from gpucast.records.files import move
from gpucast.warehouse import load
from gpucast.warehouse.db import connect_writer


def add_records(con, run_id: str, first_arrival: int, days: list[str]) -> None:
    """One record per day, as a load would leave it (only the columns the lake's bookkeeping reads filled)."""
    con.execute(
        """INSERT INTO job_log_records (job_id, submitted_at, status, record_hash, arrival, source_file, source_row,
                                        ingest_run_id, loaded_at)
           SELECT ? || '-' || i, CAST(d AS TIMESTAMPTZ) + INTERVAL 1 HOUR, 'COMPLETED', md5(? || i), ? + i,
                  'f.jsonl', i, ?, ?
           FROM (SELECT unnest(?::DATE[]) AS d, generate_subscripts(?::DATE[], 1) AS i)""",
        [run_id, run_id, first_arrival, run_id, datetime.now(UTC), days, days])


def files(lake) -> dict[str, list[str]]:
    return {p.name: sorted(f.name for f in p.iterdir()) for p in sorted(lake.iterdir())}


def test_a_run_appends_its_records_and_leaves_the_days_written_before(tmp_path):
    storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path)}).storage
    lake = storage.lake_dir
    with connect_writer(storage) as con:
        add_records(con, "run-a", 0, ["2026-11-01", "2026-11-02"])
        assert load.refresh_lake(con, lake, "run-a") == ["2026-11-01", "2026-11-02"]
        first = lake / "submitted_date=2026-11-01" / files(lake)["submitted_date=2026-11-01"][0]
        written = first.stat().st_mtime_ns, first.stat().st_ino
        add_records(con, "run-b", 10, ["2026-11-01", "2026-11-03"])  # one day seen before, one new
        assert load.refresh_lake(con, lake, "run-b") == ["2026-11-01", "2026-11-03"]
        assert (first.stat().st_mtime_ns, first.stat().st_ino) == written  # not rewritten: rows move once
        assert files(lake)["submitted_date=2026-11-01"] == ["run-run-a-0.parquet", "run-run-b-0.parquet"]
        assert load.refresh_lake(con, lake, "run-b") == ["2026-11-01", "2026-11-03"]  # again: the same files
        assert files(lake)["submitted_date=2026-11-01"] == ["run-run-a-0.parquet", "run-run-b-0.parquet"]
        rows = pl.read_parquet(lake / "**" / "*.parquet", hive_partitioning=True)
        assert rows.height == 4 and sorted(rows["arrival"].to_list()) == [1, 2, 11, 12]
        assert load.stale_lake_days(con, lake) == []

        # a stale day (its partition deleted by hand) is rewritten whole by the next run, with every record
        for f in (lake / "submitted_date=2026-11-01").iterdir():
            f.unlink()
        (lake / "submitted_date=2026-11-01").rmdir()
        add_records(con, "run-c", 20, ["2026-11-02"])
        assert load.refresh_lake(con, lake, "run-c") == ["2026-11-01", "2026-11-02"]
        assert files(lake)["submitted_date=2026-11-01"] == ["part-0.parquet"]
        assert files(lake)["submitted_date=2026-11-02"] == ["run-run-a-0.parquet", "run-run-c-0.parquet"]
        assert pl.read_parquet(lake / "**" / "*.parquet").height == 5 and load.stale_lake_days(con, lake) == []


def test_the_lake_gets_the_files_the_warehouse_loaded_and_a_failed_load_leaves_it_untouched(tmp_path):
    """Rows move once (issue 52, decision 3): `load_run` writes the run's new records as the lake's day files and
    loads them; `refresh_lake` renames those very files into the lake (the same inode), not a second copy. A load
    that fails before its commit leaves the lake and the tables as they were, and its files in the run's staging."""
    import pytest

    from gpucast.records.outcomes import FileResult
    from gpucast.tasks.ingest import staging as steps
    from gpucast.warehouse import runs
    from gpucast.warehouse.housekeeping import install_failpoint_hook

    src = tmp_path / "a.jsonl"
    src.write_text("".join(
        f'{{"job_id": "j{i}", "submitted_at": "2026-11-0{1 + i % 2}T10:00:00Z", "status": "COMPLETED", '
        f'"model_type": "ResNet", "params_million": 25.6, "batch_size": 32, "runtime_hours": 1.5}}\n'
        for i in range(4)) + '{"job_id": "j0", "submitted_at": "2026-11-01T10:00:00Z", "status": "COMPLETED", '
        '"model_type": "ResNet", "params_million": 25.6, "batch_size": 32, "runtime_hours": 1.5}\n')  # a duplicate
    storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path / "home")}).storage
    staged = tmp_path / "staging"
    results: list[FileResult] = [steps.stage_file(src, staged, 0)]
    with connect_writer(storage) as con:
        for run_id in ("ingest-failed", "ingest-ok"):
            runs.start(con, runs.Run("ingest", run_id, datetime.now(UTC), staged), **load.start_columns(1))

        def crash(name: str) -> None:
            if name == "ingest:before-commit":
                raise RuntimeError("killed")

        install_failpoint_hook(crash)
        try:
            with pytest.raises(RuntimeError):
                load.load_run(con, "ingest-failed", staged, results)
        finally:
            install_failpoint_hook(None)
        assert con.execute("SELECT count(*) FROM job_log_records").fetchone()[0] == 0
        assert not storage.lake_dir.exists()  # the lake untouched: the run's files wait in its staging folder
        assert len(list((staged / load.RECORDS).glob("batch-*/submitted_date=*/*.parquet"))) == 2

        totals = load.load_run(con, "ingest-ok", staged, results)
        assert (totals.rows_loaded, totals.rows_duplicate) == (4, 1)
        written = {f.parent.name: f.stat().st_ino for f in (staged / load.RECORDS).glob("batch-*/*/*.parquet")}
        loaded = con.execute("SELECT * EXCLUDE (submitted_date) FROM read_parquet(?, hive_partitioning = true) "
                             "ORDER BY arrival", [str(staged / load.RECORDS / "**" / "*.parquet")]).fetchall()
        assert loaded == con.execute("SELECT * FROM job_log_records ORDER BY arrival").fetchall()  # what it loaded

        assert load.refresh_lake(con, storage.lake_dir, "ingest-ok", staged) == ["2026-11-01", "2026-11-02"]
        lake = {f.parent.name: f.stat().st_ino for f in storage.lake_dir.glob("*/*.parquet")}
        assert lake == written  # the same files, renamed in: no second copy
        assert [f.name for f in storage.lake_dir.glob("*/*.parquet")] == ["run-ingest-ok-0.parquet"] * 2
        assert load.stale_lake_days(con, storage.lake_dir) == []
        rows = pl.read_parquet(storage.lake_dir / "**" / "*.parquet", hive_partitioning=False)
        assert sorted(rows["job_id"].to_list()) == ["j0", "j1", "j2", "j3"]


def test_a_move_across_file_systems_flushes_the_copy_and_its_rename_before_the_source_goes(tmp_path, monkeypatch):
    """`records.files.move`'s fallback, as the lake's refresh calls it, when the staging folder and the lake are on two
    mounts (a real one here: /dev/shm is a tmpfs): the copy is flushed to disk, renamed in, the lake folder flushed (the
    rename), and only then the staging file removed (a review of session 6: the copy was not flushed before the source
    could go)."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system at /dev/shm")
    source = Path(tempfile.mkdtemp(dir=shm)) / "batch-00000-0.parquet"
    source.write_bytes(b"PAR1 records PAR1")
    lake, swap = tmp_path / "lake" / "submitted_date=2026-11-01", tmp_path / ".swap"
    lake.mkdir(parents=True)
    swap.mkdir()
    events: list[tuple[str, str, bool]] = []  # (what, path flushed, the source still there)
    fsync = os.fsync

    def spy(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"), source.exists()))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    try:
        move(source, lake / "run-r-0.parquet", copy_in=swap)
    finally:
        shutil.rmtree(source.parent, ignore_errors=True)
    assert (lake / "run-r-0.parquet").read_bytes() == b"PAR1 records PAR1" and not source.exists()
    assert list(swap.iterdir()) == []
    flushed = [path for _, path, _ in events]
    assert len(flushed) == 2 and flushed[0].startswith(str(swap / ".copy-")) and flushed[1] == str(lake)
    assert all(still_there for _, _, still_there in events)  # both flushes before the source was removed


def test_a_batch_over_few_days_is_written_a_file_a_day_as_the_partitioned_writer_writes_it(tmp_path, monkeypatch):
    """`_write_days`: a batch over at most DAY_FILES_MAX_DAYS days is written by one COPY a day (issue 52: DuckDB's
    partitioned writer cost 0.8 CPU-s more per 500,000 rows); a wider one by the partitioned writer. Both give the
    same files, names and rows, in arrival order, on a connection that had turned insertion order off."""
    from gpucast.tasks.ingest import staging as steps
    from gpucast.warehouse import runs

    src = tmp_path / "a.jsonl"
    src.write_text("".join(
        f'{{"job_id": "j{i}", "submitted_at": "2026-11-0{1 + i % 3}T1{i}:00:00Z", "status": "COMPLETED", '
        f'"model_type": "ResNet", "params_million": 25.6, "batch_size": 32, "runtime_hours": 1.5}}\n' for i in range(7)))
    staged = tmp_path / "staging"
    results = [steps.stage_file(src, staged, 0)]
    found = {}
    for widest in (load.DAY_FILES_MAX_DAYS, 0):  # one COPY a day; the partitioned writer
        monkeypatch.setattr(load, "DAY_FILES_MAX_DAYS", widest)
        storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path / f"home-{widest}")}).storage
        with connect_writer(storage) as con:
            runs.start(con, runs.Run("ingest", "ingest-a", datetime.now(UTC), staged), **load.start_columns(1))
            con.execute("SET preserve_insertion_order = false")  # the memory saving DuckDB's docs suggest
            load.load_run(con, "ingest-a", staged, results)
            # the merge's `row_number() OVER ()` numbers arrival in scan order only with insertion order kept
            assert con.execute("SELECT current_setting('preserve_insertion_order')").fetchone()[0] is True
            records = staged / load.RECORDS
            found[widest] = {str(f.relative_to(records)): pl.read_parquet(f).drop("loaded_at").rows()
                             for f in sorted(records.rglob("*.parquet"))}
    assert found[0] == found[load.DAY_FILES_MAX_DAYS]
    assert list(found[0]) == [f"batch-00000/submitted_date=2026-11-0{d}/batch-00000-0.parquet" for d in (1, 2, 3)]
    day_one = found[0]["batch-00000/submitted_date=2026-11-01/batch-00000-0.parquet"]
    assert [row[0] for row in day_one] == ["j0", "j3", "j6"]  # job ids in arrival order


def test_staged_files_are_listed_in_arrival_order_by_their_numbers_not_as_text(tmp_path):
    """The merge numbers arrival in the order `staged_batches` lists the files (`row_number() OVER ()`): by file, then
    chunk, as numbers. As text, file 100,000 (`valid-100000-...`) came before file 20,000."""
    for name in ("valid-20000-00001", "valid-100000-00000", "valid-20000-00000", "valid-00003-00010", "rejected-00001-00000"):
        pl.DataFrame({"n": [1]}).write_parquet(tmp_path / f"{name}.parquet")
    (listed,) = load.staged_batches(tmp_path, "valid")
    assert [Path(p).stem for p in listed] == ["valid-00003-00010", "valid-20000-00000", "valid-20000-00001",
                                              "valid-100000-00000"]


def test_the_history_probe_finds_the_records_loaded_before_at_both_ends_of_the_batchs_submitted_range(tmp_path):
    """The merge probes only the history submitted within its batch's first and last `submitted_at` (issue 52: a batch
    read the whole history). A record identical to one loaded before is still a duplicate at either end of that
    range, a new version of a job inside it is loaded, and the same file again is all duplicates."""
    from gpucast.tasks.ingest import staging as steps
    from gpucast.warehouse import runs

    def line(job: str, day: int, hour: int, runtime: float = 1.5) -> str:
        return (f'{{"job_id": "{job}", "submitted_at": "2026-11-0{day}T{hour:02d}:00:00Z", "status": "COMPLETED", '
                f'"model_type": "ResNet", "params_million": 25.6, "batch_size": 32, "runtime_hours": {runtime}}}\n')

    first = [line("j1", 1, 9), line("j2", 2, 8), line("j3", 2, 10), line("j4", 2, 14), line("j5", 2, 12), line("j6", 3, 9)]
    # the batch's earliest (j3) and latest (j4) rows were loaded before; j5 is a new version, j7 a new job
    second = [line("j3", 2, 10), line("j5", 2, 12, runtime=2.5), line("j7", 2, 11), line("j4", 2, 14)]
    storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path / "home")}).storage
    counts = []
    with connect_writer(storage) as con:
        for n, lines in enumerate((first, second, second)):
            src = tmp_path / f"{n}.jsonl"
            src.write_text("".join(lines))
            staged = tmp_path / f"staging-{n}"
            results = [steps.stage_file(src, staged, 0)]
            runs.start(con, runs.Run("ingest", f"ingest-{n}", datetime.now(UTC), staged), **load.start_columns(1))
            totals = load.load_run(con, f"ingest-{n}", staged, results)
            counts.append((totals.rows_loaded, totals.rows_duplicate))
        assert counts == [(6, 0), (2, 2), (0, 4)]
        assert con.execute("SELECT job_id, runtime_hours FROM job_logs WHERE job_id IN ('j4', 'j5') ORDER BY 1").fetchall() \
            == [("j4", 1.5), ("j5", 2.5)]
        assert con.execute("SELECT count(*) FROM job_log_records").fetchone()[0] == 8
