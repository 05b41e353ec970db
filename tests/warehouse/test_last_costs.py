"""What a train run judges a model by before fitting it (`training.last_costs`, the scoring budget's price-out,
session 24): the latest succeeded run by the night it trained for, of the same network preset and feature set."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb

from gpucast.records.outcomes import MetricRow, TargetResult
from gpucast.warehouse.schema import schema_sql
from gpucast.warehouse.training import last_costs, record_target

NN = "transformer_bigru"


def _row(model: str, cost: float, *, preset: str | None = None, features: str = "residual", repeat: int = 0) -> MetricRow:
    return MetricRow(model=model, preset=preset, features=features, repeat=repeat, seed=repeat, split="test", mse=1.0,
                     rmse=1.0, mae=1.0, mape=10.0, r2=0.5, rows_train=100, rows_eval=30, train_seconds=1.0, device="cpu",
                     epochs=None, score_seconds_per_million=cost)


def _run(con, run_id: str, started: datetime, rows: list[MetricRow], *, status: str = "succeeded",
         as_of: datetime | None = None, features: str = "residual") -> None:
    con.execute("INSERT INTO train_runs (train_run_id, started_at, status, as_of) VALUES (?, ?, ?, ?)",
                [run_id, started, status, as_of])
    record_target(con, run_id, TargetResult(target="runtime_hours", rows=130, metrics=rows, champion="lightgbm_plain",
                                            model_dir="m"), features)


def test_the_last_cost_is_the_latest_succeeded_nights_of_the_same_preset_and_features(tmp_path):
    day = lambda d: datetime(2026, 11, d, tzinfo=UTC)  # noqa: E731
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        con.execute(schema_sql())
        _run(con, "n20", day(20), [_row("adaboost", 20.0), _row("adaboost", 22.0, repeat=1), _row(NN, 168.0, preset="tuned")])
        _run(con, "n21", day(21), [_row(NN, 40.0, preset="tiny")])  # another preset: another size
        _run(con, "n22-failed", day(22), [_row("adaboost", 99.0)], status="failed")
        _run(con, "n23-contract", day(23), [_row("adaboost", 55.0, features="contract")], features="contract")
        # a backfill started after the live nights, for a night before them: not the last
        _run(con, "backfill", day(24), [_row("adaboost", 9.0)], as_of=day(10))
        assert last_costs(con, "tuned", "residual") == {"runtime_hours": {"adaboost": 21.0, NN: 168.0}}
        assert last_costs(con, "tiny", "residual")["runtime_hours"][NN] == 40.0
        assert last_costs(con, "tuned", "contract") == {"runtime_hours": {"adaboost": 55.0}}
        # a later live night counts adaboost again: its count is the last (a tree's cost follows the data)
        _run(con, "n25", day(25), [_row("adaboost", 12.5)])
        assert last_costs(con, "tuned", "residual")["runtime_hours"]["adaboost"] == 12.5
