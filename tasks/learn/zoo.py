"""The model zoo: named real architectures built from code alone, and one training step traced on them.

Image nets are torchvision's ``models.get_model(name, weights=None)`` and timm's (PyTorch Image Models)
``timm.create_model(name, pretrained=False)``; text nets are Hugging Face
``transformers`` models built from their config classes with the published sizes (a language-model
head on every token), never downloaded. ``trace`` builds one on the meta device and measures one
training step's peak tensor memory and FLOPs under fake tensors, exactly as
``tests/data/make_measured_jobs.py`` does (the shared core is ``stepmem.py``).

This module imports only the standard library at load time (``canonical`` and ``ARCHITECTURES``
cost nothing); torch, torchvision, timm and transformers are imported inside ``trace``. It also loads by
file path (``importlib``) on a machine that has torch, torchvision and transformers but not gpucast.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import re
import sys
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

FAMILIES = (
    "alexnet", "vgg", "resnet", "resnext", "wide_resnet", "densenet", "inception", "mobilenet", "mnasnet",
    "efficientnet", "shufflenet", "squeezenet", "regnet", "convnext", "vit", "swin", "maxvit",
    "bert", "roberta", "distilbert", "albert", "xlnet", "gpt2", "opt", "t5", "bart",
    # from timm
    "xception", "senet", "resnest", "cspnet", "ghostnet", "mixnet", "nasnet", "dpn", "mobilevit",
)
PRECISIONS = ("FP32", "FP16", "BF16", "FP64")
IMAGE_CLASSES = 1000
IMAGE_CHANNELS = 3
LEARNING_RATE = 1e-3  # the traced optimizer's (no effect on memory or FLOPs)


@dataclass(frozen=True)
class Arch:
    """One named architecture the zoo can build from code alone."""

    name: str  # canonical, e.g. "resnet50", "vgg16", "efficientnet_b0", "bert-large-uncased", "gpt2-xl"
    family: str  # one of FAMILIES
    model_type: str  # the contract's model_type a site would log for it: "CNN", "ResNet" or "Transformer"
    kind: str  # "image" (input_dim = pixels per side) or "text" (input_dim = tokens)
    default_input_dim: int  # 224 / 299 for Inception / 512 or 1024 tokens, ...


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


@dataclass(frozen=True)
class _Build:
    """How the zoo builds one architecture."""

    target: str  # torchvision / timm model name, or the transformers model class
    config: str = ""  # transformers config class ("" for torchvision)
    kwargs: tuple[tuple[str, Any], ...] = ()  # builder (torchvision) or config (transformers) arguments
    max_tokens_key: str = ""  # the config field bounding the sequence length ("" = no bound)
    seq2seq: bool = False  # encoder-decoder: the decoder gets a target sequence of the same length
    library: str = "torchvision"  # "torchvision" | "timm" | "transformers"


_ENTRIES: list[tuple[Arch, _Build]] = []


def _vision(name: str, family: str, model_type: str, input_dim: int = 224, **kwargs: Any) -> None:
    _ENTRIES.append((Arch(name, family, model_type, "image", input_dim), _Build(name, kwargs=tuple(kwargs.items()))))


def _text(name: str, family: str, config: str, model_class: str, input_dim: int, max_tokens_key: str = "",
          seq2seq: bool = False, **kwargs: Any) -> None:
    build = _Build(model_class, config, tuple(kwargs.items()), max_tokens_key, seq2seq, library="transformers")
    _ENTRIES.append((Arch(name, family, "Transformer", "text", input_dim), build))


def _register_vision() -> None:
    _vision("alexnet", "alexnet", "CNN")
    for depth in ("11", "13", "16", "19"):
        _vision(f"vgg{depth}", "vgg", "CNN")
        _vision(f"vgg{depth}_bn", "vgg", "CNN")
    for depth in ("18", "34", "50", "101", "152"):
        _vision(f"resnet{depth}", "resnet", "ResNet")
    for name in ("resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d"):
        _vision(name, "resnext", "ResNet")
    for name in ("wide_resnet50_2", "wide_resnet101_2"):
        _vision(name, "wide_resnet", "ResNet")
    for depth in ("121", "161", "169", "201"):
        _vision(f"densenet{depth}", "densenet", "CNN")
    _vision("inception_v3", "inception", "CNN", 299, aux_logits=False, init_weights=True)
    _vision("googlenet", "inception", "CNN", aux_logits=False, init_weights=True)
    for name in ("mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large"):
        _vision(name, "mobilenet", "CNN")
    for name in ("mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3"):
        _vision(name, "mnasnet", "CNN")
    # EfficientNet at the resolutions of the papers (Tan & Le 2019, 2021)
    for name, side in (("b0", 224), ("b1", 240), ("b2", 260), ("b3", 300), ("b4", 380), ("b5", 456), ("b6", 528),
                       ("b7", 600), ("v2_s", 384), ("v2_m", 480), ("v2_l", 480)):
        _vision(f"efficientnet_{name}", "efficientnet", "CNN", side)
    for name in ("x0_5", "x1_0", "x1_5", "x2_0"):
        _vision(f"shufflenet_v2_{name}", "shufflenet", "CNN")
    _vision("squeezenet1_0", "squeezenet", "CNN")
    _vision("squeezenet1_1", "squeezenet", "CNN")
    for size in ("400mf", "800mf", "1_6gf", "3_2gf", "8gf", "16gf", "32gf"):
        _vision(f"regnet_x_{size}", "regnet", "CNN")
        _vision(f"regnet_y_{size}", "regnet", "CNN")
    _vision("regnet_y_128gf", "regnet", "CNN")
    for size in ("tiny", "small", "base", "large"):
        _vision(f"convnext_{size}", "convnext", "CNN")
    for name in ("vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14"):
        _vision(name, "vit", "Transformer")
    for name in ("swin_t", "swin_s", "swin_b"):
        _vision(name, "swin", "Transformer")
    for name in ("swin_v2_t", "swin_v2_s", "swin_v2_b"):
        _vision(name, "swin", "Transformer", 256)
    _vision("maxvit_t", "maxvit", "Transformer")


def _timm(name: str, family: str, model_type: str, input_dim: int = 224) -> None:
    _ENTRIES.append((Arch(name, family, model_type, "image", input_dim), _Build(name, library="timm")))


def _register_timm() -> None:
    """Image nets of timm that torchvision lacks (a timm net of the same shape as a torchvision one, e.g.
    ``tf_efficientnet_b0`` or ``vit_base_patch16_224``, is left out or an alias: one shape, one name)."""
    for name in ("legacy_xception", "xception41", "xception65", "xception71"):
        _timm(name, "xception", "CNN", 299)
    _timm("inception_v4", "inception", "CNN", 299)
    _timm("inception_resnet_v2", "inception", "CNN", 299)
    _timm("efficientnet_lite0", "efficientnet", "CNN")
    _timm("efficientnetv2_rw_s", "efficientnet", "CNN", 288)
    for name in ("convnext_atto", "convnext_nano", "convnext_xlarge", "convnextv2_tiny", "convnextv2_base"):
        _timm(name, "convnext", "CNN")
    for name in ("regnety_040", "regnety_064", "regnety_120"):
        _timm(name, "regnet", "CNN")
    for name in ("deit_tiny_patch16_224", "deit_small_patch16_224"):  # DeiT-B is torchvision's vit_b_16
        _timm(name, "vit", "Transformer")
    _timm("seresnet50", "senet", "ResNet")
    _timm("resnest50d", "resnest", "ResNet")
    _timm("cspdarknet53", "cspnet", "CNN", 256)
    _timm("ghostnet_100", "ghostnet", "CNN")
    _timm("mixnet_s", "mixnet", "CNN")
    _timm("nasnetalarge", "nasnet", "CNN", 331)
    _timm("dpn92", "dpn", "CNN")
    _timm("mobilevit_s", "mobilevit", "CNN", 256)


def _register_encoders() -> None:
    large = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096}
    # Attention-probability dropout is off in every text net: on CPU it forces SDPA's math kernel, which
    # stores the L x L score matrix that flash / memory-efficient attention on a GPU never keeps.
    no_attn_drop = {"attention_probs_dropout_prob": 0.0}
    for case, vocab in (("uncased", 30522), ("cased", 28996)):
        _text(f"bert-base-{case}", "bert", "BertConfig", "BertForMaskedLM", 512, "max_position_embeddings",
              vocab_size=vocab, **no_attn_drop)
        _text(f"bert-large-{case}", "bert", "BertConfig", "BertForMaskedLM", 512, "max_position_embeddings",
              vocab_size=vocab, **large, **no_attn_drop)
    roberta = {"vocab_size": 50265, "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1,
               "layer_norm_eps": 1e-5, **no_attn_drop}
    _text("roberta-base", "roberta", "RobertaConfig", "RobertaForMaskedLM", 512, "max_position_embeddings", **roberta)
    _text("roberta-large", "roberta", "RobertaConfig", "RobertaForMaskedLM", 512, "max_position_embeddings",
          **roberta, **large)
    _text("distilbert-base-uncased", "distilbert", "DistilBertConfig", "DistilBertForMaskedLM", 512,
          "max_position_embeddings", attention_dropout=0.0)
    for size, hidden, layers, heads in (("base", 768, 12, 12), ("large", 1024, 24, 16), ("xlarge", 2048, 24, 16),
                                        ("xxlarge", 4096, 12, 64)):
        _text(f"albert-{size}-v2", "albert", "AlbertConfig", "AlbertForMaskedLM", 512, "max_position_embeddings",
              hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=4 * hidden,
              **no_attn_drop)
    # XLNet's relative attention has no SDPA path (it keeps the L x L scores on a GPU too) and no length bound
    _text("xlnet-base-cased", "xlnet", "XLNetConfig", "XLNetLMHeadModel", 512, d_model=768, n_layer=12, n_head=12,
          d_inner=3072)
    _text("xlnet-large-cased", "xlnet", "XLNetConfig", "XLNetLMHeadModel", 512, d_model=1024, n_layer=24, n_head=16,
          d_inner=4096)


def _register_decoders() -> None:
    for name, width, layers, heads in (("gpt2", 768, 12, 12), ("gpt2-medium", 1024, 24, 16),
                                       ("gpt2-large", 1280, 36, 20), ("gpt2-xl", 1600, 48, 25)):
        _text(name, "gpt2", "GPT2Config", "GPT2LMHeadModel", 1024, "n_positions", n_embd=width, n_layer=layers,
              n_head=heads, attn_pdrop=0.0)
    for name, width, layers, heads, projection in (("opt-125m", 768, 12, 12, 768), ("opt-350m", 1024, 24, 16, 512),
                                                   ("opt-1.3b", 2048, 24, 32, 2048)):
        _text(name, "opt", "OPTConfig", "OPTForCausalLM", 2048, "max_position_embeddings", hidden_size=width,
              num_hidden_layers=layers, num_attention_heads=heads, ffn_dim=4 * width, word_embed_proj_dim=projection,
              do_layer_norm_before=name != "opt-350m")
    for name, width, layers, heads in (("t5-small", 512, 6, 8), ("t5-base", 768, 12, 12), ("t5-large", 1024, 24, 16)):
        _text(name, "t5", "T5Config", "T5ForConditionalGeneration", 512, seq2seq=True, d_model=width, d_ff=4 * width,
              num_layers=layers, num_decoder_layers=layers, num_heads=heads)
    for name, width, layers, heads in (("bart-base", 768, 6, 12), ("bart-large", 1024, 12, 16)):
        _text(name, "bart", "BartConfig", "BartForConditionalGeneration", 1024, "max_position_embeddings", seq2seq=True,
              d_model=width, encoder_layers=layers, decoder_layers=layers, encoder_attention_heads=heads,
              decoder_attention_heads=heads, encoder_ffn_dim=4 * width, decoder_ffn_dim=4 * width)


_register_vision()
_register_timm()
_register_encoders()
_register_decoders()
ARCHITECTURES: dict[str, Arch] = {arch.name: arch for arch, _ in _ENTRIES}
_BUILDS: dict[str, _Build] = {arch.name: build for arch, build in _ENTRIES}

# Other spellings sites use for a canonical name (beyond case and separators, which canonical() ignores)
_ALIASES = {
    "bert-base": "bert-base-uncased", "bert-large": "bert-large-uncased",
    "xlnet-base": "xlnet-base-cased", "xlnet-large": "xlnet-large-cased",
    "distilbert": "distilbert-base-uncased", "distilbert-base": "distilbert-base-uncased",
    "albert-base": "albert-base-v2", "albert-large": "albert-large-v2", "albert-xlarge": "albert-xlarge-v2",
    "albert-xxlarge": "albert-xxlarge-v2",
    "gpt2-small": "gpt2", "gpt2-base": "gpt2", "googlenet-v1": "googlenet",
    "inception-resnet-v2": "inception_resnet_v2",
    "vit_tiny_patch16_224": "deit_tiny_patch16_224", "vit_small_patch16_224": "deit_small_patch16_224",
    "vit_base_patch16_224": "vit_b_16", "deit_base_patch16_224": "vit_b_16", "vit_large_patch16_224": "vit_l_16",
}
# A bare family name stands for its default member (the family's commonest size), said in the forecast's
# reason; with a logged shape the family's nearest member is taken instead (`resolve`).
FAMILY_DEFAULTS = {
    "efficientnet": "efficientnet_b0", "inception": "inception_v3", "xception": "legacy_xception",
    "bert": "bert-base-uncased", "gpt2": "gpt2", "resnet": "resnet50", "vgg": "vgg16", "densenet": "densenet121",
    "mobilenet": "mobilenet_v2", "resnext": "resnext50_32x4d", "convnext": "convnext_tiny", "regnet": "regnet_y_400mf",
    "vit": "vit_b_16", "swin": "swin_t", "roberta": "roberta-base", "albert": "albert-base-v2", "xlnet": "xlnet-base-cased",
    "opt": "opt-125m", "t5": "t5-base", "bart": "bart-base", "alexnet": "alexnet", "squeezenet": "squeezenet1_1",
    "shufflenet": "shufflenet_v2_x1_0", "mnasnet": "mnasnet1_0", "wide_resnet": "wide_resnet50_2",
}
_NAME_PREFIXES = ("torchvisionmodels", "torchvision", "transformers", "timm")


def _key(name: str) -> str:
    """Lower case without separators, except that a separator between two digits becomes 'p'.

    'ResNet-50' and 'resnet_50' -> 'resnet50'; 'regnet_y_1_6gf' and 'RegNetY-1.6GF' -> 'regnety1p6gf',
    which stays apart from 'regnet_y_16gf' -> 'regnety16gf'.
    """
    lowered = name.strip().lower()
    lowered = re.sub(r"(?<=\d)[^a-z0-9]+(?=\d)", "p", lowered)
    return re.sub(r"[^a-z0-9]", "", lowered)


_BY_KEY: dict[str, str] = {_key(alias): name for alias, name in _ALIASES.items()}
_BY_KEY.update({_key(name): name for name in ARCHITECTURES})


def canonical(name: str | None) -> str | None:
    """The zoo's canonical name for a spelling of an architecture; None when the zoo does not know it.

    Case, separators and a 'torchvision.' prefix do not matter; a Hugging Face hub owner
    ('openai-community/gpt2-xl') is dropped.
    """
    if not isinstance(name, str) or not name.strip():
        return None
    candidates = [name, name.split("/", 1)[1]] if "/" in name else [name]
    for candidate in candidates:
        key = _key(candidate)
        for prefix in _NAME_PREFIXES:
            if key.startswith(prefix) and key[len(prefix):] in _BY_KEY:
                key = key[len(prefix):]
        if key in _BY_KEY:
            return _BY_KEY[key]
    return None


# --------------------------------------------------------------------------------------------------
# Building and tracing (torch, torchvision and transformers are imported here, on first use)
# --------------------------------------------------------------------------------------------------


def step_core() -> types.ModuleType:
    """The tracing core (``stepmem``) zoo uses: ``gpucast.tasks.learn.stepmem``, or the sibling file when loaded by path."""
    if __package__:
        from gpucast.tasks.learn import stepmem
        return stepmem
    name = "gpucast_zoo_stepmem"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("stepmem.py"))
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[name]


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


def _build_timm(arch: Arch, build: _Build, input_dim: int, device: str) -> tuple[Any, int]:
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


def _build_image(arch: Arch, build: _Build, input_dim: int, device: str) -> tuple[Any, int]:
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


def _text_config(arch: Arch, build: _Build, input_dim: int) -> Any:
    """The transformers config of ``arch`` (SDPA attention where the model has it)."""
    import transformers
    _import_torchvision()  # transformers imports torchvision when it is installed
    config = getattr(transformers, build.config)(**dict(build.kwargs))
    if build.max_tokens_key and input_dim > getattr(config, build.max_tokens_key):
        raise ValueError(f"{arch.name} takes at most {getattr(config, build.max_tokens_key)} tokens, got {input_dim}")
    config._attn_implementation = "eager" if arch.family in ("xlnet", "t5") else "sdpa"
    return config


def _build_text(arch: Arch, build: _Build, input_dim: int, device: str) -> tuple[Any, int, int]:
    """A transformers language model on ``device``, its transformer blocks and its vocabulary."""
    import torch
    import transformers
    config = _text_config(arch, build, input_dim)
    with torch.device(device):
        model = getattr(transformers, build.target)(config)
    layers = config.num_hidden_layers
    if build.seq2seq:
        layers += getattr(config, "num_decoder_layers", None) or config.decoder_layers
    return model, layers, config.vocab_size


def _batch_maker(arch: Arch, build: _Build, request: TraceRequest, input_dim: int, vocab: int) -> Any:
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


def _check_request(request: TraceRequest) -> Arch:
    if request.arch not in ARCHITECTURES:
        raise KeyError(f"unknown architecture {request.arch!r}: the zoo builds {len(ARCHITECTURES)} (see zoo.ARCHITECTURES)")
    if request.precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {request.precision!r}")
    if request.batch_size < 1 or (request.input_dim is not None and request.input_dim < 1):
        raise ValueError(f"batch_size and input_dim must be at least 1, got {request.batch_size} and {request.input_dim}")
    return ARCHITECTURES[request.arch]


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
    build = _BUILDS[arch.name]
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


# --------------------------------------------------------------------------------------------------
# Recognising an architecture from its logged shape
# --------------------------------------------------------------------------------------------------

SHAPES_FILE = Path(__file__).with_name("zoo_shapes.json")  # every entry's built size (`write_shapes` makes it)


@dataclass(frozen=True)
class Shape:
    """The size of a built zoo network, as a site would log it."""

    params: int  # trainable parameters
    layers: int  # depth, as `Trace.layers` counts it
    max_input: int | None  # the most tokens a text net takes (None: no bound, or an image net)


def measure_shapes(names: list[str] | None = None) -> dict:
    """Build each architecture on the meta device (nothing computed) and count its parameters and depth.

    Returns ``{"versions": {...}, "shapes": {name: {params, layers, max_input}}, "failed": {name: reason}}``:
    a network that fails to build (a timm name this timm lacks, ...) is recorded with its reason."""
    from importlib import metadata
    stepmem = step_core()
    shapes, failed = {}, {}
    for name in names or list(ARCHITECTURES):
        arch, build = ARCHITECTURES[name], _BUILDS[name]
        try:
            network = build_network(TraceRequest(name, 1, None, "FP32", None))
            max_input = (getattr(_text_config(arch, build, 1), build.max_tokens_key)
                         if arch.kind == "text" and build.max_tokens_key else None)
            shapes[name] = {"params": stepmem.count_params(network.model), "layers": network.layers, "max_input": max_input}
        except Exception as exc:  # noqa: BLE001  (recorded with its reason; that name is never inferred)
            failed[name] = f"{type(exc).__name__}: {exc}"[:300]
    versions = {}
    for package in ("torch", "torchvision", "timm", "transformers"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    return {"versions": versions, "shapes": shapes, "failed": failed}


def write_shapes(path: Path = SHAPES_FILE) -> dict:
    """Measure every entry's shape and write ``path`` (JSON); returns what was written."""
    import json
    data = measure_shapes()
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


