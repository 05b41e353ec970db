"""The model zoo: names, published parameter counts, and what a traced training step must hold."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from gpucast.tasks.learn import zoo, zoo_trace
from gpucast.tasks.learn.train import REFERENCE_SET

TRACE_FILE = Path(zoo_trace.__file__)  # the GPU script loads it by path; it loads zoo.py and stepmem.py beside it


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.filterwarnings("ignore", category=UserWarning)  # autocast's notes about CPU dtypes


def _trace(arch: str, batch: int = 2, input_dim: int | None = None, precision: str = "FP32",
           optimizer: str | None = "Adam") -> zoo_trace.Trace:
    return zoo_trace.trace(zoo_trace.TraceRequest(arch, batch, input_dim, precision, optimizer))


@pytest.mark.parametrize(("spelling", "name"), [
    ("ResNet-50", "resnet50"), ("resnet_50", "resnet50"), ("RESNET50", "resnet50"), ("torchvision.resnet50", "resnet50"),
    ("torchvision.models.vgg16", "vgg16"), ("VGG-16", "vgg16"), ("efficientnet-b0", "efficientnet_b0"),
    ("MobileNetV2", "mobilenet_v2"), ("Inception-v3", "inception_v3"), ("ViT-B/16", "vit_b_16"),
    ("RegNetY-1.6GF", "regnet_y_1_6gf"), ("regnet_y_16gf", "regnet_y_16gf"),  # 1.6 and 16 stay apart
    ("Wide-ResNet-50-2", "wide_resnet50_2"), ("ResNeXt-50 (32x4d)", "resnext50_32x4d"),
    ("bert-large-uncased", "bert-large-uncased"), ("BERT-Large", "bert-large-uncased"), ("bert-base", "bert-base-uncased"),
    ("google-bert/bert-base-cased", "bert-base-cased"), ("gpt2-xl", "gpt2-xl"), ("GPT-2 XL", "gpt2-xl"),
    ("openai-community/gpt2-xl", "gpt2-xl"), ("GPT-2", "gpt2"), ("gpt2-small", "gpt2"), ("XLNet-Large", "xlnet-large-cased"),
    ("t5-small", "t5-small"), ("facebook/opt-1.3b", "opt-1.3b"),
])
def test_canonical_spellings(spelling: str, name: str) -> None:
    assert zoo.canonical(spelling) == name


@pytest.mark.parametrize("spelling", ["xception", "resnet51", "gpt3", "", "   ", None, "bert-huge"])
def test_canonical_unknown_is_none(spelling: str | None) -> None:
    assert zoo.canonical(spelling) is None


def test_every_name_is_its_own_canonical_spelling() -> None:
    """No two architectures share a key (e.g. regnet 1.6 GF and 16 GF)."""
    assert {name: zoo.canonical(name) for name in zoo.ARCHITECTURES} == {name: name for name in zoo.ARCHITECTURES}


def test_registry_is_consistent() -> None:
    for name, arch in zoo.ARCHITECTURES.items():
        assert arch.name == name
        assert arch.family in zoo.FAMILIES
        assert arch.model_type in ("CNN", "ResNet", "Transformer")
        assert arch.kind in ("image", "text") and arch.default_input_dim > 0
    assert {arch.family for arch in zoo.ARCHITECTURES.values()} == set(zoo.FAMILIES)
    assert zoo.ARCHITECTURES["inception_v3"].default_input_dim == 299


@pytest.mark.parametrize(("arch", "input_dim", "params", "layers"), [
    ("resnet50", 32, 25_557_032, 50),  # torchvision's published 25.557M
    ("vgg16", 32, 138_357_544, 16),  # 138.36M
    ("gpt2", 16, 124_439_808, 12),  # 124M, LM head tied to the token embedding
])
def test_published_parameter_counts(arch: str, input_dim: int, params: int, layers: int) -> None:
    traced = _trace(arch, input_dim=input_dim)
    assert (traced.params, traced.layers, traced.input_dim) == (params, layers, input_dim)


def test_regnet_builds_on_meta() -> None:
    """RegNet computes its widths with torch ops, which meta as the default device cannot run."""
    request = zoo_trace.TraceRequest("regnet_y_400mf", 2, 64, "FP32", "SGD")
    network = zoo_trace.build_network(request)
    assert {t.device.type for t in (*network.model.parameters(), *network.model.buffers())} == {"meta"}
    assert zoo_trace.trace(request).params == 4_344_144  # torchvision's published 4.344M


def test_bert_base_with_its_masked_lm_head() -> None:
    traced = _trace("bert-base-uncased", input_dim=16)
    assert traced.params == pytest.approx(110e6, rel=0.01)  # 109.5M: encoder + MLM transform, decoder tied
    assert traced.layers == 12


def test_peak_holds_weights_grads_and_adam_state() -> None:
    traced = _trace("resnet18", batch=2, input_dim=32, optimizer="Adam")
    assert traced.peak_bytes >= 16 * traced.params  # fp32 weights + grads + two moments
    assert traced.flops > 0 and traced.seconds > 0


def test_mixed_precision_shrinks_activations_not_flops() -> None:
    fp32 = _trace("mobilenet_v2", batch=8, input_dim=96, precision="FP32")
    fp16 = _trace("mobilenet_v2", batch=8, input_dim=96, precision="FP16")
    assert fp16.peak_bytes < 0.8 * fp32.peak_bytes  # activation-bound: half-precision activations
    assert fp16.flops == fp32.flops


def test_default_input_dim_and_unknown_optimizer() -> None:
    traced = _trace("squeezenet1_1", optimizer="LAMB")  # traced as Adam
    as_adam = _trace("squeezenet1_1", optimizer=None)
    assert traced.input_dim == 224
    assert traced.peak_bytes == as_adam.peak_bytes


def test_unknown_arch_raises_key_error() -> None:
    with pytest.raises(KeyError, match="unknown architecture"):
        _trace("xception")


@pytest.mark.parametrize(("arch", "batch", "input_dim", "precision", "message"), [
    ("resnet18", 1, 32, "INT8", "precision"),
    ("resnet18", 0, 32, "FP32", "at least 1"),
    ("bert-base-uncased", 1, 4096, "FP32", "at most 512 tokens"),
])
def test_bad_request_raises_value_error(arch: str, batch: int, input_dim: int, precision: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _trace(arch, batch=batch, input_dim=input_dim, precision=precision)


def test_import_is_light_and_loads_by_file_path() -> None:
    """The pipeline imports the zoo without torch; the GPU script loads zoo_trace.py by path, without gpucast, and it
    loads the catalogue (zoo.py) beside it."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('zoo_by_path', {str(TRACE_FILE)!r})\n"
        "module = importlib.util.module_from_spec(spec); sys.modules['zoo_by_path'] = module\n"
        "spec.loader.exec_module(module)\n"
        "assert 'torch' not in sys.modules and not any(m.startswith('gpucast.') for m in sys.modules)\n"
        "print(module.zoo.canonical('ResNet-50'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "resnet50"


