"""Benchmark (issue 37): recognising the architecture from the logged shape, and what it does to the forecast.

    .venv/bin/python tests/benchmarks/bench_recognise.py [--models lightgbm,extra_trees,xgboost,prior]

Names removed (`arch` null), every job of the reference set (`tasks/learn/reference_archs.csv`) and of the real
H100 runs (`tests/data/gpu_archs_h100.csv`, the unseen test) goes through `zoo_match.match_shape` with its logged
model type, parameter count, depth and input size, in two loggings: the built network's parameter count, and
the published one (`zoo_match.PUBLISHED_PARAMS_MILLION`, else the built count to 3 significant digits).

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
from gpucast.tasks.learn import features, priors, traced, zoo, zoo_match

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "data"))
import make_reference_archs as refgen  # noqa: E402

from tests import measured  # noqa: E402
from tests.benchmarks import real_archs as ra  # noqa: E402
from tests.train_steps import train_target  # noqa: E402


def published(arch: str, built_million: float) -> float:
    return zoo_match.PUBLISHED_PARAMS_MILLION.get(arch, float(f"{built_million:.3g}"))


def recognise(df: pl.DataFrame, logging: str) -> list[zoo_match.Match]:
    """`zoo_match.match_shape` of every row, names removed; `logging`: "built" or "published" parameter counts."""
    memo: dict[tuple, zoo_match.Match] = {}
    out = []
    for arch, model_type, params, layers, dim in df.select(c.ARCH, c.MODEL_TYPE, c.PARAMS_MILLION, c.NUM_LAYERS,
                                                           c.INPUT_DIM).iter_rows():
        p = params if logging == "built" else published(arch, params)
        key = (model_type, p, layers, dim)
        if key not in memo:
            memo[key] = zoo_match.match_shape(model_type, p, layers, dim)
        out.append(memo[key])
    return out


def outcome(arch: str, m: zoo_match.Match) -> str:
    if m.arch is None:
        return "tie" if m.reason.startswith("shape matches") else "none"
    return "right" if m.arch == arch else "wrong"


def print_rates(name: str, df: pl.DataFrame, matches: list[zoo_match.Match]) -> None:
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
        state = refgen.FP32_BYTES * zoo_match.shapes()[arch].params * refgen.STATE_TENSORS.get(optimizer or "Adam", 2) / 1e9
        return fit[0] + state + fit[1] * batch * scale


def inferred_trace(df: pl.DataFrame, tensor_col: str, matches: list[zoo_match.Match], grid: Grid) -> pl.DataFrame:
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


def forecast_table(ev: ra.EvalSet, scorer, matches: list[zoo_match.Match], grid: Grid, tensor_col: str) -> pl.DataFrame:
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
    """Item 3's decision: the memory champion trained on the measured set alone (weight 0), or beside a seeded
    share w of the reference set's rows (`reference.load`, truth on the GPU's convention unless `--set-truth`),
    each w in `--weights`, compared by leaving families out (every family held out once, in `--folds` groups):
    (a) the reference set's held-out families, names removed, recognised from the shape (traced) and not
    (today's path: the analytic prior), and the real H100 runs of those families; (b) the measured set's
    model types held out (the site's own families) and its held-out 30% (R², the goal: not below 0.91)."""
    from gpucast.records.outcomes import Champion
    from gpucast.tasks.learn import reference
    from gpucast.tasks.learn.champion import metrics
    from gpucast.tasks.learn.folds import split
    from gpucast.tasks.learn.options import TrainOptions
    from gpucast.tasks.learn.score import Scorer

    refs = {traced_prior: reference.load(args.reference, gpu_convention=not args.set_truth, traced_prior=traced_prior)
            for traced_prior in (True, False)}
    if refs[True].rows is None:
        raise SystemExit(refs[True].warning)
    history = measured.load()
    fit_idx, val_idx, test_idx = split(history.height, 0)
    site_fit, site_test = history[np.concatenate([fit_idx, val_idx])], history[test_idx]
    evset = ra.reference_set(args.reference, family_names=False)
    if not args.set_truth:
        evset = ra.EvalSet(evset.name.replace("peak_gpu_mem_gb, traced + a CUDA-context draw", "the GPU's convention"),
                           evset.rows, evset.trace, reference.on_gpu_convention(evset.rows)[c.PEAK_GPU_MEM_GB].to_numpy())
    gpu = ra.gpu_set(ra.GPU_RUNS, evset.rows)
    grid = Grid(evset.rows)
    matches = recognise(evset.rows, "built")
    families = sorted(evset.rows[ra.FAMILY].unique().to_list())
    folds = [families[i::args.folds] for i in range(args.folds)]
    kinds = sorted(history[c.MODEL_TYPE].unique().to_list())
    kind_folds = [kinds[i::args.folds] for i in range(args.folds) if kinds[i::args.folds]]
    models = tuple(args.models.split(","))
    # "0.3": the reference rows learn as traced jobs (their trace the prior); "0.3u": untraced (the analytic prior)
    weights = [(float(w.rstrip("u")), not w.endswith("u") and not args.untraced) for w in args.weights.split(",")]

    def champion(rows: pl.DataFrame, folder: str) -> Scorer:
        options = TrainOptions(targets=(c.PEAK_GPU_MEM_GB,), models=models, repeats=1)
        result = train_target(rows, c.PEAK_GPU_MEM_GB, options, Path(folder), threads=2, progress=lambda _: None)
        return Scorer(Champion(c.PEAK_GPU_MEM_GB, result.champion, "zoo-teaches", folder), threads=2)

    def beside(site: pl.DataFrame, w: float, keep: pl.Expr | None = None) -> pl.DataFrame:
        if w <= 0:
            return site
        rows = refs[with_trace].rows if keep is None else refs[with_trace].rows.filter(keep)
        rows = rows.sample(fraction=w, seed=0) if w < 1 else rows
        return pl.concat([site, rows], how="diagonal_relaxed")

    def nan(n: int) -> list[np.ndarray]:
        return [np.full(n, np.nan) for _ in range(3)]  # p50, p90, ood

    out: dict[str, dict] = {}
    for w, with_trace in weights:
        label = "site history alone" if w <= 0 else f"+ reference{'' if with_trace else ' untraced'}, w {w:g}"
        t0 = time.perf_counter()
        rec, unrec, h100, site_kinds = nan(evset.rows.height), nan(evset.rows.height), nan(gpu.rows.height), nan(history.height)
        for fold in folds:
            held = evset.rows[ra.FAMILY].is_in(fold).to_numpy()
            held_gpu = gpu.rows[ra.FAMILY].is_in(fold).to_numpy()
            with tempfile.TemporaryDirectory() as folder:
                scorer = champion(beside(site_fit, w, ~pl.col(ra.FAMILY).is_in(fold)), folder)
                part = evset.rows.filter(pl.Series(held)).with_columns(pl.lit(None, pl.String).alias(c.ARCH))
                kept = [m for m, h in zip(matches, held, strict=True) if h]
                trace = inferred_trace(evset.rows.filter(pl.Series(held)), "tensor_peak_gb", kept, grid)
                for store, rows in ((rec, features.build(part, trace=trace)), (unrec, features.build(part, trace=None))):
                    scored = scorer.score(rows)
                    store[0][held], store[1][held], store[2][held] = (scored["p50"].to_numpy(), scored["p90"].to_numpy(),
                                                                     scored["ood"].to_numpy().astype(float))
                if held_gpu.any():
                    g = gpu.rows.filter(pl.Series(held_gpu)).with_columns(pl.lit(None, pl.String).alias(c.ARCH))
                    gm = recognise(gpu.rows.filter(pl.Series(held_gpu)), "built")
                    gt = inferred_trace(gpu.rows.filter(pl.Series(held_gpu)), "traced_peak_gb", gm, grid)
                    scored = scorer.score(features.build(g, trace=gt))
                    h100[0][held_gpu], h100[1][held_gpu], h100[2][held_gpu] = (scored["p50"].to_numpy(), scored["p90"].to_numpy(),
                                                                               scored["ood"].to_numpy().astype(float))
        for fold in kind_folds:
            held = history[c.MODEL_TYPE].is_in(fold).to_numpy()
            with tempfile.TemporaryDirectory() as folder:
                scorer = champion(beside(history.filter(~pl.Series(held)), w), folder)
                scored = scorer.score(history.filter(pl.Series(held)))
                site_kinds[0][held], site_kinds[1][held], site_kinds[2][held] = (
                    scored["p50"].to_numpy(), scored["p90"].to_numpy(), scored["ood"].to_numpy().astype(float))
        with tempfile.TemporaryDirectory() as folder:
            scorer = champion(beside(site_fit, w), folder)
            site = scorer.score(site_test)
            held_out = metrics(site_test[c.PEAK_GPU_MEM_GB].to_numpy(), site["p50"].to_numpy())
        out[label] = {"rec": rec, "unrec": unrec, "h100": h100, "kinds": site_kinds, "r2": held_out["r2"],
                      "mape": held_out["mape"], "champion": scorer.champion.model}
        print(f"  {label}: measured set, held-out 30%: R² {held_out['r2']:.3f}, MAPE {held_out['mape']:.1f}% "
              f"({scorer.champion.model}); {time.perf_counter() - t0:.0f} s", flush=True)

    truth = history[c.PEAK_GPU_MEM_GB].to_numpy()
    print(f"\nSummary: memory MAPE % / P90 cover / share flagged out of distribution (families held out, {args.folds} groups)")
    print(f"  {'':28s} {'ref, recognised':>22s} {'ref, not recognised':>22s} {'H100, recognised':>22s} "
          f"{'measured, kinds out':>26s} {'measured 30%: R², MAPE':>24s}")
    for label, o in out.items():
        cells = []
        for key, y in (("rec", evset.truth), ("unrec", evset.truth), ("h100", gpu.truth), ("kinds", truth)):
            p50, p90, ood = o[key]
            m = metrics(y, p50)
            extra = f" R² {m['r2']:.2f}" if key == "kinds" else ""
            cells.append(f"{m['mape']:6.1f} / {np.mean(y <= p90):4.0%} / {np.nanmean(ood):4.0%}{extra}")
        print(f"  {label:28s} " + " ".join(f"{x:>22s}" for x in cells) + f" {o['r2']:10.3f}, {o['mape']:5.1f}%")
    for key, ev, title in (("rec", evset, "reference set, names removed, recognised from the shape"),
                           ("unrec", evset, "reference set, names removed, not recognised (the analytic prior's path)"),
                           ("h100", gpu, "H100 runs, names removed, recognised")):
        table = ra.score_table(ev, {k: (v[key][0], v[key][1]) for k, v in out.items()})
        print_forecasts(f"{title} ({ev.rows.height} jobs), families held out in {args.folds} groups", table)
    kinds_ev = ra.EvalSet("measured set", history.with_columns(pl.col(c.MODEL_TYPE).alias(ra.FAMILY)), None, truth)
    table = ra.score_table(kinds_ev, {k: (v["kinds"][0], v["kinds"][1]) for k, v in out.items()})
    print_forecasts(f"measured set ({history.height} jobs), model types held out in {len(kind_folds)} groups", table)


def print_traced_errors(ev: ra.EvalSet, tensor_col: str, matches: list[zoo_match.Match], grid: Grid, logging: str) -> None:
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
    ap.add_argument("--weights", default="0,0.1,0.3,1", help="--zoo-teaches: shares of the reference set's rows (0: none)")
    ap.add_argument("--untraced", action="store_true", help="--zoo-teaches: the reference rows train on the analytic prior")
    ap.add_argument("--set-truth", action="store_true", help="--zoo-teaches: keep the set's own truth (no allocator factor)")
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
    print(f"zoo: {len(zoo.ARCHITECTURES)} architectures; tolerances: parameters {zoo_match.PARAMS_TOLERANCE}, depth "
          f"{zoo_match.DEPTH_TOLERANCE} (log), tie {zoo_match.EQUAL_DISTANCE}")
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
