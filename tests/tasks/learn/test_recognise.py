"""Recognising an architecture from its logged shape (issue 37): `zoo_match.match_shape`, bare family names
(`zoo_match.resolve_family`), timm entries, and what the traced prior and the forecasts carry of it.

The shapes are the published sizes a site would log (parameters in millions, depth, input size); the
expected architectures are hand-checked against zoo_shapes.json (vgg16 138.36M / 16 layers, ...).
"""

from __future__ import annotations

import warnings

import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.learn import traced, zoo, zoo_match, zoo_trace
from tests.tasks.learn.test_traced import fake_tracer


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.filterwarnings("ignore", category=UserWarning)


@pytest.mark.parametrize(("model_type", "params", "layers", "input_dim", "expected"), [
    ("CNN", 138.4, 16, 224, "vgg16"),  # the VGG-shaped CNN (published 138M; vgg16_bn is its same-family twin)
    ("ResNet", 25.6, 50, 224, "resnet50"),
    ("CNN", 25.6, 50, 224, "resnet50"),  # a ResNet logged as a CNN
    ("CNN", 22.9, 71, 299, "legacy_xception"),  # timm's Xception: 22.86M, 71 layers
    ("CNN", 23.8, 48, 299, "inception_v3"),  # the published depth (48), not the counted 95
    ("CNN", 5.3, 82, 224, "efficientnet_b0"),
    ("CNN", 3.5, 53, 224, "mobilenet_v2"),
    ("Transformer", 345.0, 24, 1024, "gpt2-medium"),  # the published count (354.8M built)
    ("Transformer", 124.7, 12, 512, "roberta-base"),  # gpt2 has the same size, but 1024 is its input
    ("Transformer", 86.6, 12, 224, "vit_b_16"),
    ("VGG", 143.7, 19, None, "vgg19"),  # the family's name as the model type
])
def test_a_logged_shape_is_recognised(model_type, params, layers, input_dim, expected):
    match = zoo_match.match_shape(model_type, params, layers, input_dim)
    assert match.arch == expected, match.reason
    assert match.distance is not None and 0 <= match.distance < 0.1
    assert expected in match.reason and "inferred from shape" in match.reason


def test_two_families_of_the_same_shape_are_a_tie_that_names_both():
    # BERT-base and XLNet-base are both published as 110M parameters, 12 blocks, 512 tokens
    match = zoo_match.match_shape("Transformer", 110.0, 12, 512)
    assert match.arch is None and match.distance is None
    assert "bert-base-uncased" in match.reason and "xlnet-base-cased" in match.reason and "equally" in match.reason


@pytest.mark.parametrize(("model_type", "params", "layers"), [
    ("CNN", 0.05, 3),  # a small site CNN: nothing in the zoo is that small
    ("CNN", 138.4, 60),  # VGG16's parameters, but four times its depth
    ("Transformer", 138.4, 16),  # VGG16's shape, but no Transformer of it
    ("MLP", 25.6, 50),  # no MLP in the zoo
])
def test_no_match_infers_nothing(model_type, params, layers):
    match = zoo_match.match_shape(model_type, params, layers, 224)
    assert match.arch is None and match.reason == "no zoo architecture of that shape"


@pytest.mark.parametrize("missing", [{"params_million": None}, {"num_layers": None}, {"model_type": None},
                                     {"params_million": float("nan")}, {"num_layers": 0}])
def test_an_incomplete_shape_infers_nothing(missing):
    shape = {"model_type": "CNN", "params_million": 138.4, "num_layers": 16, "input_dim": 224, **missing}
    assert zoo_match.match_shape(**shape).arch is None


def test_a_text_net_is_not_inferred_for_more_tokens_than_it_takes():
    # roberta-base's shape, but 2048 tokens: roberta takes 514 and gpt2 1024; opt-125m (125.2M) takes 2048
    assert zoo_match.match_shape("Transformer", 124.7, 12, 2048).arch == "opt-125m"


def test_a_vision_transformer_is_not_inferred_for_a_text_jobs_tokens():
    """Newcomer 27 P1: a "Transformer" of 47 M parameters, 23 layers and 2048 tokens was read as swin_s at a
    2048-pixel side (318.6 GB forecast, its like measured 4-23 GB). A side a vision transformer is trained at still
    matches; a convolutional net's input is pixels at any size."""
    assert zoo_match.match_shape("Transformer", 47.163, 23, 2048).arch is None
    assert zoo_match.match_shape("Transformer", 47.163, 23, 1024).arch == "swin_s"
    assert zoo_match.match_shape("Transformer", 47.163, 23, 224).arch == "swin_s"
    assert zoo_match.match_shape("ResNet", 25.557, 50, 2048).arch == "resnet50"
    # a type that names the family says its input is pixels: no bound (review 86 S2-3)
    assert zoo_match.match_shape("Swin", 47.163, 23, 1333).arch == "swin_s"


