"""What each flow returns to its readers (the nightly, the CLI, the report, the demo): one frozen dataclass per
flow, the same type on every path it runs (in-process, Dask, the GPU work pool).

Defined here, beside the contract, because every layer reads them: `flows/` builds them, `tasks/report/render.py`
renders them (and `tasks/` may not import `flows/`). Readers use attributes; a field added here is found by the
type checker and by `grep`, a key added to a dict is not. They are returned in-process today (no result is
persisted); should one be, Prefect's default result serializer (pickle) carries every one unchanged, and its JSON
serializer those without frames (tests/records/test_results.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime

import polars as pl

from gpucast.records.outcomes import LoadTotals

IN_PROCESS = "in-process"  # `TrainResult.where` when training ran in the nightly's (or the command's) process


@dataclass(frozen=True)
class IngestResult:
    """One ingest run (`ingest-job-logs`): its rows reconcile, `rows_read = rows_loaded + rows_rejected + rows_duplicate`."""

    run_id: str
    files: int  # files the run read (files, or the inbox's new ones; one gone before it was read is not counted)
    files_rejected: int  # files rejected whole (see `rejected_files`)
    rows_read: int
    rows_loaded: int
    rows_rejected: int  # quarantined in `rejected_job_logs`
    rows_duplicate: int
    message: str | None = None  # the run's message as recorded in `ingest_runs` (a lake refresh that failed, ...)
    lake_days: int = 0  # days of the Parquet lake rewritten
    load_seconds: Mapping[str, float] = field(default_factory=dict)  # wall seconds: "warehouse" (the merge), "lake", "publish"
    # seconds summed over files: "read", "normalise", "rules", "write"; "gx": GX's one validation of the run
    stage_seconds: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, run_id: str, files: int, totals: LoadTotals, stage_seconds: Mapping[str, float]) -> IngestResult:
        """The run's result from what its load committed (`load-run`) and what staging its files took."""
        return cls(run_id=run_id, files=files, files_rejected=totals.files_rejected, rows_read=totals.rows_read,
                   rows_loaded=totals.rows_loaded, rows_rejected=totals.rows_rejected,
                   rows_duplicate=totals.rows_duplicate, message=totals.message, lake_days=totals.lake_days,
                   load_seconds=totals.load_seconds, stage_seconds=stage_seconds)


@dataclass(frozen=True)
class SourcesResult:
    """The nightly's pull of the sources file (GPUCAST_SOURCES): each source's ingest runs, and the ones that failed."""

    runs: Mapping[str, IngestResult] = field(default_factory=dict)  # source name (a Slurm glob: one per file) -> ingest run
    failed: Mapping[str, str] = field(default_factory=dict)  # source name -> why it failed (one line)


@dataclass(frozen=True)
class ChampionCoverage:
    """How one target's current champion did on the backtest window (`warehouse/backtest.py` `champion_coverage`):
    the drift warning (`tasks/learn/gate.py`) and the nightly report read it."""

    target: str
    model: str
    train_run_id: str
    jobs: int  # the window's jobs it forecast before they ran
    p90_coverage: float  # share of them at or under its P90 (0-1)
    p10_p90_coverage: float  # share of them within [P10, P90] (0-1)
    mape: float  # %


@dataclass(frozen=True)
class BacktestResult:
    """The backtest window refreshed (`forecast_backtest`): job x target pairs completed in it, and how the champions did."""

    window_start: datetime | None  # the window's first completion time (UTC); None: no completed job yet
    jobs: int  # job x target pairs completed in the window
    forecast: int  # ... of which were forecast before they ran
    not_forecast: int
    champions: tuple[ChampionCoverage, ...] = ()  # per target with a champion, in target order
    warnings: tuple[str, ...] = ()  # drift warnings (`tasks/learn/gate.py` `drift_warnings`)


@dataclass(frozen=True)
class TraceSummary:
    """What the traced prior did for the staged jobs (`tasks/learn/traced.py` `summary`)."""

    trace_statuses: Mapping[str, int] = field(default_factory=dict)  # traced prior's status -> jobs
    unknown_archs: Mapping[str, int] = field(default_factory=dict)  # architecture name the zoo does not know -> jobs


