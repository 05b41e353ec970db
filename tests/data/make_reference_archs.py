#!/usr/bin/env python
"""Reference set of real architectures: named torchvision / transformers networks, traced training steps.

Every architecture in ``REFERENCE_ARCHS`` is built by gpucast's model zoo (``tasks/learn/zoo.py``)
from code alone, at its published size and input size, and one training step is traced at each of
its batch sizes, in FP32 and in mixed precision (FP16 or BF16, a seeded draw), with the tracing core
of the measured set (``make_measured_jobs.py``: MemTracker peak and FlopCounterMode FLOPs under fake
tensors). The optimizer (Adam / AdamW / SGD), iterations, learning rate, regularization (weight
decay), data augmentation and the CUDA-context draw are seeded per row, the way ``measured_jobs.csv``
draws them, so ``peak_gpu_mem_gb`` = tensor peak + a uniform 0.3-1.0 GB context.

Each row draws from ``numpy.random.default_rng([seed, arch index, batch index, precision slot])``, so
the CSV does not depend on ``--workers`` or on the order traces finish (except ``measure_seconds``).
Finished rows are appended to ``<out>.partial.csv`` as they come; a rerun with the same arguments
skips them and traces failed ones again (``--fresh`` starts over), and the CSV is written, in configuration order, at the end.

Usage (from the repository root)::

    .venv/bin/python tests/data/make_reference_archs.py            # the shipped CSV
    .venv/bin/python tests/data/make_reference_archs.py --quick    # smoke run, to a temp file
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import multiprocessing
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_measured_jobs as measured  # noqa: E402  (the measured set's draws and units: one definition)

from gpucast.tasks.learn import zoo, zoo_trace  # noqa: E402

DEFAULT_SEED = 20261125
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "tasks" / "learn" / "reference_archs.csv"  # shipped in the wheel
QUICK_OUT = Path(tempfile.gettempdir()) / "reference_archs_quick.csv"
DEFAULT_WORKERS = 2

IMAGE_BATCHES = (16, 64, 256)
TEXT_BATCHES = (2, 8, 32)
QUICK_ARCHS = ("resnet18", "mobilenet_v3_small", "distilbert-base-uncased")
QUICK_BATCHES = (8,)
MIXED_PRECISIONS = {"FP16": 0.5, "BF16": 0.5}
OPTIMIZER_SHARES = {"Adam": 0.35, "AdamW": 0.35, "SGD": 0.30}

REFERENCE_ARCHS = (
    # image: torchvision, at their published input sizes
    "alexnet", "vgg11", "vgg16", "vgg19", "vgg16_bn",
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "resnext50_32x4d", "resnext101_32x8d", "wide_resnet50_2", "wide_resnet101_2",
    "densenet121", "densenet169", "densenet201", "inception_v3", "googlenet",
    "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "mnasnet1_0",
    "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_b4", "efficientnet_v2_s",
    "shufflenet_v2_x1_0", "squeezenet1_1", "regnet_y_400mf", "regnet_y_3_2gf", "regnet_x_8gf", "regnet_y_16gf",
    "convnext_tiny", "convnext_base", "vit_b_16", "vit_b_32", "vit_l_16", "swin_t", "swin_b", "swin_v2_t", "maxvit_t",
    # text: transformers configurations, a language-model head on every token
    "bert-base-uncased", "bert-large-uncased", "roberta-base", "roberta-large", "distilbert-base-uncased",
    "albert-base-v2", "albert-large-v2", "xlnet-base-cased", "xlnet-large-cased",
    "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "opt-125m", "opt-350m", "t5-small", "t5-base", "bart-base",
    # issue 37: timm's image nets and more of the zoo, traced at two batch sizes (the derived grid,
    # `derived_rows`, needs two per precision)
    "legacy_xception", "xception41", "xception65", "xception71", "inception_v4", "inception_resnet_v2",
    "efficientnet_lite0", "efficientnetv2_rw_s", "convnext_atto", "convnext_nano", "convnext_xlarge", "convnextv2_tiny",
    "convnextv2_base", "regnety_040", "regnety_064", "regnety_120", "deit_tiny_patch16_224", "deit_small_patch16_224",
    "seresnet50", "resnest50d", "cspdarknet53", "ghostnet_100", "mixnet_s", "dpn92", "mobilevit_s",
)
FIRST_TWO_BATCH_ARCH = "legacy_xception"  # this one and those after it: two batch sizes (NEW_*_BATCHES)
NEW_IMAGE_BATCHES = (16, 64)
NEW_TEXT_BATCHES = (2, 8)

DRAW_COLUMNS = ("iterations", "precision", "optimizer", "learning_rate", "regularization", "data_augmentation")
COLUMNS = ("job_id", "arch", "arch_family", *measured.FEATURE_COLUMNS, *measured.TARGET_COLUMNS,
           "tensor_peak_gb", "cuda_context_gb", "measure_seconds", "source")
TRACED_SOURCE = "traced"  # `source` of a row traced here; a derived row names the rows it was fitted on

# The derived grid (issue 37: thousands of training steps; a trace costs 2-20 s here, so 3,000 would take hours):
# per architecture and precision class (FP32 / mixed: FP16 and BF16 hold the same bytes), the traced rows'
# tensor peak is fitted as  a + s * batch + 4 bytes * params * k(optimizer)  (k: state tensors per parameter,
# FP32 under autocast too), then evaluated on every grid batch and precision with a seeded optimizer; the FLOPs
# per sample are the traces'. Image CNNs also at GRID_INPUT_SCALES of their input side (activations and FLOPs
# x scale^2). `--check-grid` measures the fit on traced rows it did not use (docs/models.md).
GRID_IMAGE_BATCHES = (8, 16, 32, 64, 128, 256)
GRID_TEXT_BATCHES = (1, 2, 4, 8, 16, 32)
GRID_PRECISIONS = ("FP32", "FP16", "BF16")
GRID_INPUT_SCALES = (1.0, 0.75)  # image CNNs only: 224 -> 168, 299 -> 224, ...
GRID_OPTIMIZER_SHARES = {"Adam": 0.3, "AdamW": 0.3, "SGD": 0.25, "RMSprop": 0.1, "Adagrad": 0.05}
STATE_TENSORS = {"Adam": 2, "AdamW": 2, "SGD": 1, "RMSprop": 1, "Adagrad": 1}
FP32_BYTES = 4


@dataclass(frozen=True)
class RefConfig:
    """One row of the set: an architecture, a batch size, FP32 or mixed, and the seeded draws."""

    index: int  # position in configuration order (the job id)
    arch: str
    batch_size: int
    precision: str
    optimizer: str
    iterations: float
    learning_rate: float
    regularization: bool
    data_augmentation: bool
    cuda_context_gb: float

    @property
    def key(self) -> str:
        return f"{self.arch}|{self.batch_size}|{self.precision}"


def draw_config(index: int, arch: str, batch_size: int, rng: np.random.Generator, mixed: bool) -> RefConfig:
    """The seeded draws of one row; always the same draws in the same order."""
    amp = measured._choice(rng, MIXED_PRECISIONS)
    optimizer = measured._choice(rng, OPTIMIZER_SHARES)
    iterations = float(round(measured._log_uniform(rng, *measured.ITERATIONS_RANGE)))
    learning_rate = float(f"{measured._log_uniform(rng, *measured.LEARNING_RATE_RANGE):.4g}")
    regularization = bool(rng.random() < measured.REGULARIZATION_SHARE)
    data_augmentation = bool(rng.random() < measured.DATA_AUGMENTATION_SHARE)
    cuda_context_gb = round(float(rng.uniform(*measured.CUDA_CONTEXT_GB)), 4)
    return RefConfig(index, arch, batch_size, amp if mixed else "FP32", optimizer, iterations, learning_rate,
                     regularization, data_augmentation, cuda_context_gb)


def configurations(archs: tuple[str, ...], seed: int, batches: tuple[int, ...] | None = None) -> list[RefConfig]:
    """Every (arch, batch, FP32 / mixed) row in order, with its draws."""
    configs: list[RefConfig] = []
    for arch in archs:
        image = zoo.ARCHITECTURES[arch].kind == "image"
        if REFERENCE_ARCHS.index(arch) >= REFERENCE_ARCHS.index(FIRST_TWO_BATCH_ARCH):
            kind_batches = batches or (NEW_IMAGE_BATCHES if image else NEW_TEXT_BATCHES)
        else:
            kind_batches = batches or (IMAGE_BATCHES if image else TEXT_BATCHES)
        for b, batch_size in enumerate(kind_batches):
            for slot in (0, 1):
                rng = np.random.default_rng([seed, REFERENCE_ARCHS.index(arch), b, slot])
                configs.append(draw_config(len(configs), arch, batch_size, rng, mixed=slot == 1))
    return configs


@dataclass(frozen=True)
class Outcome:
    """A traced row, or why it was not traced."""

    config: RefConfig
    trace: zoo_trace.Trace | None
    error: str | None = None


def trace_config(config: RefConfig) -> Outcome:
    """Trace one row; an exception is kept as the reason (counted and reported, never fatal)."""
    request = zoo_trace.TraceRequest(config.arch, config.batch_size, None, config.precision, config.optimizer,
                               config.regularization)
    try:
        return Outcome(config, zoo_trace.trace(request))
    except Exception as exc:  # an op the meta / fake-tensor path cannot run: recorded with its reason
        return Outcome(config, None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")


def csv_row(config: RefConfig, trace: zoo_trace.Trace) -> dict[str, object]:
    """The CSV row of a traced configuration (contract feature names and units)."""
    arch = zoo.ARCHITECTURES[config.arch]
    tensor_peak_gb = trace.peak_bytes / measured.GB
    return {
        "job_id": f"ref-{config.index:05d}", "arch": arch.name, "arch_family": arch.family,
        "model_type": arch.model_type, "params_million": f"{trace.params / 1e6:.6f}", "batch_size": config.batch_size,
        "input_dim": trace.input_dim, "num_layers": trace.layers, "iterations": f"{config.iterations:.1f}",
        "precision": config.precision, "optimizer": config.optimizer, "learning_rate": f"{config.learning_rate:.4g}",
        "regularization": str(config.regularization).lower(), "data_augmentation": str(config.data_augmentation).lower(),
        "peak_gpu_mem_gb": f"{tensor_peak_gb + config.cuda_context_gb:.6f}",
        "train_gflop_per_iter": f"{trace.flops / measured.GFLOP:.6f}", "tensor_peak_gb": f"{tensor_peak_gb:.6f}",
        "cuda_context_gb": f"{config.cuda_context_gb:.4f}", "measure_seconds": f"{trace.seconds:.3f}",
        "source": TRACED_SOURCE,
    }


PARTIAL_COLUMNS = (*COLUMNS, "status", "reason")  # status: kept | skipped (over the peak bound) | failed


def partial_record(outcome: Outcome) -> dict[str, object]:
    """What ``<out>.partial.csv`` keeps of a finished row."""
    config, trace = outcome.config, outcome.trace
    if trace is None:
        return {"job_id": f"ref-{config.index:05d}", "arch": config.arch, "batch_size": config.batch_size,
                "precision": config.precision, "status": "failed", "reason": outcome.error}
    row = csv_row(config, trace)
    if trace.peak_bytes / measured.GB > measured.MAX_TENSOR_PEAK_GB:
        return {**row, "status": "skipped", "reason": f"tensor peak over {measured.MAX_TENSOR_PEAK_GB:.0f} GB"}
    return {**row, "status": "kept", "reason": ""}


def read_partial(path: Path, configs: list[RefConfig]) -> dict[str, dict[str, str]]:
    """Rows finished by an earlier run, by job id (a later line wins); they must match today's configurations."""
    if not path.exists():
        return {}
    by_id = {f"ref-{c.index:05d}": c for c in configs}
    with path.open(newline="") as f:
        done = {r["job_id"]: r for r in csv.DictReader(f)}
    for job_id, record in done.items():
        config = by_id.get(job_id)
        if config is None or (record["arch"], int(record["batch_size"]), record["precision"]) != (
                config.arch, config.batch_size, config.precision):
            raise SystemExit(f"{path} was written with other settings ({job_id}: {record['arch']}); rerun with --fresh")
    return done


