"""The analytic prior on named families: the names sites log map to the right family, and the formulas
for dense heads, 1x1-convolution nets and ImageNet stems hold on the reference set of real architectures
(tasks/learn/reference_archs.csv) without moving the measured set's plain CNNs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.learn import priors
from tests.benchmarks import real_archs


@pytest.mark.parametrize(("model_type", "family"), [
    ("VGG16", "vgg"), ("AlexNet", "vgg"), ("EfficientNet", "convnet"), ("MobileNetV2", "convnet"),
    ("Inception", "convnet"), ("GoogLeNet", "convnet"), ("Xception", "convnet"), ("DenseNet", "convnet"),
    ("ConvNeXt", "convnet"), ("RegNet", "convnet"), ("ShuffleNet", "convnet"), ("SqueezeNet", "convnet"),
    ("ResNeXt", "resnet"), ("WideResNet", "resnet"), ("XLNet", "transformer"), ("RoBERTa", "transformer"),
    ("T5", "transformer"), ("OPT", "transformer"), ("opt-1.3b", "transformer"), ("Swin", "transformer"),
    ("ViT-B/16", "vit"), ("MaxViT", "transformer"),
    ("gpt2-xl", "transformer"), ("CNN", "cnn"), ("MLP", "mlp"), ("Optical flow", "mlp"), (None, "mlp"),
])
def test_logged_names_map_to_their_family(model_type, family):
    assert priors.family(model_type) == family


def test_a_cnn_deeper_than_a_plain_stack_trains_is_a_convnet():
    fams = priors.families(["CNN", "CNN", "VGG16"], np.array([20.0, 21.0, 40.0]))
    assert fams.tolist() == ["cnn", "convnet", "vgg"]


def _job(model_type: str, params_million: float, layers: int, side: int = 224) -> dict:
    return {c.MODEL_TYPE: model_type, c.PARAMS_MILLION: params_million, c.BATCH_SIZE: 32, c.INPUT_DIM: side,
            c.NUM_LAYERS: layers, c.ITERATIONS: 1000.0, c.PRECISION: "FP32", c.OPTIMIZER: "Adam"}


def _priors(jobs: list[dict]) -> pl.DataFrame:
    return priors.compute(real_archs.with_hardware(pl.DataFrame(jobs)))


def test_a_vgg_keeps_its_parameters_in_the_dense_head():
    """VGG16 (138 M parameters, 124 M of them dense): far fewer activations and FLOPs than a plain stack of
    3x3 convolutions with the same parameters, whose widths would be ~3x VGG's."""
    vgg, plain = _priors([_job("VGG16", 138.4, 16), _job("CNN", 138.4, 16)]).iter_rows(named=True)
    assert vgg["prior_state_gb"] == plain["prior_state_gb"]
    assert vgg["prior_activation_gb"] < plain["prior_activation_gb"] / 2
    assert vgg["prior_gflop_per_iter"] < plain["prior_gflop_per_iter"] / 4


def test_the_imagenet_stem_only_downsamples_large_images():
    small, large = _priors([_job("EfficientNet", 5.3, 82, 64), _job("EfficientNet", 5.3, 82, 128)])["prior_activation_gb"]
    assert large < 4 * small  # 4x the pixels, but the stem's stride 4 starts at 65 px


@pytest.fixture(scope="module")
def reference_error() -> pl.DataFrame:
    return real_archs.prior_error(real_archs.load_reference(family_names=True), real_archs.FAMILY)


CONV_FAMILIES = ("densenet", "efficientnet", "mnasnet", "mobilenet", "regnet", "resnet", "shufflenet", "squeezenet",
                 "vgg", "wide_resnet", "inception", "convnext")


# The Inception nets (v3, v4, Inception-ResNet-v2: stride-8 stems and factorised blocks) are the convnet
# formula's known miss: 2.5-3.4x high per net on the traced reference set (GoogLeNet 1.2x). The family passed
# the 2x check while it held only v3 and GoogLeNet; timm's v4 and Inception-ResNet-v2 (issue 37) showed it.
KNOWN_HIGH = {"inception": (2.0, 3.5)}


