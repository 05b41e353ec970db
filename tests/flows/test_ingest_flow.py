"""The real `ingest-job-logs` Prefect flow into a real DuckDB file and Parquet lake."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.records.results import IngestResult
from gpucast.tasks.simulate import SimConfig, write_logs
from tests.conftest import write
from tests.sample_jobs import jsonl, record
from tests.tasks.ingest.test_readers import SEED_HEADER, SEED_ROWS

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

TABLES = ("job_logs", "job_log_records", "rejected_job_logs", "rejected_files")


def ingest(*paths) -> IngestResult:
    """The flow without its closing publish: these tests read the warehouse and the lake, never the planners' copy,
    and the publish was ~0.7 s of each of the module's ~35 small ingests. (The small-batches test keeps it; the
    publish after an ingest is read back in tests/reliability/test_hostile_inputs.py.)"""
    from gpucast.flows.ingest import ingest_job_logs

    return ingest_job_logs(paths=[str(p) for p in paths] if paths else None, publish=False)


def query(home: Path, sql: str, params=None) -> list[tuple]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def older_warehouse(home: Path, version: int) -> list[tuple]:
    """Turn the warehouse under `home` into one an older gpucast made under contract `version`: no record of its DDL,
    the columns later versions added dropped, and every record, in both tables and the lake's files, hashed as gpucast
    hashed them until session 13 (frozen here: md5 of `to_json(struct_pack(...))` of the v1 columns, then of each
    later version's columns when one of them is set), and `job_logs` a table of the latest rows, as it was until session
    15 (a view over `job_logs_latest` since). Returns `job_logs`' (job_id, record_hash), ordered by job."""
    block = lambda names: f"CAST(to_json(struct_pack({', '.join(names)})) AS VARCHAR)"  # noqa: E731
    later = "".join(f" || CASE WHEN {' OR '.join(f'{n} IS NOT NULL' for n in c.ADDED_BY_VERSION[v])} THEN "
                    f"{block(c.ADDED_BY_VERSION[v])} ELSE '' END" for v in range(2, version + 1))
    old_hash = f"md5({block(c.V1_COLUMNS)}{later})"
    with duckdb.connect(str(home / "warehouse.duckdb")) as con:
        for f in (home / "lake" / "job_logs").glob("*/*.parquet"):  # the lake's files hold the hashes too
            con.execute(f"COPY (SELECT * REPLACE ({old_hash} AS record_hash) FROM read_parquet(?, hive_partitioning = "
                        f"false)) TO '{f}.old' (FORMAT parquet)", [str(f)])
            Path(f"{f}.old").replace(f)
        con.execute("DROP TABLE schema_applied")
        con.execute("CREATE TABLE job_logs__table AS SELECT * FROM job_logs")
        con.execute("DROP VIEW job_logs")
        con.execute("DROP TABLE job_logs_latest")
        con.execute("ALTER TABLE job_logs__table RENAME TO job_logs")
        for table in ("job_log_records", "job_logs"):
            con.execute(f"UPDATE {table} SET record_hash = {old_hash}")
            for v in range(version + 1, c.CONTRACT_VERSION + 1):
                for name in c.ADDED_BY_VERSION[v]:
                    con.execute(f"ALTER TABLE {table} DROP COLUMN {name}")
        return con.execute("SELECT job_id, record_hash FROM job_logs ORDER BY job_id").fetchall()


def hashed_again(home: Path, stored: list[tuple]) -> None:
    """After the upgrade of an `older_warehouse`: every record of both tables is hashed as this gpucast hashes
    (`warehouse/schema.py` `rehash_stored`), no `job_logs` row keeps its `stored` hash, and the lake's files hold the
    warehouse's records and hashes (its days written again)."""
    from gpucast.warehouse.schema import RECORD_HASH

    for table in ("job_log_records", "job_logs"):
        assert query(home, f"SELECT count(*) FROM {table} WHERE record_hash <> {RECORD_HASH}") == [(0,)], table
    now = dict(query(home, "SELECT job_id, record_hash FROM job_logs"))
    assert all(now[j] != h for j, h in stored)
    lake = str(home / "lake" / "job_logs" / "**" / "*.parquet")
    assert query(home, "SELECT arrival, record_hash FROM read_parquet(?) ORDER BY arrival", [lake]) == query(
        home, "SELECT arrival, record_hash FROM job_log_records ORDER BY arrival")


def snapshot(home: Path) -> dict[str, pl.DataFrame]:
    """Every table but the run logs, ordered, without load timestamps and run ids."""
    out = {}
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        for t in TABLES:
            df = con.sql(f"SELECT * FROM {t}").pl()
            df = df.drop([col for col in df.columns if col in ("loaded_at", "rejected_at", "ingest_run_id")])
            out[t] = df.sort(df.columns)
    lake = pl.read_parquet(home / "lake" / "job_logs" / "**" / "*.parquet", hive_partitioning=True)
    out["lake"] = lake.drop("loaded_at", "ingest_run_id").sort("arrival")
    return out


def test_simulated_dirty_logs_end_to_end(home, tmp_path):
    files = write_logs(tmp_path / "logs", SimConfig(days=2, jobs_per_day=300, dirty_fraction=0.05, seed=3))
    summary = ingest(tmp_path / "logs")

    assert summary.files == 2 and summary.files_rejected == 0
    assert summary.rows_read == summary.rows_loaded + summary.rows_rejected + summary.rows_duplicate
    assert summary.rows_rejected > 0 and summary.rows_duplicate > 0
    lines = sum(1 for f in files for line in f.read_text().splitlines() if line.strip())
    assert summary.rows_read == lines

    # per file, and in the tables themselves, the counts reconcile
    for read, loaded, rejected, dup in query(home, "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate FROM ingest_files"):
        assert read == loaded + rejected + dup
    assert query(home, "SELECT count(*) FROM job_log_records")[0][0] == summary.rows_loaded
    assert query(home, "SELECT count(*) FROM rejected_job_logs")[0][0] == summary.rows_rejected
    assert query(home, "SELECT count(*) = count(DISTINCT job_id) FROM job_logs")[0][0]
    reasons = query(home, "SELECT reason_text FROM rejected_job_logs")
    assert all(r and len(r) > 10 for (r,) in reasons)

    run = query(home, "SELECT status, rows_read, files FROM ingest_runs WHERE run_id = ?", [summary.run_id])
    assert run == [("succeeded", summary.rows_read, 2)]
    lake = pl.read_parquet(home / "lake" / "job_logs" / "**" / "*.parquet", hive_partitioning=True)
    assert lake.height == summary.rows_loaded
    assert sorted(p.name for p in (home / "lake" / "job_logs").iterdir()) == [
        "submitted_date=2026-11-01", "submitted_date=2026-11-02"]


def test_ingesting_the_same_files_twice_changes_nothing(home, tmp_path):
    write_logs(tmp_path / "logs", SimConfig(days=2, jobs_per_day=150, dirty_fraction=0.05, seed=4))
    first = ingest(tmp_path / "logs")
    before = snapshot(home)
    second = ingest(tmp_path / "logs")
    after = snapshot(home)
    assert second.rows_loaded == 0
    assert second.rows_duplicate == first.rows_loaded + first.rows_duplicate
    assert second.rows_rejected == first.rows_rejected
    for name in before:
        assert before[name].equals(after[name]), name


def test_latest_record_wins_by_updated_at_then_arrival(home, tmp_path):
    running = record(job_id="j", status="RUNNING", updated_at="2026-11-01T11:00:00Z",
                     gpu_demand_gflops=None, peak_gpu_mem_gb=None, runtime_hours=None)
    done = record(job_id="j", status="COMPLETED", updated_at="2026-11-01T12:00:00Z")
    ingest(write(tmp_path / "a.jsonl", jsonl(done)))
    # an older record arriving later does not overwrite the newer state
    ingest(write(tmp_path / "b.jsonl", jsonl(running)))
    assert query(home, "SELECT status FROM job_logs WHERE job_id = 'j'") == [("COMPLETED",)]
    assert query(home, "SELECT count(*) FROM job_log_records WHERE job_id = 'j'") == [(2,)]
    # same updated_at: the later arrival wins
    ingest(write(tmp_path / "c.jsonl", jsonl(record(job_id="j", updated_at="2026-11-01T12:00:00Z", team="vision"))))
    assert query(home, "SELECT team FROM job_logs WHERE job_id = 'j'") == [("vision",)]


def test_job_logs_is_a_view_holding_each_jobs_latest_record_of_the_history_every_column(home, tmp_path):
    """Issue 52, session 15: `job_logs` is a view over `job_log_records` by each job's latest record's key
    (`job_logs_latest`), no longer a table holding those rows again. It holds what the table held: per job, its latest
    record among every version loaded, by updated_at (else submitted_at), then arrival; every column in the table's
    order. Updates within a run, across runs, late older versions and ties all end there."""
    from gpucast.warehouse.load import LATEST_FIRST

    logs = tmp_path / "logs"
    write_logs(logs, SimConfig(days=2, jobs_per_day=150, dirty_fraction=0.02, update_fraction=0.4, seed=11))
    ingest(logs)
    tie = record(job_id="tie", updated_at="2026-11-01T12:00:00Z", team="first")
    ingest(write(tmp_path / "b.jsonl", jsonl(
        record(job_id="late", status="COMPLETED", updated_at="2026-11-01T12:00:00Z"), tie,
        record(job_id="late", status="RUNNING", updated_at="2026-11-01T11:00:00Z",  # older, arriving later
               gpu_demand_gflops=None, peak_gpu_mem_gb=None, runtime_hours=None))))
    ingest(write(tmp_path / "c.jsonl", jsonl({**tie, "team": "second"})))  # the same updated_at: the later arrival
    assert query(home, "SELECT table_type FROM information_schema.tables WHERE table_name = 'job_logs'") == [("VIEW",)]
    latest = query(home, f"SELECT * FROM job_log_records QUALIFY row_number() OVER (PARTITION BY job_id "
                         f"ORDER BY {LATEST_FIRST}) = 1 ORDER BY job_id")
    assert query(home, "SELECT * FROM job_logs ORDER BY job_id") == latest and len(latest) > 250
    assert query(home, "SELECT job_id, status, team FROM job_logs WHERE job_id IN ('late', 'tie') ORDER BY 1") == [
        ("late", "COMPLETED", "nlp"), ("tie", "COMPLETED", "second")]
    assert [n for (n,) in query(home, "SELECT column_name FROM duckdb_columns() WHERE table_name = 'job_logs' "
                                      "ORDER BY column_index")] == [*c.COLUMNS, "record_hash", "arrival", "source_file",
                                                                    "source_row", "ingest_run_id", "loaded_at"]


def test_duplicates_within_and_across_files(home, tmp_path):
    a = write(tmp_path / "a.jsonl", jsonl(record(job_id="x"), record(job_id="x"), record(job_id="y")))
    b = write(tmp_path / "b.csv", "job_id,submitted_at,status,model_type\ny,2026-11-01,PENDING,CNN\n")
    c_ = write(tmp_path / "c.jsonl", jsonl(record(job_id="y")))
    s = ingest(a, b, c_)
    assert (s.rows_read, s.rows_loaded, s.rows_duplicate, s.rows_rejected) == (5, 3, 2, 0)


def test_bad_files_are_quarantined_and_good_rows_still_land(home, tmp_path):
    good = write(tmp_path / "good.jsonl", jsonl(record(job_id="ok-1"), record(job_id="bad-1", batch_size=-4)))
    latin1 = write(tmp_path / "latin1.csv", "job_id,submitted_at,status,model_type\nx,2026-11-01,PENDING,Caf\xe9\n".encode("latin-1"))
    nocols = write(tmp_path / "nocols.csv", "id,when\n1,2\n")
    empty = write(tmp_path / "empty.jsonl", "")
    s = ingest(good, latin1, nocols, empty)
    assert (s.rows_loaded, s.rows_rejected, s.files_rejected) == (1, 1, 2)
    rejected = dict(query(home, "SELECT source_file, reason FROM rejected_files"))
    assert "not valid UTF-8 at line 2" in rejected[str(latin1)]
    assert "missing required column(s) submitted_at, status in the header" in rejected[str(nocols)]  # v4: model_type optional
    statuses = dict(query(home, "SELECT source_file, status FROM ingest_files"))
    assert statuses[str(empty)] == "empty"
    (row,) = query(home, "SELECT source_row, job_id, reason_text, raw_record FROM rejected_job_logs")
    assert row[0] == 2 and row[1] == "bad-1" and row[2].startswith("batch_size must be > 0")
    assert json.loads(row[3])["batch_size"] == -4


def test_inbox_files_are_picked_up_once_and_archived(home):
    (original,) = write_logs(home / "inbox" / "day1", SimConfig(days=1, jobs_per_day=50, seed=5))
    content = original.read_bytes()
    first = ingest()
    assert first.files == 1 and first.rows_loaded > 0
    today = f"{datetime.now(UTC):%Y-%m-%d}"
    archived = home / "inbox" / "archive" / today / "day1" / original.name
    assert archived.read_bytes() == content and not original.exists()  # moved, out of the next run's scan
    assert ingest().files == 0

    # the same content dropped again under another name is recognised by its hash: archived, not loaded
    again = home / "inbox" / "resent.jsonl"
    again.write_bytes(content)
    assert ingest().files == 0
    assert not again.exists() and (home / "inbox" / "archive" / today / "resent.jsonl").exists()
    assert query(home, "SELECT count(*) FROM ingest_runs WHERE status = 'succeeded'")[0][0] == 3


def test_seed_table_imports_as_completed_jobs(home, tmp_path):
    seed = write(tmp_path / "seed table.csv", SEED_HEADER + SEED_ROWS)
    ingest(seed)
    rows = query(home, f"SELECT status, queue, {c.GPU_DEMAND_GFLOPS}, {c.REGULARIZATION} FROM job_logs ORDER BY 3")
    assert rows == [("COMPLETED", "seed", 5400.0, True), ("COMPLETED", "seed", 88000.0, False)]
    ids = {r[0] for r in query(home, "SELECT job_id FROM job_logs")}
    ingest(seed)
    assert {r[0] for r in query(home, "SELECT job_id FROM job_logs")} == ids


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_dirty_csv_and_parquet_reconcile(home, tmp_path, fmt):
    write_logs(tmp_path / "logs", SimConfig(days=1, jobs_per_day=400, dirty_fraction=0.08, seed=9, fmt=fmt))
    s = ingest(tmp_path / "logs")
    assert s.rows_rejected > 0
    assert s.rows_read == s.rows_loaded + s.rows_rejected + s.rows_duplicate
    assert query(home, "SELECT count(*) FROM rejected_job_logs WHERE reason_text = ''") == [(0,)]


def test_merging_in_small_batches_equals_one_merge(home, tmp_path, monkeypatch):
    """The merge runs batch by batch (bounded memory); duplicates across batches, updates that
    arrive in a later batch and older records arriving late must end as in a single merge."""
    from gpucast.flows.ingest import ingest_job_logs
    from gpucast.warehouse import load

    logs = tmp_path / "logs"
    write_logs(logs, SimConfig(days=2, jobs_per_day=120, dirty_fraction=0.05, update_fraction=0.3, seed=8))
    # the same records again, in a later file, and one job updated out of order
    write(logs / "zz-replay.jsonl", (logs / sorted(p.name for p in logs.iterdir())[0]).read_text()
          + jsonl(record(job_id="late", status="COMPLETED", updated_at="2026-11-01T12:00:00Z"),
                  record(job_id="late", status="RUNNING", updated_at="2026-11-01T11:00:00Z")))

    def run(name: str, batch_rows: int) -> tuple[IngestResult, dict[str, pl.DataFrame]]:
        monkeypatch.setenv("GPUCAST_HOME", str(tmp_path / name))
        monkeypatch.setattr(load, "MERGE_BATCH_ROWS", batch_rows)
        summary = ingest_job_logs(paths=[str(logs)], chunk_rows=25)  # many staged chunks
        tables = snapshot(tmp_path / name)
        # arrival numbers may differ between the two (gaps); their order must not
        for t in ("job_log_records", "lake", "job_logs"):
            tables[t] = tables[t].sort("arrival").with_columns(pl.col("arrival").rank().alias("arrival"))
        return summary, tables

    one, batched = run("one", 1_000_000), run("batched", 30)
    assert {k: getattr(one[0], k) for k in ("rows_read", "rows_loaded", "rows_rejected", "rows_duplicate")} == {
        k: getattr(batched[0], k) for k in ("rows_read", "rows_loaded", "rows_rejected", "rows_duplicate")}
    assert one[0].rows_duplicate > 120  # the replayed file
    for name, table in one[1].items():
        assert table.equals(batched[1][name]), name
    assert query(tmp_path / "batched", "SELECT status FROM job_logs WHERE job_id = 'late'") == [("COMPLETED",)]


def test_two_simulations_with_different_seeds_ingest_as_the_sum_of_their_jobs(home, tmp_path):
    for seed in (1, 2):
        write_logs(tmp_path / f"s{seed}", SimConfig(days=1, jobs_per_day=80, update_fraction=0.0, seed=seed))
    one = ingest(tmp_path / "s1").rows_loaded
    two = ingest(tmp_path / "s2").rows_loaded
    assert one == two == 80
    assert query(home, "SELECT count(*) FROM job_logs")[0][0] == 160


def test_a_v1_warehouse_upgrades_in_place_and_its_records_keep_their_identity(home, tmp_path):
    """Contract v2 added the hardware fields. A warehouse loaded under v1 (no such columns, hashes of the
    v1 columns only) gains them, its records are hashed again (`hashed_again`), and re-ingesting the same v1 record
    finds it a duplicate."""
    v1 = record(job_id="old-1")
    ingest(write(tmp_path / "a.jsonl", jsonl(v1)))
    stored = older_warehouse(home, 1)
    s = ingest(write(tmp_path / "b.jsonl", jsonl(v1)))
    assert (s.rows_read, s.rows_loaded, s.rows_duplicate) == (1, 0, 1)
    hashed_again(home, stored)
    # the same job logged later with its hardware is a new record, and the columns are back
    s = ingest(write(tmp_path / "c.jsonl", jsonl(record(job_id="old-1", gpu_type="A100-80GB", gpu_count=4))))
    assert s.rows_loaded == 1
    assert query(home, "SELECT gpu_type, gpu_count FROM job_logs WHERE job_id = 'old-1'") == [("A100-80GB", 4)]


def test_a_v2_warehouse_upgrades_to_v3_and_its_records_keep_their_identity(home, tmp_path):
    """Contract v3 added `arch`. A v2 record (hardware set, no arch) hashed as v2 hashed it (the v1 columns
    and the v2 block) is still a duplicate after the upgrade (hashed again); the same job logged with its arch (an alias
    column name, padded) is a new record, kept as logged but trimmed."""
    v2 = record(job_id="v2-1", gpu_type="A100-80GB", gpu_count=4)
    ingest(write(tmp_path / "a.jsonl", jsonl(v2)))
    stored = older_warehouse(home, 2)
    s = ingest(write(tmp_path / "b.jsonl", jsonl(v2)))
    assert (s.rows_read, s.rows_loaded, s.rows_duplicate) == (1, 0, 1)
    hashed_again(home, stored)
    s = ingest(write(tmp_path / "c.jsonl", jsonl({**v2, "Architecture": "  ResNet-50 "})))
    assert s.rows_loaded == 1
    assert query(home, "SELECT arch, gpu_type FROM job_logs WHERE job_id = 'v2-1'") == [("ResNet-50", "A100-80GB")]


def test_a_v3_warehouse_upgrades_to_v4_keeps_its_records_and_loads_jobs_without_model_features(home, tmp_path):
    """Contract v4 added `time_limit_hours` and `job_name` and made `model_type` optional. A v3 record (arch set)
    hashed as v3 hashed it is still a duplicate after the upgrade (hashed again); a v3 warehouse (no v4 columns, model_type
    NOT NULL) gains the columns and loads a job without a model type as `unknown`."""
    v3 = record(job_id="v3-1", gpu_type="A100-80GB", arch="resnet50")
    ingest(write(tmp_path / "a.jsonl", jsonl(v3)))
    stored = older_warehouse(home, 3)
    s = ingest(write(tmp_path / "b.jsonl", jsonl(v3)))
    assert (s.rows_read, s.rows_loaded, s.rows_duplicate) == (1, 0, 1)
    hashed_again(home, stored)
    bare = {"job_id": "sched-1", "submitted_at": "2026-11-01T10:00:00Z", "status": "PENDING", "queue": "gpu",
            "gpu_count": 2, "time_limit_hours": 4, "JobName": "train_bert_042"}
    s = ingest(write(tmp_path / "c.jsonl", jsonl(bare)))
    assert (s.rows_loaded, s.rows_rejected) == (1, 0)
    assert query(home, "SELECT model_type, time_limit_hours, job_name FROM job_logs WHERE job_id = 'sched-1'") == [
        (c.UNKNOWN_MODEL_TYPE, 4.0, "train_bert_042")]


def test_hardware_fields_unknown_gpu_kept_impossible_values_rejected(home, tmp_path):
    rows = [record(job_id="h-1", gpu_type="A100-80GB", gpu_count=8),
            record(job_id="h-2", gpu_type="Quantum-9000", gpu_count=2),  # not in the catalogue: kept
            record(job_id="h-3", gpu_count=0),
            record(job_id="h-4", gpu_count=2.5),
            record(job_id="h-5", gpu_peak_tflops=-1.0)]
    s = ingest(write(tmp_path / "hw.jsonl", jsonl(*rows)))
    assert (s.rows_loaded, s.rows_rejected) == (2, 3)
    assert query(home, "SELECT job_id, gpu_type FROM job_logs ORDER BY job_id") == [("h-1", "A100-80GB"),
                                                                                  ("h-2", "Quantum-9000")]
    reasons = dict(query(home, "SELECT job_id, reason_text FROM rejected_job_logs"))
    assert reasons["h-3"].startswith("gpu_count must be > 0"), reasons
    assert "gpu_count" in reasons["h-4"] and "gpu_peak_tflops" in reasons["h-5"], reasons


def _lake(home: Path) -> pl.DataFrame:
    return pl.read_parquet(home / "lake" / "job_logs" / "**" / "*.parquet", hive_partitioning=True)


def test_a_failed_lake_refresh_keeps_the_run_and_the_next_ingest_repairs_the_lake(home, tmp_path):
    write_logs(tmp_path / "day1", SimConfig(days=1, jobs_per_day=200, seed=11))
    write_logs(tmp_path / "day2", SimConfig(days=1, jobs_per_day=150, seed=12, start=SimConfig.start.replace(day=5)))
    lake_dir = home / "lake" / "job_logs"
    blocker = home / "lake" / ".swap"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a folder")  # the lake's swap folder cannot be made: every refresh fails (OSError)

    first = ingest(tmp_path / "day1")
    (status, loaded, message), = query(home, "SELECT status, rows_loaded, message FROM ingest_runs")
    assert status == "succeeded" and loaded == first.rows_loaded > 0  # the warehouse committed; counts true
    assert "lake refresh failed" in message and "next ingest rewrites the stale days" in message
    assert query(home, "SELECT count(*) FROM job_log_records")[0][0] == loaded

    blocker.unlink()
    second = ingest(tmp_path / "day2")  # touches only day 5, but day 1 is stale: both are written
    assert second.lake_days == 2
    assert _lake(home).height == first.rows_loaded + second.rows_loaded
    # a partition deleted by hand is stale too
    import shutil

    shutil.rmtree(lake_dir / "submitted_date=2026-11-01")
    assert ingest(tmp_path / "day2").lake_days == 1
    assert _lake(home).height == first.rows_loaded + second.rows_loaded
    # swap folders live outside the lake and are gone afterwards: the lake holds only day partitions
    assert sorted(p.name for p in lake_dir.iterdir()) == ["submitted_date=2026-11-01", "submitted_date=2026-11-05"]
    assert not (home / "lake" / ".swap").exists()


def test_a_load_retried_after_its_commit_loads_nothing_twice(home, tmp_path):
    """Prefect retries `load-run` when it fails after the commit (the lake, the connection): the retry
    must find the committed run and change no table."""
    from gpucast.flows.settings import Settings
    from gpucast.tasks.ingest import staging as steps
    from gpucast.warehouse import db, load, runs

    settings = Settings.from_env().ensure().storage
    files = write_logs(tmp_path / "logs", SimConfig(days=1, jobs_per_day=100, dirty_fraction=0.1, seed=13))
    staging = tmp_path / "staging"
    results = [steps.stage_file(f, staging, i) for i, f in enumerate(files)]
    run = runs.Run("ingest", "ingest-retried", datetime.now(UTC), staging)
    counts = "SELECT (SELECT count(*) FROM job_log_records), (SELECT count(*) FROM validation_results), " \
             "(SELECT count(*) FROM rejected_job_logs), (SELECT count(*) FROM ingest_files)"
    with db.writer(settings) as con:
        runs.start(con, run, **load.start_columns(len(files)))
        first = load.load_run(con, run.run_id, staging, results)
        before = con.execute(counts).fetchall()
        again = load.load_run(con, run.run_id, staging, results)
        assert con.execute(counts).fetchall() == before
    assert (again.rows_loaded, again.rows_rejected, again.rows_duplicate) == \
           (first.rows_loaded, first.rows_rejected, first.rows_duplicate)  # the committed counts, read back
    assert first.rows_loaded > 0 and first.rows_duplicate >= 0


def test_an_inbox_file_still_being_written_is_left_for_the_next_run(home, monkeypatch):
    """An exporter appending while the run reads: the file is not archived (its tail would be lost),
    and the next run reads it again: the new line loads, the old ones count as duplicates."""
    from gpucast.tasks.ingest import staging as steps

    inbox_file = home / "inbox" / "growing.jsonl"
    write(inbox_file, jsonl(record(job_id="a"), record(job_id="b")))
    real = steps.stage_file

    def stage_then_append(path, *args, **kwargs):
        result = real(path, *args, **kwargs)
        with open(path, "a") as f:  # the exporter writes one more line after the read
            f.write(jsonl(record(job_id="c")))
        return result

    monkeypatch.setattr(steps, "stage_file", stage_then_append)
    assert ingest().rows_loaded == 2
    assert inbox_file.exists() and not (home / "inbox" / "archive").exists()
    monkeypatch.setattr(steps, "stage_file", real)
    again = ingest()
    assert (again.rows_loaded, again.rows_duplicate) == (1, 2)
    assert not inbox_file.exists()  # complete now: archived


def test_gpucast_ingest_reads_its_file_before_the_flow_and_stages_that_reading(home, tmp_path, monkeypatch):
    """`gpucast ingest FILE` starts reading FILE before Prefect's import and the flow (pipeline.py `_ingest_early`,
    issue 52: the command's fixed cost to its first row): the first read comes before the flow's first task looks for
    the files, the file is read once (the staging task takes that reading), and the run's rows are what they were:
    read = loaded + rejected + duplicate, each counted as before. No reading thread is left."""
    import threading

    from gpucast.flows.cli import main
    from gpucast.tasks.ingest import staging

    events, discover, read = [], staging.discover, staging.read_chunks

    def finding(*args, **kwargs):
        events.append("discover")
        return discover(*args, **kwargs)

    def reading(*args, **kwargs):
        events.append("read")
        yield from read(*args, **kwargs)

    monkeypatch.setattr(staging, "discover", finding)
    monkeypatch.setattr(staging, "read_chunks", reading)
    logs = write(tmp_path / "a.jsonl", jsonl(record(job_id="x"), record(job_id="x"), record(job_id="y"),
                                             record(job_id="z", gpu_count=-1)))
    assert main(["ingest", str(logs)]) == 0
    assert events == ["discover", "read", "discover"]  # the command's own look, its reading, then the flow's find-files
    assert query(home, "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate FROM ingest_files") == [(4, 2, 1, 1)]
    assert not staging._STARTED and not [t for t in threading.enumerate() if t.name == "gpucast-read-ahead"]


def test_an_inbox_file_whose_name_is_not_utf8_is_left_unread_and_the_rest_loads(home, caplog):
    """Review 77 S1-1: a file name that is not UTF-8 text (a Latin-1 exporter, an SMB share) cannot be stored or
    logged, and stopped the whole ingest, every night. It is left in the inbox, unread, with a warning naming it (its
    bytes escaped); the other files load and are archived."""
    import os

    inbox = home / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    odd = os.path.join(os.fsencode(inbox), b"bad\xff\xfename.jsonl")
    with open(odd, "w") as f:
        f.write(jsonl(record(job_id="odd-1")))
    write(inbox / "ok.jsonl", jsonl(record(job_id="ok-1")))
    result = ingest()
    assert (result.rows_read, result.rows_loaded, result.files_rejected) == (1, 1, 0)
    assert os.path.exists(odd)  # left where it was, for a rename
    assert "its name is not UTF-8 text (" in caplog.text and "bad\\xff\\xfename.jsonl" in caplog.text
    again = ingest()  # the next night: the same warning, nothing stops
    assert again.rows_read == 0 and os.path.exists(odd)


def test_an_inbox_file_deleted_after_the_listing_is_said_and_the_night_goes_on(home, monkeypatch, caplog):
    """Review 77 S2-8: the run lists the inbox, then a clean-up job deletes one file before it is staged. The night
    went down in `stat`; now the other files load and are archived, the gone one is counted nowhere (no rows read),
    its `ingest_files` row says `gone` with the reason, the run's message and output name it."""
    from gpucast.tasks.ingest import staging as steps

    write(home / "inbox" / "a.jsonl", jsonl(record(job_id="a1"), record(job_id="a2")))
    doomed = write(home / "inbox" / "b.jsonl", jsonl(record(job_id="b1")))
    listed = steps.inbox_files

    def list_then_clean_up(*args, **kwargs):
        found = listed(*args, **kwargs)
        doomed.unlink()
        return found

    monkeypatch.setattr(steps, "inbox_files", list_then_clean_up)
    result = ingest()
    assert (result.files, result.rows_read, result.rows_loaded, result.files_rejected) == (1, 2, 2, 0)  # 1 read, 1 gone
    assert query(home, "SELECT status, rows_read FROM ingest_files ORDER BY source_file") == [("loaded", 2), ("gone", 0)]
    assert "b.jsonl: gone before it was read" in query(home, "SELECT message FROM ingest_runs")[0][0]
    assert query(home, "SELECT files FROM ingest_runs") == [(1,)]  # review 79 S3-4: status said 2, the result 1
    assert f"1 file(s) {steps.GONE}: b.jsonl" in caplog.text
    assert [p.name for p in (home / "inbox").rglob("*.jsonl")] == ["a.jsonl"] and (home / "inbox" / "archive").exists()


def test_a_file_named_archive_in_the_inbox_is_read_as_any_file_and_the_archive_made(home, caplog):
    """Review 77 S1-7: a *file* named `archive` at the inbox's top (where the archive folder goes) failed every night
    after its load, in the archive move (NotADirectoryError). It is renamed `archive.1`, read as any inbox file (here a
    job log: its row loads), and archived with the rest; the run says so."""
    write(home / "inbox" / "archive", jsonl(record(job_id="in-the-way")))
    write(home / "inbox" / "a.jsonl", jsonl(record(job_id="a1")))
    result = ingest()
    assert (result.files, result.rows_loaded) == (2, 2)
    assert "renamed archive.1, read as any inbox file" in caplog.text
    archived = sorted(p.name for p in (home / "inbox" / "archive").rglob("*") if p.is_file())
    assert archived == ["a.jsonl", "archive.1"] and (home / "inbox" / "archive").is_dir()
    assert ingest().files == 0  # the next night: nothing left, nothing stops


def test_a_header_holding_a_url_and_a_word_after_a_space_does_not_stop_the_night(home):
    """Review 83: a CSV column named `notes (http://wiki @team)` made the run's note (its ignored columns, masked for
    secrets inside the load's transaction) raise IndexError: both runs failed and both files stayed, every night."""
    write(home / "inbox" / "a.csv", "job_id,submitted_at,status,notes (http://wiki @team)\n"
          "c1,2026-11-01T00:00:00Z,PENDING,x\n")
    write(home / "inbox" / "b.jsonl", jsonl(record(job_id="b1")))
    result = ingest()
    assert (result.files, result.rows_read, result.rows_loaded) == (2, 2, 2)
    assert "notes (http://wiki @team)" in query(home, "SELECT message FROM ingest_runs")[0][0]
