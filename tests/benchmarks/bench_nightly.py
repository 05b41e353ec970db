"""Benchmark: the nightly at 100k labelled history + 10k pending, in-process vs on a local Dask
cluster, under the night budget; and the speed-up of 2 Dask workers over 1 on the fan-out.

    python tests/benchmarks/bench_nightly.py [--jobs-per-day 11000] [--days 10] [--runners local,dask]
        [--budget-minutes 45] [--repeats 3] [--epochs N] [--skip-nightly] [--skip-scaling]

Part 1, per runner (`GPUCAST_TRAIN_RUNNER`): a fresh data directory, the simulated logs through the
real `nightly` flow (ingest, quality gate, backtest, features, train, score, publish) with the
default training options (preset paper, 3 repeats, every model) unless flags say otherwise; it
prints each step's wall seconds, the fits finished and skipped, and whether forecasts were published.
Goal (issue "The night at any scale"): the default nightly ends within 60 minutes here.

Part 2: the same train run's fan-out (`fit-models`: every fit, from the first submitted to the last
finished) on a local Dask cluster of 1 worker, then of 2 (one thread each; GPUCAST_DASK_WORKERS),
with four tree ensembles (the network's time budget would make both runs equal; the two forests
only make it longer). Speed-up =
1-worker seconds / 2-worker seconds; efficiency = speed-up / 2 (goal >= 0.8: 1.6x).
Baseline named in each ratio: the 1-worker fan-out (part 2), the 60-minute goal (part 1).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import PEAK_RSS, child, work_folder  # noqa: E402

GOAL_MINUTES = 60
SCALING_MODELS = "lightgbm,xgboost,catboost,adaboost"  # the forests make it 20+ minutes; same shape

NIGHTLY = PEAK_RSS + """
import json, sys, time
import duckdb
from gpucast.flows.environment import configure; configure()  # noqa: E702
from gpucast.flows.nightly import nightly
from gpucast.tasks.learn.options import TrainOptions
from gpucast.flows.settings import Settings
opts = json.loads(sys.argv[2])
t = time.perf_counter()
out = nightly(paths=[sys.argv[1]], options=TrainOptions(**opts))
wall = time.perf_counter() - t
s = Settings.from_env()
with duckdb.connect(str(s.published_path), read_only=True) as con:
    run = out.train.train_run_id
    fits = con.execute("SELECT count(*) FROM model_metrics WHERE train_run_id = ? AND split = 'test' AND model <> 'blend'",
                       [run]).fetchone()[0]
    skipped = con.execute("SELECT count(*) FROM skipped_fits WHERE train_run_id = ?", [run]).fetchone()[0]
    forecasts = con.execute("SELECT count(*) FROM pending_forecasts").fetchone()[0]
    champions = con.execute("SELECT target || '=' || model FROM current_champions ORDER BY 1").fetchall()
print(json.dumps({"wall": wall, "seconds": out.seconds, "fits": fits, "skipped": skipped, "forecasts": forecasts,
                  "labelled": out.features.labelled_jobs, "pending": out.features.pending,
                  "fits_on": out.train.fits_on, "fit_seconds": out.train.fit_seconds,
                  "champions": [c for (c,) in champions], "rss_mb": peak_rss_mb()}))
