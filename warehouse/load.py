"""Commit one ingest run's staged files to DuckDB in one transaction, then refresh the Parquet lake.

Where every valid row goes:
* **duplicate**: a record identical (same job, same contract values) to one loaded before, or to an
  earlier row of this run; it changes nothing;
* **loaded**: appended to `job_log_records` (history) and, if it is now the job's latest record,
  it becomes that job's row in `job_logs` (a view: its key is written to `job_logs_latest`).
Rejected rows replace earlier rejections of the same file row; so ingesting a file twice leaves
every table but the run log unchanged.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq

from gpucast.expectations import contract as c
from gpucast.records.files import move
from gpucast.records.outcomes import GONE_STATUS, FileResult, LoadTotals
from gpucast.warehouse.db import sql_name, sql_string, transaction
from gpucast.warehouse.errors import LakeRefreshFailed
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.runs import finish
from gpucast.warehouse.schema import LATEST_KEYS, RECORD_HASH

CONTRACT_COLS = ", ".join(c.COLUMNS)
LATEST_FIRST = f"coalesce({c.UPDATED_AT}, {c.SUBMITTED_AT}) DESC, arrival DESC"


# Staged rows merged per step. A run is merged in batches of staged chunks, in arrival order, each
# against the history the batches before it left: the same result as one merge (duplicates and
# the latest record are judged against everything loaded before), but DuckDB's working set stays
# that of one batch however large the run. One 1M-row merge fit under the 1 GB memory limit;
# a 10M-row one ran out of memory.
MERGE_BATCH_ROWS = 500_000


def staged_batches(staging_dir: Path, kind: str, max_rows: int | None = None) -> list[list[str]]:
    """The run's staged Parquet files of one kind (`valid`, `rejected`) in arrival order (file,
    then chunk), grouped into batches of at most `max_rows` (default MERGE_BATCH_ROWS) rows; a
    larger chunk is a batch alone. Staging writes each file's rows sorted by (file index, row) and names its files
    so that this order is arrival order (`tasks/ingest/staging.py` `_split`, `_Staged.add`, `_write_batch`):
    `_merge_valid` numbers the rows in the order the files are listed."""
    max_rows = max_rows or MERGE_BATCH_ROWS
    batches: list[list[str]] = []
    rows = 0
    # valid-<file:05d>-<chunk:05d>.parquet, in number order (a run of 100,000 files or more has longer numbers)
    for path in sorted(staging_dir.glob(f"{kind}-*.parquet"), key=lambda p: [int(n) for n in p.stem.split("-")[1:]]):
        n = pq.read_metadata(path).num_rows
        if not batches or rows + n > max_rows:
            batches.append([])
            rows = 0
        batches[-1].append(str(path))
        rows += n
    return batches


def start_columns(files: int, mapping_path: str | None = None, mapping_sha256: str | None = None,
                  source: str | None = None) -> dict:
    """The columns an ingest run starts with (`runs.lifecycle(settings, "ingest", **start_columns(n))`);
    a run through a mapping file names it (its path and content hash); `source` names an importer
    (`slurm`) whose staged files the run ingests."""
    return dict(files=files, files_rejected=0, rows_read=0, rows_loaded=0, rows_rejected=0, rows_duplicate=0,
                source=source or ("mapping" if mapping_path else "files"), mapping_path=mapping_path,
                mapping_sha256=mapping_sha256)


RECORDS = "records"  # the run's records as written for the lake, under its staging folder (`load_run`)


def load_run(
    con: duckdb.DuckDBPyConnection, run_id: str, staging_dir: Path, results: list[FileResult]
) -> LoadTotals:
    """Merge the run's staged rows; record files, rejections and counts; return the run's counts.

    Rows move once (issue 52, decision 3): each batch's new records are written by DuckDB as the lake's Parquet files,
    partitioned by day, into `<staging_dir>/records/` (`RECORDS`), and the warehouse loads those files; after the
    commit `refresh_lake` moves them into the lake instead of copying the run's records out of the warehouse again.
    Until then they live in the run's staging folder: a run that fails leaves the lake as it was.

    Idempotent: when an earlier attempt of this run committed (a task retried after the commit),
    nothing is loaded again and the committed counts are returned.
    """
    if committed := committed_totals(con, run_id):
        return committed
    now = datetime.now(UTC)
    records = staging_dir / RECORDS
    shutil.rmtree(records, ignore_errors=True)  # an earlier attempt's, rolled back
    records.mkdir()
    columns = _record_columns(con)
    with transaction(con):
        per_file: Counter[str] = Counter()
        for i, files in enumerate(staged_batches(staging_dir, "valid")):
            per_file.update(_merge_valid(con, run_id, files, now, records / f"batch-{i:05d}", columns))
        for files in staged_batches(staging_dir, "rejected"):
            con.execute(
                """INSERT OR REPLACE INTO rejected_job_logs
                SELECT source_file, source_sha256, source_row, job_id, raw_record, reasons,
                       array_to_string(reasons, '; '), ?, ?
                FROM read_parquet(?)""",
                [run_id, now, files],
            )
        totals = _record_files(con, run_id, results, per_file, now)
        # `files`, set to those listed when the run began, becomes those read: a gone file is none (review 79 S3-4)
        finish(con, "ingest", run_id, "succeeded", files=sum(r.status != GONE_STATUS for r in results), **totals)
        failpoint("ingest:before-commit")
    return LoadTotals(**totals)


TOTAL_COLUMNS = ("files_rejected", "rows_read", "rows_loaded", "rows_rejected", "rows_duplicate", "message")


def committed_totals(con: duckdb.DuckDBPyConnection, run_id: str) -> LoadTotals | None:
    """The counts of `run_id` if its load committed, else None."""
    rows = con.execute(f"SELECT {', '.join(TOTAL_COLUMNS)} FROM ingest_runs WHERE run_id = ? AND status = 'succeeded'",
                       [run_id]).fetchall()
    return LoadTotals(**dict(zip(TOTAL_COLUMNS, rows[0], strict=True))) if rows else None


def _record_columns(con: duckdb.DuckDBPyConnection) -> str:
    """`job_log_records`' columns in its order, each cast to its type: the lake's files hold what the table holds."""
    rows = con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'job_log_records' "
                       "AND schema_name = 'main' AND database_name = current_database() ORDER BY column_index").fetchall()
    return ", ".join(f"CAST({sql_name(name)} AS {kind}) AS {sql_name(name)}" for name, kind in rows)


def _merge_valid(con: duckdb.DuckDBPyConnection, run_id: str, files: list[str], now: datetime, out: Path,
                 columns: str) -> dict:
    """Merge one batch of staged valid rows: write its new record versions as the lake's day files under `out`, load
    them, replace the affected jobs' latest rows; return loaded counts per source file."""
    base = con.execute("SELECT coalesce(max(arrival), 0) FROM job_log_records").fetchall()[0][0]
    # One pass over the staged files: hash, number in arrival order, drop copies within the batch (a record's first
    # copy is the one numbered lowest: its job and hash's least `seq`, an aggregate on those three columns; a window
    # partitioned by job and hash sorted every column of every row, 16% more CPU for the statement at 200,000
    # rows) and records loaded before. Arrival order is (file_index, source_row), the order staging writes its files
    # in (`staged_batches`: files by name, rows sorted within each): `row_number() OVER ()` numbers the rows as
    # `read_parquet` yields them, in the list's order (DuckDB keeps insertion order), without the sort of every
    # column an `ORDER BY file_index, source_row` window cost (0.8 CPU-s per 500,000 rows, issue 52). The batch's new
    # records are kept in a temporary table, written from it as the lake's day files (`_write_days`, `columns`: the
    # table's, typed as it types them), and the table loads those files: the rows are written once, not into the
    # table and then out of it for the lake. That numbering holds only while DuckDB keeps insertion order: its default,
    # which its docs suggest turning off to save memory on large loads; set here, so a connection (or a future
    # default) that turned it off cannot renumber arrival silently (review 58 N1).
    # The probe of the history reads only the records submitted within the batch's first and last `submitted_at`
    # (`bounds`, bound values): a record loaded before with the batch's job and hash has the same contract values, so the
    # same `submitted_at` (NOT NULL in both), and the range changes no answer; but DuckDB skips the history's row groups
    # outside it by their zone maps, so a batch no longer reads and probes the whole history. Matching on `job_id` and
    # `record_hash` alone skipped nothing (ids share their first bytes, hashes are random; DuckDB pushes no filter into
    # the history's side of this anti join by itself): at 10M rows, 20 batches probed ~95M history rows (issue 52: the
    # cost per row that grew with the file).
    bounds = con.execute("SELECT min(submitted_at), max(submitted_at) FROM read_parquet(?)", [files]).fetchall()[0]
    con.execute("SET preserve_insertion_order = true")
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE fresh_records AS
            WITH staged AS (
                SELECT {CONTRACT_COLS}, {RECORD_HASH} AS record_hash, source_file, source_row,
                       row_number() OVER () AS seq
                FROM read_parquet(?)
            )
            SELECT o.* EXCLUDE (seq), ? + o.seq AS arrival, ? AS ingest_run_id, ? AS loaded_at
            FROM staged o
            WHERE o.seq = (SELECT min(c.seq) FROM staged c WHERE c.job_id = o.job_id AND c.record_hash = o.record_hash)
              AND NOT EXISTS (SELECT 1 FROM job_log_records r
                              WHERE r.job_id = o.job_id AND r.record_hash = o.record_hash
                                AND r.submitted_at BETWEEN ? AND ?)""",
        [files, base, run_id, now, *bounds],
    )
    _write_days(con, out, columns)
    con.execute("DROP TABLE fresh_records")  # (a failure before this rolls the transaction back, the table with it)
    written = sorted(str(f) for f in out.glob("submitted_date=*/*.parquet"))
    if not written:
        return {}
    con.execute("INSERT INTO job_log_records BY NAME SELECT * FROM read_parquet(?, hive_partitioning = false)",
                [written])
    # this batch's records, as loaded (arrival numbers above `base` are this batch's: the table's zone maps skip the rest)
    fresh = f"(SELECT * FROM job_log_records WHERE arrival > {int(base)})"
    # A job's latest record among all its versions ever loaded. Invariant: `job_logs_latest` holds the key of the
    # latest of the versions loaded before this batch (only this function writes it), so only a fresh version can
    # replace it, and a fresh one wins a tie (it arrived later). The jobs' full history is not re-read for this (the
    # de-duplication above still probes it by job and hash). Only keys are written: `job_logs` is a view of the
    # records they name (schema.sql); writing each latest record's every column again into a table of its own cost
    # 2.2-2.4 CPU-s a million jobs, its keys 0.24-0.29 (issue 52, session 15).
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE latest AS
        SELECT job_id, arrival, coalesce(updated_at, submitted_at) AS latest_at FROM {fresh} f
        WHERE NOT EXISTS (SELECT 1 FROM {LATEST_KEYS} j WHERE j.job_id = f.job_id
                          AND j.latest_at > coalesce(f.updated_at, f.submitted_at))
        QUALIFY row_number() OVER (PARTITION BY job_id ORDER BY {LATEST_FIRST}) = 1"""
    )
    con.execute(f"DELETE FROM {LATEST_KEYS} WHERE job_id IN (SELECT job_id FROM latest)")
    con.execute(f"INSERT INTO {LATEST_KEYS} SELECT job_id, arrival, latest_at FROM latest")
    loaded = dict(con.execute(f"SELECT source_file, count(*) FROM {fresh} f GROUP BY ALL").fetchall())
    return loaded


