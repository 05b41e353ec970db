"""Simulated cluster job logs: the built-in data source for the demo, the tests and the benchmarks.

Outcomes follow documented first-order relationships, not random numbers:

* **Compute.** Forward FLOPs per sample ~= 2 x parameters x "reuse", where reuse is how often each
  weight is applied per sample: 1 for an MLP, the number of tokens for sequence models (input_dim),
  the spatial positions for convolutional models (input_dim^2 / 64, i.e. a stride-8 feature map).
  Training FLOPs per iteration = 3 x forward (forward + backward ~= 2x forward) x batch size.
* **Hardware.** Each queue has one GPU type (`QUEUE_GPU`: A100-80GB, A100-40GB, L4-24GB), whose
  peak at the job's precision comes from the GPU catalogue (`records/reference/gpu_catalog.csv`;
  FP32 runs at the TF32 peak). Jobs use 1, 2, 4 or 8 GPUs in data parallel (`gpu_count`), with a
  scaling efficiency of count^-0.08. Logs carry `gpu_type` for 85% of jobs and `gpu_peak_tflops`
  for 40%; FP64 jobs run on the A100 queues (nobody trains in FP64 on an L4).
* **Throughput.** Achieved = peak x utilisation x GPUs x efficiency, where utilisation grows with
  batch size as batch / (batch + 32) and depends on the architecture (recurrent nets use tensor
  cores poorly). `gpu_demand_gflops` is that achieved rate, summed over the job's GPUs.
* **Run time** = iterations x FLOPs per iteration / achieved rate + 2-10 minutes of start-up.
* **Memory** = weights (2 bytes per parameter in FP16/BF16, 4 in FP32, 8 in FP64)
  + gradients (same) + FP32 master weights under mixed precision (4 bytes)
  + optimizer state (Adam/AdamW 8 bytes, SGD/RMSprop/Adagrad 4 bytes per parameter)
  + activations (batch x input x hidden width x layers x bytes, per architecture)
  + the CUDA context (0.6-1.2 GB), times 1.08 for allocator fragmentation; per GPU: each of a
  data-parallel job's GPUs holds the whole state and its share of the batch's activations.
* **Failures.** A job whose memory exceeds its GPU's fails with `OOM`, reporting the GPU's
  size as peak memory; 2% of the rest fail for other reasons.
* **Noise.** Every measurement carries multiplicative log-normal noise (sigma 0.08).
* **Rhythm** (`Rhythm`, on for `gpucast simulate` and `gpucast demo`; `SimConfig()` alone is flat:
  exactly `jobs_per_day` a day, which the tests' fixtures rely on). A day's volume is drawn Poisson
  around `jobs_per_day` x the weekday's factor (Saturday and Sunday: `weekend_factor`) x a slow
  compounding trend (`trend_per_week`) x a burst: each day is a deadline with chance `burst_chance`, and
  the `BURST_DAYS` days before it carry `burst_factor` times the volume (teams rushing to finish).
* **The queue moves.** A share of each day's PENDING jobs (`start_next_day`) start the next day:
  that day's file logs them RUNNING, then COMPLETED (or FAILED) with their measurements, so a
  forecast made the night before can be checked against them (the backtest).
* **The logs end.** A day's file logs its finished jobs at once, with the time they finish (the
  simulator compresses delivery), but no record is ever dated after the simulation's last day: a job
  still running then is logged RUNNING, last seen a second before the logs end (`_logs_end`). So the
  simulated logs hold no record from the future, and what the product loads from them does not depend
  on the date it runs (the ingest rejects a record dated after its own clock).

Everything is vectorised (numpy + Polars) and seeded: the same arguments give the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records import catalog

FORMATS = ("jsonl", "csv", "parquet")

# Per architecture: (share of jobs, params range in millions (log-uniform), layers range,
# input_dim choices, utilisation at large batch, activation factor)
ARCHITECTURES = {
    "MLP": (0.10, (0.1, 50), (2, 12), (64, 256, 784, 1024, 4096), 0.45, 1.0),
    "CNN": (0.14, (1, 60), (4, 32), (32, 64, 128, 224), 0.55, 24.0),
    "ResNet": (0.16, (11, 60), (18, 152), (112, 224, 256, 384), 0.60, 30.0),
    "RNN": (0.06, (0.5, 30), (1, 4), (32, 64, 128, 256), 0.20, 4.0),
    "LSTM": (0.10, (1, 80), (1, 6), (64, 128, 256, 512), 0.25, 8.0),
    "GRU": (0.08, (1, 60), (1, 6), (64, 128, 256, 512), 0.25, 6.0),
    "Transformer": (0.36, (10, 7000), (4, 48), (128, 256, 512, 1024, 2048), 0.50, 12.0),
}
OPTIMIZER_STATE_BYTES = {"Adam": 8, "AdamW": 8, "SGD": 4, "RMSprop": 4, "Adagrad": 4}
OPTIMIZER_SHARE = {"Adam": 0.35, "AdamW": 0.35, "SGD": 0.2, "RMSprop": 0.05, "Adagrad": 0.05}
PRECISION_SHARE = {"FP16": 0.3, "BF16": 0.3, "FP32": 0.37, "FP64": 0.03}
PRECISION_BYTES = {"FP16": 2, "BF16": 2, "FP32": 4, "FP64": 8}
QUEUE_GPU = {"a100-80g": "A100-80GB", "a100-40g": "A100-40GB", "l4-24g": "L4-24GB"}
QUEUE_SHARE = {"a100-80g": 0.45, "a100-40g": 0.35, "l4-24g": 0.20}
GPU_COUNT_SHARE = {1: 0.70, 2: 0.12, 4: 0.10, 8: 0.08}
LOGGED_GPU_TYPE, LOGGED_PEAK = 0.85, 0.40  # shares of jobs whose logs carry them
TEAMS = ("vision", "nlp", "speech", "recsys", "research")
NOISE_SIGMA = 0.08

# Kinds of bad record `--dirty-fraction` injects; each is caught by a named rule at ingest.
DIRTY_KINDS = (
    "truncated_line",
    "text_in_number",
    "negative_value",
    "zero_batch",
    "nan_value",
    "inf_value",
    "absurd_value",
    "unknown_precision",
    "unknown_status",
    "missing_job_id",
    "missing_submitted_at",
    "bad_timestamp",
    "bad_boolean",
    "zero_measurement",
    "exact_duplicate",
)
# Parquet columns are typed, so only the kinds that fit a typed column apply there.
TEXT_ONLY_KINDS = ("truncated_line", "text_in_number", "missing_submitted_at", "bad_timestamp", "bad_boolean")
PARQUET_DIRTY_KINDS = tuple(k for k in DIRTY_KINDS if k not in TEXT_ONLY_KINDS)


BURST_DAYS = 3  # days before a deadline that carry its burst


@dataclass(frozen=True)
class Rhythm:
    """The arrivals' calendar (module doc); defaults are `gpucast simulate`'s and the demo's."""

    weekend_factor: float = 0.4  # a Saturday's or Sunday's volume, as a share of a weekday's
    trend_per_week: float = 0.02  # growth of the volume per week (compounding; 0: none, negative: decline)
    burst_chance: float = 0.04  # chance that a day is a deadline (about one a month)
    burst_factor: float = 1.8  # volume multiplier on the BURST_DAYS days before a deadline

    def __post_init__(self) -> None:
        for name in ("weekend_factor", "burst_chance", "burst_factor"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} (--{name.replace('_', '-')}) must be 0 or more, got {getattr(self, name)!r}")
        if self.burst_chance > 1:
            raise ValueError(f"burst_chance (--burst-chance) is a probability (0 to 1), got {self.burst_chance!r}")
        if not self.trend_per_week > -1:
            raise ValueError("trend_per_week (--trend-per-week) must be above -1 (a decline of less than 100% a week), "
                             f"got {self.trend_per_week!r}")


