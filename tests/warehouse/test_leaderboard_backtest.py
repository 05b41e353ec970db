"""The leaderboard reports each model's backtest error beside its validation error (issue 37, item 6)."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import pytest

from gpucast.records.outcomes import MetricRow, TargetResult
from gpucast.warehouse import queries
from gpucast.warehouse.schema import schema_sql
from gpucast.warehouse.training import record_target


def _row(model: str, split: str, rmse: float, mape: float, repeat: int = 0) -> MetricRow:
    return MetricRow(model=model, preset=None, features="residual", repeat=repeat, seed=repeat, split=split, mse=rmse**2,
                     rmse=rmse, mae=rmse, mape=mape, r2=0.5, rows_train=100, rows_eval=30, train_seconds=1.0, device="cpu",
                     epochs=None)


def test_the_leaderboard_and_the_nightly_reports_query_carry_the_backtest_error(tmp_path):
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(schema_sql())
        con.execute("INSERT INTO train_runs (train_run_id, started_at, status) VALUES ('r1', ?, 'succeeded')",
                    [datetime(2026, 11, 26, tzinfo=UTC)])
        metrics = [_row("lightgbm", "validation", 1.22, 20.0), _row("lightgbm", "test", 1.3, 21.0),
                   _row("lightgbm", "backtest", 1.4, 22.0), _row("lightgbm", "backtest", 1.6, 24.0, repeat=1),
                   _row("transformer_bigru", "validation", 0.51, 9.0), _row("transformer_bigru", "test", 0.6, 10.0),
                   _row("transformer_bigru", "backtest", 3.0, 60.0)]
        result = TargetResult(target="peak_gpu_mem_gb", rows=130, metrics=metrics, champion="lightgbm", model_dir="m")
        record_target(con, "r1", result, "residual")
        board = con.execute("SELECT model, validation_rmse, backtest_rmse, backtest_mape, is_champion FROM model_leaderboard "
                            "ORDER BY rank").fetchall()
        assert board == [("transformer_bigru", 0.51, 3.0, 60.0, False), ("lightgbm", 1.22, pytest.approx(1.5), 23.0, True)]
        report = con.sql(queries.LEADERBOARD).pl()
        assert {"validation_rmse", "backtest_rmse", "backtest_mape"} <= set(report.columns)
        champions = con.sql(queries.CHAMPIONS).pl()
        assert champions["backtest_rmse"].to_list() == [pytest.approx(1.5)]
