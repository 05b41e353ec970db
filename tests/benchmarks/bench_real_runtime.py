"""Run time of jobs without model features on a REAL trace (issue 53, item 2).

The real cluster job table in `../shared/data/itp_jobs_2021.csv.gz` (Microsoft ITP, 2021: 69,351 jobs, 10
clusters, 60 days; cluster, submission time, run time, GPUs; no user, job name or time limit), read as the
product's own rows: contract columns through the ingest's normaliser (`tasks/ingest/normalize.py`), each job
COMPLETED, `queue` its cluster, `updated_at` its end (submission + run time: the trace has no queueing delay).

A time split at several cut days (default 30, 40, 50), each:
* **pending jobs**: `SchedulerHistory` (`tasks/learn/history.py`) fitted on the jobs that had *finished* before the
  cut, forecasting the jobs submitted in the `--window` days after it (their recent-run-time facts from the jobs
  finished before each one's submission: no peeking; the facts are used with `recent=True`, printed beside the
  default), against the **queue median** of the same history: MAE
  (hours) and its ratio to the queue median's (goal <= 0.85), MAPE, the P10-P90 coverage (goal 70-90%), overall
  and per cluster; and the **ceiling** of the facts ITP records (`oracle_median`: each queue x GPU count's median
  of the measured jobs themselves, which knows their run times: no forecast from those facts alone does better);
* **bursts** (`history.burst_p50`): the same P50 moved toward each job's burst's siblings (same queue x GPU count,
  submitted within an hour of it) as the **nightly's own path** reads them the morning (00:00 UTC) after its
  submission (a job pending overnight): `nightly` stages what the warehouse would hold then (`staged`: the jobs ended
  by then as COMPLETED rows, those still running as RUNNING rows from their start, as `training.read_running` gives
  them) and calls `score.by_history`, what the nightly's `history_forecasts` calls, with the trees fitted again each
  morning as the nightly's are (on the jobs finished by then, less those submitted the day forecast: they are the
  pending ones; `--no-refit`: the cut's trees); "nightly_before" is the same path without the running jobs (the
  nightly before session 8). Bounds for jobs that really wait, read directly with `burst_p50` on the same siblings
  (the cut's trees): only the siblings submitted before the job ("fifo": the nightly in a FIFO queue;
  "finished_fifo": the nightly before, there; ITP has no queueing, so the morning views favour the method: a job
  that really waits has its burst waiting with it), and the start of its submission's hour (no wait); nothing
  submitted, started or finished after that time is read, the job itself never;
* **running jobs** at the cut (submitted before it, ending after it): their remaining run time given the hours
  already run, by the survival-aware estimate (`history.RemainingTime`, fitted on the same history, with the queue
  median as the job's P50 forecast while it was pending: the warehouse's `job_demand.hours_expected`) against the
  rule the plan used before (`tasks/plan/starts.py` before issue 53: the queue median P50 while a job has run less,
  else as long again as it has run), and with its burst's siblings that ran longer than it has (known at the cut):
  MAE of the remaining hours, P10-P90 coverage;
* **the last days' GPU-hours**: GPU-hours of the jobs submitted in the 7 days before the cut, as the demand
  history counts them at the cut (finished jobs' known hours + running jobs' expected hours: before, the queue
  median P50 x GPUs; now, hours run + the remaining P50), against their true total; and the same through the
  warehouse's own SQL (`warehouse_at`: the cut's jobs in the product's schema, `job_demand.hours_expected` and
  `demand_daily`, what the nightly's demand forecast reads), the running jobs with the queue median as their P50
  forecast while pending, and with none (started between two nights).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_real_runtime.py [--trace FILE] [--cuts 30 40 50] [--window 10] [--seed 0]
        [--no-refit]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.ingest.normalize import normalize
from gpucast.tasks.learn import history, score
from gpucast.tasks.learn.history import SchedulerHistory

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT.parent / "shared" / "data" / "itp_jobs_2021.csv.gz"
START = datetime(2021, 3, 4, tzinfo=UTC)  # the trace's time 0 (its time of day is unknown: midnight UTC taken)
DAY = timedelta(days=1)
# the bursts' siblings as known at: "nightly", the morning after the job's submission through the nightly's own path
# (`score.by_history` on the jobs the warehouse holds then, the running ones staged: `staged`); "nightly_before", the
# same path given the finished jobs only (the nightly before the running jobs were staged); the bounds, read directly
# with `history.burst_p50`: "fifo" / "finished_fifo" only the siblings submitted before the job, "hour" as of its
# submission's hour (`bursts`)
WHEN = ("nightly", "nightly_before", "fifo", "finished_fifo", "hour")


def itp_jobs(path: Path = TRACE) -> pl.DataFrame:
    """The trace's jobs as typed contract rows, through the product's normaliser."""
    raw = pl.read_csv(path)
    iso = lambda seconds: (pl.lit(START) + pl.duration(seconds=seconds)).dt.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    frame = raw.select(
        pl.col("job_id").alias(c.JOB_ID), iso(pl.col("submission_time")).alias(c.SUBMITTED_AT),
        iso(pl.col("submission_time") + pl.col("duration")).alias(c.UPDATED_AT), pl.lit("COMPLETED").alias(c.STATUS),
        pl.col("cluster").alias(c.QUEUE), pl.col("num_gpu").cast(pl.String).alias(c.GPU_COUNT),
        (pl.col("duration") / 3600).cast(pl.String).alias(c.RUNTIME_HOURS),
        pl.lit(c.UNKNOWN_MODEL_TYPE).alias(c.MODEL_TYPE),
    ).with_columns(pl.int_range(pl.len()).alias("_row"), pl.lit(None, pl.String).alias("_raw"),
                   pl.lit(None, pl.String).alias("_read_error"))
    rows = normalize(frame)
    bad = rows.filter(pl.col("_errors").list.len() > 0).height
    assert bad == 0, f"{bad} rows refused by the normaliser"
    return rows.drop("_row", "_raw", "_errors").sort(c.SUBMITTED_AT, c.JOB_ID)


def queue_median(fit: pl.DataFrame, rows: pl.DataFrame) -> np.ndarray:
    """The plain baseline: the median run time of the history's jobs of the same queue (pooled where none)."""
    medians = fit.group_by(c.QUEUE).agg(pl.col(c.RUNTIME_HOURS).median().alias("__m"))
    return (rows.select(c.QUEUE).join(medians, on=c.QUEUE, how="left", maintain_order="left")["__m"]
            .fill_null(float(fit[c.RUNTIME_HOURS].median())).to_numpy())


