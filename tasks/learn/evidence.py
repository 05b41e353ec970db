"""What the night measures on rows a model did not see, beside the champion choice: which estimate
out-of-distribution jobs get (`held_out_evidence`: each model family held out in turn) and where the learned
correction of LLM jobs' per-GPU prior beats that prior (`llm_evidence`: the LLM jobs held out by configuration).
Both refit a cheap learner (`CHEAP_LEARNERS`, else a `STAND_IN`) and hand `ood` the out-of-fold forecasts."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import blend, llm_memory, ood, unfitted
from gpucast.tasks.learn.features import FEATURE_SETS, FeatureEncoder
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.options import TrainOptions

log = logging.getLogger(__name__)


# The held-out-family evidence refits a model once per family: the champion's own class when it is this
# cheap, else a LightGBM of `STAND_IN_TREES` trees (the metadata's `ood.fallback.learner` says which).
CHEAP_LEARNERS = ("linear_fs", "decision_tree", registry.PLAIN)
STAND_IN, STAND_IN_TREES = "lightgbm", 100


def held_out_evidence(rows: pl.DataFrame, target: str, options: TrainOptions, champion: str,
                      build: registry.Build) -> ood.Fallback | None:
    """Which estimate out-of-distribution jobs get (`ood.held_out_best`), measured by leaving each model
    family of the champion's training `rows` out in turn; None when there are too few families."""
    t0 = time.perf_counter()
    learner = champion if champion in CHEAP_LEARNERS else STAND_IN
    prior_column = FEATURE_SETS[options.features].prior_column(target)
    y = rows[target].to_numpy().astype(np.float64)

    def fit_predict(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        encoder = FeatureEncoder(options.features).fit(rows[train])  # the held-out family's codes unseen, as at scoring
        X_train, X_test = encoder.transform(rows[train]), encoder.transform(rows[test])
        est = unfitted.model(learner, encoder, target, options, build)
        if learner == STAND_IN:
            est.set_params(regressor__n_estimators=STAND_IN_TREES)
        est.fit(X_train, y[train])
        return est.predict(X_test), (np.exp(X_test[:, prior_column].astype(np.float64)) if prior_column is not None else None)

    named = learner if learner != STAND_IN else f"{STAND_IN} ({STAND_IN_TREES} trees" + (
        ")" if champion == STAND_IN else f", a stand-in for {champion})")
    evidence = ood.held_out_best(rows[ood.FAMILY].to_numpy(), y, fit_predict, named)
    if evidence:
        evidence = replace(evidence, seconds=round(time.perf_counter() - t0, 2))
        (build.progress or log.info)(f"{target}: out-of-distribution jobs get the held-out-best estimate: "
                                     f"{ood.CANDIDATE_WORDS.get(evidence.estimate, evidence.estimate)} "
                                     f"(x/÷ {evidence.interval_factor:.2f}, {len(evidence.families)} families held out)")
    return evidence


LLM_FOLDS = 5  # folds of the LLM jobs for `llm_evidence`


def llm_evidence(rows: pl.DataFrame, target: str, options: TrainOptions, champion: str, build: registry.Build,
                 mix: blend.Candidate | None = None) -> ood.LlmCorrection | None:
    """Where a learned correction of the per-GPU prior beats the prior on LLM jobs it has not seen
    (`ood.llm_correction`), or None with fewer than `ood.MIN_LLM_ROWS` LLM jobs (`llm_mem_gb` set) in `rows` (no
    cost on a history without them) or fewer than two configurations of them. The LLM jobs are split in up to
    `LLM_FOLDS` folds by configuration (`llm_configuration`: a held-out run's twin at another sequence length or
    LoRA rank is never in the fit, which would flatter the correction: review 56); the learner is fitted on every
    other row and forecasts each fold. The learner is the champion where it is cheap to refit, else a LightGBM of
    `STAND_IN_TREES` trees, as for `held_out_evidence` (five refits of a network or an 800-tree CatBoost would cost
    the night minutes; the log line names it). Its own folds are not used: the champion choice's folds leave the
    newest jobs to the generalisation holdout, and a fleet's LLM jobs are often all new (then none is ever out of
    fold after a fit that learned from the others)."""
    llm = rows[ood.LLM_MEM_GB].is_not_null().to_numpy() if ood.LLM_MEM_GB in rows.columns else np.zeros(rows.height, bool)
    if llm.sum() < ood.MIN_LLM_ROWS:
        return None
    from sklearn.model_selection import GroupKFold

    at = np.flatnonzero(llm)
    configuration = llm_configuration(rows[at])
    folds = min(LLM_FOLDS, len(set(configuration)))
    if folds < 2:
        return None
    t0 = time.perf_counter()
    learner = champion if champion in CHEAP_LEARNERS else STAND_IN
    y = rows[target].to_numpy().astype(np.float64)
    forecasts: dict[tuple[int, int], float] = {}
    for _, held in GroupKFold(n_splits=folds).split(at, groups=configuration):
        test = at[held]
        train = np.setdiff1d(np.arange(rows.height), test)
        encoder = FeatureEncoder(options.features).fit(rows[train])
        est = unfitted.champion(learner, encoder, target, options, build, mix)
        if learner == STAND_IN:
            est.set_params(regressor__n_estimators=STAND_IN_TREES)
        est.fit(encoder.transform(rows[train]), y[train])
        forecasts.update(zip(((0, int(i)) for i in test), est.predict(encoder.transform(rows[test])).tolist(), strict=True))
    evidence = ood.llm_correction(rows, y, forecasts)
    if evidence:
        kept = sorted(g for g, e in evidence.by_group.items() if e.keep)
        named = learner if learner == champion else f"{STAND_IN} ({STAND_IN_TREES} trees, a stand-in for {champion})"
        (build.progress or log.info)(
            f"{target}: the correction of the per-GPU prior, out of fold on {evidence.pooled.rows} LLM jobs in {folds} "
            f"folds by configuration, learned by {named} ({time.perf_counter() - t0:.1f} s): kept for "
            f"{', '.join(kept) or 'no layout group'}; the other groups get "
            f"{'the correction' if evidence.pooled.keep else 'the per-GPU prior'}")
    return evidence


def llm_configuration(rows: pl.DataFrame) -> np.ndarray:
    """Each LLM job's configuration for `llm_evidence`'s folds: its architecture (`arch`, else its parameter count)
    and its layout group (`llm_memory.layout_group`: what is trained, on one or many GPUs); runs of one configuration
    differ only in sequence length, rank or batch."""
    model = (rows[c.ARCH].cast(pl.String) if c.ARCH in rows.columns else pl.Series([None] * rows.height, dtype=pl.String))
    params = (rows[c.PARAMS_MILLION].cast(pl.String) if c.PARAMS_MILLION in rows.columns
              else pl.Series([None] * rows.height, dtype=pl.String))
    name = model.fill_null(params).fill_null("?")
    return (name + " | " + llm_memory.layout_group(rows)).to_numpy().astype(str)
