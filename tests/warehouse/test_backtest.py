"""`forecast_backtest`: each completed job against the last forecast published before it started."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import pytest

from gpucast.expectations import contract as c
from gpucast.warehouse import backtest
from gpucast.warehouse.schema import schema_sql
from tests.conftest import add_latest, key_latest


def t(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, tzinfo=UTC)


# job, status records (status, updated_at), measured peak memory
JOBS = {
    "a": ([("PENDING", t(1)), ("RUNNING", t(2, 12)), ("COMPLETED", t(3))], 10.0),   # forecast by s1 and s2 before it ran
    "b": ([("PENDING", t(1)), ("COMPLETED", t(3))], 20.0),                           # no RUNNING record: before completion
    "c": ([("PENDING", t(2, 18)), ("RUNNING", t(2, 20)), ("COMPLETED", t(3))], 5.0),  # ran before any forecast of it
    "d": ([("PENDING", t(1))], None),                                                # still pending: not back-tested
}
# score runs: id, scored_at, status; forecasts of memory: run -> job -> (p10, p50, p90, safe_request_gb)
RUNS = [("s1", t(2, 0), "published"), ("s2", t(2, 6), "published"), ("s3", t(2, 8), "failed"), ("s4", t(2, 22), "published")]
FORECASTS = {
    "s1": {"a": (1.0, 2.0, 3.0, 3.3), "b": (10.0, 15.0, 30.0, 33.0)},
    "s2": {"a": (8.0, 12.5, 14.0, 15.4), "d": (1.0, 1.0, 1.0, 1.1)},
    "s3": {"a": (0.1, 0.1, 0.1, 0.1)},                 # a failed run is never what planners saw
    "s4": {"b": (1.0, 1.0, 1.0, 1.1), "c": (5.0, 5.0, 5.0, 5.5)},  # b: after it started? no start known; before completion
}


@pytest.fixture
def con():
    con = duckdb.connect()
    con.execute(schema_sql())
    fill(con)
    return con


def fill(con: duckdb.DuckDBPyConnection, jobs: dict = JOBS, runs: list = RUNS, forecasts: dict = FORECASTS,
         train_run_id: str = "tr1") -> None:
    """`jobs`' records, the latest in `job_logs`, and `runs`' forecasts of memory (made by `train_run_id`'s
    champion), into a warehouse with the schema."""
    arrival = con.execute("SELECT count(*) FROM job_log_records").fetchall()[0][0]
    for job_id, (records, mem) in jobs.items():
        for status, at in records:
            arrival += 1
            done = status == "COMPLETED"
            con.execute(f"INSERT INTO job_log_records ({c.JOB_ID}, {c.SUBMITTED_AT}, {c.UPDATED_AT}, {c.STATUS}, "
                        f"{c.QUEUE}, {c.MODEL_TYPE}, {c.PEAK_GPU_MEM_GB}, record_hash, arrival, source_file, source_row, "
                        "ingest_run_id, loaded_at) VALUES (?, ?, ?, ?, 'q1', 'CNN', ?, ?, ?, 'f', 1, 'i', ?)",
                        [job_id, records[0][1], at, status, mem if done else None, f"h{arrival}", arrival, at])
        status, at = records[-1]
        key_latest(con, f"{c.JOB_ID} = ? AND {c.UPDATED_AT} = ?", [job_id, at])
    for run, at, status in runs:
        con.execute("INSERT INTO score_runs (score_run_id, started_at, status) VALUES (?, ?, ?)", [run, at, status])
        for job_id, (p10, p50, p90, safe) in forecasts[run].items():
            con.execute("INSERT INTO forecasts (job_id, target, p10, p50, p90, model, train_run_id, score_run_id, scored_at, "
                        "safe_request_gb) VALUES (?, ?, ?, ?, ?, 'lightgbm', ?, ?, ?, ?)",
                        [job_id, c.PEAK_GPU_MEM_GB, p10, p50, p90, train_run_id, run, at, safe])


# The days after the night 11-04 (review 63 S2-1), as a warehouse re-running that night already holds them: a job
# forecast before the night that completed after it ("future"), and one forecast and completed after it ("later"),
# forecast by a champion trained after the night ("tr2", decided on 11-05).
LATER_JOBS = {
    "future": ([("PENDING", t(1)), ("COMPLETED", t(10))], 40.0),
    "later": ([("PENDING", t(5)), ("RUNNING", t(7)), ("COMPLETED", t(8))], 8.0),
}
LATER_RUNS = [("s5", t(6), "published")]
LATER_FORECASTS = {"s5": {"later": (7.0, 8.0, 9.0, 9.9)}}
NIGHT = t(4)


def later_days(con: duckdb.DuckDBPyConnection) -> None:
    """LATER_JOBS and their forecasts (`future`'s by s1, before the night), and the train runs: tr1 (11-01) the
    champion in place on the night, tr2 the later night's (a backfill of 11-05, trained after it on the wall clock)."""
    fill(con, {"future": LATER_JOBS["future"]}, [], {})
    con.execute("INSERT INTO forecasts (job_id, target, p10, p50, p90, model, train_run_id, score_run_id, scored_at, "
                "safe_request_gb) VALUES ('future', ?, 30.0, 35.0, 45.0, 'lightgbm', 'tr1', 's1', ?, 49.5)",
                [c.PEAK_GPU_MEM_GB, t(2, 0)])
    fill(con, {"later": LATER_JOBS["later"]}, LATER_RUNS, LATER_FORECASTS, train_run_id="tr2")
    con.execute("INSERT INTO train_runs (train_run_id, started_at, status, as_of) VALUES ('tr1', ?, 'succeeded', NULL), "
                "('tr2', ?, 'succeeded', ?)", [t(1), t(20), t(5)])
    con.execute("INSERT INTO model_champions (train_run_id, target, model, labelled_rows, model_dir) "
                "VALUES ('tr1', ?, 'lightgbm', 10, '/m1'), ('tr2', ?, 'lightgbm', 12, '/m2')",
                [c.PEAK_GPU_MEM_GB, c.PEAK_GPU_MEM_GB])


def rows(con) -> dict[str, tuple]:
    return {r[0]: r[1:] for r in con.execute(
        "SELECT job_id, score_run_id, p50, actual, ape, in_p10_p90, within_p90, under_provisioned, start_known "
        "FROM forecast_backtest WHERE target = ? ORDER BY job_id", [c.PEAK_GPU_MEM_GB]).fetchall()}


def test_each_completed_job_meets_the_last_published_forecast_before_it_ran(con):
    counts = backtest.run(con, days=7, now=t(4))
    got = rows(con)
    assert set(got) == {"a", "b", "c"}  # d never completed
    # a: s2 is the last published before it started (s3 failed, s4 came after); 12.5 vs 10: 25% off, in [8, 14]
    assert got["a"] == ("s2", 12.5, 10.0, pytest.approx(0.25), True, True, False, True)
    # b: no start logged, so the last before completion: s4; 1.0 vs 20: P90 under, safe request under-provisions
    assert got["b"] == ("s4", 1.0, 20.0, pytest.approx(0.95), False, False, True, False)
    # c: every forecast of it came after it started: "not forecast", never an error
    assert got["c"][0] is None and got["c"][1] is None and got["c"][3] is None
    assert counts.jobs == 3 and counts.forecast == 2 and counts.not_forecast == 1


def test_the_summary_and_a_rerun_of_the_window(con):
    backtest.run(con, days=7, now=t(4))
    backtest.run(con, days=7, now=t(4))  # idempotent: the window's rows are replaced, not added
    assert con.execute("SELECT count(*) FROM forecast_backtest WHERE target = ?", [c.PEAK_GPU_MEM_GB]).fetchall() == [(3,)]
    summary = backtest.summary(con, 7, t(4)).filter(backtest.pl.col("target") == c.PEAK_GPU_MEM_GB)
    by_model = {r["model"]: r for r in summary.iter_rows(named=True)}
    assert by_model["(not forecast)"]["jobs"] == 1 and by_model["(not forecast)"]["not_forecast"] == 1
    fit = by_model["lightgbm"]
    assert fit["jobs"] == 2 and fit["mape"] == pytest.approx(60.0)  # (25% + 95%) / 2
    assert fit["p10_p90_coverage"] == 0.5 and fit["p90_coverage"] == 0.5 and fit["under_provisioned"] == 0.5


def test_interval_coverage_per_group_counts_only_forecast_jobs(con):
    backtest.run(con, days=7, now=t(4))
    (row,) = con.execute("SELECT model_type, queue, jobs, p10_p90_coverage, p90_coverage, enough_jobs FROM interval_coverage "
                         "WHERE target = ?", [c.PEAK_GPU_MEM_GB]).fetchall()
    assert row == ("CNN", "q1", 2, 0.5, 0.5, False)


def test_a_completion_logged_ahead_of_the_logs_clock_does_not_move_the_window(con):
    """A long job whose log already carries its end months ahead must not push the window past the
    jobs that were forecast (the window follows the latest submission)."""
    add_latest(con, "SELECT * REPLACE ('far' AS job_id, TIMESTAMPTZ '2027-03-01 00:00+00' AS updated_at) "
               "FROM job_logs WHERE job_id = 'a'")
    backtest.run(con, days=7, now=t(4))
    assert set(rows(con)) == {"a", "b", "c", "far"}


def test_a_record_from_the_future_does_not_move_the_window(con):
    """Issue 27 item 7: one job submitted "2099-01-01" (loaded before the time rule, or through a clock error)
    moved the window to "completed since 2098-12-25" and left the gate without evidence. The window never
    starts after the run's own clock minus its days."""
    add_latest(con, "SELECT * REPLACE ('future' AS job_id, TIMESTAMPTZ '2099-01-01 00:00+00' AS "
               "submitted_at, TIMESTAMPTZ '2099-01-02 00:00+00' AS updated_at) FROM job_logs WHERE job_id = 'a'")
    counts = backtest.run(con, days=7, now=t(4))
    assert counts.window_start == datetime(2026, 10, 28, tzinfo=UTC)  # now (11-04) - 7 days, not 2098-12-25
    assert set(rows(con)) == {"a", "b", "c", "future"} and counts.forecast == 2
    assert backtest.champion_window(con, c.PEAK_GPU_MEM_GB, "tr1", 7, t(4))["job_id"].to_list() == ["a", "b"]


def test_without_records_from_the_future_the_window_follows_the_logs(con):
    """A replay (the demo, a backfill) of past days keeps the logs' own clock: min(now, latest submission)."""
    counts = backtest.run(con, days=7, now=datetime(2027, 1, 1, tzinfo=UTC))
    assert counts.window_start == datetime(2026, 10, 26, 18, tzinfo=UTC)  # latest submission (c, 11-02 18:00) - 7 days


def test_the_champions_coverage_is_one_typed_record_per_target(con):
    """What the drift warning and the nightly report read (`BacktestResult.champions`): attributes, not keys."""
    from gpucast.records.results import ChampionCoverage

    con.execute("INSERT INTO train_runs (train_run_id, started_at, status) VALUES ('tr1', ?, 'succeeded')", [t(1)])
    con.execute("INSERT INTO model_champions (train_run_id, target, model, labelled_rows, model_dir) "
                "VALUES ('tr1', ?, 'lightgbm', 10, '/m')", [c.PEAK_GPU_MEM_GB])
    assert backtest.champion_coverage(con, 7, t(4)) == ()  # before the window is computed: nothing in it
    backtest.run(con, days=7, now=t(4))
    (got,) = backtest.champion_coverage(con, 7, t(4))
    assert got == ChampionCoverage(target=c.PEAK_GPU_MEM_GB, model="lightgbm", train_run_id="tr1", jobs=2,
                                   p90_coverage=0.5, p10_p90_coverage=0.5, mape=pytest.approx(60.0))


def test_a_backfills_window_ends_at_its_night(con):
    """Review 63 S2-1: a past night re-run on a warehouse holding later days reads what that night could: jobs
    completed after it ("future", forecast before it) and forecasts published after it ("later") do not count.
    A live night's window (no `until`) stays open at the end, as before."""
    later_days(con)
    counts = backtest.run(con, days=7, now=NIGHT, until=NIGHT)
    assert set(rows(con)) == {"a", "b", "c"} and counts.jobs == 3 and counts.forecast == 2
    assert backtest.champion_window(con, c.PEAK_GPU_MEM_GB, "tr1", 7, NIGHT, until=NIGHT)["job_id"].to_list() == ["a", "b"]
    assert backtest.summary(con, 7, NIGHT, until=NIGHT).filter(backtest.pl.col("model") == "lightgbm")["jobs"].sum() == 2
    live = backtest.run(con, days=7, now=NIGHT)  # the wall clock's reading of the same window: open at the end
    assert set(rows(con)) == {"a", "b", "c", "future", "later"} and live.jobs == 5
    assert backtest.champion_window(con, c.PEAK_GPU_MEM_GB, "tr1", 7, NIGHT)["job_id"].to_list() == ["a", "b", "future"]


def test_a_backfills_rerun_keeps_the_later_nights_rows(con):
    """Re-running the night 11-04 after the night 11-09 rewrote the window: the rows it does not rewrite (jobs
    completed after 11-04) keep what the later night wrote; the night's own rows are replaced, not added."""
    later_days(con)
    backtest.run(con, days=7, now=t(9), until=t(9))
    backtest.run(con, days=7, now=NIGHT, until=NIGHT)
    at = dict(con.execute("SELECT job_id, backtested_at FROM forecast_backtest WHERE target = ?",
                          [c.PEAK_GPU_MEM_GB]).fetchall())
    assert at == {"a": NIGHT, "b": NIGHT, "c": NIGHT, "later": t(9)}  # "future" (11-10) is neither night's


def test_a_backfill_that_keeps_an_older_incumbent_leaves_the_live_champion_in_place(con):
    """Review 64 S1-1: a backfill of 11-03 trained on 11-25 keeps the champion in place on its night (tr1); the live
    champion (scoring, the next night's gate, the model folders kept) stays the latest night's (tr2), not tr1's,
    whose folder a prune may have removed. The view and `CHAMPIONS_AS_OF` order runs by the same night."""
    from gpucast.warehouse import forecast, training

    later_days(con)
    con.execute("INSERT INTO train_runs (train_run_id, started_at, status, as_of) VALUES ('tr3', ?, 'succeeded', ?)",
                [t(25), t(3)])
    con.execute("INSERT INTO model_champions (train_run_id, target, model, labelled_rows, model_dir, champion_run_id) "
                "VALUES ('tr3', ?, 'lightgbm', 11, '/m1', 'tr1')", [c.PEAK_GPU_MEM_GB])
    assert [(ch.train_run_id, ch.model_dir) for ch in forecast.latest_champions(con)] == [("tr2", "/m2")]
    assert forecast.champions_as_of(con, t(30)) == forecast.latest_champions(con)
    assert [ch.train_run_id for ch in forecast.champions_as_of(con, t(4))] == ["tr1"]  # tr3's own night keeps tr1
    assert "tr2" in training.runs_to_keep(con, 1)


def test_a_backfills_champion_is_the_one_in_place_on_its_night(con):
    """The champion gate and the drift warning of a backfill judge the champion of the latest earlier night (a run's
    night: its `as_of`, or its start for a live run), not the warehouse's latest; a live night judges the latest."""
    from gpucast.records.results import ChampionCoverage
    from gpucast.warehouse import forecast

    later_days(con)
    assert [ch.train_run_id for ch in forecast.champions_as_of(con, NIGHT)] == ["tr1"]
    assert [ch.train_run_id for ch in forecast.champions_as_of(con, t(5))] == ["tr1"]  # not the same night's own run
    assert [ch.train_run_id for ch in forecast.champions_as_of(con, t(6))] == ["tr2"]
    assert forecast.champions_as_of(con, None) == forecast.latest_champions(con) == forecast.champions_as_of(con, t(30))
    backtest.run(con, days=7, now=NIGHT, until=NIGHT)
    (got,) = backtest.champion_coverage(con, 7, NIGHT, until=NIGHT)
    assert got == ChampionCoverage(target=c.PEAK_GPU_MEM_GB, model="lightgbm", train_run_id="tr1", jobs=2,
                                   p90_coverage=0.5, p10_p90_coverage=0.5, mape=pytest.approx(60.0))
    backtest.run(con, days=7, now=NIGHT)
    assert [r.train_run_id for r in backtest.champion_coverage(con, 7, NIGHT)] == ["tr2"]  # a live night's: the latest