@dataclass(frozen=True)
class SimConfig:
    """What `gpucast simulate` writes."""

    days: int = 7
    jobs_per_day: int = 500
    pending_fraction: float = 0.1
    dirty_fraction: float = 0.0
    seed: int = 0
    fmt: str = "jsonl"
    start: date = date(2026, 11, 1)
    update_fraction: float = 0.1  # share of finished jobs also logged earlier as RUNNING
    start_next_day: float = 0.6  # share of a day's PENDING jobs that start (and finish) the next day
    rhythm: Rhythm | None = None  # None: exactly jobs_per_day every day


def daily_volumes(cfg: SimConfig) -> np.ndarray:
    """Jobs submitted on each simulated day: `jobs_per_day` flat, or drawn by `cfg.rhythm` (module doc)
    from a generator of its own, so the jobs' draws stay seeded by `cfg.seed` alone."""
    if cfg.rhythm is None:
        return np.full(cfg.days, cfg.jobs_per_day, dtype=np.int64)
    r, rng = cfg.rhythm, np.random.default_rng([cfg.seed, 0x5EA5])
    days = np.arange(cfg.days)
    weekend = np.array([(cfg.start + timedelta(days=int(d))).weekday() >= 5 for d in days])
    deadline = rng.random(cfg.days + BURST_DAYS) < r.burst_chance  # deadlines may fall just after the last day
    burst = np.array([deadline[d + 1:d + 1 + BURST_DAYS].any() for d in days])
    mean = (cfg.jobs_per_day * np.where(weekend, r.weekend_factor, 1.0) * (1 + r.trend_per_week) ** (days / 7)
            * np.where(burst, r.burst_factor, 1.0))
    return rng.poisson(mean).astype(np.int64)


