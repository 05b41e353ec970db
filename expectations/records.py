"""Records that cross a layer boundary: made by `tasks/` (pure logic), stored by `warehouse/`.

Neither layer imports the other (tests/test_layout.py), so the shapes they hand each other through
`flows/` are defined here, beside the job-log contract, which both already import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

# A JSON-ready artefact saved with a model (interval calibration, out-of-distribution detector): its
# shape is owned by the module that makes and reads it (tasks/learn/intervals.py, tasks/learn/ood.py).
JsonObject = dict[str, Any]


@dataclass
class FileResult:
    """Where the rows of one ingested file went (before the warehouse sorts loaded from duplicate)."""

    path: str
    sha256: str
    index: int
    fmt: str = ""
    rows_read: int = 0
    rows_valid: int = 0
    rows_rejected: int = 0
    status: str = "staged"  # staged | rejected | empty
    reason: str | None = None
    ignored_columns: list[str] = field(default_factory=list)
    outcomes: list[dict] = field(default_factory=list)  # per expectation: suite, rule, success, counts
    seconds: dict[str, float] = field(default_factory=dict)  # read / check (normalise + GX) / write


@dataclass(frozen=True)
class MetricRow:
    """One model's errors on one split of one repeated holdout (a row of `model_metrics`)."""

    model: str
    preset: str | None  # the network's preset; None for the other models
    features: str  # the feature set
    repeat: int
    seed: int
    split: str  # validation | test
    mse: float
    rmse: float
    mae: float
    mape: float  # %
    r2: float
    rows_train: int
    rows_eval: int
    train_seconds: float
    device: str
    epochs: int | None  # the network's epochs run; None for the other models
    score_seconds_per_million: float | None = None  # its predict's cost scaled to 1M jobs (tasks/learn/train.py `score_cost`)


@dataclass(frozen=True)
class FitResult:
    """A fit that finished: its metrics on validation and test, and its test predictions."""

    target: str
    model: str
    repeat: int
    metrics: tuple[MetricRow, ...]
    test_pred: np.ndarray
    seconds: float
    device: str
    stopped: str | None = None  # why the network stopped early (its time budget), if it did


@dataclass(frozen=True)
class FitSkipped:
    """A fit that did not finish: the night budget ran out before it (`failed` False), or it raised or
    its worker was lost (`failed` True; `reason` carries the error). A row of `skipped_fits`."""

    target: str
    model: str
    repeat: int
    reason: str
    failed: bool = False


FitOutcome = FitResult | FitSkipped


@dataclass(frozen=True)
class Refit:
    """The champion's refit on every labelled job but the calibration slice."""

    rows: int = 0
    calibration_rows: int = 0
    seconds: float = 0.0


@dataclass
class TargetResult:
    """One target's training outcome: metrics of every model x repeat x split, and the champion."""

    target: str
    skipped: str | None = None
    rows: int = 0
    metrics: list[MetricRow] = field(default_factory=list)
    champion: str | None = None
    model_dir: str | None = None
    calibration: dict[str, JsonObject] = field(default_factory=dict)  # model -> interval calibration
    test_predictions: pl.DataFrame | None = None  # repeat 0: actual and every model's prediction
    refit: Refit = field(default_factory=Refit)
    ood: JsonObject = field(default_factory=dict)  # the champion's out-of-distribution detector (tasks/learn/ood.py)
    gate_predictions: pl.DataFrame | None = None  # job_id, p50 of the backtest window, fitted without it
    skipped_fits: list[FitSkipped] = field(default_factory=list)  # fits the night did not finish
    compiled: JsonObject | None = None  # the champion compiled for scoring (tasks/learn/models/compiled.py)
    most_accurate: str | None = None  # the lowest mean validation RMSE (the champion may be a cheaper tied one)
    choice_reason: str | None = None  # why the champion was chosen (tasks/learn/train.py `ChampionChoice.describe`)


@dataclass(frozen=True)
class Champion:
    """The model that scores a target: which one, from which train run, and where its files are."""

    target: str
    model: str
    train_run_id: str
    model_dir: str
