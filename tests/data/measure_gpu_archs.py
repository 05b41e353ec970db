#!/usr/bin/env python3
"""Real training-step memory of reference architectures on a CUDA GPU, beside the zoo's traced peak.

For each (architecture, batch size, precision) in ``RUNS`` this builds the network of gpucast's model
zoo (``tasks/learn/zoo_trace.py``, loaded by file path with the catalogue ``zoo.py`` beside it: the GPU
machine needs only torch, torchvision and transformers) on the GPU, runs three real training steps (forward and loss under
``torch.autocast("cuda")`` for FP16/BF16, backward, ``optimizer.step()``, ``zero_grad``) and
records, for the third step (peaks reset before it):

* ``real_allocated_gb``: ``torch.cuda.max_memory_allocated`` (tensor memory, comparable to the trace);
* ``real_reserved_gb``: ``torch.cuda.max_memory_reserved`` (the caching allocator's segments);
* ``cuda_context_gb``: device memory in use that PyTorch did not reserve (CUDA context, kernels,
  library handles): ``total - free`` (``torch.cuda.mem_get_info``) minus ``memory_reserved``;
* ``device_used_gb``: ``total - free`` after the step, what ``nvidia-smi`` would show for the job;
* ``context_at_init_gb``: device memory in use just after CUDA initialisation minus what
  ``nvidia-smi`` showed before this process touched CUDA (the same for every row; empty without nvidia-smi);

and, in the same process, the traced peak of the same request (``zoo_trace.trace``: meta device, fake
tensors, MemTracker) with the ratios real / traced. Rows are written (and flushed) as they finish,
so a run cut short keeps what it measured. A run that does not fit the GPU is kept as ``oom``.

Usage::

    python3 tests/data/measure_gpu_archs.py --out DIR/gpu_archs.csv
    python3 tests/data/measure_gpu_archs.py --out DIR/gpu_archs.csv --archs resnet50,gpt2-medium
"""

from __future__ import annotations

import argparse
import csv
import gc
import importlib.util
import subprocess
import sys
import time
import types
import warnings
from pathlib import Path

GB = 1e9
STEPS = 3  # the third is measured: the optimizer state exists from the first
LEARNING_RATE = 1e-3
ZOO_FILE = Path(__file__).resolve().parents[2] / "tasks" / "learn" / "zoo_trace.py"

# (architecture, batch sizes, mixed precision, optimizer): CNNs and Transformers, each at FP32 and mixed
RUNS = (
    ("resnet50", (32, 128), "FP16", "SGD"),
    ("vgg16", (32, 128), "FP16", "SGD"),
    ("inception_v3", (32, 128), "FP16", "SGD"),
    ("mobilenet_v2", (64, 256), "FP16", "Adam"),
    ("efficientnet_b0", (64, 256), "BF16", "AdamW"),
    ("densenet121", (32, 128), "BF16", "SGD"),
    ("vit_b_16", (32, 128), "BF16", "AdamW"),
    ("swin_t", (32, 128), "BF16", "AdamW"),
    ("bert-base-uncased", (8, 32), "BF16", "AdamW"),
    ("bert-large-uncased", (4, 16), "FP16", "AdamW"),
    ("gpt2-medium", (2, 8), "BF16", "Adam"),
    ("xlnet-base-cased", (4, 16), "FP16", "Adam"),
)
COLUMNS = (
    "arch", "family", "model_type", "batch_size", "input_dim", "precision", "optimizer", "params_million", "status",
    "traced_peak_gb", "real_allocated_gb", "real_reserved_gb", "allocated_over_traced", "reserved_over_traced",
    "cuda_context_gb", "context_at_init_gb", "device_used_gb", "traced_gflop", "step_ms", "trace_seconds", "error",
)


