"""Warehouse side of training: read the labelled history, record runs, metrics and champions."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from gpucast.tasks import contract as c
from gpucast.tasks.train import TargetResult
from gpucast.warehouse.db import writer
from gpucast.warehouse.forecast import latest_champions
from gpucast.warehouse.housekeeping import owner
from gpucast.warehouse.settings import Settings

DEFAULT_MAX_TRAIN_ROWS = 500_000


def read_training_jobs(settings: Settings, max_rows: int | None = DEFAULT_MAX_TRAIN_ROWS) -> pl.DataFrame:
    """The contract columns of the COMPLETED jobs of `job_logs`, the `max_rows` most recent ones.

    Only COMPLETED jobs carry labels, and a cap on the most recent ones bounds memory and training
    time however long the history grows (recent jobs also best resemble tomorrow's). The result is
    ordered by job_id: splits are permutations of row positions, so the same warehouse must give
    the same rows in the same order for a seeded run to be reproducible.
    """
    if not settings.db_path.exists():
        raise FileNotFoundError(f"no warehouse at {settings.db_path}: run `gpucast ingest` first")
    limit = "" if max_rows is None else f"ORDER BY {c.SUBMITTED_AT} DESC, {c.JOB_ID} LIMIT {int(max_rows)}"
    with writer(settings) as con:
        return con.sql(f"SELECT * FROM (SELECT {', '.join(c.COLUMNS)} FROM job_logs WHERE {c.STATUS} = 'COMPLETED' "
                       f"{limit}) ORDER BY {c.JOB_ID}").pl()


def feature_summary(settings: Settings) -> dict:
    """Jobs, pending jobs, labelled jobs per target and the share of missing values per feature (in SQL)."""
    labelled = ", ".join(f"count(*) FILTER (WHERE status = 'COMPLETED' AND {t} > 0) AS {t}" for t in c.TARGETS)
    missing = ", ".join(f"avg(({f} IS NULL)::INT) AS {f}" for f in c.FEATURES)
    with writer(settings) as con:
        row = con.sql(f"SELECT count(*) AS jobs, count(*) FILTER (WHERE status = 'PENDING') AS pending, {labelled}, "
                      f"{missing} FROM job_logs").pl().row(0, named=True)
    return {"jobs": row["jobs"], "pending": row["pending"], "labelled": {t: row[t] for t in c.TARGETS},
            "missing_feature_share": {f: round(row[f] or 0.0, 4) for f in c.FEATURES}}


KEEP_RUNS_ENV = "GPUCAST_KEEP_TRAIN_RUNS"
DEFAULT_KEEP_RUNS = 7


def prune_model_folders(con: duckdb.DuckDBPyConnection, models_dir: Path, keep: int) -> list[Path]:
    """Delete the registry folders of all but the `keep` most recent successful train runs.

    Never deleted: a run a current champion lives in (scoring loads it), and a run still
    `running` (another process may be writing it). Folders of failed or crashed runs go too.
    Their rows in `model_metrics` and `model_champions` stay: the history of the comparison is
    kept, the model files (up to ~1 GB a forest at 100k jobs) are not.
    """
    keep_ids = {r for (r,) in con.execute(
        "SELECT train_run_id FROM train_runs WHERE status = 'succeeded' ORDER BY started_at DESC LIMIT ?",
        [max(keep, 1)]).fetchall()}
    keep_ids |= {r for (r,) in con.execute("SELECT train_run_id FROM train_runs WHERE status = 'running'").fetchall()}
    keep_ids |= {ch.train_run_id for ch in latest_champions(con)}
    removed = []
    for folder in sorted(models_dir.iterdir()) if models_dir.exists() else []:
        if folder.is_dir() and folder.name not in keep_ids:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def start_train_run(con: duckdb.DuckDBPyConnection, run_id: str, models: list[str], preset: str, repeats: int,
                    device: str) -> None:
    con.execute("INSERT OR IGNORE INTO train_runs (train_run_id, started_at, status, models, preset, repeats, device, "
                "pid, host) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                [run_id, datetime.now(UTC), models, preset, repeats, device, *owner()])


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
                pl.col("epochs").cast(pl.Int64),
            )
            con.register("new_metrics", m)
            con.execute("INSERT INTO model_metrics BY NAME SELECT * FROM new_metrics")
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