_SHAPES: dict[str, Shape] | None = None


def shapes() -> dict[str, Shape]:
    """The built size of every entry that builds (``zoo_shapes.json``; an entry missing there is never inferred)."""
    global _SHAPES
    if _SHAPES is None:
        import json
        data = json.loads(SHAPES_FILE.read_text())["shapes"] if SHAPES_FILE.exists() else {}
        _SHAPES = {n: Shape(v["params"], v["layers"], v.get("max_input")) for n, v in data.items() if n in ARCHITECTURES}
    return _SHAPES


# The rule's constants, measured on the published sizes of the reference set's architectures
# (tests/benchmarks/bench_recognise.py, docs/models.md "Recognising architectures and learning from the zoo"):
# published parameter counts are within 6.4% of the built ones (GPT-2: "117M" for 124.4M built; XLNet-base 5.9%;
# CNNs within 1.4%), so a logged count within 8% (log scale) of a built one matches.
PARAMS_TOLERANCE = 0.08
# Depth as sites log it is the counted one (resnet50 50, vgg16 16, xception 71, efficientnet_b0 82, bert 12)
# except where a published depth counts the longest path (`PUBLISHED_DEPTHS`); within 10% matches.
DEPTH_TOLERANCE = 0.10
PUBLISHED_DEPTHS = {"inception_v3": 48, "googlenet": 22, "squeezenet1_0": 18, "squeezenet1_1": 18,
                    "inception_resnet_v2": 164}
