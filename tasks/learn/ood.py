"""Out-of-distribution flags: is a pending job unlike every job its champion learned from?

The checks (`CHECKS`), each cheap and each saying in words what it found (`ood_reason`):
1. **unseen category**: a model type, precision or optimizer the champion never saw in training (a
   missing value is not a category: missing values are common and models handle them);
2. **unknown GPU**: a logged `gpu_type` whose peak throughput is unknown (neither logged as
   `gpu_peak_tflops` nor in the GPU catalogue) and that the champion's training jobs never ran on. A
   GPU is judged by the history, not by a reference table: one the catalogue lacks is known when the
   log gives its peak (check 3 then judges the peak like any number) or the training jobs used it;
3. **outside the training range**: a number (parameters, batch, input size, layers, iterations,
   learning rate, GPUs, peak throughput) below the smallest or above the largest value the champion
   saw, on the log scale, by more than `RANGE_MARGIN` (a tenth of a decade);
4. **low density**: a combination of numbers unlike the training jobs' although each is in range:
   the Mahalanobis distance of the job's standardised log numbers from the training jobs' mean,
   above the `DISTANCE_QUANTILE` of the training jobs' own distances. Mahalanobis distance was
   chosen over a learned novelty detector (an isolation forest, say) because it needs only a mean
   and a covariance (stored as JSON with the model), is exact to reproduce, and its false-alarm
   rate on jobs like the training ones is set by the quantile: 0.5% here, plus what the other checks add.
5. **a name that contradicts the size** (`_arch_mismatch`): a logged `params_million` more than
   `ARCH_PARAMS_FACTOR` (2x) off the parameters of the architecture the job names (`arch`, traced by
   `tasks/learn/traced.py`).
6. **a layout the history never had** (`_llm_unlearned`): a job with contract v5 fields (a per-GPU prior,
   `llm_mem_gb`) while the champion learned from fewer than `MIN_LLM_ROWS` such jobs: its learned correction
   was fitted on other jobs only, so neither it nor the held-out-best fallback (also learned there) is applied: the
   memory forecast is the per-GPU prior itself (`llm_unlearned`; issue 51: on ColossalAI's runs the correction
   moved a 17.5%-off prior to 29.2%). Likewise, however many it learned from, where its out-of-fold forecasts of the
   history's LLM jobs of the job's layout group (adapter x one / many GPUs) did not beat the prior on them
   (`llm_correction`, measured at training time: the correction carried one source's offset onto another).
7. **an LLM job of unknown size** (`_llm_unknown_size`): a job with contract v5 fields (`llm_memory.is_llm`) whose
   per-GPU prior could not be computed: its `arch` is not in the LLM table and neither `params_million` nor a size in
   its name is logged. The analytic prior then reads it as a small model and the champion's correction sits on that
   (session 15: GLM-4.5-Air, an MoE of 106B parameters, forecast at 3-7 GB with a P90 of 4-9 GB, measured 75 GB,
   unflagged). The job is flagged with the words that say what is missing; its memory forecast stays the champion's
   (`tasks/learn/score.py`: not the fallbacks, which lean on that prior). Its memory band is not widened: raising its
   P90 (to its GPU's memory, say) would mark every such job an OOM risk and move it to a larger GPU in the plan, for a
   size nobody logged; the flag asks for `params_million` instead, and the plan reads its memory as unknown. Its run
   time and compute forecasts go to the held-out-best fallback as any flagged job's do, their bands widened by its
   interval factor (review 65a S3-4).
A new reason is one more function `(rows, detector, logs) -> [(row index, words), ...]` added to
`CHECKS` (and, when it needs something learned at training time, one more field of `Detector`, with a
default so older metadata files still load).

**The fallback is chosen by evidence** (`held_out_best`, at training time): leave one model family
(`model_type`) out of the champion's training rows, fit on the others, forecast it, for every family
with at least `MIN_FAMILY_ROWS` rows; on those held-out forecasts, compare the trained model's
extrapolation, the analytic prior (the target's prior column) and their geometric mean (`blend`),
and keep the one with the lowest MAPE. Its interval factor is the `INTERVAL_QUANTILE` of its held-out
|log(actual / estimate)|: a flagged job gets P50 = that estimate, P10 = P50 / exp(q), P90 = P50 x exp(q).
Without that evidence (one family, or too few rows) a flagged job gets the analytic prior with its
own calibrated intervals when the champion's feature set has the priors, else the champion's
interval widened by `WIDEN_FACTOR` each way (docs/planners.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records import UNKNOWN_LLM_SIZE, catalog
from gpucast.tasks.learn.features import FEATURE_SETS, GPU_MODEL
from gpucast.tasks.learn.llm_memory import LLM_MEM_GB, is_llm, layout_group
from gpucast.tasks.learn.traced import TRACED_MEM_GB, TRACED_PARAMS_MILLION

RANGE_MARGIN = np.log(10) / 10  # a tenth of a decade beyond the training range, on the log scale
DISTANCE_QUANTILE = 0.995
WIDEN_FACTOR = 2.0
# A champion that learned from fewer jobs with a traced memory prior has not learned to correct one: its
# residual, learned against the analytic prior, moves a right base the wrong way (docs/models.md, "Accuracy
# on real architectures": 24.4% MAPE on real H100 runs where the traced prior alone is 9.0%).
MIN_TRACED_ROWS = 20
# Likewise for jobs with LLM fields (their memory prior is the per-GPU prior of tasks/learn/llm_memory.py): a
# champion that learned from fewer has no support for correcting one (`_llm_unlearned`).
MIN_LLM_ROWS = 20
# A layout group (`llm_memory.layout_group`) with fewer out-of-fold LLM jobs is judged with all of them together
# (`LlmCorrection`): a median of fewer than 10 errors moves by one job.
MIN_LLM_GROUP_ROWS = 10
LLM_KEEP_P = 0.05  # the sign test's level for keeping the correction in a group (`llm_correction`)
ARCH_PARAMS_FACTOR = 2.0  # a logged params_million this many times off its named architecture's contradicts it
# The held-out-family evidence (`held_out_best`).
FAMILY = c.MODEL_TYPE  # what a family is: the jobs of one model type
MIN_FAMILY_ROWS = 20  # a family with fewer rows is not held out (its error would be noise)
INTERVAL_QUANTILE = 0.9  # of the chosen estimate's held-out |log error|: the interval factor
# The trained model's extrapolation, the prior, their geometric mean. This "blend" is the model x prior geometric mean
# of the out-of-range guard, not the champion candidate `registry.BLEND` (the stacking of `tasks/learn/blend.py`).
CANDIDATES = ("model", "prior", "blend")
CANDIDATE_WORDS = {"model": "the champion's own extrapolation", "prior": "the prior",
                   "blend": "the champion and the prior, blended"}  # for the training log
CHOSEN_BY = "mape"


# --------------------------------------------------------------------------------------------------
# What training learns for scoring, saved in the champion's metadata.json under "ood" (issue 39, item 1):
# one writer (`Detector.to_json`, called by tasks/learn/train.py) and one reader (`Detector.from_json`, called
# by tasks/learn/score.py). The JSON keys are the field names; a metadata file written before a field existed
# loads with that field's default (no traced_rows: 0, no gpu_types: none seen, no ceiling / fallback: None).
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Density:
    """The low-density check's Mahalanobis detector (check 4)."""

    mean: tuple[float, ...]
    inverse_covariance: tuple[tuple[float, ...], ...]
    threshold: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Density | None:
        if not data:
            return None
        return cls(tuple(map(float, data["mean"])), tuple(tuple(map(float, r)) for r in data["inverse_covariance"]),
                   float(data["threshold"]))