def _choice(rng: np.random.Generator, shares: dict[str, float], n: int) -> np.ndarray:
    names = list(shares)
    p = np.array([shares[k] for k in names])
    return np.array(names, dtype=object)[rng.choice(len(names), size=n, p=p / p.sum())]


def job_ids(seed: int, day: date, n: int) -> list[str]:
    """`sim-s<seed>-<yyyymmdd>-<n>`: unique per simulation seed and day, so logs simulated with
    different seeds can be ingested together (the same seed gives the same ids: re-ingesting the
    same simulation is idempotent)."""
    return [f"sim-s{seed}-{day:%Y%m%d}-{i:07d}" for i in range(n)]


def simulate_jobs(n: int, rng: np.random.Generator, day: date, pending_fraction: float, seed: int = 0,
                  keep_outcomes: bool = False) -> pl.DataFrame:
    """`n` clean job records submitted on `day`, with measured outcomes where they exist; `seed`
    only names the jobs (`job_ids`): `rng` draws everything else. `keep_outcomes` adds what every job
    would measure (`_gflops`, `_mem_gb`, `_runtime_h`, `_oom`, `_gpu_gb`), pending ones included."""
    jobs = _configurations(n, rng)
    hardware = _hardware(jobs, rng)
    gflops, runtime_h, mem_gb = _outcomes(jobs, hardware, rng)
    status, oom = _statuses(mem_gb, hardware["gpu_gb"], pending_fraction, rng)
    completed, failed_oom = status == "COMPLETED", (status == "FAILED") & oom
    submitted, updated = _times(day, status, np.where(completed, runtime_h, 0.1), rng)
    logged = hardware["logged"]
    frame = pl.DataFrame(
        {
            c.JOB_ID: job_ids(seed, day, n),
            c.SUBMITTED_AT: submitted,
            c.UPDATED_AT: updated,
            c.STATUS: status.tolist(),
            **{k: v.tolist() if v.dtype == object else v for k, v in jobs.items() if not k.startswith("_")},
            c.GPU_TYPE: np.where(logged["type"], hardware["gpu_type"], None).tolist(),
            c.GPU_COUNT: hardware["gpu_count"],
            c.GPU_PEAK_TFLOPS: np.where(logged["peak"], hardware["peak_tflops"], np.nan),
            c.ARCH: pl.Series([None] * n, dtype=pl.String),  # the simulator's networks have no published name
            c.GPU_DEMAND_GFLOPS: np.where(completed, np.round(gflops, 2), np.nan),
            c.PEAK_GPU_MEM_GB: np.where(completed, np.round(mem_gb, 3),
                                        np.where(failed_oom, hardware["gpu_gb"], np.nan)),
            c.RUNTIME_HOURS: np.where(completed, np.round(runtime_h, 4), np.nan),
            c.FAILURE_REASON: np.where(failed_oom, "OOM", np.where(status == "FAILED", "ERROR", None)).tolist(),
            # contract v4's scheduler facts: the simulated logs are a tracker's, with no time limit or job name
            c.TIME_LIMIT_HOURS: pl.Series([None] * n, dtype=pl.Float64),
            c.JOB_NAME: pl.Series([None] * n, dtype=pl.String),
            # contract v5's parallel layout and memory savers: the simulated jobs log none of them
            **{f.name: pl.Series([None] * n, dtype=pl.Int64 if f.kind == "int" else pl.String)
               for f in c.FIELDS if f.since >= 5},
        },
        strict=False,
    ).select(c.COLUMNS).with_columns(pl.col(*c.TARGETS, c.GPU_PEAK_TFLOPS).fill_nan(None))
    frame = _typed(frame)
    if keep_outcomes:
        return frame.with_columns(pl.Series("_gflops", np.round(gflops, 2)), pl.Series("_mem_gb", np.round(mem_gb, 3)),
                                  pl.Series("_runtime_h", np.round(runtime_h, 4)), pl.Series("_oom", oom),
                                  pl.Series("_gpu_gb", hardware["gpu_gb"]))
    return frame


