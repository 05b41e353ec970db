"""The GPU catalogue shipped with gpucast: memory and peak dense throughput of common GPUs.

`reference/gpu_catalog.csv` holds one row per GPU from its vendor's published specification (the
`source` column names the page): memory (GB), peak dense TFLOPS at FP64, FP32, TF32, FP16 and
BF16 (tensor-core figures where the GPU has tensor cores; without structured sparsity), and memory
bandwidth (GB/s). `aliases` lists other spellings, including the names `nvidia-smi` prints.

A job's `gpu_type` is matched after folding case, spaces, dashes and underscores, so
`a100 80gb`, `A100_80GB` and `NVIDIA A100-SXM4-80GB` all mean `A100-80GB`. A name that is not in
the catalogue is kept as logged and reported; it gets no throughput from here.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

# Which catalogue column is a job's peak at its precision. FP32 training on GPUs with tensor cores
# runs its convolutions (and, where enabled, its matrix products) in TF32, so FP32 jobs use the
# TF32 peak where the GPU has one; a GPU without BF16 (V100, T4) runs BF16 as FP32.
PEAK_COLUMN = {"FP64": ("fp64",), "FP32": ("tf32", "fp32"), "FP16": ("fp16",), "BF16": ("bf16", "fp32"),
               # FP8 (contract v5): the catalogue has no FP8 column yet, so an FP8 job gets its GPU's BF16 peak (its
               # attention, norms and optimizer run in 16 bits; the FP8 matrix products up to 2x faster than this)
               "FP8": ("bf16", "fp16", "fp32")}
# When a job's GPU is not known: the reference GPU its priors assume (documented in docs/models.md).
REFERENCE_GPU = "A100-80GB"


@dataclass(frozen=True)
class Gpu:
    gpu_type: str
    vendor: str
    memory_gb: float
    tflops: dict[str, float]  # fp64, fp32, tf32, fp16, bf16 -> dense peak (missing: the GPU has none)
    memory_bandwidth_gbs: float
    source: str

    def peak_tflops(self, precision: str | None) -> float | None:
        """Peak dense TFLOPS at a job's precision (FP32 when the precision is not logged)."""
        for column in PEAK_COLUMN.get(precision or "FP32", ("fp32",)):
            if column in self.tflops:
                return self.tflops[column]
        return None


def fold(name: str) -> str:
    """A GPU name folded for matching: lower case, letters and digits only."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


@cache
def gpus() -> dict[str, Gpu]:
    """The catalogue, keyed by canonical `gpu_type`."""
    text = resources.files("gpucast.records").joinpath("reference/gpu_catalog.csv").read_text()
    out = {}
    for row in csv.DictReader(text.splitlines()):
        tflops = {k: float(row[f"{k}_tflops"]) for k in ("fp64", "fp32", "tf32", "fp16", "bf16") if row[f"{k}_tflops"]}
        out[row["gpu_type"]] = Gpu(row["gpu_type"], row["vendor"], float(row["memory_gb"]), tflops,
                                   float(row["memory_bandwidth_gbs"]), row["source"])
    return out


@cache
def _by_folded_name() -> dict[str, str]:
    text = resources.files("gpucast.records").joinpath("reference/gpu_catalog.csv").read_text()
    names = {}
    for row in csv.DictReader(text.splitlines()):
        for name in [row["gpu_type"], *filter(None, row["aliases"].split(";"))]:
            names[fold(name)] = row["gpu_type"]
            names[fold(name.removeprefix("NVIDIA ").removeprefix("Tesla ").removeprefix("AMD Instinct "))] = row["gpu_type"]
    return names


def canonical(gpu_type: str | None) -> str | None:
    """The catalogue's name for a logged `gpu_type`, or None when the catalogue does not know it."""
    return _by_folded_name().get(fold(gpu_type)) if gpu_type else None
