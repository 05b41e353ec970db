"""Recognising a zoo architecture (`zoo.py`'s catalogue) from the shape a site logged: model type, parameter
count, depth and input size (`match_shape`, `match_shapes`), and a bare family name as one of its members
(`resolve_family`). The entries' built sizes are `zoo_shapes.json`, written by
``python -m gpucast.tasks.learn.zoo_match --write-shapes`` (`write_shapes`, which builds each one: `zoo_trace.py`).

numpy is imported on first use (this module loads with the standard library alone).
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpucast.tasks.learn.zoo import ARCHITECTURES, FAMILY_DEFAULTS, RECIPES, Arch, spelling_key

if TYPE_CHECKING:
    import numpy as np

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

    from gpucast.tasks.learn import zoo_trace  # torch, torchvision, timm and transformers: on first use
    stepmem = zoo_trace.step_core()
    shapes, failed = {}, {}
    for name in names or list(ARCHITECTURES):
        arch, build = ARCHITECTURES[name], RECIPES[name]
        try:
            network = zoo_trace.build_network(zoo_trace.TraceRequest(name, 1, None, "FP32", None))
            max_input = (getattr(zoo_trace.text_config(arch, build, 1), build.max_tokens_key)
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
# The largest image side a vision transformer is inferred at from a logged "Transformer" shape (newcomer 27 P1): that
# model type's input reads as tokens (the analytic prior reads a Transformer as a vision one only when named so), and a
# text job of 2048 tokens with swin_s's size was traced as a 2048 x 2048-pixel image (1.1 TB at batch 128). 1024 px is
# the largest side the zoo's vision transformers are commonly trained at (SAM's image encoder; ViT and Swin at 224-512).
VISION_TRANSFORMER_MAX_SIDE = 1024
GENERIC_TRANSFORMER = spelling_key("Transformer")  # the model type whose input may be tokens or pixels
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
    key = spelling_key(model_type)
    return key in (spelling_key(arch.model_type), spelling_key(arch.family)) or (key == "cnn" and arch.model_type == "ResNet")


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
    max_input: np.ndarray  # the most tokens a text net takes, or pixels a side a vision transformer (`_max_input`)

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
            column(_max_input(ARCHITECTURES[n], built[n]) for n in names))
    return _ENTRIES


def _max_input(arch: Arch, shape: Shape) -> float:
    """The largest logged input a shape is matched to `arch` at: the tokens a text net takes, at most
    `VISION_TRANSFORMER_MAX_SIDE` pixels a side for a vision transformer, no bound for a convolutional net (its model
    type's input is pixels)."""
    if arch.kind == "text":
        return math.inf if shape.max_input is None else shape.max_input
    return VISION_TRANSFORMER_MAX_SIDE if arch.model_type == "Transformer" else math.inf


def match_shapes(model_types: list, params_million: list, num_layers: list, input_dims: list,
                 family: str | None = None) -> list[Match]:
    """`match_shape` of many shapes at once (`shape_matches`): per shape its `Match`, `NO_MATCH` or `NO_SHAPE`."""
    import polars as pl

    types = pl.Series([t if isinstance(t, str) else None for t in model_types], dtype=pl.String)
    params, layers, dims = _floats(params_million), _floats(num_layers), _floats(input_dims)
    out: list[Match] = [NO_SHAPE] * len(model_types)
    for i in _shaped(types, params * 1e6, layers).tolist():
        out[i] = NO_MATCH
    for i, match in shape_matches(types, params, layers, dims, family).items():
        out[i] = match
    return out


def _shaped(model_types, params: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """The positions of the shapes with a model type, a parameter count and a depth (the others are `NO_SHAPE`)."""
    import numpy as np

    good = model_types.is_not_null().to_numpy() & np.isfinite(params) & (params > 0) & np.isfinite(layers) & (layers > 0)
    return np.flatnonzero(good)


def shape_matches(model_types, params_million: np.ndarray, num_layers: np.ndarray, input_dims: np.ndarray,
                  family: str | None = None) -> dict[int, Match]:
    """The shapes that match a zoo entry or tie between two, by position (numpy: per model type, `_CHUNK` shapes at a
    time against every entry it may be, `_match_rows`); every other shape is `NO_MATCH`, or `NO_SHAPE` without a model
    type, parameter count or depth (`match_shapes` says which). `model_types`: a Polars String Series; the numbers:
    float arrays, NaN where not logged. Per shape, distance = |ln params ratio| + `DEPTH_WEIGHT` |ln depth ratio| +
    `INPUT_WEIGHT` |ln input / the net's default input| to each entry of a compatible model type (or of
    `family`) within `PARAMS_TOLERANCE` and `DEPTH_TOLERANCE`
    (each ratio to the built size or the published one, whichever is nearer; a text net never takes more tokens than
    it can, a vision transformer no side over `VISION_TRANSFORMER_MAX_SIDE`); then the rule of `match_shape`. Only
    the few shapes near an entry become Python objects (1M pending jobs a run in `gpucast score`, issue 52 item 5)."""
    import numpy as np

    e, out = _entries(), {}
    params_all = params_million * 1e6
    ok_rows = _shaped(model_types, params_all, num_layers)
    if not len(ok_rows) or not e.names:
        return out
    types = model_types.gather(ok_rows)
    for kind in types.unique(maintain_order=True).to_list():  # each model type against the entries it may be
        mask = (e.families == family) if family is not None else np.array(
            [_compatible(kind, ARCHITECTURES[name]) for name in e.names])
        at, rows = np.flatnonzero(mask), ok_rows[(types == kind).to_numpy()]
        if len(at) and len(rows):
            entries = e.subset(at)
            if spelling_key(kind) != GENERIC_TRANSFORMER:  # a type naming the family ("Swin", "ViT"): its input is
                image = np.array([ARCHITECTURES[n].kind == "image" for n in entries.names])  # pixels, at any side
                entries = replace(entries, max_input=np.where(image, math.inf, entries.max_input))  # (review 86 S2-3)
            _match_rows(out, rows, entries, params_all, num_layers, input_dims)
    return out


def _match_rows(out: dict[int, Match], rows: np.ndarray, e: _Entries, params_all: np.ndarray, layers_all: np.ndarray,
                dims_all: np.ndarray) -> None:
    """`match_shapes`' rule for `rows` (indices into the `*_all` arrays and `out`) against the entries `e`, all
    compatible with them; the rows that match or tie get their `Match` in `out` (by position)."""
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
        dp = np.minimum(np.abs(params - e.params), np.abs(params - e.published))
        dl = np.minimum(np.abs(layers - e.layers), np.abs(layers - e.published_layers))
        near = (dp <= PARAMS_TOLERANCE) & (dl <= DEPTH_TOLERANCE)
        # a row whose size and depth are near no one entry together matches none (its `ok` would be all False): of
        # ~234k such rows at 1M pending jobs ~29k are kept, and the rest of the rule runs on those only
        keep = near.any(axis=1)
        chunk, dp, dl, near = chunk[keep], dp[keep], dl[keep], near[keep]
        dims = dims_all[chunk][:, None]
        has_dim = np.isfinite(dims) & (dims > 0)
        di = np.where(has_dim, np.abs(np.log(np.where(has_dim, dims, 1.0)) - e.default_input), 0.0)
        ok = near & ~(has_dim & (dims > e.max_input))
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
    family = next((f for f in FAMILY_DEFAULTS if spelling_key(f) == spelling_key(name)), None)
    if family is None:
        return None
    by_shape = match_shape(model_type or "", params_million, num_layers, input_dim, family=family)
    if by_shape.arch is not None:
        return Match(by_shape.arch, by_shape.distance,
                     f"arch {name!r} is a family name: traced as {by_shape.arch}, its member nearest the logged shape "
                     f"(distance {by_shape.distance:.3f})")
    default = FAMILY_DEFAULTS[family]
    return Match(default, None, f"arch {name!r} is a family name: traced as its default member {default}")


if __name__ == "__main__":  # python -m gpucast.tasks.learn.zoo_match --write-shapes: regenerate zoo_shapes.json
    if sys.argv[1:] == ["--write-shapes"]:
        written = write_shapes()
        print(f"{len(written['shapes'])} shapes, {len(written['failed'])} failed: {written['failed']} -> {SHAPES_FILE}")