@dataclass(frozen=True)
class Ceiling:
    """The largest value of `target` per kind (`FAMILY`) in the training rows, and its margin (`fit_ceiling`)."""

    target: str
    margin: float
    by_kind: Mapping[str, float]

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Ceiling | None:
        if not data:
            return None
        return cls(str(data["target"]), float(data["margin"]), {str(k): float(v) for k, v in data["by_kind"].items()})


@dataclass(frozen=True)
class HeldOutScore:
    """One candidate estimate's errors on the held-out families (`held_out_best`)."""

    mape: float
    median_log_error: float
    interval_factor: float
    mape_by_family: Mapping[str, float]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HeldOutScore:
        return cls(float(data["mape"]), float(data["median_log_error"]), float(data["interval_factor"]),
                   {str(k): float(v) for k, v in data.get("mape_by_family", {}).items()})


@dataclass(frozen=True)
class Fallback:
    """What out-of-distribution jobs get, chosen by held-out evidence (`held_out_best`); `estimate` is one
    of `CANDIDATES`, `interval_factor` its held-out `INTERVAL_QUANTILE` of |log error| as a factor."""

    estimate: str
    chosen_by: str
    learner: str
    families: Mapping[str, int]
    held_out_rows: int
    interval_quantile: float
    interval_factor: float
    candidates: Mapping[str, HeldOutScore]
    seconds: float | None = None  # how long measuring it took (tasks/learn/evidence.py `held_out_evidence`)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Fallback | None:
        if not data:
            return None
        return cls(str(data["estimate"]), str(data.get("chosen_by", f"lowest held-out {CHOSEN_BY}")), str(data.get("learner", "")),
                   {str(k): int(v) for k, v in data.get("families", {}).items()}, int(data.get("held_out_rows", 0)),
                   float(data.get("interval_quantile", INTERVAL_QUANTILE)), float(data["interval_factor"]),
                   {str(k): HeldOutScore.from_json(v) for k, v in data.get("candidates", {}).items()}, data.get("seconds"))


