"""Analytic priors: what a GPU engineer would estimate from a job's 11 features, before any model.

Every estimate is computed from the job-log features (and the hardware context when it is
logged) with textbook formulas; the constants are named below with their sources. They are used
three ways (docs/models.md): as derived features for every model, as the base a model corrects
(it learns log(actual / prior)), and as the forecast of last resort when no model can score a job.

Units: bytes and FLOPs inside, GB (1e9 bytes), GFLOP, GFLOP/s and hours out.

* **Model state** (weights + gradients + optimizer state), per parameter: FP32 4 + 4 bytes;
  FP64 8 + 8; FP16/BF16 under automatic mixed precision 4 + 4 (FP32 master weights and gradients)
  + 2 (the half-precision weight copies autocast keeps during the forward); plus the optimizer's
  FP32 state: Adam/AdamW 8 (two moments), SGD 4 (momentum), RMSprop 4, Adagrad 4; unknown: 8
  (the common and the cautious case). FP64 doubles the optimizer state. The 16 bytes/parameter of
  mixed-precision Adam are ZeRO's count (Rajbhandari et al., 2020, sec. 3.1).
* **Activations** kept for the backward pass, per sample, by family; the width is inferred from the
  parameters and depth (a layer of width w has ~w^2 weights):
  - MLP: w = sqrt(P / L); 4 w values per layer (input, pre-activation, activation, mask).
  - Transformer: h = sqrt(P / 12L) (12 h^2 weights a layer); 24 s h values a layer: Korthikanti et
    al. (2022), eq. 1, count 34 s h bytes at 16 bit (17 values), without the s^2 attention scores that
    flash / memory-efficient attention no longer keeps; traced training steps keep more (FP32 copies of
    normalisations and softmax inputs, dropout masks): 24 was fitted on the measured set's Transformers
    (prior MAPE 32.7% -> 26.6%) and holds on the reference set's named ones (44.9% -> 42.6%).
    A vision transformer (ViT, DeiT, BEiT: named so) logs its image side: s = (side / 16)^2 + 1 tokens.
  - RNN / GRU / LSTM: h = sqrt(P / 2gL) with g = 1 / 3 / 4 gates; (g + 2) h values per step and layer.
    **Read as a language model** (`language_model_gb`: not a prior column nor a feature; issue 50, sessions 11
    and 14): the same job as an embedding -> recurrence -> V-word head, V = `RECURRENT_VOCAB` = 10,000 (PTB's
    vocabulary and the measured set's word-level LMs; the contract says neither whether a recurrent job has a head
    nor how many words). Its width h solves P = 2 V h + 2 g L h^2; per step and layer it keeps the saved tensors of
    a real nn.RNN / GRU / LSTM training step (PyTorch's own recurrence: 2 / 8 / 8 h), and per token the head's 4 V
    values (the logits, the loss's log-softmax and their gradients) in FP32 or wider (autocast runs the
    cross-entropy in FP32): 0.99-1.00 of a traced LM step (tests/tasks/learn/test_priors.py). That memory is what
    the memory intervals' language-model correction blends a recurrent job's forecast with, as far as the
    history's own out-of-fold errors say (`intervals.language_model_correction`); as the prior itself it was 14x a
    time-series LSTM's traced step (reverted, 1227a2b; docs/models.md, session 10).
  - Convolutional: stages of convolutions whose channels grow (x1 x2 x4 x8 x8 for "cnn" and "vgg";
    x1 x2 x4 x8 for "resnet" and "convnet"; Simonyan & Zisserman 2015, He et al. 2016) while the feature
    map halves after each stage, from a stem of stride 1 ("cnn", "vgg"; ResNets and convnets on images
    up to 64 px, the CIFAR stem of He et al., sec. 4.2) or 4 (the ImageNet stem of ResNets and convnets).
    The base width c follows from the parameters: P = sum over convs of k c_stage^2, with k = 9 for 3x3
    convolutions ("cnn", "resnet", "vgg") and k = 1 for "convnet", whose weights sit in 1x1 convolutions
    (depthwise-separable, bottleneck, dense and inception blocks: MobileNet, EfficientNet, DenseNet,
    Inception, RegNet, ConvNeXt, ...; a "cnn" deeper than 20 layers is one, as a plain stack that deep
    does not train, He et al. 2016, fig. 1). A "vgg" (VGG, AlexNet: named so) keeps most of its
    parameters in its dense head (8c x 7 x 7 -> 4096 -> 4096 -> 1000; 124 M of VGG16's 138 M), its
    last 3 layers: c solves P = 9 c^2 sum(convs x mult^2) + 8c x 49 x 4096 + 4096 x 5096. Each conv keeps
    3 values per position and channel (its output, the normalisation's, the activation's).
  Values are 2 bytes under mixed precision, 4 in FP32, 8 in FP64. With `gpu_count` GPUs in data
  parallel, each GPU keeps the activations of its share of the batch and a full copy of the state.
* **CUDA context**: 0.5 GB, which a GPU counts in its reported peak (typically 0.3-1 GB).
* **FLOPs per iteration**: 3 x forward (backward ~ 2 x forward), forward = 2 P per token a weight
  is applied to (Kaplan et al., 2020: C ~ 6 N per token): tokens = 1 for an MLP, the sequence
  length for sequence models, and for convolutions the positions of the stage its weights belong
  to (the same stages; ResNet-50 at 224 px: ~150 uses per weight, its 4.1 GMACs over 25.6 M
  parameters; a VGG's dense head: once per sample), plus attention's 4 s^2 h per layer forward for
  Transformers.
* **Throughput**: the GPU's peak at the job's precision (`gpu_peak_tflops`, else the GPU catalogue by
  `gpu_type`, else the reference GPU) x a model-FLOPs utilisation by family: Transformers 0.40
  (PaLM reports 46%, Chowdhery et al., 2022), convolutional 0.35, MLP 0.30, recurrent 0.15
  (the recurrence serialises the sequence) - times `gpu_count`.
* **Run time** = iterations x FLOPs per iteration / throughput.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records import catalog

GB = 1e9
CUDA_CONTEXT_GB = 0.5
OPTIMIZER_STATE_BYTES = {"Adam": 8, "AdamW": 8, "SGD": 4, "RMSprop": 4, "Adagrad": 4}
UNKNOWN_OPTIMIZER_BYTES = 8
# weights + gradients (+ autocast's half-precision weight copies) per parameter, and how many
# bytes an activation value takes, by precision; missing precision: FP32.
STATE_BYTES = {"FP32": 8, "FP64": 16, "FP16": 10, "BF16": 10}
ACTIVATION_BYTES = {"FP32": 4, "FP64": 8, "FP16": 2, "BF16": 2}
OPTIMIZER_SCALE = {"FP64": 2.0}  # FP64 keeps its optimizer state in FP64

FAMILIES = ("mlp", "transformer", "rnn", "gru", "lstm", "cnn", "resnet", "vgg", "convnet")
# A logged model type -> family; unknown types by keyword (the first that the lower-cased type contains),
# else "mlp" (the plainest estimate). "cnn" is a plain stack of 3x3 convolutions (VGG-style, no dense head);
# "vgg" the named VGG / AlexNet nets with their dense head; "convnet" an ImageNet-style convolutional net
# whose weights sit mostly in 1x1 convolutions (bottleneck, depthwise-separable, dense and inception blocks);
# "vit" a vision transformer (computed as a "transformer" over its patches, `VIT_PATCH`).
FAMILY_KEYWORDS = (("former", "transformer"), ("bert", "transformer"), ("gpt", "transformer"),
                   ("llama", "transformer"), ("maxvit", "transformer"), ("vit", "vit"), ("deit", "vit"),
                   ("beit", "vit"), ("swin", "transformer"), ("xlnet", "transformer"), ("t5", "transformer"),
                   ("bart", "transformer"), ("electra", "transformer"), ("opt-", "transformer"),
                   ("bloom", "transformer"), ("mistral", "transformer"), ("falcon", "transformer"),
                   ("gemma", "transformer"), ("qwen", "transformer"), ("lstm", "lstm"), ("gru", "gru"),
                   ("rnn", "rnn"), ("resnet", "resnet"), ("resnext", "resnet"), ("vgg", "vgg"), ("alexnet", "vgg"),
                   ("inception", "convnet"), ("googlenet", "convnet"), ("xception", "convnet"),
                   ("efficientnet", "convnet"), ("mobilenet", "convnet"), ("mnasnet", "convnet"),
                   ("densenet", "convnet"), ("convnext", "convnet"), ("regnet", "convnet"), ("shufflenet", "convnet"),
                   ("squeezenet", "convnet"), ("unet", "cnn"), ("cnn", "cnn"), ("conv", "cnn"), ("mlp", "mlp"))
# OPT's names carry a dash ("opt-1.3b"; "OPT" alone: exact match below) so that "optical" is not one.
EXACT_FAMILIES = {"opt": "transformer"}
# A plain stack of convolutions deeper than this does not train without shortcuts (He et al., 2016, fig. 1):
# a "cnn" deeper than it is an ImageNet-style "convnet". The measured set's plain CNNs have 5-20 layers.
PLAIN_CNN_MAX_LAYERS = 20
# A vision transformer ("vit": ViT, DeiT, BEiT) logs the image side as `input_dim`; it attends over
# (side / 16)^2 patches and a class token (Dosovitskiy et al., 2021: 16 px patches), as a "transformer".
VIT_PATCH = 16
GATES = {"rnn": 1, "gru": 3, "lstm": 4}
# A recurrent job read as a language model (`language_model_gb`): values a recurrent layer keeps per step, in
# units of its width (the saved tensors of a real nn.RNN / GRU / LSTM training step, PyTorch's own recurrence, oneDNN
# off); the head's words (an assumption: PTB's 10k, the measured set's LMs); the values it keeps per token at the
# start of the backward (logits, log-softmax, their gradients; traced 4.0-4.1 V), in FP32 or wider.
RECURRENT_VALUES_PER_STEP = {"rnn": 2, "gru": 8, "lstm": 8}
RECURRENT_VOCAB = 10_000
VOCAB_HEAD_VALUES = 4
LOSS_MIN_BYTES = 4  # autocast runs the cross-entropy in FP32
# Convolutional stages: channel multipliers per stage, and the image side up to which the stem keeps
# full resolution (ResNet's CIFAR stem; VGG-style nets always do).
CONV_STAGES = {"cnn": (1, 2, 4, 8, 8), "vgg": (1, 2, 4, 8, 8), "resnet": (1, 2, 4, 8), "convnet": (1, 2, 4, 8)}
RESNET_SMALL_IMAGE_SIDE = 64
# The stem's stride on images larger than RESNET_SMALL_IMAGE_SIDE: 4 for ImageNet-style nets (a strided conv
# and a pooling, or two strided convs), 1 for plain stacks and VGG.
CONV_STEM_STRIDE = {"cnn": 1.0, "vgg": 1.0, "resnet": 4.0, "convnet": 4.0}
# Weights of one convolution per (input channel x output channel): 9 for 3x3 convolutions; 1 where the weights
# sit in 1x1 convolutions (the pointwise halves of depthwise-separable convs, bottlenecks, dense blocks).
CONV_KERNEL_WEIGHTS = {"cnn": 9, "vgg": 9, "resnet": 9, "convnet": 1}
# VGG's dense head (Simonyan & Zisserman, 2015; torchvision pools the last map to 7x7): 3 of its layers.
VGG_HEAD, VGG_HEAD_MAP, VGG_DENSE_LAYERS = (4096, 4096, 1000), 7, 3
CONV_VALUES_PER_POSITION = 3
MLP_VALUES_PER_WIDTH = 4
TRANSFORMER_VALUES_PER_HIDDEN = 24
MFU = {"transformer": 0.40, "cnn": 0.35, "resnet": 0.35, "vgg": 0.35, "convnet": 0.35, "mlp": 0.30, "rnn": 0.15, "gru": 0.15, "lstm": 0.15}

PRIOR_COLUMNS = ("prior_state_gb", "prior_activation_gb", "prior_mem_gb", "prior_gflop_per_iter", "prior_peak_tflops",
                 "prior_gflops", "prior_runtime_hours")
# FLOPs of one training step: clusters do not log it (no contract column), but the measured set
# (tests/data/) does, so its models can be checked against it (tests/benchmarks/bench_accuracy.py).
GFLOP_PER_ITERATION = "train_gflop_per_iter"
# The prior a model of each target corrects (and falls back to).
PRIOR_FOR_TARGET = {c.PEAK_GPU_MEM_GB: "prior_mem_gb", c.GPU_DEMAND_GFLOPS: "prior_gflops",
                    c.RUNTIME_HOURS: "prior_runtime_hours", GFLOP_PER_ITERATION: "prior_gflop_per_iter"}


def family(model_type: str | None) -> str:
    if not model_type:
        return "mlp"
    low = model_type.strip().lower()
    return EXACT_FAMILIES.get(low) or next((fam for key, fam in FAMILY_KEYWORDS if key in low), "mlp")


class Distinct:
    """A string column as its distinct values (a missing one as "") and each row's index among them: a function of the
    value (`of`) is computed once per distinct value (the columns it maps, model type, precision and optimizer, hold a
    handful; a per-row Python call cost 2 s per 1M jobs) and taken per row by its index, not mapped over a million
    strings again for each table (issue 52 item 5)."""

    def __init__(self, values: pl.Series | list):
        values = pl.Series(values, dtype=pl.String).fill_null("")
        self.names: list[str] = values.unique().to_list()
        codes = values.replace_strict({v: i for i, v in enumerate(self.names)}, return_dtype=pl.Int64)
        self.codes = codes.to_numpy() if len(codes) else np.zeros(0, dtype=np.int64)  # (Polars keeps no rows' dtype)

    def of(self, fn: Callable[[str], float]) -> np.ndarray:
        """`fn` of each row's value, as float64."""
        return np.array([fn(v) for v in self.names], dtype=np.float64)[self.codes]


