"""Accuracy on real, named architectures (issue 26): the analytic prior's own error, and the models
trained on the measured set forecasting the reference set and real H100 runs.

Two evaluation sets, neither used for training:

* the reference set `tasks/learn/reference_archs.csv` (named torchvision / transformers architectures x 3
  batch sizes x FP32 / mixed precision, traced by the zoo with the tooling of the measured set;
  truth = `peak_gpu_mem_gb`, the traced tensor peak + a seeded CUDA-context draw);
* the real H100 runs `tests/data/gpu_archs_h100.csv` (truth = `device_used_gb`, what the GPU reports).

`--prior-error` prints the analytic prior's error per family (MAPE and median ratio of `prior_mem_gb` to
the measured peak, and of `prior_gflop_per_iter` to the traced FLOPs) on the reference set, with the
`model_type` as logged and with the architecture's family name as the model type (`VGG`, `EfficientNet`,
...: what sites log), and per model type on the measured set.

Without `--prior-error` (the "real architectures" mode): memory models are trained on the measured set as the
nightly trains them (`train_target`, the default feature set, the tree models of `--models`) and forecast
both evaluation sets. Printed per family and overall: MAPE, R², P90 coverage (actual <= P90) and
under-provisioning (actual > `safe_request_gb(P90)`, the request the product advises), for

* `champion+arch`: the champion, the job's `arch` given, so the traced prior is its residual base (the trace
  columns come from the set itself: the reference set was traced by the same zoo, so no trace reruns);
* `champion`: the same champion without `arch` (the analytic prior as its base);
* `pipeline+arch`, `pipeline`: what the nightly publishes (`Scorer`: the champion, or the analytic /
  traced prior with its own calibration for jobs flagged out of distribution);
* `traced history`: a champion trained on the measured set as if its jobs had logged their `arch` (their own
  traced peak as the prior), `arch` given: what the nightly learns once the history has traces;
* `plain LightGBM`: LightGBM on the 11 raw features (log target), a quantile LightGBM (alpha 0.9) for P90;
* `traced prior`: the trace alone (`traced.reported_gb` of its tensor peak; its P90 is itself);
* `accelerate`: weights + gradients + optimizer state only (`prior_state_gb`; its P90 is itself).

    .venv/bin/python tests/benchmarks/real_archs.py --prior-error
    .venv/bin/python tests/benchmarks/real_archs.py [--models lightgbm,extra_trees,xgboost,prior] [--repeats 1] [--family-names]
        [--seed 0]   # the training's seed (issue 50: one seed's regression was another's improvement)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records.outcomes import Champion
from gpucast.tasks.learn import features, priors, traced
from gpucast.tasks.learn.champion import metrics
from gpucast.tasks.learn.features import FeatureEncoder
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.score import Scorer, safe_request_gb

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: make `tests` importable
from tests import measured  # noqa: E402
from tests.train_steps import train_target  # noqa: E402

REFERENCE = ROOT / "tasks" / "learn" / "reference_archs.csv"
GPU_RUNS = ROOT / "tests" / "data" / "gpu_archs_h100.csv"
FAMILY = "arch_family"
# The name a site would log for an architecture family (model_type), when it logs the family's name.
FAMILY_NAMES = {"alexnet": "AlexNet", "convnext": "ConvNeXt", "densenet": "DenseNet", "efficientnet": "EfficientNet",
                "inception": "Inception", "mnasnet": "MNASNet", "mobilenet": "MobileNet", "regnet": "RegNet",
                "resnet": "ResNet", "resnext": "ResNeXt", "shufflenet": "ShuffleNet", "squeezenet": "SqueezeNet",
                "vgg": "VGG", "wide_resnet": "WideResNet", "albert": "ALBERT", "bart": "BART", "bert": "BERT",
                "distilbert": "DistilBERT", "gpt2": "GPT-2", "maxvit": "MaxViT", "opt": "OPT", "roberta": "RoBERTa",
                "swin": "Swin", "t5": "T5", "vit": "ViT", "xlnet": "XLNet"}


def with_hardware(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with the contract's hardware columns, null where it lacks them (the sets log no hardware)."""
    missing = [pl.lit(None, dtype=pl.String if n == c.GPU_TYPE else pl.Float64).alias(n)
               for n in c.HARDWARE if n not in df.columns]
    return df.with_columns(missing) if missing else df


