"""`capacity_daily`, the planners' headline figures, against numbers worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.warehouse.schema import schema_sql
from tests.conftest import key_latest

T = datetime(2026, 11, 1, tzinfo=UTC)
JOBS = [  # job_id, status, queue, submitted_at, gpu_count
    ("a", "PENDING", "q1", "2026-11-01 10:00:00+00", None),  # missing: one GPU
    ("b", "PENDING", "q1", "2026-11-01 15:00:00+00", 4),
    ("c", "PENDING", "q2", "2026-11-02 09:00:00+00", 1),
    ("d", "COMPLETED", "q1", "2026-11-01 11:00:00+00", 8),  # no longer pending: not planned for
]
# score run s2 (the latest) per job: (runtime p50, p90), (gflops p50, p90), memory p90 and its safe request
LATEST = {
    "a": ((2.0, 3.0), (100.0, 150.0), 30.0, 33.0),
    "b": ((1.0, 4.0), (50.0, 60.0), 50.0, 55.0),
    "c": ((5.0, 6.0), (10.0, 20.0), 80.0, 88.0),
    "d": ((9.0, 9.0), (9.0, 9.0), 90.0, 99.0),
}


@pytest.fixture
def con():
    con = duckdb.connect()
    con.execute(schema_sql())
    for arrival, (job_id, status, queue, submitted, gpus) in enumerate(JOBS, start=1):
        con.execute(f"INSERT INTO job_log_records ({c.JOB_ID}, {c.SUBMITTED_AT}, {c.STATUS}, {c.QUEUE}, {c.MODEL_TYPE}, "
                    f"{c.GPU_COUNT}, record_hash, arrival, source_file, source_row, ingest_run_id, loaded_at) "
                    "VALUES (?, ?, ?, ?, 'CNN', ?, 'h', ?, 'f', 1, 'i', ?)",
                    [job_id, submitted, status, queue, gpus, arrival, T])
    key_latest(con)
    rows = []
    for run, scored_at in (("s1", T), ("s2", datetime(2026, 11, 2, tzinfo=UTC))):
        con.execute("INSERT INTO score_runs (score_run_id, started_at, status) VALUES (?, ?, 'published')", [run, scored_at])
        for job_id, (hours, gflops, mem_p90, safe) in LATEST.items():
            scale = 100.0 if run == "s1" else 1.0  # the older run's forecasts must not count
            rows += [(job_id, c.RUNTIME_HOURS, hours[0] * scale, hours[1] * scale, None, run, scored_at),
                     (job_id, c.GPU_DEMAND_GFLOPS, gflops[0] * scale, gflops[1] * scale, None, run, scored_at),
                     (job_id, c.PEAK_GPU_MEM_GB, mem_p90 / 2, mem_p90, safe, run, scored_at)]
    con.executemany("INSERT INTO forecasts (job_id, target, p10, p50, p90, model, train_run_id, score_run_id, scored_at, "
                    "safe_request_gb) VALUES (?, ?, 0.1, ?, ?, 'm', 't', ?, ?, ?)",
                    [(j, t, p50, p90, run, at, safe) for j, t, p50, p90, safe, run, at in rows])
    yield con
    con.close()


def test_capacity_daily_matches_the_hand_computed_figures(con):
    got = con.execute("SELECT * FROM capacity_daily ORDER BY submitted_day, queue").fetchall()
    cols = [d[0] for d in con.description]
    assert cols == ["submitted_day", "queue", "jobs", "gpu_hours_p50", "gpu_hours_p90", "gflops_p50", "gflops_p90",
                    "mem_p90_max_gb", "jobs_over_24gb", "jobs_over_40gb", "jobs_over_80gb", "jobs_unknown_size"]
    day1, day2 = (datetime(2026, 11, d).date() for d in (1, 2))
    assert got == [
        # a + b: GPU-hours 2x1 + 1x4 / 3x1 + 4x4 (runtime x gpu_count, missing 1), gflops 100+50 / 150+60, max(30, 50);
        # safe 33 and 55 GB: both > 24, one > 40
        (day1, "q1", 2, 6.0, 19.0, 150.0, 210.0, 50.0, 2, 1, 0, 0),
        # c alone: safe request 88 GB is over all three sizes
        (day2, "q2", 1, 5.0, 6.0, 10.0, 20.0, 80.0, 1, 1, 1, 0),
    ]


def test_every_view_reads_the_same_in_every_time_zone(con):
    """A planner's own DuckDB client reads the copy in its local zone (newcomer 27 P4): capacity_daily's days moved
    with it. b (15:00 UTC) falls on the next day in Tokyo; every view must give the same rows in every zone."""
    views = [v for (v,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall()]
    assert "capacity_daily" in views

    def in_utc(value):  # an instant fetched in the session's zone, written in UTC so rows sort alike
        return value.astimezone(UTC) if isinstance(value, datetime) and value.tzinfo else value

    def read_all(zone: str) -> dict[str, list]:
        con.execute(f"SET TimeZone = '{zone}'")
        return {v: sorted((tuple(map(in_utc, row)) for row in con.execute(f"SELECT * FROM {v}").fetchall()), key=repr)
                for v in views}

    utc = read_all("UTC")
    assert utc["capacity_daily"]  # the fixture's jobs are there to move
    for zone in ("Asia/Tokyo", "America/Los_Angeles"):
        assert read_all(zone) == utc, zone


def test_pending_forecasts_hold_only_the_latest_forecast_of_jobs_still_pending(con):
    rows = con.execute("SELECT job_id, target, p50, score_run_id FROM pending_forecasts ORDER BY ALL").fetchall()
    assert {j for j, *_ in rows} == {"a", "b", "c"}
    assert {r for *_, r in rows} == {"s2"}
    assert len(rows) == 3 * 3


def test_the_plan_reads_the_latest_succeeded_demand_forecast_and_the_first_days_of_recent_plans(con):
    from gpucast.warehouse.plan import demand_input

    for run, started, status in (("d-old", T, "succeeded"), ("d-new", datetime(2026, 11, 2, tzinfo=UTC), "succeeded"),
                                 ("d-failed", datetime(2026, 11, 3, tzinfo=UTC), "failed")):
        con.execute("INSERT INTO demand_runs (demand_run_id, started_at, status) VALUES (?, ?, ?)", [run, started, status])
        con.execute("INSERT INTO demand_forecast (demand_run_id, day, horizon, queue, gpu_type, gpu_hours_p10, "
                    "gpu_hours_p50, gpu_hours_p90, jobs_p50, method, fallback_reason) "
                    "VALUES (?, '2026-11-04', 1, 'q1', 'unknown', 1, ?, 3, 1, 'naive', NULL)",
                    [run, {"d-old": 10.0, "d-new": 20.0, "d-failed": 30.0}[run]])
    for k, (run, status) in enumerate((("p1", "succeeded"), ("p2", "failed"), ("p3", "succeeded"), ("p4", "succeeded"))):
        start = datetime(2026, 11, 1 + k).date()
        con.execute("INSERT INTO plan_runs (plan_run_id, started_at, status, start_day) VALUES (?, ?, ?, ?)",
                    [run, datetime(2026, 11, 1 + k, tzinfo=UTC), status, start])
        for day, gpus in ((start, 10 + k), (datetime(2026, 11, 2 + k).date(), 100)):  # the first day, and the next
            con.execute("INSERT INTO capacity_plan (plan_run_id, day, queue, gpu_type, gpu_hours_p50, gpus_needed_p50) "
                        "VALUES (?, ?, 'q1', 'A100-80GB', 24.0, ?)", [run, day, gpus])
    forecast, demand_run_id, recent = demand_input(con, 2, datetime(2026, 11, 5).date())
    assert demand_run_id == "d-new" and forecast["gpu_hours_p50"].to_list() == [20.0]
    # a run before the shares (session 9, issue 53, session 14): each share is the series' own quantile
    assert forecast.select("gpu_hours_p90_of_total", "gpu_hours_p90_of_queue", "gpu_hours_p50_of_total").row(0) == (3, 3, 20)
    con.execute("UPDATE demand_forecast SET gpu_hours_p50_of_total = 35 WHERE demand_run_id = 'd-new'")
    assert demand_input(con, 2, datetime(2026, 11, 5).date())[0]["gpu_hours_p50_of_total"].to_list() == [35.0]
    # the first day of the last 2 succeeded plans (p4: 13 GPUs, p3: 12); not p2 (failed), not later days
    assert sorted(recent["gpus_needed_p50"].to_list()) == [12, 13]

    # session 22: a plan run again on a day already planned (a what-if question on the same forecasts) reads the days
    # before its own once each, the latest plan of each; its own first day is its own packing (arrivals.py), not read
    con.execute("INSERT INTO plan_runs (plan_run_id, started_at, status, start_day) VALUES "
                "('p3-again', '2026-11-03 12:00+00', 'succeeded', '2026-11-03'), "
                "('p4-again', '2026-11-04 12:00+00', 'succeeded', '2026-11-04')")
    con.execute("INSERT INTO capacity_plan (plan_run_id, day, queue, gpu_type, gpu_hours_p50, gpus_needed_p50) VALUES "
                "('p3-again', '2026-11-03', 'q1', 'A100-80GB', 24.0, 32), ('p4-again', '2026-11-04', 'q1', 'A100-80GB', 24.0, 33)")
    recent = demand_input(con, 2, datetime(2026, 11, 4).date())[2]
    assert sorted(recent["gpus_needed_p50"].to_list()) == [10, 32]  # 11-03 once (its latest plan), 11-01; not 11-04
    recent = demand_input(con, 6, datetime(2026, 11, 5).date())[2]
    assert sorted(recent["gpus_needed_p50"].to_list()) == [10, 32, 33]  # one plan a day (p2 failed)
    # review 72 S2-3: a plan narrowed by `--gpu-types` after the nightly's packed some types only: not the day's
    con.execute("INSERT INTO plan_runs (plan_run_id, started_at, status, start_day, gpu_types) VALUES "
                "('p4-l4', '2026-11-04 13:00+00', 'succeeded', '2026-11-04', ['L4'])")
    con.execute("INSERT INTO capacity_plan (plan_run_id, day, queue, gpu_type, gpu_hours_p50, gpus_needed_p50) VALUES "
                "('p4-l4', '2026-11-04', 'q1', 'A100-80GB', 24.0, 44)")
    recent = demand_input(con, 6, datetime(2026, 11, 5).date())[2]
    assert sorted(recent["gpus_needed_p50"].to_list()) == [10, 32, 33]


def test_a_job_of_unknown_llm_size_is_planned_as_unknown_size(con):
    """Review 65a S2-3: a job with LLM fields and no size (tasks/learn/ood.py check 7) keeps the champion's memory
    forecast, which leans on nothing; the plan reads it as unknown size (a whole GPU of its queue's largest type,
    never shared), as a job never scored. Its other forecasts and every other job's memory stay."""
    from gpucast.warehouse.plan import plan_input

    before = plan_input(con)[0]
    from gpucast.records import UNKNOWN_LLM_SIZE
    from gpucast.tasks.learn import ood

    words = [w for _, w in ood._llm_unknown_size(pl.DataFrame({c.ARCH: ["acme-moe-unreleased"], "llm_mem_gb": [None],
                                                                c.ADAPTER: ["lora"]}), None, None)]
    assert len(words) == 1 and words[0].startswith(UNKNOWN_LLM_SIZE)  # the words the check writes, which the plan reads
    con.execute("UPDATE forecasts SET ood = true, ood_reason = ? WHERE job_id = 'b' AND target = ?",
                [f"model_type 'x' unseen; {words[0]} -> lightgbm's forecast kept", c.PEAK_GPU_MEM_GB])
    after = plan_input(con)[0]
    # the planners' counts agree with the plan (review 65b S3-3): b's 55 GB no longer counts over 24 / 40 GB
    assert con.execute("SELECT jobs_over_24gb, jobs_over_40gb, jobs_unknown_size, mem_p90_max_gb FROM capacity_daily "
                       "WHERE queue = 'q1'").fetchall() == [(1, 0, 1, 30.0)]  # b's 50 GB P90 no longer the day's largest
    mem = dict(zip(after["job_id"], after["mem_gb"], strict=True))
    assert dict(zip(before["job_id"], before["mem_gb"], strict=True))["b"] == 55.0 and mem["b"] is None
    assert mem["a"] == 33.0 and mem["c"] == 88.0
    assert after.drop("mem_gb").equals(before.drop("mem_gb"))


def test_every_writer_connection_reads_days_in_utc(tmp_path):
    """Review 86 S1-2: the schema's `SET TimeZone = 'UTC'` runs only where the DDL is applied, so the second writer of
    a process on a host in New York read `CAST(submitted_at AS DATE)` (the plan's input, the lake's partitions) in
    New York's days. Run in a child process whose TZ is New York: both writers answer UTC."""
    import subprocess
    import sys

    script = (
        "from pathlib import Path\n"
        "from gpucast.flows.settings import Settings\n"
        "from gpucast.warehouse.db import connect_writer\n"
        "storage = Settings.from_env().storage\n"
        "for n in (1, 2):\n"
        "    con = connect_writer(storage)\n"
        "    print(con.execute(\"SELECT current_setting('TimeZone')\").fetchone()[0])\n"
        "    con.close()\n")
    env = {**__import__("os").environ, "TZ": "America/New_York", "GPUCAST_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["UTC", "UTC"], out