@dataclass(frozen=True)
class LlmGroup:
    """The champion's out-of-fold P50 MAPE (median APE, %) on one layout group's LLM jobs (`llm_memory.layout_group`)
    against the per-GPU prior's on the same jobs, and whether the correction is kept there (`llm_correction`)."""

    rows: int
    model_mape: float
    prior_mape: float
    closer: int  # jobs the correction forecast closer to the measured peak than the prior did
    p_value: float  # of `closer` or more of `rows` by chance if neither were closer more often (one-sided sign test)
    keep: bool

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LlmGroup:
        # `closer` and `p_value` came a night after the first saved shape (b748d04): a group saved without them loads
        # with no sign-test evidence and the decision it was saved with (the module's rule: older metadata still loads)
        return cls(int(data["rows"]), float(data["model_mape"]), float(data["prior_mape"]), int(data.get("closer", 0)),
                   float(data.get("p_value", 1.0)), bool(data["keep"]))


@dataclass(frozen=True)
class LlmCorrection:
    """Where the champion's learned correction of the per-GPU prior is applied (issue 51): per layout group with at
    least `MIN_LLM_GROUP_ROWS` out-of-fold LLM jobs, where it beat the prior on them; every other group (too few
    jobs, or none in the history) by all LLM jobs together (`pooled`)."""

    pooled: LlmGroup
    by_group: Mapping[str, LlmGroup]

    def keeps(self, group: str | None) -> bool:
        """Whether a job of `group` gets the champion's correction (else the per-GPU prior itself)."""
        return self.by_group[group].keep if group in self.by_group else self.pooled.keep

    def says(self, group: str | None) -> str:
        """Why a job of `group` gets the per-GPU prior, in words (for `ood_reason`)."""
        known = group in self.by_group
        e = self.by_group[group] if known else self.pooled
        where = f"{e.rows} {group} jobs" if known else f"all {e.rows} LLM jobs ({group}: fewer than {MIN_LLM_GROUP_ROWS})"
        return (f"the champion's correction did not beat the per-GPU prior out of fold on {where} "
                f"(P50 MAPE {e.model_mape:.1f}% vs {e.prior_mape:.1f}%, closer on {e.closer}, sign test p {e.p_value:.2g})")

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> LlmCorrection | None:
        if not data:
            return None
        return cls(LlmGroup.from_json(data["pooled"]), {str(k): LlmGroup.from_json(v) for k, v in data["by_group"].items()})


@dataclass(frozen=True)
class Detector:
    """What `flag` needs, learned from the champion's training rows (`fit`), with the impossible-forecast
    ceiling (`fit_ceiling`) and the held-out-best fallback (`held_out_best`) training adds."""

    categories: Mapping[str, tuple[str, ...]]
    numbers: tuple[str, ...]
    ranges: Mapping[str, tuple[float, float] | None]
    density: Density | None = None
    gpu_types: tuple[str, ...] = ()  # folded names (`catalog.fold`)
    traced_rows: int = 0  # training jobs with a traced memory prior
    llm_rows: int = 0  # training jobs with LLM fields (a per-GPU memory prior, `llm_mem_gb`)
    ceiling: Ceiling | None = None
    fallback: Fallback | None = None
    llm_correction: LlmCorrection | None = None  # where the correction of the per-GPU prior is kept (`llm_correction`)

    def to_json(self) -> dict[str, Any]:
        """The one writer: JSON-ready (tuples become lists), keys the field names."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Detector | None:
        """The one reader: `to_json`'s dict, or an older metadata file's (missing fields get their defaults);
        None for a champion saved without a detector."""
        if not data:
            return None
        return cls(categories={str(k): tuple(map(str, v)) for k, v in data.get("categories", {}).items()},
                   numbers=tuple(data.get("numbers", ())),
                   ranges={str(k): (float(v[0]), float(v[1])) if v else None for k, v in data.get("ranges", {}).items()},
                   density=Density.from_json(data.get("density")), gpu_types=tuple(data.get("gpu_types", ())),
                   traced_rows=int(data.get("traced_rows", 0)), llm_rows=int(data.get("llm_rows", 0)),
                   ceiling=Ceiling.from_json(data.get("ceiling")),
                   fallback=Fallback.from_json(data.get("fallback")),
                   llm_correction=LlmCorrection.from_json(data.get("llm_correction")))


Reasons = Iterable[tuple[int, str]]  # (row index, words) pairs a check finds


def fit(rows: pl.DataFrame, feature_set: str) -> Detector:
    """What `flag` needs, learned from the champion's training rows."""
    fs = FEATURE_SETS[feature_set]
    cats = [s.name for s in fs.specs if s.kind == "categorical" and s.name != GPU_MODEL]  # a GPU: `_unknown_gpus`
    nums = [s.name for s in fs.specs if s.kind == "log" and not s.name.startswith("prior_")]
    logs = _logs(rows, nums)
    ranges = {n: (float(np.nanmin(logs[:, i])), float(np.nanmax(logs[:, i]))) if np.isfinite(logs[:, i]).any() else None
              for i, n in enumerate(nums)}
    complete = logs[np.isfinite(logs).all(axis=1)]
    detector = None
    if len(complete) > 2 * len(nums) + 10:
        mean = complete.mean(axis=0)
        inv = np.linalg.pinv(np.cov(complete, rowvar=False))
        distances = _mahalanobis(complete, mean, inv)
        detector = Density(tuple(mean.tolist()), tuple(map(tuple, inv.tolist())), float(np.quantile(distances, DISTANCE_QUANTILE)))
    gpus = rows[c.GPU_TYPE].drop_nulls().unique().to_list() if c.GPU_TYPE in rows.columns else []
    return Detector(categories={n: tuple(sorted(rows[n].drop_nulls().cast(pl.String).unique().to_list())) for n in cats},
                    gpu_types=tuple(sorted({catalog.fold(g) for g in gpus})),  # folded: `A100_80GB` is `a100 80gb`
                    numbers=tuple(nums), ranges=ranges, density=detector,
                    traced_rows=int(rows[TRACED_MEM_GB].is_not_null().sum()) if TRACED_MEM_GB in rows.columns else 0,
                    llm_rows=int(rows[LLM_MEM_GB].is_not_null().sum()) if LLM_MEM_GB in rows.columns else 0)