def load_reference(path: Path = REFERENCE, family_names: bool = False) -> pl.DataFrame:
    """The reference set's rows; `family_names`: the model type is the family's name (`FAMILY_NAMES`)."""
    if not path.exists():
        raise SystemExit(f"no reference set at {path} (tests/data/make_reference_archs.py makes it)")
    df = with_hardware(pl.read_csv(path).with_columns(pl.col(c.REGULARIZATION).cast(pl.Boolean),
                                                      pl.col(c.DATA_AUGMENTATION).cast(pl.Boolean)))
    if family_names:
        df = df.with_columns(pl.col(FAMILY).replace_strict(FAMILY_NAMES, default=pl.col(c.MODEL_TYPE)).alias(c.MODEL_TYPE))
    return df


def prior_error(df: pl.DataFrame, by: str) -> pl.DataFrame:
    """Per value of `by` (and `all`): rows, MAPE (%) and median ratio of the analytic prior's memory to
    `peak_gpu_mem_gb` and of its FLOPs per step to `train_gflop_per_iter`."""
    p = priors.compute(with_hardware(df))
    d = df.select(pl.col(by).cast(pl.String), mem=p["prior_mem_gb"] / df[c.PEAK_GPU_MEM_GB],
                  flop=p["prior_gflop_per_iter"] / df[priors.GFLOP_PER_ITERATION])
    aggs = [pl.len().alias("n"), ((pl.col("mem") - 1).abs().mean() * 100).alias("mem MAPE %"),
            pl.col("mem").median().alias("mem ratio"), ((pl.col("flop") - 1).abs().mean() * 100).alias("FLOP MAPE %"),
            pl.col("flop").median().alias("FLOP ratio")]
    table = d.group_by(by).agg(aggs).sort(by)
    return pl.concat([table, d.select(pl.lit("all").alias(by), *aggs)])


def print_table(title: str, table: pl.DataFrame) -> None:
    print(f"\n{title}")
    key = table.columns[0]
    print(f"  {key:14s}" + "".join(f" {col:>11s}" for col in table.columns[1:]))
    for row in table.iter_rows():
        cells = "".join(f" {v:11d}" if isinstance(v, int) else f" {v:11.2f}" for v in row[1:])
        print(f"  {row[0]:14s}" + cells)


def print_prior_error(reference: Path) -> None:
    print_table("Reference set, model_type as logged (CNN / ResNet / Transformer):",
                prior_error(load_reference(reference), FAMILY))
    print_table("Reference set, model_type = the family's name (VGG, EfficientNet, ...):",
                prior_error(load_reference(reference, family_names=True), FAMILY))
    print_table("Measured set, per model type:", prior_error(measured.load(), c.MODEL_TYPE))


TARGET = c.PEAK_GPU_MEM_GB
DEFAULT_MODELS = ("lightgbm", "extra_trees", "xgboost", "prior")
ESTIMATORS = ("champion+arch", "champion", "pipeline+arch", "pipeline", "traced history", "plain LightGBM", "traced prior",
              "accelerate")


@dataclass(frozen=True)
class EvalSet:
    """Jobs to forecast: contract rows (with `arch` and `FAMILY`), their traces, and the memory truth."""

    name: str
    rows: pl.DataFrame
    trace: pl.DataFrame
    truth: np.ndarray


def trace_columns(df: pl.DataFrame, tensor_peak_gb: str, gflop: str) -> pl.DataFrame:
    """`traced.TRACE_COLUMNS` from a set's own trace (as `traced.trace_jobs` would return them)."""
    reported = [traced.reported_gb(gb * priors.GB) for gb in df[tensor_peak_gb].to_list()]
    return pl.DataFrame({traced.TRACED_MEM_GB: reported,
                         traced.TRACED_GFLOP_PER_ITER: df[gflop], traced.TRACED_PARAMS_MILLION: df[c.PARAMS_MILLION],
                         traced.TRACED_NUM_LAYERS: df[c.NUM_LAYERS], traced.TRACED_INPUT_DIM: df[c.INPUT_DIM],
                         traced.TRACE_STATUS: pl.Series([traced.CACHED] * df.height),
                         **{n: [None] * df.height for n in (traced.ARCH_INFERRED, traced.ARCH_MATCH_DISTANCE,
                                                            traced.ARCH_INFERENCE)}}, schema=traced.TRACE_SCHEMA)