# A batch of records over at most this many days is written one file a day, each by a COPY of its own: DuckDB's
# partitioned writer (PARTITION_BY) cost 1.8 CPU-s for one day of 500,000 records where a plain COPY of the same
# rows cost 1.0 (issue 52). Each day's COPY scans the batch once, so a batch over many days (a backfill) is
# written by the partitioned writer, as before.
DAY_FILES_MAX_DAYS = 4
SUBMITTED_DAY = "CAST(submitted_at AS DATE)"  # a record's lake partition (`submitted_date`)


def _write_days(con: duckdb.DuckDBPyConnection, out: Path, columns: str) -> None:
    """`fresh_records` (a batch's new records) as the lake's day files: `<out>/submitted_date=<day>/<out.name>-0.parquet`
    in arrival order, the names and layout DuckDB's partitioned writer gives (`refresh_lake` moves them in)."""
    days = [d for (d,) in con.execute(f"SELECT DISTINCT {SUBMITTED_DAY} FROM fresh_records ORDER BY 1").fetchall()]
    if len(days) > DAY_FILES_MAX_DAYS:
        con.execute(
            f"""COPY (SELECT {columns}, {SUBMITTED_DAY} AS submitted_date FROM fresh_records ORDER BY arrival)
            TO {sql_string(out)} (FORMAT parquet, PARTITION_BY (submitted_date),
                                  FILENAME_PATTERN {sql_string(out.name + "-{i}")})""")
        return
    for d in days:
        folder = out / f"submitted_date={d.isoformat()}"
        folder.mkdir(parents=True)
        con.execute(f"""COPY (SELECT {columns} FROM fresh_records WHERE {SUBMITTED_DAY} = ? ORDER BY arrival)
                        TO {sql_string(folder / f"{out.name}-0.parquet")} (FORMAT parquet)""", [d])


