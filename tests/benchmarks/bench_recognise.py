"""Benchmark (issue 37): recognising the architecture from the logged shape, and what it does to the forecast.

    .venv/bin/python tests/benchmarks/bench_recognise.py [--models lightgbm,extra_trees,xgboost,prior]

Names removed (`arch` null), every job of the reference set (`tests/data/reference_archs.csv`) and of the real
H100 runs (`tests/data/gpu_archs_h100.csv`, the unseen test) goes through `zoo.match_shape` with its logged
model type, parameter count, depth and input size, in two loggings: the built network's parameter count, and
the published one (`zoo.PUBLISHED_PARAMS_MILLION`, else the built count to 3 significant digits).

Printed: per set and logging, the share of architectures (and of jobs) matched right, matched wrongly, tied
(no inference), unmatched; the measured set's share of jobs matched at all (its networks are not the zoo's);
then memory MAPE and P90 coverage per family of what the nightly publishes (`Scorer.score`, champion trained on
the measured set as `real_archs.py` does) with the name, without it today (no inference), and without it
with inference. A job matched right gets its own trace (the set's tensor peak); one matched wrongly the wrong
architecture's trace at its configuration, estimated by the reference set's fit of that architecture
(`make_reference_archs.fit_step`, 1.3% off held-out traces); a tie or no match goes today's way.
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
from gpucast.tasks.learn import features, priors, traced, zoo

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "data"))
import make_reference_archs as refgen  # noqa: E402

from tests import measured  # noqa: E402
from tests.benchmarks import real_archs as ra  # noqa: E402


def published(arch: str, built_million: float) -> float:
    return zoo.PUBLISHED_PARAMS_MILLION.get(arch, float(f"{built_million:.3g}"))


def recognise(df: pl.DataFrame, logging: str) -> list[zoo.Match]:
    """`zoo.match_shape` of every row, names removed; `logging`: "built" or "published" parameter counts."""
    memo: dict[tuple, zoo.Match] = {}
    out = []
    for arch, model_type, params, layers, dim in df.select(c.ARCH, c.MODEL_TYPE, c.PARAMS_MILLION, c.NUM_LAYERS,
                                                           c.INPUT_DIM).iter_rows():
        p = params if logging == "built" else published(arch, params)
        key = (model_type, p, layers, dim)
        if key not in memo:
            memo[key] = zoo.match_shape(model_type, p, layers, dim)
        out.append(memo[key])
    return out


def outcome(arch: str, m: zoo.Match) -> str:
    if m.arch is None:
        return "tie" if m.reason.startswith("shape matches") else "none"
    return "right" if m.arch == arch else "wrong"


def print_rates(name: str, df: pl.DataFrame, matches: list[zoo.Match]) -> None:
    kinds = [outcome(a, m) for a, m in zip(df[c.ARCH].to_list(), matches, strict=True)]
    by_arch = {}
    for a, k in zip(df[c.ARCH].to_list(), kinds, strict=True):
        by_arch.setdefault(a, k)
    archs = list(by_arch.values())
    cells = " ".join(f"{k} {archs.count(k)}/{len(archs)} ({archs.count(k) / len(archs):.0%}) jobs {kinds.count(k) / len(kinds):.0%};"
                     for k in ("right", "wrong", "tie", "none"))
    print(f"  {name}: {cells}")
    for a, k in by_arch.items():
        if k != "right":
            m = matches[df[c.ARCH].to_list().index(a)]
            print(f"      {a}: {m.reason}")


class Grid:
    """Each architecture's traced rows of the reference set, fitted per precision class (`refgen.fit_step`)."""

    def __init__(self, reference: pl.DataFrame):
        rows = reference.filter(pl.col("source") == refgen.TRACED_SOURCE) if "source" in reference.columns else reference
        self.rows = {}
        for r in rows.with_columns(pl.all().cast(pl.String)).iter_rows(named=True):
            self.rows.setdefault((r[c.ARCH], refgen._precision_class(r[c.PRECISION])), []).append(r)
        self.fits = {k: refgen.fit_step(v) for k, v in self.rows.items()}

    def tensor_gb(self, arch: str, batch: int, precision: str, optimizer: str | None, input_dim: int | None) -> float | None:
        fit = self.fits.get((arch, refgen._precision_class(precision)))
        if fit is None:
            return None
        a = zoo.ARCHITECTURES[arch]
        scale = (input_dim / a.default_input_dim) ** 2 if input_dim and a.kind == "image" else 1.0
        state = refgen.FP32_BYTES * zoo.shapes()[arch].params * refgen.STATE_TENSORS.get(optimizer or "Adam", 2) / 1e9
        return fit[0] + state + fit[1] * batch * scale


