"""The blend (issue 50 item 2): non-negative stacking of the network and the best trees, one more candidate.

**Members** (`members`): the network (`registry.NN`) when it was compared, and the `TREES_IN` (2) trees of lowest
out-of-fold planner loss (`champion.TREES`); none over the scoring budget (`champion.ScoreBudget`: at 1M pending jobs
the network's ~230 CPU-s is, and the blend is then of two trees). **Weights** (`nnls_weights`): non-negative least squares
(`scipy.optimize.nnls`) of the truth on the members' out-of-fold forecasts of the rows they all share, no
intercept; squared error, not the planner loss (a least-squares fit has a unique answer and a library solver, and
the planner loss then judges the blend like any model). **Its own out-of-fold loss** (`candidate`): the shared rows
are dealt into `PARTS` seeded parts, and each part's blend forecast uses weights fitted on the other parts only
(cross-fitted), so the blend is judged on rows its weights never saw; it then competes in `champion.champion_choice`
as one more candidate. **Its generalisation-holdout forecasts** (`holdout`, review 57 S3): per fit (repeat), the
weighted sum of its members' forecasts of the holdout, with the weights fitted on every shared out-of-fold row (the
holdout is never in the folds, so the weights never saw it); the blend is then judged on the holdout like any model
(`champion._clear`'s holdout half against the plain LightGBM, `champion._generalises` against the best tree), so a
member that fails on jobs it never saw cannot get through inside the blend. Its **scoring cost**
is the sum of its members' (CPU-s per 1M jobs, counted: `score_cost`), stated in the reason. Weights that do not converge (nnls's
iteration limit) or fewer than 2 members with a weight above zero: no blend, the best single model, and the reason
says so.

Chosen, it is refitted as `Blend`: each member refitted on the same rows, forecasts summed with the weights fitted on
every shared row; saved as each member in its own format (`models/store.py`) and `blend.json` (`FILE`: members,
weights), loaded back by `store.load_model` into a `Blend` the `Scorer` predicts through. **Compiled members stay
compiled** (`compile_members`): each tree member is compiled for scoring beside its own file exactly as it would be
as a champion alone (`models/compiled.py`: LightGBM and the forests compiled and checked against the native model,
the families that stay native say why), and loading predicts each member through its library when it was built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpucast.records.outcomes import CompileInfo, FitResult, MetricRow
from gpucast.tasks.learn.champion import TREES, Pooled, ScoreBudget, metrics, over_budget
from gpucast.tasks.learn.models import compiled, registry

NAME = registry.BLEND
FILE = "blend.json"
TREES_IN = 2
PARTS = 3


def members(pooled: Pooled, keys: Sequence[tuple[int, int]]) -> tuple[str, ...]:
    """The network (when it has forecasts of `keys`) and the `TREES_IN` trees of lowest planner loss on `keys`."""
    have = [m for m in pooled.by_model if all(k in pooled.by_model[m] for k in keys)]
    trees = sorted((m for m in have if m in TREES), key=lambda m: float(pooled.weighted_sq(m, keys).mean()))
    return (*((registry.NN,) if registry.NN in have else ()), *trees[:TREES_IN])


WEIGHT_NOISE = 1e-9  # a weight below this fraction of the largest is rounding noise (`nnls_weights`)


def nnls_weights(P: np.ndarray, y: np.ndarray, at_least: int = 2) -> tuple[np.ndarray | None, str]:
    """(non-negative least-squares weights of the columns of `P` (members' forecasts) for `y`, ""); (None, why)
    when nnls does not converge or a weight is not finite, or fewer than `at_least` weights are above zero (no
    blend; a cross-fitting part's weights need 1: one member scaled is still a forecast of the part's rows)."""
    from scipy.optimize import nnls  # (scipy: the `ml` extra)

    try:
        w, _ = nnls(np.asarray(P, np.float64), np.asarray(y, np.float64))
    except RuntimeError:  # "too many iterations"
        return None, "the weights did not converge"
    if not np.isfinite(w).all():
        return None, "the weights did not converge"
    # a member nnls leaves at rounding noise (8.8e-19 where 0 is exact: the same scipy on another CPU's BLAS, session
    # 18) has no weight: zero it, so whether there is a blend does not hang on the machine's last bits
    w = np.where(w > WEIGHT_NOISE * w.max(initial=0.0), w, 0.0)
    if int((w > 0).sum()) < at_least:
        return None, f"{int((w > 0).sum())} member(s) with a weight above zero"
    return w, ""


@dataclass(frozen=True)
class Candidate:
    """The blend as a candidate: its members and weights (fitted on every shared row: the refitted blend's), its
    cross-fitted out-of-fold forecasts by (pass, row), its scoring cost (None where a member's is unknown); or, when
    there is none, `why` in words."""

    members: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()
    oof: Mapping[tuple[int, int], float] | None = None
    cost: float | None = None
    why: str = ""

    def describe(self) -> str:
        if self.oof is None:
            return f"no blend: {self.why}"
        cost = f"{self.cost:.3g} CPU-s per 1M jobs, counted: the sum of its members'" if self.cost is not None else "not measured"
        return (f"blend of {' + '.join(f'{w:.3g} x {m}' for m, w in zip(self.members, self.weights, strict=True))} "
                f"(scoring cost {cost})")


def candidate(pooled: Pooled, costs: Mapping[str, float], seed: int, budget: ScoreBudget | None = None) -> Candidate:
    """The blend of `members` on the rows they all forecast out of fold, its weights cross-fitted over `PARTS`
    seeded parts of those rows (`nnls_weights`); a `Candidate` with `why` when there is none. `budget`: a model over
    the scoring budget (`champion.over_budget`: the network at a large queue) is no member, and members that fit
    alone but not together make no blend (said in `why`)."""
    over = over_budget(costs, list(pooled.by_model), budget)
    every = [m for m in pooled.by_model if (m in TREES or m == registry.NN) and m not in over]
    keys = pooled.shared(every) or pooled.shared([m for m in every if m != registry.NN])
    chosen = members(Pooled({m: pooled.by_model[m] for m in every}, pooled.actual), keys)
    if len(chosen) < 2:
        within = " within the scoring budget" if over else ""
        return Candidate(why=f"fewer than 2 members{within} ({', '.join(chosen) or 'none'}); the best single model")
    summed = sum(costs[m] for m in chosen) if all(m in costs for m in chosen) else None
    if budget is not None and not budget.fits(summed):  # each member fits alone, not the sum: no blend in the race
        return Candidate(members=chosen, why=f"{' + '.join(chosen)}: their summed cost {budget.cost(summed):.3g} s is "
                                             f"over the scoring budget ({budget.describe()}); the best single model")
    if len(keys) < 2 * PARTS * len(chosen):
        return Candidate(why=f"too few shared out-of-fold rows ({len(keys)}) for {len(chosen)} members' weights")
    P = np.array([[pooled.by_model[m][k] for m in chosen] for k in keys], dtype=np.float64)
    y = pooled.actual[[k[1] for k in keys]]
    part = np.random.default_rng(seed).permutation(len(keys)) % PARTS
    out = np.empty(len(keys))
    for p in (*range(PARTS), None):  # each part's weights fitted on the other parts, then on every shared row
        fit = np.ones(len(keys), dtype=bool) if p is None else part != p
        w, why = nnls_weights(P[fit], y[fit], at_least=2 if p is None else 1)
        if w is None:
            where = "every shared row" if p is None else f"cross-fitting part {p + 1} of {PARTS}"
            return Candidate(members=chosen, why=f"{' + '.join(chosen)}: {why} ({where}); the best single model")
        if p is not None:
            out[part == p] = P[part == p] @ w
    return Candidate(chosen, tuple(float(v) for v in w), dict(zip(keys, out.tolist(), strict=True)), summed)


def holdout(mix: Candidate, fits: Sequence[FitResult]) -> dict[tuple[int, int], float] | None:
    """The blend's forecasts of the generalisation holdout, keyed by (repeat, row) as `champion.pool_holdout` keys
    every fit's: per repeat where every member forecast it, the weighted sum (`mix.weights`, fitted on out-of-fold rows
    only) of the members' forecasts of each held-out row; None without a blend or without holdout forecasts."""
    if mix.oof is None:
        return None
    by: dict[int, dict[str, np.ndarray]] = {}
    rows: dict[int, np.ndarray] = {}
    for f in fits:
        if f.model in mix.members and f.holdout_idx is not None and len(f.holdout_idx):
            by.setdefault(f.repeat, {})[f.model] = np.asarray(f.holdout_pred, np.float64)
            rows[f.repeat] = np.asarray(f.holdout_idx, np.int64)  # every fit forecasts all of the holdout
    out: dict[tuple[int, int], float] = {}
    for r, preds in by.items():
        if len(preds) == len(mix.members):
            mixed = sum(w * preds[m] for m, w in zip(mix.members, mix.weights, strict=True))
            out.update(zip(((r, int(i)) for i in rows[r]), np.asarray(mixed, np.float64).tolist(), strict=True))
    return out or None


def metric_rows(mix: Candidate, actual: np.ndarray, fits: Sequence[FitResult],
                held: Mapping[tuple[int, int], float] | None = None) -> tuple[MetricRow, ...]:
    """The blend's rows of `model_metrics`, as every model has them: per pass, its cross-fitted out-of-fold forecasts
    against the truth (the validation and test splits), its members' mean fit seconds summed and its scoring cost,
    so the leaderboard and `current_champions` show a blend champion's figures (they were null); with `held` (its
    holdout forecasts, `holdout`), per repeat its rows of the generalisation holdout under its members' split name
    ("backtest" or "holdout"), so the leaderboard's holdout planner loss has the blend's too (review 57 S3)."""
    if not mix.oof or not fits:
        return ()
    like = fits[0].metrics[0]
    seconds = sum(float(np.mean([f.seconds for f in fits if f.model == m])) for m in mix.members)
    rows = []
    for p in sorted({k[0] for k in mix.oof}):
        keys = [k for k in mix.oof if k[0] == p]
        y, pred = actual[[k[1] for k in keys]], np.array([mix.oof[k] for k in keys])
        rows += [MetricRow(model=NAME, preset=None, features=like.features, repeat=p, seed=like.seed, split=split,
                           **metrics(y, pred), rows_train=like.rows_train, rows_eval=len(keys),
                           train_seconds=seconds, device=like.device, epochs=None,
                           score_seconds_per_million=mix.cost) for split in ("validation", "test")]
    name = next((m.split for f in fits if f.model in mix.members for m in f.metrics
                 if m.split not in ("validation", "test")), None)
    for r in sorted({k[0] for k in held or {}}) if name else ():
        keys = sorted(k for k in held if k[0] == r)
        y, pred = actual[[k[1] for k in keys]], np.array([held[k] for k in keys])
        rows.append(MetricRow(model=NAME, preset=None, features=like.features, repeat=r, seed=like.seed, split=name,
                              **metrics(y, pred), rows_train=like.rows_train, rows_eval=len(keys), train_seconds=seconds,
                              device=like.device, epochs=None, score_seconds_per_million=mix.cost))
    return tuple(rows)


class Blend:
    """The refitted blend: `estimators` (name -> a registry estimator) and their `weights`; `fit` fits every
    member on the same rows, `predict` is the weighted sum of their forecasts."""

    def __init__(self, estimators: Mapping[str, object], weights: Mapping[str, float]):
        self.estimators = dict(estimators)
        self.weights = dict(weights)

    def fit(self, X, y) -> Blend:
        for est in self.estimators.values():
            est.fit(X, y)
        return self

    def predict(self, X) -> np.ndarray:
        return sum(self.weights[m] * np.asarray(est.predict(X), np.float64) for m, est in self.estimators.items())

    def to_json(self) -> dict:
        return {"members": list(self.estimators), "weights": [self.weights[m] for m in self.estimators]}


def compile_members(folder: Path, est: Blend, sample: np.ndarray, threads: int) -> CompileInfo:
    """Compile each tree member of the saved blend `est` in `folder` beside its own file, as a tree champion alone
    is (`compiled.compile_model`, which writes each member's `<member>.compiled.json`; the network is no tree).
    One `CompileInfo` for the blend's metadata: used when any member's library is, every member's outcome in
    `reason`, the compile seconds summed, the largest compiled-vs-native difference."""
    infos = [compiled.compile_model(m, folder / f"{m}{registry.entry(m).suffix}", member.regressor_, sample, threads)
             for m, member in est.estimators.items() if m in compiled.COMPILABLE or m in compiled.STAYS_NATIVE]
    used = [i for i in infos if i.used]
    seconds = [i.compile_seconds for i in infos if i.compile_seconds is not None]
    return CompileInfo(
        model=NAME, used=bool(used),
        reason="; ".join(f"{i.model} " + ("compiled" if i.used else f"native: {i.reason}") for i in infos) or "no tree member",
        compile_seconds=round(sum(seconds), 1) if seconds else None, tl2cgen=used[0].tl2cgen if used else None,
        codegen=used[0].codegen if used else None,
        max_relative_difference=max(i.max_relative_difference for i in used) if used else None,
        checked_rows=min(i.checked_rows for i in used) if used else None)