# Parameter counts as published (papers, model cards, Keras / torchvision docs) where they differ from the built
# network's by more than rounding (a language-model head, a tied embedding, a different count): also matched.
PUBLISHED_PARAMS_MILLION = {"gpt2": 117.0, "gpt2-medium": 345.0, "gpt2-large": 774.0, "gpt2-xl": 1558.0,
                            "bert-base-uncased": 110.0, "bert-large-uncased": 340.0, "xlnet-base-cased": 110.0,
                            "xlnet-large-cased": 340.0, "roberta-base": 125.0, "roberta-large": 355.0,
                            "distilbert-base-uncased": 66.0, "albert-base-v2": 12.0, "albert-large-v2": 18.0,
                            "albert-xlarge-v2": 60.0, "albert-xxlarge-v2": 235.0, "t5-small": 60.0, "t5-base": 220.0,
                            "t5-large": 770.0, "bart-base": 140.0, "bart-large": 400.0}
DEPTH_WEIGHT = 0.5  # distance = |ln params ratio| + 0.5 |ln depth ratio| + 0.02 |ln input / the net's default input|
INPUT_WEIGHT = 0.02
# Two architectures of different families closer than this to each other in distance match "equally": no inference.
EQUAL_DISTANCE = 0.003


@dataclass(frozen=True)
class Match:
    """What a logged shape says about the architecture: the inferred one, or why none."""

    arch: str | None  # canonical name, None when nothing is inferred
    distance: float | None  # the match distance (0 = the built size exactly)
    reason: str  # in words, for the forecast's `ood_reason`


