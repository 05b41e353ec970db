"""`TrainOptions.run_device`: the device a train run records, torch imported only where the network trains."""

from __future__ import annotations

import subprocess
import sys

from gpucast.tasks.learn.models.registry import NN
from gpucast.tasks.learn.options import TrainOptions

WITHOUT_THE_NETWORK = """
import sys
from gpucast.tasks.learn.options import TrainOptions
print(TrainOptions(models=("linear_fs", "lightgbm")).run_device(), TrainOptions(models=("linear_fs",), device="cuda").run_device(),
      "torch" in sys.modules)
"""


def test_a_run_without_the_network_records_its_device_without_importing_torch():
    out = subprocess.run([sys.executable, "-c", WITHOUT_THE_NETWORK], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cpu", "cuda", "False"]


def test_a_run_with_the_network_records_where_it_trains():
    import torch

    assert TrainOptions(models=(NN, "linear_fs")).run_device() == ("cuda" if torch.cuda.is_available() else "cpu")
    assert TrainOptions(models=(NN,), device="cpu").run_device() == "cpu"
