"""How high can any model's R² go on a set, given only the contract's inputs? (issue 50's R² >= 0.93 goal)

Rows whose inputs are identical but whose measured targets differ put a floor under the error of every model that
sees only those inputs: the best any such model can do for a group of identical inputs is the group's mean. Printed
per set (`bench_champion.SETS`) and target, for two keys: the 11 contract features alone (`FEATURES`), and the 11 plus
every other input the product's priors read (hardware, architecture name, contract v5/v6 layout fields: `INPUTS`),
and those without the learning rate and iteration count (`MEMORY`, what a step's memory can depend on):

- `dup`: rows in groups of identical inputs with at least two rows, and the groups;
- `within share`: the within-group sum of squares over the set's total (in the target's units, as R² is); 1 minus it
  bounds the R² of any function of those inputs **on this set, in sample** (no model can do better even on the rows it
  was fitted on). Only duplicated rows contribute, so where few rows repeat it is a loose (high) bound;
- `dup ceiling`: 1 - (the pooled within-group variance, each group's n - 1 degrees of freedom) / the set's variance:
  the R² a model that knew the true mean of every input would reach on new jobs, if the repeats' noise holds for all;
- `nn ceiling` (the delta test): half the mean squared target difference between each row and its nearest other row
  (same categories, nearest in standardised log numeric inputs) estimates the noise variance, including what varies
  between near but different inputs; so 1 minus its share is a conservative (low) estimate of the ceiling;
- `gamma ceiling` (the gamma test): the same for the 1st to 10th nearest rows, regressed on their input distance, read
  at distance 0 (a repeat of the same inputs): the noise variance a repeat measurement would show, where rows never
  repeat exactly (measured, GPUMemNet);
- `cv R²`: what a learned model reaches on these features: ExtraTrees (300 trees, log target) on the product's
  residual feature set, 5-fold cross-validation, 3 seeded repetitions (every model learns from 80% of the set); with
  `--champion` also the product's night (`bench_champion`'s protocol, 70/30 split seed 0, no network).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_ceiling.py [--sets measured,gpumemnet,llm] [--champion]

The LLM set is read from `bench_llm_memory.DATA` (`../shared/data`); `--llm-data PATH` reads it elsewhere (a git
worktree beside the checkout has no `../shared`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable

TARGETS = (c.PEAK_GPU_MEM_GB,)  # the sets' one labelled target in common (issue 50's goals are stated on memory)
# Every input besides the 11 features that a prior reads (`features.build`): hardware, the architecture's name, the
# v5 layout fields and v6's loss precision. A set that leaves one null throughout keys on it as one value.
INPUTS = (*c.HARDWARE, c.ARCH, *c.PARALLELISM, c.SHARDING, c.CPU_OFFLOAD, c.ACTIVATION_CHECKPOINTING, c.ADAPTER,
          c.LORA_RANK, c.MICRO_BATCH_SIZE, c.LOSS_PRECISION)
# What peak memory can depend on: the 11 without the learning rate and the iteration count (a training step's memory
# does not read either; both are continuous and all but unique per row in the measured set, so on the 11 no two rows
# repeat and every neighbour differs in them)
MEMORY = tuple(k for k in c.FEATURES if k not in (c.LEARNING_RATE, c.ITERATIONS))
KEYS = {"11 features": c.FEATURES, "11 + prior inputs": (*c.FEATURES, *INPUTS),
        "memory inputs": (*MEMORY, *INPUTS)}


def _present(rows: pl.DataFrame, columns: tuple[str, ...]) -> list[str]:
    return [k for k in columns if k in rows.columns]


def duplicate_ceiling(rows: pl.DataFrame, key: list[str], target: str) -> dict[str, float]:
    """`dup` rows and groups, the `within share` and the `dup ceiling` of the module docstring."""
    y = rows[target].cast(pl.Float64)
    total = float(((y - y.mean()) ** 2).sum())
    groups = (rows.with_columns(y.alias("_y")).group_by(key, maintain_order=True)
              .agg(pl.len().alias("n"), ((pl.col("_y") - pl.col("_y").mean()) ** 2).sum().alias("ss"))
              .filter(pl.col("n") >= 2))
    within, dof = float(groups["ss"].sum()), int((groups["n"] - 1).sum())
    pooled = within / dof if dof else 0.0
    return {"dup_rows": int(groups["n"].sum()), "groups": groups.height, "within_share": within / total,
            "dup_ceiling": 1 - pooled / float(y.var()) if dof else float("nan")}


def neighbour_ceilings(rows: pl.DataFrame, key: list[str], target: str, k: int = 10) -> tuple[float, float]:
    """(the delta test's ceiling, the gamma test's ceiling) of the module docstring. Neighbours share every
    categorical input (strings, booleans); numeric inputs are compared as standardised log values (a null as its own
    value, far from any number). Delta: half the mean squared target difference to the nearest row. Gamma: the same
    for the 1st..`k`th nearest, regressed on the mean squared input distance; the intercept (distance 0, a repeat
    of the same inputs) estimates the noise variance (Stefansson, Koncar and Jones, 1997)."""
    y = rows[target].to_numpy().astype(np.float64)
    numeric = [name for name in key if rows[name].dtype.is_numeric()]
    cats = rows.select([pl.col(name).cast(pl.String).fill_null("") for name in key if name not in numeric])
    code = (np.unique(np.asarray(cats.rows(), dtype=object).astype(str), axis=0, return_inverse=True)[1].ravel()
            if cats.width else np.zeros(rows.height, dtype=int))
    cols = []
    for name in numeric:
        v = rows[name].cast(pl.Float64).to_numpy()
        if np.isnan(v).all() or np.nanstd(v) == 0:
            continue  # constant or absent here: no distance
        logged = np.log(np.clip(np.nan_to_num(v, nan=1.0), 1e-12, None))
        known = ~np.isnan(v)
        cols.append(np.where(known, (logged - logged[known].mean()) / (logged[known].std() or 1.0), 1e3))
    x = np.column_stack(cols) if cols else np.zeros((rows.height, 1))
    gamma, delta = np.zeros(k), np.zeros(k)
    counts = np.zeros(k)
    for i in range(rows.height):
        same = np.flatnonzero(code == code[i])
        same = same[same != i]
        if same.size == 0:
            continue
        d = ((x[same] - x[i]) ** 2).sum(axis=1)
        order = np.argsort(d, kind="stable")[:k]
        gamma[:order.size] += 0.5 * (y[i] - y[same[order]]) ** 2
        delta[:order.size] += d[order]
        counts[:order.size] += 1
    gamma, delta = gamma / np.maximum(counts, 1), delta / np.maximum(counts, 1)
    used = counts > 0
    slope, intercept = np.polyfit(delta[used], gamma[used], 1) if used.sum() > 1 else (0.0, gamma[0])
    return 1 - gamma[0] / float(np.var(y)), 1 - max(float(intercept), 0.0) / float(np.var(y))


def cross_validated_r2(rows: pl.DataFrame, target: str, folds: int = 5, repeats: int = 3) -> float:
    """ExtraTrees (300 trees, log target) on the product's residual feature set, `folds`-fold, `repeats` seeds: the
    mean R² (target units) of the out-of-fold forecasts."""
    from sklearn.ensemble import ExtraTreesRegressor
    from sklearn.model_selection import KFold

    from gpucast.tasks.learn.features import FeatureEncoder

    y = rows[target].to_numpy().astype(np.float64)
    scores = []
    for seed in range(repeats):
        p = np.empty_like(y)
        for fit, test in KFold(folds, shuffle=True, random_state=seed).split(y):
            enc = FeatureEncoder("residual").fit(rows[fit])
            model = ExtraTreesRegressor(300, random_state=seed, n_jobs=1).fit(enc.transform(rows[fit]), np.log(y[fit]))
            p[test] = np.exp(model.predict(enc.transform(rows[test])))
        scores.append(1 - float(np.sum((p - y) ** 2)) / float(np.sum((y - y.mean()) ** 2)))
    return float(np.mean(scores))


def champion_r2(rows: pl.DataFrame, name: str, target: str, seed: int = 0) -> float:
    """The product's pipeline R² on `bench_champion`'s 70/30 split `seed` (repeats 1, no network)."""
    import tempfile

    from gpucast.tasks.learn.models import registry
    from gpucast.tasks.learn.options import TrainOptions
    from tests.benchmarks.bench_accuracy import evaluate
    from tests.benchmarks.bench_champion import SIDE, r2, split

    history, pending = (t.drop(*[k for k in SIDE if k in t.columns]) for t in split(rows, seed))
    options = TrainOptions(features="residual", repeats=1, device="cpu", compile_trees=False,
                           models=tuple(m for m in registry.MODEL_NAMES if m != registry.NN))
    with tempfile.TemporaryDirectory() as folder:
        results = evaluate(history, pending, name, target, options, Path(folder))
    part = results.filter(pl.col("method") == "pipeline")
    return r2(part["actual"].to_numpy().astype(np.float64), part["p50"].to_numpy().astype(np.float64))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="measured,gpumemnet,llm")
    ap.add_argument("--champion", action="store_true", help="also the product's night on split seed 0 (minutes)")
    ap.add_argument("--llm-data", type=Path, default=None, help="the LLM set's CSV, if not at ../shared/data")
    args = ap.parse_args()
    if args.llm_data is not None:
        import tests.benchmarks.bench_llm_memory as llm_bench

        llm_bench.DATA = args.llm_data
    from tests.benchmarks.bench_champion import SETS

    print(f"  {'set':10s} {'target':16s} {'key':18s} {'rows':>5s} {'dup rows':>8s} {'groups':>6s} "
          f"{'within share':>12s} {'in-sample max':>13s} {'dup ceiling':>11s} {'nn ceiling':>10s} {'gamma ceiling':>12s}")
    for name in args.sets.split(","):
        rows = SETS[name]()
        for target in TARGETS:
            labelled = rows.filter(pl.col(target).is_not_null() & (pl.col(target) > 0))
            for label, columns in KEYS.items():
                key = _present(labelled, columns)
                d = duplicate_ceiling(labelled, key, target)
                delta, gamma = neighbour_ceilings(labelled, key, target)
                print(f"  {name:10s} {target:16s} {label:18s} {labelled.height:5d} {d['dup_rows']:8d} {d['groups']:6d} "
                      f"{d['within_share']:12.3f} {1 - d['within_share']:13.3f} {d['dup_ceiling']:11.3f} {delta:10.3f} {gamma:12.3f}",
                      flush=True)
            line = f"  {name:10s} {target:16s} cv R² (ExtraTrees, residual features, 5-fold x 3): " \
                   f"{cross_validated_r2(labelled, target):.3f}"
            if args.champion:
                line += f"; the product's pipeline R² (split seed 0, repeats 1): {champion_r2(labelled, name, target):.3f}"
            print(line + "\n", flush=True)


if __name__ == "__main__":
    main()
