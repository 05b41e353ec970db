"""The GPU catalogue: today's GPUs, each row with its source, names that resolve, figures that are dense peaks."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from gpucast.records import catalog

# The GPUs sites run today (issue 26), as a log or nvidia-smi / rocm-smi / hl-smi would spell them.
TODAYS_GPUS = {
    "NVIDIA H100 80GB HBM3": "H100-80GB", "H100 PCIe": "H100-PCIe-80GB", "NVIDIA H200": "H200-141GB",
    "NVIDIA B200": "B200-180GB", "NVIDIA GH200 480GB": "GH200-96GB", "NVIDIA L40S": "L40S-48GB", "L4": "L4-24GB",
    "NVIDIA A10": "A10-24GB", "A30": "A30-24GB", "A40": "A40-48GB", "NVIDIA A100-SXM4-40GB": "A100-40GB",
    "a100 80gb": "A100-80GB", "Tesla V100-SXM2-32GB": "V100-32GB", "Tesla T4": "T4-16GB",
    "NVIDIA RTX 6000 Ada Generation": "RTX-6000-Ada-48GB", "NVIDIA RTX A6000": "RTX-A6000-48GB",
    "NVIDIA RTX A5000": "RTX-A5000-24GB", "NVIDIA GeForce RTX 4090": "RTX-4090-24GB", "RTX 4080": "RTX-4080-16GB",
    "GeForce RTX 3090": "RTX-3090-24GB", "rtx_3080": "RTX-3080-10GB", "NVIDIA GeForce RTX 2080 Ti": "RTX-2080Ti-11GB",
    "NVIDIA GeForce RTX 5090": "RTX-5090-32GB", "AMD Instinct MI300X": "MI300X-192GB", "MI250X": "MI250X-128GB",
    "AMD Instinct MI210": "MI210-64GB", "AMD Instinct MI100": "MI100-32GB", "HL-225": "Gaudi2-96GB",
    "Intel Gaudi 3": "Gaudi3-128GB", "Intel(R) Data Center GPU Max 1550": "Max1550-128GB",
    # the LLM runs of ../shared/data/llm_memory_dev.csv (session 25): their GPUs, as that set spells them
    "A800-80GB": "A800-80GB", "NVIDIA A800-SXM4-80GB": "A800-80GB", "H800": "H800-80GB", "H20": "H20-96GB",
    "RTX-PRO-6000-96GB": "RTX-PRO-6000-96GB", "NVIDIA RTX PRO 6000 Blackwell": "RTX-PRO-6000-96GB",
}


def _rows() -> list[dict[str, str]]:
    text = resources.files("gpucast.records").joinpath("reference/gpu_catalog.csv").read_text()
    return list(csv.DictReader(text.splitlines()))


@pytest.mark.parametrize("logged, canonical", TODAYS_GPUS.items())
def test_todays_gpus_resolve(logged, canonical):
    assert catalog.canonical(logged) == canonical
    assert catalog.gpus()[canonical].memory_gb > 0


def test_every_row_names_its_source_and_every_name_is_its_own():
    rows = _rows()
    assert len(rows) == len(catalog.gpus())  # no row lost to a duplicate gpu_type
    for row in rows:
        assert row["source"].startswith("https://") or "whitepaper" in row["source"] or "white paper" in row["source"], row
        assert catalog.canonical(row["gpu_type"]) == row["gpu_type"]


def test_no_spelling_means_two_gpus():
    owner: dict[str, str] = {}
    for row in _rows():
        for name in {row["gpu_type"], *filter(None, row["aliases"].split(";"))}:
            folded = catalog.fold(name)
            assert owner.setdefault(folded, row["gpu_type"]) == row["gpu_type"], (name, owner[folded], row["gpu_type"])


def test_peaks_are_ordered_and_dense():
    """FP64 <= FP32 <= TF32 <= FP16 on every GPU (a swapped column breaks it), and FP16 is twice TF32
    wherever both are given: the dense ratio of every tensor-core generation here; a with-sparsity figure
    in one of the two columns makes the ratio 1 or 4."""
    for gpu in catalog.gpus().values():
        peaks = [gpu.tflops[k] for k in ("fp64", "fp32", "tf32", "fp16") if k in gpu.tflops]
        assert peaks == sorted(peaks), gpu
        if "tf32" in gpu.tflops and "fp16" in gpu.tflops:
            assert gpu.tflops["fp16"] / gpu.tflops["tf32"] == pytest.approx(2, rel=0.03), gpu


def test_a_gpu_without_a_figure_has_no_peak_rather_than_a_guess():
    gaudi = catalog.gpus()["Gaudi3-128GB"]
    assert gaudi.peak_tflops("BF16") == 1835 and gaudi.peak_tflops("FP32") is None
    assert catalog.gpus()["V100-32GB"].peak_tflops("BF16") == 15.7  # no BF16 units: runs it as FP32