def _compatible(model_type: str, arch: Arch) -> bool:
    """The logged model type fits the architecture: its model type or its family's name; a CNN may be a ResNet."""
    key = _key(model_type)
    return key in (_key(arch.model_type), _key(arch.family)) or (key == "cnn" and arch.model_type == "ResNet")


def _distance(arch: Arch, shape: Shape, params: float, layers: float, input_dim: float | None) -> float | None:
    """The match distance of a logged shape to one architecture; None outside the tolerances."""
    published = PUBLISHED_PARAMS_MILLION.get(arch.name)
    dp = min(abs(math.log(params / p)) for p in (shape.params, published * 1e6 if published else shape.params))
    depths = {shape.layers, PUBLISHED_DEPTHS.get(arch.name, shape.layers)}
    dl = min(abs(math.log(layers / d)) for d in depths)
    if dp > PARAMS_TOLERANCE or dl > DEPTH_TOLERANCE:
        return None
    di = 0.0
    if input_dim is not None:
        if arch.kind == "text" and shape.max_input is not None and input_dim > shape.max_input:
            return None  # the net cannot take that many tokens
        di = abs(math.log(input_dim / arch.default_input_dim))  # the size the net is commonly trained at
    return dp + DEPTH_WEIGHT * dl + INPUT_WEIGHT * di


