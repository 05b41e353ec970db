"""`demand_daily`, the demand series, against a week of jobs worked out by hand (docs/planners.md)."""

from __future__ import annotations

from datetime import date, datetime

import duckdb
import pytest

from gpucast.expectations import contract as c
from gpucast.warehouse.schema import schema_sql
from tests.conftest import key_latest

A100 = "A100-80GB"
# Every record of every job (job_log_records); the last one of a job is its row in job_logs.
# job_id, queue, gpu_type, gpu_count, submitted_at, status, updated_at, runtime_hours
RECORDS = [
    # q1, Nov 1: a runs 10:00-14:00 on 2 GPUs (logged start)
    ("a", "q1", A100, 2, "2026-11-01 08:00", "RUNNING", "2026-11-01 10:00", None),
    ("a", "q1", A100, 2, "2026-11-01 08:00", "COMPLETED", "2026-11-01 14:00", 4.0),
    # b spans midnight: 22:00 on Nov 1 to 04:00 on Nov 2, 1 GPU
    ("b", "q1", A100, 1, "2026-11-01 20:00", "RUNNING", "2026-11-01 22:00", None),
    ("b", "q1", A100, 1, "2026-11-01 20:00", "COMPLETED", "2026-11-02 04:00", 6.0),
    # c failed after 2 h on 4 GPUs, no RUNNING record: start taken as 13:00 - 2 h = 11:00
    ("c", "q1", A100, 4, "2026-11-01 09:00", "FAILED", "2026-11-01 13:00", 2.0),
    # q1 has nothing on Nov 2 but b's last hours, nothing at all on Nov 3 (the gap)
    # Nov 4: d pending, no gpu_count (1 GPU); g completed with no run time and no start logged
    ("d", "q1", A100, None, "2026-11-04 10:00", "PENDING", None, None),
    ("g", "q1", A100, 1, "2026-11-04 01:00", "COMPLETED", "2026-11-04 05:00", None),
    # q2, GPU type not logged: f cancelled before it started; e started at 01:00 on Nov 3, still running
    ("f", "q2", None, 1, "2026-11-02 12:00", "CANCELLED", "2026-11-02 13:00", None),
    ("e", "q2", None, 2, "2026-11-02 23:00", "PENDING", "2026-11-02 23:00", None),
    ("e", "q2", None, 2, "2026-11-02 23:00", "RUNNING", "2026-11-03 01:00", None),
    # h ran an hour, then was requeued: pending again, it holds no GPU
    ("h", "q2", None, 1, "2026-11-02 10:00", "RUNNING", "2026-11-02 11:00", None),
    ("h", "q2", None, 1, "2026-11-02 10:00", "PENDING", "2026-11-02 12:00", None),
]
# runtime P50 per score run: s1 (older), s2 (latest published), s3 (newer but failed: never read)
FORECASTS = [
    ("s1", "2026-11-03 00:00", "published", {"e": 5.0}),
    ("s2", "2026-11-04 12:00", "published", {"d": 3.0, "h": 1.0}),
    ("s3", "2026-11-04 18:00", "failed", {"d": 300.0}),
]
D1, D2, D3, D4 = (date(2026, 11, d) for d in (1, 2, 3, 4))
EXPECTED = [
    # day, queue, gpu_type, jobs_submitted, gpu_hours, known, forecast, jobs_hours_unknown, peak_busy_gpus
    # a 4 h x 2 + b 6 h x 1 + c 2 h x 4 (failed jobs held their GPUs); peak 11:00-13:00: a 2 + c 4
    (D1, "q1", A100, 3, 22.0, 22.0, 0.0, 0, 6),
    (D2, "q1", A100, 0, 0.0, 0.0, 0.0, 0, 1),  # nothing submitted; b still holds 1 GPU until 04:00
    (D3, "q1", A100, 0, 0.0, 0.0, 0.0, 0, 0),  # the gap day: zeros, not missing
    (D4, "q1", A100, 2, 3.0, 0.0, 3.0, 1, 0),  # d: P50 3 h x 1 GPU (s2; s3 failed); g: hours unknown
    # f cancelled unstarted: 0 h; h: P50 1 h; e: running 33 h at the warehouse's clock (Nov 4 10:00), past its P50
    # (5 h, s1), in a queue with no finished run: the hours it has run, 33 h x 2 GPUs (issue 53: survival-aware)
    (D2, "q2", None, 3, 67.0, 0.0, 67.0, 0, 0),
    (D3, "q2", None, 0, 0.0, 0.0, 0.0, 0, 2),  # e runs from 01:00
    (D4, "q2", None, 0, 0.0, 0.0, 0.0, 0, 2),  # e still running, through the warehouse's last day (Nov 4)
]