# Family codes (`family_codes`): the index of each family in FAMILY_NAMES ("vit" last: `compute` reads it as a
# "transformer" over its patches). Integer masks over 1M jobs, not string compares of an object array (9x 25 ms).
FAMILY_NAMES = (*FAMILIES, "vit")
CODE = {f: i for i, f in enumerate(FAMILY_NAMES)}


def family_codes(model_types: pl.Series | list[str | None], layers: np.ndarray) -> np.ndarray:
    """Each job's family as its index in `FAMILY_NAMES` (`family`), a "cnn" deeper than `PLAIN_CNN_MAX_LAYERS` being
    a "convnet"."""
    kinds = Distinct(model_types)
    fam = np.array([CODE[family(v)] for v in kinds.names], dtype=np.int64)[kinds.codes]
    fam[(fam == CODE["cnn"]) & (layers > PLAIN_CNN_MAX_LAYERS)] = CODE["convnet"]
    return fam


def families(model_types: pl.Series | list[str | None], layers: np.ndarray) -> np.ndarray:
    """The family of each job (`family`), a "cnn" deeper than `PLAIN_CNN_MAX_LAYERS` being a "convnet"."""
    return np.array(FAMILY_NAMES, dtype=object)[family_codes(model_types, layers)]


def _column(df: pl.DataFrame, name: str, default: float) -> np.ndarray:
    if name not in df.columns:
        return np.full(df.height, default)
    return df[name].cast(pl.Float64).fill_null(default).to_numpy()


