"""Records that cross a layer boundary: made by `tasks/` (pure logic), stored by `warehouse/`.

Neither layer imports the other (tests/test_layout.py), so the shapes they hand each other through
`flows/` are defined here, beside the job-log contract, which both already import.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import polars as pl

# A JSON-ready artefact saved with a model (interval calibration, out-of-distribution detector): its
# shape is owned by the module that makes and reads it (tasks/learn/intervals.py, tasks/learn/ood.py).
JsonObject = dict[str, Any]


# A file's status when it was deleted or moved after the run listed it: no rows, no content hash, not archived; not one
# of the run's `files` (the gate's denominator), so a file of that name and content is read by a later run.
GONE_STATUS = "gone"


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
    status: str = "staged"  # staged | rejected | empty | GONE_STATUS (the reason: tasks/ingest/staging.py GONE)
    reason: str | None = None
    ignored_columns: list[str] = field(default_factory=list)
    outcomes: list[dict] = field(default_factory=list)  # per expectation: suite, rule, success, counts
    seconds: dict[str, float] = field(default_factory=dict)  # read / normalise / rules / write (staging.STAGE_STEPS)
    stat_before: tuple[int, int] | None = None  # (size, mtime_ns) before reading began: a change = written while read


@dataclass(frozen=True)
class RunCheck:
    """Great Expectations' one validation of a run's checked rows (`tasks/ingest/staging.py` `check_run`): the
    rows and expectations it judged (each agreeing with the row rules) and its seconds; 0 rows: nothing to judge."""

    rows: int
    expectations: int
    seconds: float


@dataclass(frozen=True)
class LoadTotals:
    """What an ingest run's load committed (`warehouse/load.py` `load_run`), as `ingest_runs` records it:
    `rows_read = rows_loaded + rows_rejected + rows_duplicate`; and, once the flow has refreshed the lake, the days
    it rewrote and the load's wall seconds."""

    files_rejected: int
    rows_read: int
    rows_loaded: int
    rows_rejected: int
    rows_duplicate: int
    message: str | None = None  # the run's message (a file's note, a lake refresh that failed)
    lake_days: int = 0  # days of the Parquet lake rewritten
    load_seconds: Mapping[str, float] = field(default_factory=dict)  # wall seconds: "warehouse" (the merge), "lake"


@dataclass(frozen=True)
class MetricRow:
    """One model's errors on one split of one fit (a row of `model_metrics`). Since issue 50 a fit is one fold of
    a repeated K-fold (tasks/learn/train.py `fold_split`): `validation` and `test` are both its held-out fold (rows
    no fit of that pass saw; `validation` is the split the champion rule's readers look up, `test` the reported
    one), `backtest` the latest week and `holdout` the held-out model families (the generalisation holdout)."""

    model: str
    preset: str | None  # the network's preset; None for the other models
    features: str  # the feature set
    repeat: int
    seed: int
    split: str  # validation | test (the held-out fold, both) | backtest | holdout (the generalisation holdout)
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
    score_seconds_per_million: float | None = None  # its predict's CPU-s per 1M jobs on one core, counted (champion.py `score_cost`)
    planner_loss: float | None = None  # sqrt(mean(w err²)), w 3 on under-forecasts, target's units (champion.py `planner_loss`)


@dataclass(frozen=True)
class FitResult:
    """A fit that finished: its metrics, its forecasts of its held-out fold (out of fold: `test_idx`, row indices
    into the target's labelled rows, and `test_pred`) and of the generalisation holdout (`holdout_idx`,
    `holdout_pred`): what the champion is chosen on (tasks/learn/champion.py `champion_choice`)."""

    target: str
    model: str
    repeat: int
    metrics: tuple[MetricRow, ...]
    test_pred: np.ndarray
    seconds: float
    device: str
    stopped: str | None = None  # why the network stopped early (its time budget), if it did
    test_idx: np.ndarray | None = None
    holdout_idx: np.ndarray | None = None
    holdout_pred: np.ndarray | None = None


# How the reason of a fit priced out of the scoring budget begins (`FitSkipped.priced_out`): the warehouse tells those
# rows of `skipped_fits` from fits the night did not finish by it (`warehouse/training.py` `TRAIN_RESULT`).
PRICED_OUT_WORDS = "not fitted:"


@dataclass(frozen=True)
class FitSkipped:
    """A fit that did not finish: the night budget ran out before it (`failed` False), or it raised or
    its worker was lost (`failed` True; `reason` carries the error); or a fit not run because its model's last counted
    scoring cost puts it far over tonight's scoring budget (`priced_out` True, `champion.priced_out`: every repeat but
    the first, `fanout.priced_out_fits`). A row of `skipped_fits`."""

    target: str
    model: str
    repeat: int
    reason: str
    failed: bool = False
    priced_out: bool = False


