"""Benchmark: a 10,000,000-row history ingested, then 1,000,000 pending jobs scored, with peak RSS.

    python tests/benchmarks/bench_scale.py [--days 10] [--rows-per-day 1000000] [--pending 1000000]

Each step is a fresh process that reports its own peak RSS (VmHWM; Prefect's temporary API server
is a separate process and not counted):
1. simulated history (JSONL, 1% dirty, one file per day) through the real `ingest-job-logs` flow;
2. 1M pending jobs (one Parquet file) through the same flow, into the 10M-row warehouse;
3. `--models` trained on the 500,000 most recent labelled jobs (the default cap): reported, not
   bounded (a model's memory is its own);
4. the real `score-pending` flow over the 1M pending jobs.
Documented bound (issue 5) for steps 1, 2 and 4: 2 GiB per process, whatever the history's size:
files are read in 8 MB blocks and 100k-row chunks, the warehouse merge takes 500k staged rows at a
time, DuckDB is capped at GPUCAST_DUCKDB_MEMORY (1 GB) and spills to disk, scoring reads only the
pending jobs and predicts in batches of 250,000.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import PEAK_RSS, child, work_folder  # noqa: E402

BOUND_MB = 2048  # the documented bound per process (README "Scale"), in MiB like VmHWM


def vs_bound(rss_mb: float) -> str:
    return f"peak RSS {rss_mb:,.0f} MB = {rss_mb / BOUND_MB:.2f}x the {BOUND_MB:,} MB bound"

INGEST = PEAK_RSS + """
import json, sys, time
from gpucast.flows.environment import configure; configure()  # noqa: E702
from dataclasses import asdict
from gpucast.flows.ingest import ingest_job_logs
t = time.perf_counter()
s = ingest_job_logs(paths=[sys.argv[1]], publish=False)
print(json.dumps({"seconds": time.perf_counter() - t, "rss_mb": peak_rss_mb(), **asdict(s)}))
"""

TRAIN = PEAK_RSS + """
import json, sys, time
from gpucast.flows.environment import configure; configure()  # noqa: E702
from gpucast.flows.train import train_models
from gpucast.tasks.learn.options import TrainOptions
t = time.perf_counter()
train_models(TrainOptions(models=sys.argv[1].split(","), repeats=1), publish=False)
print(json.dumps({"train_s": time.perf_counter() - t, "rss_mb": peak_rss_mb()}))
"""

SCORE = PEAK_RSS + """
import json, sys, time
from gpucast.flows.environment import configure; configure()  # noqa: E702
from dataclasses import asdict
from gpucast.flows.score import score_pending
t = time.perf_counter()
out = score_pending(publish=False)
print(json.dumps({"score_s": time.perf_counter() - t, "rss_mb": peak_rss_mb(), **asdict(out)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=10)
    ap.add_argument("--rows-per-day", type=int, default=1_000_000)
    ap.add_argument("--pending", type=int, default=1_000_000)
    ap.add_argument("--models", default="lightgbm,linear_fs")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()

    import polars as pl

    from gpucast.expectations import contract as c
    from gpucast.tasks.simulate import SimConfig, write_logs

    work = work_folder(args.workdir, "gpucast-bench-scale-")
    env = {**os.environ, "GPUCAST_HOME": str(work / "home")}
    shutil.rmtree(work / "home", ignore_errors=True)  # a fresh warehouse every run
    history = work / "history"
    t = time.perf_counter()
    if len(list(history.glob("*.jsonl"))) != args.days:  # the simulation is seeded: a --workdir reuses it
        write_logs(history, SimConfig(days=args.days, jobs_per_day=args.rows_per_day, pending_fraction=0.0,
                                      dirty_fraction=0.01, update_fraction=0.0, seed=21))
    size = sum(p.stat().st_size for p in history.iterdir()) / 1e9
    print(f"history: {args.days * args.rows_per_day:,} simulated rows ({size:.1f} GB JSONL), "
          f"{time.perf_counter() - t:.0f} s", flush=True)

    r, wall = child(INGEST, str(work / "history"), env=env)
    print(f"ingest: {r['rows_read']:,} rows read = {r['rows_loaded']:,} loaded + {r['rows_rejected']:,} rejected + "
          f"{r['rows_duplicate']:,} duplicate in {r['seconds']:.0f} s ({r['rows_read'] / r['seconds']:,.0f} rows/s), "
          f"{vs_bound(r['rss_mb'])} (process wall {wall:.0f} s)", flush=True)

    pending_dir = work / "pending"
    write_logs(pending_dir, SimConfig(days=1, jobs_per_day=args.pending, pending_fraction=1.0, update_fraction=0.0,
                                      seed=22, start=SimConfig().start.replace(day=28), fmt="parquet"))
    for p in pending_dir.iterdir():  # every job PENDING, ids apart from the history's
        pl.read_parquet(p).with_columns(pl.lit("PENDING").alias(c.STATUS), ("p-" + pl.col(c.JOB_ID)).alias(c.JOB_ID)) \
            .write_parquet(p)
    r, wall = child(INGEST, str(pending_dir), env=env)
    print(f"ingest of {args.pending:,} pending jobs into the {args.days * args.rows_per_day:,}-row warehouse: "
          f"{r['rows_loaded']:,} loaded in {r['seconds']:.0f} s, {vs_bound(r['rss_mb'])}", flush=True)
    r, wall = child(TRAIN, args.models, env=env)
    print(f"train (not under the bound: it depends on the models): {args.models} on the most recent labelled jobs "
          f"(cap 500,000) in {r['train_s']:.0f} s, peak RSS {r['rss_mb']:,.0f} MB", flush=True)
    r, wall = child(SCORE, env=env)
    print(f"score: {r['pending_jobs']:,} pending jobs, {r['forecasts']:,} forecasts in {r['score_s']:.1f} s "
          f"({r['pending_jobs'] / r['score_s'] * 60:,.0f} jobs/min), {vs_bound(r['rss_mb'])}", flush=True)
    db = work / "home" / "warehouse.duckdb"
    kept = "kept" if args.workdir else "removed at exit; pass --workdir to keep it"
    print(f"warehouse file {db.stat().st_size / 1e9:.2f} GB; work folder {work} ({kept})")


if __name__ == "__main__":
    main()
