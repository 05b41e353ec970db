"""Retention: old score runs' forecasts are pruned, the latest is always kept, planners read only the latest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.warehouse import forecast, runs
from gpucast.warehouse.schema import schema_sql
from tests.conftest import key_latest

DAY0 = datetime(2026, 10, 1, tzinfo=UTC)


@pytest.fixture
def con():
    con = duckdb.connect()
    con.execute(schema_sql())
    for arrival, job in enumerate(("p1", "p2"), start=1):  # two jobs still pending
        con.execute(f"INSERT INTO job_log_records ({c.JOB_ID}, {c.SUBMITTED_AT}, {c.UPDATED_AT}, {c.STATUS}, {c.QUEUE}, "
                    f"{c.MODEL_TYPE}, record_hash, arrival, source_file, source_row, ingest_run_id, loaded_at) "
                    "VALUES (?, ?, ?, 'PENDING', 'q1', 'CNN', ?, ?, 'f', 1, 'i', ?)", [job, DAY0, DAY0, job, arrival, DAY0])
    key_latest(con)
    return con


def _score(con, tmp_path, day: int, keep_days: int = 30, p50: float | None = None) -> tuple[str, int]:
    """A score run forecasting both pending jobs at DAY0 + `day`, published through the real publish path."""
    run_id = f"score-day{day:03d}"
    at = DAY0 + timedelta(days=day)
    runs.start(con, runs.Run("score", run_id, at, None))
    part = tmp_path / f"{run_id}.parquet"
    pl.DataFrame({"job_id": ["p1", "p2"], "target": [c.PEAK_GPU_MEM_GB] * 2, "p10": [1.0] * 2,
                  "p50": [p50 or float(day)] * 2, "p90": [3.0] * 2, "model": ["lightgbm"] * 2, "train_run_id": ["t"] * 2,
                  "score_run_id": [run_id] * 2, "scored_at": [at] * 2, "safe_request_gb": [3.3] * 2,
                  "gpu_mem_gb": [80.0] * 2, "oom_risk": [False] * 2, "ood": [False] * 2, "ood_reason": [None] * 2,
                  "arch_inferred": [None] * 2, "arch_match_distance": [None] * 2}).write_parquet(part)
    n, pruned = forecast.publish(con, run_id, [part], 2, [c.PEAK_GPU_MEM_GB], 80.0, keep_days)
    assert n == 2
    return run_id, pruned


def test_runs_older_than_the_retention_are_pruned_and_marked(con, tmp_path):
    for day in (0, 10, 20, 30):
        assert _score(con, tmp_path, day)[1] == 0  # day 30 is exactly 30 days after day 0: kept
    _, pruned = _score(con, tmp_path, 41)  # now day 0 and day 10 are more than 30 days old
    assert pruned == 2
    kept = [r for (r,) in con.execute("SELECT DISTINCT score_run_id FROM forecasts ORDER BY 1").fetchall()]
    assert kept == ["score-day020", "score-day030", "score-day041"]
    marked = con.execute("SELECT score_run_id FROM score_runs WHERE pruned_at IS NOT NULL ORDER BY 1").fetchall()
    assert marked == [("score-day000",), ("score-day010",)]
    assert _score(con, tmp_path, 42)[1] == 0  # pruned runs are not pruned twice


def test_the_shortest_retention_still_keeps_the_run_just_published(con, tmp_path):
    _score(con, tmp_path, 0)
    _score(con, tmp_path, 1, keep_days=1)  # exactly one day apart: kept
    assert _score(con, tmp_path, 400, keep_days=1)[1] == 2
    assert con.execute("SELECT DISTINCT score_run_id FROM forecasts").fetchall() == [("score-day400",)]
    assert con.execute("SELECT count(*) FROM pending_forecasts").fetchall() == [(2,)]


def test_pending_forecasts_reads_only_the_latest_published_run(con, tmp_path):
    _score(con, tmp_path, 1, p50=1.0)
    _score(con, tmp_path, 2, p50=2.0)
    # a newer run that failed after inserting would never be published: planners keep the last published one
    runs.start(con, runs.Run("score", "score-failed", DAY0 + timedelta(days=3), None))
    con.execute("INSERT INTO forecasts (job_id, target, p10, p50, p90, model, train_run_id, score_run_id, scored_at) "
                "VALUES ('p1', ?, 0, 99, 99, 'x', 't', 'score-failed', ?)", [c.PEAK_GPU_MEM_GB, DAY0 + timedelta(days=3)])
    got = con.execute("SELECT job_id, score_run_id, p50 FROM pending_forecasts ORDER BY job_id").fetchall()
    assert got == [("p1", "score-day002", 2.0), ("p2", "score-day002", 2.0)]


def test_a_run_that_staged_a_job_twice_publishes_nothing(con, tmp_path):
    """The table has no key (its index was most of a publish): the publish itself refuses duplicates."""
    run_id, part = "score-twice", tmp_path / "twice.parquet"
    runs.start(con, runs.Run("score", run_id, DAY0, None))
    row = {"job_id": "p1", "target": c.PEAK_GPU_MEM_GB, "p10": 1.0, "p50": 2.0, "p90": 3.0, "model": "lightgbm",
           "train_run_id": "t", "score_run_id": run_id, "scored_at": DAY0, "safe_request_gb": 3.5, "gpu_mem_gb": 80.0,
           "oom_risk": False, "ood": False, "ood_reason": None, "arch_inferred": None, "arch_match_distance": None}
    pl.DataFrame([row, row]).write_parquet(part)
    with pytest.raises(ValueError, match="twice"):
        forecast.publish(con, run_id, [part], 1, [c.PEAK_GPU_MEM_GB], 80.0, 30)
    assert con.execute("SELECT count(*) FROM forecasts").fetchone() == (0,)


def test_a_run_whose_pairs_hashes_collide_is_counted_exactly_and_published(con, tmp_path, monkeypatch):
    """The check counts the pairs' hashes first: equal hashes (here every pair's, a stand-in for a collision) only
    send it to the exact count, which publishes distinct pairs."""
    monkeypatch.setattr(forecast, "DISTINCT_HASHED", "SELECT count(DISTINCT 0) FROM forecasts WHERE score_run_id = ?")
    run_id, _ = _score(con, tmp_path, 0)
    assert con.execute("SELECT status, forecasts FROM score_runs WHERE score_run_id = ?", [run_id]).fetchall() == [
        ("published", 2)]


def test_a_published_run_keeps_its_forecast_time_and_older_warehouses_get_it_once(tmp_path):
    """The retention reads each run's forecast time from `score_runs.forecasts_at` (not every kept forecast): a
    publish sets it; a warehouse whose runs were published before the column gets it from their forecasts, once, when
    a writer applies the schema; a run with no forecasts keeps it null and is as old as its start."""
    from gpucast.flows.settings import Settings
    from gpucast.warehouse.db import connect_writer

    storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path)}).storage
    old = duckdb.connect(str(storage.db_path))
    old.execute(schema_sql())
    for day in (0, 10):  # published by an older gpucast: forecasts, no forecast time on the run
        _score(old, tmp_path, day)
    runs.start(old, runs.Run("score", "score-failed", DAY0 + timedelta(days=5), None))  # no forecasts
    old.execute("UPDATE score_runs SET forecasts_at = NULL")
    old.execute("ALTER TABLE score_runs DROP COLUMN forecasts_at")  # as schema.sql made it up to session 9
    old.close()
    con = connect_writer(storage)
    try:
        got = con.execute("SELECT score_run_id, forecasts_at FROM score_runs ORDER BY 1").fetchall()
        assert got == [("score-day000", DAY0), ("score-day010", DAY0 + timedelta(days=10)), ("score-failed", None)]
        run_id, pruned = _score(con, tmp_path, 40)  # day 0 is 40 days old, day 10 and the failed run (day 5) 30-35
        assert pruned == 2
        kept = con.execute("SELECT score_run_id FROM score_runs WHERE pruned_at IS NULL ORDER BY 1").fetchall()
        assert kept == [("score-day010",), (run_id,)]
        assert con.execute("SELECT forecasts_at FROM score_runs WHERE score_run_id = ?", [run_id]).fetchall() == [
            (DAY0 + timedelta(days=40),)]
    finally:
        con.close()


def test_a_warehouse_whose_forecasts_had_a_key_loses_it_keeping_rows_and_not_nulls(tmp_path):
    """Warehouses made before the key was dropped: `connect_writer` rebuilds the table once."""
    from gpucast.flows.settings import Settings
    from gpucast.warehouse.db import connect_writer, migrate

    storage = Settings.from_env({"GPUCAST_HOME": str(tmp_path)}).storage
    old = duckdb.connect(str(storage.db_path))
    old.execute(schema_sql())
    old.execute("DROP TABLE forecasts")  # as schema.sql made it up to 2026-11-25
    old.execute("CREATE TABLE forecasts (job_id VARCHAR NOT NULL, target VARCHAR NOT NULL, p10 DOUBLE NOT NULL, "
                "p50 DOUBLE NOT NULL, p90 DOUBLE NOT NULL, model VARCHAR NOT NULL, train_run_id VARCHAR NOT NULL, "
                "score_run_id VARCHAR NOT NULL, scored_at TIMESTAMPTZ NOT NULL, safe_request_gb DOUBLE, "
                "gpu_mem_gb DOUBLE, oom_risk BOOLEAN, PRIMARY KEY (score_run_id, job_id, target))")
    old.execute("INSERT INTO forecasts (job_id, target, p10, p50, p90, model, train_run_id, score_run_id, scored_at) "
                "VALUES ('p1', 'runtime_hours', 1, 2, 3, 'lightgbm', 't', 's', ?)", [DAY0])
    old.close()
    con = connect_writer(storage)
    try:
        assert con.sql("SELECT 1").fetchall() == [(1,)]  # the migration left no unfinished result behind
        kinds = con.execute("SELECT constraint_type, count(*) FROM duckdb_constraints() WHERE table_name = 'forecasts' "
                            "GROUP BY ALL ORDER BY ALL").fetchall()
        assert kinds == [("NOT NULL", 9)]
        assert con.execute("SELECT job_id, p50, ood FROM forecasts").fetchall() == [("p1", 2.0, None)]
        assert con.execute("SELECT count(*) FROM pending_forecasts").fetchone() == (0,)  # the views still bind
        assert migrate(con) == []  # once
        assert con.sql("SELECT 1").fetchall() == [(1,)]  # nor when it had nothing to do
    finally:
        con.close()


def test_a_forecast_keeps_the_architecture_inferred_for_it(con, tmp_path):
    """Issue 37: `arch_inferred` and `arch_match_distance` travel from the staged part into `forecasts`."""
    run_id, part = "score-inferred", tmp_path / "inferred.parquet"
    runs.start(con, runs.Run("score", run_id, DAY0, None))
    rows = [{"job_id": job, "target": c.PEAK_GPU_MEM_GB, "p10": 1.0, "p50": 2.0, "p90": 3.0, "model": "traced_prior",
             "train_run_id": "t", "score_run_id": run_id, "scored_at": DAY0, "safe_request_gb": 3.5, "gpu_mem_gb": 80.0,
             "oom_risk": False, "ood": True, "ood_reason": reason, "arch_inferred": arch, "arch_match_distance": distance}
            for job, arch, distance, reason in (("p1", "vgg16", 0.0003, "arch inferred from shape: vgg16 (distance 0.000)"),
                                                ("p2", None, None, None))]
    pl.DataFrame(rows).write_parquet(part)
    forecast.publish(con, run_id, [part], 2, [c.PEAK_GPU_MEM_GB], 80.0, 30)
    got = con.execute("SELECT job_id, arch_inferred, arch_match_distance FROM forecasts ORDER BY job_id").fetchall()
    assert got == [("p1", "vgg16", 0.0003), ("p2", None, None)]