def _typed(frame: pl.DataFrame) -> pl.DataFrame:
    """Columns built from Python lists that held no value (a day of no jobs, a day of only pending ones) typed as
    they are on any other day: the two timestamps, else text. Untyped (`null`), adding a minute to `submitted_at`
    failed, and `gpucast simulate --history-days 1 --jobs-per-day 5 --seed 3` (a quiet Sunday: 0 jobs) stopped."""
    untyped = [n for n, t in frame.schema.items() if t == pl.Null]
    return frame.with_columns(pl.col(n).cast(pl.Datetime("us", "UTC") if n in (c.SUBMITTED_AT, c.UPDATED_AT)
                                             else pl.String) for n in untyped)


def _per_architecture(arch_idx: np.ndarray, field: int, pick=lambda v: v) -> np.ndarray:
    names = list(ARCHITECTURES)
    return np.array([pick(ARCHITECTURES[a][field]) for a in names])[arch_idx]


def _configurations(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The 11 features, the queue and the team of `n` jobs (`_arch` keeps each job's architecture index)."""
    names = list(ARCHITECTURES)
    share = np.array([ARCHITECTURES[a][0] for a in names])
    arch = rng.choice(len(names), size=n, p=share / share.sum())
    model_type = np.array(names, dtype=object)[arch]
    lo, hi = _per_architecture(arch, 1, lambda r: r[0]), _per_architecture(arch, 1, lambda r: r[1])
    params_m = np.exp(rng.uniform(np.log(lo), np.log(hi)))
    num_layers = rng.integers(_per_architecture(arch, 2, lambda r: r[0]), _per_architecture(arch, 2, lambda r: r[1]) + 1)
    input_dim = np.array([rng.choice(ARCHITECTURES[a][3]) for a in model_type])
    return {
        "_arch": arch,
        c.MODEL_TYPE: model_type,
        c.PARAMS_MILLION: np.round(params_m, 3),
        c.BATCH_SIZE: (2 ** rng.integers(2, 10, size=n)).astype(np.int64),  # 4 .. 512
        c.INPUT_DIM: input_dim.astype(np.int64),
        c.NUM_LAYERS: num_layers.astype(np.int64),
        c.ITERATIONS: np.round(np.exp(rng.uniform(np.log(500), np.log(200_000), size=n))),
        c.PRECISION: _choice(rng, PRECISION_SHARE, n),
        c.OPTIMIZER: _choice(rng, OPTIMIZER_SHARE, n),
        c.LEARNING_RATE: np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), size=n)),
        c.REGULARIZATION: rng.random(n) < 0.6,
        c.DATA_AUGMENTATION: rng.random(n) < 0.45,
    } | _queue_and_team(n, rng)  # drawn after the features (a dict literal is evaluated left to right)


