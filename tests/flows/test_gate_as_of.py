"""A backfill's night (`gpucast nightly --as-of`) trains against the backtest window its own backtest step wrote.

The nightly's backtest step anchors the window at the night's clock (`as_of`); the champion gate read its window
with the wall clock, so a past night re-run on a warehouse that already holds later days judged the gate on
another window (here: none) than the one the night reported.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from gpucast.expectations import contract as c
from tests.conftest import add_latest
from tests.warehouse.test_backtest import NIGHT, fill, later_days, t


def test_a_past_nights_gate_reads_the_window_its_backtest_step_wrote(home):
    from gpucast.flows.backtest import backtest_step
    from gpucast.flows.settings import Settings
    from gpucast.flows.train import gate_windows
    from gpucast.warehouse import db

    settings = Settings.from_env().ensure()
    with db.writer(settings.storage) as con:
        fill(con)
        # the warehouse already knows a later day: a job submitted 16 days after the night re-run here
        add_latest(con, "SELECT * REPLACE ('late' AS job_id, TIMESTAMPTZ '2026-11-20 00:00+00' AS "
                   "submitted_at, TIMESTAMPTZ '2026-11-20 01:00+00' AS updated_at) FROM job_logs WHERE job_id = 'd'")
        con.execute("INSERT INTO train_runs (train_run_id, started_at, status) VALUES ('tr1', ?, 'succeeded')", [t(1)])
        con.execute("INSERT INTO model_champions (train_run_id, target, model, labelled_rows, model_dir) "
                    "VALUES ('tr1', ?, 'lightgbm', 10, '/m')", [c.PEAK_GPU_MEM_GB])
    night = t(4)
    counts = backtest_step.fn(settings.storage, 7, night)
    assert counts.window_start == datetime(2026, 10, 28, tzinfo=UTC) and counts.forecast == 2

    windows = gate_windows.fn(settings, (c.PEAK_GPU_MEM_GB,), refresh=False, as_of=night)
    assert windows.of(c.PEAK_GPU_MEM_GB).jobs["job_id"].to_list() == ["a", "b"]  # the jobs the night's backtest judged
    # the wall clock's window (the behaviour before): starts at the later day - 7, where no forecast job completed
    assert windows.of(c.PEAK_GPU_MEM_GB).jobs.height > gate_windows.fn(
        settings, (c.PEAK_GPU_MEM_GB,), refresh=False).of(c.PEAK_GPU_MEM_GB).jobs.height


def test_a_past_nights_gate_judges_its_own_champion_on_what_it_knew(home):
    """Review 63 S2-1: the warehouse already holds the days after the night (a job forecast before it and completed
    after it, a later champion and its forecasts). The backfill's backtest step and gate read the night's window up
    to its clock, judge the champion in place then, and its drift warning covers that champion; the wall clock's
    gate (a live night) judges the latest champion."""
    from gpucast.flows.backtest import backtest_step
    from gpucast.flows.settings import Settings
    from gpucast.flows.train import gate_windows
    from gpucast.warehouse import db

    settings = Settings.from_env().ensure()
    with db.writer(settings.storage) as con:
        fill(con)
        later_days(con)
    counts = backtest_step.fn(settings.storage, 7, NIGHT)
    assert (counts.jobs, counts.forecast) == (3, 2) and [ch.train_run_id for ch in counts.champions] == ["tr1"]
    window = gate_windows.fn(settings, (c.PEAK_GPU_MEM_GB,), refresh=False, as_of=NIGHT).of(c.PEAK_GPU_MEM_GB)
    assert window.champion.train_run_id == "tr1" and window.jobs["job_id"].to_list() == ["a", "b"]
    live = gate_windows.fn(settings, (c.PEAK_GPU_MEM_GB,)).of(c.PEAK_GPU_MEM_GB)
    assert live.champion.train_run_id == "tr2"


def test_the_nights_clock_reaches_training_in_process_and_on_the_gpu_pool(monkeypatch):
    """`train_where_possible` hands `as_of` to the in-process run and, as ISO text the worker's flow signature turns
    back into the same time, to the `gpu` pool's run; a live night (no `as_of`) sends no such key at all, so a worker
    whose checkout predates the parameter still takes it."""
    from gpucast.flows import gpu_pool
    from gpucast.flows.settings import Settings
    from gpucast.flows.train import train_models
    from gpucast.records.results import TrainResult
    from gpucast.tasks.learn.options import TrainOptions

    settings, options = Settings.from_env(), TrainOptions(models=("linear_fs",), repeats=1)
    night = datetime(2026, 11, 4, 2, 30, tzinfo=UTC)
    sent = gpu_pool.handoff_parameters(options, settings, backtest_fresh=True, as_of=night)
    assert sent["as_of"] == "2026-11-04T02:30:00+00:00"
    assert train_models.validate_parameters(sent)["as_of"] == night
    assert "as_of" not in gpu_pool.handoff_parameters(options, settings, backtest_fresh=True)

    called = {}
    monkeypatch.setattr(gpu_pool, "gpu_worker_online", lambda: False)
    monkeypatch.setattr(gpu_pool, "train_models", lambda **kw: called.update(kw) or TrainResult(train_run_id="tr",
                                                                                               targets=()))
    gpu_pool.train_where_possible(options, settings, backtest_fresh=True, as_of=night)
    assert called["as_of"] == night and called["backtest_fresh"] is True


def test_a_deployment_runs_zone_less_as_of_is_read_as_utc_at_the_flows_edge(home, monkeypatch):
    """Review 63 S3-2: a deployment run's `as_of` given as ISO text without a zone comes out of Prefect's parameter
    validation naive; compared with the warehouse's aware timestamps (`backtest.window_start`) it raised TypeError.
    The flow reads it as UTC, the rule of the CLI's `--as-of` (`records/times.py` `parse_iso`)."""
    import importlib

    module = importlib.import_module("gpucast.flows.nightly")
    given = module.nightly.validate_parameters({"as_of": "2026-11-04T02:30:00", "retrain": False})
    assert given["as_of"] == datetime(2026, 11, 4, 2, 30) and given["as_of"].tzinfo is None  # what Prefect hands over
    seen = {}
    monkeypatch.setattr(module, "_steps", lambda paths, options, retrain, settings, staging, as_of, inventory, run_id:
                        seen.__setitem__("as_of", as_of))
    module.nightly.fn(**given)
    assert seen["as_of"] == datetime(2026, 11, 4, 2, 30, tzinfo=UTC)
    aware = datetime(2026, 11, 4, 4, 30, tzinfo=timezone(timedelta(hours=2)))  # a zone given is kept as it is
    module.nightly.fn(as_of=aware, retrain=False)
    assert seen["as_of"] is aware