GPU_MODEL, PEAK_TFLOPS = "gpu_model", "peak_tflops"


def hardware(df: pl.DataFrame) -> pl.DataFrame:
    """`gpu_model` (the logged `gpu_type` as the GPU catalogue names it, null when not logged or not in
    it) and `peak_tflops` (the logged peak, else the catalogue's at the job's precision, else null)."""
    gpus = catalog.gpus()
    types = df[c.GPU_TYPE] if c.GPU_TYPE in df.columns else pl.Series([None] * df.height, dtype=pl.String)
    names = {t: catalog.canonical(t) for t in types.drop_nulls().unique().to_list()}
    model = types.replace_strict(names, default=None, return_dtype=pl.String).alias(GPU_MODEL)
    pairs = pl.DataFrame({"m": model, "p": df[c.PRECISION]})
    known = pairs.unique().filter(pl.col("m").is_not_null())
    peaks = known.with_columns(pl.Series("peak", [gpus[m].peak_tflops(p) for m, p in known.iter_rows()], dtype=pl.Float64))
    from_catalog = pairs.join(peaks, on=["m", "p"], how="left", nulls_equal=True, maintain_order="left")["peak"]
    logged = df[c.GPU_PEAK_TFLOPS].cast(pl.Float64) if c.GPU_PEAK_TFLOPS in df.columns else from_catalog * None
    return pl.DataFrame([model, pl.Series(PEAK_TFLOPS, logged).fill_null(from_catalog)])