def init_worker() -> None:
    """Process set-up: quiet warnings (autocast's notes about CPU dtypes), one thread."""
    warnings.filterwarnings("ignore", category=UserWarning)
    torch.set_num_threads(1)


def run_traces(todo: list[RefConfig], executor: Executor | None, on_done: Callable[[Outcome], None]) -> None:
    """Trace ``todo`` on ``executor`` (or here), calling ``on_done`` as each finishes."""
    if executor is None:
        for config in todo:
            on_done(trace_config(config))
        return
    for future in as_completed([executor.submit(trace_config, config) for config in todo]):
        on_done(future.result())


def trace_all(configs: list[RefConfig], partial: Path, workers: int, log: Callable[[str], None]) -> dict[str, dict[str, str]]:
    """Trace every configuration not in ``partial`` yet, appending each finished row to it."""
    done = read_partial(partial, configs)
    todo = [c for c in configs if done.get(f"ref-{c.index:05d}", {}).get("status") not in ("kept", "skipped")]
    log(f"{len(configs)} configurations, {len(configs) - len(todo)} already in {partial.name}, {len(todo)} to trace "
        f"(failed ones again) on {workers} worker(s)")
    start = time.perf_counter()
    finished: list[object] = []
    new_file = not partial.exists()
    with partial.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=PARTIAL_COLUMNS, lineterminator="\n")
        if new_file:
            writer.writeheader()

        def on_done(outcome: Outcome) -> None:
            record = partial_record(outcome)
            writer.writerow(record)
            f.flush()
            done[str(record["job_id"])] = {k: str(v) for k, v in record.items()}
            finished.append(record["job_id"])
            c = outcome.config
            what = f"{record['tensor_peak_gb']} GB, {record['measure_seconds']} s" if outcome.trace else record["reason"]
            log(f"[{len(finished)}/{len(todo)}] {c.arch} batch {c.batch_size} {c.precision} {c.optimizer}: "
                f"{record['status']} ({what}); {time.perf_counter() - start:.0f} s")

        with _executor(workers) as executor:
            run_traces(todo, executor, on_done)
    return done