def _load(con: duckdb.DuckDBPyConnection) -> None:
    columns = (f"{c.JOB_ID}, {c.QUEUE}, {c.GPU_TYPE}, {c.GPU_COUNT}, {c.SUBMITTED_AT}, {c.STATUS}, {c.UPDATED_AT}, "
               f"{c.RUNTIME_HOURS}, {c.MODEL_TYPE}, record_hash, arrival, source_file, source_row, ingest_run_id, "
               "loaded_at")
    rows = [(*r[:4], f"{r[4]}+00", r[5], r[6] and f"{r[6]}+00", r[7], "CNN", "h", n, "f", n, "i", "2026-11-05 00:00+00")
            for n, r in enumerate(RECORDS)]
    marks = ", ".join("?" * 15)
    con.executemany(f"INSERT INTO job_log_records ({columns}) VALUES ({marks})", rows)
    key_latest(con)  # RECORDS lists a job's records in order
    for run, at, status, p50s in FORECASTS:
        con.execute("INSERT INTO score_runs (score_run_id, started_at, status) VALUES (?, ?, ?)", [run, f"{at}+00", status])
        con.executemany("INSERT INTO forecasts (job_id, target, p10, p50, p90, model, train_run_id, score_run_id, "
                        "scored_at) VALUES (?, ?, 0.1, ?, 99, 'm', 't', ?, ?)",
                        [(job, c.RUNTIME_HOURS, p50, run, f"{at}+00") for job, p50 in p50s.items()])


@pytest.fixture(params=["UTC", "America/Los_Angeles"])
def con(request):
    """The same warehouse read in two session time zones: days are UTC days in both."""
    con = duckdb.connect()
    con.execute(schema_sql())
    _load(con)
    con.execute(f"SET TimeZone = '{request.param}'")
    yield con
    con.close()


def test_demand_daily_matches_the_hand_computed_series(con):
    got = con.execute("SELECT * FROM demand_daily ORDER BY queue, day").fetchall()
    assert [d[0] for d in con.description] == [
        "day", "queue", "gpu_type", "jobs_submitted", "gpu_hours", "gpu_hours_known", "gpu_hours_forecast",
        "jobs_hours_unknown", "peak_busy_gpus"]
    assert got == EXPECTED


def test_job_demand_states_how_each_interval_was_found(con):
    rows = con.execute("SELECT job_id, started_at, start_known, ended_at FROM job_demand ORDER BY job_id").fetchall()
    assert rows == [
        ("a", datetime(2026, 11, 1, 10), True, datetime(2026, 11, 1, 14)),
        ("b", datetime(2026, 11, 1, 22), True, datetime(2026, 11, 2, 4)),
        ("c", datetime(2026, 11, 1, 11), False, datetime(2026, 11, 1, 13)),  # end - runtime_hours
        ("d", None, False, None),
        ("e", datetime(2026, 11, 3, 1), True, None),
        ("f", None, False, datetime(2026, 11, 2, 13)),
        ("g", None, False, datetime(2026, 11, 4, 5)),
        ("h", None, False, None),  # requeued: its earlier RUNNING record no longer starts it
    ]


def test_the_running_jobs_staged_for_the_bursts_start_at_their_first_running_record(con):
    """`training.read_running` (issue 53 item 2): the jobs RUNNING now, `updated_at` their start as job_demand reads it
    (e's first RUNNING record, not its submission), and the warehouse's clock (job_demand's: Nov 4 10:00), so a burst
    counts e's hours so far as job_demand does (33 h); h, running once and pending again, is not running."""
    from gpucast.warehouse.training import read_running

    rows = read_running(con)
    utc = lambda name: rows[name].dt.convert_time_zone("UTC").dt.replace_time_zone(None).to_list()  # noqa: E731
    assert rows[c.JOB_ID].to_list() == ["e"] and rows[c.STATUS].to_list() == ["RUNNING"]
    assert set(c.COLUMNS) < set(rows.columns)
    assert utc(c.UPDATED_AT) == [datetime(2026, 11, 3, 1)] and utc("known_at") == [datetime(2026, 11, 4, 10)]
    hours = con.execute("SELECT hours_expected FROM job_demand WHERE job_id = 'e'").fetchone()[0]
    assert (utc("known_at")[0] - utc(c.UPDATED_AT)[0]).total_seconds() / 3600 == hours == 33.0


