"""The Transformer-BiGRU on a GPU worker: it learns there, and what it saves scores on a CPU host.

Skipped without CUDA (CI and this project's machines have none). Run on a GPU host with
`python -m pytest -m gpu tests/tasks/learn/test_gpu.py`; it needs only torch, scikit-learn, polars and
tqdm of gpucast's dependencies, so `--noconftest` runs it where Prefect is not installed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpucast.expectations import contract as c
from gpucast.tasks.learn.features import FeatureEncoder
from gpucast.tasks.learn.models.transformer_bigru import TransformerBiGRURegressor
from tests.measured import load

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

EPOCHS = 60


@pytest.fixture(scope="module")
def split():
    """The measured set's memory target, 70/30 by a fixed permutation, the contract's 11 features."""
    rows = load()
    order = np.random.default_rng(0).permutation(rows.height)
    cut = int(0.7 * rows.height)
    train, test = rows[order[:cut]], rows[order[cut:]]
    enc = FeatureEncoder("contract").fit(train)
    return enc, enc.transform(train), train[c.PEAK_GPU_MEM_GB].to_numpy(), enc.transform(test), test[c.PEAK_GPU_MEM_GB].to_numpy()


def _fit(split, device: str) -> TransformerBiGRURegressor:
    enc, X, y, _, _ = split
    return TransformerBiGRURegressor("tuned", seed=0, device=device, epochs=EPOCHS, categorical=enc.categorical,
                                     cardinalities=enc.cardinalities).fit(X, y)


def _log_rmse(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.log(p) - np.log(y)) ** 2)))


def test_the_network_learns_on_the_gpu(split):
    _, _, y, X_test, y_test = split
    est = _fit(split, "cuda")
    assert est.device_ == "cuda" and next(est.model_.parameters()).is_cuda
    p = est.predict(X_test)
    constant = np.full_like(y_test, np.exp(np.mean(np.log(y))))  # the geometric mean of the training targets
    assert np.isfinite(p).all()
    assert _log_rmse(y_test, p) < 0.5 * _log_rmse(y_test, constant)


def test_a_checkpoint_saved_on_the_gpu_scores_on_a_cpu_host(split, tmp_path):
    _, _, _, X_test, _ = split
    est = _fit(split, "cuda")
    est.save(tmp_path / "model.pt")
    on_cpu = TransformerBiGRURegressor.load(tmp_path / "model.pt", device="cpu")
    assert on_cpu.device_ == "cpu"
    # Same weights, other kernels: cuDNN's GRU and cuBLAS sum in another order than the CPU's (measured on an
    # H100: at most 2.2e-4 relative). A checkpoint missing a scaler or the target's scale is off by far more.
    np.testing.assert_allclose(on_cpu.predict(X_test), est.predict(X_test), rtol=1e-3)


def test_gpu_and_cpu_fits_are_equally_good(split):
    """Same seed, same data: kernels differ, so the weights do, but not the accuracy (within 20%)."""
    _, _, _, X_test, y_test = split
    gpu, cpu = _fit(split, "cuda"), _fit(split, "cpu")
    a, b = _log_rmse(y_test, gpu.predict(X_test)), _log_rmse(y_test, cpu.predict(X_test))
    assert abs(a - b) <= 0.2 * max(a, b), (a, b)