@dataclass(frozen=True)
class FeatureSummary:
    """What tonight's models learn from and score (`tasks/learn/features.py` `summary`; the empty one when the
    history and the pending jobs were not both staged)."""

    labelled_jobs: int | None = None  # labelled jobs read
    pending: int | None = None  # pending jobs read
    labelled: Mapping[str, int] = field(default_factory=dict)  # target -> labelled jobs it can learn from
    missing_feature_share: Mapping[str, float] = field(default_factory=dict)  # feature -> share of jobs without it (0-1)
    unknown_gpu_types: Mapping[str, int] = field(default_factory=dict)  # GPU type not in the catalogue -> jobs
    # contract v5: field (sharding, adapter) -> jobs whose word nobody knew, kept as `unknown`
    unknown_layout_words: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FeaturesResult:
    """The staged features (`stage-features`): where the Parquet files are, and what tonight's models see."""

    history_path: str | None = None  # the labelled history, when staged
    pending_path: str | None = None  # the pending jobs, when staged
    labelled_jobs: int | None = None  # labelled jobs read (history and pending both staged; else None)
    pending: int | None = None  # pending jobs read
    labelled: Mapping[str, int] = field(default_factory=dict)  # target -> labelled jobs it can learn from
    missing_feature_share: Mapping[str, float] = field(default_factory=dict)  # feature -> share of jobs without it (0-1)
    unknown_gpu_types: Mapping[str, int] = field(default_factory=dict)  # GPU type not in the catalogue -> jobs
    trace_statuses: Mapping[str, int] = field(default_factory=dict)  # traced prior's status -> jobs
    unknown_archs: Mapping[str, int] = field(default_factory=dict)  # architecture name the zoo does not know -> jobs
    unknown_layout_words: Mapping[str, int] = field(default_factory=dict)  # v5 field -> jobs with an unknown word

    @classmethod
    def of(cls, history_path: str | None, pending_path: str | None, trace: TraceSummary,
           seen: FeatureSummary) -> FeaturesResult:
        """The step's result from where it staged each part and what the two summaries say."""
        return cls(history_path=history_path, pending_path=pending_path, labelled_jobs=seen.labelled_jobs,
                   pending=seen.pending, labelled=seen.labelled, missing_feature_share=seen.missing_feature_share,
                   unknown_gpu_types=seen.unknown_gpu_types, trace_statuses=trace.trace_statuses,
                   unknown_archs=trace.unknown_archs, unknown_layout_words=seen.unknown_layout_words)


@dataclass(frozen=True)
class TrainedTarget:
    """One target of a train run: its champion tonight, or why it was skipped, and the gate's decision."""

    target: str
    champion: str | None  # tonight's best model (the challenger); None when skipped
    skipped: str | None  # why the target was skipped, if it was
    rows: int  # labelled jobs
    skipped_fits: int  # fits the night did not finish (table `skipped_fits`)
    decision: str | None = None  # the champion gate's: "promoted" | "kept"; None when it had no backtest evidence
    choice_reason: str | None = None  # why tonight's best was chosen, with how much it beats the plain LightGBM (issue 50)
    priced_out: tuple[str, ...] = ()  # models fitted once: over the scoring budget at their last counted cost


@dataclass(frozen=True)
class TrainResult:
    """A train run (`train-models`), wherever it ran: in this process, or the `gpu` work pool's worker."""

    train_run_id: str
    targets: tuple[TrainedTarget, ...]
    where: str = IN_PROCESS  # "in-process" | "work pool gpu"
    device: str | None = None  # the network's device (cpu | cuda)
    fits_on: str | None = None  # where the fits ran (a Dask cluster, this process), in words
    fit_seconds: float | None = None  # wall seconds of the fits
    note: str | None = None  # what on-call should know about where the fits ran (a cluster that was not reached)
    flow_run_id: str | None = None  # the GPU pool's Prefect flow run that trained
    cancelled_flow_run_id: str | None = None  # a GPU pool run nobody picked up (cancelled; trained here instead)

    def fitted_nothing(self) -> str | None:
        """Why no target got a champion tonight (each skipped reason, said once), in words; None when one did."""
        if not self.targets or any(t.champion for t in self.targets):
            return None
        reasons = dict.fromkeys(t.skipped or "no champion" for t in self.targets)
        if len(reasons) == 1:
            return f"every target: {next(iter(reasons))}"
        return "; ".join(f"{t.target}: {t.skipped or 'no champion'}" for t in self.targets)