def load_zoo() -> types.ModuleType:
    """gpucast's zoo_trace.py by file path (no gpucast install needed); its `zoo` is the catalogue."""
    spec = importlib.util.spec_from_file_location("gpucast_zoo", ZOO_FILE)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["gpucast_zoo"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def nvidia_smi_used_gb() -> float | None:
    """Memory in use on GPU 0 as nvidia-smi reports it (before this process touches CUDA); None without it."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        return float(out.split()[0]) * 2**20 / GB
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def device_used_gb(torch: types.ModuleType) -> float:
    free, total = torch.cuda.mem_get_info()
    return (total - free) / GB


def release(torch: types.ModuleType) -> None:
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def real_step(torch: types.ModuleType, zoo: types.ModuleType, request: object) -> dict[str, float]:
    """Three real training steps on the GPU; the third one's peaks."""
    stepmem = zoo.step_core()
    network = zoo.build_network(request, device="cuda")
    model = network.model.train()
    optimizer = stepmem.build_optimizer(model.parameters(), request.optimizer, LEARNING_RATE, False)
    with torch.device("cuda"):
        inputs, targets = network.make_batch()
    for step in range(STEPS):
        if step == STEPS - 1:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
        stepmem.training_step(model, optimizer, inputs, targets, request.precision, device_type="cuda")
    torch.cuda.synchronize()
    measured = {
        "step_ms": (time.perf_counter() - start) * 1e3,
        "real_allocated_gb": torch.cuda.max_memory_allocated() / GB,
        "real_reserved_gb": torch.cuda.max_memory_reserved() / GB,
        "device_used_gb": device_used_gb(torch),
    }
    measured["cuda_context_gb"] = measured["device_used_gb"] - torch.cuda.memory_reserved() / GB
    del model, optimizer, inputs, targets, network
    return measured


def measure_one(torch: types.ModuleType, zoo: types.ModuleType, arch: str, batch: int, precision: str,
                optimizer: str) -> dict[str, object]:
    """One CSV row: the trace, then the real steps (an out-of-memory run is kept as 'oom')."""
    spec = zoo.zoo.ARCHITECTURES[arch]
    request = zoo.TraceRequest(arch, batch, None, precision, optimizer)
    try:
        traced = zoo.trace(request)
    except Exception as exc:  # recorded, the other runs go on
        return {"arch": arch, "batch_size": batch, "precision": precision, "optimizer": optimizer,
                "status": "trace failed", "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    row: dict[str, object] = {
        "arch": arch, "family": spec.family, "model_type": spec.model_type, "batch_size": batch,
        "input_dim": traced.input_dim, "precision": precision, "optimizer": optimizer,
        "params_million": f"{traced.params / 1e6:.3f}", "traced_peak_gb": f"{traced.peak_bytes / GB:.4f}",
        "traced_gflop": f"{traced.flops / 1e9:.1f}", "trace_seconds": f"{traced.seconds:.1f}", "status": "ok", "error": "",
    }
    release(torch)
    real = None
    try:
        real = real_step(torch, zoo, request)
    except Exception as exc:  # out of memory ('oom') or a failed step: recorded, the other runs go on
        oom = isinstance(exc, torch.cuda.OutOfMemoryError)
        row.update(status="oom" if oom else "failed", error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    release(torch)  # here, once the exception (and the frames holding the model) is gone
    if real is None:
        return row
    row.update({k: f"{v:.4f}" if k != "step_ms" else f"{v:.1f}" for k, v in real.items()})
    row["allocated_over_traced"] = f"{real['real_allocated_gb'] * GB / traced.peak_bytes:.3f}"
    row["reserved_over_traced"] = f"{real['real_reserved_gb'] * GB / traced.peak_bytes:.3f}"
    return row


def selected_runs(archs: str | None) -> list[tuple[str, tuple[int, ...], str, str]]:
    if not archs:
        return list(RUNS)
    wanted = {a.strip() for a in archs.split(",") if a.strip()}
    unknown = wanted - {run[0] for run in RUNS}
    if unknown:
        raise SystemExit(f"--archs: not in this script's runs: {', '.join(sorted(unknown))} "
                         f"(choose from {', '.join(run[0] for run in RUNS)})")
    return [run for run in RUNS if run[0] in wanted]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="CSV to write (traced vs real, one row per run)")
    parser.add_argument("--archs", default=None, help="comma-separated subset of the architectures (default: all)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs = selected_runs(args.archs)
    import torch
    if not torch.cuda.is_available():
        print("measure_gpu_archs: CUDA is not available on this machine; nothing measured.")
        return 0
    warnings.filterwarnings("ignore", category=UserWarning)
    smi_before = nvidia_smi_used_gb()
    zoo = load_zoo()
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    after_init = device_used_gb(torch)
    context_at_init = "" if smi_before is None else f"{after_init - smi_before:.4f}"
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}; device memory in use before CUDA init "
          f"{smi_before if smi_before is not None else 'n/a'} GB (nvidia-smi), after init {after_init:.3f} GB", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for arch, batches, mixed, optimizer in runs:
            for batch in batches:
                for precision in ("FP32", mixed):
                    row = measure_one(torch, zoo, arch, batch, precision, optimizer)
                    row["context_at_init_gb"] = context_at_init
                    writer.writerow(row)
                    f.flush()
                    print(f"{arch} batch {batch} {precision} {optimizer}: traced {row.get('traced_peak_gb', '-')} GB, "
                          f"allocated {row.get('real_allocated_gb', '-')} GB, reserved {row.get('real_reserved_gb', '-')} GB "
                          f"({row['status']})", flush=True)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