def test_the_prior_of_named_convolutional_nets_is_within_2x_of_their_measured_peak(reference_error):
    """Before the named families, these were 2.4-5.9x too high as "CNN" and 0.06-0.4x as unknown names."""
    ratios = dict(reference_error.select(real_archs.FAMILY, "mem ratio").iter_rows())
    off = {f: r for f, r in ratios.items() if f in CONV_FAMILIES and not 0.5 <= r <= 2.0}
    assert {f: r for f, r in off.items() if f not in KNOWN_HIGH} == {}
    assert all(lo <= ratios[f] <= hi for f, (lo, hi) in KNOWN_HIGH.items()), "a known miss moved: update KNOWN_HIGH"


def test_the_priors_memory_error_on_the_reference_set_is_bounded(reference_error):
    """All 62 architectures named by family: 40% MAPE when measured (72% before the families' formulas)."""
    (mape,) = reference_error.filter(pl.col(real_archs.FAMILY) == "all")["mem MAPE %"]
    assert mape < 50.0


def test_a_vision_transformer_attends_over_patches_not_pixels():
    """ViT-B/16 at 224 px: 197 tokens, not 224 (its FLOPs: 6 x 86 M x 197 per image, and attention)."""
    vit, text = _priors([_job("ViT", 86.6, 12), _job("Transformer", 86.6, 12)]).iter_rows(named=True)
    assert vit["prior_gflop_per_iter"] == pytest.approx(text["prior_gflop_per_iter"] * 197 / 224, rel=0.05)
    assert vit["prior_activation_gb"] < text["prior_activation_gb"]


RECURRENT = ("RNN", "GRU", "LSTM")


def _saved_values_per_step(model_type: str, width: int = 64, layers: int = 2, batch: int = 4, steps: int = 16) -> float:
    """Values an nn.RNN / GRU / LSTM forward saves for its backward (distinct storages: no parameter, not the batch),
    per sample, step and layer, in units of its width; PyTorch's own recurrence (oneDNN off), as traced steps run."""
    torch = pytest.importorskip("torch")
    from gpucast.tasks.learn import stepmem

    torch.manual_seed(0)
    net = getattr(torch.nn, model_type)(width, width, layers, batch_first=True)
    x = torch.randn(batch, steps, width, requires_grad=True)
    skip = {p.untyped_storage().data_ptr() for p in net.parameters()} | {x.untyped_storage().data_ptr()}
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in skip:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with stepmem.training_backends("FP32"), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        net(x)
    return sum(saved.values()) / 4 / (batch * steps * layers * width)


@pytest.mark.parametrize("model_type", RECURRENT)
def test_a_recurrent_layer_read_as_a_language_model_keeps_what_a_real_training_step_saves(model_type):
    """Traced: RNN 2, GRU 8, LSTM 8 widths per step and layer (the prior's own count is g + 2: 3 / 5 / 6)."""
    kept = priors.RECURRENT_VALUES_PER_STEP[priors.family(model_type)]
    assert _saved_values_per_step(model_type) == pytest.approx(kept, rel=0.1)