def _executor(workers: int) -> contextlib.AbstractContextManager[Executor | None]:
    """A pool of ``workers`` spawned processes, or none (traces run here) for one worker."""
    if workers == 1:
        init_worker()
        return contextlib.nullcontext(None)
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=init_worker)


def write_csv(done: dict[str, dict[str, str]], configs: list[RefConfig], out: Path) -> dict[str, int]:
    """The kept rows in configuration order; returns the count of each status."""
    tally = {"kept": 0, "skipped": 0, "failed": 0}
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        for config in configs:
            record = done[f"ref-{config.index:05d}"]
            tally[record["status"]] += 1
            if record["status"] == "kept":
                writer.writerow(record)
    return tally


def _precision_class(precision: str) -> str:
    return "FP32" if precision == "FP32" else "mixed"


def fit_step(rows: list[dict[str, str]]) -> tuple[float, float] | None:
    """(a, s) of  tensor_gb = a + s * batch + 4 B * params * k(optimizer) / 1e9  over traced rows of one
    architecture and precision class (least squares); None under two distinct batch sizes."""
    if len({r["batch_size"] for r in rows}) < 2:
        return None
    batch = np.array([float(r["batch_size"]) for r in rows])
    state = np.array([FP32_BYTES * float(r["params_million"]) * 1e6 * STATE_TENSORS.get(r["optimizer"], 2) / measured.GB
                      for r in rows])
    y = np.array([float(r["tensor_peak_gb"]) for r in rows]) - state
    s, a = np.polyfit(batch, y, 1)
    return float(a), max(float(s), 0.0)