@dataclass(frozen=True)
class ScoreResult:
    """A score run (`score-pending`): forecasts published for the pending jobs."""

    score_run_id: str
    pending_jobs: int
    forecasts: int  # rows published: pending jobs x targets forecast
    scored_on: str  # where scoring ran, in words
    ood_forecasts: int  # forecasts of jobs out of the champion's distribution (`ood_reason`)
    ood_by_target: Mapping[str, int] = field(default_factory=dict)
    featureless_jobs: int = 0  # pending jobs without model features (forecast from the scheduler's history)
    champions: Mapping[str, str] = field(default_factory=dict)  # target -> champion model


@dataclass(frozen=True)
class DemandResult:
    """A demand forecast run (`demand-forecast`): daily GPU-hours per queue x GPU type after `history_end`."""

    demand_run_id: str
    history_end: date  # the last full day of history: the forecast starts the day after
    days: int  # days forecast
    series: int  # queue x GPU type series forecast
    fallback_series: int  # ... of which on a fallback method (see `fallback_reason`)
    forecast: pl.DataFrame  # the forecast's rows (current_demand_forecast's columns)
    backtest_rows: int  # forecast days of the backtest


@dataclass(frozen=True)
class PlanResult:
    """A capacity plan run (`capacity-plan`)."""

    plan_run_id: str
    start_day: date
    days: int  # days planned
    jobs: int  # pending jobs planned
    unknown_size_jobs: int
    unplaceable_jobs: int  # jobs that fit no GPU of their queue
    rows: pl.DataFrame  # the plan per day x queue x GPU type (current_capacity_plan's columns)
    note: str | None = None  # what the plan lacks (no demand forecast, ...)
    scenarios: pl.DataFrame | None = None  # plan_scenarios' rows: the baseline and each what-if, per day (issue 53)


@dataclass(frozen=True)
class FlowRunLine:
    """One top-level Prefect flow run as `gpucast status` shows it (`flows/status.py` reads it from Prefect's API)."""

    flow: str
    run: str  # the run's name
    state: str  # its state's name ("?" without one)
    started: datetime | None
    seconds: float
    id: str
    failed_step: str | None = None  # a failed run's failed task runs (subflows are tasks of their parent)
    error: str | None = None  # a failed run's state message


@dataclass(frozen=True)
class ScheduledRun:
    """A flow run a deployment's schedule created ahead (`gpucast status`'s next run)."""

    flow: str
    deployment: str | None
    at: datetime  # UTC


@dataclass(frozen=True)
class NightResult:
    """The nightly run (`nightly`): what each step returned (None: it did not run), in `NIGHTLY_STEPS` order.

    On a failure the report is rendered from the steps that ran, so every step is optional."""

    ingest: IngestResult | None = None
    sources: Mapping[str, IngestResult] | None = None  # the sources file's ingest runs (an inbox night)
    backtest: BacktestResult | None = None
    features: FeaturesResult | None = None
    train: TrainResult | None = None
    score: ScoreResult | None = None
    demand: DemandResult | None = None
    plan: PlanResult | None = None
    page: str | None = None  # the planners' page written
    published: str | None = None  # the planners' copy published
    warnings: tuple[str, ...] = ()
    seconds: Mapping[str, float] = field(default_factory=dict)  # step -> wall seconds
    report: str = ""  # the Markdown report (the `nightly-report` artifact)

    def untrained(self) -> str | None:
        """Why tonight's train step left no target a champion (`TrainResult.fitted_nothing`); None when it did or
        did not run: a score with no champion then names the cause, not only "run `gpucast train`"."""
        return None if self.train is None else self.train.fitted_nothing()