def traced_unlearned(rows: pl.DataFrame, detector: Detector) -> np.ndarray:
    """Jobs whose memory prior is a trace (`traced_mem_gb`) while the champion learned from fewer than
    `MIN_TRACED_ROWS` traced jobs (a detector saved before traces counted none): they get the traced prior
    itself (`tasks/learn/score.py`)."""
    if TRACED_MEM_GB not in rows.columns or detector.traced_rows >= MIN_TRACED_ROWS:
        return np.zeros(rows.height, dtype=bool)
    return rows[TRACED_MEM_GB].is_not_null().to_numpy()


def _logs(rows: pl.DataFrame, names: list[str]) -> np.ndarray:
    if not names:
        return np.zeros((rows.height, 0))
    values = rows.select([pl.col(n).cast(pl.Float64) for n in names]).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(values > 0, np.log(np.where(values > 0, values, 1.0)), np.nan)


def _mahalanobis(x: np.ndarray, mean: np.ndarray, inv: np.ndarray) -> np.ndarray:
    d = x - mean
    return np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", d, inv, d), 0.0))


def _unseen_categories(rows: pl.DataFrame, detector: Detector, logs: np.ndarray) -> Reasons:
    for name, known in detector.categories.items():
        if name not in rows.columns or name == GPU_MODEL:  # (a detector saved before the GPU rule listed it)
            continue
        values = rows[name].cast(pl.String)
        unseen = (values.is_not_null() & ~values.is_in(known)).to_numpy()  # vectorised: scoring runs it on every pending job
        for i in np.flatnonzero(unseen):
            yield int(i), f"unseen {name} '{values[int(i)]}'"


def _unknown_gpus(rows: pl.DataFrame, detector: Detector, logs: np.ndarray) -> Reasons:
    """A GPU with no known peak (not logged, not in the catalogue) that the training jobs never ran on."""
    if c.GPU_TYPE not in rows.columns:
        return
    types = rows[c.GPU_TYPE].cast(pl.String)
    seen = set(detector.gpu_types)
    known = {t: catalog.fold(t) in seen for t in types.drop_nulls().unique().to_list()}  # a few names per million jobs
    in_history = types.replace_strict(known, default=False, return_dtype=pl.Boolean)
    catalogued = {t: catalog.canonical(t) is not None for t in known}
    in_catalog = (rows[GPU_MODEL].is_not_null() if GPU_MODEL in rows.columns
                  else types.replace_strict(catalogued, default=False, return_dtype=pl.Boolean))
    peak_logged = (rows[c.GPU_PEAK_TFLOPS].cast(pl.Float64) > 0).fill_null(False) if c.GPU_PEAK_TFLOPS in rows.columns \
        else pl.Series([False] * rows.height)
    unknown = (types.is_not_null() & ~in_catalog & ~peak_logged & ~in_history).to_numpy()
    for i in np.flatnonzero(unknown):
        yield int(i), (f"unknown {c.GPU_TYPE} '{types[int(i)]}' (not in the GPU catalog, no {c.GPU_PEAK_TFLOPS} logged, "
                       f"never in the training jobs)")


def _out_of_range(rows: pl.DataFrame, detector: Detector, logs: np.ndarray) -> Reasons:
    for j, name in enumerate(n for n in detector.numbers if n in rows.columns):
        bounds = detector.ranges.get(name)
        if not bounds:
            continue
        low, high = bounds[0] - RANGE_MARGIN, bounds[1] + RANGE_MARGIN
        col = logs[:, j]
        for i in np.flatnonzero(np.isfinite(col) & ((col < low) | (col > high))):
            side = "below" if col[i] < low else "above"
            edge = np.exp(bounds[0] if side == "below" else bounds[1])
            yield int(i), f"{name} {np.exp(col[i]):.4g} {side} the training range ({'min' if side == 'below' else 'max'} {edge:.4g})"


