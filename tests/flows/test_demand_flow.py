"""`gpucast demand` and `gpucast backtest` as planners meet them: each publishes what it writes, so
`gpucast sql` (the planners' copy) shows it at once; a nightly whose demand step fails still publishes."""

from __future__ import annotations

import json
from datetime import date

import pytest

from gpucast.flows.cli import main
from gpucast.tasks.simulate import Rhythm, SimConfig, write_logs

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

# five weeks in the past (ingest refuses times after its clock): enough to cross-validate some series
HISTORY = SimConfig(days=35, jobs_per_day=30, pending_fraction=0.1, seed=5, start=date(2026, 9, 6), rhythm=Rhythm())


def _sql(capsys, query: str) -> list[dict]:
    capsys.readouterr()
    assert main(["sql", query, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _ingest_unpublished(home, tmp_path) -> None:
    from gpucast.flows.ingest import ingest_job_logs
    from gpucast.flows.settings import Settings

    write_logs(tmp_path / "logs", HISTORY)
    ingest_job_logs(paths=[str(tmp_path / "logs")], publish=False, storage=Settings.from_env().storage)
    assert not (home / "published.duckdb").exists()


def test_gpucast_demand_forecasts_backtests_and_publishes(home, tmp_path, capsys):
    _ingest_unpublished(home, tmp_path)
    assert main(["demand", "--horizon-days", "7"]) == 0
    out = capsys.readouterr().out
    assert "day1_p50" in out and "current_demand_forecast" in out
    (run,) = _sql(capsys, "SELECT status, as_of, days, series, fallback_series FROM demand_runs")
    assert run["status"] == "succeeded" and run["days"] == 7 and run["as_of"] == "2026-10-10"  # the last simulated day
    rows = _sql(capsys, "SELECT queue, gpu_type, count(*) AS days, min(day) AS first, min(gpu_hours_p10) AS low, "
                        "bool_and(gpu_hours_p10 <= gpu_hours_p50 AND gpu_hours_p50 <= gpu_hours_p90) AS ordered, "
                        "any_value(method) AS method FROM current_demand_forecast GROUP BY ALL")
    assert len(rows) == run["series"] >= 3  # three queues, with and without a logged GPU type
    assert all(r["days"] == 7 and r["first"] == "2026-10-11" and r["low"] >= 0 and r["ordered"] for r in rows)
    assert {r["gpu_type"] for r in rows} >= {"unknown", "A100-80GB"}
    summary = _sql(capsys, "SELECT horizon, origins, mase, mase_seasonal_naive, coverage FROM demand_backtest_summary "
                           "WHERE queue IS NULL AND horizon IS NOT NULL ORDER BY horizon")
    assert [s["horizon"] for s in summary] == list(range(1, 8))
    assert all(s["origins"] >= 3 and 0 <= s["coverage"] <= 1 and s["mase"] > 0 for s in summary)
    # issue 53 item 3: the site's total with its own band, and each series' part of its P90 adding up to it
    total = _sql(capsys, "SELECT count(*) AS n, bool_and(gpu_hours_p10 <= gpu_hours_p50 AND gpu_hours_p50 <= "
                         "gpu_hours_p90) AS ordered FROM current_demand_forecast_total")
    assert total == [{"n": 7, "ordered": True}]
    shares = _sql(capsys, "SELECT f.day, sum(f.gpu_hours_p90_of_total) AS share, any_value(t.gpu_hours_p90) AS total "
                          "FROM current_demand_forecast f JOIN current_demand_forecast_total t USING (day) GROUP BY f.day")
    assert len(shares) == 7 and all(abs(s["share"] - s["total"]) <= 1e-6 * max(1.0, s["total"]) for s in shares)
    # session 14: and their parts of its P50, adding up to the total's own P50 (the plan's gpus_site_p50)
    halves = _sql(capsys, "SELECT f.day, sum(f.gpu_hours_p50_of_total) AS share, any_value(t.gpu_hours_p50) AS total "
                          "FROM current_demand_forecast f JOIN current_demand_forecast_total t USING (day) GROUP BY f.day")
    assert len(halves) == 7 and all(abs(s["share"] - s["total"]) <= 1e-6 * max(1.0, s["total"]) for s in halves)
    # session 9: each queue's total with its own band (three queues, each of two series), the shares adding up to it
    queues = _sql(capsys, "SELECT f.day, f.queue, sum(f.gpu_hours_p90_of_queue) AS share, any_value(q.gpu_hours_p90) AS "
                          "own, count(*) AS series FROM current_demand_forecast f JOIN current_demand_forecast_queue q "
                          "USING (day, queue) GROUP BY f.day, f.queue")
    assert len(queues) == 7 * len({r["queue"] for r in rows})
    assert all(abs(q["share"] - q["own"]) <= 1e-6 * max(1.0, q["own"]) for q in queues)
    (backtest_total,) = _sql(capsys, "SELECT origins, coverage FROM demand_backtest_total_summary")
    assert backtest_total["origins"] >= 3 and 0 <= backtest_total["coverage"] <= 1
    # the demand run's own forecast days have not happened: nothing to compare yet
    assert _sql(capsys, "SELECT count(*) AS n FROM demand_forecast_vs_actual")[0]["n"] == 0


def test_gpucast_backtest_publishes_what_it_writes(home, tmp_path, capsys):
    _ingest_unpublished(home, tmp_path)
    assert main(["backtest", "--window-days", "60"]) == 0
    written = _sql(capsys, "SELECT count(*) AS n FROM forecast_backtest")[0]["n"]
    assert written > 0  # visible in the planners' copy without waiting for the night


def test_a_failing_demand_forecast_is_a_warning_for_the_night(home, tmp_path, monkeypatch):
    """The nightly's step: the run is recorded failed with its error, the night gets a warning, not an error."""
    import duckdb

    from gpucast.flows import demand
    from gpucast.flows.settings import Settings

    _ingest_unpublished(home, tmp_path)

    def broken(*args, **kwargs):
        raise MemoryError("out of memory while forecasting")

    monkeypatch.setattr(demand, "forecast_demand", broken)
    out, warnings = demand.demand_step(Settings.from_env(), None)
    assert out is None and warnings == ["demand forecast failed, planners keep the previous one: "
                                        "MemoryError: out of memory while forecasting"]
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT status, message FROM demand_runs").fetchall() == [
            ("failed", "MemoryError: out of memory while forecasting")]
