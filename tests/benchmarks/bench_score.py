"""Benchmark: bulk scoring of 1,000,000 pending jobs, and the nightly run end to end.

    python tests/benchmarks/bench_score.py [--pending 1000000] [--nightly-completed 100000]
                                           [--nightly-pending 10000] [--nn-epochs 3] [--skip-nightly] [--skip-scoring] [--keep]

Part 1, scoring. A warehouse with 10k completed jobs (trained on: every baseline and the
Transformer-BiGRU `paper` preset for `--nn-epochs`; the number of epochs does not change its scoring
speed) and 1M pending jobs. Figures:
  * the real `score-pending` flow: read pending jobs, 3 targets x (encode, predict, conformal
    interval, memory advice), stage, one-transaction publish into DuckDB, refresh of the planners'
    copy: jobs per minute, with the champions it used;
  * per model, `Scorer.score` alone on the 1M jobs (encode + predict + interval): jobs per minute
    for the champion and for the Transformer-BiGRU. Target: >= 1,000,000 jobs/minute for the
    champion on the 2-core machine. The named baseline is the champion itself.
Part 2, the nightly flow end to end on `--nightly-completed` completed + `--nightly-pending`
pending jobs (simulated files in the inbox): ingest, validate, features, train (all nine models,
1 repeat, network capped at `--nn-epochs`), score, publish; wall seconds per step.
Peak RSS of this process is printed at the end: the heavier part's when both run (`--skip-scoring`
gives the nightly run's own).
"""

from __future__ import annotations

import argparse
import atexit
import os
import resource
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

os.environ["GPUCAST_HOME"] = tempfile.mkdtemp(prefix="gpucast-bench-score-")
WORK_DIRS = [os.environ["GPUCAST_HOME"]]  # removed at exit (1-2 GB) unless --keep

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from gpucast.flows.environment import configure  # noqa: E402

configure()  # Prefect's defaults under this benchmark's home
from gpucast.expectations import contract as c  # noqa: E402
from gpucast.expectations.records import Champion  # noqa: E402
from gpucast.tasks.learn.models import registry  # noqa: E402
from gpucast.tasks.learn.score import Scorer  # noqa: E402
from gpucast.tasks.learn.train import TrainOptions  # noqa: E402
from gpucast.tasks.simulate import SimConfig, simulate_jobs  # noqa: E402
from gpucast.warehouse.settings import Settings  # noqa: E402


def jobs(n: int, seed: int, pending_fraction: float, status: str | None = None, day: int = 0) -> pl.DataFrame:
    """Simulated jobs of one day (ids are unique within a day)."""
    df = simulate_jobs(int(n * (1.5 if status == "COMPLETED" else 1.0)) + 100, np.random.default_rng(seed),
                       SimConfig().start + timedelta(days=day), pending_fraction=pending_fraction)
    if status:
        df = df.filter(pl.col(c.STATUS) == status)
    return df.head(n)