def _arch_mismatch(rows: pl.DataFrame, detector: Detector, logs: np.ndarray) -> Reasons:
    """Jobs whose logged `params_million` contradicts the parameters of the architecture they name (the
    traced network's, `traced_params_million`) by more than `ARCH_PARAMS_FACTOR` either way: the name or
    the count is wrong, and the forecast rests on one of them."""
    if TRACED_PARAMS_MILLION not in rows.columns or c.PARAMS_MILLION not in rows.columns:
        return
    logged = rows[c.PARAMS_MILLION].cast(pl.Float64).to_numpy()
    named = rows[TRACED_PARAMS_MILLION].cast(pl.Float64).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = logged / named
    off = np.isfinite(ratio) & (named > 0) & ((ratio > ARCH_PARAMS_FACTOR) | (ratio < 1 / ARCH_PARAMS_FACTOR))
    arch = rows[c.ARCH] if c.ARCH in rows.columns else pl.Series([None] * rows.height, dtype=pl.String)
    for i in np.flatnonzero(off):
        yield int(i), (f"params_million {logged[i]:.4g} contradicts {c.ARCH} '{arch[int(i)]}' ({named[i]:.4g} million "
                       f"parameters built; more than {ARCH_PARAMS_FACTOR:g}x apart)")


def _low_density(rows: pl.DataFrame, detector: Detector, logs: np.ndarray) -> Reasons:
    density = detector.density
    if not density or logs.shape[1] != len(density.mean):
        return
    complete = np.isfinite(logs).all(axis=1)
    dist = np.full(rows.height, np.nan)
    dist[complete] = _mahalanobis(logs[complete], np.asarray(density.mean), np.asarray(density.inverse_covariance))
    for i in np.flatnonzero(complete & (dist > density.threshold)):
        yield int(i), (f"an unusual combination of sizes (distance {dist[i]:.1f} > {density.threshold:.1f}, "
                       f"the training jobs' {DISTANCE_QUANTILE:.1%})")


def llm_unlearned(rows: pl.DataFrame, detector: Detector) -> np.ndarray:
    """Jobs with LLM fields (a per-GPU memory prior, `llm_mem_gb`) whose correction the champion has no evidence for:
    it learned from fewer than `MIN_LLM_ROWS` of them (a detector saved before they were counted: none), or its
    out-of-fold forecasts of the history's LLM jobs of the job's layout group did not beat the prior
    (`LlmCorrection`). They get the per-GPU prior itself (`tasks/learn/score.py`)."""
    if LLM_MEM_GB not in rows.columns:
        return np.zeros(rows.height, dtype=bool)
    has = rows[LLM_MEM_GB].is_not_null().to_numpy()
    if detector.llm_rows < MIN_LLM_ROWS:
        return has
    if detector.llm_correction is None or not has.any():
        return np.zeros(rows.height, dtype=bool)
    groups = layout_group(rows).to_list()
    return has & np.array([not detector.llm_correction.keeps(g) for g in groups], dtype=bool)


def _llm_unlearned(rows: pl.DataFrame, detector: Detector, logs: np.ndarray) -> Reasons:
    """Jobs with LLM fields when the champion learned from fewer than `MIN_LLM_ROWS` of them, or where its
    correction did worse than the per-GPU prior out of fold (check 6)."""
    picked = np.flatnonzero(llm_unlearned(rows, detector))
    if detector.llm_rows < MIN_LLM_ROWS:
        for i in picked:
            yield int(i), (f"a multi-GPU / LLM layout (per-GPU prior) the champion learned {detector.llm_rows} jobs of "
                           f"(< {MIN_LLM_ROWS})")
        return
    groups = layout_group(rows)
    for i in picked:
        yield int(i), detector.llm_correction.says(groups[int(i)])


def llm_unknown_size(rows: pl.DataFrame) -> np.ndarray:
    """Jobs with LLM fields whose per-GPU prior is null: no `params_million`, no size in the name, an `arch` the LLM
    table does not know (check 7)."""
    if LLM_MEM_GB not in rows.columns or rows.is_empty():
        return np.zeros(rows.height, dtype=bool)
    missing = rows[LLM_MEM_GB].is_null()
    if not missing.any():
        return np.zeros(rows.height, dtype=bool)
    return (missing & is_llm(rows)).fill_null(False).to_numpy()


def _llm_unknown_size(rows: pl.DataFrame, detector: Detector, logs: np.ndarray) -> Reasons:
    """Jobs with LLM fields of unknown size (check 7)."""
    names = rows[c.ARCH] if c.ARCH in rows.columns else pl.Series([None] * rows.height, dtype=pl.String)
    for i in np.flatnonzero(llm_unknown_size(rows)):
        yield int(i), (f"{UNKNOWN_LLM_SIZE}: {c.ARCH} {names[int(i)]!r} is not in the LLM table and no "
                       f"{c.PARAMS_MILLION} is logged")


