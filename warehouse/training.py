"""Warehouse side of training: read the labelled history, record runs, metrics and champions."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import polars as pl

from gpucast.tasks import contract as c
from gpucast.tasks.train import TargetResult
from gpucast.warehouse.db import writer
from gpucast.warehouse.settings import Settings


def read_job_logs(settings: Settings) -> pl.DataFrame:
    """The contract columns of `job_logs` (the latest record of every job), ordered by job_id.

    The order matters: splits are permutations of row positions, so the same warehouse must give
    the same rows in the same order for a seeded run to be reproducible.
    """
    if not settings.db_path.exists():
        raise FileNotFoundError(f"no warehouse at {settings.db_path}: run `gpucast ingest` first")
    with writer(settings) as con:
        return con.sql(f"SELECT {', '.join(c.COLUMNS)} FROM job_logs ORDER BY {c.JOB_ID}").pl()


def start_train_run(con: duckdb.DuckDBPyConnection, run_id: str, models: list[str], preset: str, repeats: int,
                    device: str) -> None:
    con.execute("INSERT OR IGNORE INTO train_runs VALUES (?, ?, NULL, 'running', ?, ?, ?, ?, NULL)",
                [run_id, datetime.now(UTC), models, preset, repeats, device])


def finish_train_run(con: duckdb.DuckDBPyConnection, run_id: str, status: str, message: str | None) -> None:
    con.execute("UPDATE train_runs SET finished_at = ?, status = ?, message = ? WHERE train_run_id = ?",
                [datetime.now(UTC), status, message, run_id])


def record_target(con: duckdb.DuckDBPyConnection, run_id: str, result: TargetResult) -> None:
    """Replace this run's rows for the target (a retried step writes the same rows once)."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM model_metrics WHERE train_run_id = ? AND target = ?", [run_id, result.target])
        con.execute("DELETE FROM model_champions WHERE train_run_id = ? AND target = ?", [run_id, result.target])
        if result.metrics:
            m = pl.DataFrame(result.metrics).select(
                pl.lit(run_id).alias("train_run_id"), pl.lit(result.target).alias("target"), "model", "preset",
                "repeat", "seed", "split", "mse", "rmse", "mae", "mape", "r2", "rows_train",
                pl.col("rows_eval").alias("rows_test"), "train_seconds", "device",
            )
            con.register("new_metrics", m)
            con.execute("INSERT INTO model_metrics SELECT * FROM new_metrics")
            con.unregister("new_metrics")
        champ = result.champion
        stats = (None, None, None)
        if champ:
            df = pl.DataFrame(result.metrics).filter(pl.col("model") == champ)
            stats = (
                df.filter(pl.col("split") == "validation")["rmse"].mean(),
                df.filter(pl.col("split") == "test")["rmse"].mean(),
                df.filter(pl.col("split") == "test")["mape"].mean(),
            )
        preset = next((m["preset"] for m in result.metrics if m["model"] == champ), None)
        con.execute("INSERT INTO model_champions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [run_id, result.target, champ, preset, result.rows, *stats, result.model_dir, result.skipped])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
