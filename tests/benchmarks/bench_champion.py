"""Does the champion hold on jobs it never saw, and is it never worse than a plain LightGBM? (issue 50)

The outside reviewer's protocol: a set of real measured runs is split 70/30 (seeded) into a history (labelled) and
pending jobs whose truth is kept aside; the product's night runs on the history (every model compared over the
repeats, the champion chosen by the champion rule, refitted, calibrated, saved and loaded by the `Scorer`: the
`pipeline`), and forecasts the pending jobs. Beside it, on the same split: the champion model alone, and the named
baseline, a plain LightGBM (library defaults, log target, no early stopping; quantile LightGBM for its P90).

Printed per set and target: R², MAPE overall and per model type, the planner loss (GB: the champion rule's metric,
`champion.planner_loss`), P90 coverage overall and on the large jobs (actual above the history's 90th percentile), the
champion's name and its ratios to the plain baseline.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_champion.py [--repeats 1] [--nn-max-minutes 4]
        [--sets measured] [--targets peak_gpu_mem_gb] [--seeds 0] [--no-network] [--stopping now] [--trees | --trees-only]
        [--stopping-side-by-side now,refit --rounds 3] [--split random|source] [--llm-data PATH] [--train-seed 0]

`--stopping` (issue 50 item 4) sets the boosted trees' early stopping and the forests' size for the whole run, in
this process only (the registry's constants): `now` (the product's), `before` (as before issue 40's speed-up: no
early stopping, every capped round fitted, 300-tree forests) or a candidate rule (`STOPPING`). `--trees` also
prints every tree model alone, fitted on the whole history and forecasting the pending jobs, with its fit seconds.
`--stopping-side-by-side now,refit` fits only the boosted trees, under each rule in turn, alternating `--rounds`
times in one process, and prints accuracy and the median fit wall and CPU seconds per rule (a ratio measured side by
side, which a loaded machine's other work hits alike).

Sets: `measured` (tests/data/measured_jobs.csv: real torch networks measured with PyTorch's tools); `gpumemnet`
(tests/data/gpumemnet_sample.csv: 349 public MLP and CNN training runs measured on a GPU by GPUMemNet, memory only);
`llm` (../shared/data/llm_memory_dev.csv: 300 public LLM training and fine-tuning runs, per-GPU peak measured on GPUs
by their authors, 295 with a peak; seven sources, its README; mapped to contract v5 jobs as bench_llm_memory does:
one model type, so its groups are printed per source and per layout group too).

`--split random` (the default): a seeded 70/30 split of the jobs. `--split source` (for sets with a `source`: llm):
whole sources go to the pending jobs (seeded order, the prefix of sources nearest 30% of the jobs), so no pending job
has a run of its own source in the history: the harder "jobs it never saw" (another repository, its own tool and
metric).

`--train-seed` (default 0, the product's) sets the night's own seed (`TrainOptions.seed`: the folds the models are
compared on, the models' seeds), the split left as `--seeds` draws it: how far a figure moves with the fit's
randomness alone (issue 50, session 17: at 1 repeat the champion itself changes with it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn.champion import planner_loss
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.score import memory_advice

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable
from tests.benchmarks.bench_accuracy import evaluate  # noqa: E402
from tests.measured import gpumemnet, load  # noqa: E402

LLM_DATA: Path | None = None  # `--llm-data`: the LLM set's CSV where it is not at ../shared/data (a git worktree)


def llm() -> pl.DataFrame:
    """The public LLM runs (`bench_llm_memory.DATA`, or `--llm-data`) as contract rows, features built, with `source`
    beside them."""
    from tests.benchmarks.bench_llm_memory import DATA, contract_frame, job_rows

    rows = job_rows(LLM_DATA or DATA)
    return contract_frame(rows.drop(*SIDE)).with_columns(rows["source"])


SETS = {"measured": load, "gpumemnet": gpumemnet, "llm": llm}
SIDE = ("source", "oom", "gpu_mem_gb")  # bench_llm_memory.job_rows' columns beside the contract's (kept from the night)

# Early-stopping rules to compare (registry constants, set for a run by `--stopping`). `before`: the trees as they
# were before issue 40 (commit f284cbe): no early stopping, 300-tree forests.
STOPPING: dict[str, dict[str, object]] = {
    "now": {},
    "before": {"EARLY_STOPPING_FRACTION": 0.0, "PATIENCE": None, "FOREST_TREES": 300},
    "patience200": {"PATIENCE": 200},  # candidates: a longer patience ...
    "fraction10": {"EARLY_STOPPING_FRACTION": 0.10},  # ... or a smaller held-out share
    "refit": {"REFIT_AFTER_STOPPING": True},  # ... or the rounds kept, fitted again on every row
}
TREES = ("lightgbm", "xgboost", "catboost", "extra_trees", "random_forest", "adaboost", "decision_tree")


PRODUCT = {k: getattr(registry, k) for rule in STOPPING.values() for k in rule}  # the product's constants
BOOSTED = ("lightgbm", "xgboost", "catboost")


def use_stopping(name: str) -> None:
    """Set the registry's early-stopping constants to rule `name` of `STOPPING` for this process (the product's
    constants first, so rules can follow each other in one run)."""
    for constant, value in {**PRODUCT, **STOPPING[name]}.items():
        assert hasattr(registry, constant), constant
        setattr(registry, constant, value)


def stopping_side_by_side(history: pl.DataFrame, pending: pl.DataFrame, target: str, rules: list[str],
                          rounds: int) -> None:
    """Each boosted tree (`BOOSTED`) fitted on the whole history under each of `rules`, the rules alternating
    `rounds` times (so load changes hit them alike): pending-job R² and MAPE (the same every round: the fits are
    seeded), and the fit's median wall and CPU seconds (this process's, `time.process_time`) per rule."""
    from gpucast.tasks.learn.features import FeatureEncoder
    from gpucast.tasks.learn.unfitted import model as _build

    enc = FeatureEncoder("residual").fit(history)
    X, Xp = enc.transform(history), enc.transform(pending)
    y, yp = (t[target].to_numpy().astype(np.float64) for t in (history, pending))
    quiet = registry.Build(seed=0, threads=1, progress=lambda _: None)  # one thread: CPU seconds are the fit's
    for name in BOOSTED:
        seen: dict[str, tuple[float, float, list[float], list[float]]] = {}
        for _ in range(rounds):
            for rule in rules:
                use_stopping(rule)
                est = _build(name, enc, target, TrainOptions(features="residual"), quiet)
                wall, cpu = time.perf_counter(), time.process_time()
                est.fit(X, y)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                p = est.predict(Xp)
                r = seen.setdefault(rule, (r2(yp, p), mape(yp, p), [], []))
                r[2].append(wall)
                r[3].append(cpu)
        use_stopping("now")
        print(f"  {name:9s} " + "   ".join(
            f"{rule}: R² {v[0]:6.3f} MAPE {v[1]:5.1f}% fit {np.median(v[2]):6.2f} s wall {np.median(v[3]):6.2f} CPU-s"
            for rule, v in seen.items()), flush=True)


def trees_alone(history: pl.DataFrame, pending: pl.DataFrame, target: str) -> None:
    """Print each tree model of `TREES`, fitted on the whole history (the product's residual features), on the
    pending jobs: R², MAPE overall and per model type, and its fit seconds."""
    from tests.benchmarks.bench_accuracy import fit_predict

    both = pl.concat([history, pending], how="diagonal_relaxed")
    y = both[target].to_numpy().astype(np.float64)
    fit, test = np.arange(history.height), np.arange(history.height, both.height)
    types = both[c.MODEL_TYPE].to_numpy()[test]
    for name in TREES:
        p, seconds, _ = fit_predict(name, both, y, target, "residual", fit, 1)
        per_type = " ".join(f"{t[:11]:>11s} {mape(y[test][types == t], p[test][types == t]):5.1f}%"
                            for t in sorted(set(types)))
        print(f"  tree {name:14s} R² {r2(y[test], p[test]):6.3f}  MAPE {mape(y[test], p[test]):5.1f}%  "
              f"fit {seconds:6.2f} s   {per_type}")


def split(rows: pl.DataFrame, seed: int, history_share: float = 0.7,
          by: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(history, pending): a seeded 70/30 split of the rows; with `by`, of whole groups of that column (the groups in
    a seeded order, the pending jobs the prefix of groups whose size is nearest the pending share)."""
    if by is None:
        idx = np.random.default_rng(seed).permutation(rows.height)
        n = int(round(rows.height * history_share))
        return rows[np.sort(idx[:n])], rows[np.sort(idx[n:])]
    groups = sorted(rows[by].unique().to_list())
    order = [groups[i] for i in np.random.default_rng(seed).permutation(len(groups))]
    sizes = np.cumsum([int((rows[by] == g).sum()) for g in order])
    k = int(np.argmin(np.abs(sizes - rows.height * (1 - history_share)))) + 1
    pending = pl.col(by).is_in(order[:k])
    return rows.filter(~pending), rows.filter(pending)


def plain_lightgbm(history: pl.DataFrame, pending: pl.DataFrame, target: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The named baseline's (P50, P90) for `pending`: LightGBM with the library's defaults on log(target) and the 11
    raw features (`contract` set), no early stopping; its P90 a quantile LightGBM (alpha 0.9), also defaults."""
    from lightgbm import LGBMRegressor

    from gpucast.tasks.learn.features import FeatureEncoder

    enc = FeatureEncoder("contract").fit(history)
    X, Xp = enc.transform(history), enc.transform(pending)
    y = np.log(history[target].to_numpy().astype(np.float64))
    p50 = LGBMRegressor(random_state=seed, verbose=-1).fit(X, y).predict(Xp)
    p90 = LGBMRegressor(objective="quantile", alpha=0.9, random_state=seed, verbose=-1).fit(X, y).predict(Xp)
    return np.exp(p50), np.exp(p90)


def with_plain_baseline(results: pl.DataFrame, history: pl.DataFrame, pending: pl.DataFrame, target: str,
                        seed: int) -> pl.DataFrame:
    """`results` with the `plain_lightgbm` method's rows replaced by the issue's plain baseline (`plain_lightgbm`)."""
    p50, p90 = plain_lightgbm(history, pending, target, seed)
    old = results.filter(pl.col("method") == "plain_lightgbm")
    new = old.with_columns(pl.Series("p50", p50), pl.Series("p90", p90))
    return pl.concat([results.filter(pl.col("method") != "plain_lightgbm"), new])


def r2(y: np.ndarray, p: np.ndarray) -> float:
    return float(1 - np.sum((p - y) ** 2) / np.sum((y - y.mean()) ** 2))


def mape(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean(np.abs(p - y) / np.abs(y)) * 100)


def report(results: pl.DataFrame, large: float, label: str, by: str = c.MODEL_TYPE) -> dict[str, dict[str, float]]:
    """Print and return per method: R², MAPE, P90 coverage overall and on the large jobs, the band's width (median
    P90 / P50, overall and on the large jobs), and MAPE per model type. `pipeline_slice`: the pipeline with the large
    jobs' P90 from the calibration slice alone (before the out-of-fold size group, issue 50 item 5);
    `pipeline_noshape`: the pipeline without the memory groups large by shape (`intervals.SHAPE_OOF`, session 6);
    `pipeline_nolarge`: without the label-conditional P90 of the jobs measured large (`intervals.LARGE_TRUTH`, session
    8). Width: P90 / P50, the median over all jobs, over the big ones, and the mean over all jobs. MAPE per group of
    the column `by` (the model type, or for the llm set its source or layout group)."""
    out = {}
    types = sorted(results[by].unique().to_list())
    print(f"  {'method':16s} {'R²':>7s} {'MAPE':>7s} {'loss':>7s} {'P90':>6s} {'P90 big':>8s} {'width':>6s} {'big':>6s} {'mean':>6s}  "
          + " ".join(f"{t[:11]:>11s}" for t in types))
    for method in ("pipeline", "pipeline_slice", "pipeline_noshape", "pipeline_nolarge", "champion", "plain_lightgbm", "prior"):
        part = results.filter(pl.col("method") == method)
        if part.is_empty():
            continue
        y, p50, p90 = (part[k].to_numpy().astype(np.float64) for k in ("actual", "p50", "p90"))
        big = y > large
        row = {"r2": r2(y, p50), "mape": mape(y, p50), "loss": planner_loss(y, p50), "p90": float(np.mean(p90 >= y)),
               "p90_big": float(np.mean(p90[big] >= y[big])) if big.any() else float("nan"),
               "width": float(np.median(p90 / p50)), "width_mean": float(np.mean(p90 / p50)),
               "width_big": float(np.median(p90[big] / p50[big])) if big.any() else float("nan")}
        per_type = {t: mape(y[(m := (part[by] == t).to_numpy())], p50[m]) for t in types}
        row.update({f"mape_{t}": v for t, v in per_type.items()})
        out[method] = row
        print(f"  {method:16s} {row['r2']:7.3f} {row['mape']:6.1f}% {row['loss']:7.3f} {row['p90']:6.1%} {row['p90_big']:8.1%} "
              f"{row['width']:6.2f} {row['width_big']:6.2f} {row['width_mean']:6.2f}  " + " ".join(f"{per_type[t]:10.1f}%" for t in types))
    champion = results.filter(pl.col("method") == "champion")["model"][0]
    ratio = out["pipeline"]["r2"] - out["plain_lightgbm"]["r2"]
    print(f"  {label}: champion {champion}; pipeline R² minus plain LightGBM's: {ratio:+.3f}; "
          f"MAPE ratio {out['pipeline']['mape'] / out['plain_lightgbm']['mape']:.2f}x; "
          f"planner loss ratio {out['pipeline']['loss'] / out['plain_lightgbm']['loss']:.2f}x")
    return out


GPU_SIZES_GB = (24.0, 40.0, 48.0, 80.0)  # the GPU memory sizes the planner cost is read at (issue 50, review 58 S3)


def planner_cost(results: pl.DataFrame, methods: tuple[str, ...] = ("pipeline", "pipeline_nolarge")) -> dict:
    """What a method's P90 costs a planner, through the product's own advice (`score.memory_advice`: safe_request_gb
    = P90 x (1 + headroom), oom_risk = safe_request_gb above the GPU's memory): the mean safe_request_gb (GB), and at
    each of `GPU_SIZES_GB` the share of pending jobs flagged oom_risk, the false flags (flagged, and the measured peak
    fits that GPU) and the OOMs missed (measured above it, not flagged). Printed and returned per method."""
    out = {}
    for method in methods:
        part = results.filter(pl.col("method") == method)
        if part.is_empty():
            continue
        y = part["actual"].to_numpy().astype(np.float64)
        forecasts = pl.DataFrame({c.JOB_ID: [str(i) for i in range(part.height)], "target": [c.PEAK_GPU_MEM_GB] * part.height,
                                  "p90": part["p90"].cast(pl.Float64)})
        row, cells = {}, []
        for gpu in GPU_SIZES_GB:
            advice = memory_advice(forecasts, gpu)
            flag = advice["oom_risk"].to_numpy().astype(bool)
            row["request"] = float(advice["safe_request_gb"].mean())
            row[f"flag_{gpu:g}"], row[f"false_{gpu:g}"] = float(flag.mean()), float(np.mean(flag & (y <= gpu)))
            row[f"missed_{gpu:g}"] = int(np.sum(~flag & (y > gpu)))
            cells.append(f"{gpu:g} GB {row[f'flag_{gpu:g}']:5.1%} (false {row[f'false_{gpu:g}']:5.1%}, "
                         f"missed {row[f'missed_{gpu:g}']})")
        out[method] = row
        print(f"  {method:16s} mean safe_request_gb {row['request']:6.2f} GB (measured mean {y.mean():.2f}); "
              "oom_risk " + "; ".join(cells))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--nn-max-minutes", type=float, default=4.0)
    ap.add_argument("--sets", default="measured")
    ap.add_argument("--targets", default=c.PEAK_GPU_MEM_GB)
    ap.add_argument("--seeds", default="0", help="split seeds, comma-separated")
    ap.add_argument("--no-network", action="store_true", help="leave the Transformer-BiGRU out (a quick run)")
    ap.add_argument("--stopping", default="now", choices=tuple(STOPPING), help="early-stopping rule (STOPPING)")
    ap.add_argument("--trees", action="store_true", help="also print each tree model alone on the pending jobs")
    ap.add_argument("--trees-only", action="store_true", help="only the tree models alone (no night, no baseline)")
    ap.add_argument("--stopping-side-by-side", default="", metavar="RULES",
                    help="only the boosted trees alone under each of these rules (comma-separated), alternating")
    ap.add_argument("--rounds", type=int, default=3, help="alternations for --stopping-side-by-side")
    ap.add_argument("--split", default="random", choices=("random", "source"),
                    help="random: a seeded 70/30 split of the jobs; source: of whole sources (sets with one: llm)")
    ap.add_argument("--llm-data", type=Path, default=None, help="the LLM set's CSV, if not at ../shared/data")
    ap.add_argument("--train-seed", type=int, default=0, help="the night's own seed (TrainOptions.seed), not the split's")
    args = ap.parse_args()
    global LLM_DATA
    LLM_DATA = args.llm_data
    use_stopping(args.stopping)
    models = tuple(m for m in registry.MODEL_NAMES if not (args.no_network and m == registry.NN))
    options = TrainOptions(features="residual", repeats=args.repeats, nn_max_minutes=args.nn_max_minutes, device="cpu",
                           compile_trees=False, models=models, seed=args.train_seed)
    for name in args.sets.split(","):
        rows = SETS[name]()
        for target in args.targets.split(","):
            labelled = rows.filter(pl.col(target).is_not_null())
            for seed in (int(s) for s in args.seeds.split(",")):
                history, pending = split(labelled, seed, by="source" if args.split == "source" else None)
                side = pending.select(*[pl.col(k) for k in SIDE if k in pending.columns])
                history, pending = (t.drop(*side.columns) for t in (history, pending))
                t0 = time.perf_counter()
                if args.stopping_side_by_side:
                    print(f"== {name} / {target} / split seed {seed}: boosted trees, rules {args.stopping_side_by_side}"
                          f" alternating x{args.rounds}")
                    stopping_side_by_side(history, pending, target, args.stopping_side_by_side.split(","), args.rounds)
                    continue
                if args.trees_only:
                    print(f"== {name} / {target} / split seed {seed}: trees alone, stopping {args.stopping}")
                    trees_alone(history, pending, target)
                    continue
                print(f"== {name} / {target} / split seed {seed} ({args.split}): {history.height} history, "
                      f"{pending.height} pending; "
                      f"{options.repeats} repeat(s), stopping {args.stopping}, models {', '.join(options.model_names)}")
                with tempfile.TemporaryDirectory() as folder:
                    results = evaluate(history, pending, name, target, options, Path(folder))
                results = with_plain_baseline(results, history, pending, target, seed)
                large = float(np.quantile(history[target].to_numpy(), 0.9))
                label = f"{name}/{target}/{seed}" + (f"/{args.split} split" if args.split != "random" else "")
                report(results, large, label)
                if "source" in side.columns:  # one model type: its groups are the sources and the layout groups
                    from gpucast.tasks.learn.llm_memory import layout_group

                    methods = results["method"].n_unique()
                    for by, values in (("source", side["source"]), ("layout", layout_group(pending))):
                        print(f"  per {by}:")
                        report(results.with_columns(pl.concat([values] * methods).alias(by)), large, label, by)
                if target == c.PEAK_GPU_MEM_GB:
                    planner_cost(results)
                if args.trees:
                    trees_alone(history, pending, target)
                print(f"  ({time.perf_counter() - t0:.0f} s)\n", flush=True)


if __name__ == "__main__":
    main()