def test_a_job_ending_at_midnight_holds_no_gpu_the_next_day():
    con = duckdb.connect()
    con.execute(schema_sql())
    con.execute(f"INSERT INTO job_log_records ({c.JOB_ID}, {c.SUBMITTED_AT}, {c.UPDATED_AT}, {c.STATUS}, {c.QUEUE}, "
                f"{c.MODEL_TYPE}, {c.GPU_COUNT}, {c.RUNTIME_HOURS}, record_hash, arrival, source_file, source_row, "
                "ingest_run_id, loaded_at) VALUES ('m', '2026-11-01 18:00+00', '2026-11-02 00:00+00', 'COMPLETED', "
                "'q', 'CNN', 3, 6.0, 'h', 1, 'f', 1, 'i', '2026-11-02 00:00+00')")
    key_latest(con)
    got = con.execute("SELECT day, peak_busy_gpus FROM demand_daily ORDER BY day").fetchall()
    assert got == [(date(2026, 11, 1), 3), (date(2026, 11, 2), 0)]


def test_a_stale_running_record_holds_its_gpus_as_the_plan_holds_them_not_until_now():
    """Newcomer 26 P3: a running job whose run time is unknown (`hours_expected` NULL: never forecast, no time limit,
    no finished run of its queue to read: likely an end never logged) holds its GPUs `UNKNOWN_RUNNING_HOURS` from its
    start in `peak_busy_gpus`, as the plan holds them; it was counted to now, and the demo's peaks read 4-5x the GPUs
    owned. A running job with an expected run (its forecast's P50 still ahead) is held to now, as before."""
    from gpucast.records import UNKNOWN_RUNNING_HOURS

    assert UNKNOWN_RUNNING_HOURS == 1.0  # the hours below
    con = duckdb.connect()
    con.execute(schema_sql())
    columns = (f"{c.JOB_ID}, {c.QUEUE}, {c.GPU_COUNT}, {c.SUBMITTED_AT}, {c.STATUS}, {c.UPDATED_AT}, {c.MODEL_TYPE}, "
               "record_hash, arrival, source_file, source_row, ingest_run_id, loaded_at")
    records = [("s", 4, "2026-11-01 00:00", "RUNNING", "2026-11-01 00:00"),  # stale: no forecast, nothing to read
               ("t", 1, "2026-11-02 09:00", "RUNNING", "2026-11-02 10:00"),  # forecast 100 h: running to now
               ("u", 1, "2026-11-04 12:00", "PENDING", "2026-11-04 12:00")]  # the warehouse's clock: Nov 4
    con.executemany(f"INSERT INTO job_log_records ({columns}) VALUES (?, 'q', ?, ?, ?, ?, 'CNN', 'h', ?, 'f', ?, 'i', "
                    "'2026-11-05 00:00+00')", [(j, g, f"{at}+00", st, f"{up}+00", n, n)
                                              for n, (j, g, at, st, up) in enumerate(records)])
    key_latest(con)
    con.execute("INSERT INTO score_runs (score_run_id, started_at, status) VALUES ('s1', '2026-11-02 12:00+00', 'published')")
    con.execute("INSERT INTO forecasts (job_id, target, p10, p50, p90, model, train_run_id, score_run_id, scored_at) "
                f"VALUES ('t', '{c.RUNTIME_HOURS}', 50, 100, 150, 'm', 't', 's1', '2026-11-02 12:00+00')")
    hours = dict(con.execute("SELECT job_id, hours_expected FROM job_demand WHERE status = 'RUNNING'").fetchall())
    assert hours == {"s": None, "t": 100.0}
    got = con.execute("SELECT day, peak_busy_gpus FROM demand_daily ORDER BY day").fetchall()
    assert got == [(date(2026, 11, d), peak) for d, peak in ((1, 4), (2, 1), (3, 1), (4, 1))]