def _record_files(con, run_id: str, results: list[FileResult], loaded: dict, now: datetime) -> dict:
    """One `ingest_files` row per file (and `rejected_files`, `validation_results` rows), inserted in bulk:
    a row at a time cost ~15 ms per file, minutes for a folder of thousands of one-row files."""
    totals = dict(files_rejected=0, rows_read=0, rows_loaded=0, rows_rejected=0, rows_duplicate=0)
    notes = []
    files, rejected, outcomes = [], [], []
    for r in results:
        n_loaded = int(loaded.get(r.path, 0))
        n_dup = r.rows_valid - n_loaded
        files.append((run_id, r.path, r.sha256, r.fmt or None, r.rows_read, n_loaded, r.rows_rejected, n_dup,
                      "loaded" if r.status == "staged" else r.status, r.reason, r.ignored_columns))
        if r.status == "rejected":
            totals["files_rejected"] += 1
            notes.append(f"{Path(r.path).name}: {r.reason}")
            rejected.append((r.path, r.sha256, r.reason, run_id, now))
        if r.status == GONE_STATUS:  # deleted after the run listed it (tasks/ingest/staging.py GONE): no rows, said
            notes.append(f"{Path(r.path).name}: {r.reason}")
        if r.ignored_columns:
            notes.append(f"{Path(r.path).name}: ignored unknown column(s) {', '.join(r.ignored_columns)}")
        outcomes += [(run_id, r.path, o["suite"], o["expectation"], o["column"], o["rule"], o["success"],
                      o["unexpected_count"], o["error"]) for o in r.outcomes]
        totals["rows_read"] += r.rows_read
        totals["rows_loaded"] += n_loaded
        totals["rows_rejected"] += r.rows_rejected
        totals["rows_duplicate"] += n_dup
    _insert(con, FILE_ROWS, files)
    _insert(con, REJECTED_FILE_ROWS, rejected)
    _insert(con, OUTCOME_ROWS, outcomes)
    assert totals["rows_read"] == totals["rows_loaded"] + totals["rows_rejected"] + totals["rows_duplicate"]
    totals["message"] = "; ".join(notes) or None
    return totals


