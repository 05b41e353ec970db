"""Records that cross a layer boundary: made by `tasks/` (pure logic), stored by `warehouse/`.

Neither layer imports the other (tests/test_layout.py), so the shapes they hand each other through
`flows/` are defined here, beside the job-log contract, which both already import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl


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


@dataclass
class TargetResult:
    """One target's training outcome: metrics of every model x repeat x split, and the champion."""

    target: str
    skipped: str | None = None
    rows: int = 0
    metrics: list[dict] = field(default_factory=list)  # one dict per model x repeat x split
    champion: str | None = None
    model_dir: str | None = None
    calibration: dict[str, dict] = field(default_factory=dict)  # model -> interval calibration (repeat 0)
    test_predictions: pl.DataFrame | None = None  # repeat 0: actual and every model's prediction
    refit: dict = field(default_factory=dict)  # the champion's refit: rows, calibration rows, seconds
    ood: dict = field(default_factory=dict)  # the champion's out-of-distribution detector (tasks/learn/ood.py)
    gate_predictions: pl.DataFrame | None = None  # job_id, p50 of the backtest window, fitted without it
    skipped_fits: list[dict] = field(default_factory=list)  # model, repeat, reason: fits the night did not finish
    compiled: dict | None = None  # the champion compiled for scoring (tasks/learn/models/compiled.py): used, or why not


@dataclass(frozen=True)
class Champion:
    """The model that scores a target: which one, from which train run, and where its files are."""

    target: str
    model: str
    train_run_id: str
    model_dir: str
