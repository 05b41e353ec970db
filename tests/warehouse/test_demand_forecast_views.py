"""`demand_backtest_summary` and `demand_forecast_vs_actual` on rows worked out by hand (the demand series
is test_demand.py's week: q1 / A100-80GB 22, 0, 0, 3 GPU-hours on Nov 1-4; q2 / unknown 11 on Nov 2, then 0)."""

from __future__ import annotations

from datetime import date

import duckdb
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
    assert con.execute(f"SELECT max(day) FROM ({DEMAND_HISTORY})", [56]).fetchone()[0] == last_day  # no forecast yet
    _forecast(con, "r1", NOV[3], "q1", A100, 0.0, 1.0, 2.0)  # r1 is not the latest succeeded run: ignored
    _forecast(con, "r3", NOV[4], "q1", A100, 0.0, 1.0, 2.0)  # the latest forecast starts on Nov 4
    days = [d for (d,) in con.execute(f"SELECT DISTINCT day FROM ({DEMAND_HISTORY}) ORDER BY 1", [2]).fetchall()]
    assert days == [NOV[2], NOV[3]]  # the 2 days before it, not the days the forecast covers


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
