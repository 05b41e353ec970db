"""One training step traced on a zoo architecture (`zoo.py`'s catalogue): its peak tensor memory and FLOPs.

``trace`` builds the network on the meta device and measures one training step under fake tensors, exactly
as ``tests/data/make_measured_jobs.py`` does (the shared core is ``stepmem.py``); ``build_network`` builds
it on a real device too (``tests/data/measure_gpu_archs.py``).

This module imports only the standard library at load time; torch, torchvision, timm and transformers are
imported on first use. It also loads by file path (``importlib``) on a machine that has torch, torchvision
and transformers but not gpucast: its siblings (``zoo.py``, ``stepmem.py``) are then loaded by path too
(`sibling`).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IMAGE_CLASSES = 1000
IMAGE_CHANNELS = 3
LEARNING_RATE = 1e-3  # the traced optimizer's (no effect on memory or FLOPs)


def sibling(name: str) -> types.ModuleType:
    """The module `name` of gpucast.tasks.learn (``zoo``, ``stepmem``), or the sibling file when this one was
    loaded by path (the machine may not have gpucast)."""
    if __package__:
        return importlib.import_module(f"gpucast.tasks.learn.{name}")
    key = f"gpucast_zoo_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[key] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[key]


zoo = sibling("zoo")


@dataclass(frozen=True)
class TraceRequest:
    """One training configuration to trace."""

    arch: str  # canonical name
    batch_size: int
    input_dim: int | None  # None -> the arch's default
    precision: str  # "FP32" | "FP16" | "BF16" (autocast mixed precision) | "FP64"
    optimizer: str | None  # "Adam" | "AdamW" | "SGD" | "RMSprop" | "Adagrad"; None or unknown -> Adam
    regularization: bool | None = None  # weight decay in the optimizer; None -> none


@dataclass(frozen=True)
class Trace:
    """What one traced training step gives."""

    arch: str
    params: int  # parameters of the built network
    layers: int  # conv/linear layers of a CNN (shortcut projections not counted), transformer blocks otherwise
    input_dim: int  # the input size used
    peak_bytes: int  # tensor memory at the peak of one training step
    flops: int  # forward + backward FLOPs of one step
    seconds: float  # wall time of the trace


def step_core() -> types.ModuleType:
    """The tracing core (``stepmem``) the zoo uses: ``gpucast.tasks.learn.stepmem``, or the sibling file when loaded by path."""
    return sibling("stepmem")


def _import_torchvision() -> types.ModuleType:
    """``torchvision.models``, also where torchvision's compiled ops do not load.

    A torchvision wheel built for another torch (e.g. a CUDA build beside CPU torch) fails at import
    while registering its detection ops (``operator torchvision::nms does not exist``). The zoo needs
    only the classification models, which are plain torch: the op registrations are skipped then.
    """
    try:
        import torchvision.models
    except RuntimeError as exc:
        if "torchvision::" not in str(exc):
            raise
        for module in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[module]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
        import torchvision.models
    return torchvision.models


_BLOCK_CLASSES = ("EncoderBlock", "SwinTransformerBlock", "SwinTransformerBlockV2", "MaxVitLayer")
_SHORTCUT_MODULES = ("downsample", "shortcut")


def _image_layers(model: Any, model_type: str) -> int:
    """Depth as a site logs it: transformer blocks, or conv + linear layers off the shortcut paths
    (resnet50 -> 50, vgg16 -> 16, densenet121 -> 121)."""
    from torch import nn
    if model_type == "Transformer":
        return sum(type(m).__name__ in _BLOCK_CLASSES for m in model.modules())
    return sum(isinstance(m, nn.Conv2d | nn.Linear) and not any(part in _SHORTCUT_MODULES for part in name.split("."))
               for name, m in model.named_modules())


_TIMM_SHORTCUTS = ("skip",)  # timm's Xception names its shortcut projection "skip"


def _build_timm(arch: zoo.Arch, build: zoo.Recipe, input_dim: int, device: str) -> tuple[Any, int]:
    """A timm classifier on ``device`` (``pretrained=False``: built from code, nothing downloaded), and its depth."""
    import torch
    from torch import nn
    _import_torchvision()  # timm imports torchvision: the same guard against a mismatched build
    import timm
    kwargs = {"img_size": input_dim} if arch.model_type == "Transformer" else {}
    with torch.device(device):
        model = timm.create_model(build.target, pretrained=False, num_classes=IMAGE_CLASSES, **kwargs)
    if arch.model_type == "Transformer":
        return model, len(model.blocks)
    skipped = (*_SHORTCUT_MODULES, *_TIMM_SHORTCUTS)
    return model, sum(isinstance(m, nn.Conv2d | nn.Linear) and not any(part in skipped for part in name.split("."))
                      for name, m in model.named_modules())


def _build_image(arch: zoo.Arch, build: zoo.Recipe, input_dim: int, device: str) -> tuple[Any, int]:
    """A torchvision (or timm) classifier on ``device``, and its depth."""
    import torch
    if build.library == "timm":
        return _build_timm(arch, build, input_dim, device)
    models = _import_torchvision()
    kwargs = dict(build.kwargs)
    if arch.family == "vit":
        kwargs["image_size"] = input_dim
    elif arch.family == "maxvit":
        kwargs["input_size"] = (input_dim, input_dim)
    placement = _tensors_on_meta() if device == "meta" and arch.family in _CPU_ARITHMETIC_FAMILIES else torch.device(device)
    with placement:
        model = models.get_model(build.target, weights=None, **kwargs)
    return model, _image_layers(model, arch.model_type)


# Builders that compute their layer widths with torch tensors (RegNet's BlockParams: arange, round,
# tolist) cannot run with meta as the default device; for them only parameters and buffers go to meta.
_CPU_ARITHMETIC_FAMILIES = ("regnet",)


@contextlib.contextmanager
def _tensors_on_meta() -> Iterator[None]:
    """Put every parameter and buffer a constructor registers on the meta device (default device unchanged).

    A parameter is created on the CPU (``torch.empty``: no initialisation, pages untouched) and moved
    before the constructor initialises it, so nothing real is computed.
    """
    from torch import nn
    register_parameter, register_buffer = nn.Module.register_parameter, nn.Module.register_buffer

    def on_meta_parameter(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register_parameter(module, name, param)
        if param is not None:
            module._parameters[name] = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)

    def on_meta_buffer(module: nn.Module, name: str, tensor: Any, persistent: bool = True) -> None:
        register_buffer(module, name, None if tensor is None else tensor.to("meta"), persistent)

    nn.Module.register_parameter, nn.Module.register_buffer = on_meta_parameter, on_meta_buffer  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.register_parameter, nn.Module.register_buffer = register_parameter, register_buffer  # type: ignore[method-assign]


def text_config(arch: zoo.Arch, build: zoo.Recipe, input_dim: int) -> Any:
    """The transformers config of ``arch`` (SDPA attention where the model has it)."""
    import transformers
    _import_torchvision()  # transformers imports torchvision when it is installed
    config = getattr(transformers, build.config)(**dict(build.kwargs))
    if build.max_tokens_key and input_dim > getattr(config, build.max_tokens_key):
        raise ValueError(f"{arch.name} takes at most {getattr(config, build.max_tokens_key)} tokens, got {input_dim}")
    config._attn_implementation = "eager" if arch.family in ("xlnet", "t5") else "sdpa"
    return config


def _build_text(arch: zoo.Arch, build: zoo.Recipe, input_dim: int, device: str) -> tuple[Any, int, int]:
    """A transformers language model on ``device``, its transformer blocks and its vocabulary."""
    import torch
    import transformers
    config = text_config(arch, build, input_dim)
    with torch.device(device):
        model = getattr(transformers, build.target)(config)
    layers = config.num_hidden_layers
    if build.seq2seq:
        layers += getattr(config, "num_decoder_layers", None) or config.decoder_layers
    return model, layers, config.vocab_size


def _batch_maker(arch: zoo.Arch, build: zoo.Recipe, request: TraceRequest, input_dim: int, vocab: int) -> Any:
    """A function making the training batch (inputs, targets) inside fake-tensor mode."""
    import torch

    def image_batch() -> tuple[Any, Any]:
        dtype = torch.float64 if request.precision == "FP64" else torch.float32
        images = torch.randn(request.batch_size, IMAGE_CHANNELS, input_dim, input_dim, dtype=dtype)
        return images, torch.randint(0, IMAGE_CLASSES, (request.batch_size,))

    def text_batch() -> tuple[Any, Any]:
        shape = (request.batch_size, input_dim)
        inputs = {"input_ids": torch.randint(0, vocab, shape)}
        if build.seq2seq:
            inputs["decoder_input_ids"] = torch.randint(0, vocab, shape)
        return inputs, torch.randint(0, vocab, shape)

    return image_batch if arch.kind == "image" else text_batch


def _check_request(request: TraceRequest) -> zoo.Arch:
    if request.arch not in zoo.ARCHITECTURES:
        raise KeyError(f"unknown architecture {request.arch!r}: the zoo builds {len(zoo.ARCHITECTURES)} (see zoo.ARCHITECTURES)")
    if request.precision not in zoo.PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(zoo.PRECISIONS)}, got {request.precision!r}")
    if request.batch_size < 1 or (request.input_dim is not None and request.input_dim < 1):
        raise ValueError(f"batch_size and input_dim must be at least 1, got {request.batch_size} and {request.input_dim}")
    return zoo.ARCHITECTURES[request.arch]


@dataclass(frozen=True)
class Network:
    """A built network of the zoo, ready for a training step."""

    model: Any  # torch.nn.Module, float64 for FP64
    layers: int
    input_dim: int
    make_batch: Any  # () -> (inputs, targets) on torch's current default device


def build_network(request: TraceRequest, device: str = "meta") -> Network:
    """The request's network on ``device`` ("meta": no memory; "cuda": a real one) and its batch maker."""
    arch = _check_request(request)
    build = zoo.RECIPES[arch.name]
    input_dim = request.input_dim or arch.default_input_dim
    vocab = 0
    if arch.kind == "image":
        model, layers = _build_image(arch, build, input_dim, device)
    else:
        model, layers, vocab = _build_text(arch, build, input_dim, device)
    if request.precision == "FP64":
        model = model.double()
    return Network(model, layers, input_dim, _batch_maker(arch, build, request, input_dim, vocab))


def traced_optimizer(name: str | None) -> str:
    """The optimizer a request is traced with: its own when the zoo knows it, else Adam."""
    stepmem = step_core()
    return name if name in stepmem.OPTIMIZERS else stepmem.DEFAULT_OPTIMIZER


def trace(request: TraceRequest) -> Trace:
    """Build the network on the meta device and measure one training step under fake tensors.

    Raises KeyError for an unknown arch, ValueError for a bad request; any other exception of a
    failed trace propagates (the caller records it). It does not bound its own time.
    """
    start = time.perf_counter()
    stepmem = step_core()
    stepmem.register_cpu_attention_flops()
    network = build_network(request)
    params = stepmem.count_params(network.model)
    optimizer = traced_optimizer(request.optimizer)
    measured = stepmem.measure_step(
        network.model,
        lambda m: stepmem.build_optimizer(m.parameters(), optimizer, LEARNING_RATE, bool(request.regularization)),
        network.make_batch, request.precision)
    return Trace(request.arch, params, network.layers, network.input_dim, measured.peak_bytes, measured.flops,
                 time.perf_counter() - start)
