"""Why the champion rule needs a clear win over the plain LightGBM (session 7's `champion._clear`, docs/models.md).

The diagnostic behind docs/models.md's "a candidate must beat the plain LightGBM clearly" (session 7, committed for
review 57 N13: it ran as an uncommitted /tmp script). On bench_champion's seeded 70/30 split of a set (`split`),
every model but the network is fitted on the history's folds as the night fits them (`train.fit_one`, `--repeats`
passes' worth of repeats), then for each repeat count the champion is chosen from those fits as the night chooses it
(`blend.candidate` and `champion.champion_choice`, the rule of this checkout). Printed per model, lowest out-of-fold
loss first:

- its out-of-fold planner loss (GB, on the rows every model forecast) and the share of `champion.BOOTSTRAP` seeded
  resamples of the jobs on which it is below the plain LightGBM (`champion._below`: the rule needs 97.5%);
- its planner loss on the shape-cluster generalisation holdout, beside the plain LightGBM's;
- the model refitted as the night refits a champion (the calibration split's 85%, `train.calibration_split`) and
  forecasting the pending jobs: planner loss (GB) and R².

Then the bench's plain LightGBM (bench_champion's `plain_lightgbm`: the 11 contract features, the whole history) on
the pending jobs, and that same 11-feature LightGBM fitted on the night's folds (out of fold) and on its 85%; and
whether the champion's gap to it on the pending jobs is noise: the share of paired resamples of the pending jobs on
which the champion (refitted as above) is below it (`_below`, the rule's own resampling), and the share of each one's
squared loss its 3 worst jobs carry.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_champion_rule.py --sets gpumemnet --seeds 0,1,2 --repeats 1,3
        [--sets measured]

Cost: every model's fits once per repeat (3 repeats ~ bench_champion --repeats 3 --no-network without its night), and
every model refitted once: on the gpumemnet sample a few minutes on 2 cores, on the measured set longer.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable
from tests.benchmarks.bench_champion import SETS, plain_lightgbm, r2, split  # noqa: E402

TARGET = c.PEAK_GPU_MEM_GB


def contract_lightgbm(history: pl.DataFrame, pending: pl.DataFrame, seed: int, repeats: int
                      ) -> tuple[dict[tuple[int, int], float], np.ndarray]:
    """The bench's plain LightGBM (11 contract features, defaults, log target) on the night's splits: its out-of-fold
    forecasts keyed as `champion.pool_out_of_fold` keys them, and its forecast of `pending` refitted on the night's
    85% (`calibration_split`)."""
    from lightgbm import LGBMRegressor

    from gpucast.tasks.learn.features import FeatureEncoder
    from gpucast.tasks.learn.folds import FOLDS, fold_split, generalisation_holdout
    from gpucast.tasks.learn.train import calibration_split

    y = history[TARGET].to_numpy().astype(np.float64)
    held, _ = generalisation_holdout(history, seed)
    oof: dict[tuple[int, int], float] = {}
    for r in range(repeats):
        fit, test = fold_split(history.height, held, seed, r)
        enc = FeatureEncoder("contract").fit(history[fit])
        m = LGBMRegressor(random_state=r, verbose=-1, n_jobs=2).fit(enc.transform(history[fit]), np.log(y[fit]))
        oof.update({(r // FOLDS, int(i)): float(v) for i, v in zip(test, np.exp(m.predict(enc.transform(history[test]))),
                                                                    strict=True)})
    refit, _ = calibration_split(history.height, seed)
    enc = FeatureEncoder("contract").fit(history[refit])
    m = LGBMRegressor(random_state=seed, verbose=-1, n_jobs=2).fit(enc.transform(history[refit]), np.log(y[refit]))
    return oof, np.exp(m.predict(enc.transform(pending)))


def refitted(history: pl.DataFrame, pending: pl.DataFrame, options, models: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Each model refitted as the night refits its champion (`train._refit`: the encoder and the fit on the
    calibration split's 85%), forecasting `pending`."""
    from gpucast.tasks.learn import unfitted
    from gpucast.tasks.learn.features import FeatureEncoder
    from gpucast.tasks.learn.models import registry
    from gpucast.tasks.learn.train import calibration_split

    y = history[TARGET].to_numpy().astype(np.float64)
    refit, _ = calibration_split(history.height, options.seed)
    enc = FeatureEncoder(options.features).fit(history[refit])
    X, Xp = enc.transform(history), enc.transform(pending)
    build = registry.Build(seed=options.seed, threads=2, progress=lambda _: None)
    return {m: unfitted.model(m, enc, TARGET, options, build).fit(X[refit], y[refit]).predict(Xp) for m in models}


