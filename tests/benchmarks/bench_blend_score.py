"""What a blend champion costs to score, beside the single champion it blends (issue 50 item 2).

On the shipped measured set (tests/data/measured_jobs.csv, memory), the product's refit of two champions, saved with
`compile_trees` as the night saves them and loaded back as `gpucast score` loads them:
  * `single`: extra_trees alone (the measured set's champion, docs/models.md);
  * `blend`: `--weights` x (extra_trees, lightgbm) (the blend the measured set's three folds fitted: 0.809 x
    extra_trees + 0.207 x lightgbm), each member compiled as it would be alone (`blend.compile_members`).
Each is timed `--runs` times, alternating, on `--rows` jobs (the measured rows repeated), on one thread: the predict
alone through the loaded estimator (the compiled libraries where built, and the members' native models), and the
`Scorer` end to end (features already built; encode, predict, intervals, out-of-distribution flags). Printed: median
seconds, jobs per minute, and the blend's cost as a multiple of the single champion's.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_blend_score.py [--rows 500000] [--runs 3] [--work DIR]

`--work DIR` keeps the saved champions there and reuses them when a later run names the same folder (compiling the
two champions took 5-11 minutes here on a loaded machine; the timing runs do not depend on it).
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
from gpucast.records.outcomes import Champion, TargetResult
from gpucast.tasks.learn import blend, train
from gpucast.tasks.learn.models import registry, store
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.score import Scorer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make `tests` importable
from tests.measured import load  # noqa: E402

TARGET = c.PEAK_GPU_MEM_GB


def champion_folder(rows: pl.DataFrame, name: str, mix: blend.Candidate | None, folder: Path) -> tuple[Path, float]:
    """Refit champion `name` (the blend of `mix` when given) on `rows` as the night does, save and compile it in
    `folder`; (the folder, compile seconds). A folder already holding a saved champion is reused."""
    if (folder / "metadata.json").exists():
        print(f"  {name}: reusing {folder}", flush=True)
        return folder, 0.0
    options = TrainOptions(models=("extra_trees", "lightgbm"), repeats=1, seed=0, compile_trees=True)
    build = registry.Build(seed=0, threads=1, progress=lambda _: None)
    finished = train._refit(rows, TARGET, options, name, TargetResult(target=TARGET, rows=rows.height), build, mix)
    train.save_champion(folder, TARGET, options, finished, threads=1)
    info = finished.result.compiled
    print(f"  {name}: compiled {info.used if info else None} ({info.reason if info and info.reason else 'ok'}), "
          f"{info.compile_seconds if info else 0} s", flush=True)
    return folder, float(info.compile_seconds or 0) if info else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--weights", default="0.809,0.207", help="the blend's weights of extra_trees, lightgbm")
    ap.add_argument("--work", type=Path, default=None, help="where the saved champions go (reused when there)")
    args = ap.parse_args()
    rows = train.labelled(load(), TARGET, TrainOptions())
    w = tuple(float(v) for v in args.weights.split(","))
    mix = blend.Candidate(("extra_trees", "lightgbm"), w, {(0, 0): 1.0}, None)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-blend-score-"))
    folders = {"single": champion_folder(rows, "extra_trees", None, work / "single")[0],
               "blend": champion_folder(rows, blend.NAME, mix, work / "blend")[0]}
    names = {"single": "extra_trees", "blend": blend.NAME}
    pending = pl.concat([rows] * (args.rows // rows.height + 1)).head(args.rows)
    loaded = {k: store.load_model(f, names[k], threads=1) for k, f in folders.items()}
    scorers = {k: Scorer(Champion(TARGET, names[k], "bench", str(f)), threads=1) for k, f in folders.items()}
    X = loaded["single"].encoder.transform(pending)
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.runs):
        for k in folders:
            t0 = time.perf_counter()
            loaded[k].estimator.predict(X)
            times.setdefault((k, "predict"), []).append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            scorers[k].score(pending)
            times.setdefault((k, "Scorer"), []).append(time.perf_counter() - t0)
    print(f"{args.rows:,} jobs, {args.runs} runs each, one thread; compiled: single {loaded['single'].compiled}, "
          f"blend {loaded['blend'].compiled}")
    for part in ("predict", "Scorer"):
        s, b = (float(np.median(times[(k, part)])) for k in ("single", "blend"))
        print(f"  {part:8s} single {s:7.2f} s ({args.rows / s * 60:13,.0f} jobs/min)   blend {b:7.2f} s "
              f"({args.rows / b * 60:13,.0f} jobs/min)   blend / single {b / s:5.2f}x")


if __name__ == "__main__":
    main()
