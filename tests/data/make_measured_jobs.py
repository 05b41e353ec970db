#!/usr/bin/env python
"""Measured training jobs: real PyTorch networks whose training-step memory and FLOPs are measured.

This is an outside check for gpucast that does not come from its simulator. For every sampled
configuration (the 11 gpucast features) the script builds the real ``torch.nn`` network and
measures its **second** training step (forward, loss, backward, ``optimizer.step()``, zero_grad),
after the optimizer has lazily created its state in the first:

* **Peak memory** with ``torch.distributed._tools.mem_tracker.MemTracker``, PyTorch's tensor-memory
  tracker, which follows every storage a dispatched op creates or frees and files it as parameter,
  buffer, gradient, activation, temporary, optimizer state or other (the input batch). The steps
  run under ``torch._subclasses.fake_tensor.FakeTensorMode``: tensors carry shapes, dtypes and
  storage sizes but no data, so a 1.5-billion-parameter model costs no real memory or compute.
  ``--self-check`` compares this against real (non-fake) runs and the CPU allocator's own records.
* **FLOPs** of forward + backward with ``torch.utils.flop_counter.FlopCounterMode``.

How jobs run (the README in this folder explains each choice):

* FP32: everything float32. FP64: the model and batch in float64. FP16 / BF16: automatic mixed
  precision as training jobs run it: float32 master weights, gradients and optimizer state, and the
  forward (and loss) under ``torch.autocast(device_type="cpu", dtype=...)``, so activations are
  half precision. ``GradScaler`` is not run: it reads ``found_inf.item()``, which fake tensors cannot
  answer; its memory is a few scalars.
* Optimizers use ``foreach=True``, the implementation PyTorch picks by default on CUDA.
* Recurrent layers run with oneDNN (mkldnn) disabled, so ``nn.RNN``/``nn.LSTM``/``nn.GRU`` run
  PyTorch's own per-time-step recurrence, whose matrix products ``FlopCounterMode`` counts (the
  fused oneDNN LSTM kernel is invisible to it).
* Attention runs through ``scaled_dot_product_attention``: the CPU flash kernel (no L x L score
  matrix, like flash / memory-efficient attention on a GPU) and, for FP64, the math kernel (as CUDA
  falls back to it for float64). Its FLOPs are counted with PyTorch's own SDPA formulas, registered
  for the CPU kernel, which ``FlopCounterMode`` does not cover out of the box.

Two speed-ups, both checked by ``--self-check`` to change no number: the first step is
``optimizer.step()`` on zero gradients (the optimizer state depends only on the parameters), and
``PeakMemTracker`` drops ``MemTracker``'s per-module peak snapshots (O(modules) work per op).

The training step and its measurement (``PeakMemTracker``, the zero-gradient first step, autocast,
the CPU attention FLOPs, the optimizers) are ``gpucast.tasks.learn.stepmem``, which the model zoo
(``tasks/learn/zoo_trace.py``) shares.

Every candidate configuration draws from its own ``numpy.random.default_rng([seed, type index,
candidate index])`` and candidates are accepted in index order, so the same ``--seed`` writes the
same CSV bytes whatever ``--workers`` is, except the ``measure_seconds`` column (wall time).

Usage (from the repository root)::

    .venv/bin/python tests/data/make_measured_jobs.py                      # the shipped CSV
    .venv/bin/python tests/data/make_measured_jobs.py --quick                # smoke run, to a temp file
    .venv/bin/python tests/data/make_measured_jobs.py --self-check         # the checks in the README
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import itertools
import math
import multiprocessing
import sys
import tempfile
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils.flop_counter import FlopCounterMode

from gpucast.tasks.learn.stepmem import (
    AUTOCAST_DTYPES,
    TOTAL_KEY,
    PeakMemTracker,
    build_optimizer,
    count_params,
    measure_step,
    register_cpu_attention_flops,
    snapshot_by_name,
    training_backends,
    training_step,
)

# --------------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------------

DEFAULT_SEED = 20261123
DEFAULT_N_PER_TYPE = 120
QUICK_N_PER_TYPE = 2
DEFAULT_OUT = Path(__file__).resolve().parent / "measured_jobs.csv"
QUICK_OUT = Path(tempfile.gettempdir()) / "measured_jobs_quick.csv"
PROGRESS_EVERY = 20  # jobs between progress lines within a model type
DEFAULT_WORKERS = 2  # processes measuring candidates in parallel (this machine has 2 cores)
WINDOW_PER_WORKER = 2  # candidates in flight per worker

GB = 1e9  # bytes per GB (decimal, as GPU memory is reported in gpucast)
GFLOP = 1e9
MAX_TENSOR_PEAK_GB = 200.0  # configurations above this are skipped (and counted)
SMALL_TENSOR_PEAK_GB = 1.0  # GPU jobs are rarely smaller ...
SMALL_JOB_KEEP_PROBABILITY = 0.2  # ... so only this share of them is kept
MAX_CANDIDATES_PER_JOB = 12  # give up on a model type after n_per_type x this many candidates
CUDA_CONTEXT_GB = (0.3, 1.0)  # uniform; stands in for the CUDA context / allocator overhead

MODEL_TYPES = ("MLP", "CNN", "ResNet", "RNN", "LSTM", "GRU", "Transformer")
PRECISION_SHARES = {"FP32": 0.35, "FP16": 0.28, "BF16": 0.32, "FP64": 0.05}
OPTIMIZER_SHARES = {"Adam": 0.28, "AdamW": 0.28, "SGD": 0.24, "RMSprop": 0.10, "Adagrad": 0.10}
ITERATIONS_RANGE = (1e3, 1e6)  # log-uniform; planned optimizer steps
LEARNING_RATE_RANGE = (1e-5, 1e-1)  # log-uniform
REGULARIZATION_SHARE = 0.5
DATA_AUGMENTATION_SHARE = 0.5

DROPOUT_P = 0.1  # dropout probability of every dropout layer when regularization is on

MLP_CLASSES = 10
IMAGE_CLASSES = 1000
IMAGE_CHANNELS = 3
RNN_VOCAB = 10_000  # recurrent nets are word-level language models (a PTB / WikiText-sized vocabulary)
TRANSFORMER_VOCAB = 32_000  # Transformers are encoder language models with a 32k sub-word vocabulary
ATTENTION_HEAD_DIM = 64
FFN_MULTIPLIER = 4
CNN_STAGE_MULTIPLIERS = (1, 2, 4, 8, 8)  # VGG-style: channels per stage = base width x multiplier
RESNET_STAGE_MULTIPLIERS = (1, 2, 4, 8)
RESNET_BOTTLENECK_EXPANSION = 4
RESNET_SMALL_IMAGE_SIDE = 64  # at or below this side: the CIFAR stem (3x3 conv, no max-pool)
RESNET_BLOCKS = {  # depth -> (bottleneck blocks?, blocks per stage), as in He et al. (2016)
    18: (False, (2, 2, 2, 2)),
    34: (False, (3, 4, 6, 3)),
    50: (True, (3, 4, 6, 3)),
    101: (True, (3, 4, 23, 3)),
    152: (True, (3, 8, 36, 3)),
}
# Recurrent nets unroll one time step at a time (a few dozen ops per step and layer, ~10 ms each under
# fake tensors), so their sequences stop at 256 tokens to keep the default run under ~40 minutes:
# truncated back-propagation lengths of 35-256 are what word-level RNN language models use
# (PTB / WikiText recipes: 35-200); Transformers get the full 32-2048.
RECURRENT_SEQ_LEN = (32, 256)
RECURRENT_LAYERS = (1, 2, 3, 4)
TRANSFORMER_ASPECT_RATIO = (32.0, 128.0)  # d_model / num_layers, log-uniform (GPT-2 ~ 32-64, Llama ~ 128)
TRANSFORMER_LAYERS = (2, 48)

# MemTracker's categories (the string values of its reference types) -> the CSV breakdown columns.
BREAKDOWN = {
    "weights_gb": ("Parameter", "Buffer"),
    "grads_gb": ("Gradient",),
    "optimizer_gb": ("Optstate",),
    "activations_gb": ("Activation", "Temp"),
    "batch_gb": ("Other",),
}

FEATURE_COLUMNS = (
    "model_type", "params_million", "batch_size", "input_dim", "num_layers", "iterations",
    "precision", "optimizer", "learning_rate", "regularization", "data_augmentation",
)
TARGET_COLUMNS = ("peak_gpu_mem_gb", "train_gflop_per_iter")
DOC_COLUMNS = ("tensor_peak_gb", "cuda_context_gb", *BREAKDOWN, "model_width", "measure_seconds")
COLUMNS = ("job_id", *FEATURE_COLUMNS, *TARGET_COLUMNS, *DOC_COLUMNS)


# --------------------------------------------------------------------------------------------------
# Job configurations
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobConfig:
    """One sampled training job: the 11 gpucast features (params as a target) plus two draws."""

    model_type: str
    target_params_million: float  # the builder picks the width that comes closest to it
    batch_size: int
    input_dim: int
    num_layers: int
    iterations: float
    precision: str
    optimizer: str
    learning_rate: float
    regularization: bool
    data_augmentation: bool
    cuda_context_gb: float
    keep_draw: float  # uniform(0, 1); a job under SMALL_TENSOR_PEAK_GB is kept if below the keep share

    @property
    def dropout(self) -> float:
        """Dropout probability of the network's dropout layers (0 = no dropout layers)."""
        return DROPOUT_P if self.regularization else 0.0