def inferred_trace(df: pl.DataFrame, tensor_col: str, matches: list[zoo.Match], grid: Grid) -> pl.DataFrame:
    """`traced.TRACE_COLUMNS` as the nightly would have them for these rows, names removed."""
    mem, status, inferred, distance = [], [], [], []
    for r, m in zip(df.iter_rows(named=True), matches, strict=True):
        if m.arch is None:
            mem.append(None)
        elif m.arch == r[c.ARCH]:
            mem.append(traced.reported_gb(r[tensor_col] * priors.GB))
        else:
            gb = grid.tensor_gb(m.arch, r[c.BATCH_SIZE], r[c.PRECISION], r[c.OPTIMIZER], r[c.INPUT_DIM])
            mem.append(None if gb is None else traced.reported_gb(gb * priors.GB))
        status.append(None if mem[-1] is None else traced.CACHED)
        inferred.append(m.arch if mem[-1] is not None else None)
        distance.append(m.distance if mem[-1] is not None else None)
    n = df.height
    gflop = df[ra.priors.GFLOP_PER_ITERATION] if ra.priors.GFLOP_PER_ITERATION in df.columns else df["traced_gflop"]
    has = pl.Series([x is not None for x in mem])
    return pl.DataFrame({traced.TRACED_MEM_GB: mem,
                         traced.TRACED_GFLOP_PER_ITER: gflop.zip_with(has, pl.Series([None] * n, dtype=pl.Float64)),
                         traced.TRACED_PARAMS_MILLION: [None] * n, traced.TRACED_NUM_LAYERS: [None] * n,
                         traced.TRACED_INPUT_DIM: [None] * n, traced.TRACE_STATUS: status,
                         traced.ARCH_INFERRED: inferred, traced.ARCH_MATCH_DISTANCE: distance,
                         traced.ARCH_INFERENCE: [m.reason for m in matches]}, schema=traced.TRACE_SCHEMA)


def forecast_table(ev: ra.EvalSet, scorer, matches: list[zoo.Match], grid: Grid, tensor_col: str) -> pl.DataFrame:
    """Per family and `all`: MAPE and P90 coverage of the pipeline with the name, without (today), without + inference."""
    without_rows = ev.rows.with_columns(pl.lit(None, pl.String).alias(c.ARCH))
    runs = {"with name": features.build(ev.rows, trace=ev.trace), "no name, today": features.build(without_rows, trace=None),
            "no name, inferred": features.build(without_rows, trace=inferred_trace(ev.rows, tensor_col, matches, grid))}
    preds = {}
    for label, rows in runs.items():
        scored = scorer.score(rows)
        preds[label] = (scored["p50"].to_numpy(), scored["p90"].to_numpy())
    return ra.score_table(ev, preds)


def print_forecasts(title: str, table: pl.DataFrame) -> None:
    names = list(dict.fromkeys(table["estimator"].to_list()))
    print(f"\n{title}: memory MAPE % / P90 coverage")
    print(f"  {'family':14s} {'n':>5s}" + "".join(f" {n:>20s}" for n in names))
    mape = table.pivot(on="estimator", index=[ra.FAMILY, "n"], values="MAPE %", maintain_order=True)
    cover = table.pivot(on="estimator", index=[ra.FAMILY, "n"], values="P90 cover", maintain_order=True)
    for m, p in zip(mape.iter_rows(named=True), cover.iter_rows(named=True), strict=True):
        print(f"  {m[ra.FAMILY]:14s} {m['n']:5d}" + "".join(f" {m[n]:12.1f} / {p[n]:5.0%}" for n in names))


