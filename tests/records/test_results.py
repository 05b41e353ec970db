"""The flows' results (records/results.py): frozen, named in every flow's signature, and carried by Prefect's
result serializers unchanged (should a result ever be persisted or handed across `run_deployment`)."""

from __future__ import annotations

import dataclasses
import typing
from datetime import UTC, date, datetime

import polars as pl
import pytest
from prefect.serializers import JSONSerializer, PickleSerializer

from gpucast.records import results as r

INGEST = r.IngestResult(run_id="ingest-1", files=2, files_rejected=1, rows_read=10, rows_loaded=7, rows_rejected=2,
                        rows_duplicate=1, lake_days=1, load_seconds={"warehouse": 0.1, "lake": 0.2},
                        stage_seconds={"read": 0.3, "check": 0.4, "write": 0.5})
TRAIN = r.TrainResult(train_run_id="train-1", targets=(r.TrainedTarget("runtime_hours", "lightgbm", None, 120, 1, "kept"),
                                                       r.TrainedTarget("peak_gpu_mem_gb", None, "too few labels", 3, 0)),
                      where="work pool gpu", device="cpu", fits_on="this process", flow_run_id="0b5e")
BACKTEST = r.BacktestResult(window_start=datetime(2026, 11, 20, tzinfo=UTC), jobs=40, forecast=36, not_forecast=4,
                            champions=(r.ChampionCoverage(target="runtime_hours", model="lightgbm", train_run_id="train-1",
                                                          jobs=36, p90_coverage=0.9, p10_p90_coverage=0.8, mape=12.5),),
                            warnings=("drift: ...",))
SCORE = r.ScoreResult(score_run_id="score-1", pending_jobs=5, forecasts=15, scored_on="this process", ood_forecasts=1,
                      ood_by_target={"runtime_hours": 1}, champions={"runtime_hours": "lightgbm"})


NIGHT = r.NightResult(ingest=INGEST, train=TRAIN, score=SCORE, warnings=("w",), seconds={"ingest": 1.0})


@pytest.mark.parametrize(("serializer", "result"), [
    *((PickleSerializer(), x) for x in (INGEST, TRAIN, BACKTEST, SCORE, NIGHT)),  # Prefect's default
    # its JSON serializer carries those without frames (a NightResult's type names DemandResult's and PlanResult's)
    *((JSONSerializer(), x) for x in (INGEST, TRAIN, BACKTEST, SCORE)),
], ids=lambda x: type(x).__name__)
def test_results_round_trip_through_prefects_serializers(serializer, result):
    back = serializer.loads(serializer.dumps(result))
    assert type(back) is type(result) and back == result


def test_results_with_frames_round_trip_through_prefects_default_serializer():
    rows = pl.DataFrame({"queue": ["a"], "jobs": [2]})
    plan = r.PlanResult(plan_run_id="plan-1", start_day=date(2026, 11, 26), days=14, jobs=2, unknown_size_jobs=0,
                        unplaceable_jobs=0, rows=rows)
    back = PickleSerializer().loads(PickleSerializer().dumps(r.NightResult(plan=plan)))
    assert back.plan.rows.equals(rows) and dataclasses.replace(back.plan, rows=rows) == plan


def test_results_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TRAIN.where = "in-process"  # type: ignore[misc]


def test_every_flow_returns_its_result_type():
    """The return annotation of each flow (and of the GPU pool's hand-off) is its result type: a flow that returned a
    dict again would have to say so here."""
    from gpucast.flows import backtest, demand, gpu_pool, ingest, nightly, plan, score, stage, train

    expected = {ingest.ingest_job_logs.fn: r.IngestResult, train.train_models.fn: r.TrainResult,
                gpu_pool.train_where_possible: r.TrainResult, gpu_pool.pool_result: r.TrainResult,
                score.score_pending.fn: r.ScoreResult, demand.demand_forecast.fn: r.DemandResult,
                plan.capacity_plan.fn: r.PlanResult, nightly.nightly.fn: r.NightResult,
                backtest.refresh_backtest: r.BacktestResult, backtest.backtest_step.fn: r.BacktestResult,
                stage.stage_features.fn: r.FeaturesResult}
    for fn, kind in expected.items():
        assert typing.get_type_hints(fn)["return"] is kind, fn.__qualname__


def test_compile_info_has_one_shape_written_and_read():
    """`compile_model` writes it and `load_compiled` reads it back (tasks/learn/models/compiled.py); a file written
    before the record existed (keys it did not know left out) still reads, and an unknown key is ignored."""
    from gpucast.records.outcomes import CompileInfo

    info = CompileInfo(model="lightgbm", used=True, float32_input=False, compile_seconds=1.5, tl2cgen="1.0.0",
                       codegen={"parallel_comp": 2}, max_relative_difference=1e-9, checked_rows=100)
    assert CompileInfo.from_json(info.to_json()) == info
    older = CompileInfo.from_json('{"model": "xgboost", "used": false, "reason": "stays native", "extra": 1}')
    assert older == CompileInfo(model="xgboost", used=False, reason="stays native")


def test_the_gate_windows_answer_what_training_asks_of_them():
    """`gate-windows` hands training one typed record (records/outcomes.py), not a dict of dicts read by key: the
    current champions' models (the fits' order), each target's held-out job ids, each target's window and champion."""
    from gpucast.records.outcomes import Champion, GateWindow, GateWindows

    champion = Champion("runtime_hours", "lightgbm", "train-0", "/m")
    window = GateWindow(champion, pl.DataFrame({"job_id": ["a", "b"], "p50": [1.0, 2.0], "p90": [2.0, 3.0],
                                                "actual": [1.0, 1.0]}))
    windows = GateWindows({"runtime_hours": window})
    assert windows.previous_models() == {"runtime_hours": "lightgbm"}
    assert windows.holdouts(("runtime_hours", "peak_gpu_mem_gb")) == {"runtime_hours": ["a", "b"], "peak_gpu_mem_gb": None}
    assert windows.of("runtime_hours") is window and windows.of("peak_gpu_mem_gb") is None
    assert windows.champion("runtime_hours") == champion and windows.champion("peak_gpu_mem_gb") is None
    assert GateWindows().previous_models() == {}
