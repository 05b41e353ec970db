"""Out-of-distribution flags: is a pending job unlike every job its champion learned from?

Three checks, each cheap and each saying in words what it found (`ood_reason`):
1. **unseen category**: a model type, precision, optimizer or GPU the champion never saw in training,
   or a logged `gpu_type` the GPU catalog does not know (a missing value is not a category: missing
   values are common and models handle them);
2. **outside the training range**: a number (parameters, batch, input size, layers, iterations,
   learning rate, GPUs, peak throughput) below the smallest or above the largest value the champion
   saw, on the log scale, by more than `RANGE_MARGIN` (a tenth of a decade);
3. **low density**: a combination of numbers unlike the training jobs' although each is in range:
   the Mahalanobis distance of the job's standardised log numbers from the training jobs' mean,
   above the `DISTANCE_QUANTILE` of the training jobs' own distances. Mahalanobis distance was
   chosen over a learned novelty detector (an isolation forest, say) because it needs only a mean
   and a covariance (stored as JSON with the model), is exact to reproduce, and its false-alarm
   rate on jobs like the training ones is set by the quantile: 0.5% here, plus what checks 1-2 add.
4. **a name that contradicts the size**: a logged `params_million` more than `ARCH_PARAMS_FACTOR` (2x)
   off the parameters of the architecture the job names (`arch`, traced by `tasks/learn/traced.py`).

A flagged job gets the analytic prior's forecast with the prior's own calibrated intervals when the
champion's feature set has the priors (a formula extrapolates where trees go flat), else the
champion's interval widened by `WIDEN_FACTOR` each way (docs/planners.md).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn.features import FEATURE_SETS, GPU_MODEL
from gpucast.tasks.learn.traced import TRACED_PARAMS_MILLION

RANGE_MARGIN = np.log(10) / 10  # a tenth of a decade beyond the training range, on the log scale
DISTANCE_QUANTILE = 0.995
WIDEN_FACTOR = 2.0
ARCH_PARAMS_FACTOR = 2.0  # a logged params_million this many times off its named architecture's contradicts it


def fit(rows: pl.DataFrame, feature_set: str) -> dict:
    """What `flag` needs, JSON-ready, learned from the champion's training rows."""
    fs = FEATURE_SETS[feature_set]
    cats = [s.name for s in fs.specs if s.kind == "categorical"]
    nums = [s.name for s in fs.specs if s.kind == "log" and not s.name.startswith("prior_")]
    logs = _logs(rows, nums)
    ranges = {n: [float(np.nanmin(logs[:, i])), float(np.nanmax(logs[:, i]))] if np.isfinite(logs[:, i]).any() else None
              for i, n in enumerate(nums)}
    complete = logs[np.isfinite(logs).all(axis=1)]
    detector = None
    if len(complete) > 2 * len(nums) + 10:
        mean = complete.mean(axis=0)
        inv = np.linalg.pinv(np.cov(complete, rowvar=False))
        distances = _mahalanobis(complete, mean, inv)
        detector = {"mean": mean.tolist(), "inverse_covariance": inv.tolist(),
                    "threshold": float(np.quantile(distances, DISTANCE_QUANTILE))}
    return {"categories": {n: sorted(rows[n].drop_nulls().cast(pl.String).unique().to_list()) for n in cats},
            "numbers": nums, "ranges": ranges, "density": detector}


def _logs(rows: pl.DataFrame, names: list[str]) -> np.ndarray:
    if not names:
        return np.zeros((rows.height, 0))
    values = rows.select([pl.col(n).cast(pl.Float64) for n in names]).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(values > 0, np.log(np.where(values > 0, values, 1.0)), np.nan)


def _mahalanobis(x: np.ndarray, mean: np.ndarray, inv: np.ndarray) -> np.ndarray:
    d = x - mean
    return np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", d, inv, d), 0.0))


