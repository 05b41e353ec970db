"""One training step's tensor memory and FLOPs, measured with PyTorch's own tools under fake tensors.

The tracing core shared by the model zoo (``zoo_trace.py``) and the measured set's script
(``tests/data/make_measured_jobs.py``, whose README explains each choice): the network is built on
the meta device, moved into ``FakeTensorMode`` (tensors with shapes, dtypes and storage sizes but no
data), the optimizer's state is created by a first step on zero gradients, and the second step
(forward and loss under autocast for FP16/BF16, backward, ``optimizer.step()``, ``zero_grad``) runs
under ``MemTracker`` (peak tensor memory by category) and ``FlopCounterMode`` (forward + backward FLOPs).

Imports only the standard library and torch, so ``zoo_trace.py`` can load it by file path on a machine
that has torch but not gpucast.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import (
    FlopCounterMode,
    flop_registry,
    register_flop_formula,
    sdpa_backward_flop_count,
    sdpa_flop_count,
)

AUTOCAST_DTYPES = {"FP16": torch.float16, "BF16": torch.bfloat16}  # mixed precision: autocast to these
OPTIMIZERS = ("Adam", "AdamW", "SGD", "RMSprop", "Adagrad")
DEFAULT_OPTIMIZER = "Adam"  # what an unknown or missing optimizer name is traced as
WEIGHT_DECAY = {"Adam": 1e-4, "AdamW": 1e-2, "SGD": 5e-4, "RMSprop": 1e-4, "Adagrad": 1e-4}
SGD_MOMENTUM = 0.9  # SGD keeps one state tensor (the momentum buffer)
TOTAL_KEY = "Total"  # MemTracker's key of the total in a snapshot

Batch = tuple[torch.Tensor | dict[str, torch.Tensor], torch.Tensor]  # (inputs, targets)


@dataclass(frozen=True)
class StepMeasurement:
    """The peak snapshot of one training step (bytes per MemTracker category) and its FLOPs."""

    peak_by_category: dict[str, int]  # MemTracker categories ("Parameter", "Activation", ...) and "Total"
    flops: int  # forward + backward

    @property
    def peak_bytes(self) -> int:
        return self.peak_by_category[TOTAL_KEY]


def count_params(model: nn.Module) -> int:
    """Trainable parameters of ``model`` (a tied weight counts once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def build_optimizer(params: Iterable[nn.Parameter], name: str, learning_rate: float, regularization: bool) -> torch.optim.Optimizer:
    """The job's optimizer; weight decay only with regularization; ``foreach=True`` as on CUDA."""
    decay = WEIGHT_DECAY[name] if regularization else 0.0
    if name == "SGD":
        return torch.optim.SGD(params, lr=learning_rate, momentum=SGD_MOMENTUM, weight_decay=decay, foreach=True)
    optimizer_class = {"Adam": torch.optim.Adam, "AdamW": torch.optim.AdamW, "RMSprop": torch.optim.RMSprop,
                       "Adagrad": torch.optim.Adagrad}[name]
    return optimizer_class(params, lr=learning_rate, weight_decay=decay, foreach=True)


def logits_of(model: nn.Module, inputs: torch.Tensor | dict[str, torch.Tensor]) -> torch.Tensor:
    """The network's logits: ``model(x)``, or ``model(**inputs).logits`` for a Hugging Face model."""
    out = model(**inputs) if isinstance(inputs, dict) else model(inputs)
    return getattr(out, "logits", out)


def training_step(model: nn.Module, optimizer: torch.optim.Optimizer, inputs: torch.Tensor | dict[str, torch.Tensor],
                  targets: torch.Tensor, precision: str, flop_counter: FlopCounterMode | None = None,
                  device_type: str = "cpu") -> None:
    """Forward and loss (under autocast for FP16/BF16), backward, optimizer step, zero_grad."""
    autocast_dtype = AUTOCAST_DTYPES.get(precision)
    with flop_counter if flop_counter is not None else contextlib.nullcontext():
        with torch.autocast(device_type, dtype=autocast_dtype or torch.bfloat16, enabled=autocast_dtype is not None):
            logits = logits_of(model, inputs)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


@contextlib.contextmanager
def training_backends(precision: str) -> Iterator[None]:
    """Kernel choices of a measured step: oneDNN off (PyTorch's own, countable recurrences); math SDPA for FP64."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(_onednn_off())
        if precision == "FP64":
            stack.enter_context(sdpa_kernel(SDPBackend.MATH))
        yield


def _onednn_off() -> contextlib.AbstractContextManager:
    """oneDNN off, its TF32 setting left as it is (`allow_tf32=None`, where this PyTorch has the argument): setting it
    at all, even to its own value, makes a PyTorch without Intel GPU support warn "TF32 acceleration on top of oneDNN
    is available for Intel GPUs" once in every traced process, which nobody can act on; with oneDNN off it changes
    nothing."""
    keep_tf32 = {"allow_tf32": None} if "allow_tf32" in inspect.signature(torch.backends.mkldnn.flags).parameters else {}
    return torch.backends.mkldnn.flags(enabled=False, **keep_tf32)


def register_cpu_attention_flops() -> None:
    """Count the CPU flash-attention kernels with PyTorch's own SDPA FLOP formulas.

    ``FlopCounterMode`` knows the CUDA flash / memory-efficient / cuDNN SDPA kernels but not
    ``_scaled_dot_product_flash_attention_for_cpu``; without this it would count no attention FLOPs.
    """
    aten = torch.ops.aten
    forward, backward = aten._scaled_dot_product_flash_attention_for_cpu, aten._scaled_dot_product_flash_attention_for_cpu_backward
    if forward not in flop_registry:
        register_flop_formula(forward)(
            lambda query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs: sdpa_flop_count(
                query_shape, key_shape, value_shape))
    if backward not in flop_registry:
        register_flop_formula(backward)(
            lambda grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs: sdpa_backward_flop_count(
                grad_out_shape, query_shape, key_shape, value_shape))


def snapshot_by_name(tracker: MemTracker) -> dict[str, int]:
    """The tracker's peak snapshot of the CPU device, keyed by category name."""
    snapshot = tracker.get_tracker_snapshot("peak").get(torch.device("cpu"), {})
    return {getattr(key, "value", key): int(value) for key, value in snapshot.items()}


class PeakMemTracker(MemTracker):
    """``MemTracker`` keeping only the whole-step peak.

    After every op ``MemTracker`` also refreshes a peak snapshot for each active module, which costs
    O(modules) per op (most of the run time of a ResNet-152). Storage tracking and categorisation are
    unchanged; ``make_measured_jobs.py --self-check`` confirms the peak equals plain ``MemTracker``'s.
    """

    def _update_peak_stats(self, peak_state: object) -> None:
        for device, snapshot in self._curr_mem_snap.items():
            if snapshot[TOTAL_KEY] > self._peak_mem.get(device, 0):
                self._peak_mem[device] = snapshot[TOTAL_KEY]
                self._peak_mem_snap[device] = dict(snapshot)


def create_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """The first training step as far as memory is concerned: ``optimizer.step()`` creates its state.

    The state depends only on the parameters, so zero gradients stand in for a forward and backward
    pass (half the cost); ``--self-check`` confirms the second step measures the same either way.
    """
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def batch_tensors(inputs: torch.Tensor | dict[str, torch.Tensor], targets: torch.Tensor) -> list[torch.Tensor]:
    """The tensors of a batch, for ``MemTracker.track_external``."""
    return [*(inputs.values() if isinstance(inputs, dict) else [inputs]), targets]


def measure_step(model: nn.Module, make_optimizer: Callable[[nn.Module], torch.optim.Optimizer],
                 make_batch: Callable[[], Batch], precision: str, tracker_class: type[MemTracker] = PeakMemTracker,
                 full_first_step: bool = False) -> StepMeasurement:
    """Move the meta-device ``model`` into fake tensors, run two training steps, measure the second.

    ``make_optimizer`` and ``make_batch`` are called inside ``FakeTensorMode``. ``full_first_step``
    runs a real first step instead of the zero-gradient shortcut (for the self-check).
    """
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)  # only for to_empty: meta -> fake CPU tensors
    with fake_mode, training_backends(precision):
        model.to_empty(device="cpu")
        fake_mode.allow_non_fake_inputs = False
        model.train()
        optimizer = make_optimizer(model)
        inputs, targets = make_batch()
        if full_first_step:
            training_step(model, optimizer, inputs, targets, precision)
        else:
            create_optimizer_state(model, optimizer)
        tracker = tracker_class()
        tracker.track_external(model, optimizer, *batch_tensors(inputs, targets))
        flop_counter = FlopCounterMode(display=False)
        with tracker:
            training_step(model, optimizer, inputs, targets, precision, flop_counter)
    return StepMeasurement(snapshot_by_name(tracker), int(flop_counter.get_total_flops()))