def match_shape(model_type: str | None, params_million: float | None, num_layers: float | None,
                input_dim: float | None = None, family: str | None = None) -> Match:
    """The zoo entry whose built size the logged one matches (`family`: only that family's members).

    Needs a model type, a parameter count and a depth. The nearest entry within the tolerances wins;
    two entries of different families within `EQUAL_DISTANCE` of each other are a tie (no inference, the
    reason names both); within one family the first registered (the commonest spelling: vgg16 before
    vgg16_bn, bert-base-uncased before -cased) wins such a tie. One shape of `match_shapes`."""
    return match_shapes([model_type], [params_million], [num_layers], [input_dim], family=family)[0]


NO_SHAPE = Match(None, None, "no shape to match (model type, parameter count and depth are needed)")
NO_MATCH = Match(None, None, "no zoo architecture of that shape")
_CHUNK = 20_000  # shapes compared with every entry at a time (20k x ~130 entries x 8 bytes per array)


@dataclass(frozen=True)
class _Entries:
    """Every zoo entry that builds, in `ARCHITECTURES` order (the order that breaks ties), as arrays."""

    names: list[str]
    families: np.ndarray  # object
    params: np.ndarray  # ln of: built, and as published (the built one where none is)
    published: np.ndarray
    layers: np.ndarray  # ln of: counted, and as published
    published_layers: np.ndarray
    default_input: np.ndarray  # ln of the input size the net is commonly trained at
    max_input: np.ndarray  # the most tokens a text net takes; inf: no bound (or an image net)

    def subset(self, at: np.ndarray) -> _Entries:
        """The entries at the positions `at` (increasing: the order stays the registration order)."""
        return _Entries([self.names[i] for i in at.tolist()], *(getattr(self, f.name)[at] for f in fields(self)[1:]))