@pytest.mark.parametrize(("model_type", "precision"), [("LSTM", "FP32"), ("GRU", "BF16"), ("RNN", "FP32")])
def test_a_recurrent_jobs_memory_read_as_a_language_model_is_its_traced_training_step(model_type, precision):
    """An embedding -> recurrence -> vocabulary head language model (the vocabulary `language_model_gb` assumes):
    its memory read as a language model, less the model state and the CUDA context, is within 15% of the peak
    activations and temporaries of its real training step (fake tensors, as the measured set's): 0.99-1.00 of it.
    The prior's activations stay 12-25x under for such a model (it counts no head): the reading is what the memory
    intervals' recurrent correction blends with (`intervals.language_model_correction`)."""
    torch = pytest.importorskip("torch")
    from gpucast.tasks.learn import stepmem

    vocab, width, layers, batch, steps = priors.RECURRENT_VOCAB, 64, 2, 4, 16

    class LanguageModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = torch.nn.Embedding(vocab, width)
            self.recurrent = getattr(torch.nn, model_type)(width, width, layers, batch_first=True)
            self.head = torch.nn.Linear(width, vocab)

        def forward(self, tokens):
            return self.head(self.recurrent(self.embedding(tokens))[0])

    with torch.device("meta"):
        model = LanguageModel()
    params = stepmem.count_params(model)
    step = stepmem.measure_step(model, lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
                                lambda: (torch.randint(0, vocab, (batch, steps)), torch.randint(0, vocab, (batch, steps))),
                                precision)
    traced_gb = (step.peak_by_category["Activation"] + step.peak_by_category["Temp"]) / priors.GB
    frame = real_archs.with_hardware(pl.DataFrame([{**_job(model_type, params / 1e6, layers, side=steps),
                                                    c.BATCH_SIZE: batch, c.PRECISION: precision}]))
    (row,) = priors.compute(frame).iter_rows(named=True)
    (memory,) = priors.language_model_gb(frame)
    assert memory - row["prior_state_gb"] - priors.CUDA_CONTEXT_GB == pytest.approx(traced_gb, rel=0.15)
    assert row["prior_activation_gb"] < traced_gb / 5


def test_the_language_model_reading_moves_no_prior_and_is_read_for_recurrent_jobs_alone():
    """The prior of a recurrent job is the one before session 10 (h = sqrt(P / 2gL), (g + 2) h per step and layer:
    a 10k-word head in it was 14x a time-series LSTM's traced step, reverted 1227a2b); the reading as a language model
    is above the prior for a recurrent job (its head) and NaN for every other family, whose intervals it never moves."""
    jobs = [_job(t, 3.0, 2, side=50) for t in (*RECURRENT, "MLP", "CNN", "ResNet", "Transformer", "VGG16")]
    rows = _priors(jobs)
    memory = priors.language_model_gb(real_archs.with_hardware(pl.DataFrame(jobs)))
    for model_type, row, gb in zip([j[c.MODEL_TYPE] for j in jobs], rows.iter_rows(named=True), memory, strict=True):
        if model_type in RECURRENT:
            g = priors.GATES[priors.family(model_type)]
            values = 50 * 2 * np.sqrt(3e6 / (2 * g * 2)) * (g + 2)  # steps x layers x width x values per width
            assert row["prior_activation_gb"] == pytest.approx(32 * values * 4 / priors.GB)
            assert gb > row["prior_mem_gb"]
        else:
            assert np.isnan(gb)


def test_the_state_prior_reads_each_job_s_own_optimizer_and_precision():
    """Review 67c S3-2: the per-value tables of `compute` read the optimizer column for the optimizer's bytes (SGD 4
    a parameter fewer than AdamW), FP64 doubles them, an unknown or missing optimizer gets UNKNOWN_OPTIMIZER_BYTES; and
    every family has an MFU (a missing one raises, review 67c S3-1)."""
    base = _job("MLP", 100.0, 4)
    jobs = [{**base, c.OPTIMIZER: o, c.PRECISION: p} for o, p in
            (("AdamW", "FP32"), ("SGD", "FP32"), ("SGD", "FP64"), ("AdamW", "FP64"), (None, "FP32"), ("Lion?", "FP32"))]
    state = _priors(jobs)["prior_state_gb"].to_numpy() * priors.GB / 100e6  # bytes a parameter
    assert state.tolist() == pytest.approx([8 + 8, 8 + 4, 16 + 8, 16 + 16, 8 + priors.UNKNOWN_OPTIMIZER_BYTES,
                                            8 + priors.UNKNOWN_OPTIMIZER_BYTES])
    assert set(priors.FAMILIES) <= set(priors.MFU)