def _peak_or_reference(df: pl.DataFrame) -> np.ndarray:
    """The job's peak TFLOPS (`hardware`), else the reference GPU's at the job's precision."""
    reference = catalog.gpus()[catalog.REFERENCE_GPU]
    fallback = Distinct(df[c.PRECISION]).of(lambda p: reference.peak_tflops(p or None))
    peak = df[PEAK_TFLOPS].to_numpy() if PEAK_TFLOPS in df.columns else hardware(df)[PEAK_TFLOPS].to_numpy()
    peak = np.asarray(peak, dtype=np.float64)
    return np.where(np.isfinite(peak), peak, fallback)


def compute(df: pl.DataFrame) -> pl.DataFrame:
    """The prior columns (`PRIOR_COLUMNS`) for every row of `df` (the 11 features, hardware optional).

    Missing numbers get neutral stand-ins (one layer, batch 1, ...): a prior is never null, so it can
    always be a fallback; models also see the raw features, with their missing values, beside it.
    """
    precision, params, layers, fam, batch, dim, gpus = _shape(df)
    vision = fam == CODE["vit"]
    dim = np.where(vision, (dim / VIT_PATCH) ** 2 + 1, dim)  # the tokens a vision transformer attends over
    fam[vision] = CODE["transformer"]
    iterations = _column(df, c.ITERATIONS, 1.0)

    opt_bytes = Distinct(df[c.OPTIMIZER]).of(lambda o: float(OPTIMIZER_STATE_BYTES.get(o or None, UNKNOWN_OPTIMIZER_BYTES)))
    opt_bytes = opt_bytes * precision.of(lambda p: float(OPTIMIZER_SCALE.get(p, 1.0)))
    state = params * (precision.of(lambda p: float(STATE_BYTES.get(p, 8))) + opt_bytes)

    values, tokens = _activations_and_tokens(fam, params, layers, dim)
    act_bytes = precision.of(lambda p: float(ACTIVATION_BYTES.get(p, 4)))
    activations = batch / gpus * values * act_bytes

    forward = 2.0 * params * tokens + _attention_flops(fam, params, layers, dim)
    flops_per_iter = 3.0 * forward * batch
    mfu = np.array([MFU[f] for f in FAMILIES] + [np.nan])[fam]  # "vit" is a "transformer" by now; a family MFU lacks
    # raises here, as the lookup by name did (review 67c S3-1)
    achieved_tflops = _peak_or_reference(df) * mfu * gpus
    runtime_h = iterations * flops_per_iter / (achieved_tflops * 1e12) / 3600.0
    # float arrays whatever the row count: with no row (a night with nothing pending) numpy's empty results
    # are object arrays, which Polars would keep as Object columns
    return pl.DataFrame({k: np.asarray(v, dtype=np.float64) for k, v in {
        "prior_state_gb": state / GB,
        "prior_activation_gb": activations / GB,
        "prior_mem_gb": (state + activations) / GB + CUDA_CONTEXT_GB,
        "prior_gflop_per_iter": flops_per_iter / 1e9,
        "prior_peak_tflops": achieved_tflops / mfu / gpus,
        "prior_gflops": achieved_tflops * 1e3,
        "prior_runtime_hours": runtime_h,
    }.items()})