_ENTRIES: _Entries | None = None


def _floats(values: list) -> np.ndarray:
    """A list of numbers or None (or NaN) as a float array, NaN for None."""
    import numpy as np

    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _near_any(values: np.ndarray, sizes: np.ndarray, tolerance: float) -> np.ndarray:
    """Per value (a log): whether some of `sizes` (logs) lies within `tolerance` of it, the same test
    `match_shapes` makes against each entry (|value - size| <= tolerance), by binary search in the sorted sizes."""
    import numpy as np

    ordered = np.sort(sizes)
    at = np.searchsorted(ordered, values)
    below, above = ordered[np.maximum(at - 1, 0)], ordered[np.minimum(at, len(ordered) - 1)]
    return np.minimum(np.abs(values - below), np.abs(values - above)) <= tolerance


def _entries() -> _Entries:
    import numpy as np  # (this module imports only the standard library at load time)

    global _ENTRIES
    if _ENTRIES is None:
        built = shapes()
        names = [n for n in ARCHITECTURES if n in built]
        def column(values) -> np.ndarray:
            return np.array(list(values), dtype=np.float64)

        def log(values) -> np.ndarray:
            return np.log(column(values))
        _ENTRIES = _Entries(
            names, np.array([ARCHITECTURES[n].family for n in names], dtype=object),
            log(built[n].params for n in names),
            log(PUBLISHED_PARAMS_MILLION[n] * 1e6 if PUBLISHED_PARAMS_MILLION.get(n) else built[n].params for n in names),
            log(built[n].layers for n in names), log(PUBLISHED_DEPTHS.get(n, built[n].layers) for n in names),
            log(ARCHITECTURES[n].default_input_dim for n in names),
            column(built[n].max_input if ARCHITECTURES[n].kind == "text" and built[n].max_input is not None else math.inf
                   for n in names))
    return _ENTRIES


