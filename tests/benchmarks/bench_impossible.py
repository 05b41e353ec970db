"""Never publish the impossible (issue 37, item 4): the margins, measured, and what the check changes.

`--margins`: how far above the largest value of its kind (`model_type`) in the training jobs a held-out job of
that kind went: 30 seeded 70/30 splits of the measured set (840 real PyTorch networks: memory, FLOPs per step)
and of 6,000 simulated jobs (the three targets); the largest ratio is what `ood.CEILING_MARGIN` must exceed.

Otherwise: a memory champion trained on the measured set as the nightly trains it (`--models`), then
* the issue's job: a VGG16 logged as a `CNN` with its shape only (138.4M parameters, 16 layers, 224 px, batch 128;
  23.8 GB measured on a GPU), in FP32 / SGD and in FP16 / AdamW;
* the reference set and the H100 runs with `arch` removed (`tests/benchmarks/real_archs.py`);
* false alarms: a champion trained on 70% of the measured set scoring the other 30% (real jobs of seen kinds);
each scored with the check (`Scorer`) and without it: P50 above 1.5x the largest GPU of the catalogue, the
largest P50, MAPE, how many forecasts the check replaced.

    .venv/bin/python tests/benchmarks/bench_impossible.py --margins
    .venv/bin/python tests/benchmarks/bench_impossible.py [--models lightgbm,extra_trees] [--preset tuned --epochs 60]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records.outcomes import Champion
from gpucast.tasks.learn import features, ood, priors
from gpucast.tasks.learn.champion import metrics
from gpucast.tasks.learn.features import build, labelled_rows
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.score import Scorer
from gpucast.tasks.simulate import simulate_jobs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: make `tests` importable
from tests import measured  # noqa: E402
from tests.benchmarks.real_archs import GPU_RUNS, REFERENCE, gpu_set, reference_set  # noqa: E402
from tests.train_steps import train_target  # noqa: E402

MEM = c.PEAK_GPU_MEM_GB


def margins() -> None:
    sim = build(simulate_jobs(6000, np.random.default_rng(1), date(2026, 11, 1), 0.0))
    for name, df, targets in (("measured set", measured.load(), (MEM, priors.GFLOP_PER_ITERATION)), ("simulated", sim, c.TARGETS)):
        for t in targets:
            rows = labelled_rows(df, t)
            y, kind = rows[t].to_numpy(), rows[c.MODEL_TYPE].to_numpy().astype(str)
            worst = []
            for seed in range(30):
                idx = np.random.default_rng(seed).permutation(len(y))
                fit, held = idx[: int(len(y) * 0.7)], idx[int(len(y) * 0.7):]
                most = {k: y[fit][kind[fit] == k].max() for k in np.unique(kind[fit])}
                worst.append(max(y[i] / most[kind[i]] for i in held if kind[i] in most))
            margin = ood.CEILING_MARGIN.get(t if t != priors.GFLOP_PER_ITERATION else c.GPU_DEMAND_GFLOPS)
            print(f"{name:13s} {t:22s} {len(y):5d} jobs: largest held-out / its kind's training max over 30 splits "
                  f"{max(worst):.2f} (median split {np.median(worst):.2f}); margin {margin}")


def train_champion(history: pl.DataFrame, args: argparse.Namespace, folder: Path) -> Scorer:
    """The memory champion trained as the nightly trains it (`train_target`, the default feature set)."""
    options = TrainOptions(targets=(MEM,), models=tuple(args.models.split(",")), repeats=args.repeats, preset=args.preset,
                           epochs=args.epochs, nn_max_minutes=0)
    result = train_target(history, MEM, options, folder, threads=2, progress=lambda _: None)
    return Scorer(Champion(MEM, result.champion, "bench", str(folder)), threads=2)


def vgg16_as_cnn(precision: str, optimizer: str) -> pl.DataFrame:
    job = pl.DataFrame({c.JOB_ID: [f"vgg16-{precision}-{optimizer}"], c.MODEL_TYPE: ["CNN"], c.PARAMS_MILLION: [138.4],
                        c.BATCH_SIZE: [128], c.INPUT_DIM: [224], c.NUM_LAYERS: [16], c.ITERATIONS: [1000.0],
                        c.PRECISION: [precision], c.OPTIMIZER: [optimizer], c.LEARNING_RATE: [0.01],
                        c.REGULARIZATION: [False], c.DATA_AUGMENTATION: [False], c.STATUS: ["PENDING"]})
    for name in c.HARDWARE:
        job = job.with_columns(pl.lit(None, dtype=pl.String if name == c.GPU_TYPE else pl.Float64).alias(name))
    return features.build(job)


def both(scorer: Scorer, rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(scored without the check, with it)."""
    guard = scorer._never_impossible
    scorer._never_impossible = lambda *a: None
    try:
        off = scorer.score(rows)
    finally:
        scorer._never_impossible = guard
    return off, scorer.score(rows)


def line(name: str, truth: np.ndarray, off: pl.DataFrame, on: pl.DataFrame) -> None:
    limit = 1.5 * ood.largest_gpu_gb()[1]
    replaced = int(on["ood_reason"].str.contains("impossible").fill_null(False).sum())
    for label, s in (("without the check", off), ("with the check", on)):
        p50 = s["p50"].to_numpy()
        print(f"  {name:34s} {label:18s} P50 > {limit:g} GB: {int((p50 > limit).sum()):3d}; largest P50 {p50.max():8.1f} GB; "
              f"MAPE {metrics(truth, p50)['mape']:7.1f}%; P90 covers {np.mean(truth <= s['p90'].to_numpy()):.0%}"
              + (f"; replaced {replaced} of {len(p50)}" if s is on else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--margins", action="store_true")
    ap.add_argument("--models", default="lightgbm,extra_trees")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--preset", default="tuned", help="the network's, when --models names it")
    ap.add_argument("--epochs", type=int, default=60, help="caps the network's epochs (a CPU run)")
    args = ap.parse_args()
    if args.margins:
        margins()
        return
    t0 = time.perf_counter()
    history = measured.load()
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as folder2:
        scorer = train_champion(history, args, Path(folder))
        print(f"memory champion on the measured set: {scorer.champion.model}; largest GPU of the catalogue "
              f"{ood.largest_gpu_gb()}; CNN ceiling {ood.CEILING_MARGIN[MEM]} x "
              f"{history.filter(pl.col(c.MODEL_TYPE) == 'CNN')[MEM].max():.1f} GB")
        for precision, optimizer in (("FP32", "SGD"), ("FP16", "AdamW")):
            job = vgg16_as_cnn(precision, optimizer)
            off, on = both(scorer, job)
            print(f"  VGG16 as CNN, {precision}/{optimizer} (23.8 GB measured, FP32/SGD): P50 {off['p50'][0]:.1f} GB -> "
                  f"{on['p50'][0]:.1f} GB, ood {on['ood'][0]}, {on['ood_reason'][0]}")
        reference = reference_set(REFERENCE, False)
        for ev in (reference, gpu_set(GPU_RUNS, reference.rows)):
            rows = features.build(ev.rows.with_columns(pl.lit(None, pl.String).alias(c.ARCH)), trace=None)
            line(ev.name.split(" (")[0] + ", no arch", ev.truth, *both(scorer, rows))
        idx = np.random.default_rng(0).permutation(history.height)
        fit, held = history[np.sort(idx[: int(0.7 * history.height)])], history[np.sort(idx[int(0.7 * history.height):])]
        scorer70 = train_champion(fit, args, Path(folder2))
        line("measured set, 30% held out", held[MEM].to_numpy(), *both(scorer70, held))
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
