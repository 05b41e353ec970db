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

import logging
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpucast.expectations import contract as c
from gpucast.expectations.records import TargetResult
from gpucast.tasks.features import FeatureEncoder, labelled_rows
from gpucast.tasks.models import registry, store
from gpucast.tasks.models.presets import DEFAULT_PRESET, PRESET_NAMES

log = logging.getLogger(__name__)
DEFAULT_MIN_LABELLED = 200
# Training reads at most this many of the most recent labelled jobs: memory and time stay bounded
# however long the history grows (and recent jobs best resemble tomorrow's).
DEFAULT_MAX_ROWS = 500_000
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


class TrainOptions(BaseModel):
    """What a train run does: the `options` parameter of the `train-models` flow (prefect.yaml) and the
    `gpucast train` flags. Unknown keys and out-of-range values are refused when it is built."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    targets: tuple[str, ...] = c.TARGETS
    models: tuple[str, ...] = registry.MODEL_NAMES
    preset: str = DEFAULT_PRESET  # the Transformer-BiGRU's (tasks/models/presets.py)
    repeats: int = Field(3, ge=1)  # repeated 70/30 holdouts
    seed: int = 0
    min_labelled: int = Field(DEFAULT_MIN_LABELLED, ge=1)  # a target with fewer labelled jobs is skipped
    device: str | None = None  # cuda or cpu; None: cuda when available
    epochs: int | None = Field(None, ge=1)  # caps the Transformer-BiGRU's epochs
    max_rows: int | None = Field(DEFAULT_MAX_ROWS, ge=1)  # None: every labelled job
    nn_max_minutes: float | None = Field(None, ge=0)  # per network fit; None: the GPUCAST_NN_MAX_MINUTES setting

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [t for t in v if t not in c.TARGETS]
        if unknown or not v:
            raise ValueError(f"unknown target(s) {', '.join(unknown) or '(none given)'}; targets: {', '.join(c.TARGETS)}")
        return v

    @field_validator("models")
    @classmethod
    def _known_models(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [m for m in v if m not in registry.REGISTRY]
        if unknown or not v:
            raise ValueError(f"unknown model(s) {', '.join(unknown) or '(none given)'}; "
                             f"models: {', '.join(registry.REGISTRY)}")
        return v

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        if v not in PRESET_NAMES:
            raise ValueError(f"unknown preset {v!r}; presets: {', '.join(PRESET_NAMES)}")
        return v

    @property
    def nn_max_seconds(self) -> float | None:
        return self.nn_max_minutes * 60 if self.nn_max_minutes else None


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


def train_target(history: pl.DataFrame, target: str, options: TrainOptions, folder: Path,
                 progress: Callable[[str], None] = log.info) -> TargetResult:
    """Train and evaluate `options.models` on `target`; save repeat 0's models in `folder` (the
    registry's target folder, `store.target_folder`).

    `options.epochs` caps the Transformer-BiGRU's epochs and `options.nn_max_minutes` is its time
    budget per fit (it stops after the epoch that crosses it), so a CPU-only night still ends.
    """
    rows = labelled_rows(history, target)
    result = TargetResult(target=target, rows=rows.height)
    if rows.height < options.min_labelled:
        result.skipped = (f"{rows.height} labelled COMPLETED jobs, fewer than the minimum {options.min_labelled} "
                          f"(set --min-labelled to change it)")
        progress(f"{target}: skipped: {result.skipped}")
        return result
    y = rows[target].to_numpy().astype(np.float64)
    for r in range(options.repeats):
        seed = options.seed + r
        fit_idx, val_idx, test_idx = split(rows.height, seed)
        encoder = FeatureEncoder().fit(rows[fit_idx])
        X = encoder.transform(rows)
        preds = {"actual": y[test_idx]}
        for name in options.models:
            t0 = time.perf_counter()
            est = registry.build(name, seed=seed, cardinalities=encoder.cardinalities, preset=options.preset,
                                 device=options.device, epochs=options.epochs, progress=progress,
                                 max_seconds=options.nn_max_seconds)
            est.fit(X[fit_idx], y[fit_idx])
            seconds = time.perf_counter() - t0
            used = getattr(est, "device_", "cpu")
            for split_name, idx in (("validation", val_idx), ("test", test_idx)):
                p = est.predict(X[idx])
                if r == 0 and split_name == "validation":
                    result.calibration[name] = calibrate(y[idx], p, floor=float(y[fit_idx].min()))
                result.metrics.append({"model": name, "preset": options.preset if name == registry.NN else None,
                                       "repeat": r, "seed": seed, "split": split_name, **metrics(y[idx], p),
                                       "rows_train": len(fit_idx), "rows_eval": len(idx),
                                       "train_seconds": seconds, "device": used,
                                       "epochs": getattr(est, "epochs_run_", None)})
                if split_name == "test":
                    preds[name] = p
            stopped = getattr(est, "stopped_by_", None)
            progress(f"{target}: repeat {r + 1}/{options.repeats} {name} trained in {seconds:.1f} s on {used}"
                     + (f" ({stopped})" if stopped else ""))
            if r == 0:
                store.save_model(folder, name, est)
        if r == 0:
            store.save_encoder(folder, encoder)
            result.test_predictions = pl.DataFrame(preds)
            store.save_test_predictions(folder, result.test_predictions)
    result.champion = choose_champion(result.metrics)
    result.model_dir = str(folder)
    store.save_metadata(folder, _metadata(target, options, result))
    progress(f"{target}: champion {result.champion} (lowest mean validation {CHAMPION_METRIC.upper()})")
    return result


def choose_champion(metric_rows: list[dict]) -> str:
    """The model with the lowest mean validation RMSE over the repeats; test rows never count.
    Ties go to the model first in the registry's order (a stable choice)."""
    val = pl.DataFrame(metric_rows).filter(pl.col("split") == "validation")
    ranking = val.group_by("model", maintain_order=True).agg(pl.col(CHAMPION_METRIC).mean())
    return ranking.sort(CHAMPION_METRIC, maintain_order=True)["model"][0]


LIBRARIES = ("torch", "scikit-learn", "xgboost-cpu", "xgboost", "lightgbm", "catboost", "polars", "numpy")


def library_versions() -> dict[str, str]:
    """Versions of the libraries a saved model depends on (recorded with every model)."""
    import importlib.metadata as md

    versions = {}
    for pkg in LIBRARIES:
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return versions


def _metadata(target: str, options: TrainOptions, result: TargetResult) -> dict:
    return {
        "target": target,
        "features": list(c.FEATURES),
        "models": list(options.models),
        "preset": options.preset,
        "champion": result.champion,
        "champion_metric": f"mean validation {CHAMPION_METRIC}",
        "rows": result.rows,
        "python": platform.python_version(),
        "versions": library_versions(),
        "metrics": result.metrics,
        "calibration": result.calibration,
    }
