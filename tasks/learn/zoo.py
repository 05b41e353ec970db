"""The model zoo's catalogue: named real architectures the zoo builds from code alone, and their spellings.

Image nets are torchvision's ``models.get_model(name, weights=None)`` and timm's (PyTorch Image Models)
``timm.create_model(name, pretrained=False)``; text nets are Hugging Face ``transformers`` models built from
their config classes with the published sizes (a language-model head on every token), never downloaded.
Each entry is an `Arch` (what a site would log) and a `Recipe` (how to build it). `canonical` turns a site's
spelling into an entry's name.

Building one and tracing a training step on it: `zoo_trace.py`; recognising an entry from a logged shape:
`zoo_match.py`. This module imports only the standard library (``canonical`` and ``ARCHITECTURES`` cost
nothing), and it loads by file path (``importlib``) on a machine without gpucast (``zoo_trace.py`` does so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

FAMILIES = (
    "alexnet", "vgg", "resnet", "resnext", "wide_resnet", "densenet", "inception", "mobilenet", "mnasnet",
    "efficientnet", "shufflenet", "squeezenet", "regnet", "convnext", "vit", "swin", "maxvit",
    "bert", "roberta", "distilbert", "albert", "xlnet", "gpt2", "opt", "t5", "bart",
    # from timm
    "xception", "senet", "resnest", "cspnet", "ghostnet", "mixnet", "nasnet", "dpn", "mobilevit",
)
PRECISIONS = ("FP32", "FP16", "BF16", "FP64")


@dataclass(frozen=True)
class Arch:
    """One named architecture the zoo can build from code alone."""

    name: str  # canonical, e.g. "resnet50", "vgg16", "efficientnet_b0", "bert-large-uncased", "gpt2-xl"
    family: str  # one of FAMILIES
    model_type: str  # the contract's model_type a site would log for it: "CNN", "ResNet" or "Transformer"
    kind: str  # "image" (input_dim = pixels per side) or "text" (input_dim = tokens)
    default_input_dim: int  # 224 / 299 for Inception / 512 or 1024 tokens, ...


@dataclass(frozen=True)
class Recipe:
    """How the zoo builds one architecture."""

    target: str  # torchvision / timm model name, or the transformers model class
    config: str = ""  # transformers config class ("" for torchvision)
    kwargs: tuple[tuple[str, Any], ...] = ()  # builder (torchvision) or config (transformers) arguments
    max_tokens_key: str = ""  # the config field bounding the sequence length ("" = no bound)
    seq2seq: bool = False  # encoder-decoder: the decoder gets a target sequence of the same length
    library: str = "torchvision"  # "torchvision" | "timm" | "transformers"


_ENTRIES: list[tuple[Arch, Recipe]] = []


def _vision(name: str, family: str, model_type: str, input_dim: int = 224, **kwargs: Any) -> None:
    _ENTRIES.append((Arch(name, family, model_type, "image", input_dim), Recipe(name, kwargs=tuple(kwargs.items()))))


def _text(name: str, family: str, config: str, model_class: str, input_dim: int, max_tokens_key: str = "",
          seq2seq: bool = False, **kwargs: Any) -> None:
    build = Recipe(model_class, config, tuple(kwargs.items()), max_tokens_key, seq2seq, library="transformers")
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
    _ENTRIES.append((Arch(name, family, model_type, "image", input_dim), Recipe(name, library="timm")))


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
RECIPES: dict[str, Recipe] = {arch.name: build for arch, build in _ENTRIES}

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


def spelling_key(name: str) -> str:
    """Lower case without separators, except that a separator between two digits becomes 'p'.

    'ResNet-50' and 'resnet_50' -> 'resnet50'; 'regnet_y_1_6gf' and 'RegNetY-1.6GF' -> 'regnety1p6gf',
    which stays apart from 'regnet_y_16gf' -> 'regnety16gf'.
    """
    lowered = name.strip().lower()
    lowered = re.sub(r"(?<=\d)[^a-z0-9]+(?=\d)", "p", lowered)
    return re.sub(r"[^a-z0-9]", "", lowered)


_BY_KEY: dict[str, str] = {spelling_key(alias): name for alias, name in _ALIASES.items()}
_BY_KEY.update({spelling_key(name): name for name in ARCHITECTURES})


def canonical(name: str | None) -> str | None:
    """The zoo's canonical name for a spelling of an architecture; None when the zoo does not know it.

    Case, separators and a 'torchvision.' prefix do not matter; a Hugging Face hub owner
    ('openai-community/gpt2-xl') is dropped.
    """
    if not isinstance(name, str) or not name.strip():
        return None
    candidates = [name, name.split("/", 1)[1]] if "/" in name else [name]
    for candidate in candidates:
        key = spelling_key(candidate)
        for prefix in _NAME_PREFIXES:
            if key.startswith(prefix) and key[len(prefix):] in _BY_KEY:
                key = key[len(prefix):]
        if key in _BY_KEY:
            return _BY_KEY[key]
    return None