# Bulk inserts of the per-file rows: a registered Polars frame typed like the target table, one statement. Not an Arrow
# table built by PyArrow: `pa.array` and `pa.Table.from_pylist` import pandas (0.35-0.6 s of CPU, ~1 s of wall at load
# 6, the command's second largest import after Prefect), which nothing else in `gpucast ingest` loads (issue 52,
# session 18: `tests/warehouse/test_record_files.py`).
_S, _I = pl.String, pl.Int64
FILE_ROWS = ("INSERT OR REPLACE INTO ingest_files SELECT * FROM _rows",
             {f"c{i}": t for i, t in enumerate([_S, _S, _S, _S, _I, _I, _I, _I, _S, _S, pl.List(_S)])})
REJECTED_FILE_ROWS = ("INSERT OR REPLACE INTO rejected_files SELECT * FROM _rows",
                      {f"c{i}": t for i, t in enumerate([_S, _S, _S, _S, pl.Datetime("us", "UTC")])})
OUTCOME_ROWS = ("INSERT INTO validation_results SELECT * FROM _rows",
                {f"c{i}": t for i, t in enumerate([_S, _S, _S, _S, _S, _S, pl.Boolean, _I, _S])})


def _insert(con: duckdb.DuckDBPyConnection, target: tuple[str, dict], rows: list[tuple]) -> None:
    """Insert every row at once (`target`: one of the statements above and its columns' Polars types)."""
    if not rows:
        return
    statement, schema = target
    # by columns, strictly: a value of another type raises here (a row-wise build would coerce it silently)
    columns = {name: [row[i] for row in rows] for i, name in enumerate(schema)}
    con.register("_rows", pl.DataFrame(columns, schema=schema, strict=True))
    try:
        con.execute(statement)
    finally:
        con.unregister("_rows")