def pending(jobs: pl.DataFrame, cut: datetime, window: int, seed: int, refit: bool = True) -> dict[str, float]:
    fit = jobs.filter(pl.col(c.UPDATED_AT) < cut)
    test = jobs.filter((pl.col(c.SUBMITTED_AT) >= cut) & (pl.col(c.SUBMITTED_AT) < cut + window * DAY))
    y = test[c.RUNTIME_HOURS].to_numpy()
    t0, cpu0 = time.perf_counter(), time.process_time()
    model = SchedulerHistory(c.RUNTIME_HOURS, seed=seed).fit(fit)
    # the facts of each job as of its submission: every job that had finished by then (the fit's and the later ones)
    p10, p50, p90 = model.intervals(test, context=jobs)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    base = queue_median(fit, test)
    mae, mae_q = float(np.mean(np.abs(p50 - y))), float(np.mean(np.abs(base - y)))
    cover = (y >= p10) & (y <= p90)
    print(f"  pending: fit on {fit.height:,} finished jobs, {test.height:,} submitted in the next {window} days "
          f"(fit + forecast {wall:.1f} s wall, {cpu:.1f} CPU-s); chose {model.chosen_ if model.estimator_ else '-'}")
    print(f"    MAE {mae:.3f} h vs queue median {mae_q:.3f} h: x{mae / mae_q:.2f} (goal <= 0.85); "
          f"MAPE {np.mean(np.abs(p50 - y) / y):.1%} vs {np.mean(np.abs(base - y) / y):.1%}; "
          f"P10-P90 covers {cover.mean():.1%} (goal 70-90%)")
    queues = test[c.QUEUE].to_numpy()
    cells = []
    for q in np.unique(queues):
        m = queues == q
        cells.append(f"{q[-2:]}: n {m.sum()} x{np.mean(np.abs(p50[m] - y[m])) / max(np.mean(np.abs(base[m] - y[m])), 1e-9):.2f} "
                     f"cov {cover[m].mean():.0%}")
    print("    per cluster (MAE ratio, coverage): " + "; ".join(cells))
    ceiling = oracle_median(test)
    print(f"    ceiling of queue and GPU count: the median of the measured jobs' own queue x GPU count (it knows their "
          f"run times) x{np.mean(np.abs(ceiling - y)) / mae_q:.3f} of the queue median's MAE")
    t0 = time.process_time()
    r10, r50, r90 = SchedulerHistory(c.RUNTIME_HOURS, seed=seed, recent=True).fit(fit).intervals(test, context=jobs)
    print(f"    with the recent-run-time facts too (recent=True, {time.process_time() - t0:.1f} CPU-s): MAE "
          f"x{np.mean(np.abs(r50 - y)) / mae_q:.2f} of the queue median's, P10-P90 covers {np.mean((y >= r10) & (y <= r90)):.1%}")
    got = {"mae": mae, "mae_q": mae_q, "covered": float(cover.sum()), "n": float(len(y)),
           "mae_ceiling": float(np.mean(np.abs(ceiling - y)))}
    # the jobs not yet ended at the morning after their submission (the long ones; chosen on their own outcome, so
    # no estimate for pending jobs, but where a burst's finished siblings alone pull a long job down: review 57 S2)
    alive = (test[c.UPDATED_AT] > test[c.SUBMITTED_AT].dt.truncate("1d").dt.offset_by("1d")).to_numpy()
    mae_qa = max(float(np.mean(np.abs(base[alive] - y[alive]))), 1e-9) if alive.any() else np.nan
    cells = [f"the trees alone x{np.mean(np.abs(p50[alive] - y[alive])) / mae_qa:.3f} cov {cover[alive].mean():.1%}"]
    t0 = time.process_time()
    made = nightly(model, jobs, test, seed, refit)
    print(f"    the nightly's path each morning after a submission ({time.process_time() - t0:.1f} CPU-s; trees "
          + ("fitted again each morning on the jobs finished by then, those submitted the day forecast left out"
             if refit else "fitted at the cut") + f"): the trees alone MAE x{np.mean(np.abs(made['trees'][1] - y)) / mae_q:.3f} "
          f"of the queue median's, P10-P90 covers {np.mean((y >= made['trees'][0]) & (y <= made['trees'][2])):.1%}")
    got["mae_trees"] = float(np.mean(np.abs(made["trees"][1] - y)))
    cells.append(f"the nightly's trees alone x{np.mean(np.abs(made['trees'][1][alive] - y[alive])) / mae_qa:.3f} cov "
                 f"{np.mean(((y >= made['trees'][0]) & (y <= made['trees'][2]))[alive]):.1%}")
    for when, label in (("nightly", "as the nightly reads them the morning after its submission (pending overnight: "
                                    "the finished jobs and the RUNNING ones staged, their hours so far lower bounds; "
                                    "score.by_history)"),
                        ("nightly_before", "as the nightly read them before the running jobs were staged (the same "
                                           "path, the finished jobs only)"),
                        ("fifo", "as of the same morning, only those submitted before it (a FIFO queue: ITP has no "
                                 "queueing, so what was ahead of it ran as if nothing waited; trees fitted at the cut)"),
                        ("finished_fifo", "as of the same morning, the finished ones submitted before it (the "
                                          "nightly before, in a FIFO queue; trees fitted at the cut)"),
                        ("hour", "as of the hour it was submitted in (no wait: only what had run by its submission; "
                                 "trees fitted at the cut)")):
        b10, b50, b90, n = made[when] if when in made else bursts(model, jobs, test, (p10, p50, p90), when)
        bmae, bcover = float(np.mean(np.abs(b50 - y))), (y >= b10) & (y <= b90)
        some = n[n > 0] if (n > 0).any() else np.zeros(1)
        print(f"    + its burst's siblings {label}: MAE x{bmae / mae_q:.3f} of the queue median's, P10-P90 covers "
              f"{bcover.mean():.1%}; {np.mean(n > 0):.0%} of the jobs had a sibling (median {np.median(some):.0f})")
        got |= {f"mae_{when}": bmae, f"covered_{when}": float(bcover.sum())}
        cells.append(f"{when} x{np.mean(np.abs(b50[alive] - y[alive])) / mae_qa:.3f} cov {bcover[alive].mean():.1%}")
    print(f"    the {alive.mean():.1%} of these jobs not yet ended at the morning after their submission (MAE ÷ the queue "
          "median's on them, P10-P90): " + "; ".join(cells))
    return got