def test_a_job_running_for_days_counts_the_days_its_longer_peers_ran():
    """Issue 53 item 2: a running job's expected hours (job_demand.hours_expected, in demand_daily's GPU-hours) given
    the hours it has run: the median of its queue's longer finished runs, as tasks/learn/history.py RemainingTime."""
    import numpy as np
    import polars as pl

    from gpucast.tasks.learn.history import RemainingTime

    con = duckdb.connect()
    con.execute(schema_sql())
    short, long = [2.0] * 12, [100.0 + 10 * k for k in range(14)]  # 12 runs of 2 h, 14 of 100..230 h, 1 GPU
    values = [(f"x{k}", "2026-10-01 00:00+00", "2026-10-20 00:00+00", "COMPLETED", hours)
              for k, hours in enumerate(short + long)]
    # three failed runs of 400 h and a cancelled one: a run may end either way, the medians are of every finished run
    values += [(f"f{k}", "2026-10-01 00:00+00", "2026-10-20 00:00+00", "FAILED" if k else "CANCELLED", 400.0)
               for k in range(4)]
    # r started 120 h, s 60 h before the warehouse's clock (Nov 6 00:00, z's submission); r forecast 2 h when pending
    values += [("r", "2026-11-01 00:00+00", "2026-11-01 00:00+00", "RUNNING", None),
               ("s", "2026-11-03 12:00+00", "2026-11-03 12:00+00", "RUNNING", None),
               ("z", "2026-11-06 00:00+00", "2026-11-06 00:00+00", "PENDING", None),
               # w: logged running since Oct 2 (840 h, beyond every run of q: 230 h at most), never forecast
               ("w", "2026-10-02 00:00+00", "2026-10-02 00:00+00", "RUNNING", None)]
    # time limits (issue 53, sacct's Timelimit): l as s but a 100 h limit; v as w but below a 1,000 h limit (the
    # scheduler has not stopped it: a run, not a lost end); u as w, past its 500 h limit (a record whose end was lost?)
    limits = dict.fromkeys((v[0] for v in values), None) | {"l": 100.0, "v": 1000.0, "u": 500.0}
    values += [("l", "2026-11-03 12:00+00", "2026-11-03 12:00+00", "RUNNING", None),
               ("v", "2026-10-02 00:00+00", "2026-10-02 00:00+00", "RUNNING", None),
               ("u", "2026-10-02 00:00+00", "2026-10-02 00:00+00", "RUNNING", None)]
    con.executemany(f"INSERT INTO job_log_records ({c.JOB_ID}, {c.SUBMITTED_AT}, {c.UPDATED_AT}, {c.STATUS}, {c.QUEUE}, "
                    f"{c.MODEL_TYPE}, {c.GPU_COUNT}, {c.RUNTIME_HOURS}, {c.TIME_LIMIT_HOURS}, record_hash, arrival, "
                    "source_file, source_row, ingest_run_id, loaded_at) VALUES (?, ?, ?, ?, 'q', 'CNN', 1, ?, ?, 'h', ?, "
                    "'f', 1, 'i', ?)", [(*v, limits[v[0]], n, v[2]) for n, v in enumerate(values, start=1)])
    key_latest(con)
    con.execute("INSERT INTO score_runs (score_run_id, started_at, status) VALUES ('s', '2026-10-31 00:00+00', 'published')")
    con.execute("INSERT INTO forecasts (job_id, target, p10, p50, p90, model, train_run_id, score_run_id, scored_at) "
                "VALUES ('r', 'runtime_hours', 1, 2.0, 4, 'm', 't', 's', '2026-10-31 00:00+00')")
    hours = con.execute("SELECT job_id, hours_expected, gpu_hours_forecast FROM job_demand WHERE status = 'RUNNING' "
                        "ORDER BY job_id").fetchall()
    # s, 60 h in: the runs longer than 60 h are 100..230 h (14) and the four of 400 h, their (lower, 9th) median 180 h;
    # not the queue's 100 h (nor 160 h, the completed runs' alone). r, 120 h in: the longer runs are 130..230 h (11)
    # and 4 x 400 h, median (8th) 200 h, less than as long again (240 h), within the queue's longest (400 h): 240 h;
    # not its P50 (2 h)
    # w: first seen running, longer than its queue's history supports: unknown (likely an end never logged)
    # l: s's 180 h, but never beyond its 100 h limit; v: below its limit, a run: as long again (1,680 h), never
    # beyond its queue's longest run (400 h), which it is past: the 840 h it has run; u: past its limit, unknown as w
    assert hours == [("l", 100.0, 100.0), ("r", 240.0, 240.0), ("s", 180.0, 180.0), ("u", None, None),
                     ("v", 840.0, 840.0), ("w", None, None)]
    assert con.execute("SELECT jobs_hours_unknown FROM demand_daily WHERE day = DATE '2026-10-02'").fetchone() == (2,)
    # the same jobs as history.py reads them (pending and running ones included: they are not finished runs)
    history = pl.DataFrame({c.JOB_ID: [v[0] for v in values], c.QUEUE: ["q"] * len(values), c.GPU_COUNT: 1,
                            c.STATUS: [v[3] for v in values], c.RUNTIME_HOURS: [v[4] for v in values],
                            c.TIME_LIMIT_HOURS: [limits[v[0]] for v in values], c.SUBMITTED_AT: datetime(2026, 10, 1)},
                           schema_overrides={c.RUNTIME_HOURS: pl.Float64, c.TIME_LIMIT_HOURS: pl.Float64})
    history = history.with_columns(pl.when(pl.col(c.STATUS) == "RUNNING").then(500.0)  # a logged figure of a run
                                   .otherwise(pl.col(c.RUNTIME_HOURS)).alias(c.RUNTIME_HOURS))  # still going: no end
    elapsed = np.array([120.0, 60.0])
    remaining = RemainingTime().fit(history).intervals(history.head(2), elapsed, p50=np.array([2.0, np.nan]))[1]
    assert (elapsed + remaining).tolist() == pytest.approx([240.0, 180.0])  # the warehouse and history.py agree
    limited = history.filter(pl.col(c.JOB_ID).is_in(["l", "v", "u"])).sort(c.JOB_ID)  # l, u, v
    ran = np.array([60.0, 840.0, 840.0])
    got = RemainingTime().fit(history).intervals(limited, ran)[1]
    assert got[0] + 60.0 == pytest.approx(100.0) and np.isnan(got[1]) and got[2] + 840.0 == pytest.approx(840.0)
    day = con.execute("SELECT gpu_hours_forecast FROM demand_daily WHERE day = DATE '2026-11-01'").fetchone()
    assert day == (240.0,)  # before: r's pending P50, 2 GPU-hours, for a job that has held its GPU 120 h


