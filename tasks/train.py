"""Train every registry model on one target, evaluate them honestly, pick a champion.

Protocol, per target and per repeat r = 0..repeats-1 (seed = base seed + r):
1. the labelled rows are split 70/30 into **train** and **test**; 20% of train is held out as
   **validation**; every model of the repeat sees the same three sets;
2. each model is fitted on train minus validation, then scored on validation and on test;
3. metrics (MSE, RMSE, MAE, MAPE in %, R²) are on the original scale of the target.
The **champion** is the model with the lowest mean *validation* RMSE over the repeats: test rows
never take part in choosing it. Test metrics are reported as mean and spread over the repeats,
because one 70/30 split of a small table is noise. The champion of the first repeat is saved.
"""

from __future__ import annotations

import json
import logging
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.tasks import contract as c
from gpucast.tasks.features import FeatureEncoder, labelled_rows
from gpucast.tasks.models import registry

log = logging.getLogger(__name__)
DEFAULT_MIN_LABELLED = 200
# The Transformer-BiGRU's time budget per fit (3 targets x 3 repeats = 9 fits a night). On a
# 2-core CPU the paper's 200 epochs over 100k jobs take about an hour a fit, 8-10 h a night; the
# budget keeps a night without a GPU worker inside the night. 0 means no limit.
NN_MAX_MINUTES_ENV = "GPUCAST_NN_MAX_MINUTES"
DEFAULT_NN_MAX_MINUTES = 20.0
TEST_FRACTION = 0.3
VALIDATION_FRACTION = 0.2
CHAMPION_METRIC = "rmse"


def metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """MSE, RMSE, MAE, MAPE (%) and R² on the original scale."""
    y_true = np.asarray(y_true, dtype=np.float64)
    y_pred = np.asarray(y_pred, dtype=np.float64)
    err = y_pred - y_true
    mse = float(np.mean(err**2))
    ss_tot = float(np.sum((y_true - y_true.mean()) ** 2))
    return {
        "mse": mse,
        "rmse": float(np.sqrt(mse)),
        "mae": float(np.mean(np.abs(err))),
        "mape": float(np.mean(np.abs(err) / np.abs(y_true)) * 100.0),
        "r2": float(1.0 - np.sum(err**2) / ss_tot) if ss_tot > 0 else float("nan"),
    }


def split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fit, validation, test) row indices: 30% test, then 20% of the rest for validation."""
    idx = np.random.default_rng(seed).permutation(n)
    n_test = int(round(n * TEST_FRACTION))
    test, train = idx[:n_test], idx[n_test:]
    n_val = int(round(len(train) * VALIDATION_FRACTION))
    return train[n_val:], train[:n_val], test


INTERVAL_LEVELS = (0.1, 0.5, 0.9)


def calibrate(y_true: np.ndarray, y_pred: np.ndarray, floor: float) -> dict:
    """Split-conformal calibration of P10/P50/P90 from held-out (validation) residuals.

    The residuals are log ratios r = log(actual / prediction), because the targets span orders of
    magnitude and their errors are multiplicative. For a new job, Pq = prediction * exp(r_(k)),
    where r_(k) is the k-th smallest of the n residuals: k = ceil((n+1) q) for q >= 0.5 and
    floor((n+1) q) for q < 0.5 (clipped to 1..n), the finite-sample choice of split-conformal
    prediction that keeps each bound on the conservative side. Predictions are floored at half the
    smallest training label, so a model that predicts <= 0 still gets a finite interval.
    """
    floor = max(floor * 0.5, 1e-9)
    r = np.log(np.asarray(y_true, dtype=np.float64)) - np.log(np.maximum(np.asarray(y_pred, dtype=np.float64), floor))
    r.sort()
    n = len(r)

    def order_stat(q: float) -> float:
        k = np.ceil((n + 1) * q) if q >= 0.5 else np.floor((n + 1) * q)
        return float(r[int(min(max(k, 1), n)) - 1])

    levels = {f"q{int(q * 100)}": order_stat(q) for q in INTERVAL_LEVELS}
    return {"method": "split-conformal, log residuals", "n": n, "floor": floor, **levels}


def interval(pred: np.ndarray, cal: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p10, p50, p90) for point predictions `pred` under calibration `cal` (see `calibrate`)."""
    base = np.maximum(np.asarray(pred, dtype=np.float64), cal["floor"])
    return base * np.exp(cal["q10"]), base * np.exp(cal["q50"]), base * np.exp(cal["q90"])


@dataclass
class TargetResult:
    target: str
    skipped: str | None = None
    rows: int = 0
    metrics: list[dict] = field(default_factory=list)  # one dict per model x repeat x split
    champion: str | None = None
    model_dir: str | None = None
    calibration: dict[str, dict] = field(default_factory=dict)  # model -> interval calibration (repeat 0)
    test_predictions: pl.DataFrame | None = None  # repeat 0: actual and every model's prediction


