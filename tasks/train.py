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
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpucast.expectations import contract as c
from gpucast.expectations.records import TargetResult
from gpucast.tasks import features, intervals, ood
from gpucast.tasks.features import FEATURE_SETS, FeatureEncoder, labelled_rows
from gpucast.tasks.models import registry, store
from gpucast.tasks.models.presets import DEFAULT_PRESET, PRESET_NAMES

log = logging.getLogger(__name__)
DEFAULT_MIN_LABELLED = 200
# Training reads at most this many of the most recent labelled jobs: memory and time stay bounded
# however long the history grows (and recent jobs best resemble tomorrow's).
DEFAULT_MAX_ROWS = 500_000
# The feature set models learn from by default: the one that won on validation (docs/models.md).
DEFAULT_FEATURES = "residual"
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


# The champion is refitted on every labelled job but this share, on which its intervals are then
# calibrated: split-conformal intervals stay valid for the refitted model only if it never saw the
# calibration rows (CV+ would refit on everything but must keep K fold models to score with: K times
# the scoring work of a night). docs/models.md measures what the refit gains.
CALIBRATION_FRACTION = 0.15


def calibration_split(n: int, seed: int, learns: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(refit, calibration) row indices. A model that learns nothing (the analytic prior) is
    calibrated on every row: no row it could have learned from is ever used twice."""
    idx = np.random.default_rng(seed + 10_000).permutation(n)
    if not learns:
        return np.array([], dtype=int), idx
    n_cal = int(round(n * CALIBRATION_FRACTION))
    return idx[n_cal:], idx[:n_cal]


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
    models: tuple[str, ...] | None = None  # None: every registry model the feature set allows
    preset: str = DEFAULT_PRESET  # the Transformer-BiGRU's (tasks/models/presets.py)
    features: str = DEFAULT_FEATURES  # the feature set (tasks/features.py: paper, hardware, priors, residual)
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
    def _known_models(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is None:
            return v
        unknown = [m for m in v if m not in registry.REGISTRY]
        if unknown or not v:
            raise ValueError(f"unknown model(s) {', '.join(unknown) or '(none given)'}; "
                             f"models: {', '.join(registry.REGISTRY)}")
        return v

    @model_validator(mode="after")
    def _prior_needs_priors(self) -> TrainOptions:
        if self.models and registry.PRIOR in self.models and FEATURE_SETS[self.features].prior_column(c.TARGETS[0]) is None:
            raise ValueError(f"model `prior` needs a feature set with the priors (priors, residual), not {self.features!r}")
        return self

    @field_validator("features")
    @classmethod
    def _known_features(cls, v: str) -> str:
        if v not in FEATURE_SETS:
            raise ValueError(f"unknown feature set {v!r}; feature sets: {', '.join(FEATURE_SETS)}")
        return v

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        if v not in PRESET_NAMES:
            raise ValueError(f"unknown preset {v!r}; presets: {', '.join(PRESET_NAMES)}")
        return v

    @property
    def model_names(self) -> tuple[str, ...]:
        """The models to compare: those asked for, else every model the feature set allows (the
        `prior` model needs a set with the priors)."""
        if self.models:
            return self.models
        has_priors = FEATURE_SETS[self.features].prior_column(c.TARGETS[0]) is not None
        return tuple(m for m in registry.MODEL_NAMES if m != registry.PRIOR or has_priors)

    @property
    def nn_max_seconds(self) -> float | None:
        return self.nn_max_minutes * 60 if self.nn_max_minutes else None


def train_target(history: pl.DataFrame, target: str, options: TrainOptions, folder: Path,
                 progress: Callable[[str], None] = log.info, holdout: list[str] | None = None) -> TargetResult:
    """Compare `options.models` on `target` over repeated holdouts, pick the champion on validation,
    refit it on every labelled job but a calibration slice, calibrate its intervals on that slice,
    and save it in `folder` (the registry's target folder, `store.target_folder`).

    A target with fewer than `min_labelled` jobs gets no model comparison; with a feature set that
    has the priors, the analytic prior scores it (calibrated on the jobs there are).
    `holdout`: job ids of the gate's backtest window (`tasks/gate.py`); the champion is fitted once
    more without them and its predictions for them are returned in `result.gate_predictions`.
    `options.epochs` caps the Transformer-BiGRU's epochs and `options.nn_max_minutes` is its time
    budget per fit (it stops after the epoch that crosses it), so a CPU-only night still ends.
    """
    feature_set = FEATURE_SETS[options.features]
    if not set(feature_set.names) <= set(history.columns):
        history = features.build(history)
    rows = labelled_rows(history, target)
    result = TargetResult(target=target, rows=rows.height)
    if rows.height < options.min_labelled:
        result.skipped = (f"{rows.height} labelled COMPLETED jobs, fewer than the minimum {options.min_labelled} "
                          f"(set --min-labelled to change it)")
        if feature_set.prior_column(target) is None:
            progress(f"{target}: skipped: {result.skipped}")
            return result
        result.skipped += "; the analytic prior scores it"
        progress(f"{target}: {result.skipped}")
        return _save_champion(rows, target, options, registry.PRIOR, folder, result, progress)
    y = rows[target].to_numpy().astype(np.float64)
    for r in range(options.repeats):
        predictions = _evaluate_repeat(rows, y, target, options, r, result, progress)
        if r == 0:
            result.test_predictions = predictions
    champion = choose_champion(result.metrics)
    progress(f"{target}: champion {champion} (lowest mean validation {CHAMPION_METRIC.upper()}); refitting it")
    if holdout:
        result.gate_predictions = _predict_held_out(rows, y, target, options, champion, holdout, progress)
    return _save_champion(rows, target, options, champion, folder, result, progress)


def _predict_held_out(rows: pl.DataFrame, y: np.ndarray, target: str, options: TrainOptions, champion: str,
                      holdout: list[str], progress: Callable[[str], None]) -> pl.DataFrame:
    """job_id and P50 of the champion fitted without the `holdout` jobs, for those jobs (the gate's check)."""
    held = rows[c.JOB_ID].is_in(holdout).to_numpy()
    if not held.any() or held.all():
        return pl.DataFrame(schema={c.JOB_ID: pl.String, "p50": pl.Float64})
    fit = np.flatnonzero(~held)
    encoder = FeatureEncoder(options.features).fit(rows[fit])
    X = encoder.transform(rows)
    est = _build(champion, encoder, X.shape[1], target, options, options.seed, progress).fit(X[fit], y[fit])
    progress(f"{target}: {champion} fitted without the {int(held.sum()):,} jobs of the backtest window, for the gate")
    return pl.DataFrame({c.JOB_ID: rows[c.JOB_ID].filter(pl.Series(held)), "p50": est.predict(X[held])})


def _build(name: str, encoder: FeatureEncoder, n_features: int, target: str, options: TrainOptions, seed: int,
           progress: Callable[[str], None]):
    fs = FEATURE_SETS[options.features]
    base = fs.prior_column(target) if name == registry.PRIOR else fs.base_column(target)
    return registry.build(name, seed=seed, categorical=encoder.categorical, n_features=n_features, base=base,
                          cardinalities=encoder.cardinalities, preset=options.preset, device=options.device,
                          epochs=options.epochs, progress=progress, max_seconds=options.nn_max_seconds)


def _evaluate_repeat(rows: pl.DataFrame, y: np.ndarray, target: str, options: TrainOptions, r: int,
                     result: TargetResult, progress: Callable[[str], None]) -> pl.DataFrame:
    """One repeated holdout: every model fitted on the same fit rows, scored on validation and test.
    Appends the metrics to `result`; returns the test rows' actual values and every prediction."""
    seed = options.seed + r
    fit_idx, val_idx, test_idx = split(rows.height, seed)
    encoder = FeatureEncoder(options.features).fit(rows[fit_idx])
    X = encoder.transform(rows)
    preds = {"actual": y[test_idx]}
    for name in options.model_names:
        t0 = time.perf_counter()
        est = _build(name, encoder, X.shape[1], target, options, seed, progress).fit(X[fit_idx], y[fit_idx])
        seconds = time.perf_counter() - t0
        used = getattr(est, "device_", "cpu")
        for split_name, idx in (("validation", val_idx), ("test", test_idx)):
            p = est.predict(X[idx])
            result.metrics.append({"model": name, "preset": options.preset if name == registry.NN else None,
                                   "features": options.features, "repeat": r, "seed": seed, "split": split_name,
                                   **metrics(y[idx], p), "rows_train": len(fit_idx), "rows_eval": len(idx),
                                   "train_seconds": seconds, "device": used, "epochs": getattr(est, "epochs_run_", None)})
        preds[name] = est.predict(X[test_idx])
        stopped = getattr(est, "stopped_by_", None)
        progress(f"{target}: repeat {r + 1}/{options.repeats} {name} trained in {seconds:.1f} s on {used}"
                 + (f" ({stopped})" if stopped else ""))
    return pl.DataFrame(preds)


def _save_champion(rows: pl.DataFrame, target: str, options: TrainOptions, champion: str, folder: Path,
                   result: TargetResult, progress: Callable[[str], None]) -> TargetResult:
    """Refit the champion on every labelled job but the calibration slice; calibrate; save it all."""
    y = rows[target].to_numpy().astype(np.float64)
    refit_idx, cal_idx = calibration_split(rows.height, options.seed, learns=champion != registry.PRIOR)
    encoder = FeatureEncoder(options.features).fit(rows[refit_idx] if len(refit_idx) else rows)
    X = encoder.transform(rows)
    t0 = time.perf_counter()
    est = _build(champion, encoder, X.shape[1], target, options, options.seed, progress).fit(X[refit_idx], y[refit_idx])
    floor = float(y[refit_idx].min()) if len(refit_idx) else float(y.min(initial=1.0))
    groups = {g: rows[g].gather(cal_idx).to_list() for g in intervals.GROUPINGS if g in rows.columns}
    result.calibration[champion] = intervals.calibrate(y[cal_idx], est.predict(X[cal_idx]), floor, groups)
    prior_column = FEATURE_SETS[options.features].prior_column(target)
    if prior_column is not None and champion != registry.PRIOR:  # the fallback for out-of-distribution jobs
        prior = registry.PriorModel(prior_column)
        result.calibration[registry.PRIOR] = intervals.calibrate(y[cal_idx], prior.predict(X[cal_idx]), floor, groups)
    result.ood = ood.fit(rows.gather(refit_idx) if len(refit_idx) else rows, options.features)
    result.champion, result.model_dir = champion, str(folder)
    result.refit = {"rows": len(refit_idx), "calibration_rows": len(cal_idx), "seconds": round(time.perf_counter() - t0, 2)}
    store.save_model(folder, champion, est)
    store.save_encoder(folder, encoder)
    if result.test_predictions is not None:
        store.save_test_predictions(folder, result.test_predictions)
    store.save_metadata(folder, _metadata(target, options, result))
    progress(f"{target}: {champion} refitted on {len(refit_idx):,} jobs, intervals calibrated on {len(cal_idx):,}")
    return result


def choose_champion(metric_rows: list[dict]) -> str:
    """The model with the lowest mean validation RMSE over the repeats; test rows never count.
    Ties go to the model first in the registry's order (a stable choice)."""
    val = pl.DataFrame(metric_rows).filter(pl.col("split") == "validation")
    ranking = val.group_by("model", maintain_order=True).agg(pl.col(CHAMPION_METRIC).mean())
    return ranking.sort(CHAMPION_METRIC, maintain_order=True)["model"][0]


def _metadata(target: str, options: TrainOptions, result: TargetResult) -> dict:
    return {
        "target": target,
        "features": list(FEATURE_SETS[options.features].names),
        "feature_set": options.features,
        "models": list(options.model_names),
        "refit": result.refit,
        "preset": options.preset,
        "champion": result.champion,
        "champion_metric": f"mean validation {CHAMPION_METRIC}",
        "rows": result.rows,
        "python": platform.python_version(),
        "versions": store.library_versions(),
        "metrics": result.metrics,
        "calibration": result.calibration,
        "ood": result.ood,
    }