def match_shapes(model_types: list, params_million: list, num_layers: list, input_dims: list,
                 family: str | None = None) -> list[Match]:
    """`match_shape` of many shapes at once (numpy: per model type, `_CHUNK` shapes at a time against every entry
    it may be, `_match_rows`): per shape, distance = |ln params ratio| + `DEPTH_WEIGHT` |ln depth ratio| +
    `INPUT_WEIGHT` |ln input / the net's default input| to each entry of a compatible model type (or of
    `family`) within `PARAMS_TOLERANCE` and `DEPTH_TOLERANCE`
    (each ratio to the built size or the published one, whichever is nearer; a text net never takes more tokens than
    it can); then the rule of `match_shape`. Shapes without a model type, parameter count or depth: `NO_SHAPE`."""
    import numpy as np

    e = _entries()
    n = len(model_types)
    out: list[Match] = [NO_SHAPE] * n
    params_all = _floats(params_million) * 1e6
    layers_all, dims_all = _floats(num_layers), _floats(input_dims)
    good = np.isfinite(params_all) & (params_all > 0) & np.isfinite(layers_all) & (layers_all > 0)
    ok_rows = [i for i in np.flatnonzero(good).tolist() if isinstance(model_types[i], str)]
    for i in ok_rows:
        out[i] = NO_MATCH
    if not ok_rows or not e.names:
        return out
    if family is not None:
        allowed = {None: e.families == family}
    else:
        allowed = {t: np.array([_compatible(t, ARCHITECTURES[name]) for name in e.names])
                   for t in {model_types[i] for i in ok_rows}}
    code = {kind: k for k, kind in enumerate(allowed)}
    kind_of = np.array([code[None if family is not None else model_types[i]] for i in ok_rows])
    ok_rows = np.array(ok_rows)
    for kind, mask in allowed.items():  # each model type against the entries it may be (none: no match)
        at, rows = np.flatnonzero(mask), ok_rows[kind_of == code[kind]]
        if len(at) and len(rows):
            _match_rows(out, rows, e.subset(at), params_all, layers_all, dims_all)
    return out


