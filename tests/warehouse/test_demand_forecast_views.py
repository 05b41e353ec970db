"""`demand_backtest_summary` and `demand_forecast_vs_actual` on rows worked out by hand (the demand series
is test_demand.py's week: q1 / A100-80GB 22, 0, 0, 3 GPU-hours on Nov 1-4; q2 / unknown 11 on Nov 2, then 0)."""

from __future__ import annotations

from datetime import date

import duckdb
import numpy as np
import pytest

from gpucast.warehouse.schema import schema_sql
from tests.warehouse.test_demand import A100, _load

NOV = {d: date(2026, 11, d) for d in range(1, 7)}
RUNS = [  # run, started_at, status, as_of
    ("r1", "2026-11-03 02:00+00", "succeeded", NOV[2]),
    ("r2", "2026-11-04 02:00+00", "failed", NOV[3]),  # never read
    ("r3", "2026-11-05 02:00+00", "succeeded", NOV[4]),  # the latest: Nov 4 has happened
]


@pytest.fixture
def con():
    con = duckdb.connect()
    con.execute(schema_sql())
    _load(con)
    con.executemany("INSERT INTO demand_runs (demand_run_id, started_at, status, as_of) VALUES (?, ?, ?, ?)", RUNS)
    yield con
    con.close()


def _forecast(con, run, day, queue, gpu_type, p10, p50, p90):
    con.execute("INSERT INTO demand_forecast (demand_run_id, day, horizon, queue, gpu_type, gpu_hours_p10, gpu_hours_p50, "
                "gpu_hours_p90, jobs_p50, method, fallback_reason) VALUES (?, ?, 1, ?, ?, ?, ?, ?, 1.0, 'AutoETS', NULL)",
                [run, day, queue, gpu_type, p10, p50, p90])


def test_forecast_vs_actual_keeps_the_days_that_happened(con):
    _forecast(con, "r1", NOV[3], "q1", A100, 0.0, 1.0, 2.0)  # actual 0: within
    _forecast(con, "r1", NOV[4], "q1", A100, 0.0, 1.0, 2.0)  # actual 3 (d's P50): above the band
    _forecast(con, "r1", NOV[3], "q2", "unknown", 5.0, 6.0, 7.0)  # null GPU type is 'unknown'; actual 0
    _forecast(con, "r1", NOV[3], "q9", "unknown", 1.0, 2.0, 3.0)  # a series with no row: actual 0
    _forecast(con, "r2", NOV[4], "q1", A100, 9.0, 9.0, 9.0)  # a failed run: left out
    _forecast(con, "r3", NOV[5], "q1", A100, 0.0, 1.0, 2.0)  # has not happened yet
    got = con.execute("SELECT demand_run_id, as_of, day, queue, gpu_type, actual_gpu_hours, within_band, abs_error "
                      "FROM demand_forecast_vs_actual ORDER BY ALL").fetchall()
    assert got == [
        ("r1", NOV[2], NOV[3], "q1", A100, 0.0, True, 1.0),
        ("r1", NOV[2], NOV[3], "q2", "unknown", 0.0, False, 6.0),
        ("r1", NOV[2], NOV[3], "q9", "unknown", 0.0, False, 2.0),
        ("r1", NOV[2], NOV[4], "q1", A100, 3.0, False, 2.0),
    ]


BACKTEST_COLUMNS = ("demand_run_id, origin, horizon, day, queue, gpu_type, method, actual, gpu_hours_p10, gpu_hours_p50, "
                    "gpu_hours_p90, seasonal_naive, mase_scale")


def test_backtest_summary_scales_errors_by_seasonal_naive(con):
    rows = [  # run, origin, horizon, day, queue, gpu_type, actual, p10, p50, p90, seasonal naive, scale
        ("r3", NOV[1], 1, NOV[2], "q1", A100, 10.0, 5.0, 12.0, 15.0, 20.0, 4.0),  # |2|/4, naive |10|/4, covered
        ("r3", NOV[2], 1, NOV[3], "q1", A100, 20.0, 21.0, 14.0, 30.0, 10.0, 5.0),  # |6|/5, naive |10|/5, below P10
        ("r1", NOV[1], 1, NOV[2], "q1", A100, 10.0, 0.0, 99.0, 99.0, 10.0, 1.0),  # an older run: left out
    ]
    con.executemany(f"INSERT INTO demand_backtest ({BACKTEST_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, 'AutoETS', ?, ?, ?, ?, ?, ?)", rows)
    got = con.execute("SELECT horizon, queue, days, origins, method, mase, mase_seasonal_naive, relative_mae, coverage "
                      "FROM demand_backtest_summary ORDER BY queue NULLS LAST, horizon NULLS LAST").fetchall()
    expected = (2, 2, "AutoETS", (0.5 + 1.2) / 2, (2.5 + 2.0) / 2, 8 / 20, 0.5)
    assert [g[:2] for g in got] == [(1, "q1"), (1, None), (None, None)]  # per series, per horizon, overall
    for g in got:
        assert g[2:5] == expected[:3] and g[5:] == pytest.approx(expected[3:])