FitOutcome = FitResult | FitSkipped


@dataclass(frozen=True)
class Refit:
    """The champion's refit on every labelled job but the calibration slice."""

    rows: int = 0
    calibration_rows: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class CompileInfo:
    """What compiling a tree champion for scoring did: written once, beside the model, by
    `tasks/learn/models/compiled.py` `compile_model` (as `<model>.compiled.json`, and in the model's
    `metadata.json` under "compiled"); read back by the same module's `load_compiled` before scoring."""

    model: str  # the registry model
    used: bool  # the library was built and agreed with the native model: scoring may use it
    reason: str | None = None  # why it is not used (a family that stays native, too many nodes, a mismatch, an error)
    float32_input: bool = False  # rows are rounded to float32 first, as scikit-learn's trees do
    compile_seconds: float | None = None  # wall seconds of tl2cgen's export (gcc included)
    tl2cgen: str | None = None  # the tl2cgen version that built the library (another one does not load it)
    codegen: JsonObject | None = None  # tl2cgen's code-generation parameters
    max_relative_difference: float | None = None  # compiled vs native raw predictions on `checked_rows` rows
    checked_rows: int | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> CompileInfo:
        """From `to_json`'s text (or an older file's, which left out what it did not know)."""
        data = json.loads(text)
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


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
    ood: Any = None  # the champion's out-of-distribution detector: tasks/learn/ood.py `Detector` (saved by its `to_json`)
    gate_predictions: pl.DataFrame | None = None  # job_id, p50 of the backtest window, fitted without it
    skipped_fits: list[FitSkipped] = field(default_factory=list)  # fits the night did not finish or run (priced out)
    compiled: CompileInfo | None = None  # the champion compiled for scoring (tasks/learn/models/compiled.py)
    most_accurate: str | None = None  # the lowest out-of-fold planner loss (the champion may be a cheaper tied one)
    champion_tied: tuple[str, ...] = ()  # the models tied with the most accurate (the champion first)
    blend: Any = None  # the blend's members and weights when it is champion (tasks/learn/blend.py `Blend`)
    choice_reason: str | None = None  # why the champion was chosen (tasks/learn/champion.py `ChampionChoice.describe`)

    def champion_cost(self) -> float | None:
        """The champion's counted scoring cost (CPU-s per 1M jobs: its held-out folds' `score_seconds_per_million`, the
        mean, as `warehouse/training.py` `champion_cost` reads it back); None without a champion or a counted cost."""
        costs = [m.score_seconds_per_million for m in self.metrics if m.model == self.champion and m.split == "test"
                 and m.score_seconds_per_million is not None]
        return sum(costs) / len(costs) if costs else None


@dataclass(frozen=True)
class Champion:
    """The model that scores a target: which one, from which train run, and where its files are."""

    target: str
    model: str
    train_run_id: str
    model_dir: str


@dataclass(frozen=True)
class GateWindow:
    """One target's evidence for the champion gate (`tasks/learn/gate.py`): its current champion, and the jobs of
    the backtest window that champion forecast before they ran (`warehouse/backtest.py` `champion_window`: job_id,
    p50, p90, actual), and its counted scoring cost (CPU seconds per 1M jobs, `warehouse/backtest.py` `champion_cost`;
    None: not counted), which tonight's scoring budget judges it by."""

    champion: Champion
    jobs: pl.DataFrame
    cost: float | None = None


@dataclass(frozen=True)
class GateWindows:
    """What a train run's gate reads, read once before the fits (`gate-windows`): per target that has a champion
    its `GateWindow`; a target without one has no window (nothing to gate: tonight's champion is promoted)."""

    by_target: Mapping[str, GateWindow] = field(default_factory=dict)

    def of(self, target: str) -> GateWindow | None:
        return self.by_target.get(target)

    def champion(self, target: str) -> Champion | None:
        """The target's current champion, which tonight's is weighed against (None: it has none yet)."""
        window = self.by_target.get(target)
        return window.champion if window else None

    def previous_models(self) -> dict[str, str]:
        """Target -> its current champion's model (the fits' order puts it first: `tasks/learn/train.py` `order_fits`)."""
        return {t: w.champion.model for t, w in self.by_target.items()}

    def holdouts(self, targets: Iterable[str]) -> dict[str, list[str] | None]:
        """Target -> the job ids of its window (None without a champion): the challenger is fitted once more without
        them and predicts them (`tasks/learn/train.py` `finish_target`'s `holdout`)."""
        return {t: self.by_target[t].jobs["job_id"].to_list() if t in self.by_target else None for t in targets}
