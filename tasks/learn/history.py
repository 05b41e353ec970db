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
Run time (issue 53 item 2, measured on a real cluster's trace, `tests/benchmarks/bench_real_runtime.py`):
* the trees learn the median of log hours (`LOSS`), each job weighted 1/2 per `HALF_LIFE_DAYS` of age
  (`_recency`: what a site runs drifts); the P50 is the trees' own; once chosen and calibrated, the trees learn
  again from every labelled job (`REFIT_ALL`);
* P10-P90 around it: the weighted 10% / 90% quantiles of the held-out log errors, weighted as the trees learn, per
  queue with `intervals.MIN_GROUP` of them, pooled below (`_weighted_band`): a band of the latest weeks, not of the
  whole history (the conformal band where too few jobs were held out);
* the fallback to the queue median is judged on the held-out jobs' MAE in hours (recency-weighted), the error the
  run time is judged by (the other targets: MAPE, as before);
* `recent=True` adds the recent run times (`RECENT`, `recent_facts`): per queue x GPU count, queue, queue x name
  pattern and account, what the similar jobs that had *ended* before a job's submission ran, and the bursts of
  submissions before it. Off by default: on the real trace they did not help (docs/models.md);
* a RUNNING job's remaining time given the hours it has run: `RemainingTime` (survival-aware; its burst argument is
  the bench's only: the product's running jobs are the warehouse's `job_demand.hours_expected`);
* **bursts** (`burst_siblings`, `burst_p50`): the jobs of one queue x account x name pattern x GPU count submitted
  within `BURST_HOURS` of a job (a sweep, an array) run alike; what those that had run by the forecast's time ran
  (finished: their run time; still running: their hours so far, a lower bound) moves its P50 in log hours, shrunk
  toward the trees' by `BURST_PRIOR`, and its band with it. The nightly stages the RUNNING jobs beside the labelled
  history (`burst_siblings(..., running=)`, `tasks/learn/score.py` `by_history`), so `burst_p50`'s survival guard
  engages there. On the real trace (ITP: no queueing, so "pending to the morning after submission" is a stand-in in
  which the siblings ran as if nothing waited), through the nightly's own path: docs/models.md, "A job's burst";
  not measured on jobs that really waited. Goal x0.85: met under the stand-in only.
Every forecast is flagged (`ood` true) with its reason in words: the champion never saw such a job.
Measured against queue medians on the simulator and a sacct-like sample: `tests/benchmarks/bench_scheduler_runtime.py`
(docs/models.md, "Jobs without model features").
"""

from __future__ import annotations

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records import catalog, times
from gpucast.tasks.learn import intervals, traced

NAME_PATTERN = "name_pattern"  # job_name, lower case, digits stripped
GPU_MEMORY = "gpu_memory_gb"  # the catalogue's memory of the job's GPU type
CATEGORICAL = (c.QUEUE, c.TEAM, c.GPU_TYPE, NAME_PATTERN)
NUMERIC = (c.GPU_COUNT, c.TIME_LIMIT_HOURS, GPU_MEMORY)
# Recent run times (issue 53 item 2): per group of similar jobs, what the jobs of the group that had FINISHED
# before this one was submitted ran (log hours): the latest one, the median of the last RECENT_JOBS, their spread;
# and the group's submissions in the hour before (bursts of similar jobs) and the hours since its previous one.
RECENT_GROUPS = {"qg": (c.QUEUE, c.GPU_COUNT), "q": (c.QUEUE,), "qn": (c.QUEUE, NAME_PATTERN), "t": (c.TEAM,)}
RECENT_JOBS = 10  # finished jobs the recent median looks at
SPREAD_JOBS = 30  # ... and the spread (standard deviation of log hours)
RECENT = tuple(f"{g}_{s}" for g in RECENT_GROUPS for s in ("last", "median", "spread")) + (
    "qg_submitted_1h", "qg_hours_since_submit")
SCHEDULER_FEATURES = CATEGORICAL + NUMERIC  # (+ RECENT for a run-time model made with `recent=True`)
END = "__end"  # a finished job's end: its latest record (`updated_at`), else submitted_at + runtime_hours
MIN_ROWS = 40  # labelled jobs for a model; fewer: the history's percentiles
MIN_QUEUE_ROWS = 5  # a queue's own percentiles need this many labelled jobs
CALIBRATION_SHARE = 0.25
# Run time (issue 53 item 2, measured on a real trace: tests/benchmarks/bench_real_runtime.py)
LOSS = "absolute_error"  # of log hours: the trees' P50 is a median, what an MAE asks for
HALF_LIFE_DAYS = 7.0  # a labelled job's weight halves per this many days between its submission and the latest one
MAX_CATEGORIES = 250  # per categorical fact, the most frequent (HistGradientBoosting takes at most 255)
MODEL = "scheduler_history"  # the `model` column of its forecasts
MEDIAN = "history_queue_median"  # ... when the queue median forecast the held-out jobs better
QUANTILES = "history_quantiles"
OTHER_FEATURES = tuple(f for f in c.FEATURES if f != c.MODEL_TYPE)
REFIT_ALL = True  # run time: the chosen trees learnt again from every labelled job (`SchedulerHistory.fit`)
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


def _utc(rows: pl.DataFrame, name: str = c.SUBMITTED_AT) -> pl.Series:
    """`rows[name]` as a UTC time without a zone (null where the rows have no such column)."""
    if name not in rows.columns:
        return pl.Series(name, [None] * rows.height, dtype=pl.Datetime("us"))
    times = rows[name]
    if getattr(times.dtype, "time_zone", None):
        times = times.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
    return times.cast(pl.Datetime("us"))


def finished_runs(history: pl.DataFrame) -> pl.DataFrame:
    """The labelled jobs of `history` (contract columns) as the recent facts and the remaining time read them: the
    keys of `RECENT_GROUPS`, `submitted_at` (UTC, no zone), `END` and log run hours (`__y`), ordered by `END`."""
    labelled = history.filter(pl.col(c.RUNTIME_HOURS).is_not_null() & (pl.col(c.RUNTIME_HOURS) > 0))
    facts = scheduler_facts(labelled)
    hours = labelled[c.RUNTIME_HOURS].cast(pl.Float64)
    submitted, updated = _utc(labelled), _utc(labelled, c.UPDATED_AT)
    end = pl.select(pl.when(updated >= submitted).then(updated)
                    .otherwise(submitted + pl.duration(microseconds=(hours * 3.6e9).cast(pl.Int64)))).to_series()
    return pl.DataFrame({c.JOB_ID: labelled[c.JOB_ID], c.QUEUE: facts[c.QUEUE], c.TEAM: facts[c.TEAM],
                         NAME_PATTERN: facts[NAME_PATTERN], c.GPU_COUNT: facts[c.GPU_COUNT],
                         c.SUBMITTED_AT: submitted, END: end, "__y": hours.log()}).filter(pl.col(END).is_not_null()).sort(END)


def recent_facts(rows: pl.DataFrame, context: pl.DataFrame) -> pl.DataFrame:
    """The `RECENT` facts of each of `rows` (contract columns) as of its submission, from `context`
    (`finished_runs`): only jobs that had ended strictly before it was submitted count (no peeking at the future);
    the submissions counted are `context`'s and `rows`' own. Null where a group has no such job."""
    facts = scheduler_facts(rows)
    keyed = pl.DataFrame({c.JOB_ID: rows[c.JOB_ID].cast(pl.String), c.QUEUE: facts[c.QUEUE], c.TEAM: facts[c.TEAM],
                          NAME_PATTERN: facts[NAME_PATTERN], c.GPU_COUNT: facts[c.GPU_COUNT], "__t": _utc(rows)}
                         ).with_row_index("__pos")
    out = keyed.filter(pl.col("__t").is_not_null()).sort("__t")
    for group, keys in RECENT_GROUPS.items():
        names = [f"{group}_last", f"{group}_median", f"{group}_spread"]
        have = pl.all_horizontal(pl.col(k).is_not_null() for k in keys)
        stats = context.filter(have).select(
            *keys, END, pl.col("__y").alias(names[0]),
            pl.col("__y").rolling_median(RECENT_JOBS, min_samples=1).over(keys).alias(names[1]),
            pl.col("__y").rolling_std(SPREAD_JOBS, min_samples=2).over(keys).alias(names[2]))
        out = out.join_asof(stats, left_on="__t", right_on=END, by=list(keys), strategy="backward",
                            allow_exact_matches=False, check_sortedness=False).drop(END)
        out = out.with_columns(pl.when(have).then(pl.col(n)).alias(n) for n in names)
    keys = list(RECENT_GROUPS["qg"])
    subs = (pl.concat([context.select(pl.col(c.JOB_ID).cast(pl.String), *keys, pl.col(c.SUBMITTED_AT).alias("__s")),
                       keyed.select(c.JOB_ID, *keys, pl.col("__t").alias("__s"))])
            .filter(pl.col("__s").is_not_null() & pl.col(c.QUEUE).is_not_null())
            .unique(c.JOB_ID, keep="first").sort("__s")
            .with_columns((pl.int_range(pl.len()).over(keys) + 1).alias("__n")))
    out = (out.join_asof(subs.select(*keys, "__s", pl.col("__s").alias("__prev"), "__n"), left_on="__t", right_on="__s",
                         by=keys, strategy="backward", allow_exact_matches=False, check_sortedness=False).drop("__s")
           .with_columns((pl.col("__t") - pl.duration(hours=1)).alias("__h")).sort("__h")
           .join_asof(subs.select(*keys, "__s", pl.col("__n").alias("__n1")), left_on="__h", right_on="__s", by=keys,
                      strategy="backward", allow_exact_matches=False, check_sortedness=False)
           .with_columns((pl.col("__n").fill_null(0) - pl.col("__n1").fill_null(0)).cast(pl.Float64).alias("qg_submitted_1h"),
                         ((pl.col("__t") - pl.col("__prev")).dt.total_seconds() / 3600).alias("qg_hours_since_submit")))
    return (keyed.select("__pos").join(out.select("__pos", *RECENT), on="__pos", how="left", maintain_order="left")
            .drop("__pos").with_columns(pl.col(RECENT).cast(pl.Float64)))


# Bursts (issue 53 item 2): jobs of one queue x account x name pattern x GPU count submitted within `BURST_HOURS` of
# each other (a sweep, an array) run alike: on the real trace a burst's log run times spread 0.40 (standard deviation)
# where the whole trace's spread 1.21. What a burst's jobs that had run by the forecast's time did moves a job's P50.
BURST_HOURS = 1.0  # siblings: submitted within this many hours of the job, before or after
BURST_PRIOR = 1.0  # the model's P50 weighs as this many siblings (shrinkage: one sibling moves it half way, in log hours)
BURST_KEYS = (c.QUEUE, c.TEAM, NAME_PATTERN, c.GPU_COUNT)  # a missing fact matches a missing one (a plain export)
# the match's words: a missing account or name matches a missing one, so on a plain export (neither logged) a burst is
# any job of the same queue and GPU count (review 57 N14)
BURST_REASON = ("; P50 moved toward the run times of its burst ({n} job(s) of the same queue and GPU count, account and "
                f"name where logged, submitted within {BURST_HOURS:g} h)")
BURST_BUCKET_JOBS = 100  # siblings read per account x name x GPUs x hour (evenly spaced): a row meets at most 300
BURST_CHUNK_ROWS = 20_000  # rows joined to their siblings at a time (at most 6M pairs in memory)
KNOWN_AT = times.KNOWN_AT  # staged running jobs: when they were last known to run (`warehouse/training.py` read_running)
DONE = "__done"  # a sibling that had finished by the forecast's time (else: running, `__y` its log hours so far)


def burst_siblings(context: pl.DataFrame, as_of=None, running: pl.DataFrame | None = None) -> pl.DataFrame:
    """The jobs of `context` (contract columns) as a burst's siblings know them at `as_of` (None: every labelled job
    counts as finished, as the nightly's staged history holds only those): `BURST_KEYS`, `submitted_at` (UTC, no
    zone), `DONE` and `__y`, the log hours a finished job ran or, for one running at `as_of` (started, by its run time
    back from its end, and not ended), the log hours it has run so far: a lower bound of its run time. A job not
    submitted or not started by `as_of` is left out: nothing after `as_of` is known.
    `running`: the jobs the warehouse holds as RUNNING (contract columns, `updated_at` their start: the first RUNNING
    record, `warehouse/training.py` `read_running`; the nightly stages them beside the labelled history): each a
    running sibling, its hours so far counted to `as_of` but never past the time they were last known to run
    (`KNOWN_AT`, the warehouse's clock, as `job_demand` counts a running job's hours; without that column, the latest
    time the rows know of: their `submitted_at`, starts and ends); one started at or after `as_of` is left out."""
    runs = finished_runs(context)
    live = _running_starts(running) if running is not None else None
    if as_of is None and (live is None or not live.height):
        return runs.select(*[k for k in BURST_KEYS], c.JOB_ID, c.SUBMITTED_AT, pl.lit(True).alias(DONE), "__y")
    latest = pl.concat([runs.select(pl.col(END).max().alias("t")), runs.select(pl.col(c.SUBMITTED_AT).max().alias("t")),
                        *([] if live is None else [live.select(pl.max_horizontal(pl.col(c.SUBMITTED_AT).max(),
                                                                                 pl.col("__start").max()).alias("t"))])]
                       )["t"].max()
    if live is not None and live.height and live["__known"].is_not_null().any():  # the warehouse's clock, when staged
        latest = live["__known"].max()
    moment = latest if as_of is None else (
        pl.lit(as_of).cast(pl.Datetime("us", "UTC")).dt.replace_time_zone(None) if getattr(as_of, "tzinfo", None)
        else pl.lit(as_of).cast(pl.Datetime("us")))
    start = pl.col(END) - pl.duration(microseconds=(pl.col("__y").exp() * 3.6e9).cast(pl.Int64))
    so_far = (moment - start).dt.total_microseconds() / 3.6e9
    done = (runs.select(*BURST_KEYS, c.JOB_ID, c.SUBMITTED_AT, pl.lit(True).alias(DONE), "__y") if as_of is None else
            runs.filter((pl.col(c.SUBMITTED_AT) < moment) & (start < moment))
            .select(*BURST_KEYS, c.JOB_ID, c.SUBMITTED_AT, (pl.col(END) <= moment).alias(DONE),
                    pl.when(pl.col(END) <= moment).then(pl.col("__y")).otherwise(so_far.log()).alias("__y")))
    if live is None or not live.height:
        return done
    known = pl.min_horizontal(moment, pl.lit(latest)) if latest is not None else moment
    hours = (known - pl.col("__start")).dt.total_microseconds() / 3.6e9
    going = (live.filter((pl.col(c.SUBMITTED_AT) < moment) & (pl.col("__start") < moment)).with_columns(hours.alias("__h"))
             .filter(pl.col("__h") > 0)
             .select(*BURST_KEYS, c.JOB_ID, c.SUBMITTED_AT, pl.lit(False).alias(DONE), pl.col("__h").log().alias("__y")))
    return pl.concat([done, going.filter(~pl.col(c.JOB_ID).is_in(done[c.JOB_ID].implode()))], how="vertical_relaxed")


def _running_starts(running: pl.DataFrame) -> pl.DataFrame:
    """The jobs of `running` (contract columns: RUNNING, `updated_at` their start) as `burst_siblings` reads them:
    `BURST_KEYS`, job_id, `submitted_at` and `__start` (UTC, no zone); a job without a start is left out."""
    going = running.filter(pl.col(c.STATUS) == "RUNNING") if c.STATUS in running.columns else running
    facts = scheduler_facts(going)
    return (pl.DataFrame({c.JOB_ID: going[c.JOB_ID], **{k: facts[k] for k in BURST_KEYS}, c.SUBMITTED_AT: _utc(going),
                          "__start": _utc(going, c.UPDATED_AT), "__known": _utc(going, KNOWN_AT)})
            .filter(pl.col("__start").is_not_null() & pl.col(c.SUBMITTED_AT).is_not_null()))


def burst_p50(rows: pl.DataFrame, siblings: pl.DataFrame, p50: np.ndarray,
              elapsed: np.ndarray | None = None, before_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(the P50 run time of `rows` moved toward their bursts' siblings, how many siblings each has). A row's siblings
    (`burst_siblings`) share its `BURST_KEYS` and were submitted within `BURST_HOURS` of it (itself left out, by job
    id). In log hours the P50 becomes (n x m + `BURST_PRIOR` x log P50) / (n + `BURST_PRIOR`), m the median of the
    siblings' log hours: a finished one's run time, a running one's hours so far (survival-aware: a lower bound,
    not a run time, so where most siblings still run the P50 is not lowered by them). `elapsed`: the hours each row
    has run (a running job): only the siblings that ran longer count (its burst's survivors). The survival guard
    engages only where `siblings` holds running jobs (`burst_siblings(..., as_of)` of a context with them, or its
    `running` jobs: the nightly's, `score.by_history`); without them a burst half done pulls a long job's P50 toward
    its short, finished half (docs/models.md). `before_only`: only
    the siblings submitted before the row count (a FIFO queue: what was ahead of it; the real-trace bench's bound for
    jobs that really wait, tests/benchmarks/bench_real_runtime.py). Without a sibling, or a P50, the P50 is kept."""
    p50 = np.asarray(p50, dtype=np.float64)
    n = np.zeros(rows.height)
    if not rows.height or not siblings.height or c.SUBMITTED_AT not in rows.columns:
        return p50.copy(), n
    facts = scheduler_facts(rows)
    hour = int(BURST_HOURS * 3.6e9)  # the buckets the siblings are looked for in: the row's and the ones beside it
    ran = np.zeros(rows.height) if elapsed is None else np.nan_to_num(np.asarray(elapsed, dtype=np.float64), nan=0.0)
    keyed = (pl.DataFrame({c.JOB_ID: rows[c.JOB_ID].cast(pl.String), **{k: facts[k] for k in BURST_KEYS},
                           "__t": _utc(rows), "__e": np.log(np.maximum(ran, 1e-9))})
             .with_row_index("__pos").filter(pl.col("__t").is_not_null())
             .with_columns(pl.int_ranges(pl.col("__t").dt.epoch("us") // hour - 1, pl.col("__t").dt.epoch("us") // hour + 2)
                           .alias("__b")).explode("__b"))
    bucket = [*BURST_KEYS, "__b"]
    sibs = (siblings.select(*BURST_KEYS, pl.col(c.JOB_ID).cast(pl.String).alias("__sib"),
                            pl.col(c.SUBMITTED_AT).alias("__s"), DONE, "__y")
            .with_columns((pl.col("__s").dt.epoch("us") // hour).alias("__b")).sort("__s", "__sib")
            # at most BURST_BUCKET_JOBS a bucket, evenly over its submissions: each row meets at most 3x that many
            .filter(pl.int_range(pl.len()).over(bucket)
                    % (pl.len().over(bucket) / BURST_BUCKET_JOBS).ceil().cast(pl.Int64) == 0))
    parts = []
    for start in range(0, rows.height, BURST_CHUNK_ROWS):  # bounded memory: a chunk of rows' pairs at a time
        chunk = keyed.filter(pl.col("__pos").is_between(start, start + BURST_CHUNK_ROWS - 1))
        parts.append(chunk.join(sibs, on=bucket, nulls_equal=True)
                     .filter((pl.col(c.JOB_ID) != pl.col("__sib"))
                             & ((pl.col("__s") - pl.col("__t")).abs() <= pl.duration(microseconds=hour))
                             & (pl.col("__y") > pl.col("__e"))
                             & ((pl.col("__s") < pl.col("__t")) if before_only else pl.lit(True)))
                     .group_by("__pos").agg(pl.len().alias("__n"), pl.col(DONE).sum().alias("__k"),
                                            pl.col("__y").median().alias("__m")))
    agg = pl.concat(parts) if parts else pl.DataFrame(schema={"__pos": pl.UInt32, "__n": pl.UInt32, "__k": pl.UInt32,
                                                              "__m": pl.Float64})
    pos = agg["__pos"].to_numpy()
    k, m, count = agg["__k"].to_numpy().astype(np.float64), agg["__m"].to_numpy(), agg["__n"].to_numpy().astype(np.float64)
    own = p50[pos]
    ok = np.isfinite(own) & (own > 0) & np.isfinite(m)
    with np.errstate(divide="ignore", invalid="ignore"):
        moved = np.exp((count * m + BURST_PRIOR * np.log(np.where(own > 0, own, 1.0))) / (count + BURST_PRIOR))
    moved = np.where(count - k > k, np.maximum(moved, own), moved)  # most still running: a lower bound only
    out = p50.copy()
    out[pos[ok]] = moved[ok]
    n[pos[ok]] = count[ok]
    return out, n


class SchedulerHistory:
    """P10/P50/P90 of one target from the scheduler's facts (see the module doc). scikit-learn style:
    `fit(history)` returns self, `predict(rows)` the P50 as a 1-D array, `forecast(rows)` the intervals."""

    def __init__(self, target: str, seed: int = 0, min_rows: int = MIN_ROWS, max_iter: int = 200, threads: int = 1,
                 recent: bool = False):
        self.target = target
        self.recent = recent  # run time: the `RECENT` facts too (off: on the real trace they did not help)
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
        # the history the recent facts are read from, at fit and (by default) at forecast time
        runtime = self.target == c.RUNTIME_HOURS
        self.context_ = finished_runs(history) if runtime and self.recent else None
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
        n_cal = int(round(self.rows_ * CALIBRATION_SHARE))
        order = np.random.default_rng(self.seed).permutation(self.rows_)
        cal, fit = order[:n_cal], order[n_cal:]
        self.empty_ = ()
        facts = self._facts(labelled, facts)
        X = self._encode(facts)
        # a fact never logged (no time limit in a tracker's logs) is a constant: scikit-learn cannot bin an all-NaN column
        self.empty_ = tuple(bool(np.isnan(X[fit, j]).all()) for j in range(X.shape[1]))
        X = self._encode(facts)
        trees = lambda: HistGradientBoostingRegressor(  # noqa: E731
            loss=LOSS if runtime else "squared_error", max_iter=self.max_iter, learning_rate=0.1,
            min_samples_leaf=max(5, min(20, len(fit) // 20)),
            categorical_features=[True] * len(CATEGORICAL) + [False] * (X.shape[1] - len(CATEGORICAL)),
            random_state=self.seed)
        recency = _recency(labelled) if runtime else None
        with threadpool_limits(limits=self.threads):
            self.estimator_ = trees().fit(X[fit], np.log(y[fit]), sample_weight=None if recency is None else recency[fit])
            self.trained_rows_ = len(fit)  # the labelled jobs the trees learnt from
            cal_pred = np.exp(self.estimator_.predict(X[cal]))
        # chosen by evidence, like the champions' fallback (ood.py): the trees, unless the plain queue median
        # forecasts the held-out jobs better (lower MAPE; run time: lower MAE in hours, what a planner's hours add up
        # and what issue 53 judges it by, each job weighted as the trees learned it): where the facts carry nothing
        # beyond the queue
        queues = facts[c.QUEUE].to_numpy()
        self.medians_ = {str(q): float(np.median(y[fit][queues[fit] == q])) for q in np.unique(queues[fit].astype(str))}
        self.pooled_median_ = float(np.median(y[fit]))
        cal_median = self._queue_medians(queues[cal])
        self.metric_ = "MAE" if runtime else "MAPE"
        if runtime:
            weights = _recency(labelled)[cal]
            self.evidence_ = {MODEL: _mae(y[cal], cal_pred, weights), MEDIAN: _mae(y[cal], cal_median, weights)}
        else:
            self.evidence_ = {MODEL: _mape(y[cal], cal_pred), MEDIAN: _mape(y[cal], cal_median)}
        self.chosen_ = MEDIAN if self.evidence_[MEDIAN] < self.evidence_[MODEL] else MODEL
        groups = {c.MODEL_TYPE: [c.UNKNOWN_MODEL_TYPE] * len(cal), c.QUEUE: queues[cal].tolist()}
        self.calibration_ = intervals.calibrate(y[cal], cal_pred if self.chosen_ == MODEL else cal_median,
                                                float(y[fit].min()), groups)
        self.calibrated_ = intervals.Calibrated(self.calibration_)
        # run time: the band from the held-out log errors weighted as the trees learnt (`_recency`), per queue with
        # `intervals.MIN_GROUP` held-out jobs, pooled below; none (the conformal band above) under `intervals.MIN_POOLED`
        self.recent_band_ = None
        if runtime and len(cal) >= intervals.MIN_POOLED:
            errors = np.log(y[cal]) - np.log(cal_pred if self.chosen_ == MODEL else cal_median)
            self.recent_band_ = _weighted_band(errors, weights, queues[cal].astype(str))
        if runtime and self.chosen_ == MODEL and REFIT_ALL:  # the trees chosen and calibrated: learnt again from every
            # labelled job, the calibration slice's too (its latest weeks, which weigh most, a quarter of them held out
            # before); the band keeps the held-out errors (issue 53 item 2: the real trace's MAE x0.92 -> x0.90
            # of the queue median's, docs/models.md)
            with threadpool_limits(limits=self.threads):
                self.estimator_ = trees().fit(X, np.log(y), sample_weight=recency)
            self.trained_rows_ = self.rows_
        return self

    def _facts(self, rows: pl.DataFrame, facts: pl.DataFrame | None = None,
               context: pl.DataFrame | None = None) -> pl.DataFrame:
        """`scheduler_facts` of `rows`, with the `RECENT` ones of a run-time model (from `context`, `finished_runs`
        of the jobs known; default: the fit's history)."""
        facts = scheduler_facts(rows) if facts is None else facts
        if self.context_ is None:
            return facts
        return pl.concat([facts, recent_facts(rows, self.context_ if context is None else context)], how="horizontal")

    def _encode(self, facts: pl.DataFrame) -> np.ndarray:
        """(n, 7 or 21) float: category codes (NaN: missing or never seen in fit), GPUs, log time limit, GPU memory;
        with `recent`, a run-time model's `RECENT` facts (log hours, counts, hours)."""
        cats = [facts[n].replace_strict(self.codes_[n], default=None, return_dtype=pl.Float64).to_numpy() for n in CATEGORICAL]
        limit = facts[c.TIME_LIMIT_HOURS].to_numpy().astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_limit = np.where(limit > 0, np.log(np.where(limit > 0, limit, 1.0)), np.nan)
        nums = [facts[c.GPU_COUNT].to_numpy().astype(np.float64), log_limit,
                facts[GPU_MEMORY].to_numpy().astype(np.float64),
                *[facts[n].to_numpy().astype(np.float64) for n in RECENT if self.context_ is not None]]
        X = np.column_stack([np.asarray(v, dtype=np.float64) for v in cats + nums])
        for j, empty in enumerate(self.empty_):
            if empty:
                X[:, j] = 0.0
        return X

    def _queue_medians(self, queues: np.ndarray) -> np.ndarray:
        return np.array([self.medians_.get(str(q), self.pooled_median_) for q in queues], dtype=np.float64)

    def intervals(self, rows: pl.DataFrame, context: pl.DataFrame | None = None,
                  siblings: pl.DataFrame | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p10, p50, p90) per row; NaN where nothing is known (no labelled history at all). `context`: the jobs
        whose recent run times the facts read (contract columns; default: the fit's history); only those that had
        ended before a row was submitted count for it. `siblings` (`burst_siblings`, run time only): the jobs known
        at the forecast's time; each row's P50 moves toward its burst's (`burst_p50`), its band with it."""
        return self._intervals(rows, context, siblings)[:3]

    def _intervals(self, rows: pl.DataFrame, context: pl.DataFrame | None, siblings: pl.DataFrame | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`intervals`, and how many burst siblings moved each row's P50 (0: none)."""
        facts = scheduler_facts(rows)
        count = np.zeros(rows.height)
        if self.estimator_ is not None:
            if self.chosen_ == MEDIAN:
                pred = self._queue_medians(facts[c.QUEUE].to_numpy())
            else:
                from threadpoolctl import threadpool_limits

                known = None if context is None else finished_runs(context)
                with threadpool_limits(limits=self.threads):
                    pred = np.exp(self.estimator_.predict(self._encode(self._facts(rows, facts, known))))
            groups = {c.MODEL_TYPE: np.full(rows.height, c.UNKNOWN_MODEL_TYPE, dtype=object),
                      c.QUEUE: facts[c.QUEUE].to_numpy()}
            p10, p50, p90 = self.calibrated_.intervals(pred, groups)
            if self.target == c.RUNTIME_HOURS:  # the P50 is the forecast itself (a median, weighted to the latest weeks);
                # the conformal P50 would pull it back to the calibration slice's, the whole history's
                p50 = pred
                if getattr(self, "recent_band_", None) is not None:  # (a model saved before: the conformal band)
                    by_queue, pooled = self.recent_band_
                    low, high = np.array([by_queue.get(str(q), pooled) for q in facts[c.QUEUE].to_list()]).reshape(-1, 2).T
                    p10, p90 = pred * np.exp(low), pred * np.exp(high)
                p10, p90 = np.minimum(p10, p50), np.maximum(p90, p50)
        else:
            bands = np.full((rows.height, 3), np.nan) if self.pooled_ is None else np.tile(self.pooled_, (rows.height, 1))
            for i, q in enumerate(facts[c.QUEUE].to_list()):
                if q in self.by_queue_:
                    bands[i] = self.by_queue_[q]
            p10, p50, p90 = bands[:, 0].copy(), bands[:, 1].copy(), bands[:, 2].copy()
        if self.target == c.RUNTIME_HOURS and siblings is not None:  # the band moves with its P50 (the same ratios)
            moved, count = burst_p50(rows, siblings, p50)
            with np.errstate(divide="ignore", invalid="ignore"):
                factor = np.where(np.isfinite(p50) & (p50 > 0), moved / p50, 1.0)
            p10, p50, p90 = p10 * factor, moved, p90 * factor
        if self.target == c.RUNTIME_HOURS:  # the scheduler stops a job at its limit
            limit = facts[c.TIME_LIMIT_HOURS].to_numpy().astype(np.float64)
            p10, p50, p90 = (np.where(limit > 0, np.minimum(p, limit), p) for p in (p10, p50, p90))
        return p10, p50, p90, count

    def predict(self, rows: pl.DataFrame) -> np.ndarray:
        return self.intervals(rows)[1]

    def describe(self) -> str:
        """How the forecasts were made, in the words `ood_reason` carries."""
        if self.estimator_ is not None:
            band = ("held-out errors by queue, the latest weeks weighted most" if getattr(self, "recent_band_", None)
                    else "conformal by queue" if self.calibrated_.pooled is not None
                    else f"x/÷ {intervals.UNCALIBRATED_FACTOR:g}: too few jobs to calibrate")
            unit, hours = (".0%", "") if self.metric_ == "MAPE" else (".3g", " h")
            held_out = (f"held-out {self.metric_} {self.evidence_[self.chosen_]:{unit}}{hours} vs "
                        f"{self.evidence_[MODEL if self.chosen_ == MEDIAN else MEDIAN]:{unit}}{hours} for the "
                        + ("trees" if self.chosen_ == MEDIAN else "queue median"))
            what = (f"{MODEL} (queue, account, GPUs, time limit, name)" if self.chosen_ == MODEL
                    else f"{MEDIAN} (the facts beat no queue median)")
            return (f"model features unknown -> scheduler history: {what} learned from {self.rows_:,} jobs, "
                    f"{held_out}, P10-P90 {band}")
        return (f"model features unknown -> {QUANTILES}: P10/P50/P90 of {self.rows_:,} labelled job(s) "
                f"(the queue's where it has {MIN_QUEUE_ROWS}+); too few for a model ({self.min_rows})")

    def forecast(self, rows: pl.DataFrame, siblings: pl.DataFrame | None = None) -> pl.DataFrame:
        """job_id, p10, p50, p90, model, ood, ood_reason: the rows that get a forecast (none without any history).
        `siblings`: as `intervals`'."""
        p10, p50, p90, count = self._intervals(rows, None, siblings)
        known = np.isfinite(p50)
        name, reason = self.chosen_ if self.estimator_ is not None else QUANTILES, self.describe()
        return pl.DataFrame({c.JOB_ID: rows[c.JOB_ID].filter(pl.Series(known)), "p10": p10[known], "p50": p50[known],
                             "p90": p90[known], "model": [name] * int(known.sum()), "ood": [True] * int(known.sum()),
                             "ood_reason": [reason + (BURST_REASON.format(n=int(n)) if n > 0 else "") for n in count[known]],
                             traced.ARCH_INFERRED: [None] * int(known.sum()), traced.ARCH_MATCH_DISTANCE: [None] * int(known.sum())},
                            schema=FORECAST_SCHEMA)


def _recency(rows: pl.DataFrame) -> np.ndarray:
    """Each job's weight: 1/2 per `HALF_LIFE_DAYS` between its submission and the latest one (1 without a time):
    run times drift with what a site's users run, and the last weeks say most about tomorrow's."""
    times = _utc(rows)
    if times.null_count() == rows.height:
        return np.ones(rows.height)
    age = ((times.max() - times).dt.total_seconds() / 86_400).fill_null(0.0).to_numpy()
    return 0.5 ** (age / HALF_LIFE_DAYS)


BAND = (0.1, 0.9)  # run time's P10 / P90


def _weighted_band(errors: np.ndarray, weights: np.ndarray, queues: np.ndarray
                   ) -> tuple[dict[str, tuple[float, float]], tuple[float, float]]:
    """({queue: (P10, P90)} of the held-out log errors, weighted, for the queues with `intervals.MIN_GROUP` of them;
    the pooled (P10, P90)). Issue 53 item 2: a queue's run times drift, and a band read off its whole history
    covered 13-100% of a real cluster's next 10 days per queue; weighted as the trees learn (`_recency`) it follows
    the latest weeks (docs/models.md)."""
    def quantiles(e: np.ndarray, w: np.ndarray) -> tuple[float, float]:
        order = np.argsort(e)
        share = np.cumsum(w[order]) / w.sum()
        return tuple(float(e[order][min(np.searchsorted(share, q), len(e) - 1)]) for q in BAND)

    by_queue = {str(q): quantiles(errors[queues == q], weights[queues == q]) for q in np.unique(queues)
                if (queues == q).sum() >= intervals.MIN_GROUP}
    return by_queue, quantiles(errors, weights)


def _mae(y: np.ndarray, pred: np.ndarray, weights: np.ndarray) -> float:
    return float(np.average(np.abs(pred - y), weights=weights)) if len(y) else 0.0


def _mape(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - y) / y)) if len(y) else 0.0


MIN_SURVIVORS = 10  # finished jobs that ran longer than a running job has, for their run times to say its remaining time
PARETO_P = {0.1: 1 / 0.9 - 1, 0.5: 1.0, 0.9: 9.0}  # remaining / elapsed at P10, P50, P90 beyond the history: Pareto, shape 1


class RemainingTime:
    """How long a RUNNING job still runs, given the hours it has run (issue 53 item 2): survival-aware.

    Run times are heavy-tailed: a job that has run five days is one of the few that do, and its queue's median says
    nothing about it. The remaining time is read from the conditional distribution of run time given run time >
    elapsed: P10/P50/P90 of the run times of the history's finished jobs of the same queue x GPU count that ran
    longer than `elapsed`, minus `elapsed` (the empirical conditional quantiles, the lower order statistic; of the
    queue's where its GPU count has fewer than `MIN_SURVIVORS` such jobs), the P50 at least `elapsed` (as long again:
    the finished runs lack the long ones still running, and on the real trace the empirical median alone fell short:
    docs/models.md), and never beyond the longest finished run of its queue (a job already past it: 0, it counts
    the hours it has run; such a record may be one whose end was never logged). Where fewer than `MIN_SURVIVORS` finished
    jobs of its queue ever ran that long, the tail continues as a Pareto of shape 1 (P(T > s | T > t) = t / s): as
    long again at P50, 0.11x and 9x at P10 and P90 for a job forecast while pending (`p50`) or still below the time
    limit it logged (`time_limit_hours`: the scheduler has not stopped it, so its record is not one whose end was
    lost); a job never forecast there, without a limit or past it, or just started, is unknown (NaN: first seen
    running, and running longer than its queue's history supports, it is likely a record whose end was never logged).
    A job whose own run-time P50 (`p50`, its forecast while pending) is still ahead keeps it: remaining P50 = P50 -
    elapsed. Below its time limit, P10/P50/P90 never go beyond it (the scheduler stops a job there). Finished jobs
    only (COMPLETED, FAILED or CANCELLED: any end frees the GPUs, and a running job may end either way): the runs
    still going are not counted (right-censored), so the tail is, if anything, short. The warehouse's
    `job_demand.hours_expected` applies the same rule to the P50 (warehouse/sql/schema.sql), for the demand history
    and the plan's running jobs (warehouse/plan.py RUNNING_INPUT, tasks/plan/starts.py)."""

    def fit(self, history: pl.DataFrame) -> RemainingTime:
        ended = history.filter(pl.col(c.STATUS).is_in(c.FINISHED_STATUSES))  # as job_demand's `done` (schema.sql)
        runs = finished_runs(ended).with_columns(pl.col("__y").exp().alias("__h"))
        self.by_group_ = {}
        for keys in ((c.QUEUE, c.GPU_COUNT), (c.QUEUE,)):
            for key, part in runs.filter(pl.col(c.QUEUE).is_not_null()).group_by(list(keys)):
                self.by_group_[tuple(key)] = np.sort(part["__h"].to_numpy())
        return self

    def intervals(self, rows: pl.DataFrame, elapsed: np.ndarray, p50: np.ndarray | None = None,
                  siblings: pl.DataFrame | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p10, p50, p90) of the remaining hours of `rows` (contract columns) that have run `elapsed` hours.
        `siblings` (`burst_siblings` at the forecast's time): the run time (hours run + remaining P50) moves toward
        its burst's siblings that ran longer than it has (`burst_p50`), the band with it. Used only by the real-trace
        bench (tests/benchmarks/bench_real_runtime.py): the product's running-job estimate is the warehouse's own
        SQL (`job_demand.hours_expected`), which reads no burst, so the plan's running jobs do not move with theirs."""
        facts = scheduler_facts(rows)
        elapsed = np.maximum(np.nan_to_num(np.asarray(elapsed, dtype=np.float64), nan=0.0), 0.0)
        out = np.full((rows.height, 3), np.nan)
        own = np.full(rows.height, np.nan) if p50 is None else np.asarray(p50, dtype=np.float64)
        limit = np.nan_to_num(facts[c.TIME_LIMIT_HOURS].to_numpy().astype(np.float64), nan=0.0)
        below = limit > elapsed  # still below a time limit it logged: the scheduler has not stopped it
        for i, (queue, gpus, t) in enumerate(zip(facts[c.QUEUE].to_list(), facts[c.GPU_COUNT].to_list(), elapsed, strict=True)):
            for runs in (self.by_group_.get((queue, gpus)), self.by_group_.get((queue,))):
                if runs is None:
                    continue
                longer = runs[np.searchsorted(runs, t, side="right"):]
                if len(longer) >= MIN_SURVIVORS:
                    lo, mid, hi = np.quantile(longer, [0.1, 0.5, 0.9], method="lower") - t  # the warehouse's rule
                    out[i] = [lo, max(mid, t), max(hi, mid, t)]  # at least as long again at P50
                    break
            else:  # as long again (P50) for a job forecast while pending or below its time limit; just started,
                # or never forecast without a limit or past it: unknown
                out[i] = [t * PARETO_P[q] if t > 0 and (np.isfinite(own[i]) or below[i]) else np.nan
                          for q in (0.1, 0.5, 0.9)]
            # never beyond the longest finished run of its queue; a job already past it counts the hours run (it may
            # be a record whose end was never logged: nothing in the history says how long such a run goes)
            longest = self.by_group_.get((queue,))
            out[i] = np.minimum(out[i], max(float(longest[-1]) - t, 0.0) if longest is not None else 0.0)
        if p50 is not None:  # its own forecast still ahead: kept
            ahead = np.isfinite(own) & (own > elapsed)
            out[ahead, 1] = own[ahead] - elapsed[ahead]
            out[:, 0] = np.minimum(out[:, 0], out[:, 1])
            out[:, 2] = np.maximum(out[:, 2], out[:, 1])
        out[below] = np.minimum(out[below], (limit - elapsed)[below, None])  # never beyond its time limit
        if siblings is not None:
            total, _ = burst_p50(rows, siblings, elapsed + out[:, 1], elapsed)
            with np.errstate(divide="ignore", invalid="ignore"):
                factor = np.where(np.isfinite(out[:, 1]) & (out[:, 1] > 0), (total - elapsed) / out[:, 1], 1.0)
            out = out * factor[:, None]
        return out[:, 0], out[:, 1], out[:, 2]