def test_the_pages_history_ends_where_the_latest_forecast_begins(con):
    from gpucast.warehouse.queries import DEMAND_HISTORY

    last_day = con.execute("SELECT max(day) FROM demand_daily").fetchone()[0]
    assert con.execute(f"SELECT max(day) FROM ({DEMAND_HISTORY})", [56, "all"]).fetchone()[0] == last_day  # no forecast yet
    _forecast(con, "r1", NOV[3], "q1", A100, 0.0, 1.0, 2.0)  # r1 is not the latest succeeded run: ignored
    _forecast(con, "r3", NOV[4], "q1", A100, 0.0, 1.0, 2.0)  # the latest forecast starts on Nov 4
    days = [d for (d,) in con.execute(f"SELECT DISTINCT day FROM ({DEMAND_HISTORY}) ORDER BY 1", [2, "all"]).fetchall()]
    assert days == [NOV[2], NOV[3]]  # the 2 days before it, not the days the forecast covers


def test_the_pages_outlook_has_the_total_with_its_own_p90(con):
    """Issue 53 item 3: beside each queue, the site's total: its history summed over the queues, its forecast the
    total's own band (`current_demand_forecast_total`), whose P90 (10) is under the queues' P90s summed (12)."""
    from gpucast.warehouse.queries import DEMAND_HISTORY, DEMAND_OUTLOOK, TOTAL_QUEUE

    _forecast(con, "r3", NOV[5], "q1", A100, 1.0, 2.0, 6.0)
    _forecast(con, "r3", NOV[5], "q2", "unknown", 1.0, 3.0, 6.0)
    con.execute("INSERT INTO demand_forecast_total (demand_run_id, day, horizon, gpu_hours_p10, gpu_hours_p50, "
                "gpu_hours_p90, method) VALUES ('r3', ?, 1, 3.0, 5.0, 10.0, 'LevelBlend')", [NOV[5]])
    outlook = con.execute(f"SELECT queue, gpu_hours_p10, gpu_hours_p50, gpu_hours_p90, method, series FROM ({DEMAND_OUTLOOK})",
                          [TOTAL_QUEUE]).fetchall()
    assert outlook == [(TOTAL_QUEUE, 3.0, 5.0, 10.0, "LevelBlend", 1), ("q1", 1.0, 2.0, 6.0, "AutoETS", 1),
                       ("q2", 1.0, 3.0, 6.0, "AutoETS", 1)]
    # a queue on two GPU types: its band is theirs summed, and `series` says so (the page labels it: site.bands_summed)
    _forecast(con, "r3", NOV[5], "q2", A100, 1.0, 1.0, 4.0)
    assert con.execute(f"SELECT gpu_hours_p90, series FROM ({DEMAND_OUTLOOK}) WHERE queue = 'q2'",
                       [TOTAL_QUEUE]).fetchall() == [(10.0, 2)]
    con.execute("DELETE FROM demand_forecast WHERE queue = 'q2' AND gpu_type = ?", [A100])
    history = dict(((d, q), h) for d, q, h in con.execute(f"SELECT * FROM ({DEMAND_HISTORY})", [3, TOTAL_QUEUE]).fetchall())
    assert history[(NOV[2], TOTAL_QUEUE)] == history[(NOV[2], "q1")] + history[(NOV[2], "q2")] > 0
    # one queue: no total beside it (it would be the queue again)
    con.execute("DELETE FROM demand_forecast WHERE queue = 'q2'")
    assert [r[0] for r in con.execute(f"SELECT queue FROM ({DEMAND_OUTLOOK})", [TOTAL_QUEUE]).fetchall()] == ["q1"]