def staged(jobs: pl.DataFrame, moment: datetime) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the labelled history, the running jobs) as the nightly stages them at `moment`: the jobs that had ended by then
    as the warehouse holds them (COMPLETED, `updated_at` their end: `training.read_training_jobs`), and those started
    and not yet ended as `training.read_running` gives them (RUNNING, no run time, `updated_at` their start: ITP has no
    queueing, so their submission). No clock column: the latest time these rows know of stands for the warehouse's."""
    end = pl.col(c.UPDATED_AT)
    labelled = jobs.filter(end <= moment)
    running = (jobs.filter((pl.col(c.SUBMITTED_AT) < moment) & (end > moment))
               .with_columns(pl.lit("RUNNING").alias(c.STATUS), pl.lit(None, pl.Float64).alias(c.RUNTIME_HOURS),
                             pl.col(c.SUBMITTED_AT).alias(c.UPDATED_AT)))
    return labelled, running


def nightly(model: SchedulerHistory, jobs: pl.DataFrame, test: pl.DataFrame, seed: int, refit: bool
            ) -> dict[str, tuple[np.ndarray, ...]]:
    """(P10, P50, P90, siblings) of `test` as the nightly forecasts each job the morning (00:00 UTC) after its
    submission, through its own function (`score.by_history`, what `history_forecasts` calls): "nightly" with the
    running jobs staged, "nightly_before" with the finished ones only, "trees" without a burst. `refit`: the trees
    learn again each morning, as the nightly's do, from the jobs finished by then except those submitted the day
    forecast (the jobs forecast are pending in the nightly: none of their own run times may be learnt); else `model`
    (fitted at the cut)."""
    mornings = test[c.SUBMITTED_AT].dt.truncate("1d").dt.offset_by("1d")
    out = {k: [np.full(test.height, np.nan) for _ in range(4)] for k in ("nightly", "nightly_before", "trees")}
    for moment in mornings.unique().sort().to_list():
        idx = np.flatnonzero((mornings == moment).to_numpy())
        rows = test[idx]
        labelled, running = staged(jobs, moment)
        fitted = (SchedulerHistory(c.RUNTIME_HOURS, seed=seed)
                  .fit(labelled.filter(pl.col(c.SUBMITTED_AT) < moment - DAY)) if refit else model)
        for key, made in (("nightly", score.by_history(fitted, rows, labelled, running, moment)),
                          ("nightly_before", score.by_history(fitted, rows, labelled, None, moment)),
                          ("trees", fitted.forecast(rows))):
            made = rows.select(c.JOB_ID).join(made, on=c.JOB_ID, how="left", maintain_order="left")
            n = made["ood_reason"].str.extract(r"its burst \((\d+) job").cast(pl.Float64).fill_null(0.0)
            for k, values in enumerate((made["p10"], made["p50"], made["p90"], n)):
                out[key][k][idx] = values.to_numpy()
    return {k: tuple(v) for k, v in out.items()}