def _shape(df: pl.DataFrame) -> tuple[Distinct, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(precision, parameters, layers, family code, batch, input size, GPUs) of every row, with `compute`'s
    stand-ins."""
    layers = np.maximum(_column(df, c.NUM_LAYERS, 1.0), 1.0)
    return (Distinct(df[c.PRECISION].fill_null("").replace("", "FP32")), _column(df, c.PARAMS_MILLION, 1.0) * 1e6,
            layers, family_codes(df[c.MODEL_TYPE], layers), _column(df, c.BATCH_SIZE, 1.0),
            _column(df, c.INPUT_DIM, 1.0), np.maximum(_column(df, c.GPU_COUNT, 1.0), 1.0))


def language_model_gb(df: pl.DataFrame) -> np.ndarray:
    """Per row of `df` (the 11 features), a recurrent job's peak memory (GB) read as a language model (the module
    docstring): the prior's model state and CUDA context, the language model's activations; NaN for every other
    family."""
    precision, params, layers, fam, batch, dim, gpus = _shape(df)
    recurrent = np.isin(fam, [CODE[f] for f in GATES])
    if not recurrent.any():
        return np.full(df.height, np.nan)
    values, loss_values = np.zeros(df.height), np.zeros(df.height)
    for f, gates in GATES.items():
        if (m := fam == CODE[f]).any():
            P, L = params[m], layers[m]
            width = (-RECURRENT_VOCAB + np.sqrt(RECURRENT_VOCAB**2 + 2.0 * gates * L * P)) / (2.0 * gates * L)
            values[m] = dim[m] * L * width * RECURRENT_VALUES_PER_STEP[f]  # 2 g L h^2 + 2 V h = P
            loss_values[m] = dim[m] * VOCAB_HEAD_VALUES * RECURRENT_VOCAB
    act_bytes = precision.of(lambda p: float(ACTIVATION_BYTES.get(p, 4)))
    activations = batch / gpus * (values * act_bytes + loss_values * np.maximum(act_bytes, LOSS_MIN_BYTES))
    state = np.full(df.height, np.nan)  # the prior's model state of the recurrent rows only (a scored batch is mostly
    state[recurrent] = compute(df.filter(pl.Series(recurrent)))["prior_state_gb"].to_numpy()  # others: review 64b S3-6)
    return np.where(recurrent, state + activations / GB + CUDA_CONTEXT_GB, np.nan)


def _activations_and_tokens(fam: np.ndarray, params: np.ndarray, layers: np.ndarray,
                            dim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(activation values kept per sample, tokens each weight is applied to per sample), by family (`fam`: codes)."""
    values, tokens = np.zeros(len(fam)), np.ones(len(fam))
    for f in FAMILIES:
        m = fam == CODE[f]
        if not m.any():
            continue
        P, L, s = params[m], layers[m], dim[m]
        if f == "mlp":
            values[m] = MLP_VALUES_PER_WIDTH * L * np.sqrt(P / L)
        elif f == "transformer":
            values[m] = TRANSFORMER_VALUES_PER_HIDDEN * s * np.sqrt(P / (12 * L)) * L
            tokens[m] = s
        elif f in GATES:
            g = GATES[f]
            values[m] = s * L * np.sqrt(P / (2 * g * L)) * (g + 2)
            tokens[m] = s
        else:  # cnn, resnet, vgg, convnet
            values[m], tokens[m] = _conv_stages(f, P, L, s)
    return values, tokens