def _sign_test(closer: int, n: int) -> float:
    """P(at least `closer` of `n` fair coin flips land heads): exact up to 1,000 jobs, the normal approximation
    (with continuity correction) beyond."""
    if n <= 1000:
        return sum(math.comb(n, k) for k in range(closer, n + 1)) / 2 ** n
    return 0.5 * math.erfc((closer - 0.5 - n / 2) / (math.sqrt(n) / 2) / math.sqrt(2))


def llm_correction(rows: pl.DataFrame, y: np.ndarray, forecasts: Mapping[tuple[int, int], float] | None,
                   min_rows: int = MIN_LLM_ROWS) -> LlmCorrection | None:
    """Where the champion's learned correction of the per-GPU prior beats the prior on jobs it has not seen (issue
    51): its out-of-fold forecasts `forecasts` (keys (pass, row index of `rows`): `tasks/learn/evidence.py`
    `llm_evidence`'s) of the LLM jobs (`llm_mem_gb` set) against the prior on the same jobs, per layout group
    (`llm_memory.layout_group`) and over all of them. A group keeps the correction only where the evidence is clear:
    its P50 MAPE (median APE) is lower than the prior's and it forecast closer than the prior on more of the group's
    jobs than chance would give (one-sided sign test, p < `LLM_KEEP_P`); otherwise the prior, which is stated, not
    fitted, stays (a median lower by a few tenths on ~50 jobs moves with one source's share of them: issue 51's
    held-out half). None with fewer than `min_rows` such forecasts."""
    if not forecasts or LLM_MEM_GB not in rows.columns:
        return None
    keys = sorted(forecasts)
    idx = np.array([k[1] for k in keys], dtype=np.int64)
    model = np.array([forecasts[k] for k in keys], dtype=np.float64)
    prior = rows[LLM_MEM_GB].cast(pl.Float64).fill_null(np.nan).to_numpy()[idx]
    actual = np.asarray(y, dtype=np.float64)[idx]
    ok = np.isfinite(prior) & np.isfinite(model) & np.isfinite(actual) & (actual > 0)
    if ok.sum() < min_rows:
        return None
    group = layout_group(rows).to_numpy()[idx][ok]
    model, prior, actual = model[ok], prior[ok], actual[ok]

    def judged(pick: np.ndarray) -> LlmGroup:
        m_err, p_err = np.abs(model[pick] - actual[pick]) / actual[pick], np.abs(prior[pick] - actual[pick]) / actual[pick]
        m, p = float(np.median(m_err) * 100), float(np.median(p_err) * 100)
        n, closer = int(pick.sum()), int(np.sum(m_err < p_err))
        return LlmGroup(n, round(m, 3), round(p, 3), closer, round(chance := _sign_test(closer, n), 6),
                       bool(m < p and chance < LLM_KEEP_P))

    names, counts = np.unique(group.astype(str), return_counts=True)
    return LlmCorrection(judged(np.ones(len(group), dtype=bool)),
                         {str(g): judged(group == g) for g, n in zip(names, counts, strict=True) if n >= MIN_LLM_GROUP_ROWS})


# The checks, in the order their words appear; `_low_density` last: it speaks only for a row no other check
# explained (an out-of-range number explains a large distance already).
CHECKS: tuple[Callable[[pl.DataFrame, Detector, np.ndarray], Reasons], ...] = (
    _unseen_categories, _unknown_gpus, _arch_mismatch, _llm_unlearned, _llm_unknown_size, _out_of_range, _low_density)


def flag(rows: pl.DataFrame, detector: Detector) -> tuple[np.ndarray, list[str | None]]:
    """(ood per row, the reasons in words or None) for jobs scored by a champion with this detector."""
    reasons: dict[int, list[str]] = defaultdict(list)  # only flagged rows get a list: scoring runs this on 1M jobs
    nums = [n for n in detector.numbers if n in rows.columns]
    logs = _logs(rows, nums)
    for check in CHECKS:
        for i, words in check(rows, detector, logs):
            if check is not _low_density or not reasons.get(i):
                reasons[i].append(words)
    flags = np.zeros(rows.height, dtype=bool)
    out: list[str | None] = [None] * rows.height
    for i, r in reasons.items():
        flags[i], out[i] = True, "; ".join(r)
    return flags, out


# fit_predict(train row indices, held-out row indices) -> (the model's forecasts of the held-out rows,
# the prior's, or None when the feature set has no prior)
FitPredict = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray | None]]