def derived_rows(traced_rows: list[dict[str, str]], seed: int, first_index: int) -> list[dict[str, object]]:
    """The derived grid (see `GRID_*`) from the traced rows, in a fixed order, each row's draws seeded."""
    out: list[dict[str, object]] = []
    by_arch: dict[str, list[dict[str, str]]] = {}
    for r in traced_rows:
        by_arch.setdefault(r["arch"], []).append(r)
    for a_index, arch_name in enumerate(sorted(by_arch)):
        rows, arch = by_arch[arch_name], zoo.ARCHITECTURES[arch_name]
        fits = {cls: fit_step([r for r in rows if _precision_class(r["precision"]) == cls]) for cls in ("FP32", "mixed")}
        anchors = {cls: ",".join(r["job_id"] for r in rows if _precision_class(r["precision"]) == cls) for cls in fits}
        params, layers, dim = float(rows[0]["params_million"]), int(rows[0]["num_layers"]), int(rows[0]["input_dim"])
        gflop_per_sample = np.median([float(r["train_gflop_per_iter"]) / float(r["batch_size"]) for r in rows])
        scales = GRID_INPUT_SCALES if arch.kind == "image" and arch.model_type != "Transformer" else (1.0,)
        batches = GRID_IMAGE_BATCHES if arch.kind == "image" else GRID_TEXT_BATCHES
        for s_index, scale in enumerate(scales):
            for b_index, batch in enumerate(batches):
                for p_index, precision in enumerate(GRID_PRECISIONS):
                    fit = fits[_precision_class(precision)]
                    if fit is None:
                        continue
                    rng = np.random.default_rng([seed, 7, a_index, s_index, b_index, p_index])
                    draw = draw_config(0, arch_name, batch, rng, mixed=False)
                    optimizer = measured._choice(rng, GRID_OPTIMIZER_SHARES)
                    state = FP32_BYTES * params * 1e6 * STATE_TENSORS[optimizer] / measured.GB
                    tensor = fit[0] + state + fit[1] * batch * scale ** 2
                    if tensor > measured.MAX_TENSOR_PEAK_GB or tensor <= 0:
                        continue
                    out.append({
                        "job_id": f"ref-{first_index + len(out):05d}", "arch": arch_name, "arch_family": arch.family,
                        "model_type": arch.model_type, "params_million": f"{params:.6f}", "batch_size": batch,
                        "input_dim": round(dim * scale), "num_layers": layers, "iterations": f"{draw.iterations:.1f}",
                        "precision": precision, "optimizer": optimizer, "learning_rate": f"{draw.learning_rate:.4g}",
                        "regularization": str(draw.regularization).lower(),
                        "data_augmentation": str(draw.data_augmentation).lower(),
                        "peak_gpu_mem_gb": f"{tensor + draw.cuda_context_gb:.6f}",
                        "train_gflop_per_iter": f"{gflop_per_sample * batch * scale ** 2:.6f}",
                        "tensor_peak_gb": f"{tensor:.6f}", "cuda_context_gb": f"{draw.cuda_context_gb:.4f}",
                        "measure_seconds": "0.000", "source": f"derived from {anchors[_precision_class(precision)]}",
                    })
    return out


