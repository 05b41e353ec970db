"""The traced prior's interval per architecture family (issue 37, item 5): P10 / P90 of a job scored on its
traced prior itself (`Scorer`, `ood.traced_unlearned`), from real GPU runs.

What a GPU reports over the traced prior (`traced.reported_gb`: 1.15 x the tensor peak + 0.83 GB) depends on
the family: cuDNN's workspaces for large convolutions put VGG16 1.08-1.36x above it and Inception 1.13-1.21x,
while the Transformers' allocator reserve is close to their allocation (BERT 0.83-0.88x). One factor for all
(x/÷ 1.20, `traced.REPORTED_INTERVAL`) covered VGG's runs 1 time in 4 and Inception's 3 in 4.

How the bands were chosen, on the 44 H100 runs of `tests/data/gpu_archs_h100.csv` (10 families, 4 runs each,
BERT 8): the log residual r = log(device memory used / traced prior) of each run;
1. per **group** (`convnet`: the zoo's CNN and ResNet model types; `transformer`: its Transformer ones, ViT and
   Swin included), a Mondrian conformal predictive system (crepes, as `intervals.py` uses) on r gives P10 and
   P90 at the conservative order statistics: 24 and 20 runs, enough for a finite-sample 90% (9 are);
2. per **family** with runs, four runs cannot carry a conformal 90% of their own (9 would be needed), so the
   family's band is the group's widened to the family's own lowest and highest r: the group's guarantee
   holds, and no run of the family falls outside its band;
3. a family without runs (the zoo's other 16) gets its group's band; a name the zoo does not place, the one
   factor of before.
`GROUP_BANDS` and `FAMILY_BANDS` are those numbers (`fit` recomputes them; a test checks they agree, and
tests/benchmarks/bench_traced.py `--bands` prints them with each family's coverage, in sample and leaving
each run out). 4 runs a family on one GPU and one software stack: other GPUs and PyTorch versions move them.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from gpucast.tasks.learn import traced

LOWER, UPPER = 10, 90
CONVNET, TRANSFORMER = "convnet", "transformer"
# (P10 factor, P90 factor) of the traced prior: P10 = traced x low, P90 = traced x high
GROUP_BANDS = {CONVNET: (0.9584, 1.3095), TRANSFORMER: (0.8334, 1.058)}
FAMILY_BANDS = {
    "densenet": (0.9584, 1.3095), "efficientnet": (0.9501, 1.3095), "inception": (0.9584, 1.3095),
    "mobilenet": (0.9584, 1.3095), "resnet": (0.9584, 1.3095), "vgg": (0.9584, 1.3642),
    "bert": (0.8332, 1.058), "gpt2": (0.8334, 1.058), "swin": (0.8334, 1.0747), "vit": (0.8334, 1.058),
}
DEFAULT_BAND = (1 / traced.REPORTED_INTERVAL, traced.REPORTED_INTERVAL)  # a name the zoo does not place


def group_of(model_type: str) -> str:
    return TRANSFORMER if model_type == "Transformer" else CONVNET


def fit(families: np.ndarray, model_types: np.ndarray, actual: np.ndarray, traced_gb: np.ndarray) -> tuple[dict, dict]:
    """(group bands, family bands) from real runs: the rule of the module's docstring."""
    from crepes import ConformalPredictiveSystem

    r = np.log(np.asarray(actual, dtype=np.float64) / np.asarray(traced_gb, dtype=np.float64))
    groups = np.array([group_of(str(m)) for m in model_types], dtype=object)
    names = sorted(set(groups))
    cps = ConformalPredictiveSystem().fit(r, bins=groups)
    band = np.exp(np.asarray(cps.predict(np.zeros(len(names)), bins=np.array(names, dtype=object),
                                         lower_percentiles=[LOWER], higher_percentiles=[UPPER]), dtype=np.float64))
    group_bands = {g: (_down(lo), _up(hi)) for g, (lo, hi) in zip(names, band, strict=True)}
    family_bands = {}
    for fam in sorted(set(families)):
        mine = families == fam
        lo, hi = group_bands[groups[mine][0]]
        family_bands[str(fam)] = (min(lo, _down(np.exp(r[mine].min()))), max(hi, _up(np.exp(r[mine].max()))))
    return group_bands, family_bands


def _down(x: float) -> float:  # 4 decimals, rounded outwards: a band never shrinks by its rounding
    return float(np.floor(x * 1e4) / 1e4)


def _up(x: float) -> float:
    return float(np.ceil(x * 1e4) / 1e4)


def _place(name: str | None) -> tuple[float, float]:
    from gpucast.tasks.learn import zoo  # the standard library only at import

    arch = zoo.ARCHITECTURES.get(zoo.canonical(name) or "")
    if arch is None:
        return DEFAULT_BAND
    return FAMILY_BANDS.get(arch.family, GROUP_BANDS[group_of(arch.model_type)])


def bands(names: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(P10 factor, P90 factor) per job from the architecture each names (`arch`, or the one inferred)."""
    placed = {n: _place(n) for n in names.drop_nulls().unique().to_list()}  # a few names per million jobs
    low = names.replace_strict({n: b[0] for n, b in placed.items()}, default=DEFAULT_BAND[0], return_dtype=pl.Float64)
    high = names.replace_strict({n: b[1] for n, b in placed.items()}, default=DEFAULT_BAND[1], return_dtype=pl.Float64)
    return low.to_numpy(), high.to_numpy()


def describe(low: float, high: float) -> str:
    return f"x{low:.2f}-x{high:.2f}"