def flag(rows: pl.DataFrame, detector: dict) -> tuple[np.ndarray, list[str | None]]:
    """(ood per row, the reasons in words or None) for jobs scored by a champion with this detector."""
    reasons: dict[int, list[str]] = defaultdict(list)  # only flagged rows get a list: scoring runs this on 1M jobs
    for name, known in detector["categories"].items():
        if name not in rows.columns:
            continue
        values = rows[name].cast(pl.String)
        unseen = (values.is_not_null() & ~values.is_in(known)).to_numpy()  # vectorised: scoring runs it on every pending job
        for i in np.flatnonzero(unseen):
            reasons[int(i)].append(f"unseen {name} '{values[int(i)]}'")
    if c.GPU_TYPE in rows.columns and GPU_MODEL in rows.columns:  # a GPU the catalog does not know
        for i in np.flatnonzero(rows[c.GPU_TYPE].is_not_null().to_numpy() & rows[GPU_MODEL].is_null().to_numpy()):
            reasons[int(i)].append(f"unknown {c.GPU_TYPE} '{rows[c.GPU_TYPE][int(i)]}' (not in the GPU catalog)")
    for i, reason in arch_mismatch(rows).items():
        reasons[i].append(reason)
    nums = detector["numbers"]
    logs = _logs(rows, [n for n in nums if n in rows.columns]) if nums else np.zeros((rows.height, 0))
    for j, name in enumerate(n for n in nums if n in rows.columns):
        bounds = detector["ranges"].get(name)
        if not bounds:
            continue
        low, high = bounds[0] - RANGE_MARGIN, bounds[1] + RANGE_MARGIN
        col = logs[:, j]
        for i in np.flatnonzero(np.isfinite(col) & ((col < low) | (col > high))):
            side = "below" if col[i] < low else "above"
            edge = np.exp(bounds[0] if side == "below" else bounds[1])
            which = "min" if side == "below" else "max"
            reasons[int(i)].append(f"{name} {np.exp(col[i]):.4g} {side} the training range ({which} {edge:.4g})")
    density = detector.get("density")
    if density and logs.shape[1] == len(density["mean"]):
        complete = np.isfinite(logs).all(axis=1)
        dist = np.full(rows.height, np.nan)
        dist[complete] = _mahalanobis(logs[complete], np.asarray(density["mean"]), np.asarray(density["inverse_covariance"]))
        for i in np.flatnonzero(complete & (dist > density["threshold"])):
            if not reasons.get(int(i)):  # an out-of-range number explains a large distance already
                reasons[int(i)].append(f"an unusual combination of sizes (distance {dist[i]:.1f} > {density['threshold']:.1f}, "
                                  f"the training jobs' {DISTANCE_QUANTILE:.1%})")
    flags = np.zeros(rows.height, dtype=bool)
    words: list[str | None] = [None] * rows.height
    for i, r in reasons.items():
        flags[i], words[i] = True, "; ".join(r)
    return flags, words


def arch_mismatch(rows: pl.DataFrame) -> dict[int, str]:
    """Row -> reason, for jobs whose logged `params_million` contradicts the parameters of the architecture
    they name (the traced network's, `traced_params_million`) by more than `ARCH_PARAMS_FACTOR` either way:
    the name or the count is wrong, and the forecast rests on one of them."""
    if TRACED_PARAMS_MILLION not in rows.columns or c.PARAMS_MILLION not in rows.columns:
        return {}
    logged = rows[c.PARAMS_MILLION].cast(pl.Float64).to_numpy()
    named = rows[TRACED_PARAMS_MILLION].cast(pl.Float64).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = logged / named
    off = np.isfinite(ratio) & (named > 0) & ((ratio > ARCH_PARAMS_FACTOR) | (ratio < 1 / ARCH_PARAMS_FACTOR))
    arch = rows[c.ARCH] if c.ARCH in rows.columns else pl.Series([None] * rows.height, dtype=pl.String)
    return {int(i): f"params_million {logged[i]:.4g} contradicts {c.ARCH} '{arch[int(i)]}' ({named[i]:.4g} million "
                    f"parameters built; more than {ARCH_PARAMS_FACTOR:g}x apart)" for i in np.flatnonzero(off)}
