"""Forecasts from the scheduler's own history, for jobs logged without model features.

A job known only by its scheduler's accounting (contract v4: `model_type` `unknown` and none of the other
10 features, e.g. a plain `sacct` export) has nothing the champions learned from. What is known is
what the scheduler records: its queue, account (`team`), GPU type and count, the run time it asked
for (`time_limit_hours`, Slurm's `Timelimit`) and its name (`job_name`; its pattern, digits stripped,
groups the runs of one script: `train_bert_042` and `train_bert_117` are `train_bert_`). Users
resubmit the same scripts to the same queues, so the site's history of similar jobs forecasts them.

`SchedulerHistory` is a scikit-learn-style estimator on those facts (`SCHEDULER_FEATURES`), one per
target, fitted at scoring time on the labelled history the nightly stages anyway (the champions'
training rows, with and without features: every job has its scheduler facts):
* **estimator**: scikit-learn's `HistGradientBoostingRegressor` on log(target), the categorical facts as
  native categories (codes learned on the fit rows; a value never seen is missing), missing values
  handled by the trees;
* **intervals**: the champions' own Mondrian conformal predictive systems (`tasks/learn/intervals.py`,
  crepes) on a calibration slice the model never saw (`CALIBRATION_SHARE`), per queue where it has
  `intervals.MIN_GROUP` jobs, pooled below; under `intervals.MIN_POOLED` calibration jobs, the fixed
  x/÷ 4 band that says how little is known;
* **run time at most the time limit**: the scheduler stops a job at its limit, so P10/P50/P90 of
  `runtime_hours` are capped at the job's `time_limit_hours` when it has one;
* **too little history** (fewer than `MIN_ROWS` labelled jobs): no model; P10/P50/P90 are the empirical
  percentiles of the same queue's labelled jobs (of all of them when the queue has fewer than
  `MIN_QUEUE_ROWS`); with no labelled job at all, no forecast (the plan then counts the job as of unknown
  size, `tasks/plan/capacity.py`).
Every forecast is flagged (`ood` true) with its reason in words: the champion never saw such a job.
Measured against queue medians on the simulator and a sacct-like sample: `tests/benchmarks/bench_scheduler_runtime.py`
(docs/models.md, "Jobs without model features").
"""

from __future__ import annotations

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records import catalog
from gpucast.tasks.learn import intervals, traced

NAME_PATTERN = "name_pattern"  # job_name, lower case, digits stripped
GPU_MEMORY = "gpu_memory_gb"  # the catalogue's memory of the job's GPU type
CATEGORICAL = (c.QUEUE, c.TEAM, c.GPU_TYPE, NAME_PATTERN)
NUMERIC = (c.GPU_COUNT, c.TIME_LIMIT_HOURS, GPU_MEMORY)
SCHEDULER_FEATURES = CATEGORICAL + NUMERIC
MIN_ROWS = 40  # labelled jobs for a model; fewer: the history's percentiles
MIN_QUEUE_ROWS = 5  # a queue's own percentiles need this many labelled jobs
CALIBRATION_SHARE = 0.25
MAX_CATEGORIES = 250  # per categorical fact, the most frequent (HistGradientBoosting takes at most 255)
MODEL = "scheduler_history"  # the `model` column of its forecasts
MEDIAN = "history_queue_median"  # ... when the queue median forecast the held-out jobs better
QUANTILES = "history_quantiles"
OTHER_FEATURES = tuple(f for f in c.FEATURES if f != c.MODEL_TYPE)
MAX_FIT_ROWS = 200_000  # the most recent labelled jobs a model learns from (bounds a night's fitting time)
# what `forecast` returns, with the target and the run that made it: the scorer's columns (tasks/learn/score.py)
FORECAST_SCHEMA = {c.JOB_ID: pl.String, "p10": pl.Float64, "p50": pl.Float64, "p90": pl.Float64, "model": pl.String,
                   "ood": pl.Boolean, "ood_reason": pl.String,
                   # no architecture is recognised for a job without model features (null): the scorer's columns
                   traced.ARCH_INFERRED: pl.String, traced.ARCH_MATCH_DISTANCE: pl.Float64}
SCORED_SCHEMA = {**FORECAST_SCHEMA, "target": pl.String, "train_run_id": pl.String}


def featureless(rows: pl.DataFrame) -> pl.Series:
    """True for jobs without model features: model type missing or `unknown`, and none of the other 10."""
    unknown = rows[c.MODEL_TYPE].is_null() | (rows[c.MODEL_TYPE] == c.UNKNOWN_MODEL_TYPE)
    present = [rows[f].is_not_null() for f in OTHER_FEATURES if f in rows.columns]
    if present:
        unknown = unknown & ~pl.DataFrame(present).select(pl.any_horizontal(pl.all())).to_series()
    return unknown.fill_null(False).alias("featureless")