def check_grid(traced_rows: list[dict[str, str]], log: Callable[[str], None] = print) -> dict[str, float]:
    """The grid's fit on traced rows it did not see: per architecture and precision class with three batch
    sizes, fit on the two smallest and forecast the largest; MAPE and worst of the tensor peak."""
    errors = []
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in traced_rows:
        groups.setdefault((r["arch"], _precision_class(r["precision"])), []).append(r)
    for rows in groups.values():
        batches = sorted({int(r["batch_size"]) for r in rows})
        if len(batches) < 3:
            continue
        fit = fit_step([r for r in rows if int(r["batch_size"]) < batches[-1]])
        for r in (r for r in rows if int(r["batch_size"]) == batches[-1]):
            state = FP32_BYTES * float(r["params_million"]) * 1e6 * STATE_TENSORS[r["optimizer"]] / measured.GB
            errors.append(abs(fit[0] + state + fit[1] * batches[-1] - float(r["tensor_peak_gb"])) / float(r["tensor_peak_gb"]))
    out = {"n": len(errors), "mape": 100 * float(np.mean(errors)), "p90": 100 * float(np.quantile(errors, 0.9)),
           "worst": 100 * float(np.max(errors))}
    log(f"grid fit on {out['n']} held-out traced rows (largest batch from the two smaller): tensor-peak MAPE "
        f"{out['mape']:.1f}%, 90th percentile {out['p90']:.1f}%, worst {out['worst']:.1f}%")
    return out


