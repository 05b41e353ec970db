"""The traced prior: one training step of a named architecture, measured, as prior columns.

For a job whose `arch` (contract v3) is a name the model zoo knows (`tasks/learn/zoo.py`, `canonical`),
the zoo builds the network on the meta device (`tasks/learn/zoo_trace.py`) and measures one training step's tensor peak and FLOPs
with PyTorch's own tools (FakeTensorMode, MemTracker, FlopCounterMode: the method of
tests/data/make_measured_jobs.py). `trace_jobs` returns, per job:

* `traced_mem_gb`: what a GPU would report for that step: the tensor peak / 1e9 times
  `RESERVED_OVER_TENSOR` (the caching allocator's segments and cuDNN workspaces) plus
  `TRACED_CONTEXT_GB` (the CUDA context), both measured on a GPU (below);
* `traced_gflop_per_iter`: forward + backward FLOPs of one step, in GFLOP;
* `traced_params_million`, `traced_num_layers`, `traced_input_dim`: the built network's size, which
  fill the job's features when the log lacks them (`fill_features`);
* `trace_status`: "traced" (tonight), "cached" (an earlier night's), "unknown arch" (the name is kept as
  logged; the analytic prior is used), "failed: <error>" and "timed out after N s" (recorded, the
  analytic prior used), "not traced: ..." (no batch size, or the night's trace budget spent); null when
  the job logs no `arch`.

**Two traces per architecture, input size and precision** (issue 52, item 6): a traced step's memory and FLOPs
are affine in the batch size at a given input size (the activations grow with the batch, the model state does
not), so each (canonical arch, input size, precision) is traced at `BASIS_BATCHES` with `BASIS_OPTIMIZER` and no
weight decay, and a job's (batch per GPU, optimizer, regularization) is read off the line through the two
(`affine`), its optimizer's state put in place of Adam's from the parameter count (`state_bytes`). A night so
traces twice per architecture x input size x precision, not once per batch x optimizer x regularization on top;
on the reference set's direct traces the line was 0.56% off on average (docs/models.md "Tracing that scales").
A configuration traced directly on an earlier night (the cache) is used as it is. With `gpu_count` GPUs in data
parallel each GPU holds its share of the batch and a full copy of the model state (as the analytic prior
assumes), so the step is read at the per-GPU batch and its FLOPs are multiplied by the GPU count.

**Bounds**: each trace runs in a child process ('spawn': a clean interpreter, no forked torch threads),
killed past `Bounds.trace_seconds` (GPUCAST_TRACE_SECONDS); the night's new traces stop once
`Bounds.night_seconds` (GPUCAST_TRACE_NIGHT_SECONDS) are spent, and the rest wait for a later night. `gpucast score`
on its own waits at most `SCORE_ALONE_SECONDS` on new traces (`run_bounds`: the nightly's budget is the nightly's); the
jobs left are scored with the analytic prior, their status says why (`SCORE_SPENT`), and the next night traces them.
The child ends within `PARENT_POLL_S` of its parent's death, `kill -9` included (`tasks/learn/parent_watch.py`); before,
it traced on, orphaned, until its trace ended, however long that took (nobody was left to kill it).

**Cache** (a JSON file, `Storage.trace_cache_path`: models/traces.json), keyed by the configuration, so a
night pays once per configuration. A failure or a timeout is cached too, with its reason, and is not
retried every night: a failure is retried only under another torch version (an upgrade may fix it), a
timeout only when the bound is now longer than the one it ran out of. An unreadable cache file is
reported and replaced, and one that cannot be written (`models/traces.json` a folder, a read-only disk) is
reported and the night goes on with tonight's traces held in memory: a bad cache costs traces, never the night.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from importlib import metadata
from pathlib import Path

import polars as pl

from gpucast.expectations import contract as c
from gpucast.records.files import write_text
from gpucast.records.results import TraceSummary
from gpucast.tasks.learn import priors
from gpucast.tasks.learn.parent_watch import watch_parent

# From a traced step to what a GPU reports (tests/data/gpu_archs_h100.csv: 44 real training steps of 12 zoo
# architectures on an H100, PyTorch 2.11, CUDA 13; docs/models.md). The allocator's peak allocation was a median
# 1.017x the traced tensor peak (0.91-1.14x), so the trace is right; the caching allocator *reserved* a median
# 1.147x (0.94-1.60x: cuDNN workspaces of large convolutions at the top, VGG and Inception), and the CUDA context
# held 0.81-0.84 GB (median 0.83) beside it. With these two constants the traced prior was 9.5% off what the GPU reported
# (mean absolute, each family's error measured with constants taken from the other families); the tensor
# peak + the analytic prior's 0.5 GB was 15.4% off and under the real figure in 89% of the runs.
RESERVED_OVER_TENSOR = 1.15
TRACED_CONTEXT_GB = 0.83
# The traced prior's interval as a forecast of its own: x/÷ the 90th percentile of |log(reported / traced prior)|
# over those runs (1.20), as the held-out fallback's interval is set (tasks/learn/ood.py, INTERVAL_QUANTILE).
REPORTED_INTERVAL = 1.20
TRACED_PRIOR = "traced_prior"  # the `model` of a forecast that is the traced prior itself
TRACED_MEM_GB, TRACED_GFLOP_PER_ITER, TRACE_STATUS = "traced_mem_gb", "traced_gflop_per_iter", "trace_status"
TRACED_PARAMS_MILLION, TRACED_NUM_LAYERS, TRACED_INPUT_DIM = "traced_params_million", "traced_num_layers", "traced_input_dim"
# The architecture traced for a job that logs none (recognised from its shape) or only a family name, the
# match distance (null for a family's default member), and the words that say how (or why nothing was inferred).
ARCH_INFERRED, ARCH_MATCH_DISTANCE, ARCH_INFERENCE = "arch_inferred", "arch_match_distance", "arch_inference"
TRACE_COLUMNS = (TRACED_MEM_GB, TRACED_GFLOP_PER_ITER, TRACED_PARAMS_MILLION, TRACED_NUM_LAYERS, TRACED_INPUT_DIM,
                 TRACE_STATUS, ARCH_INFERRED, ARCH_MATCH_DISTANCE, ARCH_INFERENCE)
TRACE_SCHEMA = {TRACED_MEM_GB: pl.Float64, TRACED_GFLOP_PER_ITER: pl.Float64, TRACED_PARAMS_MILLION: pl.Float64,
                TRACED_NUM_LAYERS: pl.Int64, TRACED_INPUT_DIM: pl.Int64, TRACE_STATUS: pl.String,
                ARCH_INFERRED: pl.String, ARCH_MATCH_DISTANCE: pl.Float64, ARCH_INFERENCE: pl.String}
TRACED, CACHED, UNKNOWN_ARCH = "traced", "cached", "unknown arch"
NO_BATCH, NIGHT_SPENT = "not traced: no batch_size", "not traced: the night's trace budget was spent"
SCORE_ALONE_SECONDS = 60.0  # what `gpucast score` on its own waits on new traces (the nightly's budget is its own)
SCORE_SPENT = (f"not traced: gpucast score waits at most {SCORE_ALONE_SECONDS:g} s on traces (scored with the "
               "analytic prior); the next night traces it")
CACHE_VERSION = 1
REASON_MAX_LEN = 300  # a failure's message kept in the cache and the status
# The two traced steps a configuration is read from (per GPU batch; their line gives every other batch), and the
# optimizer they run (its state is swapped for the job's: `state_bytes`). On the reference set's direct traces the
# widest pair of traced batches was the best basis (interpolating beats extrapolating: 0.56% mean, 9.1% worst, against
# 1.1-1.3% and 12.7-29.4% from its two smallest or two largest; docs/models.md "Tracing that scales").
BASIS_BATCHES = (8, 128)
BASIS_OPTIMIZER = "Adam"


@dataclass(frozen=True)
class Bounds:
    """How long one trace, and all of a night's new traces together, may take (seconds), and what a job whose
    traces the budget did not reach is told (`NIGHT_SPENT`, `SCORE_SPENT`)."""

    trace_seconds: float = 60.0
    night_seconds: float = 600.0
    spent_status: str = NIGHT_SPENT


def run_bounds(trace_seconds: float, night_seconds: float, score_alone: bool = False) -> Bounds:
    """The bounds of a run's traces: the night's (GPUCAST_TRACE_SECONDS, GPUCAST_TRACE_NIGHT_SECONDS), or, for
    `gpucast score` on its own, at most `SCORE_ALONE_SECONDS` in all: a person waits on it, and what it leaves the
    next night traces."""
    if score_alone:
        return Bounds(trace_seconds, min(night_seconds, SCORE_ALONE_SECONDS), SCORE_SPENT)
    return Bounds(trace_seconds, night_seconds)


@dataclass(frozen=True)
class Config:
    """One traced configuration: what a trace depends on (the cache's key)."""

    arch: str  # canonical
    batch_size: int  # per GPU
    input_dim: int  # the logged one, else the architecture's default
    precision: str
    optimizer: str | None
    regularization: bool | None

    @cached_property  # (a frozen dataclass keeps it in its __dict__: one json.dumps a configuration, not one a use)
    def key(self) -> str:
        return json.dumps([self.arch, self.batch_size, self.input_dim, self.precision, self.optimizer,
                           self.regularization])

    @property
    def basis(self) -> tuple[Config, Config]:
        """The two traced steps this configuration is read from (`BASIS_BATCHES`, `BASIS_OPTIMIZER`, no decay)."""
        lo, hi = (Config(self.arch, b, self.input_dim, self.precision, BASIS_OPTIMIZER, None) for b in BASIS_BATCHES)
        return lo, hi


def state_bytes(optimizer: str | None, precision: str, params: float) -> float:
    """The optimizer's state of `params` parameters (bytes): Adam's two moments, SGD's momentum, ... in the parameters'
    precision (FP32 under autocast, FP64 for FP64: `priors.OPTIMIZER_STATE_BYTES`, `OPTIMIZER_SCALE`); an unknown or
    missing optimizer is traced as Adam (`stepmem.DEFAULT_OPTIMIZER`)."""
    per = priors.OPTIMIZER_STATE_BYTES.get(optimizer or BASIS_OPTIMIZER, priors.UNKNOWN_OPTIMIZER_BYTES)
    return params * per * priors.OPTIMIZER_SCALE.get(precision, 1.0)


def affine(config: Config, lo: dict, hi: dict, batches: tuple[int, int] = BASIS_BATCHES) -> dict:
    """`config`'s step read off the line through its two basis traces (cache entries, both traced, at `batches` with
    `BASIS_OPTIMIZER`): the tensor peak and FLOPs at its batch (a slope below zero, a trace's noise, taken as flat),
    with the basis optimizer's state swapped for the job's. The built network's size is the traces'."""
    b_lo, b_hi = batches
    t = (config.batch_size - b_lo) / (b_hi - b_lo)
    params = lo["params"]
    peak = lo["peak_bytes"] + t * max(0.0, hi["peak_bytes"] - lo["peak_bytes"])
    peak += state_bytes(config.optimizer, config.precision, params) - state_bytes(BASIS_OPTIMIZER, config.precision, params)
    flops = lo["flops"] + t * max(0.0, hi["flops"] - lo["flops"])
    return {"status": "traced", "params": params, "layers": lo["layers"], "input_dim": lo["input_dim"],
            "peak_bytes": max(peak, 1.0), "flops": max(flops, 0.0), "basis": list(batches)}


def _zoo():
    """The zoo's catalogue (`zoo.py`), imported when a job names an arch or logs a shape (it registers ~130 entries)."""
    from gpucast.tasks.learn import zoo

    return zoo


def _per_gpu_batch(batch: float, gpus: float | None) -> int:
    return max(1, math.ceil(batch / max(1.0, gpus or 1.0)))


def infer_archs(rows: pl.DataFrame) -> dict[int, object]:
    """By row position, a `zoo_match.Match` where the architecture comes from somewhere other than a name the zoo knows
    (a bare family name resolved to a member, or no `arch` and a logged shape that matches or ties); the other rows
    have none. Shapes are matched together (`zoo_match.shape_matches`: only the few that match become objects), rows of
    one unknown name and shape resolved once."""
    cols = [c.ARCH, c.MODEL_TYPE, c.PARAMS_MILLION, c.NUM_LAYERS, c.INPUT_DIM]
    present = rows.select([pl.col(n) if n in rows.columns else pl.lit(None).alias(n) for n in cols])
    from gpucast.tasks.learn import zoo_match

    # no arch: matched on their shapes (a job that names one has no model type here: not a shape to match). Each
    # shape is matched, not each distinct one: at 1M pending jobs 95% of the shapes are distinct, and finding the
    # first of each cost more (0.35-0.45 CPU-s) than matching the rest again (issue 52 item 5)
    shaped = present.select(pl.when(pl.col(c.ARCH).is_null()).then(pl.col(c.MODEL_TYPE).cast(pl.String)),
                            *(pl.col(n).cast(pl.Float64) for n in cols[2:]))
    memo: dict[int, object] = zoo_match.shape_matches(shaped.to_series(0), *(shaped.to_series(k).to_numpy()
                                                                             for k in (1, 2, 3)))
    zoo = _zoo()
    named = present.with_row_index("key").filter(pl.col(c.ARCH).is_not_null())
    unknown = [n for n in named[c.ARCH].unique().to_list() if zoo.canonical(n) is None]  # maybe a family name
    if unknown:  # each (name, shape) once, keyed by its first row
        named = named.filter(pl.col(c.ARCH).is_in(unknown)).with_columns(pl.col("key").first().over(cols).alias("first"))
        for key, arch, model_type, params, layers, dim, _ in named.filter(pl.col("key") == pl.col("first")).iter_rows():
            memo[key] = zoo_match.resolve_family(arch, model_type, params, layers, dim)
        for key, first in named.filter(pl.col("key") != pl.col("first")).select("key", "first").iter_rows():
            memo[key] = memo[first]
    return {key: match for key, match in memo.items() if match is not None}


def job_configs(rows: pl.DataFrame, inferred: dict[int, object] | None = None) -> list[Config | str | None]:
    """Per row: its `Config`, or the status that says why it has none (`UNKNOWN_ARCH`, `NO_BATCH`), or
    None when the job logs no `arch` and none is inferred. `inferred`: `infer_archs(rows)` (None: no inference)."""
    out: list[Config | str | None] = [None] * rows.height
    for i, plan in _plans(rows, inferred or {}).items():
        out[i] = plan
    return out


def _plans(rows: pl.DataFrame, inferred: dict[int, object]) -> dict[int, Config | str]:
    """`job_configs` of the rows that have one, by position (most jobs log no `arch` and none is inferred: not
    visited)."""
    if (c.ARCH not in rows.columns or rows[c.ARCH].null_count() == rows.height) and not any(
            m.arch for m in inferred.values()):
        return {}
    arch_col = rows[c.ARCH] if c.ARCH in rows.columns else pl.Series([None] * rows.height, dtype=pl.String)
    names = {n: _zoo().canonical(n) for n in arch_col.drop_nulls().unique().to_list()}
    cols = (c.ARCH, c.BATCH_SIZE, c.GPU_COUNT, c.INPUT_DIM, c.PRECISION, c.OPTIMIZER, c.REGULARIZATION)
    present = rows.select([pl.col(n) if n in rows.columns else pl.lit(None).alias(n) for n in cols])
    some = sorted(set(arch_col.is_not_null().arg_true().to_list()) | {i for i, m in inferred.items() if m.arch})
    out: dict[int, Config | str] = {}
    for i, (arch, batch, gpus, dim, precision, optimizer, regularization) in zip(some, present[some].iter_rows(), strict=True):
        match = inferred.get(i)
        name = match.arch if match is not None and match.arch else names.get(arch)
        if name is None:
            out[i] = UNKNOWN_ARCH
        elif batch is None:
            out[i] = NO_BATCH
        else:
            default = _zoo().ARCHITECTURES[name].default_input_dim  # one key for "224" and "not logged"
            out[i] = Config(name, _per_gpu_batch(batch, gpus), default if dim is None else int(dim),
                            precision or "FP32", optimizer, regularization)
    return out


def zoo_trace(config: Config) -> dict:
    """The default tracer (it runs in the child process): the zoo's trace of `config`, as a dict."""
    from gpucast.tasks.learn import zoo_trace as tracing  # torch, torchvision and transformers: on first use

    request = tracing.TraceRequest(arch=config.arch, batch_size=config.batch_size, input_dim=config.input_dim,
                                   precision=config.precision, optimizer=config.optimizer,
                                   regularization=config.regularization)
    t = tracing.trace(request)
    return {"params": t.params, "layers": t.layers, "input_dim": t.input_dim, "peak_bytes": t.peak_bytes,
            "flops": t.flops, "seconds": t.seconds}


PARENT_POLL_S = 0.2  # how often a trace's child looks for its parent


def _exit_now() -> None:
    os._exit(1)


def _child(tracer: Callable[[Config], dict], config: Config, conn, parent: int) -> None:
    watch_parent(parent, _exit_now, PARENT_POLL_S, "gpucast-trace-parent-watch")  # kill -9 of the parent included
    try:
        conn.send(("traced", tracer(config)))
    except BaseException as exc:  # noqa: BLE001  (any failure of a trace is recorded, with its reason)
        conn.send(("failed", f"{type(exc).__name__}: {exc}"[:REASON_MAX_LEN]))
    finally:
        conn.close()


def run_trace(config: Config, seconds: float, tracer: Callable[[Config], dict] = zoo_trace) -> dict:
    """One trace in a child process killed past `seconds` (its start included): a cache entry, with
    `status` "traced" (and the trace's numbers), "failed" (and `reason`) or "timed out" (and `bound_s`)."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    t0 = time.monotonic()
    try:
        proc = ctx.Process(target=_child, args=(tracer, config, send, os.getpid()), daemon=True,
                           name=f"trace {config.arch}")
        proc.start()
    except Exception as exc:  # noqa: BLE001  (e.g. inside a daemonic worker: no child processes there)
        return {"status": "failed", "reason": f"could not start the trace's process: {type(exc).__name__}: {exc}"}
    send.close()
    try:
        if receive.poll(seconds):
            status, value = receive.recv()
        else:
            status, value = "timed out", None
    except EOFError:  # the child died without a word (killed, out of memory)
        proc.join(5)
        status, value = "failed", f"the trace's process died (exit code {proc.exitcode})"
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        receive.close()
    entry = {"status": status, "wall_s": round(time.monotonic() - t0, 2)}
    if status == "traced":
        entry.update(value)
    elif status == "failed":
        entry["reason"] = value
    else:
        entry["bound_s"] = seconds
    return entry


def _torch_version() -> str | None:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def load_cache(path: Path | None) -> tuple[dict[str, dict], str | None]:
    """The cached entries by configuration key, and a warning when the file was there but unreadable
    (it is then started afresh: a bad cache costs traces, never the night)."""
    if path is None or not path.exists():
        return {}, None
    try:
        data = json.loads(path.read_text())
        if data.get("version") != CACHE_VERSION or not isinstance(data.get("entries"), dict):
            raise ValueError(f"not a version {CACHE_VERSION} trace cache")
        return data["entries"], None
    except (OSError, ValueError, AttributeError) as exc:
        return {}, f"trace cache {path} unreadable ({type(exc).__name__}: {exc}); starting a new one"


def save_cache(path: Path | None, entries: dict[str, dict]) -> str | None:
    """Write the cache atomically (a crash mid-write leaves the previous file); a warning when it cannot be
    written (the path a folder, a file where `models/` goes, a full or read-only disk), never an error."""
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps({"version": CACHE_VERSION, "entries": entries}, indent=1, sort_keys=True))
    except OSError as exc:  # (the temporary file is removed)
        return (f"trace cache {path} cannot be written ({type(exc).__name__}: {exc}); tonight's traces are used "
                "but not kept: move what is in the way, or free the disk")
    return None


def reusable(entry: dict, torch_version: str | None, trace_seconds: float) -> bool:
    """A cached entry stands: a trace always; a failure under the same torch version; a timeout unless
    the bound is now longer than the one it ran out of."""
    if entry.get("status") == "traced":
        return True
    if entry.get("status") == "failed":
        return entry.get("torch") == torch_version
    return entry.get("status") == "timed out" and trace_seconds <= entry.get("bound_s", 0.0)


def status_of(entry: dict, fresh: bool) -> str:
    """A cache entry as the `trace_status` words."""
    if entry["status"] == "traced":
        return TRACED if fresh else CACHED
    if entry["status"] == "failed":
        return f"failed: {entry.get('reason', 'unknown error')}"
    return f"timed out after {entry.get('bound_s', 0.0):g} s"


def _describe(config: Config, entry: dict) -> str:
    what = f"{config.arch} batch {config.batch_size} input {config.input_dim or 'default'} {config.precision} " \
           f"{config.optimizer or 'Adam'}"
    if entry["status"] == "traced":
        return (f"traced {what}: {entry['peak_bytes'] / 1e9:.2f} GB tensor peak, {entry['flops'] / 1e9:,.1f} GFLOP "
                f"per step ({entry['wall_s']:.1f} s)")
    return f"trace of {what}: {status_of(entry, True)}"


def resolve(configs: list[Config], cache: dict[str, dict], bounds: Bounds,
            tracer: Callable[[Config], dict] = zoo_trace, progress: Callable[[str], None] | None = None,
            cache_path: Path | None = None, clock: Callable[[], float] = time.monotonic
            ) -> dict[str, str | tuple[dict, bool]]:
    """Per configuration key: (its entry, traced tonight?), or `bounds.spent_status`. A configuration traced directly
    on an earlier night keeps its entry; any other is read off its two basis traces (`affine`), each from the cache or
    traced now, once whichever configurations share it, while the budget lasts (`clock`: seconds, for the budget).
    A basis trace that failed or timed out is the configuration's status. New traces go into `cache` (and its file,
    after each trace; a file that cannot be written is reported once)."""
    torch_version, spent, out, basis, unsaved = _torch_version(), 0.0, {}, {}, None
    pairs: dict[tuple, tuple[Config, Config]] = {}  # the basis of each (arch, input size, precision), made once

    def entry_of(config: Config) -> str | tuple[dict, bool]:
        nonlocal spent, unsaved
        if config.key in basis:
            return basis[config.key]
        entry = cache.get(config.key)
        if entry is not None and reusable(entry, torch_version, bounds.trace_seconds):
            basis[config.key] = entry, False
            return basis[config.key]
        left = bounds.night_seconds - spent
        if left <= 0:
            return bounds.spent_status  # (not kept: a later configuration finds the budget spent too)
        t0 = clock()
        entry = {**run_trace(config, min(bounds.trace_seconds, left), tracer), "torch": torch_version,
                 "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        spent += clock() - t0
        cache[config.key] = entry
        warning = save_cache(cache_path, cache)
        if progress:
            progress(_describe(config, entry))
            if warning and not unsaved:
                progress(warning)
        unsaved = unsaved or warning
        basis[config.key] = entry, True
        return basis[config.key]

    for config in dict.fromkeys(configs):  # each configuration once, in order of first appearance
        direct = cache.get(config.key)
        if config.key in basis:  # a basis trace itself (of tonight, or cached)
            out[config.key] = basis[config.key]
            continue
        if direct is not None and direct.get("status") == "traced":
            out[config.key] = (direct, False)
            continue
        shared = (config.arch, config.input_dim, config.precision)
        ends = [entry_of(b) for b in pairs.get(shared) or pairs.setdefault(shared, config.basis)]
        failed = next((e for e in ends if isinstance(e, tuple) and e[0]["status"] != "traced"), None)
        if failed is not None:
            out[config.key] = failed
        elif any(isinstance(e, str) for e in ends):
            out[config.key] = bounds.spent_status
        else:
            (lo, lo_fresh), (hi, hi_fresh) = ends
            out[config.key] = (affine(config, lo, hi), lo_fresh or hi_fresh)
    return out


def reported_gb(peak_bytes: float) -> float:
    """What a GPU reports (GB) for a step whose traced tensor peak is `peak_bytes`."""
    return peak_bytes / priors.GB * RESERVED_OVER_TENSOR + TRACED_CONTEXT_GB


def _row_values(plan: Config | str | None, result: str | tuple[dict, bool] | None, gpus: float | None) -> tuple:
    """One row of the trace's own columns (`TRACE_COLUMNS` up to `TRACE_STATUS`)."""
    if plan is None or isinstance(plan, str):
        return None, None, None, None, None, plan
    if isinstance(result, str):  # the budget's words (NIGHT_SPENT, SCORE_SPENT)
        return None, None, None, None, None, result
    entry, fresh = result
    if entry["status"] != "traced":
        return None, None, None, None, None, status_of(entry, fresh)
    return (reported_gb(entry["peak_bytes"]),
            entry["flops"] / 1e9 * max(1.0, gpus or 1.0),  # the trace ran one GPU's share of the batch
            entry["params"] / 1e6, int(entry["layers"]), int(entry["input_dim"]), status_of(entry, fresh))