def _queue_and_team(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {c.QUEUE: _choice(rng, QUEUE_SHARE, n), c.TEAM: np.array(TEAMS, dtype=object)[rng.integers(0, len(TEAMS), n)]}


def _hardware(jobs: dict[str, np.ndarray], rng: np.random.Generator) -> dict:
    """Each job's GPU (its queue's; FP64 jobs go to an A100 queue), GPU count, peak and what the log shows."""
    n = len(jobs[c.MODEL_TYPE])
    queue = jobs[c.QUEUE]
    queue[(jobs[c.PRECISION] == "FP64") & (queue == "l4-24g")] = "a100-40g"
    gpus = catalog.gpus()
    gpu_type = np.array([QUEUE_GPU[q] for q in queue], dtype=object)
    counts = np.array(list(GPU_COUNT_SHARE))
    gpu_count = counts[rng.choice(len(counts), size=n, p=np.array(list(GPU_COUNT_SHARE.values())))].astype(np.int64)
    peak = np.array([gpus[g].peak_tflops(p) for g, p in zip(gpu_type, jobs[c.PRECISION], strict=True)])
    logged = {"type": rng.random(n) < LOGGED_GPU_TYPE, "peak": rng.random(n) < LOGGED_PEAK}
    return {"gpu_type": gpu_type, "gpu_count": gpu_count, "peak_tflops": peak, "logged": logged,
            "gpu_gb": np.array([gpus[g].memory_gb for g in gpu_type])}


def _outcomes(jobs: dict[str, np.ndarray], hw: dict, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(sustained GFLOP/s over all GPUs, run time in hours, peak memory per GPU in GB) of every job."""
    n, arch = len(jobs["_arch"]), jobs["_arch"]
    model_type, params = jobs[c.MODEL_TYPE], jobs[c.PARAMS_MILLION] * 1e6
    batch, dim, layers = jobs[c.BATCH_SIZE], jobs[c.INPUT_DIM], jobs[c.NUM_LAYERS]
    noise = lambda: np.exp(rng.normal(0.0, NOISE_SIGMA, size=n))  # noqa: E731

    # Compute: FLOPs per iteration and the achieved rate.
    conv = np.isin(model_type, ["CNN", "ResNet"])
    seq = np.isin(model_type, ["RNN", "LSTM", "GRU", "Transformer"])
    reuse = np.where(conv, dim.astype(float) ** 2 / 64.0, np.where(seq, dim, 1.0))
    flops_per_iter = 3.0 * 2.0 * params * reuse * batch
    utilisation = _per_architecture(arch, 4) * batch / (batch + 32.0)
    count = hw["gpu_count"]
    achieved = hw["peak_tflops"] * 1e12 * utilisation * count * count ** -0.08  # FLOP/s over all GPUs
    gflops = achieved / 1e9 * noise()
    runtime_h = (jobs[c.ITERATIONS] * flops_per_iter / achieved + rng.uniform(120, 600, size=n)) / 3600 * noise()

    # Memory per GPU: states + its share of the activations + context, with fragmentation.
    precision = jobs[c.PRECISION]
    pbytes = np.array([PRECISION_BYTES[p] for p in precision])
    mixed = np.isin(precision, ["FP16", "BF16"])
    opt_bytes = np.array([OPTIMIZER_STATE_BYTES[o] for o in jobs[c.OPTIMIZER]])
    state_gb = params * (2 * pbytes + np.where(mixed, 4, 0) + opt_bytes) / 1e9
    hidden = np.sqrt(params / layers)
    act_gb = batch * np.minimum(dim, 4096) * hidden * layers * pbytes * _per_architecture(arch, 5) / 1e9 / 64 / count
    mem_gb = (state_gb + act_gb + rng.uniform(0.6, 1.2, size=n)) * 1.08 * noise()
    return gflops, runtime_h, mem_gb


def _statuses(mem_gb: np.ndarray, gpu_gb: np.ndarray, pending_fraction: float,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(status, would run out of memory) per job: OOM jobs fail; 2% of the others fail otherwise."""
    n = len(mem_gb)
    oom = mem_gb > gpu_gb
    u = rng.random(n)
    status = np.where(
        u < pending_fraction,
        "PENDING",
        np.where(u < pending_fraction + 0.05, "RUNNING", np.where(u < pending_fraction + 0.07, "CANCELLED", "DONE")),
    ).astype(object)
    done = status == "DONE"
    status[done & oom] = "FAILED"
    status[done & ~oom & (rng.random(n) < 0.02)] = "FAILED"
    status[status == "DONE"] = "COMPLETED"
    return status, oom


def _times(day: date, status: np.ndarray, busy_h: np.ndarray, rng: np.random.Generator) -> tuple[list, list]:
    """Submission times over the day; a finished job's update comes after its wait and its run."""
    n = len(status)
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    submitted = [start + timedelta(seconds=float(s)) for s in np.sort(rng.uniform(0, 86_400, size=n))]
    finished = status != "PENDING"
    wait_h = rng.exponential(0.5, size=n)
    updated = [s + timedelta(hours=float(w + r)) if f else None
               for s, w, r, f in zip(submitted, wait_h, busy_h, finished, strict=True)]
    return submitted, updated


def _next_day_starts(pending: pl.DataFrame, day: date, rng: np.random.Generator, share: float) -> pl.DataFrame:
    """RUNNING, then COMPLETED (or FAILED when out of memory) records, on `day`, for a share of the
    previous day's PENDING jobs (`pending` with `simulate_jobs(keep_outcomes=True)`'s columns)."""
    # failure_reason is all null when every job of the day is pending: typed here, so both halves agree
    starting = pending.filter(pl.Series(rng.random(pending.height) < share)).with_columns(
        pl.col(c.FAILURE_REASON).cast(pl.String))
    n = starting.height
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    started = [start + timedelta(hours=float(h)) for h in rng.uniform(0.5, 20, size=n)]
    finished = [s + timedelta(hours=float(r)) for s, r in zip(started, starting["_runtime_h"].to_numpy(), strict=True)]
    oom = starting["_oom"].to_numpy()
    running = starting.with_columns(pl.lit("RUNNING").alias(c.STATUS), pl.Series(c.UPDATED_AT, started))
    done = starting.with_columns(
        pl.Series(c.STATUS, np.where(oom, "FAILED", "COMPLETED")),
        pl.Series(c.UPDATED_AT, finished),
        pl.Series(c.GPU_DEMAND_GFLOPS, np.where(oom, np.nan, starting["_gflops"].to_numpy())),
        pl.Series(c.PEAK_GPU_MEM_GB, np.where(oom, starting["_gpu_gb"].to_numpy(), starting["_mem_gb"].to_numpy())),
        pl.Series(c.RUNTIME_HOURS, np.where(oom, np.nan, starting["_runtime_h"].to_numpy())),
        pl.Series(c.FAILURE_REASON, np.where(oom, "OOM", None).tolist(), dtype=pl.String),
    )
    return pl.concat([running, done]).with_columns(pl.col(*c.TARGETS).fill_nan(None))


def _with_running_updates(df: pl.DataFrame, rng: np.random.Generator, fraction: float) -> pl.DataFrame:
    """Prepend an earlier RUNNING record for a share of finished jobs, as a real log stream would."""
    finished = df.filter(pl.col(c.STATUS).is_in(["COMPLETED", "FAILED"]))
    pick = finished.filter(pl.Series(rng.random(finished.height) < fraction))
    earlier = pick.with_columns(
        pl.lit("RUNNING").alias(c.STATUS),
        (pl.col(c.SUBMITTED_AT) + pl.duration(minutes=1)).alias(c.UPDATED_AT),
        *[pl.lit(None, dtype=pl.Float64).alias(t) for t in c.TARGETS],
        pl.lit(None, dtype=pl.String).alias(c.FAILURE_REASON),
    )
    return pl.concat([earlier, df]).sort(c.SUBMITTED_AT, c.UPDATED_AT, nulls_last=False)


def _corrupt_record(rec: dict, kind: str, rng: np.random.Generator) -> dict | str:
    """Return a bad version of one record (a dict, or a raw string for a broken line)."""
    rec = dict(rec)
    if kind == "truncated_line":
        text = json.dumps(rec)
        return text[: int(len(text) * rng.uniform(0.2, 0.8))]
    if kind == "text_in_number":
        rec[c.BATCH_SIZE] = "thirty-two"
    elif kind == "negative_value":
        rec[c.PARAMS_MILLION] = -abs(rec[c.PARAMS_MILLION] or 1.0)
    elif kind == "zero_batch":
        rec[c.BATCH_SIZE] = 0
    elif kind == "nan_value":
        rec[c.LEARNING_RATE] = float("nan")
    elif kind == "inf_value":
        rec[c.ITERATIONS] = float("inf")
    elif kind == "absurd_value":
        rec[c.PARAMS_MILLION] = 1e30
    elif kind == "unknown_precision":
        rec[c.PRECISION] = "FP12"
    elif kind == "unknown_status":
        rec[c.STATUS] = "EXPLODED"
    elif kind == "missing_job_id":
        rec[c.JOB_ID] = None
    elif kind == "missing_submitted_at":
        rec.pop(c.SUBMITTED_AT, None)
    elif kind == "bad_timestamp":
        rec[c.SUBMITTED_AT] = "yesterday-ish"
    elif kind == "bad_boolean":
        rec[c.DATA_AUGMENTATION] = "maybe"
    elif kind == "zero_measurement":
        rec[c.STATUS] = "COMPLETED"
        rec[c.GPU_DEMAND_GFLOPS] = 0.0
    return rec


def _to_records(df: pl.DataFrame) -> list[dict]:
    out = df.with_columns(
        pl.col(c.SUBMITTED_AT, c.UPDATED_AT).dt.strftime("%Y-%m-%dT%H:%M:%S%.3fZ"),
    )
    return out.to_dicts()


def _dirty_positions(n: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    k = int(round(n * fraction))
    return np.sort(rng.choice(n, size=min(k, n), replace=False)) if k else np.array([], dtype=int)


def _write_text(df: pl.DataFrame, path: Path, cfg: SimConfig, rng: np.random.Generator) -> None:
    """JSONL or CSV; clean rows go through Polars' writers, dirty ones through the stdlib."""
    dirty = _dirty_positions(df.height, cfg.dirty_fraction, rng)
    if cfg.fmt == "jsonl":
        typed = df.with_columns(pl.col(c.SUBMITTED_AT, c.UPDATED_AT).dt.strftime("%Y-%m-%dT%H:%M:%S%.3fZ"))
        lines = typed.write_ndjson().splitlines()
    else:
        lines = df.write_csv(datetime_format="%Y-%m-%dT%H:%M:%S%.3fZ").splitlines()
    if len(dirty):
        records = _to_records(df[dirty.tolist()])
        kinds = rng.choice(DIRTY_KINDS, size=len(dirty))
        extra: list[tuple[int, str]] = []
        for pos, rec, kind in zip(dirty.tolist(), records, kinds, strict=True):
            if kind == "exact_duplicate":
                extra.append((pos, lines[pos + (1 if cfg.fmt == "csv" else 0)]))
                continue
            bad = _corrupt_record(rec, str(kind), rng)
            line_no = pos + (1 if cfg.fmt == "csv" else 0)
            if cfg.fmt == "jsonl":
                lines[line_no] = bad if isinstance(bad, str) else json.dumps(bad, default=str)
            elif isinstance(bad, str):
                lines[line_no] = lines[line_no][: len(lines[line_no]) // 2]  # a ragged CSV row
            else:
                lines[line_no] = _csv_line(bad)
        for pos, line in reversed(extra):
            lines.insert(pos + (1 if cfg.fmt == "csv" else 0) + 1, line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _csv_line(rec: dict) -> str:
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(["" if rec.get(k) is None else rec.get(k) for k in c.COLUMNS])
    return buf.getvalue()


def _write_parquet(df: pl.DataFrame, path: Path, cfg: SimConfig, rng: np.random.Generator) -> None:
    dirty = _dirty_positions(df.height, cfg.dirty_fraction, rng)
    if len(dirty):
        df = df.with_columns(pl.col(c.STATUS, c.PRECISION).cast(pl.String))
        rows = df.to_dicts()
        dups = []
        for pos, kind in zip(dirty.tolist(), rng.choice(PARQUET_DIRTY_KINDS, size=len(dirty)), strict=True):
            if kind == "exact_duplicate":
                dups.append(rows[pos])
            else:
                rows[pos] = _corrupt_record(rows[pos], str(kind), rng)
        df = pl.DataFrame(rows + dups, schema=df.schema)
    df.write_parquet(path)


def _logs_end(df: pl.DataFrame, end: datetime) -> pl.DataFrame:
    """Finished records dated at or after `end` (the end of the last simulated day) as RUNNING, last seen one
    second before `end`, without outcomes: the job had not finished when the logs end (module doc). Rows are
    rewritten, never dropped, so the seeded draws that follow (the dirty rows) are the same."""
    late = pl.col(c.STATUS).is_in(["COMPLETED", "FAILED", "CANCELLED"]) & (pl.col(c.UPDATED_AT) >= end)
    return df.with_columns(
        pl.when(late).then(pl.lit("RUNNING")).otherwise(pl.col(c.STATUS)).alias(c.STATUS),
        pl.when(late).then(pl.lit(end - timedelta(seconds=1))).otherwise(pl.col(c.UPDATED_AT)).alias(c.UPDATED_AT),
        *[pl.when(late).then(None).otherwise(pl.col(col)).alias(col) for col in (*c.TARGETS, c.FAILURE_REASON)],
    )


def write_logs(out_dir: Path, cfg: SimConfig) -> list[Path]:
    """Write one log file per simulated day into `out_dir`; return the paths."""
    if cfg.fmt not in FORMATS:
        raise ValueError(f"unknown format {cfg.fmt!r}; choose one of {', '.join(FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    paths = []
    pending = None
    volumes = daily_volumes(cfg)
    end = datetime(cfg.start.year, cfg.start.month, cfg.start.day, tzinfo=UTC) + timedelta(days=len(volumes))
    for d, volume in enumerate(volumes):
        day = cfg.start + timedelta(days=d)
        jobs = simulate_jobs(int(volume), rng, day, cfg.pending_fraction, seed=cfg.seed, keep_outcomes=True)
        df = _with_running_updates(jobs.select(c.COLUMNS), rng, cfg.update_fraction)
        if pending is not None and pending.height:
            df = pl.concat([df, _next_day_starts(pending, day, rng, cfg.start_next_day).select(c.COLUMNS)])
        df = _logs_end(df, end)
        pending = jobs.filter(pl.col(c.STATUS) == "PENDING")
        path = out_dir / f"jobs-{day:%Y-%m-%d}.{cfg.fmt}"
        if cfg.fmt == "parquet":
            _write_parquet(df, path, cfg, rng)
        else:
            _write_text(df, path, cfg, rng)
        paths.append(path)
    return paths