# Per day: the records the warehouse holds, to compare with what the lake was last written with. Its two bound
# values are one run id, twice: NULL for all the records, else all but that run's (what the lake held before that
# run's refresh).
DAY_STATS = """
SELECT CAST(submitted_at AS DATE) AS day, count(*) AS records, max(arrival) AS max_arrival
FROM job_log_records WHERE CAST(? AS VARCHAR) IS NULL OR ingest_run_id <> CAST(? AS VARCHAR) GROUP BY ALL
"""


def stale_lake_days(con: duckdb.DuckDBPyConnection, lake_dir: Path, but_run: str | None = None) -> list[str]:
    """Days whose lake partition is missing, or was written from other records than the warehouse
    holds now (a refresh that failed after its load committed, a partition deleted by hand). `but_run`: judged
    without that run's records (the lake before its refresh appends them)."""
    rows = con.execute(f"""
        WITH now AS ({DAY_STATS})
        SELECT CAST(n.day AS VARCHAR) FROM now n LEFT JOIN lake_partitions p ON p.submitted_date = n.day
        WHERE p.submitted_date IS NULL OR p.records <> n.records OR p.max_arrival <> n.max_arrival
        ORDER BY 1""", [but_run, but_run]).fetchall()
    written = con.execute("SELECT CAST(submitted_date AS VARCHAR) FROM lake_partitions ORDER BY 1").fetchall()
    missing = [d for (d,) in written if not (lake_dir / f"submitted_date={d}").is_dir()]
    return sorted({d for (d,) in rows} | set(missing))


def refresh_lake(con: duckdb.DuckDBPyConnection, lake_dir: Path, run_id: str, staging_dir: Path | None = None) -> list[str]:
    """Write `run_id`'s records into the lake partitions (submitted_date=YYYY-MM-DD), and rewrite any stale
    partition whole (`stale_lake_days`); return the days written. A failure raises `LakeRefreshFailed`.

    Rows move once (issue 52, item 3): a day whose partition is up to date but for this run gets one more file,
    `run-<run_id>-<i>.parquet`, holding only this run's records; it used to be rewritten whole, every record of
    every day the run touched (a backfill of a year rewrote the year at each run). Those files are the ones
    `load_run` wrote and the warehouse loaded (`<staging_dir>/records/batch-<b>/submitted_date=<day>/...`), renamed
    in (numbered per day in batch order), not copied out of the warehouse again (issue 52, decision 3); without them
    (no `staging_dir`, or a day that holds some of this run's files already: an earlier attempt) the day's records
    of the run are copied out of the warehouse. A stale day is written whole, as before. Files are
    written into a swap folder beside the lake (`<lake>/../.swap`, outside every glob of the lake), then renamed in,
    so a reader sees a partition before or after; re-running writes the same names (idempotent: this run's earlier
    files are replaced). Leftovers of a killed refresh in the swap folder are removed first (the caller holds the
    writer lock, so none is in use).
    """
    try:
        return _refresh_lake(con, lake_dir, run_id, staging_dir)
    except (OSError, duckdb.Error) as exc:
        raise LakeRefreshFailed(f"{type(exc).__name__}: {exc}") from exc