def _conv_stages(fam: str, P: np.ndarray, L: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(activation values per sample, uses per weight) of a staged convolutional network."""
    mult = np.asarray(CONV_STAGES[fam], dtype=np.float64)
    convs = np.maximum((L - (VGG_DENSE_LAYERS if fam == "vgg" else 0)) / len(mult), 1.0)  # per stage
    weights = CONV_KERNEL_WEIGHTS[fam] * convs * np.sum(mult**2)  # conv weights = weights x base^2
    head = np.zeros_like(P)
    if fam == "vgg":
        base = _vgg_base(P, weights)
        head = np.minimum(P, base * mult[-1] * VGG_HEAD_MAP**2 * VGG_HEAD[0] + np.sum(np.multiply(VGG_HEAD[:-1], VGG_HEAD[1:])))
    else:
        base = np.sqrt(P / weights)  # channels of the first stage
    stem = np.where(s > RESNET_SMALL_IMAGE_SIDE, CONV_STEM_STRIDE[fam], 1.0)
    side = s[:, None] / stem[:, None] / 2.0 ** np.arange(len(mult))  # (jobs, stages)
    positions = np.maximum(side, 1.0) ** 2
    values = CONV_VALUES_PER_POSITION * convs * base * np.sum(positions * mult, axis=1)
    uses = np.sum(positions * mult**2, axis=1) / np.sum(mult**2)  # FLOP-weighted positions per conv weight
    return values, (uses * (P - head) + head) / P  # a dense head's weights are used once per sample


def _vgg_base(P: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """First-stage channels c of a VGG whose P parameters are its convolutions (`weights` c^2) and its dense
    head (8c x 7 x 7 -> 4096 -> 4096 -> 1000): the positive root of weights c^2 + 49 x 8 x 4096 c + 4096 x 5096 = P,
    or the plain stack's width when P is below the head's fixed part."""
    linear = CONV_STAGES["vgg"][-1] * VGG_HEAD_MAP**2 * VGG_HEAD[0]
    fixed = float(np.sum(np.multiply(VGG_HEAD[:-1], VGG_HEAD[1:])))
    root = (-linear + np.sqrt(linear**2 + 4 * weights * np.maximum(P - fixed, 0.0))) / (2 * weights)
    return np.where(P > fixed, np.maximum(root, 1.0), np.sqrt(P / weights))


def _attention_flops(fam: np.ndarray, params: np.ndarray, layers: np.ndarray, dim: np.ndarray) -> np.ndarray:
    """Forward FLOPs of attention scores and their weighted sum: 4 s^2 h per layer (Transformers)."""
    h = np.sqrt(params / (12 * layers))
    return np.where(fam == CODE["transformer"], 4.0 * dim**2 * h * layers, 0.0)


def with_priors(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with the hardware context (`hardware`) and the prior columns added (replaced if present)."""
    df = df.drop([p for p in (GPU_MODEL, PEAK_TFLOPS, *PRIOR_COLUMNS) if p in df.columns])
    df = pl.concat([df, hardware(df)], how="horizontal")
    return pl.concat([df, compute(df)], how="horizontal")
