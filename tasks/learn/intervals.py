"""P10 / P50 / P90 that hold per group: Mondrian conformal predictive systems (crepes), pooled fallback.

Calibration (`calibrate`) keeps the champion's log residuals r = log(actual / prediction) on jobs it
never saw (the calibration slice, `tasks/learn/train.py`), with each job's model type and queue. Log
residuals make intervals multiplicative, which suits targets spanning orders of magnitude.

For a new job (`Calibrated.intervals`), a conformal predictive system
(`crepes.ConformalPredictiveSystem`) turns log(prediction) and the residuals of the job's Mondrian
category into percentiles: P10 at the lower, P50 and P90 at the higher order statistic (the
conservative finite-sample choices). The category is the finest of these with at least
`MIN_GROUP` calibration jobs: the job's model type and queue together; its model type; its queue;
all jobs (pooled). Within a category the guarantee is the usual split-conformal one (P90 covers at
least 90% of jobs exchangeable with the calibration jobs); a model type's coverage is then a
mixture of its cells', each calibrated on its own.

Large jobs (issue 50 item 5): one more Mondrian group, by forecast size. A job is *large* when its forecast is at
least the history's 90th percentile of the target (`SIZE_QUANTILES`); the calibration jobs forecast that large get
their own P90, and a large job's P90 is the wider of that and its category's. The big jobs are where errors are
widest in GB and an under-forecast becomes an out-of-memory failure, and one global quantile, set mostly by the
many small jobs, covered them far less often than the rest (59% against 88% on the measured set: docs/models.md
"Intervals"). Fallback: with fewer than `MIN_LARGE` calibration jobs forecast above the 90th percentile, the
group is the top quarter (forecast at least the 75th percentile); with fewer there too, no size group (intervals as
before). The metadata says which (`size`: the quantile, its value in the target's unit, the jobs in the group).

The size group on out-of-fold forecasts (issue 50 item 5, session 5): the calibration slice (15% of the history) holds
few large jobs (the public set's 37-job slice: at most the top quarter's 10, often no group). Where training hands the
champion's out-of-fold forecasts of the history (`out_of_fold`: the jobs of the folds the repeats ran, each forecast
by a fold model that never saw it: the forecasts the champion was chosen on), a second large group is formed and
calibrated on those (`size_oof`: the same rule, `SIZE_QUANTILES` and `MIN_LARGE`, with its jobs' log residuals), only
where the slice has too few jobs forecast above the 90th percentile for its own group there (no group, or the top
quarter's): the slice is exchangeable with the refitted model's pending jobs, the fold models are not quite (they
learned from two thirds of the history, the refit from 85%, and the largest jobs are out of their range more often, so
their large-job residuals are, if anything, wider). A job's P90 is the widest of its category's and those of the size
groups it falls in (each from its own threshold), so it is never narrower than before (the trade-off CV+ and
cross-conformal make, e.g. MAPIE's `cv` methods; crepes' bins do the per-group quantile). Without out-of-fold forecasts (the
analytic prior, the plain LightGBM alone on a tiny history, calibrations saved before) the slice's group alone
applies, as before.

With more than one pass of folds (`--repeats` above 3) a job has one out-of-fold forecast per pass: `MIN_LARGE` counts
distinct jobs (`out_of_fold`'s third element, the history rows), not forecasts, so two passes of 6 large jobs are 6.

Large by shape (issue 50 item 5, session 6; `SHAPE_OOF`, `large_by_shape`): on the public set every big job the P90
missed was a CNN forecast *below* the large threshold and measured 1.45-2.8x its forecast, which no group by forecast
size reaches. What makes a CNN's memory big is its activations, which grow with batch x image side² (input size for
other families: batch x input size); the 11 features have no channels, so the forecast misses part of it. So, for
memory, one more group per model type, keyed on the job's shape, not its forecast: a job is *large by shape* when
log(batch) + k log(input_dim) (k = 2 for convolutional families, `priors.family`; else 1) is at least that model type's
`SHAPE_QUANTILE` (the top quarter) in the history; the champion's out-of-fold forecasts of such jobs (at least
`MIN_LARGE` distinct jobs) give the group its P90, and a job's P90 is the widest of its category's, its size groups'
and its shape group's (nothing narrows; P10 and P50 never change). Calibrated out of fold like `size_oof`, for the
same reason: the slice holds too few of them. The Scorer hands the shape columns with the categories (`GROUPINGS`).

The jobs measured large, label-conditional (issue 50 item 5, session 8; `LARGE_TRUTH`, `large_by_truth`): the goal is
a P90 that covers the jobs *measured* above the history's 90th percentile, and those are mostly jobs the forecast
under-estimates (on the public set's seed 1 at one repeat, a CNN at batch 6 and side 222 forecast 13.4 GB measured
24.5 GB: large neither by forecast nor by shape), so no group known before the truth holds them. Label-conditional
conformal prediction (Vovk's Mondrian categories by the label, as in class-conditional conformal classification) does:
a value v above the line is accepted when log(v / forecast) is within the P90 of the log residuals of the history's
jobs measured above it (the champion's held-out forecasts of them: out of fold, and of a shape-cluster holdout; per
model type with `MIN_TRUTH` distinct such jobs, else pooled where the pool has them, else no such P90), a value below
the line on the job's other groups as before. The upper bound of what is accepted is then the job's P90: the wider of
the two where forecast x that P90 reaches the line, else unchanged; jobs measured large are covered at least 90% of
the time when exchangeable with the history's large jobs. Memory only (with the shape groups). `MIN_TRUTH` = 19
(review 58 S3): with 10-18 jobs a group's conformal P90 is its largest residual, and on the public set's seed 1 at
one repeat (15 large jobs) that widened the CNNs' bands so far that the mean safe request grew 9.52 -> 15.80 GB and
15.2% of the pending jobs were flagged oom_risk on 40 GB cards they fit, to cover 2 big jobs that fit them too.

The recurrent language models' correction (issue 50, session 14; `LM_OOF`, `language_model_correction`): the measured
set's recurrent jobs are word-level language models whose memory is their vocabulary head's, which the prior does not
count (the contract says nothing of a head), and a champion fitted on every family learns it only in part (alone on
the measured set's split seed 2, each tree model's recurrent MAPE is 12-24%; the prior read as a language model,
`priors.language_model_gb`, 9.3% on its own). So a recurrent job's log forecast f is blended with the log of its memory read as
a language model m: (1 - w) f + w m + a, w in [0, 1] and a fitted (least squares) on the champion's out-of-fold
forecasts of the history's recurrent jobs (at least `MIN_TRUTH` distinct), and kept only where that fit, cross-fitted
on two halves of those jobs, lowers their mean squared log residual: a history whose recurrent jobs have no head
gives w ~0 (the reading is far from their memory), or no correction at all. Its (P10, P50, P90) offsets are those of
the calibration slice's recurrent jobs' residuals so moved (one Mondrian category; all the slice's jobs, the
recurrent ones moved, where it holds fewer than `MIN_POOLED`), and only those: the size, shape and label-conditional
groups were calibrated on the champion's own forecasts, not on these (with them, on the measured set's split seed 2,
two recurrent jobs of 28 GB were flagged oom_risk on a 40 GB GPU; without them none, and the same P90 coverage).
Every other job is untouched, and nothing it is fitted or calibrated on moves: the champion, its choice and every
other job's band are those without it. Why not the reading as a feature (session 11) or the head in
the prior (session 10): both changed the fits of every family and narrowed the pooled band, and the real named models
(no recurrent job among them) lost P90 coverage (84 -> 80% at seed 0) without the architecture. Memory only.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from gpucast.expectations import contract as c

METHOD = "Mondrian conformal predictive system (crepes) on log residuals; pooled below min_group"
CATEGORIES = (c.MODEL_TYPE, c.QUEUE)  # the Mondrian categories of the calibration slice
LARGE_SHAPE_COLUMNS = (c.BATCH_SIZE, c.INPUT_DIM)  # with the model type, what "large by shape" reads (`SHAPE_OOF`)
GROUPINGS = CATEGORIES + LARGE_SHAPE_COLUMNS  # the job columns `Calibrated.intervals` reads (the Scorer hands these)
MIN_GROUP = 50  # calibration jobs a category needs for its own percentiles
MIN_POOLED = 20  # with fewer (the analytic prior's fallback on a new cluster), no calibration at all:
UNCALIBRATED_FACTOR = 4.0  # ... P10 = prediction / 4, P90 = prediction x 4, said so in the metadata
LOWER, MEDIAN, UPPER = 10, 50, 90
SIZE = "size"  # the group by forecast size: "large" or "rest", per calibration job
SIZE_OOF = "size_oof"  # the size group formed and calibrated on the champion's out-of-fold forecasts (`large_out_of_fold`)
SIZE_QUANTILES = (0.9, 0.75)  # "large": forecast >= this quantile of the history's target; the first with MIN_LARGE
MIN_LARGE = 10  # calibration jobs the large group needs (>= 9 for a finite P90: the 9th of 9 is the higher P90)
SHAPE_OOF = "shape_oof"  # the groups by shape, per model type, calibrated on out-of-fold forecasts (`large_by_shape`)
SHAPE_QUANTILE = 0.75  # "large by shape": at least this quantile of its model type's shape in the history
LARGE_TRUTH = "large_truth"  # the jobs measured large, label-conditional (`large_by_truth`)
LM_OOF = "lm_oof"  # the recurrent language models' correction, fitted on out-of-fold forecasts (`language_model_correction`)
LM_GB = "lm_gb"  # the groups' key of each job's `priors.language_model_gb` (NaN: not recurrent)
MIN_TRUTH = 19  # distinct jobs measured large a label-conditional group needs: the fewest whose conformal P90 (the
# ceil(0.9 (n + 1))-th residual) is below the largest one (review 58 S3: with 10-18 the band is the group's worst miss)


def calibrate(y_true: np.ndarray, y_pred: np.ndarray, floor: float, groups: dict[str, list] | None = None,
              history: np.ndarray | None = None, out_of_fold: tuple[np.ndarray, ...] | None = None,
              shapes: dict[str, np.ndarray] | None = None, held_out: tuple[np.ndarray, ...] | None = None,
              language_model: tuple[np.ndarray, np.ndarray] | None = None,
              calibration_rows: np.ndarray | None = None) -> dict:
    """What `intervals` needs later, JSON-ready: the log residuals of held-out jobs, their groups, and the size
    group (`size_group`; `history`: the history's labels of the target, whose quantiles say "large"; None: the
    held-out jobs' own). `out_of_fold`: (truth, forecast[, history row]) of the champion's out-of-fold forecasts of
    the history, on which the size group is then formed and calibrated (`size_oof`, `large_out_of_fold`; the rows
    make `MIN_LARGE` count distinct jobs where a job has one forecast per pass). `shapes`: the history's model type,
    batch size and input size (`LARGE_SHAPE_COLUMNS`), row-aligned with `history`: with `out_of_fold`'s rows, the groups
    large by shape (`SHAPE_OOF`, `large_by_shape`). `held_out`: (truth, forecast, history row) of the champion's
    forecasts of a shape-cluster generalisation holdout (`train.held_out_shapes`), which those groups are calibrated on
    too (session 7: the holdout takes whole clusters of shapes, often the largest, out of the folds).
    `language_model`: `priors.language_model_gb` of the held-out jobs and of the history (row-aligned with
    `history`): with `out_of_fold`'s rows, the recurrent language models' correction (`LM_OOF`,
    `language_model_correction`). `calibration_rows`: the history rows of the held-out jobs (the calibration slice),
    whose out-of-fold forecasts the correction's (w, a) are not fitted on: its band is measured on them.

    Predictions are floored at half the smallest training label, so a model that predicts <= 0 still
    gets a finite interval."""
    floor = max(floor * 0.5, 1e-9)
    pred = np.maximum(np.asarray(y_pred, dtype=np.float64), floor)
    residuals = np.log(np.asarray(y_true, dtype=np.float64)) - np.log(pred)
    groups = {g: [str(v) for v in values] for g, values in (groups or {}).items() if g in CATEGORIES}
    method = METHOD if len(residuals) >= MIN_POOLED else f"uncalibrated: fewer than {MIN_POOLED} held-out jobs"
    size = size_group(pred, np.asarray(y_true if history is None else history, dtype=np.float64))
    if size is not None:
        groups[SIZE] = ["large" if p >= size["at"] else "rest" for p in pred]
    out = {"method": method, "n": len(residuals), "floor": floor, "min_group": MIN_GROUP,
           "residuals": [round(float(r), 6) for r in residuals], "groups": groups, "size": size}
    if out_of_fold is not None:  # the slice's own group at the 90th percentile decides where it forms; else these
        labels = np.asarray(y_true if history is None else history, dtype=np.float64)
        full = size is not None and size["quantile"] == SIZE_QUANTILES[0]
        out[SIZE_OOF] = None if full else large_out_of_fold(*out_of_fold[:2], floor, labels, *out_of_fold[2:])
        if shapes is not None and len(out_of_fold) > 2:
            both = (out_of_fold if held_out is None else
                    tuple(np.concatenate([a, b]) for a, b in zip(out_of_fold, held_out, strict=True)))
            out[SHAPE_OOF] = large_by_shape(*both, floor, shapes)
            out[LARGE_TRUTH] = large_by_truth(*both, floor, labels, shapes[c.MODEL_TYPE])
        if language_model is not None and len(out_of_fold) > 2:
            out[LM_OOF] = language_model_correction(*out_of_fold, floor, language_model[1],
                                                    (np.asarray(y_true, dtype=np.float64), pred, language_model[0]),
                                                    exclude=calibration_rows)
    return out


def language_model_correction(y_true: np.ndarray, y_pred: np.ndarray, jobs: np.ndarray, floor: float,
                              language_model: np.ndarray, held: tuple[np.ndarray, np.ndarray, np.ndarray],
                              exclude: np.ndarray | None = None) -> dict | None:
    """The recurrent language models' correction (the module docstring), JSON-ready: {w, a, n (distinct jobs),
    forecasts, mse (their mean squared log residual before), mse_cross (after, cross-fitted), offsets, held}: a
    recurrent job's log forecast f becomes (1 - w) f + w log(its memory as a language model) + a, w in [0, 1], and
    its (P10, P50, P90) offsets are `offsets` (no size or shape group widens them), those of the held-out jobs' log
    residuals once the correction moved the recurrent ones: the recurrent held-out jobs' own where there are
    `MIN_POOLED` (`held` of them), else all of them. None with fewer than `MIN_TRUTH` distinct recurrent jobs among
    the out-of-fold forecasts or fewer than `MIN_POOLED` held-out jobs, or where the cross-fitted correction does not
    lower their mean squared log residual.
    `jobs`: each forecast's history row; `language_model`: the history's `priors.language_model_gb` (NaN: not
    recurrent); `held`: the held-out jobs' (truth, forecast, language_model_gb); `exclude`: history rows whose
    forecasts do not fit (w, a): the held-out jobs', whose residuals then measure the band (review 64b S2-2: fitted on
    them too, the band was slightly optimistic). By history row: other submissions of a held-out job's model still
    fit them, so the band can stay slightly optimistic where a site resubmits the same model (review 65b S3-5)."""
    jobs = np.asarray(jobs, dtype=np.int64)
    memory = np.asarray(language_model, dtype=np.float64)[jobs]
    mine = np.isfinite(memory) & (memory > 0)
    if exclude is not None:
        mine &= ~np.isin(jobs, np.asarray(exclude, dtype=np.int64))
    distinct = np.unique(jobs[mine])
    if len(distinct) < MIN_TRUTH:
        return None
    log_pred = np.log(np.maximum(np.asarray(y_pred, dtype=np.float64)[mine], floor))
    r = np.log(np.asarray(y_true, dtype=np.float64)[mine]) - log_pred
    x, who = np.log(memory[mine]) - log_pred, jobs[mine]
    half = np.isin(who, distinct[::2])  # two halves of the jobs (a job's forecasts of every pass in one half)

    def fit(m: np.ndarray) -> tuple[float, float]:  # least squares of r on (1, x), the weight kept in [0, 1]
        w = float(np.clip(np.polyfit(x[m], r[m], 1)[0], 0.0, 1.0)) if np.ptp(x[m]) > 0 else 0.0
        return w, float(np.mean(r[m] - w * x[m]))

    crossed = np.empty_like(r)
    for m in (half, ~half):
        w, a = fit(~m)
        crossed[m] = r[m] - (a + w * x[m])
    before, after = float(np.mean(r**2)), float(np.mean(crossed**2))
    if after >= before:
        return None
    w, a = (round(v, 6) for v in fit(np.ones(len(r), dtype=bool)))
    truth, forecast, held_memory = (np.asarray(v, dtype=np.float64) for v in held)
    if len(truth) < MIN_POOLED:  # too few held-out jobs for a finite band (`Calibrated` then uses none either)
        return None
    log_held = np.log(np.maximum(forecast, floor))
    own = np.isfinite(held_memory) & (held_memory > 0)
    moved = np.log(truth) - log_held - np.where(own, a + w * (np.log(np.where(own, held_memory, 1.0)) - log_held), 0.0)
    offsets = _offsets(moved[own] if own.sum() >= MIN_POOLED else moved)
    return {"w": w, "a": a, "n": len(distinct), "forecasts": len(r), "mse": round(before, 6),
            "mse_cross": round(after, 6), "offsets": [float(v) for v in offsets], "held": int(own.sum())}


def large_out_of_fold(y_true: np.ndarray, y_pred: np.ndarray, floor: float, labels: np.ndarray,
                      jobs: np.ndarray | None = None) -> dict | None:
    """The size group formed on out-of-fold forecasts (`size_group`'s rule on `y_pred` and the history's `labels`),
    with the P90 of the log residuals of its forecasts (every pass's), JSON-ready: {quantile, at, n (distinct jobs),
    p90, forecasts} (`p90_saved`); None where no group forms. `floor`: `calibrate`'s (already halved); `jobs`: each
    forecast's history row."""
    pred = np.maximum(np.asarray(y_pred, dtype=np.float64), floor)
    if (size := size_group(pred, labels, jobs)) is None:
        return None
    large = pred >= size["at"]
    residuals = np.log(np.asarray(y_true, dtype=np.float64)[large]) - np.log(pred[large])
    return {**size, **p90_saved(residuals)}