def zoo_teaches(args: argparse.Namespace) -> None:
    """Item 3's decision: the champion trained on the measured set alone, or beside the reference set's rows
    (`reference.load`), compared (a) on the reference set, families held out in `--folds` groups (every family
    once; names removed, shapes recognised), and (b) on a held-out 30% of the measured set (R²)."""
    from gpucast.expectations.records import Champion
    from gpucast.tasks.learn import reference
    from gpucast.tasks.learn.score import Scorer
    from gpucast.tasks.learn.train import TrainOptions, metrics, split, train_target

    ref = reference.load(args.reference)
    history = measured.load()
    fit_idx, _, test_idx = split(history.height, 0)
    site_fit, site_test = history[np.concatenate([fit_idx, _])], history[test_idx]
    evset = ra.reference_set(args.reference, family_names=False)
    grid = Grid(evset.rows)
    matches = recognise(evset.rows, "built")
    families = sorted(evset.rows[ra.FAMILY].unique().to_list())
    folds = [families[i::args.folds] for i in range(args.folds)]
    models = tuple(args.models.split(","))

    def champion(rows: pl.DataFrame, folder: str) -> Scorer:
        options = TrainOptions(targets=(c.PEAK_GPU_MEM_GB,), models=models, repeats=1)
        result = train_target(rows, c.PEAK_GPU_MEM_GB, options, Path(folder), threads=2, progress=lambda _: None)
        return Scorer(Champion(c.PEAK_GPU_MEM_GB, result.champion, "zoo-teaches", folder), threads=2)

    out = {}
    for label, with_ref in (("site history alone", False), ("site history + reference set", True)):
        p50 = np.full(evset.rows.height, np.nan)
        p90 = np.full(evset.rows.height, np.nan)
        for fold in folds:
            held = evset.rows[ra.FAMILY].is_in(fold).to_numpy()
            rows = site_fit
            if with_ref:
                rows = pl.concat([site_fit, ref.rows.filter(~pl.col(ra.FAMILY).is_in(fold))], how="diagonal_relaxed")
            with tempfile.TemporaryDirectory() as folder:
                scorer = champion(rows, folder)
                part = evset.rows.filter(pl.Series(held)).with_columns(pl.lit(None, pl.String).alias(c.ARCH))
                kept = [m for m, h in zip(matches, held, strict=True) if h]
                trace = inferred_trace(evset.rows.filter(pl.Series(held)), "tensor_peak_gb", kept, grid)
                scored = scorer.score(features.build(part, trace=trace))
                p50[held], p90[held] = scored["p50"].to_numpy(), scored["p90"].to_numpy()
                print(f"  {label}: families {', '.join(fold)} held out: champion {scorer.champion.model}", flush=True)
        with tempfile.TemporaryDirectory() as folder:
            rows = site_fit if not with_ref else pl.concat([site_fit, ref.rows], how="diagonal_relaxed")
            scorer = champion(rows, folder)
            site = scorer.score(site_test)
            r2 = metrics(site_test[c.PEAK_GPU_MEM_GB].to_numpy(), site["p50"].to_numpy())["r2"]
        out[label] = (p50, p90, r2)
        print(f"  {label}: measured set, held-out 30%: R² {r2:.3f} ({scorer.champion.model})", flush=True)
    table = ra.score_table(evset, {k: (v[0], v[1]) for k, v in out.items()})
    print_forecasts(f"reference set ({evset.rows.height} jobs), families held out in {args.folds} groups, names removed "
                    "and shapes recognised", table)