@pytest.mark.usefixtures("prefect_harness")
def test_a_train_run_records_its_night_read_as_utc(home, monkeypatch):
    """The `gpu-train` deployment's run given a zone-less `as_of` reads it as UTC (S3-2), hands it to the gate, and
    records it as the run's night (`train_runs.as_of`), which `forecast.champions_as_of` reads on a later backfill
    (S2-1). Stopped at the gate: the rest of the run is `test_train_flow.py`'s."""
    import duckdb

    from gpucast.flows import train
    from gpucast.tasks.learn.options import TrainOptions

    seen = {}

    def stop(settings, targets, refresh=True, as_of=None):
        seen["as_of"] = as_of
        raise RuntimeError("stopped at the gate")

    monkeypatch.setattr(train, "gate_windows", stop)
    given = train.train_models.validate_parameters({"as_of": "2026-11-04T02:30:00", "history_path": "staged.parquet",
                                                     "publish": False, "options": TrainOptions(models=("linear_fs",))})
    with pytest.raises(RuntimeError, match="stopped at the gate"):
        train.train_models(**given)
    night = datetime(2026, 11, 4, 2, 30, tzinfo=UTC)
    assert seen["as_of"] == night
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT as_of, status FROM train_runs").fetchall() == [(night, "failed")]
