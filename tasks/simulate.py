"""Simulated cluster job logs: the built-in data source for the demo, the tests and the benchmarks.

Outcomes follow documented first-order relationships, not random numbers:

* **Compute.** Forward FLOPs per sample ~= 2 x parameters x "reuse", where reuse is how often each
  weight is applied per sample: 1 for an MLP, the number of tokens for sequence models (input_dim),
  the spatial positions for convolutional models (input_dim^2 / 64, i.e. a stride-8 feature map).
  Training FLOPs per iteration = 3 x forward (forward + backward ~= 2x forward) x batch size.
* **Throughput.** The simulated GPUs peak at 312 TFLOP/s (FP16/BF16 tensor cores), 156 (FP32 via
  TF32) and 19.5 (FP64). Achieved = peak x utilisation, where utilisation grows with batch size as
  batch / (batch + 32) and depends on the architecture (recurrent nets use tensor cores poorly).
  `gpu_demand_gflops` is that achieved rate.
* **Run time** = iterations x FLOPs per iteration / achieved rate + 2-10 minutes of start-up.
* **Memory** = weights (2 bytes per parameter in FP16/BF16, 4 in FP32, 8 in FP64)
  + gradients (same) + FP32 master weights under mixed precision (4 bytes)
  + optimizer state (Adam/AdamW 8 bytes, SGD/RMSprop/Adagrad 4 bytes per parameter)
  + activations (batch x input x hidden width x layers x bytes, per architecture)
  + the CUDA context (0.6-1.2 GB), times 1.08 for allocator fragmentation.
* **Failures.** A job whose memory exceeds its queue's GPU fails with `OOM`, reporting the GPU's
  size as peak memory; 2% of the rest fail for other reasons.
* **Noise.** Every measurement carries multiplicative log-normal noise (sigma 0.08).

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
PEAK_TFLOPS = {"FP16": 312.0, "BF16": 312.0, "FP32": 156.0, "FP64": 19.5}
QUEUE_GPU_GB = {"a100-80g": 80.0, "a100-40g": 40.0, "l4-24g": 24.0}
QUEUE_SHARE = {"a100-80g": 0.45, "a100-40g": 0.35, "l4-24g": 0.20}
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


def _choice(rng: np.random.Generator, shares: dict[str, float], n: int) -> np.ndarray:
    names = list(shares)
    p = np.array([shares[k] for k in names])
    return np.array(names, dtype=object)[rng.choice(len(names), size=n, p=p / p.sum())]


def job_ids(seed: int, day: date, n: int) -> list[str]:
    """`sim-s<seed>-<yyyymmdd>-<n>`: unique per simulation seed and day, so logs simulated with
    different seeds can be ingested together (the same seed gives the same ids: re-ingesting the
    same simulation is idempotent)."""
    return [f"sim-s{seed}-{day:%Y%m%d}-{i:07d}" for i in range(n)]


def simulate_jobs(n: int, rng: np.random.Generator, day: date, pending_fraction: float, seed: int = 0) -> pl.DataFrame:
    """`n` clean job records submitted on `day`, with measured outcomes where they exist; `seed`
    only names the jobs (`job_ids`): `rng` draws everything else."""
    arch_names = list(ARCHITECTURES)
    arch_p = np.array([ARCHITECTURES[a][0] for a in arch_names])
    arch_idx = rng.choice(len(arch_names), size=n, p=arch_p / arch_p.sum())
    model_type = np.array(arch_names, dtype=object)[arch_idx]

    lo = np.array([ARCHITECTURES[a][1][0] for a in arch_names])[arch_idx]
    hi = np.array([ARCHITECTURES[a][1][1] for a in arch_names])[arch_idx]
    params_m = np.exp(rng.uniform(np.log(lo), np.log(hi)))
    l_lo = np.array([ARCHITECTURES[a][2][0] for a in arch_names])[arch_idx]
    l_hi = np.array([ARCHITECTURES[a][2][1] for a in arch_names])[arch_idx]
    num_layers = rng.integers(l_lo, l_hi + 1)
    input_dim = np.array([rng.choice(ARCHITECTURES[a][3]) for a in model_type])
    batch_size = 2 ** rng.integers(2, 10, size=n)  # 4 .. 512
    iterations = np.round(np.exp(rng.uniform(np.log(500), np.log(200_000), size=n)))
    precision = _choice(rng, PRECISION_SHARE, n)
    optimizer = _choice(rng, OPTIMIZER_SHARE, n)
    learning_rate = np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), size=n))
    regularization = rng.random(n) < 0.6
    augmentation = rng.random(n) < 0.45
    queue = _choice(rng, QUEUE_SHARE, n)
    team = np.array(TEAMS, dtype=object)[rng.integers(0, len(TEAMS), size=n)]

    # Compute: FLOPs per iteration and the achieved rate.
    conv = np.isin(model_type, ["CNN", "ResNet"])
    seq = np.isin(model_type, ["RNN", "LSTM", "GRU", "Transformer"])
    reuse = np.where(conv, input_dim.astype(float) ** 2 / 64.0, np.where(seq, input_dim, 1.0))
    flops_per_iter = 3.0 * 2.0 * params_m * 1e6 * reuse * batch_size
    util_arch = np.array([ARCHITECTURES[a][4] for a in arch_names])[arch_idx]
    utilisation = util_arch * batch_size / (batch_size + 32.0)
    peak = np.array([PEAK_TFLOPS[p] for p in precision]) * 1e12
    achieved = peak * utilisation  # FLOP/s
    noise = lambda: np.exp(rng.normal(0.0, NOISE_SIGMA, size=n))  # noqa: E731
    gflops = achieved / 1e9 * noise()
    runtime_h = (iterations * flops_per_iter / achieved + rng.uniform(120, 600, size=n)) / 3600 * noise()

    # Memory: states + activations + context, with fragmentation.
    pbytes = np.array([PRECISION_BYTES[p] for p in precision])
    mixed = np.isin(precision, ["FP16", "BF16"])
    opt_bytes = np.array([OPTIMIZER_STATE_BYTES[o] for o in optimizer])
    state_gb = params_m * 1e6 * (2 * pbytes + np.where(mixed, 4, 0) + opt_bytes) / 1e9
    hidden = np.sqrt(params_m * 1e6 / num_layers)
    act_factor = np.array([ARCHITECTURES[a][5] for a in arch_names])[arch_idx]
    act_gb = batch_size * np.minimum(input_dim, 4096) * hidden * num_layers * pbytes * act_factor / 1e9 / 64
    context_gb = rng.uniform(0.6, 1.2, size=n)
    mem_gb = (state_gb + act_gb + context_gb) * 1.08 * noise()

    gpu_gb = np.array([QUEUE_GPU_GB[q] for q in queue])
    oom = mem_gb > gpu_gb
    u = rng.random(n)
    status = np.where(
        u < pending_fraction,
        "PENDING",
        np.where(u < pending_fraction + 0.05, "RUNNING", np.where(u < pending_fraction + 0.07, "CANCELLED", "DONE")),
    ).astype(object)
    done = status == "DONE"
    status[done & oom] = "FAILED"
    other_failure = done & ~oom & (rng.random(n) < 0.02)
    status[other_failure] = "FAILED"
    status[status == "DONE"] = "COMPLETED"
    completed = status == "COMPLETED"
    failed_oom = (status == "FAILED") & oom

    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    submitted = [start + timedelta(seconds=float(s)) for s in np.sort(rng.uniform(0, 86_400, size=n))]
    finished = status != "PENDING"
    wait_h = rng.exponential(0.5, size=n)
    updated = [
        s + timedelta(hours=float(w + (r if f else 0.0))) if f else None
        for s, w, r, f in zip(submitted, wait_h, np.where(completed, runtime_h, 0.1), finished, strict=True)
    ]

    return pl.DataFrame(
        {
            c.JOB_ID: job_ids(seed, day, n),
            c.SUBMITTED_AT: submitted,
            c.UPDATED_AT: updated,
            c.STATUS: status.tolist(),
            c.QUEUE: queue.tolist(),
            c.TEAM: team.tolist(),
            c.MODEL_TYPE: model_type.tolist(),
            c.PARAMS_MILLION: np.round(params_m, 3),
            c.BATCH_SIZE: batch_size.astype(np.int64),
            c.INPUT_DIM: input_dim.astype(np.int64),
            c.NUM_LAYERS: num_layers.astype(np.int64),
            c.ITERATIONS: iterations,
            c.PRECISION: precision.tolist(),
            c.OPTIMIZER: optimizer.tolist(),
            c.LEARNING_RATE: learning_rate,
            c.REGULARIZATION: regularization,
            c.DATA_AUGMENTATION: augmentation,
            c.GPU_DEMAND_GFLOPS: np.where(completed, np.round(gflops, 2), np.nan),
            c.PEAK_GPU_MEM_GB: np.where(completed, np.round(mem_gb, 3), np.where(failed_oom, gpu_gb, np.nan)),
            c.RUNTIME_HOURS: np.where(completed, np.round(runtime_h, 4), np.nan),
            c.FAILURE_REASON: np.where(failed_oom, "OOM", np.where(status == "FAILED", "ERROR", None)).tolist(),
        },
        strict=False,
    ).with_columns(pl.col(c.TARGETS).fill_nan(None))


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


def write_logs(out_dir: Path, cfg: SimConfig) -> list[Path]:
    """Write one log file per simulated day into `out_dir`; return the paths."""
    if cfg.fmt not in FORMATS:
        raise ValueError(f"unknown format {cfg.fmt!r}; choose one of {', '.join(FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    paths = []
    for d in range(cfg.days):
        day = cfg.start + timedelta(days=d)
        df = simulate_jobs(cfg.jobs_per_day, rng, day, cfg.pending_fraction, seed=cfg.seed)
        df = _with_running_updates(df, rng, cfg.update_fraction)
        path = out_dir / f"jobs-{day:%Y-%m-%d}.{cfg.fmt}"
        if cfg.fmt == "parquet":
            _write_parquet(df, path, cfg, rng)
        else:
            _write_text(df, path, cfg, rng)
        paths.append(path)
    return paths