def add_grid(out: Path, seed: int, log: Callable[[str], None] = print) -> int:
    """Append the derived grid to the traced rows of ``out`` (rewritten: traced rows first, then derived)."""
    with out.open(newline="") as f:
        traced_rows = [r for r in csv.DictReader(f) if (r.get("source") or TRACED_SOURCE) == TRACED_SOURCE]
    for r in traced_rows:
        r["source"] = TRACED_SOURCE
    check_grid(traced_rows, log)
    first = max(int(r["job_id"].split("-")[1]) for r in traced_rows) + 1
    grid = derived_rows(traced_rows, seed, first)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(traced_rows)
        writer.writerows(grid)
    log(f"{out}: {len(traced_rows)} traced rows + {len(grid)} derived = {len(traced_rows) + len(grid)}")
    return len(grid)


def generate(archs: tuple[str, ...], batches: tuple[int, ...] | None, seed: int, out: Path, workers: int,
             fresh: bool, log: Callable[[str], None] = print) -> dict[str, int]:
    """Trace every configuration (resuming from ``<out>.partial.csv``) and write ``out``."""
    log(f"torch {torch.__version__}, seed {seed}, {len(archs)} architectures -> {out}")
    start = time.perf_counter()
    configs = configurations(archs, seed, batches)
    partial = out.with_name(out.stem + ".partial.csv")
    if fresh:
        partial.unlink(missing_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = trace_all(configs, partial, workers, log)
    tally = write_csv(done, configs, out)
    failed = [r for r in done.values() if r["status"] == "failed"]
    for record in failed:
        log(f"  failed: {record['arch']} batch {record['batch_size']} {record['precision']}: {record['reason']}")
    log(f"wrote {tally['kept']} rows to {out} ({tally['skipped']} skipped over {measured.MAX_TENSOR_PEAK_GB:.0f} GB, "
        f"{tally['failed']} failed) in {time.perf_counter() - start:.0f} s")
    return tally


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    parser.add_argument("--out", type=Path, default=None, help=f"output CSV (default {DEFAULT_OUT}; with --quick {QUICK_OUT})")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {', '.join(QUICK_ARCHS)} at batch {QUICK_BATCHES[0]} (about a minute)")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                        help=f"processes tracing in parallel (default {DEFAULT_WORKERS}); the CSV does not depend on it")
    parser.add_argument("--fresh", action="store_true", help="start over instead of resuming from <out>.partial.csv")
    parser.add_argument("--no-grid", action="store_true", help="traced rows only (no derived grid)")
    parser.add_argument("--grid-only", action="store_true", help="only (re)derive the grid from <out>'s traced rows")
    args = parser.parse_args(argv)
    if args.out is None:  # a smoke run never overwrites the shipped CSV unless told to
        args.out = QUICK_OUT if args.quick else DEFAULT_OUT
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    unknown = [a for a in REFERENCE_ARCHS if a not in zoo.ARCHITECTURES]
    if unknown:
        raise SystemExit(f"not in the zoo: {', '.join(unknown)}")
    archs, batches = (QUICK_ARCHS, QUICK_BATCHES) if args.quick else (REFERENCE_ARCHS, None)
    log = lambda line: print(line, flush=True)  # noqa: E731
    if not args.grid_only:
        generate(archs, batches, args.seed, args.out, args.workers, args.fresh, log=log)
    if not args.no_grid:
        add_grid(args.out, args.seed, log=log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
