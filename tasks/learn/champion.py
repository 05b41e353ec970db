"""How fits are judged and the champion chosen (the protocol that produces the fits is `tasks/learn/train.py`).

Metrics (MSE, RMSE, MAE, MAPE in %, R²) are on the original scale of the target (`metrics`). The **champion** is
chosen on *validation* RMSE alone (test rows never take part): the model with the lowest mean over the repeats,
unless other models are tied with it within noise (within one standard error of the paired per-repeat differences,
or `TIE_FLOOR` of its mean, whichever is larger); then the **cheapest to score** of the tied (each fit's `predict`
timed on `SCORE_COST_ROWS` rows, scaled to 1M jobs: `score_cost`; costs within `COST_NOISE` of the cheapest count
as equal, and then the first in `registry.PREFERENCE`, trees before the network), so that one lucky slice cannot
flip the choice and a model no better than the others does not cost more to score each night. A champion that
validates well but backtests worse than the best tree loses to it (`_generalises`; the backtest's rows:
`train.backtest_mask`). All of it: `champion_choice`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from gpucast.records.outcomes import MetricRow
from gpucast.tasks.learn.models import registry

CHAMPION_METRIC = "rmse"
# Models within this share of the best mean validation RMSE are tied with it even when the repeats
# cannot tell (one repeat has no standard error; two agreeing repeats have a tiny one).
TIE_FLOOR = 0.02
# Scoring cost: each fit's `predict` is timed on this many rows (its validation and test rows, repeated) and
# scaled to 1M jobs; two costs within `COST_NOISE` of each other are equal (one timing on a shared machine).
SCORE_COST_ROWS = 20_000
COST_NOISE = 0.25
CHAMPION_RULE = (f"lowest mean validation {CHAMPION_METRIC} over the repeats; models within one standard error of "
                 f"the paired per-repeat differences (at least {TIE_FLOOR:.0%} of the lowest mean) are tied, and "
                 f"the cheapest tied one to score per 1M jobs wins (costs within {COST_NOISE:.0%} of the cheapest are "
                 f"equal; then the first in this order: {', '.join(registry.PREFERENCE)})")
# The families a validation champion must backtest no worse than the best of (`_generalises`).
TREES = ("lightgbm", "xgboost", "catboost", "extra_trees", "random_forest", "adaboost", "decision_tree")


def metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """MSE, RMSE, MAE, MAPE (%) and R² on the original scale."""
    y_true = np.asarray(y_true, dtype=np.float64)
    y_pred = np.asarray(y_pred, dtype=np.float64)
    err = y_pred - y_true
    mse = float(np.mean(err**2))
    ss_tot = float(np.sum((y_true - y_true.mean()) ** 2))
    return {
        "mse": mse,
        "rmse": float(np.sqrt(mse)),
        "mae": float(np.mean(np.abs(err))),
        "mape": float(np.mean(np.abs(err) / np.abs(y_true)) * 100.0),
        "r2": float(1.0 - np.sum(err**2) / ss_tot) if ss_tot > 0 else float("nan"),
    }


def score_cost(est, X: np.ndarray, rows: int = SCORE_COST_ROWS) -> float:
    """Seconds `est.predict` takes per 1M jobs, timed on `rows` rows of `X` (repeated when it has fewer),
    after one warm-up call on a few rows. The library's own predict: a champion that compiles scores faster
    still (docs/benchmarks.md), so this ranks the compiled families conservatively."""
    sample = X[np.resize(np.arange(len(X)), rows)] if len(X) else X
    est.predict(sample[:100])
    t0 = time.perf_counter()
    est.predict(sample)
    return round((time.perf_counter() - t0) * 1_000_000 / max(len(sample), 1), 3)


@dataclass(frozen=True)
class ChampionChoice:
    """How the champion was chosen (`CHAMPION_RULE`): the model with the lowest mean validation RMSE (the most
    accurate), the models tied with it within noise (cheapest to score first, the champion first), each model's
    mean validation RMSE and its mean scoring cost (seconds per 1M jobs; absent where it was not measured)."""

    champion: str
    lowest: str
    tied: tuple[str, ...]
    means: dict[str, float]
    costs: dict[str, float] = field(default_factory=dict)
    backtest: dict[str, float] = field(default_factory=dict)  # mean backtest RMSE per model (none without a backtest)
    generalises: str = ""  # what the backtest decided, in words ("" without a backtest)

    def describe(self) -> str:
        metric = f"mean validation {CHAMPION_METRIC.upper()}"
        if self.champion not in self.tied:  # the backtest overruled validation
            return f"{self.lowest} had the lowest {metric}; {self.generalises}"
        if len(self.tied) == 1:
            return f"lowest {metric}" + self._backtest_words()
        others = ", ".join(m for m in self.tied if m != self.champion)
        accuracy = (f"lowest {metric}, tied within noise with {others}" if self.champion == self.lowest else
                    f"tied within noise with {others} (the most accurate, {self.lowest}: {metric} "
                    f"{self.means[self.lowest]:.4g} vs {self.means[self.champion]:.4g})")
        if self.champion not in self.costs:
            return f"{accuracy}; first in the preference order (scoring cost not measured)" + self._backtest_words()
        costs = ", ".join(f"{m} {self.costs[m]:.3g}" for m in self.tied if m in self.costs)
        return f"{accuracy}; cheapest to score of the tied (seconds per 1M jobs: {costs})" + self._backtest_words()

    def _backtest_words(self) -> str:
        return f"; {self.generalises}" if self.generalises else ""


def _tie_margin(val: pl.DataFrame, model: str, lowest: str, floor: float) -> float:
    """How far above `lowest`'s mean `model`'s may be and still be tied: one standard error of the
    per-repeat differences (the repeats both finished: same validation rows), at least `floor`."""
    pair = (val.filter(pl.col("model") == model).join(val.filter(pl.col("model") == lowest), on="repeat", suffix="_lowest")
            .select((pl.col(CHAMPION_METRIC) - pl.col(f"{CHAMPION_METRIC}_lowest")).alias("d")))
    if pair.height < 2:
        return floor
    return max(floor, float(pair["d"].std(ddof=1)) / np.sqrt(pair.height))


def _preference(model: str) -> int:
    return registry.PREFERENCE.index(model) if model in registry.PREFERENCE else len(registry.PREFERENCE)


def champion_choice(metric_rows: list[MetricRow] | list[dict]) -> ChampionChoice:
    """Choose the champion by `CHAMPION_RULE` from the metric rows (validation rows only count)."""
    val = pl.DataFrame(metric_rows).filter(pl.col("split") == "validation")
    if "repeat" not in val.columns:
        val = val.with_columns(pl.int_range(pl.len()).over("model").alias("repeat"))
    ranking = val.group_by("model", maintain_order=True).agg(pl.col(CHAMPION_METRIC).mean())
    ranking = ranking.sort(CHAMPION_METRIC, maintain_order=True)
    means = dict(ranking.iter_rows())
    lowest = ranking["model"][0]
    floor = TIE_FLOOR * means[lowest]
    tied = [m for m in means if means[m] - means[lowest] <= _tie_margin(val, m, lowest, floor)]
    costs = _mean_costs(val)
    cheap = _equally_cheapest(costs, tied)
    tied.sort(key=lambda m: (m not in cheap, _preference(m), means[m]))
    choice = ChampionChoice(tied[0], lowest, tuple(tied), means, {m: costs[m] for m in tied if m in costs})
    return _generalises(choice, pl.DataFrame(metric_rows), costs)


def _generalises(choice: ChampionChoice, rows: pl.DataFrame, costs: dict[str, float]) -> ChampionChoice:
    """The backtest's say (`backtest_mask`): a champion that is not the best tree on validation (the tree of
    lowest mean validation RMSE) keeps its place only if its backtest RMSE is not worse than that tree's. Worse
    beyond noise (the same margin as validation's ties, on the backtest's paired per-repeat differences): the
    tree is champion. Worse within noise: they are tied, and the cheaper to score wins (then the preference
    order). Without backtest rows, validation decides alone."""
    back = rows.filter(pl.col("split") == "backtest") if "split" in rows.columns else rows.clear()
    if back.is_empty():
        return choice
    if "repeat" not in back.columns:
        back = back.with_columns(pl.int_range(pl.len()).over("model").alias("repeat"))
    means = dict(back.group_by("model").agg(pl.col(CHAMPION_METRIC).mean()).iter_rows())
    trees = [m for m in sorted(choice.means, key=choice.means.get) if m in TREES and m in means]
    champion = choice.champion
    if not trees or champion not in means:
        return replace(choice, backtest=means)
    tree = trees[0]
    if champion == tree:
        return replace(choice, backtest=means, generalises=f"backtest {CHAMPION_METRIC.upper()} {means[champion]:.4g}")
    d = means[champion] - means[tree]
    margin = _tie_margin(back, champion, tree, TIE_FLOOR * means[tree])
    says = (f"backtest {CHAMPION_METRIC.upper()} {means[champion]:.4g} vs the best tree {tree}'s {means[tree]:.4g}")
    if d <= 0:
        return replace(choice, backtest=means, generalises=f"{says}: not worse, kept")
    if d > margin:
        return replace(choice, champion=tree, backtest=means,
                       generalises=f"{champion} validated best but {says}, worse beyond noise: {tree} is champion")
    pair = sorted((champion, tree), key=lambda m: (costs.get(m, np.inf), _preference(m)))
    return replace(choice, champion=pair[0], tied=tuple(dict.fromkeys((*choice.tied, tree))), backtest=means,
                   generalises=f"{says}, worse within noise: tied, the cheaper to score wins ({pair[0]})")


def _mean_costs(val: pl.DataFrame) -> dict[str, float]:
    """Each model's mean `score_seconds_per_million` over its repeats (models without one are left out)."""
    if "score_seconds_per_million" not in val.columns:
        return {}
    mean = val.group_by("model").agg(pl.col("score_seconds_per_million").cast(pl.Float64).mean()).drop_nulls()
    return dict(mean.iter_rows())


def _equally_cheapest(costs: dict[str, float], tied: list[str]) -> set[str]:
    """The tied models within `COST_NOISE` of the cheapest tied one's cost; all of them when a tied model's cost
    is unknown (the preference order alone decides then)."""
    if any(m not in costs for m in tied):
        return set(tied)
    cheapest = min(costs[m] for m in tied)
    return {m for m in tied if costs[m] <= cheapest * (1 + COST_NOISE)}