def scheduler_facts(rows: pl.DataFrame) -> pl.DataFrame:
    """The `SCHEDULER_FEATURES` of `rows` (contract columns; the v4 ones may be absent in an older frame)."""
    memory = {name: gpu.memory_gb for name, gpu in catalog.gpus().items()}
    gpu_types = rows[c.GPU_TYPE] if c.GPU_TYPE in rows.columns else pl.Series([None] * rows.height, dtype=pl.String)
    canonical = gpu_types.map_elements(lambda g: catalog.canonical(g) or g, return_dtype=pl.String, skip_nulls=True)
    col = lambda name, dtype: rows[name].cast(dtype) if name in rows.columns else pl.Series([None] * rows.height, dtype=dtype)  # noqa: E731
    return pl.DataFrame({
        c.QUEUE: col(c.QUEUE, pl.String), c.TEAM: col(c.TEAM, pl.String), c.GPU_TYPE: canonical,
        NAME_PATTERN: col(c.JOB_NAME, pl.String).str.to_lowercase().str.replace_all(r"[0-9]+", "").str.strip_chars(),
        c.GPU_COUNT: col(c.GPU_COUNT, pl.Float64).fill_null(1.0),  # the contract: missing means 1
        c.TIME_LIMIT_HOURS: col(c.TIME_LIMIT_HOURS, pl.Float64),
        GPU_MEMORY: canonical.replace_strict(memory, default=None, return_dtype=pl.Float64),
    })