def size_group(pred: np.ndarray, labels: np.ndarray, jobs: np.ndarray | None = None) -> dict | None:
    """The size group's rule for held-out jobs forecast `pred`: the first quantile of `SIZE_QUANTILES` of `labels`
    (the history's target) at or above which at least `MIN_LARGE` of them are forecast, as {quantile, at (the
    target's unit), n (held-out jobs in the group)}; None when no quantile has that many (or too few jobs to
    calibrate at all). `jobs`: each forecast's job where a job may have several (one per pass of folds): the jobs
    are counted once each."""
    if len(_distinct(pred, jobs)) < MIN_POOLED or not len(labels):
        return None
    for q in SIZE_QUANTILES:
        at = float(np.quantile(labels, q))
        if (n := len(_distinct(pred >= at, jobs, among=True))) >= MIN_LARGE:
            return {"quantile": q, "at": round(at, 6), "n": n}
    return None


def _distinct(values: np.ndarray, jobs: np.ndarray | None, among: bool = False) -> np.ndarray:
    """The distinct jobs of these forecasts (`among`: of those where `values` is true); each forecast its own job
    where `jobs` is None."""
    ids = np.arange(len(values)) if jobs is None else np.asarray(jobs)
    return np.unique(ids[np.asarray(values, dtype=bool)] if among else ids)