def one_split(name: str, seed: int, repeat_counts: list[int]) -> None:
    from gpucast.tasks.learn import blend
    from gpucast.tasks.learn.champion import (
        BOOTSTRAP,
        _below,
        _mean_costs,
        _weighted_sq,
        champion_choice,
        planner_loss,
        pool_holdout,
        pool_out_of_fold,
    )
    from gpucast.tasks.learn.folds import FOLDS, holdout_groups
    from gpucast.tasks.learn.models import registry
    from gpucast.tasks.learn.options import TrainOptions
    from gpucast.tasks.learn.train import fit_one

    models = tuple(m for m in registry.MODEL_NAMES if m != registry.NN)
    most = max(repeat_counts)
    options = TrainOptions(features="residual", repeats=most, device="cpu", compile_trees=False, models=models)
    history, pending = split(SETS[name]().filter(pl.col(TARGET).is_not_null()), seed)
    y, yp = history[TARGET].to_numpy().astype(np.float64), pending[TARGET].to_numpy().astype(np.float64)
    t0 = time.perf_counter()
    fits = [fit_one(history, TARGET, options, m, r, threads=2, progress=lambda _: None)
            for r in range(most) for m in models]
    pend = refitted(history, pending, options, models)
    bench50, _ = plain_lightgbm(history, pending, TARGET, seed)
    contract_oof, contract_pend = contract_lightgbm(history, pending, options.seed, most)
    print(f"== {name} / split seed {seed}: {history.height} history, {pending.height} pending "
          f"(fits and refits {time.perf_counter() - t0:.0f} s)")
    print(f"   bench's plain LightGBM on the pending jobs: planner loss {planner_loss(yp, bench50):.3f} GB, "
          f"R² {r2(yp, bench50):.3f}; the same 11 features refitted on the night's 85%: "
          f"{planner_loss(yp, contract_pend):.3f} GB, R² {r2(yp, contract_pend):.3f}")
    for repeats in repeat_counts:
        done = [f for f in fits if f.repeat < repeats]
        pooled = pool_out_of_fold(done, y, FOLDS)
        mix = blend.candidate(pooled, _mean_costs(done), options.seed)
        choice = champion_choice(done, y, folds=FOLDS, target=TARGET, extra={blend.NAME: mix.oof} if mix.oof else None,
                                 costs={blend.NAME: mix.cost} if mix.cost is not None else None,
                                 extra_holdout={blend.NAME: m} if (m := blend.holdout(mix, done)) else None,
                                 groups=holdout_groups(history, options.seed))  # as `finish_target` (session 18)
        keys = pooled.shared(list(pooled.by_model))
        jobs = np.array([k[1] for k in keys], dtype=np.int64)
        plain_sq = pooled.weighted_sq(registry.PLAIN, keys)
        held = pool_holdout(done, y)
        contract_keys = [k for k in keys if k in contract_oof]
        contract = np.array([contract_oof[k] for k in contract_keys])
        print(f"-- repeats {repeats}: {len(keys)} out-of-fold rows; champion {choice.champion}: {choice.describe()}")
        print(f"   11-feature LightGBM out of fold {planner_loss(y[[k[1] for k in contract_keys]], contract):.3f} GB "
              f"vs {registry.PLAIN} {np.sqrt(plain_sq.mean()):.3f} GB")
        print(f"   {'model':15s} {'oof GB':>7s} {'below plain':>11s} {'holdout GB':>10s} {'plain there':>11s} "
              f"{'pending GB':>10s} {'pending R²':>10s}")
        for m in sorted(pooled.by_model, key=lambda m: np.sqrt(pooled.weighted_sq(m, keys).mean())):
            sq = pooled.weighted_sq(m, keys)
            below = "" if m == registry.PLAIN else f"{_below(sq - plain_sq, jobs):.2%}"
            hk = held.shared([m, registry.PLAIN])
            hl, hp = ((f"{np.sqrt(held.per_job(k, hk).mean()):.3f}" for k in (m, registry.PLAIN))
                      if hk else ("", ""))
            print(f"   {m:15s} {np.sqrt(sq.mean()):7.3f} {below:>11s} {hl:>10s} {hp:>11s} "
                  f"{planner_loss(yp, pend[m]):10.3f} {r2(yp, pend[m]):10.3f}" + (" *" if m == choice.champion else ""))
        if choice.champion in pend:  # is the champion's gap to the bench's plain LightGBM on the pending jobs noise?
            mine, bench = _weighted_sq(yp, pend[choice.champion]), _weighted_sq(yp, bench50)
            print(f"   pending: {choice.champion} below the bench's plain LightGBM on {_below(mine - bench):.1%} of "
                  f"{BOOTSTRAP:,} paired resamples of the {len(yp)} jobs; its 3 worst jobs carry "
                  f"{np.sort(mine)[-3:].sum() / mine.sum():.0%} of its squared loss, the bench's 3 worst "
                  f"{np.sort(bench)[-3:].sum() / bench.sum():.0%}")
    print(flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="gpumemnet", help=f"comma-separated: {', '.join(SETS)}")
    ap.add_argument("--seeds", default="0,1,2", help="split seeds, comma-separated")
    ap.add_argument("--repeats", default="1,3", help="repeat counts the champion is chosen at, comma-separated")
    args = ap.parse_args()
    for name in args.sets.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            one_split(name, seed, [int(r) for r in args.repeats.split(",")])


if __name__ == "__main__":
    main()