def trace_jobs(rows: pl.DataFrame, cache_path: Path | None, bounds: Bounds = Bounds(),
               progress: Callable[[str], None] | None = None,
               tracer: Callable[[Config], dict] = zoo_trace, infer: bool | list[bool] = True) -> pl.DataFrame:
    """`TRACE_COLUMNS` for every row of `rows` (contract columns), in order; see the module doc.
    `infer`: recognise the architecture of jobs that log none from their shape (`zoo_match.match_shape`), and resolve
    bare family names; for every row, or per row (a list)."""
    wanted = None if isinstance(infer, bool) else infer  # None: every row's, or none (`infer` False)
    inferred = {} if infer is False or (wanted is not None and not any(wanted)) else infer_archs(rows)
    if wanted is not None:
        inferred = {i: m for i, m in inferred.items() if wanted[i]}
    plans = _plans(rows, inferred)
    configs = [p for p in plans.values() if isinstance(p, Config)]
    results: dict = {}
    if configs:
        cache, warning = load_cache(cache_path)
        if warning and progress:
            progress(warning)
        results = resolve(configs, cache, bounds, tracer, progress, cache_path)
    # only the rows with a plan or an inference are visited: at 1M pending jobs ~3% (issue 52 item 5)
    at = sorted(plans)
    gpus = rows[c.GPU_COUNT].gather(at).to_list() if c.GPU_COUNT in rows.columns else [None] * len(at)
    own = list(TRACE_SCHEMA)[:list(TRACE_SCHEMA).index(TRACE_STATUS) + 1]
    by_config = {config: results.get(config.key) for config in dict.fromkeys(configs)}  # each key made once, not a row
    values = [_row_values(plan, by_config[plan], g) if isinstance(plan, Config) else (None,) * (len(own) - 1) + (plan,)
              for plan, g in zip((plans[i] for i in at), gpus, strict=True)]
    columns = {name: (at, [v[k] for v in values]) for k, name in enumerate(own)}
    where = sorted(inferred)
    for name, of in ((ARCH_INFERRED, "arch"), (ARCH_MATCH_DISTANCE, "distance"), (ARCH_INFERENCE, "reason")):
        columns[name] = where, [getattr(inferred[i], of) for i in where]
    return pl.DataFrame([_scattered(name, rows.height, *columns[name], t) for name, t in TRACE_SCHEMA.items()])