def bursts(model: SchedulerHistory, jobs: pl.DataFrame, test: pl.DataFrame, bands: tuple[np.ndarray, ...], when: str
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(P10, P50, P90, siblings) of `test` with the P50 moved toward each job's burst (`history.burst_p50`), the
    siblings as known at `when`: "morning", the midnight (UTC) after the job's submission; "hour", the start of its
    submission's hour; "finished": the morning's, without the siblings still running then; "fifo" and
    "finished_fifo": "morning" and "finished" with only the siblings submitted before the job (`before_only`: what
    was ahead of it in a FIFO queue; ITP has no queueing, the others submitted after it ran at once too, which a job
    that really waits does not see). Only what had been
    submitted and had run by then counts (`history.burst_siblings`): a job finishing after that time is a running
    one, known by its hours so far."""
    times = test[c.SUBMITTED_AT].dt.truncate("1h" if when == "hour" else "1d")
    times = times if when == "hour" else times.dt.offset_by("1d")
    out = [b.copy() for b in bands] + [np.zeros(test.height)]
    for moment in times.unique().sort().to_list():
        idx = np.flatnonzero((times == moment).to_numpy())
        rows = test[idx]
        siblings = history.burst_siblings(jobs, moment)
        siblings = siblings.filter(pl.col(history.DONE)) if when in ("finished", "finished_fifo") else siblings
        moved, n = history.burst_p50(rows, siblings, bands[1][idx], before_only=when.endswith("fifo"))
        factor = moved / bands[1][idx]
        out[0][idx], out[1][idx], out[2][idx], out[3][idx] = bands[0][idx] * factor, moved, bands[2][idx] * factor, n
    return out[0], out[1], out[2], out[3]


def oracle_median(rows: pl.DataFrame) -> np.ndarray:
    """The run-time median of each row's queue x GPU count taken over `rows` themselves: an oracle that knows the
    measured jobs' run times, so the lowest MAE any forecast from queue and GPU count alone (a constant per group)
    can reach on them; what ITP records of a job at submission is its cluster, GPU count and time."""
    keys = [c.QUEUE, c.GPU_COUNT]
    return rows.select(pl.col(c.RUNTIME_HOURS).median().over(keys))[c.RUNTIME_HOURS].to_numpy()


def running(jobs: pl.DataFrame, cut: datetime) -> dict[str, float]:
    fit = jobs.filter(pl.col(c.UPDATED_AT) < cut)
    run = jobs.filter((pl.col(c.SUBMITTED_AT) < cut) & (pl.col(c.UPDATED_AT) > cut))
    elapsed = ((cut - run[c.SUBMITTED_AT]).dt.total_seconds() / 3600).to_numpy()
    remaining = run[c.RUNTIME_HOURS].to_numpy() - elapsed
    # before: the queue median as the job's P50; past it, as long again as it has run (tasks/plan/starts.py before)
    p50_q = queue_median(fit, run)
    before = np.where(elapsed < p50_q, p50_q - elapsed, elapsed)
    # now: the warehouse's rule (job_demand.hours_expected), the same queue median as the P50 forecast while pending
    r10, r50, r90 = history.RemainingTime().fit(fit).intervals(run, elapsed, p50=p50_q)
    long = elapsed > 24
    s10, s50, s90 = history.RemainingTime().fit(fit).intervals(run, elapsed, p50=p50_q, siblings=history.burst_siblings(jobs, cut))
    print(f"  running at the cut: {run.height:,} jobs ({long.sum()} running > 24 h, up to {elapsed.max():.0f} h); "
          f"remaining-time MAE {np.mean(np.abs(r50 - remaining)):.2f} h (survival-aware) vs "
          f"{np.mean(np.abs(before - remaining)):.2f} h (queue median, then as long again); "
          f"> 24 h: {np.mean(np.abs(r50[long] - remaining[long])):.1f} vs {np.mean(np.abs(before[long] - remaining[long])):.1f} h; "
          f"P10-P90 covers {np.mean((remaining >= r10) & (remaining <= r90)):.1%}; + its burst's siblings that ran longer "
          f"(known at the cut): MAE {np.mean(np.abs(s50 - remaining)):.2f} h, "
          f"> 24 h: {np.mean(np.abs(s50[long] - remaining[long])):.1f} h, "
          f"P10-P90 covers {np.mean((remaining >= s10) & (remaining <= s90)):.1%}")
    # the last 7 days' GPU-hours (by submission day) as the demand history counts them at the cut
    last = jobs.filter((pl.col(c.SUBMITTED_AT) >= cut - 7 * DAY) & (pl.col(c.SUBMITTED_AT) < cut))
    true = float((last[c.RUNTIME_HOURS] * last[c.GPU_COUNT]).sum())
    done = last.filter(pl.col(c.UPDATED_AT) < cut)
    known = float((done[c.RUNTIME_HOURS] * done[c.GPU_COUNT]).sum())
    in_window = (run[c.SUBMITTED_AT] >= cut - 7 * DAY).to_numpy()
    gpus = run[c.GPU_COUNT].to_numpy().astype(np.float64)
    old = known + float((p50_q * gpus)[in_window].sum())
    new = known + float(((elapsed + r50) * gpus)[in_window].sum())
    again = known + float(((elapsed + before) * gpus)[in_window].sum())
    print(f"  last 7 days' GPU-hours at the cut: true {true:,.0f}; finished only {known / true:.1%} of it; "
          f"+ running at the queue median P50 {old / true:.1%}; + running at hours run + remaining P50 {new / true:.1%} "
          f"(the as-long-again rule's remaining: {again / true:.1%})")
    # the same through the nightly's own SQL (job_demand.hours_expected, demand_daily's gpu_hours: what the demand
    # forecast learns from), with the running jobs' queue-median P50 published while they were pending, and without
    # any (started between two nights, never forecast: on a cluster that does not queue, most jobs)
    cells = []
    for label, p50 in (("forecast while pending", pl.DataFrame({c.JOB_ID: run[c.JOB_ID], "p50": p50_q})),
                       ("never forecast", None)):
        t0 = time.process_time()
        with warehouse_at(jobs, cut, p50) as con:
            got = con.sql("SELECT job_id, hours_expected FROM job_demand WHERE status = 'RUNNING'").pl()
            day = (cut - 7 * DAY).date()
            counted = con.execute("SELECT sum(gpu_hours), sum(gpu_hours_forecast), sum(jobs_hours_unknown) FROM demand_daily "
                                  "WHERE day >= ?", [day]).fetchone()
        sql = run.select(c.JOB_ID).join(got, on=c.JOB_ID, how="left", maintain_order="left")["hours_expected"].to_numpy()
        sql = sql.astype(np.float64)
        err = np.abs(sql - elapsed - remaining)
        cells.append(f"{label}: remaining-time MAE {np.nanmean(err):.2f} h over {np.isfinite(sql).sum()} jobs "
                     f"({np.isnan(sql).sum()} unknown), last 7 days' GPU-hours {counted[0] / true:.1%} of the truth "
                     f"({counted[2]} job(s) unknown; {time.process_time() - t0:.1f} CPU-s)")
    print("  through the warehouse's SQL (job_demand, demand_daily): " + "; ".join(cells))
    return {"run_mae_new": float(np.mean(np.abs(r50 - remaining))), "run_mae_old": float(np.mean(np.abs(before - remaining)))}


def warehouse_at(jobs: pl.DataFrame, cut: datetime, p50: pl.DataFrame | None):
    """An in-memory warehouse (the product's schema, `warehouse/schema.py`) holding what it would at `cut`: the jobs
    finished by then as COMPLETED records, those running as RUNNING records (`updated_at` their start: ITP has no
    queueing, so their submission), and, when `p50` (job_id, p50) is given, their run-time P50 published by a score
    run while they were pending; nothing submitted at or after `cut`. Its views (`job_demand`, `demand_daily`) are the
    nightly's own SQL: the demand forecast reads `demand_daily`, the plan `job_demand`'s running jobs."""
    import duckdb

    from gpucast.warehouse.schema import schema_sql

    known = jobs.filter(pl.col(c.SUBMITTED_AT) < cut)
    going = pl.col(c.UPDATED_AT) > cut
    rows = known.with_columns(pl.when(going).then(pl.lit("RUNNING")).otherwise(pl.col(c.STATUS)).alias(c.STATUS),
                              pl.when(going).then(None).otherwise(pl.col(c.RUNTIME_HOURS)).alias(c.RUNTIME_HOURS),
                              pl.when(going).then(pl.col(c.SUBMITTED_AT)).otherwise(pl.col(c.UPDATED_AT)).alias(c.UPDATED_AT))
    rows = rows.select(c.COLUMNS).with_columns(
        pl.lit("h").alias("record_hash"), pl.int_range(pl.len()).alias("arrival"), pl.lit("itp").alias("source_file"),
        pl.int_range(pl.len()).alias("source_row"), pl.lit("ingest-itp").alias("ingest_run_id"),
        pl.lit(cut).alias("loaded_at"))
    con = duckdb.connect()
    con.execute(schema_sql())
    con.register("staged_rows", rows.to_arrow())
    con.execute("INSERT INTO job_log_records BY NAME SELECT * FROM staged_rows")
    con.execute("INSERT INTO job_logs_latest SELECT job_id, arrival, coalesce(updated_at, submitted_at) FROM staged_rows")
    if p50 is not None:
        con.execute("INSERT INTO score_runs (score_run_id, started_at, status) VALUES ('score-itp', ?, 'published')", [cut])
        con.register("staged_p50", p50.to_arrow())
        con.execute(f"INSERT INTO forecasts (job_id, target, p10, p50, p90, model, train_run_id, score_run_id, scored_at) "
                    f"SELECT job_id, '{c.RUNTIME_HOURS}', p50, p50, p50, 'queue median', 'itp', 'score-itp', ? "
                    "FROM staged_p50", [cut])
    return con


def burst_cost(pending_jobs: int, finished: int = 200_000, going: int = 20_000, seed: int = 0) -> None:
    """The nightly's burst step alone at scale (review 57 N6): `history.burst_siblings` over `finished` labelled and
    `going` RUNNING jobs (as `training.read_running` stages them) and `history.burst_p50` for `pending_jobs` pending
    ones, all submitted over the same day, 10 queues x 4 GPU counts, no account or name (a plain export: the densest
    bursts, each hour's siblings read as the capped sample of `history.BURST_BUCKET_JOBS`). Prints CPU seconds, wall
    and peak RSS."""
    import resource

    rng = np.random.default_rng(seed)
    day = datetime(2026, 11, 27, tzinfo=UTC)

    def jobs_of(n: int, status: str, hours) -> pl.DataFrame:
        submitted = [day + timedelta(hours=float(x)) for x in rng.uniform(0, 24, n)]
        return pl.DataFrame({c.JOB_ID: [f"{status}{i}" for i in range(n)], c.STATUS: status,
                             c.QUEUE: rng.choice([f"q{i}" for i in range(10)], n),
                             c.TEAM: None, c.JOB_NAME: None,  # a plain export: a burst is any job of the queue x GPUs
                             c.GPU_COUNT: rng.choice([1, 2, 4, 8], n), c.SUBMITTED_AT: submitted, c.UPDATED_AT: submitted,
                             c.RUNTIME_HOURS: hours}, schema_overrides={c.RUNTIME_HOURS: pl.Float64, c.TEAM: pl.String,
                                                                        c.JOB_NAME: pl.String})
    labelled = jobs_of(finished, "COMPLETED", np.exp(rng.normal(1.0, 1.2, finished)))
    running, rows = jobs_of(going, "RUNNING", [None] * going), jobs_of(pending_jobs, "PENDING", [None] * pending_jobs)
    cpu, wall = time.process_time(), time.perf_counter()
    _, n = history.burst_p50(rows, history.burst_siblings(labelled, day + DAY, running), np.ones(pending_jobs))
    print(f"burst step: {pending_jobs:,} pending, {finished:,} finished, {going:,} running jobs: "
          f"{time.process_time() - cpu:.1f} CPU-s, {time.perf_counter() - wall:.1f} s wall; {np.mean(n > 0):.0%} with "
          f"siblings (median {np.median(n):.0f}); peak RSS of the process "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=TRACE,
                    help="a job table of the same columns (cluster, job_id, submission_time, duration, num_gpu)")
    ap.add_argument("--cuts", type=int, nargs="+", default=[30, 40, 50],
                    help="days after the trace's start where the history ends (each followed by --window days)")
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-refit", dest="refit", action="store_false",
                    help="the nightly's path with the trees fitted at the cut, not again each morning (faster)")
    ap.add_argument("--burst-cost", type=int, metavar="N", help="time the burst step alone at N pending jobs and stop")
    a = ap.parse_args(argv)
    if a.burst_cost:
        return burst_cost(a.burst_cost)
    jobs = itp_jobs(a.trace)
    print(f"{a.trace.name}: {jobs.height:,} jobs, {jobs[c.QUEUE].n_unique()} clusters")
    total = dict.fromkeys(("mae", "mae_q", "mae_ceiling", "mae_trees", "covered", "n", *(f"{k}_{when}" for when in WHEN
                                                                             for k in ("mae", "covered"))), 0.0)
    for day in a.cuts:
        cut = START + day * DAY
        print(f"\ncut day {day} ({cut:%Y-%m-%d})")
        got = pending(jobs, cut, a.window, a.seed, a.refit)
        for k in ("covered", "n", *(f"covered_{when}" for when in WHEN)):
            total[k] += got[k]
        for k in ("mae", "mae_q", "mae_ceiling", "mae_trees", *(f"mae_{when}" for when in WHEN)):
            total[k] += got[k] * got["n"]
        running(jobs, cut)
    print(f"\nall cuts: pending jobs' MAE x{total['mae'] / total['mae_q']:.2f} of the queue median's (goal <= 0.85), "
          f"P10-P90 covers {total['covered'] / total['n']:.1%} (goal 70-90%) of {int(total['n']):,} jobs; the ceiling "
          f"of queue and GPU count (each group's median of the measured jobs themselves) x{total['mae_ceiling'] / total['mae_q']:.3f}")
    print(f"  the nightly's trees alone ({'fitted again each morning' if a.refit else 'fitted at the cut'}): MAE "
          f"x{total['mae_trees'] / total['mae_q']:.3f}")
    for when in WHEN:
        ratio, cover = total[f"mae_{when}"] / total["mae_q"], total[f"covered_{when}"] / total["n"]
        print(f"  + the burst's siblings ({when}): MAE x{ratio:.3f} ({'met' if ratio <= 0.85 else 'not met'}), "
              f"P10-P90 covers {cover:.1%} ({'met' if 0.7 <= cover <= 0.9 else 'not met'})")


if __name__ == "__main__":
    sys.exit(main())