def train_target(
    job_logs: pl.DataFrame,
    target: str,
    models: list[str],
    out_dir: Path,
    preset: str = "paper",
    repeats: int = 3,
    seed: int = 0,
    min_labelled: int = DEFAULT_MIN_LABELLED,
    device: str | None = None,
    epochs: int | None = None,
    progress: Callable[[str], None] = log.info,
    nn_max_seconds: float | None = None,
) -> TargetResult:
    """Train and evaluate `models` on `target`; save repeat 0's models under `out_dir/target`.

    `epochs` caps the Transformer-BiGRU's epochs; `nn_max_seconds` is its time budget per fit
    (it stops after the epoch that crosses it), so a CPU-only night still ends.
    """
    rows = labelled_rows(job_logs, target)
    result = TargetResult(target=target, rows=rows.height)
    if rows.height < min_labelled:
        result.skipped = (f"{rows.height} labelled COMPLETED jobs, fewer than the minimum {min_labelled} "
                          f"(set --min-labelled to change it)")
        progress(f"{target}: skipped: {result.skipped}")
        return result
    y = rows[target].to_numpy().astype(np.float64)
    folder = out_dir / target
    for r in range(repeats):
        fit_idx, val_idx, test_idx = split(rows.height, seed + r)
        encoder = FeatureEncoder().fit(rows[fit_idx])
        X = encoder.transform(rows)
        preds = {"actual": y[test_idx]}
        for name in models:
            t0 = time.perf_counter()
            est = registry.build(name, seed=seed + r, cardinalities=encoder.cardinalities, preset=preset,
                                 device=device, epochs=epochs, progress=progress, max_seconds=nn_max_seconds)
            est.fit(X[fit_idx], y[fit_idx])
            seconds = time.perf_counter() - t0
            used = getattr(est, "device_", "cpu")
            for split_name, idx in (("validation", val_idx), ("test", test_idx)):
                p = est.predict(X[idx])
                if r == 0 and split_name == "validation":
                    result.calibration[name] = calibrate(y[idx], p, floor=float(y[fit_idx].min()))
                result.metrics.append({"model": name, "preset": preset if name == registry.NN else None,
                                       "repeat": r, "seed": seed + r, "split": split_name, **metrics(y[idx], p),
                                       "rows_train": len(fit_idx), "rows_eval": len(idx),
                                       "train_seconds": seconds, "device": used,
                                       "epochs": getattr(est, "epochs_run_", None)})
                if split_name == "test":
                    preds[name] = p
            stopped = getattr(est, "stopped_by_", None)
            progress(f"{target}: repeat {r + 1}/{repeats} {name} trained in {seconds:.1f} s on {used}"
                     + (f" ({stopped})" if stopped else ""))
            if r == 0:
                registry.save(name, est, folder)
        if r == 0:
            (folder / "encoder.json").write_text(json.dumps(encoder.to_dict()))
            result.test_predictions = pl.DataFrame(preds)
    val = pl.DataFrame(result.metrics).filter(pl.col("split") == "validation")
    ranking = val.group_by("model").agg(pl.col(CHAMPION_METRIC).mean()).sort(CHAMPION_METRIC)
    result.champion = ranking["model"][0]
    result.model_dir = str(folder)
    _write_metadata(folder, target, models, preset, result)
    progress(f"{target}: champion {result.champion} (lowest mean validation {CHAMPION_METRIC.upper()})")
    return result


def _write_metadata(folder: Path, target: str, models: list[str], preset: str, result: TargetResult) -> None:
    import importlib.metadata as md

    versions = {}
    for pkg in ("torch", "scikit-learn", "xgboost-cpu", "xgboost", "lightgbm", "catboost", "polars", "numpy"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    meta = {
        "target": target,
        "features": list(c.FEATURES),
        "models": models,
        "preset": preset,
        "champion": result.champion,
        "champion_metric": f"mean validation {CHAMPION_METRIC}",
        "rows": result.rows,
        "python": platform.python_version(),
        "versions": versions,
        "metrics": result.metrics,
        "calibration": result.calibration,
    }
    (folder / "metadata.json").write_text(json.dumps(meta, indent=2, default=float))


def summarise(metric_rows: list[dict]) -> pl.DataFrame:
    """Mean and standard deviation over repeats, per model and split."""
    df = pl.DataFrame(metric_rows)
    keys = ["mse", "rmse", "mae", "mape", "r2"]
    return (
        df.group_by("model", "split", maintain_order=True)
        .agg(*[pl.col(k).mean().alias(k) for k in keys], *[pl.col(k).std().alias(f"{k}_std") for k in keys],
             pl.col("train_seconds").mean(), pl.len().alias("repeats"))
    )