def _scattered(name: str, height: int, at: list[int], values: list, dtype: pl.DataType) -> pl.Series:
    """A column of `height` nulls but `values` at the positions `at`."""
    column = pl.repeat(None, height, dtype=dtype, eager=True).alias(name)
    return column.scatter(at, pl.Series(values, dtype=dtype)) if at else column


def with_inference(rows: pl.DataFrame, reasons: list[str | None]) -> tuple[pl.Series, pl.Series, list[str | None]]:
    """`ARCH_INFERRED` and `ARCH_MATCH_DISTANCE` of `rows`, and `reasons` (the forecasts' `ood_reason`) led by
    what the architecture inference said (an inferred arch, a family's member, or a tie between two)."""
    def column(name: str) -> pl.Series:
        return (rows[name] if name in rows.columns else pl.Series([None] * rows.height)).cast(TRACE_SCHEMA[name]).alias(name)

    words = column(ARCH_INFERENCE)
    merged = list(reasons)  # only the few rows with words are visited (1M a batch in `gpucast score`)
    for i, w in zip(words.is_not_null().arg_true().to_list(), words.drop_nulls().to_list(), strict=True):
        merged[i] = f"{w}; {merged[i]}" if merged[i] else w
    return column(ARCH_INFERRED), column(ARCH_MATCH_DISTANCE), merged