def part_scoring(n_pending: int, nn_epochs: int) -> None:
    from gpucast.flows.ingest import ingest_job_logs
    from gpucast.flows.score import score_pending
    from gpucast.flows.train import train_models

    settings = Settings.from_env().ensure()
    src = settings.storage.home / "bench"
    src.mkdir()
    jobs(10_000, 1, 0.0, "COMPLETED").write_parquet(src / "completed.parquet")
    # distinct ids: the simulator numbers jobs per day, so two samples of one day would collide
    jobs(n_pending, 2, 1.0).with_columns(pl.lit("PENDING").alias(c.STATUS), ("p-" + pl.col(c.JOB_ID)).alias(c.JOB_ID)) \
        .write_parquet(src / "pending.parquet")
    t = time.perf_counter()
    ingest_job_logs(paths=[str(src)])
    print(f"setup: ingested 10,000 completed + {n_pending:,} pending jobs in {time.perf_counter() - t:.1f} s", flush=True)
    train = train_models(TrainOptions(repeats=1, epochs=nn_epochs))
    print(f"setup: trained {train['train_run_id']}", flush=True)

    t = time.perf_counter()
    out = score_pending()
    s = time.perf_counter() - t
    print(f"\nscore-pending flow: {out['pending_jobs']:,} jobs x 3 targets, {out['forecasts']:,} forecasts published "
          f"in {s:.1f} s = {out['pending_jobs'] / s * 60:,.0f} jobs/min (champions {out['champions']})", flush=True)

    model_dir = Path(train["targets"][0]["champion"] and Settings.from_env().storage.models_dir / train["train_run_id"])
    pending = pl.read_parquet(src / "pending.parquet")
    rows = []
    for target_out in train["targets"]:
        target = target_out["target"]
        # the network's speed does not depend on the target: time it on the first one only
        names = [target_out["champion"]] + ([registry.NN] if target_out is train["targets"][0] else [])
        for name in dict.fromkeys(names):
            try:
                scorer = Scorer(Champion(target, name, train["train_run_id"], str(model_dir / target)))
            except ValueError as exc:  # since the champion is refitted, only it is saved with its calibration
                print(f"  {target:18s} {name:18s} not timed: {exc}", flush=True)
                continue
            t = time.perf_counter()
            f = scorer.score(pending)
            s = time.perf_counter() - t
            rows.append({"target": target, "model": name, "champion": name == target_out["champion"],
                         "jobs": f.height, "seconds": round(s, 2), "jobs_per_min": round(f.height / s * 60)})
            print(f"  {target:18s} {name:18s} {f.height:,} jobs in {s:.2f} s = {f.height / s * 60:,.0f} jobs/min", flush=True)
    compiled_vs_native(train, model_dir, pending)
    df = pl.DataFrame(rows)
    champ = df.filter(pl.col("champion")).select(pl.col("target"), pl.col("jobs_per_min").alias("champion_jpm"))
    nn = df.filter(pl.col("model") == registry.NN).select("target", pl.col("jobs_per_min").alias("nn_jpm"))
    with pl.Config(tbl_rows=20, tbl_width_chars=200, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        print(df)
        if nn.height:
            print(champ.join(nn, on="target").with_columns((pl.col("nn_jpm") / pl.col("champion_jpm")).round(3)
                                                           .alias("nn_vs_champion")))


def compiled_vs_native(train: dict, model_dir: Path, pending: pl.DataFrame) -> None:
    """Prediction alone on the pending jobs: each compiled tree champion's library against its
    library's own `predict` (the named baseline), and the largest relative difference
    (per family on one data set: tests/benchmarks/bench_compiled.py)."""
    from gpucast.tasks.learn import features
    from gpucast.tasks.learn.models import compiled, store

    for target_out in train["targets"]:
        name = target_out["champion"]
        if name not in compiled.COMPILABLE:
            continue
        folder = model_dir / target_out["target"]
        fast, native = store.load_model(folder, name), store.load_model(folder, name, use_compiled=False)
        if not fast.compiled:
            print(f"  {target_out['target']}: {name} not compiled: {store.read_metadata(folder).get('compiled')}")
            continue
        X = fast.encoder.transform(features.build(pending))
        t = time.perf_counter()
        a = fast.estimator.predict(X)
        s_fast = time.perf_counter() - t
        t = time.perf_counter()
        b = native.estimator.predict(X)
        s_native = time.perf_counter() - t
        diff = float(np.max(np.abs(a - b) / np.abs(b)))
        info = store.read_metadata(folder)["compiled"]
        print(f"  {target_out['target']:18s} {name} predict on {len(X):,} jobs: compiled {s_fast:.2f} s, its own "
              f"{s_native:.2f} s = {s_native / s_fast:.2f}x faster (compiled in {info['compile_seconds']} s; "
              f"max relative difference {diff:.1e})", flush=True)


def part_nightly(n_completed: int, n_pending: int, nn_epochs: int) -> None:
    from gpucast.flows.nightly import nightly

    os.environ["GPUCAST_HOME"] = tempfile.mkdtemp(prefix="gpucast-bench-nightly-")
    WORK_DIRS.append(os.environ["GPUCAST_HOME"])
    settings = Settings.from_env().ensure()
    days = 7
    for d in range(days):
        pending = jobs(n_pending // days, 100 + d, 1.0, day=d).with_columns(pl.lit("PENDING").alias(c.STATUS),
                                                                      ("p-" + pl.col(c.JOB_ID)).alias(c.JOB_ID))
        part = pl.concat([jobs(n_completed // days, 10 + d, 0.0, "COMPLETED", day=d), pending])
        part.write_parquet(settings.storage.inbox_dir / f"day-{d}.parquet")
    t = time.perf_counter()
    out = nightly(options=TrainOptions(repeats=1, epochs=nn_epochs))
    total = time.perf_counter() - t
    print(f"\nnightly end to end: {out['ingest']['rows_loaded']:,} jobs loaded, {out['score']['forecasts']:,} forecasts, "
          f"trained {out['train']['where']}: {total:.1f} s ({total / 60:.1f} min)")
    print("  per step: " + ", ".join(f"{step} {s:,.1f} s" for step, s in out["seconds"].items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pending", type=int, default=1_000_000)
    ap.add_argument("--nightly-completed", type=int, default=100_000)
    ap.add_argument("--nightly-pending", type=int, default=10_000)
    ap.add_argument("--nn-epochs", type=int, default=3)
    ap.add_argument("--skip-nightly", action="store_true")
    ap.add_argument("--skip-scoring", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the benchmark's data folders (printed at the end)")
    args = ap.parse_args()
    if args.keep:
        atexit.register(lambda: print("data folders kept:", *WORK_DIRS))
    else:
        atexit.register(lambda: [shutil.rmtree(path, ignore_errors=True) for path in WORK_DIRS])
    if not args.skip_scoring:
        part_scoring(args.pending, args.nn_epochs)
    if not args.skip_nightly:
        part_nightly(args.nightly_completed, args.nightly_pending, args.nn_epochs)
    parts = [name for name, skipped in (("scoring", args.skip_scoring), ("nightly", args.skip_nightly)) if not skipped]
    # One process: the peak is that of the heavier part (scoring 1M jobs); run a part alone for its own.
    print(f"\npeak RSS of this process ({' + '.join(parts)}): "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()