def _match_rows(out: list[Match], rows: np.ndarray, e: _Entries, params_all: np.ndarray, layers_all: np.ndarray,
                dims_all: np.ndarray) -> None:
    """`match_shapes`' rule for `rows` (indices into the `*_all` arrays and `out`) against the entries `e`, all
    compatible with them; the rows that match or tie get their `Match` in `out`."""
    import numpy as np

    # Most logged shapes are near no entry: only the rows whose size and depth are each within tolerance of some
    # entry's (a necessary condition, found by binary search) are compared with every entry.
    for values, sizes, tolerance in ((params_all, (e.params, e.published), PARAMS_TOLERANCE),
                                     (layers_all, (e.layers, e.published_layers), DEPTH_TOLERANCE)):
        rows = rows[_near_any(np.log(values[rows]), np.concatenate(sizes), tolerance)]
    for lo in range(0, len(rows), _CHUNK):
        chunk = rows[lo:lo + _CHUNK]
        # ln(a / b) as ln a - ln b: the logarithms of the rows' sizes once, not of every ratio (4x faster)
        params, layers = np.log(params_all[chunk])[:, None], np.log(layers_all[chunk])[:, None]
        dims = dims_all[chunk][:, None]
        dp = np.minimum(np.abs(params - e.params), np.abs(params - e.published))
        dl = np.minimum(np.abs(layers - e.layers), np.abs(layers - e.published_layers))
        has_dim = np.isfinite(dims) & (dims > 0)
        di = np.where(has_dim, np.abs(np.log(np.where(has_dim, dims, 1.0)) - e.default_input), 0.0)
        ok = (dp <= PARAMS_TOLERANCE) & (dl <= DEPTH_TOLERANCE) & ~(has_dim & (dims > e.max_input))
        d = np.where(ok, dp + DEPTH_WEIGHT * dl + INPUT_WEIGHT * di, np.inf)
        best = np.argmin(d, axis=1)  # the first of equal distances: the first registered
        best_d = d[np.arange(len(chunk)), best]
        found = np.isfinite(best_d)  # the others stay NO_MATCH
        chunk, d, ok, best, best_d = chunk[found], d[found], ok[found], best[found], best_d[found]
        tied = ok & (d - best_d[:, None] <= EQUAL_DISTANCE)
        other = tied & (e.families[None, :] != e.families[best][:, None])
        two = other.any(axis=1)
        second = np.argmax(other, axis=1)  # the first registered of another family
        chosen = np.argmax(tied, axis=1)  # the first registered of the tied, all of the best's family
        distance = d[np.arange(len(chunk)), chosen]
        for row, tie, b, s, name_at, dist in zip(chunk.tolist(), two.tolist(), best.tolist(), second.tolist(),
                                                 chosen.tolist(), distance.tolist(), strict=True):
            if tie:
                out[row] = Match(None, None, f"shape matches {e.names[b]} and {e.names[s]} equally: no arch inferred")
            else:
                name = e.names[name_at]
                out[row] = Match(name, round(dist, 4), f"arch inferred from shape: {name} (distance {dist:.3f})")


def resolve_family(name: str | None, model_type: str | None = None, params_million: float | None = None,
                   num_layers: float | None = None, input_dim: float | None = None) -> Match | None:
    """A bare family name (`FAMILY_DEFAULTS`: 'efficientnet', 'inception', 'bert', ...) as one member: the member
    the logged shape matches, else the family's default member; None when `name` is no family name."""
    if not isinstance(name, str):
        return None
    family = next((f for f in FAMILY_DEFAULTS if _key(f) == _key(name)), None)
    if family is None:
        return None
    by_shape = match_shape(model_type or "", params_million, num_layers, input_dim, family=family)
    if by_shape.arch is not None:
        return Match(by_shape.arch, by_shape.distance,
                     f"arch {name!r} is a family name: traced as {by_shape.arch}, its member nearest the logged shape "
                     f"(distance {by_shape.distance:.3f})")
    default = FAMILY_DEFAULTS[family]
    return Match(default, None, f"arch {name!r} is a family name: traced as its default member {default}")


if __name__ == "__main__":  # python tasks/learn/zoo.py --write-shapes: regenerate zoo_shapes.json
    if sys.argv[1:] == ["--write-shapes"]:
        written = write_shapes()
        print(f"{len(written['shapes'])} shapes, {len(written['failed'])} failed: {written['failed']} -> {SHAPES_FILE}")