def held_out_best(families: np.ndarray, y: np.ndarray, fit_predict: FitPredict, learner: str) -> Fallback | None:
    """Which estimate forecasts a model family best when trained without it, or None when
    fewer than two families have `MIN_FAMILY_ROWS` rows (nothing to hold out and learn from).

    Every family with enough rows is held out once (`fit_predict` fits on the other rows); the
    candidates (`CANDIDATES`: the model, the prior, their geometric mean) are scored on all held-out
    rows together; the one with the lowest MAPE is the estimate, and `interval_factor` is
    exp(`INTERVAL_QUANTILE` of its |log(actual / estimate)|)."""
    fam = np.array(["" if f is None else str(f) for f in families], dtype=object)  # a missing family: never held out
    names, counts = np.unique(fam[fam != ""].astype(str), return_counts=True)
    held = [str(f) for f, n in zip(names, counts, strict=True) if n >= MIN_FAMILY_ROWS]
    if len(held) < 2:
        return None
    parts: dict[str, list[np.ndarray]] = defaultdict(list)
    for name in held:
        test, train = np.flatnonzero(fam == name), np.flatnonzero(fam != name)
        model, prior = fit_predict(train, test)
        parts["actual"].append(y[test])
        parts["family"].append(fam[test])
        for cand, pred in _candidates(model, prior).items():
            parts[cand].append(pred)
    actual, family = np.concatenate(parts["actual"]), np.concatenate(parts["family"])
    scores = {cand: _held_out_errors(actual, np.concatenate(parts[cand]), family)
              for cand in CANDIDATES if cand in parts}
    best = min(scores, key=lambda k: getattr(scores[k], CHOSEN_BY))
    return Fallback(estimate=best, chosen_by=f"lowest held-out {CHOSEN_BY}", learner=learner,
                    families={str(n): int(k) for n, k in zip(names, counts, strict=True) if str(n) in held},
                    held_out_rows=len(actual), interval_quantile=INTERVAL_QUANTILE,
                    interval_factor=scores[best].interval_factor, candidates=scores)


def _candidates(model: np.ndarray, prior: np.ndarray | None) -> dict[str, np.ndarray]:
    model = np.maximum(np.asarray(model, dtype=np.float64), 1e-12)
    if prior is None:
        return {"model": model}
    prior = np.maximum(np.asarray(prior, dtype=np.float64), 1e-12)
    return {"model": model, "prior": prior, "blend": np.sqrt(model * prior)}


def _held_out_errors(actual: np.ndarray, estimate: np.ndarray, family: np.ndarray) -> HeldOutScore:
    err = np.abs(np.log(actual / estimate))
    ape = np.abs(estimate - actual) / np.abs(actual) * 100.0
    return HeldOutScore(mape=round(float(ape.mean()), 3), median_log_error=round(float(np.median(err)), 5),
                        interval_factor=round(float(np.exp(np.quantile(err, INTERVAL_QUANTILE))), 5),
                        mape_by_family={str(f): round(float(ape[family == f].mean()), 3) for f in np.unique(family)})


