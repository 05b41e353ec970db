"""The champion/challenger gate: a new champion replaces the current one only if it wins on
validation **and** is not worse on the backtest window beyond noise.

Tonight's champion (the challenger) is, by construction, the best of tonight's comparison on
validation rows. The backtest window holds the jobs that completed recently *and* that the current
champion forecast before they ran (`warehouse/backtest.py`): its errors there are genuine
out-of-sample errors. The challenger is fitted once more without those jobs and predicts them too;
then, per job, d = |log(challenger / actual)| - |log(champion / actual)|. The challenger is **worse
beyond noise** when the one-sided 95% lower confidence bound of the mean of d is above zero:
mean(d) - 1.645 x sd(d) / sqrt(n) > 0. Then the current champion stays and the reason is recorded
(`model_champions.decision_reason`). With fewer than `MIN_WINDOW_JOBS` jobs in the window, the
backtest says too little and validation decides alone (recorded as such).

Log errors make the comparison scale-free (a 10% miss on a 2 GB job counts as much as on a 60 GB
one) and paired, so the same jobs' difficulty cancels.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from gpucast.records.outcomes import Champion, GateWindow, TargetResult
from gpucast.records.results import ChampionCoverage
from gpucast.tasks.learn.champion import ScoreBudget

MIN_WINDOW_JOBS = 30
Z_ONE_SIDED_95 = 1.645
DRIFT_COVERAGE = 0.80  # a champion whose P90 covers fewer of the window's jobs than this has drifted


@dataclass(frozen=True)
class Decision:
    promote: bool
    reason: str
    window_jobs: int = 0
    champion_error: float | None = None  # mean |log(prediction / actual)| on the window
    challenger_error: float | None = None

    @property
    def verdict(self) -> str:
        """The decision in one word, as `TrainedTarget.decision` and the run's log say it."""
        return "promoted" if self.promote else "kept"


def verdict(decision: Decision | None) -> str | None:
    """`TrainedTarget.decision`: the gate's verdict, or None where it had nothing to weigh (`judge`)."""
    return decision.verdict if decision is not None else None


def gated(champions: Iterable[Champion], targets: Iterable[str]) -> list[Champion]:
    """The current champions of tonight's targets: the ones the gate weighs tonight's champions against."""
    wanted = set(targets)
    return [ch for ch in champions if ch.target in wanted]


def decide(actual: np.ndarray, champion: np.ndarray, challenger: np.ndarray) -> Decision:
    """Compare the current champion's published forecasts with the challenger's on the same jobs."""
    actual, champion, challenger = (np.asarray(a, dtype=np.float64) for a in (actual, champion, challenger))
    n = len(actual)
    if n < MIN_WINDOW_JOBS:
        return Decision(True, f"backtest window has {n} jobs, fewer than {MIN_WINDOW_JOBS}: chosen on validation alone", n)
    err_champion = np.abs(np.log(champion / actual))
    err_challenger = np.abs(np.log(challenger / actual))
    d = err_challenger - err_champion
    bound = d.mean() - Z_ONE_SIDED_95 * d.std(ddof=1) / np.sqrt(n)
    stats = dict(window_jobs=n, champion_error=float(err_champion.mean()), challenger_error=float(err_challenger.mean()))
    if bound > 0:
        return Decision(False, f"worse on the backtest window beyond noise: mean |log error| {err_challenger.mean():.3f} vs "
                        f"the champion's {err_champion.mean():.3f} over {n} jobs (one-sided 95% bound of the "
                        f"difference {bound:.2g} > 0)", **stats)
    return Decision(True, f"won on validation and not worse on the backtest window: mean |log error| "
                    f"{err_challenger.mean():.3f} vs {err_champion.mean():.3f} over {n} jobs", **stats)


def judge(window: GateWindow | None, result: TargetResult, budget: ScoreBudget | None = None) -> Decision | None:
    """The gate's decision on tonight's champion of a target (the challenger): its predictions of the backtest
    window's jobs, fitted without them (`result.gate_predictions`), joined by job with the current champion's
    published P50 and the actual values, then `decide`. None when there is nothing to gate: no current champion
    (no `window`), no champion tonight, or no predictions of the window (an empty one: nothing was held out).
    `budget` (tonight's scoring budget, `champion.ScoreBudget`): a current champion whose counted cost (`window.cost`)
    is over it cannot stay, whatever the window says (chosen at a smaller queue, it would score tonight's at the
    cost the champion rule refuses), where tonight's champion fits it or costs less (the plain LightGBM, which always
    competes, may be over it too): the challenger is promoted and the reason says why."""
    if window is None or not result.champion or result.gate_predictions is None:
        return None
    mine = result.champion_cost()
    if (budget is not None and window.cost is not None and not budget.fits(window.cost)
            and (budget.fits(mine) or mine < window.cost)):  # tonight's within it, or cheaper than the current one
        return Decision(True, f"the current champion {window.champion.model} would cost {budget.cost(window.cost):.3g} "
                        f"CPU-s to score, over the scoring budget ({budget.describe()}), and tonight's "
                        f"{result.champion} " + (f"{budget.cost(mine):.3g}" if mine is not None else "(not counted)")
                        + ": replaced without the backtest")
    mine = window.jobs.select("job_id", "p50", "actual").join(result.gate_predictions.rename({"p50": "challenger"}),
                                                               on="job_id")
    return decide(mine["actual"].to_numpy(), mine["p50"].to_numpy(), mine["challenger"].to_numpy())


def drift_warnings(coverage: Iterable[ChampionCoverage]) -> list[str]:
    """Warnings for champions whose P90 covered under `DRIFT_COVERAGE` of the backtest window's jobs
    (windows under `MIN_WINDOW_JOBS` jobs say too little)."""
    return [f"drift: the {r.target} champion {r.model} covered {r.p90_coverage:.0%} of the {r.jobs:,} jobs "
            f"that completed in the backtest window with its P90 (expected about 90%, warning below "
            f"{DRIFT_COVERAGE:.0%}): its forecasts no longer fit the jobs; see forecast_backtest"
            for r in coverage if r.jobs >= MIN_WINDOW_JOBS and r.p90_coverage < DRIFT_COVERAGE]
