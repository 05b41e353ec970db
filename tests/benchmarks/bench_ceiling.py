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
  `--champion` also the product's night (`bench_champion`'s protocol, 70/30 split seed 0, no network);
- the MAPE floor per model type (issue 50's "no group above 15%"; session 16), the mean absolute percentage error
  that a model knowing everything the inputs determine would still make. Where a set records the one per-run draw
  its inputs do not carry (the measured set: `peak_gpu_mem_gb` = `tensor_peak_gb`, a deterministic function of the
  11 features under fake tensors, + `cuda_context_gb` ~ uniform `make_measured_jobs.CUDA_CONTEXT_GB`), the floor is
  analytic (`optimal_ape`): the best forecast knows the tensor peak and forecasts the draw's 1/y-weighted median.
  Printed: the expected floor over the type's rows (`expected`), its 90th percentile over 2,000 simulated pending
  groups of a 70/30 split (`P90 split`: a random 30% of the type's rows, fresh draws; what a perfect model shows in 9
  of 10 splits), and the realised floor on the pending jobs of `bench_champion`'s split seeds `--floor-seeds` (the
  same jobs whose group MAPE the night prints). Elsewhere (no such columns) the floor is that of the repeats
  (`repeat_ape`: rows of identical memory inputs, each group's 1/y-weighted median, in sample), on those rows only.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_ceiling.py [--sets measured,gpumemnet,llm] [--champion]
        [--floor-seeds 0,1,2]

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


def optimal_ape(tensor: np.ndarray, draw: tuple[float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per job whose target is `tensor` + U, U ~ uniform(`draw`) and independent of the inputs: (the forecast that
    minimises the expected absolute percentage error knowing `tensor`, that error's expectation, its variance). The
    minimiser is the median of U's density weighted by 1/y: ln(p / lo) = ln(hi / p), so p = sqrt(lo hi) with lo, hi
    = `tensor` + the draw's bounds; then E|p - y| / y = (sqrt(hi) - sqrt(lo))^2 / (hi - lo) and E[(p / y - 1)^2] =
    (p^2 (1 / lo - 1 / hi) - 2 p ln(hi / lo) + hi - lo) / (hi - lo)."""
    lo, hi = tensor + draw[0], tensor + draw[1]
    p, width = np.sqrt(lo * hi), draw[1] - draw[0]
    mean = (np.sqrt(hi) - np.sqrt(lo)) ** 2 / width
    second = (p ** 2 * (1 / lo - 1 / hi) - 2 * p * np.log(hi / lo) + hi - lo) / width
    return p, mean, np.maximum(second - mean ** 2, 0.0)


def repeat_ape(rows: pl.DataFrame, key: list[str], target: str) -> np.ndarray:
    """Per row, the absolute percentage error of its repeat group's 1/y-weighted median (the constant that minimises
    the group's APE), in sample; NaN for a row whose inputs no other row shares."""
    y = rows[target].to_numpy().astype(np.float64)
    code = np.unique(np.asarray(rows.select([pl.col(k).cast(pl.String).fill_null("") for k in key]).rows(),
                                dtype=object).astype(str), axis=0, return_inverse=True)[1].ravel()
    out = np.full(y.size, np.nan)
    for g in np.unique(code):
        i = np.flatnonzero(code == g)
        if i.size < 2:
            continue
        order = i[np.argsort(y[i], kind="stable")]
        w = np.cumsum(1 / y[order])
        best = y[order][np.searchsorted(w, w[-1] / 2)]
        out[i] = np.abs(best - y[i]) / y[i]
    return out


def mape_floor(rows: pl.DataFrame, target: str, seeds: tuple[int, ...], splits: int = 2000,
               pending_share: float = 0.3) -> pl.DataFrame:
    """Per model type: the MAPE floor of the module docstring (percent): `expected`, `P90 split`, and the realised
    floor on the pending jobs of each split seed in `seeds` (`bench_champion.split`); `source` says which floor."""
    from tests.benchmarks.bench_champion import split

    y = rows[target].to_numpy().astype(np.float64)
    types = rows[c.MODEL_TYPE].to_numpy()
    known = {"tensor_peak_gb", "cuda_context_gb"} <= set(rows.columns) and target == c.PEAK_GPU_MEM_GB
    if known:
        from tests.data.make_measured_jobs import CUDA_CONTEXT_GB

        p, expected, _ = optimal_ape(rows["tensor_peak_gb"].to_numpy().astype(np.float64), CUDA_CONTEXT_GB)
        realised = np.abs(p - y) / y
        source = "context draw"
    else:
        realised = repeat_ape(rows, _present(rows, KEYS["memory inputs"]), target)
        expected, source = realised, "repeats, in sample"
    pending = {seed: set(split(rows, seed)[1][c.JOB_ID].to_list()) for seed in seeds} if c.JOB_ID in rows.columns else {}
    ids = rows[c.JOB_ID].to_numpy() if pending else None
    rng = np.random.default_rng(0)
    out = []
    for t in sorted(set(types)):
        m = (types == t) & ~np.isnan(realised)
        row = {c.MODEL_TYPE: t, "rows": int(m.sum()), "source": source,
               "expected": float(np.mean(expected[m]) * 100) if m.any() else float("nan"), "P90 split": float("nan")}
        if known and m.any():
            tensor, n = rows["tensor_peak_gb"].to_numpy()[m], max(int(round(m.sum() * pending_share)), 1)
            sims = []
            for _ in range(splits):
                pick = rng.choice(tensor.size, n, replace=False)
                draw = rng.uniform(*CUDA_CONTEXT_GB, n)
                sims.append(np.mean(np.abs(p[m][pick] - (tensor[pick] + draw)) / (tensor[pick] + draw)))
            row["P90 split"] = float(np.quantile(sims, 0.9) * 100)
        for seed, held in pending.items():
            mm = m & np.isin(ids, list(held))
            row[f"seed {seed}"] = float(np.mean(realised[mm]) * 100) if mm.any() else float("nan")
        out.append(row)
    return pl.DataFrame(out)


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
    ap.add_argument("--floor-seeds", default="0,1,2", help="bench_champion's split seeds for the realised MAPE floor")
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
            print(line, flush=True)
            floor = mape_floor(labelled, target, tuple(int(v) for v in args.floor_seeds.split(",") if v))
            seeds = [k for k in floor.columns if k.startswith("seed ")]
            print(f"  MAPE floor per model type (%), {floor['source'][0]}: {'type':12s} {'rows':>5s} {'expected':>8s} "
                  f"{'P90 split':>9s} " + " ".join(f"{k:>7s}" for k in seeds))
            for r in floor.iter_rows(named=True):
                print(f"  {'':45s}{r[c.MODEL_TYPE][:12]:12s} {r['rows']:5d} {r['expected']:8.1f} {r['P90 split']:9.1f} "
                      + " ".join(f"{r[k]:7.1f}" for k in seeds))
            print(flush=True)


if __name__ == "__main__":
    main()
