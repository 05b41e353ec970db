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

from gpucast.tasks.learn import zoo  # noqa: E402

DEFAULT_SEED = 20261125
DEFAULT_OUT = Path(__file__).resolve().parent / "reference_archs.csv"
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
)

DRAW_COLUMNS = ("iterations", "precision", "optimizer", "learning_rate", "regularization", "data_augmentation")
COLUMNS = ("job_id", "arch", "arch_family", *measured.FEATURE_COLUMNS, *measured.TARGET_COLUMNS,
           "tensor_peak_gb", "cuda_context_gb", "measure_seconds")


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
        kind_batches = batches or (IMAGE_BATCHES if zoo.ARCHITECTURES[arch].kind == "image" else TEXT_BATCHES)
        for b, batch_size in enumerate(kind_batches):
            for slot in (0, 1):
                rng = np.random.default_rng([seed, REFERENCE_ARCHS.index(arch), b, slot])
                configs.append(draw_config(len(configs), arch, batch_size, rng, mixed=slot == 1))
    return configs


@dataclass(frozen=True)
class Outcome:
    """A traced row, or why it was not traced."""

    config: RefConfig
    trace: zoo.Trace | None
    error: str | None = None


def trace_config(config: RefConfig) -> Outcome:
    """Trace one row; an exception is kept as the reason (counted and reported, never fatal)."""
    request = zoo.TraceRequest(config.arch, config.batch_size, None, config.precision, config.optimizer,
                               config.regularization)
    try:
        return Outcome(config, zoo.trace(request))
    except Exception as exc:  # an op the meta / fake-tensor path cannot run: recorded with its reason
        return Outcome(config, None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")


def csv_row(config: RefConfig, trace: zoo.Trace) -> dict[str, object]:
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
    generate(archs, batches, args.seed, args.out, args.workers, args.fresh, log=lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