def test_the_pages_outlook_shows_a_queues_own_band_not_its_series_bands_summed(con):
    """Session 9 (issue 53 item 3): a queue on two GPU types whose total is forecast as a series of its own
    (`demand_forecast_queue`): the outlook shows that band (P90 7), one series, not its two series' P90s summed (10)."""
    from gpucast.warehouse.queries import DEMAND_OUTLOOK, TOTAL_QUEUE

    _forecast(con, "r3", NOV[5], "q2", "unknown", 1.0, 3.0, 6.0)
    _forecast(con, "r3", NOV[5], "q2", A100, 1.0, 1.0, 4.0)
    con.execute("INSERT INTO demand_forecast_queue (demand_run_id, day, horizon, queue, gpu_hours_p10, gpu_hours_p50, "
                "gpu_hours_p90, method) VALUES ('r3', ?, 1, 'q2', 2.5, 4.0, 7.0, 'LongLevel'), "
                "('r1', ?, 1, 'q2', 0.0, 0.0, 99.0, 'AutoETS')", [NOV[5], NOV[5]])  # r1: not the latest run
    got = con.execute(f"SELECT queue, gpu_hours_p10, gpu_hours_p50, gpu_hours_p90, method, series FROM ({DEMAND_OUTLOOK})",
                      [TOTAL_QUEUE]).fetchall()
    assert got == [("q2", 2.5, 4.0, 7.0, "LongLevel", 1)]


def test_backtest_summary_scores_jobs_submitted_beside_gpu_hours(con):
    rows = [  # run, origin, horizon, day, queue, gpu_type, jobs: method, actual, p10, p50, p90, seasonal naive, scale
        ("r3", NOV[1], 1, NOV[2], "q1", A100, "SeasWA", 10.0, 8.0, 9.0, 12.0, 14.0, 2.0),  # |1|/2, naive |4|/2, covered
        ("r3", NOV[2], 1, NOV[3], "q1", A100, "SeasWA", 6.0, 7.0, 9.0, 11.0, 3.0, 3.0),  # |3|/3, naive |3|/3, below P10
    ]
    con.executemany(f"INSERT INTO demand_backtest ({BACKTEST_COLUMNS}, jobs_method, actual_jobs, jobs_p10, jobs_p50, "
                    "jobs_p90, jobs_seasonal_naive, jobs_mase_scale) "
                    "VALUES (?, ?, ?, ?, ?, ?, 'AutoETS', 1, 1, 1, 1, 1, 1, ?, ?, ?, ?, ?, ?, ?)", rows)
    got = con.execute("SELECT jobs_method, jobs_mase, jobs_mase_seasonal_naive, jobs_relative_mae, jobs_coverage "
                      "FROM demand_backtest_summary WHERE horizon IS NULL").fetchall()
    assert got == [("SeasWA", pytest.approx((0.5 + 1.0) / 2), pytest.approx((2.0 + 1.0) / 2), pytest.approx(4 / 7),
                    pytest.approx(0.5))]