def test_demand_daily_reads_job_demand_once_and_gives_what_two_reads_gave():
    """`demand_daily` counts GPU-hours by submission day and GPUs held from the same `job_demand` rows: one read of
    that view (its running jobs' survival estimate paid once, not twice: 1.5-1.7 -> 1.1-1.3 CPU-s at 300k jobs),
    the same rows as the view reading it once per use."""
    import re

    con = duckdb.connect()
    con.execute(schema_sql())
    _load(con)

    def table_scans(sql: str) -> int:  # the plan's reads of job_logs: its keys' scans (a view since session 15; JSON:
        # the text tree takes 0.3 s to draw)
        return len(re.findall(r"\bjob_logs_latest\b", con.execute(f"EXPLAIN (FORMAT json) {sql}").fetchall()[0][1]))

    view = re.search(r"CREATE OR REPLACE VIEW demand_daily AS.*?;\n", schema_sql(), re.S).group(0)
    # + its last day (since job_logs is a view, DuckDB's plan of demand_daily reads the keys as often as job_demand's)
    scans = table_scans("SELECT * FROM demand_daily")
    assert scans <= table_scans("SELECT * FROM job_demand") + 1
    once = con.execute("SELECT * FROM demand_daily ORDER BY queue, day").fetchall()
    con.execute(view.replace("FROM demand GROUP BY ALL", "FROM job_demand GROUP BY ALL")
                .replace("FROM demand\n", "FROM job_demand\n"))  # each use reads job_demand itself
    assert table_scans("SELECT * FROM demand_daily") > scans
    assert con.execute("SELECT * FROM demand_daily ORDER BY queue, day").fetchall() == once == EXPECTED
