"""How a train run's fits fan out and what they come back as: the rules `flows/train.py` applies between
submitting the fits (`tasks/learn/train.py` `fit_one`, one task run each) and refitting each target's champion.

- which fits run (`runnable_fits`: `order_fits`'s order, the targets with enough labelled jobs only, not the models
  priced out of tonight's scoring budget, whose fits are recorded as not run: `priced_out_fits`), and when the night
  budget ends (`budget_end`);
- how each is submitted (`annotations`: its priority in that order; a network fit asks for a GPU when the cluster
  has them);
- what a fit that raised, or whose worker died, becomes (`outcome_of`: a failed `FitSkipped` with its error);
- whether the run can go on (`check_outcomes`: when every fit failed, something every fit trips on, such as a
  bad option, stops it; a lost worker fails some fits, not all);
- what the finished run tells on-call (`run_message`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from gpucast.records.outcomes import PRICED_OUT_WORDS, FitOutcome, FitSkipped
from gpucast.records.results import TrainedTarget
from gpucast.tasks.learn import champion
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.train import Fit, order_fits, too_few


def runnable_fits(options: TrainOptions, previous: Mapping[str, str], rows: Mapping[str, pl.DataFrame],
                  priced: Mapping[str, Mapping[str, float]] | None = None) -> list[Fit]:
    """The run's fits in `order_fits`'s order (`previous`: target -> its current champion's model), leaving out the
    targets with too few labelled jobs (`rows`: target -> its labelled jobs; `too_few`) and the repeats but the first
    of the models priced out of the scoring budget (`priced`: target -> model -> the queue's cost at its last count,
    `priced_out`; `_not_run`)."""
    return [f for f in order_fits(options, previous) if too_few(rows[f.target], options) is None
            and not _not_run(f, priced or {})]


def _not_run(fit: Fit, priced: Mapping[str, Mapping[str, float]]) -> bool:
    """Whether `fit` is not run because its model is priced out for its target (`priced`): every repeat but the
    first. A model priced out is fitted once a night whatever it costs: its figures stay on the leaderboard, tonight's
    count of its cost is fresh (a cost that follows the data, a tree's, is counted again every night), and the
    nightly retraining of the Transformer-BiGRU the product promises (README) goes on; that one fit competes only where
    tonight's count is within the budget (`tasks/learn/train.py` `finish_target`)."""
    return fit.model in priced.get(fit.target, {}) and fit.repeat > 0


def priced_out(options: TrainOptions, last_costs: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Target -> the models tonight's run fits once -> what scoring its queue would cost at their last counted cost
    (`champion.priced_out` with the run's scoring budget; `last_costs`: `warehouse/training.py` `last_costs`)."""
    budget = options.score_budget()
    return {t: out for t in options.targets
            if (out := champion.priced_out(last_costs.get(t, {}), options.model_names, budget))}


def priced_out_fits(options: TrainOptions, priced: Mapping[str, Mapping[str, float]]) -> dict[str, list[FitSkipped]]:
    """Target -> the fits not run because their model is priced out (`priced_out`, `_not_run`): each repeat but the
    first, each saying its cost against the budget: rows of `skipped_fits`, and the champion's reason names them
    (`tasks/learn/train.py`). None with one repeat (the one fit is run)."""
    budget = options.score_budget()
    return {t: [FitSkipped(t, m, r, f"{PRICED_OUT_WORDS} at its last counted scoring cost it would cost {cost:,.3g} CPU-s for "
                                    f"the {budget.pending:,} pending jobs, over {champion.PRICED_OUT_MARGIN:g}x the "
                                    f"scoring budget ({budget.describe()}); fitted once (repeat 1), competing only "
                                    "within the budget at tonight's count", priced_out=True)
                for m, cost in models.items() for r in range(options.repeats) if _not_run(Fit(t, m, r), priced)]
            for t, models in priced.items()}


def describe_not_run(unfitted: Mapping[str, Sequence[FitSkipped]]) -> list[str]:
    """One progress line per target whose fits are not run because their model is priced out (`priced_out_fits`)."""
    return [f"{t}: {len(fits)} fit(s) not run, over the scoring budget at their last counted cost (each fitted once): "
            + ", ".join(dict.fromkeys(f.model for f in fits)) for t, fits in unfitted.items() if fits]


def not_run(skipped: Sequence[FitSkipped]) -> tuple[int, tuple[str, ...]]:
    """A target's fits not run, as its `TrainedTarget` says them: how many the night did not finish (cut by the night
    budget, failed), and the models priced out of the scoring budget (`priced_out_fits`), sorted."""
    return sum(not f.priced_out for f in skipped), tuple(sorted({f.model for f in skipped if f.priced_out}))


def budget_end(started: float, budget_minutes: float | None) -> float | None:
    """The instant (epoch seconds) the night budget ends for a run started at `started`; None without a budget
    (None or 0: every fit runs)."""
    return started + budget_minutes * 60 if budget_minutes else None


def annotations(fits: Sequence[Fit], index: int, gpu: Mapping[str, float] | None) -> dict[str, object]:
    """The Dask annotations of the `index`-th fit: a priority that keeps `fits`' order, and the GPU resource
    (`gpu`, when the cluster's workers declare one) for a network fit."""
    fit = fits[index]
    return {"priority": len(fits) - index, **({"resources": gpu} if gpu and fit.model == registry.NN else {})}


def outcome_of(fit: Fit, outcome: FitOutcome | BaseException) -> FitOutcome:
    """A finished fit's outcome as it is recorded: an exception (the fit raised, or its worker was lost) becomes a
    failed `FitSkipped` carrying the error's type and its first 300 characters."""
    if isinstance(outcome, BaseException):
        return FitSkipped(fit.target, fit.model, fit.repeat, f"failed: {type(outcome).__name__}: {str(outcome)[:300]}",
                          failed=True)
    return outcome


def check_outcomes(outcomes: Mapping[str, Sequence[FitOutcome]]) -> None:
    """Stop the run (`RuntimeError` naming the first failure) when there were fits and every one failed: not a lost
    worker but something every fit trips on (a bad option). Fits cut by the night budget are not failures; fits not
    run because their model is priced out of the scoring budget are not counted (review 74 S1-1)."""
    every = [o for target_outcomes in outcomes.values() for o in target_outcomes
             if not (isinstance(o, FitSkipped) and o.priced_out)]  # fits not run are neither failed nor finished
    failed = [o for o in every if isinstance(o, FitSkipped) and o.failed]
    if every and len(failed) == len(every):
        raise RuntimeError(f"every fit of the run failed; the first: {failed[0].reason}")


def run_message(targets: Sequence[TrainedTarget], note: str | None) -> str | None:
    """The train run's message (`train_runs.message`): `note` (where the fits ran, the reference set's use), the
    targets skipped and why, how many fits the night did not finish, and the models it fitted once because the scoring
    budget priced them out; None when there is nothing to say."""
    skipped = "; ".join(f"{o.target}: {o.skipped}" for o in targets if o.skipped)
    cut = sum(o.skipped_fits for o in targets)
    priced = sorted({m for o in targets for m in o.priced_out})
    return "; ".join(m for m in (note, skipped, f"{cut} fit(s) skipped: see skipped_fits" if cut else None,
                                 f"fits not run, over the scoring budget at their last counted cost: {', '.join(priced)} "
                                 "(skipped_fits)" if priced else None) if m) or None