def empty_columns(height: int) -> pl.DataFrame:
    """`TRACE_COLUMNS`, all null: rows nobody traced (a job without `arch`, or a frame built without tracing)."""
    return pl.DataFrame({n: pl.Series([None] * height, dtype=t) for n, t in TRACE_SCHEMA.items()})


# The features a trace fills when the log lacks them: contract column -> trace column.
FILLED_FEATURES = {c.PARAMS_MILLION: TRACED_PARAMS_MILLION, c.NUM_LAYERS: TRACED_NUM_LAYERS,
                   c.INPUT_DIM: TRACED_INPUT_DIM}


def fill_features(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` (with `TRACE_COLUMNS`) whose missing parameter count, depth and input size come from the trace."""
    def dtype(name: str, traced: str) -> pl.DataType:
        return TRACE_SCHEMA[traced] if rows.schema[name] == pl.Null else rows.schema[name]

    return rows.with_columns(pl.coalesce(pl.col(name).cast(dtype(name, traced)), pl.col(traced).cast(dtype(name, traced)))
                             .alias(name) for name, traced in FILLED_FEATURES.items() if name in rows.columns)


ANALYTIC_MEM_GB, ANALYTIC_GFLOP_PER_ITER = "analytic_mem_gb", "analytic_gflop_per_iter"


def use_traced_prior(df: pl.DataFrame) -> pl.DataFrame:
    """`df` (priors and `TRACE_COLUMNS`) with the analytic memory and FLOPs priors kept as `analytic_mem_gb`
    and `analytic_gflop_per_iter`, and `prior_mem_gb`, `prior_gflop_per_iter` (and through it
    `prior_runtime_hours`) the traced values where there is a trace."""
    traced = pl.col(TRACED_MEM_GB).is_not_null()
    iterations = pl.col(c.ITERATIONS).cast(pl.Float64).fill_null(1.0) if c.ITERATIONS in df.columns else pl.lit(1.0)
    runtime = iterations * pl.col(TRACED_GFLOP_PER_ITER) / pl.col("prior_gflops") / 3600.0
    df = df.drop(ANALYTIC_MEM_GB, ANALYTIC_GFLOP_PER_ITER, strict=False)  # (re)built after the priors
    return df.with_columns(pl.col("prior_mem_gb").alias(ANALYTIC_MEM_GB),
                           pl.col("prior_gflop_per_iter").alias(ANALYTIC_GFLOP_PER_ITER),
                           pl.coalesce(TRACED_MEM_GB, "prior_mem_gb").alias("prior_mem_gb"),
                           pl.coalesce(TRACED_GFLOP_PER_ITER, "prior_gflop_per_iter").alias("prior_gflop_per_iter"),
                           pl.when(traced).then(runtime).otherwise(pl.col("prior_runtime_hours")).alias("prior_runtime_hours"))


def summary(rows: pl.DataFrame, trace: pl.DataFrame) -> TraceSummary:
    """What the traced prior did for these jobs: jobs per `trace_status`, and the names the zoo does not
    know with their job counts (kept as logged; those jobs get the analytic prior)."""
    both = pl.concat([rows.select(pl.col(c.ARCH) if c.ARCH in rows.columns else pl.lit(None, pl.String).alias(c.ARCH)),
                      trace.select(TRACE_STATUS)], how="horizontal").filter(pl.col(TRACE_STATUS).is_not_null())
    statuses = both.group_by(TRACE_STATUS).len().sort(["len", TRACE_STATUS], descending=[True, False])
    unknown = (both.filter(pl.col(TRACE_STATUS) == UNKNOWN_ARCH).group_by(c.ARCH).len()
               .sort(["len", c.ARCH], descending=[True, False]))
    return TraceSummary(trace_statuses=dict(statuses.iter_rows()), unknown_archs=dict(unknown.iter_rows()))