@dataclass(frozen=True)
class Architecture:
    """How one model type is sampled and built.

    ``builder(cfg, width)`` returns the network; its parameter count is a quadratic in ``width``
    (every layer's size is proportional to it), which is how ``choose_width`` hits a parameter target.
    """

    builder: Callable[[JobConfig, int], nn.Module]
    params_million: tuple[float, float]  # log-uniform target range
    layer_choices: tuple[int, ...]  # uniform; empty = derived from the parameter target
    input_dim: tuple[int, int]  # log-uniform, rounded to a multiple of input_multiple
    input_multiple: int
    batch_log2: tuple[int, int]  # batch size = 2**k, k uniform in the inclusive range
    width: tuple[int, int]  # inclusive bounds of the width
    width_multiple: int
    batch_kind: str  # "features" | "image" | "tokens"


# --------------------------------------------------------------------------------------------------
# Architecture builders (each returns a plain torch.nn network; none of them touches real data)
# --------------------------------------------------------------------------------------------------


def build_mlp(cfg: JobConfig, width: int) -> nn.Module:
    """MLP: ``num_layers`` Linear layers (input -> width -> ... -> classes), ReLU in between."""
    layers: list[nn.Module] = []
    fan_in = cfg.input_dim
    for _ in range(cfg.num_layers - 1):
        layers += [nn.Linear(fan_in, width), nn.ReLU()]
        if cfg.dropout:
            layers.append(nn.Dropout(cfg.dropout))
        fan_in = width
    layers.append(nn.Linear(fan_in, MLP_CLASSES))
    return nn.Sequential(*layers)