def reference_set(path: Path, family_names: bool) -> EvalSet:
    df = load_reference(path, family_names)
    return EvalSet("reference set (truth: peak_gpu_mem_gb, traced + a CUDA-context draw)", df,
                   trace_columns(df, "tensor_peak_gb", priors.GFLOP_PER_ITERATION), df[TARGET].to_numpy())


def gpu_set(path: Path, reference: pl.DataFrame) -> EvalSet:
    """The H100 runs that finished, as jobs: depth from the reference set's rows of the same `arch` (the set
    does not log it), 1,000 iterations, no learning rate / regularization / augmentation logged."""
    if not path.exists():
        raise SystemExit(f"no GPU runs at {path} (tests/data/measure_gpu_archs.py makes them)")
    runs = pl.read_csv(path).filter(pl.col("status") == "ok").rename({"family": FAMILY})
    depth = reference.group_by(c.ARCH).agg(pl.col(c.NUM_LAYERS).first())
    model_types = dict(reference.group_by(c.ARCH).agg(pl.col(c.MODEL_TYPE).first()).iter_rows())
    df = runs.join(depth, on=c.ARCH, how="left").with_columns(
        pl.format("gpu-{}", pl.int_range(pl.len())).alias(c.JOB_ID), pl.lit(1000.0).alias(c.ITERATIONS),
        pl.lit(None, pl.Float64).alias(c.LEARNING_RATE), pl.lit(False).alias(c.REGULARIZATION),
        pl.lit(False).alias(c.DATA_AUGMENTATION),
        pl.col(c.ARCH).replace_strict(model_types, default=pl.col(c.MODEL_TYPE)).alias(c.MODEL_TYPE))
    df = with_hardware(df)
    return EvalSet("real H100 runs (truth: device_used_gb, what the GPU reports)", df,
                   trace_columns(df, "traced_peak_gb", "traced_gflop"), df["device_used_gb"].to_numpy())


def train_champion(history: pl.DataFrame, models: tuple[str, ...], repeats: int, folder: Path, seed: int = 0) -> Scorer:
    """The memory champion trained as the nightly trains it (`train_target`, default feature set), seeded."""
    options = TrainOptions(targets=(TARGET,), models=models, repeats=repeats, seed=seed)
    result = train_target(history, TARGET, options, folder, threads=2, progress=lambda _: None)
    return Scorer(Champion(TARGET, result.champion, "real-archs", str(folder)), threads=2)


