"""A traced FSDP training step of a 70B LLM on a fake process group, on CPU (issue 51 item 4's goal: <= 60 s on 2
cores, cached per configuration), beside the analytic per-GPU prior of the same layout.

For each configuration: the CPU seconds and wall seconds of the trace (`llm_trace.trace_peak`), the traced peak
(allocated, GB) and its parts at the peak, the analytic prior's allocated memory (`llm_memory.per_gpu`, its total
less the CUDA context and allocator overhead) for the same FSDP layout, and the time of a second call (the cache).

    .venv/bin/python tests/benchmarks/bench_llm_trace.py [--configs 70b,8b]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from gpucast.tasks.learn import llm_memory as m
from gpucast.tasks.learn import llm_trace as t

CONFIGS = {  # name: (model, data-parallel ranks, micro-batch, sequence)
    "70b": ("Llama-3.1-70B", 64, 1, 4096),
    "8b": ("Llama-3.1-8B", 8, 1, 4096),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="70b,8b")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} (2 cores)")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.configs.split(","):
            model, dp, micro, seq = CONFIGS[name]
            arch = m.lookup(model)
            wall = time.perf_counter()
            traced = t.trace_peak(arch, dp, micro, seq, checkpointing=True, cache=Path(tmp))
            wall = time.perf_counter() - wall
            again = time.perf_counter()
            cached = t.trace_peak(arch, dp, micro, seq, checkpointing=True, cache=Path(tmp))
            again = time.perf_counter() - again
            prior = m.per_gpu(arch, m.Layout(gpu_count=dp, sharding="fsdp", activation_checkpointing="full",
                                             micro_batch_size=micro, seq_len=seq, precision="BF16"))
            allocated = prior.total_gb - prior.overhead_gb
            parts = ", ".join(f"{k} {v:.2f}" for k, v in traced.parts_gb.items() if v >= 0.005)
            print(f"{name}: {model} FSDP over {dp} ranks, micro-batch {micro} x {seq} tokens, full checkpointing")
            print(f"  trace: {traced.cpu_seconds:.1f} CPU-s, {wall:.1f} s wall; cached call {again * 1e3:.0f} ms "
                  f"(cached={cached.cached})")
            print(f"  traced peak {traced.total_gb:.2f} GB allocated ({parts})")
            print(f"  analytic prior {allocated:.2f} GB allocated (states {prior.states_gb:.2f}, activations "
                  f"{prior.activations_gb:.2f}, logits {prior.logits_gb:.2f}); traced / prior {traced.total_gb / allocated:.2f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