def estimate(evidence: Fallback, model: np.ndarray, prior: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P10, P50, P90 of out-of-distribution jobs by the held-out-best estimate (`held_out_best`'s `evidence`)."""
    p50 = _candidates(model, prior)[evidence.estimate]
    factor = float(evidence.interval_factor)
    return p50 / factor, p50, p50 * factor


# --------------------------------------------------------------------------------------------------
# Never publish the impossible (issue 37): a P50 above what any job of its kind used, or above what the
# largest GPU could hold
# --------------------------------------------------------------------------------------------------
# How far above the largest value of its kind (`model_type`) in the history a real job of that kind went,
# measured (tests/benchmarks/bench_impossible.py `--margins`): 30 seeded 70/30 splits of the measured set
# (840 real PyTorch networks) and of 6,000 simulated jobs, the largest ratio of a held-out job's value to
# the training jobs' maximum of its kind: memory 2.05 (measured set; simulated 1.83), FLOPs per step 4.08
# (measured set; the demand in GFLOPS 1.68 simulated), run time 2.71 (simulated). The margin is that
# ratio with room to spare, so no real job of those sets would have been called impossible.
CEILING_MARGIN = {c.PEAK_GPU_MEM_GB: 2.5, c.GPU_DEMAND_GFLOPS: 4.5, c.RUNTIME_HOURS: 3.0}
# Peak memory is per GPU, and no GPU holds more than its memory: above the largest GPU of the catalogue
# (records/reference/gpu_catalog.csv) is impossible whatever the history, so that bound has no margin.
GPU_MEMORY_MARGIN = 1.0


def fit_ceiling(rows: pl.DataFrame, target: str) -> Ceiling | None:
    """The largest `target` of each kind (`FAMILY`) in the champion's training rows, for
    `ceiling`; None for a target without a measured margin."""
    if target not in CEILING_MARGIN or FAMILY not in rows.columns or rows.is_empty():
        return None
    maxima = rows.group_by(FAMILY).agg(pl.col(target).cast(pl.Float64).max()).drop_nulls()
    return Ceiling(target, CEILING_MARGIN[target], {str(k): float(v) for k, v in maxima.iter_rows()})


def largest_gpu_gb() -> tuple[str, float]:
    """The catalogue's largest GPU memory: (its name, GB)."""
    gpu = max(catalog.gpus().values(), key=lambda g: g.memory_gb)
    return gpu.gpu_type, float(gpu.memory_gb)


KIND_BOUND, GPU_BOUND, TRACE_BOUND = 1, 2, 3  # which bound a row's ceiling is (`ceiling`)


def ceiling(rows: pl.DataFrame, target: str, fitted: Ceiling | None) -> tuple[np.ndarray, Callable[[int], str | None]]:
    """Per row, the largest P50 that is possible (inf where nothing bounds it), and a function saying in words
    which bound row i's is (called for the few rows above it only: scoring runs this on every pending job):
    `fitted`'s maximum of the job's kind x its margin, and for memory the catalogue's largest GPU; the lower of
    the two. A job whose own trace (`traced_mem_gb`) is above the bound lifts it to the trace: the job's own
    network says so. A kind the history never ran has no kind bound (it is flagged already). A job with LLM fields
    (contract v5: `llm_mem_gb`, its per-GPU prior) has no kind bound either: its prior speaks for its one GPU,
    where the history's largest single-GPU job x the margin would flatten every large job to one value (issue 51);
    the largest GPU still bounds it, so an impossible size meets the bound as before."""
    bound = np.full(rows.height, np.inf)
    which = np.zeros(rows.height, dtype=np.int8)
    most = np.full(rows.height, np.nan)
    kinds = rows[FAMILY].cast(pl.String) if FAMILY in rows.columns else None
    if fitted and kinds is not None:
        most = kinds.replace_strict(dict(fitted.by_kind), default=None, return_dtype=pl.Float64).fill_null(np.nan).to_numpy()
        known = np.isfinite(most)
        if LLM_MEM_GB in rows.columns and target == c.PEAK_GPU_MEM_GB:
            known &= rows[LLM_MEM_GB].is_null().to_numpy()
        bound[known], which[known] = most[known] * fitted.margin, KIND_BOUND
    name, gb = largest_gpu_gb()
    trace = np.full(rows.height, np.nan)
    if target == c.PEAK_GPU_MEM_GB:
        lower = gb * GPU_MEMORY_MARGIN < bound
        bound[lower], which[lower] = gb * GPU_MEMORY_MARGIN, GPU_BOUND
        if TRACED_MEM_GB in rows.columns:
            trace = rows[TRACED_MEM_GB].cast(pl.Float64).fill_null(np.nan).to_numpy()
            lifted = np.isfinite(trace) & (trace > bound)
            bound[lifted], which[lifted] = trace[lifted], TRACE_BOUND

    def words(i: int) -> str | None:
        if which[i] == KIND_BOUND:
            return f"{fitted.margin:g}x the largest {target} of a {kinds[i]} job in the history ({most[i]:.4g})"
        if which[i] == GPU_BOUND:
            return f"the memory of the largest GPU in the catalogue ({name}, {gb:g} GB)"
        if which[i] == TRACE_BOUND:
            return f"the job's own trace ({trace[i]:.4g} GB)"
        return None

    return bound, words


def within_ceiling(evidence: Fallback | None, model: np.ndarray, prior: np.ndarray | None,
                   bound: np.ndarray, bound_only: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """P10, P50, P90 and the estimate's name for jobs whose forecast is impossible (P50 above `bound`): the
    held-out-best estimate (`held_out_best`'s `evidence`) when it is within the bound, else the next
    candidate by held-out MAPE that is, else the bound itself (P50 = P90 = the bound: the most it can be).
    Without evidence, the candidates are the prior, then the bound. P90 = P50 x the interval factor, at most the
    bound (a P50 just within it would otherwise get a P90 far above what is possible). `bound_only`: rows no
    candidate speaks for, which get the bound itself (a sharded LLM job whose per-GPU prior is above every GPU:
    the champion, learned on single-GPU jobs, would publish a 70B model's rank at 20 GB; review 87 S1-1)."""
    cands = _candidates(model, prior)
    factor = float(evidence.interval_factor) if evidence else WIDEN_FACTOR
    if evidence:
        ranked = sorted(evidence.candidates, key=lambda k: getattr(evidence.candidates[k], CHOSEN_BY))
        order = [evidence.estimate, *(k for k in ranked if k != evidence.estimate)]
    else:
        order = ["prior"] if prior is not None else []
    p50, used = bound.copy(), np.full(len(bound), "capped", dtype=object)
    todo = np.ones(len(bound), dtype=bool) if bound_only is None else ~bound_only
    for name in (k for k in order if k in cands):
        ok = todo & (cands[name] <= bound)
        p50[ok], used[ok] = cands[name][ok], name
        todo &= ~ok
    p10, p90 = p50 / factor, np.minimum(p50 * factor, bound)
    return p10, p50, p90, used.tolist()
