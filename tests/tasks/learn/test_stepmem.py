"""tasks/learn/stepmem.py: the kernel choices of a traced step, without warnings a user cannot act on."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("torch")

# A fresh interpreter: PyTorch's own warning comes once per process, so one shown earlier in this one would hide it.
CODE = """
import warnings
warnings.simplefilter("always")
import torch
from gpucast.tasks.learn.stepmem import training_backends
before = torch._C._get_mkldnn_enabled()
with training_backends("FP32"):
    inside = torch._C._get_mkldnn_enabled()
print(before, inside, torch._C._get_mkldnn_enabled())
"""


def test_onednn_is_off_inside_and_restored_without_the_tf32_notice() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "True"]
    assert "oneDNN" not in done.stderr and "TF32" not in done.stderr, done.stderr  # torch's notice for Intel GPUs