def print_traced_errors(ev: ra.EvalSet, tensor_col: str, matches: list[zoo.Match], grid: Grid, logging: str) -> None:
    """Memory MAPE and P90 coverage (x 1.20) of the traced prior a recognised job gets (the nightly's forecast for
    it while the champion learned from fewer than 20 traced jobs), matched right and wrongly, and the worst families."""
    mem = inferred_trace(ev.rows, tensor_col, matches, grid)[traced.TRACED_MEM_GB].to_numpy().astype(float)
    kinds = np.array([outcome(a, m) for a, m in zip(ev.rows[c.ARCH].to_list(), matches, strict=True)])
    err = np.abs(mem / ev.truth - 1) * 100
    cover = ev.truth <= mem * traced.REPORTED_INTERVAL
    cells = []
    for k in ("right", "wrong"):
        sel = (kinds == k) & ~np.isnan(mem)
        if sel.any():
            cells.append(f"{k}: {sel.sum()} jobs, MAPE {err[sel].mean():.1f}%, P90 covers {cover[sel].mean():.0%}")
    fam = ev.rows[ra.FAMILY].to_numpy()
    per = {f: err[(fam == f) & ~np.isnan(mem)].mean() for f in sorted(set(fam)) if ((fam == f) & ~np.isnan(mem)).any()}
    worst = ", ".join(f"{f} {v:.1f}%" for f, v in sorted(per.items(), key=lambda kv: -kv[1])[:3])
    print(f"  {logging}: traced prior of the recognised architecture: {'; '.join(cells)}; worst families {worst}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(ra.DEFAULT_MODELS))
    ap.add_argument("--reference", type=Path, default=ra.REFERENCE)
    ap.add_argument("--zoo-teaches", action="store_true", help="item 3: train with / without the reference set")
    ap.add_argument("--no-champion", action="store_true", help="recognition and the traced prior only (no training)")
    ap.add_argument("--folds", type=int, default=4, help="--zoo-teaches: groups of held-out families")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.zoo_teaches:
        zoo_teaches(args)
        print(f"\n{time.perf_counter() - t0:.0f} s")
        return
    reference = ra.reference_set(args.reference, family_names=False)
    gpu = ra.gpu_set(ra.GPU_RUNS, reference.rows)
    grid = Grid(reference.rows)
    history = measured.load()
    print(f"zoo: {len(zoo.ARCHITECTURES)} architectures; tolerances: parameters {zoo.PARAMS_TOLERANCE}, depth "
          f"{zoo.DEPTH_TOLERANCE} (log), tie {zoo.EQUAL_DISTANCE}")
    matches = {}
    for ev, label, tensor_col in ((reference, "reference set", "tensor_peak_gb"), (gpu, "H100 runs", "traced_peak_gb")):
        print(f"\nRecognition, names removed, {label} ({ev.rows.height} jobs, {ev.rows[c.ARCH].n_unique()} architectures):")
        for logging in ("built", "published"):
            matches[(label, logging)] = recognise(ev.rows, logging)
            print_rates(f"{logging} parameter counts", ev.rows, matches[(label, logging)])
            print_traced_errors(ev, tensor_col, matches[(label, logging)], grid, logging)
    site = recognise(history.with_columns(pl.lit("site").alias(c.ARCH)), "built")
    matched = sum(m.arch is not None for m in site)
    print(f"\nMeasured set (the site's own networks, none of them the zoo's): {matched}/{history.height} jobs "
          f"({matched / history.height:.1%}) matched a zoo entry, {sum(m.reason.startswith('shape matches') for m in site)} tied")
    if args.no_champion:
        print(f"\n{time.perf_counter() - t0:.0f} s")
        return
    with tempfile.TemporaryDirectory() as folder:
        scorer = ra.train_champion(history, tuple(args.models.split(",")), 1, Path(folder))
        print(f"\nmemory champion trained on the measured set: {scorer.champion.model}")
        for ev, label, tensor_col in ((reference, "reference set", "tensor_peak_gb"), (gpu, "H100 runs", "traced_peak_gb")):
            for logging in ("built", "published"):
                table = forecast_table(ev, scorer, matches[(label, logging)], grid, tensor_col)
                print_forecasts(f"{label}, {logging} parameter counts", table)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