def shape_of(batch: np.ndarray, dim: np.ndarray, power: float) -> np.ndarray:
    """log(batch) + power x log(input size) per job (NaN where either is missing or not positive)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        b, d = (np.asarray(v, dtype=np.float64) for v in (batch, dim))
        out = np.log(b) + power * np.log(d)
    return np.where(np.isfinite(out), out, np.nan)


def _power(model_type: str) -> float:
    from gpucast.tasks.learn import priors

    # the convolutional families (one definition: priors' stage table): input_dim is an image side, batch x side²
    return 2.0 if priors.family(model_type) in priors.CONV_STAGES else 1.0


def large_by_shape(y_true: np.ndarray, y_pred: np.ndarray, jobs: np.ndarray, floor: float,
                   shapes: dict[str, np.ndarray]) -> dict | None:
    """Per model type, the out-of-fold forecasts of the history's jobs large by shape (`SHAPE_QUANTILE` of the type's
    `shape_of` in the history, `shapes` row-aligned with it; `jobs`: each forecast's row), with the P90 of their log
    residuals, where at least `MIN_LARGE` distinct jobs form it; JSON-ready {quantile, groups: [{model_type, power, at,
    n, p90, forecasts}]}; None where no type has such a group."""
    types = np.asarray(["" if t is None else str(t) for t in shapes[c.MODEL_TYPE]], dtype=object)  # no type: no group
    jobs = np.asarray(jobs, dtype=np.int64)
    pred = np.maximum(np.asarray(y_pred, dtype=np.float64), floor)
    residuals = np.log(np.asarray(y_true, dtype=np.float64)) - np.log(pred)
    found = []
    for kind in sorted(set(types[jobs]) - {""}):  # (a job without a model type matches no group at scoring either)
        power = _power(kind)
        shape = shape_of(shapes[c.BATCH_SIZE], shapes[c.INPUT_DIM], power)
        known = (types == kind) & np.isfinite(shape)
        if not known.any():
            continue
        at = float(np.quantile(shape[known], SHAPE_QUANTILE))
        large = known[jobs] & (shape[jobs] >= at)
        if (n := len(np.unique(jobs[large]))) >= MIN_LARGE:
            found.append({c.MODEL_TYPE: kind, "power": power, "at": round(at, 6), "n": n, **p90_saved(residuals[large])})
    return {"quantile": SHAPE_QUANTILE, "groups": found} if found else None


def large_by_truth(y_true: np.ndarray, y_pred: np.ndarray, jobs: np.ndarray, floor: float, labels: np.ndarray,
                   types: np.ndarray) -> dict | None:
    """The P90 of the log residuals of the champion's held-out forecasts (out of fold, and of a shape-cluster holdout)
    of the history's jobs *measured* above its 90th percentile (`SIZE_QUANTILES[0]` of `labels`): pooled, and per model
    type where the type has at least `MIN_TRUTH` distinct such jobs; JSON-ready {quantile, at, n, p90, forecasts,
    groups: [{model_type, n, p90, forecasts}]} (`p90_saved`); None with fewer than `MIN_TRUTH` such jobs in all
    (`Calibrated.intervals` reads it as a label-conditional P90; with fewer its P90 would be the group's largest
    residual, review 58 S3)."""
    at = float(np.quantile(labels, SIZE_QUANTILES[0]))
    jobs = np.asarray(jobs, dtype=np.int64)
    truth = np.asarray(y_true, dtype=np.float64)
    pred = np.maximum(np.asarray(y_pred, dtype=np.float64), floor)
    residuals = np.log(truth) - np.log(pred)
    big = truth > at
    if (n := len(np.unique(jobs[big]))) < MIN_TRUTH:
        return None
    kinds = np.asarray(["" if t is None else str(t) for t in types], dtype=object)[jobs]
    groups = [{c.MODEL_TYPE: kind, "n": k, **p90_saved(residuals[mine])}
              for kind in sorted(set(kinds[big]) - {""})
              if (k := len(np.unique(jobs[(mine := big & (kinds == kind))]))) >= MIN_TRUTH]
    return {"quantile": SIZE_QUANTILES[0], "at": round(at, 6), "n": n, **p90_saved(residuals[big]), "groups": groups}


def _offsets(residuals: np.ndarray) -> np.ndarray:
    """(P10, P50, P90) in log space of a job predicted at log 0 by a conformal predictive system on these residuals:
    P10 the lower order statistic, P50 and P90 the higher (-inf / inf where there are too few residuals for one).

    What `crepes.ConformalPredictiveSystem().fit(residuals).predict(np.zeros(1), lower_percentiles=[LOWER],
    higher_percentiles=[MEDIAN, UPPER])` returns, to the bit, with its own index arithmetic (crepes 0.9.1
    `ConformalPredictiveSystem.predict`: int(p / 100 x (n + 1)) - 1 below, ceil(p / 100 x (n + 1)) - 1 above, the
    same float expressions) and its sum 0 + order statistic; a Mondrian category's is this on the category's
    residuals (crepes sorts each bin's alone). These few order statistics are all scoring needed of crepes, so
    `gpucast score` no longer imports it (1.1 CPU-s alone; ~0.01 after scikit-learn, which imports pandas and
    scipy.stats itself) nor builds its predictive systems per category; tests/tasks/learn/test_intervals.py compares
    them with crepes' predictions, job by job and on every edge of the index arithmetic."""
    alphas = np.sort(np.asarray(residuals, dtype=np.float64))
    n = len(alphas)
    if not n:
        raise ValueError("no residuals to calibrate on")
    zero = np.float64(0.0)  # crepes adds the prediction (here 0) to each residual: -0.0 becomes 0.0, as there
    lower = int(LOWER / 100 * (n + 1)) - 1
    out = [zero + alphas[lower] if lower >= 0 else -np.inf]
    for p in (MEDIAN, UPPER):
        higher = int(np.ceil(p / 100 * (n + 1))) - 1
        out.append(zero + alphas[higher] if higher <= n - 1 else np.inf)
    return np.array(out, dtype=np.float64)


def _p90(residuals: np.ndarray) -> float:
    """The higher P90 offset (log) of these residuals' predictive system."""
    return float(_offsets(residuals)[2])


def p90_saved(residuals: np.ndarray) -> dict:
    """What a large group's P90 needs of its log residuals, JSON-ready: {p90: the offset (`_p90`: one order statistic
    of the residuals, rounded to 6 decimals as calibrations saved before review 58 N7 kept them, so the same float),
    forecasts: how many residuals it is of}. Before, every residual was saved: 14 of 19 MB of a memory champion's
    calibration at 1M history rows (3 repeats), read back at every scoring (docs/testing.md, session 9)."""
    rounded = np.array([round(float(r), 6) for r in np.asarray(residuals, dtype=np.float64)], dtype=np.float64)
    return {"p90": _p90(rounded), "forecasts": len(rounded)}


def _saved_p90(group: dict) -> float:
    """A saved large group's P90 offset: its `p90`, or (a calibration saved before review 58 N7) its residuals'."""
    if "p90" in group:
        return float(group["p90"])
    return _p90(np.asarray(group["residuals"], dtype=np.float64))


LEVELS = ((c.MODEL_TYPE, c.QUEUE), (c.MODEL_TYPE,), (c.QUEUE,))  # finest first; then pooled


def _label_series(groups: dict[str, pl.Series | np.ndarray], level: tuple[str, ...], n: int) -> pl.Series | None:
    """Each job's group label at `level`: its values joined by "|" (a missing value reads "None", as
    calibrations saved before this was vectorised spelled it). `groups`: polars Series (the fast path, no
    Python objects) or arrays."""
    if not all(g in groups for g in level):
        return None
    if not n:
        return pl.Series([], dtype=pl.String)

    def strings(values: pl.Series | np.ndarray) -> pl.Series:
        if not isinstance(values, pl.Series):
            values = pl.Series(np.asarray(values, dtype=object), dtype=pl.String, strict=False)
        return values.cast(pl.String, strict=False).fill_null("None")

    return pl.DataFrame({g: strings(groups[g]) for g in level}).select(pl.concat_str(list(level), separator="|")).to_series()


def _labels(groups: dict[str, np.ndarray], level: tuple[str, ...], n: int) -> np.ndarray | None:
    """`_label_series` as an array of Python strings."""
    labels = _label_series(groups, level, n)
    return None if labels is None else labels.to_numpy().astype(object)


class Calibrated:
    """A calibration (from `calibrate`) ready to turn predictions into intervals, many batches over.

    A predictive system on residuals is translation-invariant: the percentiles of a job predicted at
    log_hat are log_hat plus offsets (order statistics of its category's residuals) that do not depend on
    log_hat. They are computed once per category here (a prediction of 0: `_offsets`, crepes' order statistics
    without importing crepes), and `intervals` adds them: the same float sums crepes makes, without its per-job
    Python loop (2.4 of 4.8 s per 1M jobs and 3 targets in a profile of `gpucast score`;
    tests/tasks/learn/test_intervals.py compares the two)."""

    def __init__(self, cal: dict):
        self.floor = cal["floor"]
        residuals = np.asarray(cal["residuals"], dtype=np.float64)
        # per level (finest first): the level, its categories' labels, their (P10, P50, P90) offsets (one row each)
        self.levels: list[tuple[tuple[str, ...], dict[str, int], np.ndarray]] = []
        self.pooled = _offsets(residuals) if len(residuals) >= MIN_POOLED else None
        self.median_residual = float(np.median(residuals)) if len(residuals) else 0.0
        # the size groups (calibrations saved before issue 50 have none), each (at, p90): jobs forecast at least `at`
        # (log) get a P90 offset no narrower than `p90`, the higher P90 of the group's jobs: the calibration slice's
        # jobs forecast that large (`size`), and the out-of-fold forecasts' (`size_oof`)
        self.large: list[tuple[float, float]] = []
        self.by_shape: list[tuple[str, float, float, float]] = []
        self.by_truth: tuple[float, float, dict[str, float]] | None = None  # `large_by_truth`'s, below
        # `language_model_correction`'s (w, a) and its recurrent jobs' (P10, P50, P90) offsets
        self.language_model: tuple[float, float, np.ndarray] | None = None
        if self.pooled is None:
            return
        if lm := cal.get(LM_OOF):
            self.language_model = (float(lm["w"]), float(lm["a"]), np.asarray(lm["offsets"], dtype=np.float64))
        groups = {g: np.asarray(v, dtype=object) for g, v in cal.get("groups", {}).items()}
        if (size := cal.get("size")) and SIZE in groups:
            self.large.append((np.log(max(size["at"], self.floor)), _p90(residuals[groups[SIZE] == "large"])))
        if oof := cal.get(SIZE_OOF):  # formed on the out-of-fold forecasts: many more large jobs than the slice's
            self.large.append((np.log(max(oof["at"], self.floor)), _saved_p90(oof)))
        # the groups large by shape (model type, power, at (log shape), p90): jobs of that type at least that large
        self.by_shape = [(g[c.MODEL_TYPE], g["power"], g["at"], _saved_p90(g))
                         for g in (cal.get(SHAPE_OOF) or {}).get("groups", ())]
        # label-conditional (`large_by_truth`): (log at, the pooled P90 offset, model type -> its own)
        # (groups of fewer than `MIN_TRUTH` jobs, as calibrations saved before session 8's review kept, are left out)
        if (truth := cal.get(LARGE_TRUTH)) and truth["n"] >= MIN_TRUTH:
            self.by_truth = (np.log(max(truth["at"], self.floor)), _saved_p90(truth),
                             {g[c.MODEL_TYPE]: _saved_p90(g) for g in truth["groups"] if g["n"] >= MIN_TRUTH})
        for level in LEVELS:
            labels = _labels(groups, level, len(residuals))
            if labels is None:
                continue
            kinds, counts = np.unique(labels, return_counts=True)
            big = sorted(str(k) for k, n in zip(kinds, counts, strict=True) if n >= cal.get("min_group", MIN_GROUP))
            if big:
                offsets = np.array([_offsets(residuals[labels == label]) for label in big], dtype=np.float64)
                self.levels.append((level, {label: i for i, label in enumerate(big)}, offsets))

    @property
    def large_at(self) -> float | None:
        """The lowest forecast (log) a size group starts at; None without a size group."""
        return min(at for at, _ in self.large) if self.large else None

    def intervals(self, pred: np.ndarray, groups: dict[str, pl.Series | np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
        """(p10, p50, p90) for point predictions `pred` of jobs with these groups (model type, queue, the shape
        columns, `LM_GB`): polars Series, or arrays."""
        log_hat = np.log(np.maximum(np.asarray(pred, dtype=np.float64), self.floor))
        if self.pooled is None:  # too few calibration jobs for any guarantee: a fixed, wide band
            p50 = log_hat + self.median_residual
            return np.exp(p50) / UNCALIBRATED_FACTOR, np.exp(p50), np.exp(p50) * UNCALIBRATED_FACTOR
        offsets = np.broadcast_to(self.pooled, (len(log_hat), 3)).copy()
        todo = np.ones(len(log_hat), dtype=bool)
        groups = groups or {}
        recurrent = np.zeros(len(log_hat), dtype=bool)
        if self.language_model is not None and LM_GB in groups:  # recurrent jobs: the corrected forecast, its band
            w, a, own = self.language_model
            memory = _values(groups[LM_GB])
            recurrent = np.isfinite(memory) & (memory > 0)
            log_hat = np.where(recurrent, (1 - w) * log_hat + w * np.log(np.where(recurrent, memory, 1.0)) + a, log_hat)
            offsets[recurrent] = own
            todo &= ~recurrent
        for level, index, level_offsets in self.levels:
            labels = _label_series(groups, level, len(log_hat))
            if labels is None:
                continue
            at = labels.replace_strict(index, default=-1, return_dtype=pl.Int32).to_numpy()
            mine = todo & (at >= 0)
            offsets[mine] = level_offsets[at[mine]]
            todo &= ~mine
        for at, p90 in self.large:  # a large job's P90: the widest of its category's and its size groups'
            large = log_hat >= at
            offsets[large, 2] = np.maximum(offsets[large, 2], p90)
        if self.by_shape and all(g in groups for g in (c.MODEL_TYPE, *LARGE_SHAPE_COLUMNS)):
            types = groups[c.MODEL_TYPE]
            types = types if isinstance(types, pl.Series) else pl.Series(np.asarray(types, dtype=object), dtype=pl.String,
                                                                         strict=False)
            batch, dim = _values(groups[c.BATCH_SIZE]), _values(groups[c.INPUT_DIM])
            for kind, power, at, p90 in self.by_shape:  # a job large by shape: the widest of that group's too
                mine = (types == kind).fill_null(False).to_numpy()
                if mine.any():
                    shape = shape_of(batch[mine], dim[mine], power)
                    rows = np.flatnonzero(mine)[shape >= at]
                    offsets[rows, 2] = np.maximum(offsets[rows, 2], p90)
        if self.by_truth is not None:  # a job that may be large: the large jobs' own P90 where it reaches "large"
            at, pooled, own = self.by_truth
            p90 = np.full(len(log_hat), pooled)
            if own and c.MODEL_TYPE in groups:
                types = groups[c.MODEL_TYPE]
                types = types if isinstance(types, pl.Series) else pl.Series(np.asarray(types, dtype=object),
                                                                             dtype=pl.String, strict=False)
                known = types.replace_strict(own, default=None, return_dtype=pl.Float64).to_numpy()
                p90 = np.where(np.isnan(known), p90, known)
            reach = log_hat + p90 >= at
            offsets[reach, 2] = np.maximum(offsets[reach, 2], p90[reach])
        if recurrent.any():  # the large groups were calibrated on the champion's forecasts: not on these ...
            offsets[recurrent] = self.language_model[2]
            for at, p90 in self.large:  # ... but a large one's P90 is never below its size group's (review 64b S3-7)
                large = recurrent & (log_hat >= at)
                offsets[large, 2] = np.maximum(offsets[large, 2], p90)
        result = log_hat[:, None] + offsets
        return np.exp(result[:, 0]), np.exp(result[:, 1]), np.exp(result[:, 2])


def _values(v: pl.Series | np.ndarray) -> np.ndarray:
    """A numeric job column as float64 (nulls NaN)."""
    if isinstance(v, pl.Series):
        return v.cast(pl.Float64, strict=False).to_numpy()
    v = np.asarray(v)
    if v.dtype.kind in "biuf":
        return v.astype(np.float64)
    return np.array([np.nan if x is None else float(x) for x in v], dtype=np.float64)  # a list with None: rows of the tests