class SchedulerHistory:
    """P10/P50/P90 of one target from the scheduler's facts (see the module doc). scikit-learn style:
    `fit(history)` returns self, `predict(rows)` the P50 as a 1-D array, `forecast(rows)` the intervals."""

    def __init__(self, target: str, seed: int = 0, min_rows: int = MIN_ROWS, max_iter: int = 200, threads: int = 1):
        self.target = target
        self.seed = seed
        self.min_rows = min_rows
        self.max_iter = max_iter
        self.threads = threads  # OpenMP threads of the trees (its default, every core, crawls on a busy host)

    def fit(self, history: pl.DataFrame) -> SchedulerHistory:
        """Learn from the jobs of `history` (contract columns) whose target is measured (> 0)."""
        labelled = history.filter(pl.col(self.target).is_not_null() & (pl.col(self.target) > 0))
        if labelled.height > MAX_FIT_ROWS and c.SUBMITTED_AT in labelled.columns:
            labelled = labelled.sort(c.SUBMITTED_AT, c.JOB_ID).tail(MAX_FIT_ROWS)
        self.rows_ = labelled.height
        y = labelled[self.target].to_numpy().astype(np.float64)
        facts = scheduler_facts(labelled)
        self.estimator_ = None
        if self.rows_ < self.min_rows:  # the history's percentiles, per queue where it has enough jobs
            self.pooled_ = np.quantile(y, [0.1, 0.5, 0.9]) if self.rows_ else None
            self.by_queue_ = {q: np.quantile(y[np.asarray(facts[c.QUEUE] == q)], [0.1, 0.5, 0.9])
                              for q, n in facts[c.QUEUE].value_counts().iter_rows() if n >= MIN_QUEUE_ROWS}
            return self
        from sklearn.ensemble import HistGradientBoostingRegressor
        from threadpoolctl import threadpool_limits

        self.codes_ = {name: {v: i for i, v in enumerate(facts[name].drop_nulls().value_counts(sort=True)[name]
                                                            .head(MAX_CATEGORIES).to_list())} for name in CATEGORICAL}
        order = np.random.default_rng(self.seed).permutation(self.rows_)
        n_cal = int(round(self.rows_ * CALIBRATION_SHARE))
        cal, fit = order[:n_cal], order[n_cal:]
        self.empty_ = ()
        X = self._encode(facts)
        # a fact never logged (no time limit in a tracker's logs) is a constant: scikit-learn cannot bin an all-NaN column
        self.empty_ = tuple(bool(np.isnan(X[fit, j]).all()) for j in range(X.shape[1]))
        X = self._encode(facts)
        with threadpool_limits(limits=self.threads):
            self.estimator_ = HistGradientBoostingRegressor(
                max_iter=self.max_iter, learning_rate=0.1, min_samples_leaf=max(5, min(20, len(fit) // 20)),
                categorical_features=[True] * len(CATEGORICAL) + [False] * len(NUMERIC), random_state=self.seed,
            ).fit(X[fit], np.log(y[fit]))
            cal_pred = np.exp(self.estimator_.predict(X[cal]))
        # chosen by evidence, like the champions' fallback (ood.py): the trees, unless the plain queue median
        # forecasts the held-out jobs better (lower MAPE): where the facts carry nothing beyond the queue
        queues = facts[c.QUEUE].to_numpy()
        self.medians_ = {str(q): float(np.median(y[fit][queues[fit] == q])) for q in np.unique(queues[fit].astype(str))}
        self.pooled_median_ = float(np.median(y[fit]))
        cal_median = self._queue_medians(queues[cal])
        self.evidence_ = {MODEL: _mape(y[cal], cal_pred), MEDIAN: _mape(y[cal], cal_median)}
        self.chosen_ = MEDIAN if self.evidence_[MEDIAN] < self.evidence_[MODEL] else MODEL
        groups = {c.MODEL_TYPE: [c.UNKNOWN_MODEL_TYPE] * len(cal), c.QUEUE: queues[cal].tolist()}
        self.calibration_ = intervals.calibrate(y[cal], cal_pred if self.chosen_ == MODEL else cal_median,
                                                float(y[fit].min()), groups)
        self.calibrated_ = intervals.Calibrated(self.calibration_)
        return self

    def _encode(self, facts: pl.DataFrame) -> np.ndarray:
        """(n, 7) float: category codes (NaN: missing or never seen in fit), GPUs, log time limit, GPU memory."""
        cats = [facts[n].replace_strict(self.codes_[n], default=None, return_dtype=pl.Float64).to_numpy() for n in CATEGORICAL]
        limit = facts[c.TIME_LIMIT_HOURS].to_numpy().astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_limit = np.where(limit > 0, np.log(np.where(limit > 0, limit, 1.0)), np.nan)
        nums = [facts[c.GPU_COUNT].to_numpy().astype(np.float64), log_limit, facts[GPU_MEMORY].to_numpy().astype(np.float64)]
        X = np.column_stack([np.asarray(v, dtype=np.float64) for v in cats + nums])
        for j, empty in enumerate(self.empty_):
            if empty:
                X[:, j] = 0.0
        return X

    def _queue_medians(self, queues: np.ndarray) -> np.ndarray:
        return np.array([self.medians_.get(str(q), self.pooled_median_) for q in queues], dtype=np.float64)

    def intervals(self, rows: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p10, p50, p90) per row; NaN where nothing is known (no labelled history at all)."""
        facts = scheduler_facts(rows)
        if self.estimator_ is not None:
            if self.chosen_ == MEDIAN:
                pred = self._queue_medians(facts[c.QUEUE].to_numpy())
            else:
                from threadpoolctl import threadpool_limits

                with threadpool_limits(limits=self.threads):
                    pred = np.exp(self.estimator_.predict(self._encode(facts)))
            groups = {c.MODEL_TYPE: np.full(rows.height, c.UNKNOWN_MODEL_TYPE, dtype=object),
                      c.QUEUE: facts[c.QUEUE].to_numpy()}
            p10, p50, p90 = self.calibrated_.intervals(pred, groups)
        else:
            bands = np.full((rows.height, 3), np.nan) if self.pooled_ is None else np.tile(self.pooled_, (rows.height, 1))
            for i, q in enumerate(facts[c.QUEUE].to_list()):
                if q in self.by_queue_:
                    bands[i] = self.by_queue_[q]
            p10, p50, p90 = bands[:, 0].copy(), bands[:, 1].copy(), bands[:, 2].copy()
        if self.target == c.RUNTIME_HOURS:  # the scheduler stops a job at its limit
            limit = facts[c.TIME_LIMIT_HOURS].to_numpy().astype(np.float64)
            p10, p50, p90 = (np.where(limit > 0, np.minimum(p, limit), p) for p in (p10, p50, p90))
        return p10, p50, p90

    def predict(self, rows: pl.DataFrame) -> np.ndarray:
        return self.intervals(rows)[1]

    def describe(self) -> str:
        """How the forecasts were made, in the words `ood_reason` carries."""
        if self.estimator_ is not None:
            band = ("conformal by queue" if self.calibrated_.pooled is not None
                    else f"x/÷ {intervals.UNCALIBRATED_FACTOR:g}: too few jobs to calibrate")
            held_out = (f"held-out MAPE {self.evidence_[self.chosen_]:.0%} vs "
                        f"{self.evidence_[MODEL if self.chosen_ == MEDIAN else MEDIAN]:.0%} for the "
                        + ("trees" if self.chosen_ == MEDIAN else "queue median"))
            what = (f"{MODEL} (queue, account, GPUs, time limit, name)" if self.chosen_ == MODEL
                    else f"{MEDIAN} (the facts beat no queue median)")
            return (f"model features unknown -> scheduler history: {what} learned from {self.rows_:,} jobs, "
                    f"{held_out}, P10-P90 {band}")
        return (f"model features unknown -> {QUANTILES}: P10/P50/P90 of {self.rows_:,} labelled job(s) "
                f"(the queue's where it has {MIN_QUEUE_ROWS}+); too few for a model ({self.min_rows})")

    def forecast(self, rows: pl.DataFrame) -> pl.DataFrame:
        """job_id, p10, p50, p90, model, ood, ood_reason: the rows that get a forecast (none without any history)."""
        p10, p50, p90 = self.intervals(rows)
        known = np.isfinite(p50)
        name = self.chosen_ if self.estimator_ is not None else QUANTILES
        return pl.DataFrame({c.JOB_ID: rows[c.JOB_ID].filter(pl.Series(known)), "p10": p10[known], "p50": p50[known],
                             "p90": p90[known], "model": [name] * int(known.sum()), "ood": [True] * int(known.sum()),
                             "ood_reason": [self.describe()] * int(known.sum()),
                             traced.ARCH_INFERRED: [None] * int(known.sum()), traced.ARCH_MATCH_DISTANCE: [None] * int(known.sum())},
                            schema=FORECAST_SCHEMA)


def _mape(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - y) / y)) if len(y) else 0.0