@pytest.mark.parametrize(("name", "expected"), [
    ("efficientnet", "efficientnet_b0"), ("EfficientNet", "efficientnet_b0"), ("inception", "inception_v3"),
    ("xception", "legacy_xception"), ("Xception", "legacy_xception"), ("bert", "bert-base-uncased"), ("BERT", "bert-base-uncased"),
])
def test_a_bare_family_name_is_its_stated_default_member(name, expected):
    match = zoo_match.resolve_family(name)
    assert match.arch == expected and match.distance is None
    assert f"default member {expected}" in match.reason and repr(name) in match.reason


def test_a_bare_family_name_with_a_shape_is_its_nearest_member():
    match = zoo_match.resolve_family("efficientnet", "CNN", 19.3, 161, 380)
    assert match.arch == "efficientnet_b4" and "nearest the logged shape" in match.reason
    assert zoo_match.resolve_family("gpt2", "Transformer", 774.0, 36, 1024).arch == "gpt2-large"
    assert zoo_match.resolve_family("resnet50") is None  # a full name is no family name
    assert zoo.canonical("xception") is None and zoo.canonical("inception") is None  # only resolve_family maps those


def test_every_zoo_entry_has_a_shape_that_a_fresh_build_confirms():
    shapes = zoo_match.shapes()
    assert set(shapes) == set(zoo.ARCHITECTURES)
    fresh = zoo_match.measure_shapes(["resnet18", "legacy_xception", "deit_tiny_patch16_224", "bert-base-uncased"])
    assert fresh["failed"] == {}
    for name, shape in fresh["shapes"].items():
        assert (shape["params"], shape["layers"], shape["max_input"]) == (shapes[name].params, shapes[name].layers,
                                                                          shapes[name].max_input), name
    assert shapes["bert-base-uncased"].max_input == 512 and shapes["legacy_xception"].layers == 71


def test_timm_families_are_in_the_zoo():
    families = {a.family for a in zoo.ARCHITECTURES.values() if zoo.RECIPES[a.name].library == "timm"}
    assert {"xception", "efficientnet", "convnext", "regnet", "vit", "inception"} <= families


def test_a_timm_name_that_fails_to_build_is_recorded_with_its_reason(monkeypatch):
    bogus = zoo.Arch("timm_no_such_net", "xception", "CNN", "image", 299)
    monkeypatch.setitem(zoo.ARCHITECTURES, bogus.name, bogus)
    monkeypatch.setitem(zoo.RECIPES, bogus.name, zoo.Recipe("no_such_net_in_timm", library="timm"))
    out = zoo_match.measure_shapes([bogus.name, "resnet18"])
    assert set(out["shapes"]) == {"resnet18"}
    assert "no_such_net_in_timm" in out["failed"][bogus.name]
    with pytest.raises(RuntimeError, match="no_such_net_in_timm"):
        zoo_trace.trace(zoo_trace.TraceRequest(bogus.name, 2, None, "FP32", "Adam"))


def test_a_real_timm_net_traces_on_the_meta_device():
    t = zoo_trace.trace(zoo_trace.TraceRequest("deit_tiny_patch16_224", 2, None, "FP32", "Adam"))
    assert (t.params, t.layers, t.input_dim) == (zoo_match.shapes()["deit_tiny_patch16_224"].params, 12, 224)
    assert t.peak_bytes >= 16 * t.params and t.flops > 0  # weights, grads and Adam's two moments at least


def shape_jobs() -> pl.DataFrame:
    """No `arch`: a VGG16 shape, a BERT/XLNet tie, a small site CNN; then a bare family name."""
    return pl.DataFrame({
        c.JOB_ID: ["vgg", "tie", "small", "family"], c.MODEL_TYPE: ["CNN", "Transformer", "CNN", "CNN"],
        c.ARCH: [None, None, None, "efficientnet"], c.PARAMS_MILLION: [138.4, 110.0, 0.05, None],
        c.NUM_LAYERS: [16, 12, 3, None], c.INPUT_DIM: [224, 512, 32, None], c.BATCH_SIZE: [128, 8, 64, 32],
        c.ITERATIONS: [1000.0] * 4, c.PRECISION: ["FP32"] * 4, c.OPTIMIZER: ["SGD"] * 4, c.REGULARIZATION: [None] * 4,
    }, schema_overrides={c.REGULARIZATION: pl.Boolean, c.ARCH: pl.String})