def champion_forecast(scorer: Scorer, rows: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(P50, P90) of the champion itself, with its calibrated intervals, never the out-of-distribution fallback."""
    X = scorer.encoder.transform(rows)
    groups = {g: rows[g].to_numpy() for g in ("model_type", "queue") if g in rows.columns}
    _, p50, p90 = scorer.calibration.intervals(np.asarray(scorer.estimator.predict(X), dtype=np.float64), groups)
    return p50, p90


def plain_lightgbm(history: pl.DataFrame, rows: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(P50, P90) of LightGBM on the 11 raw features and log(memory): a point model and a quantile one."""
    from lightgbm import LGBMRegressor

    enc = FeatureEncoder("contract").fit(history)
    X, Xe, y = enc.transform(history), enc.transform(rows), np.log(history[TARGET].to_numpy())
    kw = dict(n_estimators=600, learning_rate=0.05, num_leaves=63, subsample=0.8, subsample_freq=1,
              colsample_bytree=0.8, random_state=0, n_jobs=2, verbose=-1)
    p50 = LGBMRegressor(**kw).fit(X, y).predict(Xe)
    p90 = LGBMRegressor(objective="quantile", alpha=0.9, **kw).fit(X, y).predict(Xe)
    return np.exp(p50), np.exp(p90)


def traced_history(history: pl.DataFrame) -> pl.DataFrame:
    """The measured set as if every job had logged its `arch`: its own traced peak as the traced prior."""
    return features.build(history, trace=trace_columns(history, "tensor_peak_gb", priors.GFLOP_PER_ITERATION))


def forecasts(scorer: Scorer, traced_scorer: Scorer, history: pl.DataFrame,
              ev: EvalSet) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(P50, P90) of every estimator (`ESTIMATORS`) for the jobs of `ev`."""
    with_arch = features.build(ev.rows, trace=ev.trace)
    without = features.build(ev.rows.with_columns(pl.lit(None, pl.String).alias(c.ARCH)), trace=None)
    out = {"champion+arch": champion_forecast(scorer, with_arch), "champion": champion_forecast(scorer, without)}
    for name, rows in (("pipeline+arch", with_arch), ("pipeline", without)):
        scored = scorer.score(rows)
        out[name] = (scored["p50"].to_numpy(), scored["p90"].to_numpy())
    out["traced history"] = champion_forecast(traced_scorer, with_arch)
    out["plain LightGBM"] = plain_lightgbm(history, ev.rows)
    point = with_arch[traced.TRACED_MEM_GB].to_numpy()
    out["traced prior"] = (point, point)
    state = without["prior_state_gb"].to_numpy()
    out["accelerate"] = (state, state)
    return out


def scores(y: np.ndarray, p50: np.ndarray, p90: np.ndarray) -> dict[str, float]:
    m = metrics(y, p50)
    return {"MAPE %": m["mape"], "R²": m["r2"], "P90 cover": float(np.mean(y <= p90)),
            "under": float(np.mean(y > safe_request_gb(p90)))}


def score_table(ev: EvalSet, preds: dict[str, tuple[np.ndarray, np.ndarray]]) -> pl.DataFrame:
    """One row per family (and `all`) and estimator: n and `scores`."""
    fams = ev.rows[FAMILY].to_numpy()
    out = []
    for fam in [*sorted(set(fams)), "all"]:
        m = np.ones(len(fams), bool) if fam == "all" else fams == fam
        for name, (p50, p90) in preds.items():
            out.append({FAMILY: fam, "estimator": name, "n": int(m.sum()), **scores(ev.truth[m], p50[m], p90[m])})
    return pl.DataFrame(out)


def print_scores(ev: EvalSet, table: pl.DataFrame) -> None:
    print(f"\n== {ev.name}: {ev.rows.height} jobs, {ev.rows[c.ARCH].n_unique()} architectures ==")
    names = list(dict.fromkeys(table["estimator"].to_list()))
    for metric, fmt in (("MAPE %", "{:14.1f}"), ("R²", "{:14.2f}"), ("P90 cover", "{:14.1%}"), ("under", "{:14.1%}")):
        wide = table.pivot(on="estimator", index=[FAMILY, "n"], values=metric, maintain_order=True)
        print(f"\n{metric}\n  {FAMILY:14s} {'n':>4s}" + "".join(f" {n:>14s}" for n in names))
        for row in wide.iter_rows(named=True):
            print(f"  {row[FAMILY]:14s} {row['n']:4d}" + "".join(" " + fmt.format(row[n]) for n in names))


def real_architectures(args: argparse.Namespace) -> dict[str, pl.DataFrame]:
    """The "real architectures" mode: train on the measured set, forecast both sets, print; the tables."""
    t0 = time.perf_counter()
    history = measured.load()
    reference = reference_set(args.reference, args.family_names)
    sets = [reference, gpu_set(args.gpu_runs, reference.rows)]
    models = tuple(args.models.split(","))
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as folder2:
        scorer = train_champion(history, models, args.repeats, Path(folder), args.seed)
        traced_scorer = train_champion(traced_history(history), models, args.repeats, Path(folder2), args.seed)
        print(f"memory champions trained on the measured set ({history.height} jobs): {scorer.champion.model}, "
              f"with traced priors {traced_scorer.champion.model} ({time.perf_counter() - t0:.0f} s)")
        tables = {}
        for ev in sets:
            tables[ev.name] = score_table(ev, forecasts(scorer, traced_scorer, history, ev))
            print_scores(ev, tables[ev.name])
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return tables


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prior-error", action="store_true", help="the analytic prior's own error per family")
    ap.add_argument("--reference", type=Path, default=REFERENCE, help="the reference set (CSV)")
    ap.add_argument("--gpu-runs", type=Path, default=GPU_RUNS, help="the real GPU runs (CSV)")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help="the models the champion is chosen from")
    ap.add_argument("--repeats", type=int, default=1, help="holdout repeats when choosing the champion")
    ap.add_argument("--family-names", action="store_true", help="model_type = the family's name (VGG, BERT, ...)")
    ap.add_argument("--seed", type=int, default=0, help="the training's seed (splits, models): one figure per seed")
    args = ap.parse_args(argv)
    if args.prior_error:
        print_prior_error(args.reference)
    else:
        real_architectures(args)


if __name__ == "__main__":
    main()
