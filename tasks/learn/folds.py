"""Which labelled rows each fit of a train run learns from and forecasts (issue 50): the generalisation holdout
no fit sees, and the repeated folds of the rest (the protocol using them is `tasks/learn/train.py`).

- **the generalisation holdout** (`generalisation_holdout`): the latest week's jobs when the history has one
  (`backtest_mask`), else whole model families, ~20% of the rows, seeded (`grouped_holdout`), else (no family small
  enough: two families of half the rows each) whole shape clusters (`shape_clusters`);
- **the folds** (`fold_split`): the other rows dealt into `FOLDS` folds; repeat r is pass r // `FOLDS`, fold
  r % `FOLDS` of a permutation seeded by (seed + pass);
- `split`: the seeded 70/30 holdout with 20% validation of the protocol before issue 50, which the benchmarks
  still use for their own comparisons.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import ood

TEST_FRACTION = 0.3
VALIDATION_FRACTION = 0.2
# Folds of a pass (issue 50): repeats 1-3 are one pass of 3-fold cross-fitting, 4-6 a second pass on another
# permutation. Each fit trains on 2/3 of the rows outside the holdout and forecasts the other third.
FOLDS = 3
MIN_ROWS_PER_FOLD = 2
# The grouped generalisation holdout (no later week): whole model families, about this share of the rows, seeded;
# a family that would take the holdout above the most is skipped (one family can be most of a history).
HOLDOUT_SHARE = 0.2
HOLDOUT_MAX_SHARE = 0.35
# Where no family can be held out: the rows are clustered by shape (k-means on the standardised logs of these
# columns, the model type one more coordinate), into about one cluster per `SHAPE_CLUSTER_ROWS` rows, at least
# `MIN_SHAPE_CLUSTERS`, and whole clusters are held out as families would be.
SHAPE_COLUMNS = (c.PARAMS_MILLION, c.BATCH_SIZE, c.INPUT_DIM, c.NUM_LAYERS)
SHAPE_CLUSTER_ROWS = 25
MIN_SHAPE_CLUSTERS = 5

# The backtest (issue 37, item 6): the latest week's completed jobs are never fitted nor validated on in the
# comparison; each fit forecasts them as well (`split` "backtest" in model_metrics), and a champion that
# validates well but backtests worse than the best tree loses to it (`champion_choice`).
BACKTEST_DAYS = 7
BACKTEST_MIN_JOBS = 30  # fewer completed jobs in the latest week say too little (as the gate's window)
BACKTEST_MAX_SHARE = 0.5  # a history of about a week or less has no older jobs to learn from: no backtest


def backtest_mask(rows: pl.DataFrame) -> np.ndarray:
    """The labelled (completed) jobs submitted in the last `BACKTEST_DAYS` of the history's submissions (`submitted_at`,
    else `updated_at`: a few long jobs completing weeks later would make a week of completions nearly empty);
    none when they are fewer than `BACKTEST_MIN_JOBS` or more than `BACKTEST_MAX_SHARE` of the jobs."""
    cols = [pl.col(n).dt.epoch("s") for n in (c.SUBMITTED_AT, c.UPDATED_AT)
            if n in rows.columns and rows.schema[n].is_temporal()]
    none = np.zeros(rows.height, dtype=bool)
    if not cols or rows.is_empty():
        return none
    done = rows.select(pl.coalesce(cols).alias("t"))
    if done["t"].null_count() == rows.height:
        return none
    mask = done.select(pl.col("t") > pl.col("t").max() - BACKTEST_DAYS * 86_400)["t"].fill_null(False).to_numpy()
    if mask.sum() < BACKTEST_MIN_JOBS or mask.mean() > BACKTEST_MAX_SHARE:
        return none
    return mask


def grouped_holdout(rows: pl.DataFrame, seed: int) -> np.ndarray:
    """Whole model families (`ood.FAMILY`; a missing one is "unknown"), drawn in a seeded order until about
    `HOLDOUT_SHARE` of the rows (a family that would take it above `HOLDOUT_MAX_SHARE` is passed over); where no
    family fits (one family, or two of half the rows each), whole shape clusters (`shape_clusters`) the same way;
    none when neither gives a holdout."""
    return _grouped(rows, seed)[0]


def holdout_groups(rows: pl.DataFrame, seed: int) -> np.ndarray | None:
    """Each row's group where the generalisation holdout is whole groups (`grouped_holdout`): its model family, or its
    shape cluster where clusters are held out; None for the latest week (`backtest_mask`: its jobs are the draws) or
    without a holdout. The holdout's unit of noise (champion.py `_worse_beyond_noise`, issue 50 session 18): which
    groups are held out is one draw, and a model's lead or lag on the holdout is judged over its groups, not its jobs."""
    if backtest_mask(rows).any():
        return None
    held, groups = _grouped(rows, seed)
    return groups if held.any() else None