def test_trace_jobs_traces_the_recognised_arch_and_says_so(tmp_path):
    out = traced.trace_jobs(shape_jobs(), tmp_path / "traces.json", traced.Bounds(30, 60), tracer=fake_tracer)
    assert out[traced.ARCH_INFERRED].to_list() == ["vgg16", None, None, "efficientnet_b0"]
    assert out[traced.TRACE_STATUS].to_list() == ["traced", None, None, "traced"]
    assert out[traced.TRACED_MEM_GB].is_not_null().to_list() == [True, False, False, True]
    distance = out[traced.ARCH_MATCH_DISTANCE].to_list()
    assert distance[0] < 0.01 and distance[1:] == [None, None, None]
    words = out[traced.ARCH_INFERENCE].to_list()
    assert "vgg16" in words[0] and "bert-base-uncased and xlnet-base-cased" in words[1] and words[2] is None
    assert "default member efficientnet_b0" in words[3]
    # without inference, today's path: only a name the zoo knows is traced
    plain = traced.trace_jobs(shape_jobs(), tmp_path / "traces.json", traced.Bounds(30, 60), tracer=fake_tracer, infer=False)
    assert plain[traced.ARCH_INFERRED].null_count() == 4 and plain[traced.TRACE_STATUS].to_list() == [None] * 3 + ["unknown arch"]


def test_the_forecast_reason_leads_with_the_inference():
    rows = pl.DataFrame({traced.ARCH_INFERRED: ["vgg16", None, None], traced.ARCH_MATCH_DISTANCE: [0.001, None, None],
                         traced.ARCH_INFERENCE: ["arch inferred from shape: vgg16 (distance 0.001)",
                                                 "shape matches a and b equally: no arch inferred", None]})
    inferred, distance, reasons = traced.with_inference(rows, ["model type unseen", None, "x"])
    assert inferred.to_list() == ["vgg16", None, None] and distance.to_list() == [0.001, None, None]
    assert reasons == ["arch inferred from shape: vgg16 (distance 0.001); model type unseen",
                       "shape matches a and b equally: no arch inferred", "x"]


def test_inference_can_be_asked_for_per_row(tmp_path):
    # the nightly infers for pending jobs only (flows/stage.py): the history's rows keep today's path
    out = traced.trace_jobs(shape_jobs(), tmp_path / "traces.json", traced.Bounds(30, 60), tracer=fake_tracer,
                            infer=[False, True, True, True])
    assert out[traced.ARCH_INFERRED].to_list() == [None, None, None, "efficientnet_b0"]
    assert out[traced.TRACE_STATUS].to_list() == [None, None, None, "traced"]


def test_many_shapes_at_once_match_as_each_alone(monkeypatch):
    """`zoo_match.match_shapes` (what scoring uses: 1M shapes in seconds, not the ~11 minutes of one at a time) gives every
    shape what `match_shape` gives it alone, across chunk boundaries and with shapes that cannot match mixed in."""
    monkeypatch.setattr(zoo_match, "_CHUNK", 7)
    sizes = [(s.params / 1e6, s.layers) for s in zoo_match.shapes().values()]
    shapes = [(t, p * f, round(n * g), d) for (p, n) in sizes[::3] for t, f, g, d in (
        ("CNN", 1.0, 1.0, 224), ("Transformer", 1.03, 0.95, 512), ("ResNet", 0.97, 1.05, None))]
    shapes += [("CNN", None, 16, 224), (None, 138.4, 16, 224), ("CNN", 138.4, 0, 224), ("MLP", 1.0, 3, float("nan"))]
    many = zoo_match.match_shapes(*(list(column) for column in zip(*shapes, strict=True)))
    alone = [zoo_match.match_shape(*shape) for shape in shapes]
    assert many == alone
    assert sum(m.arch is not None for m in many) >= len(sizes[::3])  # matches among them, not only misses
    assert many[-4:] == [zoo_match.NO_SHAPE, zoo_match.NO_SHAPE, zoo_match.NO_SHAPE, zoo_match.NO_MATCH]


def test_repeated_and_mixed_rows_trace_as_each_row_alone(tmp_path):
    """Shapes are matched row by row and unknown names once per (name, shape) (`traced.infer_archs`, issue 52 item 5):
    rows repeated and interleaved, a known name beside a shape, get what each row gets alone, and only the rows with
    an inference are kept (by position, not a 1M-long list)."""
    # shape_jobs: vgg16's shape, a tie, no match, the family name "efficientnet"; `other`: an unknown name, the tie,
    # no match, no shape; then the four reversed; then every shape under a name the zoo knows (nothing inferred)
    other = shape_jobs().with_columns(pl.Series(c.ARCH, ["no-such-net", None, None, None], dtype=pl.String))
    rows = pl.concat([shape_jobs(), other, shape_jobs()[::-1], shape_jobs().with_columns(pl.lit("resnet50").alias(c.ARCH))])
    inferred = traced.infer_archs(rows)
    assert sorted(inferred) == [0, 1, 3, 5, 8, 10, 11]
    cache = tmp_path / "traces.json"
    whole = traced.trace_jobs(rows, cache, traced.Bounds(30, 60), tracer=fake_tracer)
    alone = pl.concat([traced.trace_jobs(rows[i:i + 1], cache, traced.Bounds(30, 60), tracer=fake_tracer)
                       for i in range(rows.height)])
    assert whole.drop(traced.TRACE_STATUS).equals(alone.drop(traced.TRACE_STATUS))
    assert whole[traced.TRACE_STATUS].replace("traced", "cached").to_list() == alone[traced.TRACE_STATUS].to_list()