def _refresh_lake(con: duckdb.DuckDBPyConnection, lake_dir: Path, run_id: str, staging_dir: Path | None) -> list[str]:
    swap = lake_dir.parent / ".swap"
    shutil.rmtree(swap, ignore_errors=True)
    for leftover in lake_dir.glob(".tmp-*"):  # where swap folders lived before they moved out
        shutil.rmtree(leftover, ignore_errors=True)
    for leftover in lake_dir.glob(".old-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    ours = {str(d) for (d,) in con.execute(
        "SELECT DISTINCT CAST(submitted_at AS DATE) FROM job_log_records WHERE ingest_run_id = ? ORDER BY 1",
        [run_id]).fetchall()}
    # stale with and without this run's records (a retried refresh finds them appended already): rewritten whole
    whole = set(stale_lake_days(con, lake_dir, but_run=run_id)) & set(stale_lake_days(con, lake_dir))
    appended = sorted(ours - whole)
    days = sorted(ours | whole)
    if not days:
        return []
    lake_dir.mkdir(parents=True, exist_ok=True)
    swap.mkdir(parents=True)
    if whole:
        tmp = swap / f"new-{uuid.uuid4().hex}"
        _copy_days(con, tmp, None, sorted(whole), "part-{i}")
        for part in sorted(tmp.iterdir()):
            target = lake_dir / part.name
            old = swap / f"old-{uuid.uuid4().hex}"
            if target.exists():
                os.replace(target, old)
            os.replace(part, target)
            shutil.rmtree(old, ignore_errors=True)
    prefix = f"run-{_file_safe(run_id)}-"
    # a day that holds files of this run already (an earlier attempt moved some in) is copied out of the warehouse
    loaded = {day: files for day, files in _loaded_files(staging_dir / RECORDS if staging_dir else None, appended).items()
              if not any((lake_dir / f"submitted_date={day}").glob(f"{prefix}*.parquet"))}
    if copied := [d for d in appended if d not in loaded]:
        tmp = swap / f"run-{uuid.uuid4().hex}"
        _copy_days(con, tmp, run_id, copied, prefix + "{i}")
        for part in sorted(tmp.iterdir()):
            target = lake_dir / part.name
            target.mkdir(exist_ok=True)
            for earlier in target.glob(f"{prefix}*.parquet"):  # this run's files of an earlier attempt
                earlier.unlink()
            for file in sorted(part.iterdir()):
                os.replace(file, target / file.name)
    for day, files in loaded.items():
        target = lake_dir / f"submitted_date={day}"
        target.mkdir(exist_ok=True)
        for i, file in enumerate(files):  # batch-<b>/submitted_date=<day>/batch-<b>-<j>.parquet, in order
            move(file, target / f"{prefix}{i}.parquet", copy_in=swap)  # (swept with `swap`)
    shutil.rmtree(swap, ignore_errors=True)
    con.execute(f"""
        INSERT OR REPLACE INTO lake_partitions
        SELECT day, records, max_arrival, now() FROM ({DAY_STATS})
        WHERE day IN (SELECT unnest(?::DATE[]))""", [None, None, days])
    return days


def _loaded_files(records: Path | None, days: list[str]) -> dict[str, list[Path]]:
    """The day files `load_run` wrote and loaded for `days`, per day (only days that have them: a retried refresh
    finds those it moved gone, and copies them out of the warehouse again)."""
    if records is None or not records.is_dir():
        return {}
    found: dict[str, list[Path]] = {}
    for day in days:
        files = sorted(records.glob(f"batch-*/submitted_date={day}/*.parquet"))
        if files:
            found[day] = files
    return found


def _copy_days(con: duckdb.DuckDBPyConnection, folder: Path, run_id: str | None, days: list[str], pattern: str) -> None:
    """The records of `days` (all of them, or only run `run_id`'s), written by DuckDB as Parquet partitioned by day
    under `folder`, files named by `pattern`."""
    con.execute(
        f"""COPY (
            SELECT *, CAST(submitted_at AS DATE) AS submitted_date FROM job_log_records
            WHERE (CAST(? AS VARCHAR) IS NULL OR ingest_run_id = CAST(? AS VARCHAR))
              AND CAST(submitted_at AS DATE) IN (SELECT unnest(?::DATE[]))
            ORDER BY arrival
        ) TO {sql_string(folder)} (FORMAT parquet, PARTITION_BY (submitted_date), FILENAME_PATTERN {sql_string(pattern)})""",
        [run_id, run_id, days],
    )


def _file_safe(run_id: str) -> str:
    """A run id as a file name part (ids are `ingest-<time>Z-<hex>`; anything else becomes `_`)."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in run_id)