def _grouped(rows: pl.DataFrame, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """(`grouped_holdout`'s mask, each row's group: family or shape cluster, None where neither applies)."""
    none = np.zeros(rows.height, dtype=bool)
    if ood.FAMILY not in rows.columns or rows.is_empty():
        return none, None
    family = rows[ood.FAMILY].cast(pl.String).fill_null("unknown").to_numpy()
    held = _whole_groups(family, seed)
    if not held.any() and (clusters := shape_clusters(rows, seed)) is not None:
        return _whole_groups(clusters, seed), clusters
    return held, family


def shape_clusters(rows: pl.DataFrame, seed: int) -> np.ndarray | None:
    """Each row's shape cluster: k-means (scikit-learn, seeded) on the standardised log1p of `SHAPE_COLUMNS` (a
    missing value at the column's median) and the model type (`ood.FAMILY`, one-hot), k = rows / `SHAPE_CLUSTER_ROWS`,
    at least `MIN_SHAPE_CLUSTERS`; None with too few rows or no shape column. Why shape: jobs of one family that
    differ in size are what a model must carry over to (a bigger network, a larger batch), which random folds of a
    history of neighbours never ask of it."""
    cols = [n for n in SHAPE_COLUMNS if n in rows.columns]
    k = max(MIN_SHAPE_CLUSTERS, rows.height // SHAPE_CLUSTER_ROWS)
    if not cols or rows.height < 2 * k:
        return None
    from sklearn.cluster import KMeans  # (scikit-learn: the `ml` extra, as every model)
    from threadpoolctl import threadpool_limits  # (scikit-learn's own dependency)

    x = rows.select(pl.col(n).cast(pl.Float64).abs().log1p() for n in cols).to_numpy()
    x = np.where(np.isnan(x), np.nanmedian(x, axis=0) if np.isfinite(x).any() else 0.0, x)
    x = np.nan_to_num((x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0))
    if ood.FAMILY in rows.columns:
        family = rows[ood.FAMILY].cast(pl.String).fill_null("unknown").to_numpy()
        x = np.hstack([x, (family[:, None] == np.unique(family)[None, :]).astype(np.float64)])
    with threadpool_limits(1):  # a few hundred rows: one thread takes 0.04 s where OpenMP on a loaded machine took 6 s
        return KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(x).astype(str)


def _whole_groups(group: np.ndarray, seed: int) -> np.ndarray:
    """Whole groups drawn in a seeded order until about `HOLDOUT_SHARE` of the rows, a group that would take the
    holdout above `HOLDOUT_MAX_SHARE` passed over; none with fewer than 2 groups."""
    none = np.zeros(len(group), dtype=bool)
    names, counts = np.unique(group, return_counts=True)
    if len(names) < 2:
        return none
    chosen, total = [], 0
    for i in np.random.default_rng(seed + 20_000).permutation(len(names)):
        if total >= HOLDOUT_SHARE * len(group):
            break
        if total + counts[i] <= HOLDOUT_MAX_SHARE * len(group):
            chosen.append(names[i])
            total += counts[i]
    return np.isin(group, chosen) if chosen else none


def generalisation_holdout(rows: pl.DataFrame, seed: int) -> tuple[np.ndarray, str]:
    """(mask, split name) of the rows no fit of the comparison sees, which every fit forecasts: the latest week
    ("backtest", `backtest_mask`) when the history has one, else whole model families or, where no family can be held
    out, whole shape clusters ("holdout", `grouped_holdout`). The champion must not be worse there than the best tree
    (champion.py `_generalises`)."""
    back = backtest_mask(rows)
    if back.any():
        return back, "backtest"
    return grouped_holdout(rows, seed), "holdout"


def fold_split(n: int, holdout: np.ndarray, seed: int, repeat: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit, out-of-fold) row indices of `repeat`: pass repeat // `FOLDS`, fold repeat % `FOLDS` of a permutation
    seeded by (seed + pass) of the `n` rows outside `holdout`. Within a pass every such row is out of fold once."""
    rest = np.flatnonzero(~holdout) if len(holdout) else np.arange(n)
    order = rest[np.random.default_rng(seed + repeat // FOLDS).permutation(len(rest))]
    folds = np.array_split(order, FOLDS)
    k = repeat % FOLDS
    return np.sort(np.concatenate([f for i, f in enumerate(folds) if i != k])), np.sort(folds[k])


def split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fit, validation, test) row indices: 30% test, then 20% of the rest for validation (the protocol before
    issue 50; benchmarks compare on it)."""
    idx = np.random.default_rng(seed).permutation(n)
    n_test = int(round(n * TEST_FRACTION))
    test, train = idx[:n_test], idx[n_test:]
    n_val = int(round(len(train) * VALIDATION_FRACTION))
    return train[n_val:], train[:n_val], test