def _stage_sizes(total: int, stages: int) -> list[int]:
    """Split ``total`` layers over ``stages`` as evenly as possible, later stages taking the rest."""
    base, extra = divmod(total, stages)
    return [base + (1 if i >= stages - extra else 0) for i in range(stages)]


def build_cnn(cfg: JobConfig, width: int) -> nn.Module:
    """Plain VGG-style CNN: ``num_layers`` 3x3 conv-BN-ReLU layers in five stages, each stage
    ending in a 2x2 max-pool, then global average pooling and a linear classifier."""
    layers: list[nn.Module] = []
    channels = IMAGE_CHANNELS
    for multiplier, n_convs in zip(CNN_STAGE_MULTIPLIERS, _stage_sizes(cfg.num_layers, len(CNN_STAGE_MULTIPLIERS)), strict=True):
        out_channels = width * multiplier
        for _ in range(n_convs):
            layers += [nn.Conv2d(channels, out_channels, 3, padding=1, bias=False), nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True)]
            channels = out_channels
        layers.append(nn.MaxPool2d(2))
        if cfg.dropout:
            layers.append(nn.Dropout(cfg.dropout))
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, IMAGE_CLASSES)]
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 convolutions and an identity (or 1x1 projection) shortcut."""

    expansion = 1

    def __init__(self, in_channels: int, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = _projection(in_channels, channels, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """ResNet bottleneck block: 1x1 reduce, 3x3 (carrying the stride), 1x1 expand (x4)."""

    expansion = RESNET_BOTTLENECK_EXPANSION

    def __init__(self, in_channels: int, channels: int, stride: int) -> None:
        super().__init__()
        out_channels = channels * self.expansion
        self.conv1 = nn.Conv2d(in_channels, channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.conv3 = nn.Conv2d(channels, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.shortcut = _projection(in_channels, out_channels, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


def _projection(in_channels: int, out_channels: int, stride: int) -> nn.Module:
    """The shortcut of a residual block: identity, or 1x1 conv + BN where the shape changes."""
    if stride == 1 and in_channels == out_channels:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride, bias=False), nn.BatchNorm2d(out_channels))


def build_resnet(cfg: JobConfig, width: int) -> nn.Module:
    """ResNet-``num_layers`` (18/34 basic, 50/101/152 bottleneck) with base width ``width``
    (64 in the paper). Images up to 64 pixels get the CIFAR stem, larger ones the ImageNet stem."""
    bottleneck, blocks_per_stage = RESNET_BLOCKS[cfg.num_layers]
    block = Bottleneck if bottleneck else BasicBlock
    if cfg.input_dim <= RESNET_SMALL_IMAGE_SIDE:
        stem = [nn.Conv2d(IMAGE_CHANNELS, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True)]
    else:
        stem = [nn.Conv2d(IMAGE_CHANNELS, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, 1)]
    layers: list[nn.Module] = list(stem)
    in_channels = width
    for stage, (multiplier, n_blocks) in enumerate(zip(RESNET_STAGE_MULTIPLIERS, blocks_per_stage, strict=True)):
        for i in range(n_blocks):
            stride = 2 if stage > 0 and i == 0 else 1
            layers.append(block(in_channels, width * multiplier, stride))
            in_channels = width * multiplier * block.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    if cfg.dropout:
        layers.append(nn.Dropout(cfg.dropout))
    layers.append(nn.Linear(in_channels, IMAGE_CLASSES))
    return nn.Sequential(*layers)


class RecurrentLM(nn.Module):
    """Word-level language model: embedding -> ``nn.RNN``/``nn.LSTM``/``nn.GRU`` -> vocabulary head."""

    def __init__(self, recurrent: type[nn.RNNBase], hidden: int, num_layers: int, dropout: float) -> None:
        super().__init__()
        self.embedding = nn.Embedding(RNN_VOCAB, hidden)
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()
        # nn.RNNBase applies its dropout between stacked layers only, so it needs two or more.
        self.recurrent = recurrent(hidden, hidden, num_layers, batch_first=True, dropout=dropout if num_layers > 1 else 0.0)
        self.head = nn.Linear(hidden, RNN_VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.recurrent(self.dropout(self.embedding(tokens)))
        return self.head(self.dropout(hidden))


def build_recurrent(cfg: JobConfig, width: int) -> nn.Module:
    """RNN / LSTM / GRU language model with hidden size ``width`` and ``num_layers`` stacked layers."""
    recurrent = {"RNN": nn.RNN, "LSTM": nn.LSTM, "GRU": nn.GRU}[cfg.model_type]
    return RecurrentLM(recurrent, width, cfg.num_layers, cfg.dropout)


class TransformerLM(nn.Module):
    """Encoder-only (BERT-style) language model: token + learned position embeddings ->
    ``nn.TransformerEncoder`` (pre-norm, GELU) -> vocabulary head on every position."""

    def __init__(self, d_model: int, num_layers: int, seq_len: int, dropout: float) -> None:
        super().__init__()
        self.tokens = nn.Embedding(TRANSFORMER_VOCAB, d_model)
        self.positions = nn.Embedding(seq_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, d_model // ATTENTION_HEAD_DIM, FFN_MULTIPLIER * d_model, dropout=dropout,
            activation="gelu", batch_first=True, norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False)
        for encoder_layer in self.encoder.layers:
            # Dropout stays on the residual and feed-forward paths. Attention-probability dropout is
            # off: on CPU it forces SDPA's math kernel, which stores the L x L score matrix that
            # flash / memory-efficient attention on a GPU never materialises.
            encoder_layer.self_attn.dropout = 0.0
        self.head = nn.Linear(d_model, TRANSFORMER_VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.head(self.encoder(self.tokens(tokens) + self.positions(positions)))


def build_transformer(cfg: JobConfig, width: int) -> nn.Module:
    """Transformer encoder LM with d_model ``width`` (heads of 64), FFN 4 x d_model, seq len input_dim."""
    return TransformerLM(width, cfg.num_layers, cfg.input_dim, cfg.dropout)


ARCHITECTURES: dict[str, Architecture] = {
    "MLP": Architecture(
        build_mlp, params_million=(0.5, 500.0), layer_choices=tuple(range(2, 13)), input_dim=(16, 16_384), input_multiple=1,
        batch_log2=(4, 9), width=(32, 16_384), width_multiple=32, batch_kind="features"),
    "CNN": Architecture(
        build_cnn, params_million=(0.3, 150.0), layer_choices=tuple(range(5, 21)), input_dim=(32, 384), input_multiple=16,
        batch_log2=(3, 9), width=(8, 256), width_multiple=8, batch_kind="image"),
    "ResNet": Architecture(
        build_resnet, params_million=(0.5, 250.0), layer_choices=tuple(RESNET_BLOCKS), input_dim=(32, 384), input_multiple=16,
        batch_log2=(3, 9), width=(8, 256), width_multiple=8, batch_kind="image"),
    "RNN": Architecture(
        build_recurrent, params_million=(1.5, 120.0), layer_choices=RECURRENT_LAYERS, input_dim=RECURRENT_SEQ_LEN, input_multiple=32,
        batch_log2=(3, 9), width=(64, 4096), width_multiple=32, batch_kind="tokens"),
    "LSTM": Architecture(
        build_recurrent, params_million=(1.5, 250.0), layer_choices=RECURRENT_LAYERS, input_dim=RECURRENT_SEQ_LEN, input_multiple=32,
        batch_log2=(3, 9), width=(64, 4096), width_multiple=32, batch_kind="tokens"),
    "GRU": Architecture(
        build_recurrent, params_million=(1.5, 250.0), layer_choices=RECURRENT_LAYERS, input_dim=RECURRENT_SEQ_LEN, input_multiple=32,
        batch_log2=(3, 9), width=(64, 4096), width_multiple=32, batch_kind="tokens"),
    "Transformer": Architecture(  # layers follow from the parameter target (see transformer_depth)
        build_transformer, params_million=(10.0, 1500.0), layer_choices=(), input_dim=(32, 2048), input_multiple=32,
        batch_log2=(2, 8), width=(128, 8192), width_multiple=64, batch_kind="tokens"),
}


# --------------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------------


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _choice(rng: np.random.Generator, shares: dict[str, float]) -> str:
    names = list(shares)
    p = np.array([shares[k] for k in names])
    return names[int(rng.choice(len(names), p=p / p.sum()))]


def _round_to(value: float, multiple: int, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, multiple * round(value / multiple))))


def transformer_depth(params_million: float, aspect_ratio: float) -> int:
    """Layers of a Transformer of ~``params_million`` whose d_model is ``aspect_ratio`` x layers.

    The encoder holds ~12 d^2 parameters per layer; with d = r L that is 12 r^2 L^3.
    """
    layers = (params_million * 1e6 / (12.0 * aspect_ratio**2)) ** (1.0 / 3.0)
    return int(min(TRANSFORMER_LAYERS[1], max(TRANSFORMER_LAYERS[0], round(layers))))


def sample_config(model_type: str, rng: np.random.Generator) -> JobConfig:
    """Draw one configuration of ``model_type``; always the same number of draws, in the same order."""
    arch = ARCHITECTURES[model_type]
    params_million = _log_uniform(rng, *arch.params_million)
    if arch.layer_choices:
        num_layers = int(rng.choice(arch.layer_choices))
    else:
        num_layers = transformer_depth(params_million, _log_uniform(rng, *TRANSFORMER_ASPECT_RATIO))
    input_dim = _round_to(_log_uniform(rng, *arch.input_dim), arch.input_multiple, *arch.input_dim)
    batch_size = int(2 ** rng.integers(arch.batch_log2[0], arch.batch_log2[1] + 1))
    iterations = float(round(_log_uniform(rng, *ITERATIONS_RANGE)))
    precision = _choice(rng, PRECISION_SHARES)
    optimizer = _choice(rng, OPTIMIZER_SHARES)
    learning_rate = float(f"{_log_uniform(rng, *LEARNING_RATE_RANGE):.4g}")
    regularization = bool(rng.random() < REGULARIZATION_SHARE)
    data_augmentation = bool(rng.random() < DATA_AUGMENTATION_SHARE)
    cuda_context_gb = round(float(rng.uniform(*CUDA_CONTEXT_GB)), 4)
    keep_draw = float(rng.random())
    return JobConfig(model_type, params_million, batch_size, input_dim, num_layers, iterations, precision, optimizer,
                     learning_rate, regularization, data_augmentation, cuda_context_gb, keep_draw)


def _meta_params(cfg: JobConfig, width: int) -> int:
    with torch.device("meta"):
        return count_params(ARCHITECTURES[cfg.model_type].builder(cfg, width))


def choose_width(cfg: JobConfig) -> int:
    """The width whose network comes closest to ``cfg.target_params_million``.

    The parameter count is exactly a * w^2 + b * w + c, so three builds on the meta device (free)
    give a, b, c; the root is rounded to the architecture's multiple and clamped to its bounds.
    """
    arch = ARCHITECTURES[cfg.model_type]
    ws = np.array([1, 2, 3], dtype=float) * arch.width_multiple
    a, b, c = np.linalg.solve(np.vander(ws, 3), [_meta_params(cfg, int(w)) for w in ws])
    target = cfg.target_params_million * 1e6 - c
    if abs(a) < 1e-9:  # a two-layer MLP: linear in the width
        root = target / b
    else:  # a target below the smallest network gives a negative discriminant: take the smallest width
        root = (-b + math.sqrt(max(b * b + 4 * a * target, 0.0))) / (2 * a)
    return _round_to(root, arch.width_multiple, *arch.width)


# --------------------------------------------------------------------------------------------------
# One training step and its measurement
# --------------------------------------------------------------------------------------------------


def job_optimizer(cfg: JobConfig, model: nn.Module) -> torch.optim.Optimizer:
    """The job's optimizer (``stepmem.build_optimizer``: weight decay only with regularization, foreach)."""
    return build_optimizer(model.parameters(), cfg.optimizer, cfg.learning_rate, cfg.regularization)