def test_backtest_summaries_compare_with_seasonal_naive_on_the_days_it_has_a_forecast(con):
    """Newcomer 26 P1: a series' first season has no seasonal naive forecast; relative MAE is over the days that
    have one, on both sides (the night log's figure, `tasks/demand/backtest.relative_mae`). The views summed those
    days' errors into the numerator only: the demo published 1.47 where the log said 0.90."""
    import polars as pl

    from gpucast.tasks.demand.backtest import relative_mae

    rows = [  # run, origin, horizon, day, queue, gpu_type, actual, p10, p50, p90, seasonal naive, scale
        ("r3", NOV[1], 1, NOV[2], "q1", A100, 10.0, 5.0, 12.0, 15.0, None, 4.0),  # |2|, no baseline: left out
        ("r3", NOV[2], 1, NOV[3], "q1", A100, 20.0, 14.0, 14.0, 30.0, 10.0, 5.0),  # |6|, naive |10|
        ("r3", NOV[3], 1, NOV[4], "q1", A100, 10.0, 5.0, 9.0, 15.0, 14.0, 5.0),  # |1|, naive |4|
    ]
    jobs = [(None, 3.0), (4.0, 6.0), (5.0, 9.0)]  # (seasonal naive, P50) of jobs submitted; actual 5 each day
    con.executemany(f"INSERT INTO demand_backtest ({BACKTEST_COLUMNS}, jobs_method, actual_jobs, jobs_p10, jobs_p50, "
                    "jobs_p90, jobs_seasonal_naive, jobs_mase_scale) VALUES (?, ?, ?, ?, ?, ?, 'AutoETS', ?, ?, ?, ?, "
                    "?, ?, 'AutoETS', 5, 0, ?, 20, ?, 1)", [(*r, p, n) for r, (n, p) in zip(rows, jobs, strict=True)])
    con.executemany("INSERT INTO demand_backtest_total (demand_run_id, origin, horizon, day, method, actual, gpu_hours_p10, "
                    "gpu_hours_p50, gpu_hours_p90, seasonal_naive, mase_scale) VALUES (?, ?, ?, ?, 'AutoETS', ?, ?, ?, ?, ?, ?)",
                    [r[:4] + r[6:] for r in rows])
    frame = pl.DataFrame({"gpu_hours_p50": [r[8] for r in rows], "actual": [r[6] for r in rows],
                          "seasonal_naive": [r[10] for r in rows], "jobs_p50": [p for _, p in jobs],
                          "actual_jobs": [5.0] * 3, "jobs_seasonal_naive": [n for n, _ in jobs]})
    logged = relative_mae(frame)
    assert logged == {"gpu_hours": pytest.approx(7 / 14), "jobs_submitted": pytest.approx(5 / 1)}
    got = con.execute("SELECT relative_mae, jobs_relative_mae FROM demand_backtest_summary WHERE horizon IS NULL").fetchone()
    assert got == (pytest.approx(logged["gpu_hours"]), pytest.approx(logged["jobs_submitted"]))
    total = con.execute("SELECT relative_mae FROM demand_backtest_total_summary").fetchone()
    assert total == (pytest.approx(logged["gpu_hours"]),)


def test_the_pages_demand_by_day_band_is_the_p90_of_the_days_sum():
    """Issue 53 item 3: a day's pending GPU-hours at P10 / P50 / P90 of their sum (each job a lognormal through its
    P50 and P90, independent, the sum moment-matched), not the jobs' quantiles summed. One job keeps its own band
    (x its GPUs); 200 like jobs: a P90 well under their P90s summed and within 5% of a simulation's."""
    from gpucast.warehouse.queries import DEMAND_BY_DAY

    con = duckdb.connect()
    con.execute("CREATE TABLE pending_forecasts (job_id VARCHAR, target VARCHAR, submitted_at TIMESTAMP, queue VARCHAR, "
                "p10 DOUBLE, p50 DOUBLE, p90 DOUBLE)")
    con.execute("CREATE TABLE job_logs (job_id VARCHAR, gpu_count INTEGER)")
    con.execute("INSERT INTO pending_forecasts VALUES ('one', 'runtime_hours', '2026-11-05 10:00', 'q1', 0.5, 2.0, 8.0)")
    con.execute("INSERT INTO job_logs VALUES ('one', 2)")
    con.executemany("INSERT INTO pending_forecasts VALUES (?, 'runtime_hours', '2026-11-06 10:00', 'q1', 0.3, 1.0, 4.0)",
                    [(f"j{i}",) for i in range(200)])
    con.executemany("INSERT INTO job_logs VALUES (?, NULL)", [(f"j{i}",) for i in range(200)])  # no count: 1 GPU
    con.execute("INSERT INTO pending_forecasts VALUES ('m', 'peak_gpu_mem_gb', '2026-11-06 10:00', 'q1', 1, 9, 99)")
    one, many = con.execute(f"SELECT gpu_hours_p10, gpu_hours_p50, gpu_hours_p90, jobs FROM ({DEMAND_BY_DAY})").fetchall()
    assert one == pytest.approx((2.0 * 2.0 ** 2 / 8.0, 4.0, 16.0, 1))
    sigma = np.log(4.0) / 1.2815515655446004
    simulated = np.exp(np.random.default_rng(0).normal(0.0, sigma, (20_000, 200))).sum(axis=1)
    assert many[3] == 200 and many[2] < 0.6 * 200 * 4.0  # the P90s summed: 800
    assert many[2] == pytest.approx(np.quantile(simulated, 0.9), rel=0.05)
    assert many[1] == pytest.approx(np.median(simulated), rel=0.05) and many[1] > 200 * 1.0  # above the P50s summed
    con.close()