def test_trace_by_file_path_matches_the_package() -> None:
    spec = importlib.util.spec_from_file_location("zoo_by_path_in_test", TRACE_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["zoo_by_path_in_test"] = module
    try:
        spec.loader.exec_module(module)
        by_path = module.trace(module.TraceRequest("squeezenet1_1", 2, 32, "BF16", "SGD"))
    finally:
        del sys.modules["zoo_by_path_in_test"]
    by_package = _trace("squeezenet1_1", batch=2, input_dim=32, precision="BF16", optimizer="SGD")
    assert (by_path.peak_bytes, by_path.flops, by_path.params) == (by_package.peak_bytes, by_package.flops, by_package.params)


def test_build_network_trains_for_real() -> None:
    """What the GPU script runs: the zoo's network built for real, three real training steps (the
    text nets are too big to build for real in a unit test; their traces run the same code)."""
    import torch
    stepmem = zoo_trace.step_core()
    precision = "BF16"
    request = zoo_trace.TraceRequest("squeezenet1_1", 2, 32, precision, "SGD")
    network = zoo_trace.build_network(request, device="cpu")
    optimizer = stepmem.build_optimizer(network.model.parameters(), zoo_trace.traced_optimizer(request.optimizer), 1e-3, False)
    inputs, targets = network.make_batch()
    before = [p.detach().clone() for p in network.model.parameters()]
    for _ in range(3):
        stepmem.training_step(network.model, optimizer, inputs, targets, precision)
    assert any(not torch.equal(b, p) for b, p in zip(before, network.model.parameters(), strict=True))
    assert zoo_trace.traced_optimizer("LAMB") == "Adam"


REFERENCE_CSV = REFERENCE_SET  # shipped as package data


def test_reference_set_of_real_architectures() -> None:
    """tasks/learn/reference_archs.csv: 40+ zoo architectures, 2+ batch sizes, FP32 and mixed, as measured_jobs does it."""
    import csv
    with REFERENCE_CSV.open(newline="") as f:
        rows = list(csv.DictReader(f))
    archs = {row["arch"] for row in rows}
    assert len(archs) >= 40 and all(zoo.canonical(a) == a for a in archs)
    batches = {arch: {row["batch_size"] for row in rows if row["arch"] == arch} for arch in archs}
    assert min(len(b) for b in batches.values()) >= 2  # a largest batch over 200 GB is skipped (gpt2-xl at 32)
    assert sum(len(b) >= 3 for b in batches.values()) >= 0.95 * len(archs)
    for arch in archs:
        assert {"FP32"} < {row["precision"] for row in rows if row["arch"] == arch} <= {"FP32", "FP16", "BF16"}, arch
    traced_ids = {row["job_id"] for row in rows if row["source"] == "traced"}
    derived = [row for row in rows if row["source"] != "traced"]
    assert len(rows) >= 2000 and len(traced_ids) >= 369  # issue 37: thousands of training steps, each traced or fitted on traces
    for row in derived:  # a derived row names the traced rows of its architecture it was fitted on
        anchors = row["source"].removeprefix("derived from ").split(",")
        assert len(anchors) >= 2 and set(anchors) <= traced_ids, row["job_id"]
    for row in rows:
        spec = zoo.ARCHITECTURES[row["arch"]]
        assert (row["arch_family"], row["model_type"]) == (spec.family, spec.model_type)
        tensor, context = float(row["tensor_peak_gb"]), float(row["cuda_context_gb"])
        assert 0.3 <= context <= 1.0 and float(row["peak_gpu_mem_gb"]) == pytest.approx(tensor + context, abs=2e-6)
        assert tensor <= 200.0
        if row["precision"] == "FP32" and row["optimizer"] in ("Adam", "AdamW"):  # weights + grads + 2 moments
            assert tensor * 1e9 >= 16 * float(row["params_million"]) * 1e6, row["job_id"]