def make_batch(cfg: JobConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """A training batch (inputs, class or token targets) on the current device / mode."""
    kind = ARCHITECTURES[cfg.model_type].batch_kind
    dtype = torch.float64 if cfg.precision == "FP64" else torch.float32
    b = cfg.batch_size
    if kind == "features":
        return torch.randn(b, cfg.input_dim, dtype=dtype), torch.randint(0, MLP_CLASSES, (b,))
    if kind == "image":
        return torch.randn(b, IMAGE_CHANNELS, cfg.input_dim, cfg.input_dim, dtype=dtype), torch.randint(0, IMAGE_CLASSES, (b,))
    vocab = RNN_VOCAB if cfg.model_type in ("RNN", "LSTM", "GRU") else TRANSFORMER_VOCAB
    return torch.randint(0, vocab, (b, cfg.input_dim)), torch.randint(0, vocab, (b, cfg.input_dim))


@dataclass
class Measurement:
    """What one measured training step gives."""

    params: int
    width: int
    peak_bytes: int  # tensor memory at the peak of the second training step
    breakdown_bytes: dict[str, int] = field(default_factory=dict)  # BREAKDOWN columns at that moment
    train_flops: int = 0  # forward + backward of one step
    seconds: float = 0.0


def build_model(cfg: JobConfig, width: int, device: str) -> nn.Module:
    """The job's network on ``device`` ("meta" builds it without allocating), FP64 in float64."""
    with torch.device(device):
        model = ARCHITECTURES[cfg.model_type].builder(cfg, width)
    return model.to(torch.float64) if cfg.precision == "FP64" else model


def _breakdown(snapshot: dict[str, int]) -> dict[str, int]:
    return {column: sum(snapshot.get(key, 0) for key in keys) for column, keys in BREAKDOWN.items()}


def measure(cfg: JobConfig, width: int | None = None, tracker_class: type[MemTracker] = PeakMemTracker,
            full_first_step: bool = False) -> Measurement:
    """Build the network under fake tensors, run two training steps, measure the second one."""
    start = time.perf_counter()
    width = choose_width(cfg) if width is None else width
    model = build_model(cfg, width, "meta")
    params = count_params(model)
    step = measure_step(model, lambda m: job_optimizer(cfg, m), lambda: make_batch(cfg), cfg.precision, tracker_class,
                        full_first_step)
    snapshot = step.peak_by_category
    return Measurement(params, width, step.peak_bytes, _breakdown(snapshot), step.flops, time.perf_counter() - start)


# --------------------------------------------------------------------------------------------------
# The data set
# --------------------------------------------------------------------------------------------------


@dataclass
class TypeTally:
    """Candidates of one model type and what became of them."""

    kept: int = 0
    skipped_large: int = 0
    skipped_small: int = 0
    failed: int = 0
    seconds: float = 0.0


def job_row(cfg: JobConfig, m: Measurement) -> dict[str, object]:
    """The CSV row of a measured job (without job_id)."""
    tensor_peak_gb = m.peak_bytes / GB
    row: dict[str, object] = {
        "model_type": cfg.model_type,
        "params_million": f"{m.params / 1e6:.6f}",
        "batch_size": cfg.batch_size,
        "input_dim": cfg.input_dim,
        "num_layers": cfg.num_layers,
        "iterations": f"{cfg.iterations:.1f}",
        "precision": cfg.precision,
        "optimizer": cfg.optimizer,
        "learning_rate": f"{cfg.learning_rate:.4g}",
        "regularization": str(cfg.regularization).lower(),
        "data_augmentation": str(cfg.data_augmentation).lower(),
        "peak_gpu_mem_gb": f"{tensor_peak_gb + cfg.cuda_context_gb:.6f}",
        "train_gflop_per_iter": f"{m.train_flops / GFLOP:.6f}",
        "tensor_peak_gb": f"{tensor_peak_gb:.6f}",
        "cuda_context_gb": f"{cfg.cuda_context_gb:.4f}",
    }
    row.update({column: f"{value / GB:.6f}" for column, value in m.breakdown_bytes.items()})
    row["model_width"] = m.width
    row["measure_seconds"] = f"{m.seconds:.3f}"
    return row


@dataclass
class Candidate:
    """A sampled configuration and its measurement (or why it could not be measured)."""

    cfg: JobConfig
    measurement: Measurement | None
    error: str | None = None


def evaluate_candidate(model_type: str, seed: int, index: int) -> Candidate:
    """Sample candidate ``index`` of ``model_type`` from its own generator and measure it.

    Each candidate has its own generator, ``default_rng([seed, type index, candidate index])``, so
    the result does not depend on which worker measures it or in what order.
    """
    cfg = sample_config(model_type, np.random.default_rng([seed, MODEL_TYPES.index(model_type), index]))
    try:
        return Candidate(cfg, measure(cfg))
    except Exception as exc:  # an op PyTorch cannot run under fake tensors: counted and reported
        return Candidate(cfg, None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")


def candidates_in_order(model_type: str, seed: int, executor: Executor | None, window: int) -> Iterator[Candidate]:
    """Candidates 0, 1, 2, ... of ``model_type``, measured up to ``window`` ahead on ``executor``."""
    if executor is None:
        for index in itertools.count():
            yield evaluate_candidate(model_type, seed, index)
        return
    pending: deque[Future[Candidate]] = deque()
    index = 0
    try:
        while True:
            while len(pending) < window:
                pending.append(executor.submit(evaluate_candidate, model_type, seed, index))
                index += 1
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


def measure_type(model_type: str, n_jobs: int, seed: int, executor: Executor | None, window: int,
                 log: Callable[[str], None]) -> tuple[list[dict[str, object]], TypeTally]:
    """Measure candidates of one model type, in order, until ``n_jobs`` are kept."""
    rows: list[dict[str, object]] = []
    tally = TypeTally()
    start = time.perf_counter()
    candidates = candidates_in_order(model_type, seed, executor, window)
    with contextlib.closing(candidates):
        for candidate in itertools.islice(candidates, n_jobs * MAX_CANDIDATES_PER_JOB):
            m = candidate.measurement
            if m is None:
                tally.failed += 1
                log(f"  {model_type}: measurement failed ({candidate.error}) for {candidate.cfg}")
            elif m.peak_bytes / GB > MAX_TENSOR_PEAK_GB:
                tally.skipped_large += 1
            elif m.peak_bytes / GB < SMALL_TENSOR_PEAK_GB and candidate.cfg.keep_draw >= SMALL_JOB_KEEP_PROBABILITY:
                tally.skipped_small += 1
            else:
                rows.append(job_row(candidate.cfg, m))
                if len(rows) == n_jobs:
                    break
                if len(rows) % PROGRESS_EVERY == 0:
                    log(f"  {model_type}: {len(rows)}/{n_jobs} kept ({time.perf_counter() - start:.0f} s)")
    tally.kept = len(rows)
    tally.seconds = time.perf_counter() - start
    return rows, tally


def write_csv(rows: list[dict[str, object]], path: Path) -> None:
    """Write the rows with sequential job ids; LF line ends so the bytes do not depend on the OS."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for i, row in enumerate(rows):
            writer.writerow({"job_id": f"meas-{i:06d}", **row})


def init_worker() -> None:
    """Process set-up for the main process and every worker: quiet warnings, one thread, SDPA FLOPs."""
    warnings.filterwarnings("ignore", category=UserWarning)  # e.g. autocast's notes about CPU dtypes
    torch.set_num_threads(1)  # fake tensors do no arithmetic; the self-check's real runs are tiny
    register_cpu_attention_flops()


def generate(n_per_type: int, seed: int, out: Path, workers: int, log: Callable[[str], None] = print) -> dict[str, TypeTally]:
    """Measure ``n_per_type`` jobs of every model type on ``workers`` processes and write ``out``."""
    log(f"torch {torch.__version__}, seed {seed}, {n_per_type} jobs per type, {workers} worker(s) -> {out}")
    rows: list[dict[str, object]] = []
    tallies: dict[str, TypeTally] = {}
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        executor = None
        if workers > 1:
            context = multiprocessing.get_context("spawn")
            executor = stack.enter_context(ProcessPoolExecutor(workers, mp_context=context, initializer=init_worker))
        for model_type in MODEL_TYPES:
            type_rows, tally = measure_type(model_type, n_per_type, seed, executor, WINDOW_PER_WORKER * workers, log)
            rows += type_rows
            tallies[model_type] = tally
            log(f"{model_type:<11} kept {tally.kept}, skipped {tally.skipped_large} over {MAX_TENSOR_PEAK_GB:.0f} GB and "
                f"{tally.skipped_small} under {SMALL_TENSOR_PEAK_GB:.0f} GB, {tally.failed} failed, {tally.seconds:.0f} s "
                f"(total {time.perf_counter() - start:.0f} s)")
    write_csv(rows, out)
    log(f"wrote {len(rows)} rows to {out} in {time.perf_counter() - start:.0f} s")
    return tallies


# --------------------------------------------------------------------------------------------------
# Self-checks
# --------------------------------------------------------------------------------------------------

# Small configurations measured both ways: (model_type, precision, optimizer, regularization, batch, input_dim, layers, width)
REAL_CHECK_CONFIGS = (
    ("MLP", "FP32", "Adam", False, 64, 512, 4, 1024),
    ("MLP", "BF16", "SGD", True, 128, 784, 3, 512),
    ("MLP", "FP64", "AdamW", True, 32, 256, 3, 256),
    ("CNN", "FP32", "SGD", False, 8, 32, 6, 16),
    ("CNN", "BF16", "AdamW", True, 8, 64, 8, 16),
    ("ResNet", "FP32", "Adam", False, 4, 32, 18, 16),
    ("ResNet", "FP16", "SGD", True, 4, 96, 50, 16),
    ("RNN", "FP32", "RMSprop", False, 8, 32, 2, 128),
    ("LSTM", "BF16", "Adam", True, 8, 32, 2, 128),
    ("GRU", "FP32", "Adagrad", True, 8, 32, 3, 96),
    ("Transformer", "FP32", "AdamW", True, 4, 64, 2, 128),
    ("Transformer", "BF16", "Adam", False, 4, 128, 2, 256),
    ("Transformer", "FP64", "SGD", False, 2, 64, 2, 128),
)


def _check_config(model_type: str, precision: str, optimizer: str, regularization: bool, batch: int, input_dim: int,
                  num_layers: int) -> JobConfig:
    return JobConfig(model_type, 0.0, batch, input_dim, num_layers, 1e4, precision, optimizer, 1e-3, regularization, False, 0.5, 0.0)


def _storage_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors``."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


def _allocator_peak_delta(prof: torch.profiler.profile) -> int:
    """Peak of bytes allocated minus freed while ``prof`` ran, from the CPU allocator's own records."""
    allocations: list[tuple[int, int]] = []

    def walk(event: object) -> None:
        if event.tag == torch._C._profiler._EventType.Allocation:  # type: ignore[attr-defined]
            allocations.append((event.start_time_ns, event.extra_fields.alloc_size))  # type: ignore[attr-defined]
        for child in event.children:  # type: ignore[attr-defined]
            walk(child)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    running = peak = 0
    for _, size in sorted(allocations, key=lambda a: a[0]):
        running += size
        peak = max(peak, running)
    return peak


def measure_real(cfg: JobConfig, width: int) -> tuple[int, int, int]:
    """The same two steps on real CPU tensors: (MemTracker peak, CPU allocator peak, FLOPs)."""
    torch.manual_seed(0)
    with training_backends(cfg.precision):
        model = build_model(cfg, width, "cpu").train()
        optimizer = job_optimizer(cfg, model)
        inputs, targets = make_batch(cfg)
        training_step(model, optimizer, inputs, targets, cfg.precision)
        live = [*model.parameters(), *model.buffers(), inputs, targets,
                *(v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor))]
        baseline = _storage_bytes(live)
        tracker = MemTracker()
        tracker.track_external(model, optimizer, inputs, targets)
        flop_counter = FlopCounterMode(display=False)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
            with tracker:
                training_step(model, optimizer, inputs, targets, cfg.precision, flop_counter)
    return snapshot_by_name(tracker)[TOTAL_KEY], baseline + _allocator_peak_delta(prof), int(flop_counter.get_total_flops())


def check_linear_flops() -> bool:
    """FlopCounterMode gives 2 * in * out * batch for a Linear forward."""
    batch, fan_in, fan_out = 32, 300, 70
    with FakeTensorMode():
        layer, x = nn.Linear(fan_in, fan_out), torch.randn(batch, fan_in)
        with FlopCounterMode(display=False) as counter:
            layer(x)
    got, want = counter.get_total_flops(), 2 * fan_in * fan_out * batch
    verdict = "ok" if got == want else "FAIL"
    print(f"Linear({fan_in}, {fan_out}) forward on a batch of {batch}: {got} FLOPs, 2*in*out*batch = {want}: {verdict}")
    return got == want


def check_adam_bytes_per_param() -> bool:
    """An FP32 MLP trained with Adam holds >= 16 bytes per parameter (weights, grads, 2 moments)."""
    cfg = _check_config("MLP", "FP32", "Adam", False, 64, 1024, 4)
    m = measure(cfg, width=2048)
    b = m.breakdown_bytes
    per_param = (b["weights_gb"] + b["grads_gb"] + b["optimizer_gb"]) / m.params
    ok = per_param >= 16.0
    print(f"FP32 MLP + Adam, {m.params / 1e6:.2f} M params: weights+grads+optimizer = {per_param:.2f} bytes/param "
          f"(>= 16: {'ok' if ok else 'FAIL'}; above 16 = foreach temporaries at the peak inside optimizer.step)")
    return ok


def check_fake_against_real() -> bool:
    """Fake-tensor measurements against real CPU runs of the same small configurations."""
    print(f"{'config':<36} {'fake MB':>10} {'real MB':>10} {'alloc MB':>10} {'real/fake':>9} {'alloc/fake':>10} {'FLOPs':>6}")
    ok = True
    for model_type, precision, optimizer, regularization, batch, input_dim, num_layers, width in REAL_CHECK_CONFIGS:
        cfg = _check_config(model_type, precision, optimizer, regularization, batch, input_dim, num_layers)
        fake = measure(cfg, width)
        real_tracker, real_allocator, real_flops = measure_real(cfg, width)
        same_flops = real_flops == fake.train_flops
        ok &= same_flops and abs(real_tracker / fake.peak_bytes - 1) < 0.01
        name = f"{model_type} {precision} {optimizer}{' reg' if regularization else ''} w{width}"
        print(f"{name:<36} {fake.peak_bytes / 1e6:>10.2f} {real_tracker / 1e6:>10.2f} {real_allocator / 1e6:>10.2f} "
              f"{real_tracker / fake.peak_bytes:>9.4f} {real_allocator / fake.peak_bytes:>10.4f} {'same' if same_flops else 'DIFF':>6}")
    return ok


# Larger configurations for the two speed-ups (too big for real runs here): (config, width)
SHORTCUT_CHECK_CONFIGS = (
    (("ResNet", "FP16", "SGD", True, 32, 224, 50), 64),
    (("ResNet", "FP32", "Adam", False, 16, 128, 152), 32),
    (("LSTM", "BF16", "Adagrad", True, 64, 128, 3), 512),
    (("Transformer", "BF16", "AdamW", True, 8, 512, 12), 768),
    (("CNN", "FP64", "RMSprop", False, 32, 128, 13), 64),
)


def check_shortcuts() -> bool:
    """PeakMemTracker + zero-gradient first step give what MemTracker + a full first step give."""
    ok = True
    for args, width in SHORTCUT_CHECK_CONFIGS:
        cfg = _check_config(*args)
        fast = measure(cfg, width)
        slow = measure(cfg, width, tracker_class=MemTracker, full_first_step=True)
        same = fast.peak_bytes == slow.peak_bytes and fast.train_flops == slow.train_flops
        ok &= same
        print(f"{' '.join(map(str, args[:3]))} w{width}: peak {fast.peak_bytes / GB:.4f} vs {slow.peak_bytes / GB:.4f} GB, "
              f"{fast.train_flops / GFLOP:.2f} vs {slow.train_flops / GFLOP:.2f} GFLOP, "
              f"{fast.seconds:.1f} vs {slow.seconds:.1f} s: {'same' if same else 'DIFFERENT'}")
    return ok


# Activation-heavy configurations for the mixed-precision check: (config without precision, width, max ratio)
MIXED_PRECISION_CHECK_CONFIGS = (
    (("MLP", "Adam", False, 4096, 1024, 6), 1024, 0.7),
    (("CNN", "SGD", False, 32, 128, 10), 32, 0.7),
    (("Transformer", "Adam", False, 16, 512, 6), 512, 0.9),  # fp32 residual stream and fp32 loss
)


def check_mixed_precision() -> bool:
    """Autocast really runs the forward in half precision: activations shrink, fp32 weights do not."""
    ok = True
    for (model_type, optimizer, regularization, batch, input_dim, num_layers), width, max_ratio in MIXED_PRECISION_CHECK_CONFIGS:
        fp32 = measure(_check_config(model_type, "FP32", optimizer, regularization, batch, input_dim, num_layers), width)
        for precision in AUTOCAST_DTYPES:
            half = measure(_check_config(model_type, precision, optimizer, regularization, batch, input_dim, num_layers), width)
            act = half.breakdown_bytes["activations_gb"] / fp32.breakdown_bytes["activations_gb"]
            weights = half.breakdown_bytes["weights_gb"] / fp32.breakdown_bytes["weights_gb"]
            ok &= act < max_ratio and weights == 1.0
            print(f"{model_type} {precision} vs FP32: activations at the peak x{act:.3f} (< {max_ratio}), "
                  f"weights x{weights:.3f} (fp32 master weights)")
    return ok


def self_check() -> bool:
    """Run every check; True when all pass."""
    results = [check_linear_flops(), check_adam_bytes_per_param(), check_mixed_precision(), check_shortcuts(),
               check_fake_against_real()]
    print("all checks passed" if all(results) else "SOME CHECKS FAILED")
    return all(results)


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-per-type", type=int, default=None, help=f"jobs kept per model type (default {DEFAULT_N_PER_TYPE})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    parser.add_argument("--out", type=Path, default=None, help=f"output CSV (default {DEFAULT_OUT}; with --quick {QUICK_OUT})")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {QUICK_N_PER_TYPE} jobs per type unless --n-per-type (about a minute)")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                        help=f"processes measuring in parallel (default {DEFAULT_WORKERS}); the CSV does not depend on it")
    parser.add_argument("--self-check", action="store_true", help="run the measurement checks instead of generating")
    args = parser.parse_args(argv)
    if args.n_per_type is None:
        args.n_per_type = QUICK_N_PER_TYPE if args.quick else DEFAULT_N_PER_TYPE
    if args.out is None:  # a smoke run never overwrites the shipped CSV unless told to
        args.out = QUICK_OUT if args.quick else DEFAULT_OUT
    if args.n_per_type < 1 or args.workers < 1:
        parser.error("--n-per-type and --workers must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    init_worker()
    if args.self_check:
        return 0 if self_check() else 1
    generate(args.n_per_type, args.seed, args.out, args.workers, log=lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
