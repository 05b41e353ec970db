"""Tried, not kept (issue 51, session 8): the LLM prior with a loss on 16-bit logits for FP16 jobs under ZeRO / FSDP.

docs/models.md's "Tried and not kept: the 16-bit loss for every FP16 job under ZeRO or FSDP" (committed for review 57
N13: it ran as an uncommitted scratch script). DeepSpeed's and Gemini's fp16 engines run the model in fp16 without
autocast, so a script computing its own loss holds ~`HALF_LOSS_BYTES` a logit (bench_llm_memory `--breakdown`'s
trace) where the prior counts `llm_memory.LOGIT_BYTES`. This scales the head's logits of those jobs (FP16 precision,
sharding zero1/2/3 or fsdp) by HALF_LOSS_BYTES / LOGIT_BYTES in `llm_memory.activations`, for this process only, and
prints the prior alone (bench_llm_memory's `estimates`, no learning) before and after: the rows it moves, and the
median absolute percentage error on the whole set, the learned half and the held-out half (`learned_half`, seed 0)
with the states-only baseline's ratio to it, and ColossalAI's runs there. Since contract v6 (session 10) a job's own
`loss_precision` wins: only jobs that do not state it are scaled, and on the development set none is left (ColossalAI's
six FP16 ZeRO-3 / Gemini runs say `half`): rows moved 0, before = after (whole 10.83%, held-out half 11.33%).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_llm_loss16.py [--data PATH]

Input: bench_llm_memory's set (`DATA`, ../shared/data/llm_memory_dev.csv). A few seconds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import llm_memory as m

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable
from tests.benchmarks import bench_llm_memory as b  # noqa: E402

HALF_LOSS_BYTES = m.LOSS_LOGIT_BYTES["half"]  # a 16-bit head, a shifted cross-entropy and its backward, traced
SHARDED = ("zero1", "zero2", "zero3", "fsdp")
SOURCE = "ColossalAI-Pytorch-lightning"


def half_loss_estimates(rows: pl.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """bench_llm_memory's `estimates` with the FP16 sharded jobs' logits at `HALF_LOSS_BYTES` a logit."""
    original = m.activations

    def half_loss(arch, job):
        acts, logits = original(arch, job)
        # the rule for jobs whose loss precision is not stated (contract v6: ColossalAI's runs already say `half`)
        if job.precision == "FP16" and job.sharding in SHARDED and logits and job.loss_precision == "fp32":
            logits *= HALF_LOSS_BYTES / m.LOGIT_BYTES
        return acts, logits

    m.activations = half_loss
    try:
        return b.estimates(rows)
    finally:
        m.activations = original


def mdape(p: np.ndarray, truth: np.ndarray) -> float:
    return float(np.median(np.abs(p - truth) / truth))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=b.DATA)
    args = ap.parse_args()
    rows = b.job_rows(args.data)
    before, after = b.estimates(rows), half_loss_estimates(rows)
    truth = rows[c.PEAK_GPU_MEM_GB].cast(pl.Float64).to_numpy()
    keep = b.learned_half(rows, 0)
    states = before["states_only"][0]
    source = rows["source"].to_numpy()
    moved = np.flatnonzero(np.abs(before["prior"][0] - after["prior"][0]) > 1e-6)
    print(f"rows moved: {len(moved)} ({', '.join(sorted(set(source[moved].tolist())))})")
    for name, method in (("before", before), ("after", after)):
        p = method["prior"][0]
        ok = np.isfinite(truth) & np.isfinite(p) & np.isfinite(states)
        parts = []
        for half, pick in (("whole", ok), ("learned half", ok & keep), ("held-out half", ok & ~keep)):
            err, col = mdape(p[pick], truth[pick]), pick & (source == SOURCE)
            parts.append(f"{half} {err:.2%} ({mdape(states[pick], truth[pick]) / err:.2f}x), ColossalAI "
                         f"{mdape(p[col], truth[col]):.1%}")
        print(f"{name}: " + " | ".join(parts))
    for i in moved:
        print(f"  row {i} ({'learned' if keep[i] else 'held out'}) {truth[i]:.1f} GB: "
              f"{(before['prior'][0][i] / truth[i] - 1) * 100:+.1f}% -> {(after['prior'][0][i] / truth[i] - 1) * 100:+.1f}%")


if __name__ == "__main__":
    main()