"""

TRAIN = PEAK_RSS + """
import json, sys, time
from gpucast.flows.environment import configure; configure()  # noqa: E702
from gpucast.flows.train import train_models
from gpucast.tasks.learn.options import TrainOptions
out = train_models(TrainOptions(models=sys.argv[1].split(","), repeats=int(sys.argv[2])), publish=False)
print(json.dumps({"fit_seconds": out.fit_seconds, "fits_on": out.fits_on, "rss_mb": peak_rss_mb()}))
"""


def env_for(home: Path, **values: str) -> dict:
    return {**os.environ, "GPUCAST_HOME": str(home), "PREFECT_HOME": str(home / "prefect"), **values}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=10)
    ap.add_argument("--jobs-per-day", type=int, default=11_000, help="about 100k labelled + 10k pending over 10 days")
    ap.add_argument("--runners", default="local,dask")
    ap.add_argument("--budget-minutes", type=float, default=None, help="default: GPUCAST_NIGHT_BUDGET_MINUTES's (30)")
    ap.add_argument("--repeats", type=int, default=None, help="default: the nightly's (3)")
    ap.add_argument("--epochs", type=int, default=None, help="cap the network's epochs (default: the preset's)")
    ap.add_argument("--scaling-repeats", type=int, default=1)
    ap.add_argument("--skip-nightly", action="store_true")
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument("--workdir", default=None, help="keep the logs and data directories here (reused when present)")
    args = ap.parse_args()

    from gpucast.tasks.simulate import SimConfig, write_logs

    work = work_folder(args.workdir, "gpucast-bench-nightly-")
    logs = work / "logs"
    if not logs.exists():
        write_logs(logs, SimConfig(days=args.days, jobs_per_day=args.jobs_per_day, pending_fraction=0.1,
                                   dirty_fraction=0.01, seed=11))
    opts = {k: v for k, v in (("repeats", args.repeats), ("epochs", args.epochs)) if v is not None}
    extra = {"GPUCAST_NIGHT_BUDGET_MINUTES": str(args.budget_minutes)} if args.budget_minutes is not None else {}
    import json

    last_home = None
    if not args.skip_nightly:
        print(f"nightly: {args.days} days x {args.jobs_per_day:,} simulated jobs, options {opts or 'default'}, "
              f"budget {args.budget_minutes if args.budget_minutes is not None else 'default'} min")
        for runner in args.runners.split(","):
            home = work / f"home-{runner}"
            out, wall = child(NIGHTLY, str(logs), json.dumps(opts),
                              env=env_for(home, GPUCAST_TRAIN_RUNNER=runner, **extra))
            steps = ", ".join(f"{k} {v:.0f} s" for k, v in out["seconds"].items())
            print(f"  runner {runner} ({out['fits_on']}): {out['labelled']:,} labelled, {out['pending']:,} pending")
            print(f"    steps: {steps}")
            print(f"    fits: {out['fits']} finished, {out['skipped']} skipped; fan-out {out['fit_seconds']:.0f} s; "
                  f"champions {', '.join(out['champions'])}")
            print(f"    nightly {out['wall'] / 60:.1f} min (process {wall / 60:.1f} min) = "
                  f"{out['wall'] / 60 / GOAL_MINUTES:.2f}x the {GOAL_MINUTES}-minute goal; {out['forecasts']:,} "
                  f"forecasts published; peak RSS {out['rss_mb']:,.0f} MB (flow process)")
            last_home = home
    if not args.skip_scaling:
        home = last_home or work / "home-scaling"
        if last_home is None and not home.exists():
            child(NIGHTLY, str(logs), json.dumps({"models": ["linear_fs"], "repeats": 1}), env=env_for(home))
        print(f"fan-out scaling: {SCALING_MODELS} x 3 targets x {args.scaling_repeats} repeat(s), no budget")
        seconds = {}
        for workers in (1, 2):
            out, _ = child(TRAIN, SCALING_MODELS, str(args.scaling_repeats),
                           env=env_for(home, GPUCAST_TRAIN_RUNNER="dask", GPUCAST_DASK_WORKERS=str(workers),
                                       GPUCAST_NIGHT_BUDGET_MINUTES="0"))
            seconds[workers] = out["fit_seconds"]
            print(f"  {workers} worker(s): fan-out {out['fit_seconds']:.1f} s ({out['fits_on']})")
        speedup = seconds[1] / seconds[2]
        print(f"  speed-up 2 workers over 1 (baseline: 1 worker) {speedup:.2f}x = {speedup / 2:.2f} of linear "
              f"(goal >= 0.80); this machine has {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
