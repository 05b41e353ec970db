"""Benchmark: `gpucast score` over 1,000,000 pending jobs x 3 targets as users run it, and the nightly run end to end.

    python tests/benchmarks/bench_score.py [--pending 1000000] [--families lightgbm,xgboost,random_forest,extra_trees]
                                           [--runs 2] [--first-score] [--nightly-completed 100000]
                                           [--nightly-pending 10000] [--nn-epochs 3] [--skip-nightly] [--skip-scoring]
                                           [--keep] [--home PATH [--in-place] [--running-server] [--per-row N]]

Part 1, scoring. A warehouse with 10k completed jobs and `--pending` pending jobs. Per family of
`--families`, `gpucast train --models FAMILY --repeats 1 --runner local --compile-trees` makes it the
champion of every target (its compile time, and whether it compiled, from the champion's metadata); the family
`demo` trains as the demo does instead (every model, `DEMO_REPEATS`, `DEMO_EPOCHS`, `DEMO_PRESET`: the champions the
champion rule picks, a blend among them where it wins); then the command `gpucast score` runs `--runs` times in a
fresh process each, with nothing new to trace (GPUCAST_TRACE_NIGHT_SECONDS=0 for these commands) (start-up, reading the pending
jobs, features, encode, predict, intervals, out-of-distribution flags, staging, the DuckDB publish and the
planners' copy, everything a user waits for): jobs per minute. The named baselines, on the same pending
jobs (encoded once, outside the timing) for the same 3 champions: the predict alone through the path
`gpucast score` uses (the compiled library where one was built: the floor), and the library's own
predict. Goal: >= 3,000,000 jobs/min in every run, for the demo's champions and a random forest's (issue 52
item 5; 1,500,000 was issue 31's).
`--first-score`: then a fresh warehouse (a new GPUCAST_HOME: no trace cached) with the same jobs, a random forest
trained as champion without traces, and `gpucast score` twice with tracing on (the settings' defaults: on its own it
waits at most `traced.SCORE_ALONE_SECONDS` on new traces): the first run's seconds against the second's. Goal: the
first <= 2x the next (issue 52 item 6).
`--home PATH`: no setup and no training: time `--runs` `gpucast score` runs on that warehouse as it is (its champions,
its pending jobs; e.g. one kept by `--keep`, or a demo's home with pending jobs ingested), to repeat the measurement on a
quieter machine or with other champions without their training. The runs score a copy of the home (a score run adds
a run and 3M forecasts to the warehouse it scores: timing the home itself would grow it run after run and leave the
benchmark's runs in it), made before the timing and published once untimed (a copied planners' copy is rebuilt in
full at its first publish: its files are not the ones the last publish wrote); `--in-place` times the home itself.
`--running-server` (issue 52 item 5): a `prefect server start` beside the runs (as a site runs one for its nightlies:
`bench_ingest.py`'s `running_server`), and each run twice, side by side: with PREFECT_API_URL at it, then with the
command's temporary server; the server's own CPU is not the command's. `--per-row N` then prints each champion's CPU seconds
per 1M jobs of each piece of `Scorer.score` (encode, predict, intervals, OOD flags, the never-impossible check, the
inference words, the rest) and of staging its forecasts (memory advice, the Parquet write), on N of the pending jobs
(their features built without traces), in this process: the per-row cost of each family (issue 52 item 5).
Part 2, the nightly flow end to end on `--nightly-completed` completed + `--nightly-pending`
pending jobs (simulated files in the inbox): ingest, validate, features, train (all nine models,
1 repeat, network capped at `--nn-epochs`), score, publish; wall seconds per step.
Peak RSS of this process is printed at the end (the commands run in their own processes).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import resource
import shutil
import subprocess
import sys
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
from gpucast.flows.settings import Settings  # noqa: E402
from gpucast.tasks.learn.options import TrainOptions  # noqa: E402
from gpucast.tasks.simulate import SimConfig, simulate_jobs  # noqa: E402


def jobs(n: int, seed: int, pending_fraction: float, status: str | None = None, day: int = 0) -> pl.DataFrame:
    """Simulated jobs of one day (ids are unique within a day)."""
    df = simulate_jobs(int(n * (1.5 if status == "COMPLETED" else 1.0)) + 100, np.random.default_rng(seed),
                       SimConfig().start + timedelta(days=day), pending_fraction=pending_fraction)
    if status:
        df = df.filter(pl.col(c.STATUS) == status)
    return df.head(n)


GOAL_JOBS_PER_MIN = 3_000_000  # issue 52 item 5, in every run
GOAL_FIRST_X = 2.0  # issue 52: the first score on a fresh warehouse <= 2x the next
FAMILIES = ("lightgbm", "xgboost", "random_forest", "extra_trees")
DEMO = "demo"  # not a family: train as the demo does (every model, the demo's repeats, epochs and preset)
NOTHING_TO_TRACE = {"GPUCAST_TRACE_NIGHT_SECONDS": "0"}  # no new trace in the timed runs


def gpucast(*args: str, check: bool = True, env: dict | None = None) -> tuple[float, str | None]:
    """Run the `gpucast` command in a fresh process as a user does (this environment, `env` over it); (wall seconds,
    None), or with `check` False (seconds, why it failed) when it exits non-zero (with `check`: the benchmark stops
    there). The command's CPU seconds (user + system) are added to `CPU_SECONDS` (read after each run)."""
    exe = Path(sys.executable).with_name("gpucast")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, env={**os.environ, **(env or {})})
    seconds = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS[0] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if not done.returncode:
        return seconds, None
    why = f"gpucast {' '.join(args)} failed ({done.returncode}): " + next(
        (line.strip() for line in done.stderr.splitlines() if "Error" in line), done.stderr.strip()[-300:])[:300]
    if check:
        raise SystemExit(f"{why}\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return seconds, why


CPU_SECONDS = [0.0]  # the last `gpucast` command's CPU seconds


def train_args(family: str) -> list[str]:
    """`gpucast train`'s arguments that make `family` every target's champion, or train as the demo does (`DEMO`)."""
    if family == DEMO:
        from gpucast.flows.cli.pipeline import DEMO_EPOCHS, DEMO_PRESET, DEMO_REPEATS

        return ["train", "--repeats", str(DEMO_REPEATS), "--epochs", str(DEMO_EPOCHS), "--preset", DEMO_PRESET,
                "--runner", "local", "--compile-trees"]
    return ["train", "--models", family, "--repeats", "1", "--runner", "local", "--compile-trees"]


def part_scoring(n_pending: int, families: list[str], runs: int) -> pl.DataFrame:
    from gpucast.flows.ingest import ingest_job_logs

    settings = Settings.from_env().ensure()
    src = settings.storage.home / "bench"
    src.mkdir()
    jobs(10_000, 1, 0.0, "COMPLETED").write_parquet(src / "completed.parquet")
    # distinct ids: the simulator numbers jobs per day, so two samples of one day would collide
    pending = jobs(n_pending, 2, 1.0).with_columns(pl.lit("PENDING").alias(c.STATUS), ("p-" + pl.col(c.JOB_ID)).alias(c.JOB_ID))
    pending.write_parquet(src / "pending.parquet")
    t = time.perf_counter()
    ingest_job_logs(paths=[str(src)])
    print(f"setup: ingested 10,000 completed + {n_pending:,} pending jobs in {time.perf_counter() - t:.1f} s", flush=True)
    rows = [row for family in families for row in score_family(family, pending, runs)]
    with pl.Config(tbl_rows=40, tbl_width_chars=220, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        print(pl.DataFrame(rows))
    print(f"goal: >= {GOAL_JOBS_PER_MIN:,} jobs/min through `gpucast score` in every run, for every champion set")
    return pending


def part_first_score(pending: pl.DataFrame) -> None:
    """A fresh warehouse (no trace cached) with the same jobs: a random forest champion trained without traces, then
    `gpucast score` twice with tracing on (the defaults): the first run's seconds against the second's."""
    os.environ["GPUCAST_HOME"] = tempfile.mkdtemp(prefix="gpucast-bench-first-score-")
    WORK_DIRS.append(os.environ["GPUCAST_HOME"])
    os.environ.pop("GPUCAST_TRACE_NIGHT_SECONDS", None)  # tracing as configured by default
    src = Settings.from_env().ensure().storage.home / "bench"
    src.mkdir()
    jobs(10_000, 1, 0.0, "COMPLETED").write_parquet(src / "completed.parquet")
    pending.write_parquet(src / "pending.parquet")
    gpucast("ingest", str(src))
    gpucast(*train_args("random_forest"), env=NOTHING_TO_TRACE)
    runs = []
    for run in (1, 2):
        s, _ = gpucast("score")
        runs.append(s)
        print(f"fresh warehouse, score {run} (tracing on): {s:.1f} s (CPU {CPU_SECONDS[0]:.1f} s) = "
              f"{pending.height / s * 60:,.0f} jobs/min; load {os.getloadavg()[0]:.1f}", flush=True)
    x = runs[0] / runs[1]
    print(f"first score / next: {x:.2f}x (goal <= {GOAL_FIRST_X:g}x: {'met' if x <= GOAL_FIRST_X else 'not met'})")


def score_family(family: str, pending: pl.DataFrame, runs: int) -> list[dict]:
    """Train `family` as every target's champion, then time `gpucast score` `runs` times against the predict-alone
    baselines."""
    seconds, _ = gpucast(*train_args(family), env=NOTHING_TO_TRACE)
    from gpucast.warehouse import db, forecast

    with db.writer(Settings.from_env().storage) as con:
        champions = forecast.latest_champions(con)
    floor, native, compiled_note = predict_alone(champions, pending)
    print(f"{family}: trained in {seconds:.0f} s, champions {', '.join(f'{ch.target} {ch.model}' for ch in champions)} "
          f"({compiled_note}); predict alone on {pending.height:,} jobs x {len(champions)} targets: scoring path "
          f"{floor:.2f} s, the library's own {native:.2f} s", flush=True)
    out = []
    for run in range(1, runs + 1):
        s, failed = gpucast("score", check=False, env=NOTHING_TO_TRACE)
        if failed:  # said, and the next runs and families still measured
            print(f"  run {run}: {failed} after {s:.1f} s", flush=True)
            out.append({"family": family, "run": run, "command_s": round(s, 1), "failed": failed})
            continue
        jpm = pending.height / s * 60
        print(f"  run {run}: gpucast score {s:.1f} s (CPU {CPU_SECONDS[0]:.1f} s) = {jpm:,.0f} jobs/min = "
              f"{s / floor:.1f}x the predict alone on the scoring path, {s / native:.1f}x the library's own predict; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        out.append({"family": family, "run": run, "command_s": round(s, 1), "cpu_s": round(CPU_SECONDS[0], 1),
                    "jobs_per_min": round(jpm),
                    "predict_floor_s": round(floor, 2), "x_floor": round(s / floor, 1), "own_predict_s": round(native, 2),
                    "x_own": round(s / native, 1), "compiled": compiled_note, "goal_met": jpm >= GOAL_JOBS_PER_MIN})
    return out


def score_home(home: str, runs: int, in_place: bool = False, running_server: bool = False) -> None:
    """`gpucast score` `runs` times on a copy of the warehouse at `home` (`--home`; the home itself `in_place`):
    seconds, CPU seconds, jobs a minute; with `running_server`, each run against a running Prefect server and then
    against the command's temporary one."""
    from gpucast.warehouse import db, forecast, training
    from gpucast.warehouse.publish import publish_if

    if not in_place:
        copy = Path(tempfile.mkdtemp(prefix="gpucast-bench-score-home-")) / "home"
        WORK_DIRS.append(str(copy.parent))
        t = time.perf_counter()
        shutil.copytree(home, copy, symlinks=True)
        os.environ["GPUCAST_HOME"] = str(copy)
        publish_if(True, Settings.from_env().storage)  # untimed: the copy's first publish is a full one (module doc)
        print(f"timing a copy of {home}: {copy} (copied and published in {time.perf_counter() - t:.1f} s)", flush=True)
        home = str(copy)
    os.environ["GPUCAST_HOME"] = home
    with db.writer(Settings.from_env().storage) as con:
        pending, champions = training.count_pending(con), forecast.latest_champions(con)
    print(f"{home}: {pending:,} pending jobs, champions " + ", ".join(f"{ch.target} {ch.model}" for ch in champions), flush=True)
    with _running_server(Path(home).parent) if running_server else contextlib.nullcontext() as url:
        servers = [("running server", {"PREFECT_API_URL": url}), ("temporary server", {})] if url else [("", {})]
        for run in range(1, runs + 1):
            for name, env in servers:
                if not env:
                    os.environ.pop("PREFECT_API_URL", None)
                s, failed = gpucast("score", check=False, env={**NOTHING_TO_TRACE, **env})
                print(f"  run {run}{f' ({name})' if name else ''}: " + (
                    f"{failed} after {s:.1f} s" if failed else
                    f"gpucast score {s:.1f} s (CPU {CPU_SECONDS[0]:.1f} s) = {pending / s * 60:,.0f} jobs/min")
                    + f"; load {os.getloadavg()[0]:.1f}", flush=True)


def _running_server(work: Path):
    """`bench_ingest.py`'s `prefect server start` on a free port, its API URL while it runs."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_ingest import running_server

    return running_server(work)


def per_row(home: str, n: int) -> None:
    """CPU seconds per 1M jobs of each piece of scoring, per champion of `home`, on `n` of its pending jobs (`--per-row`)."""
    from datetime import UTC, datetime

    from gpucast.tasks.learn import features, ood, traced
    from gpucast.tasks.learn import score as scoring
    from gpucast.warehouse import db, forecast, training

    os.environ["GPUCAST_HOME"] = home
    with db.writer(Settings.from_env().storage) as con:
        rows, champions = features.build(training.read_pending(con).head(n)), forecast.latest_champions(con)
    clock: dict[str, float] = {}

    def timed(name: str, f):
        def run(*args, **kwargs):
            t = time.process_time()
            try:
                return f(*args, **kwargs)
            finally:
                clock[name] = clock.get(name, 0.0) + time.process_time() - t
        return run

    scoring.ood.flag, traced.with_inference = timed("ood flags", ood.flag), timed("inference words", traced.with_inference)
    out_path = Path(home) / "per_row.parquet"
    for ch in champions:
        t = time.process_time()
        scorer = scoring.Scorer(ch, threads=2)
        load = time.process_time() - t
        clock.clear()
        scorer.encoder.transform = timed("encode", scorer.encoder.transform)
        scorer.estimator.predict = timed("predict", scorer.estimator.predict)
        scorer.calibration.intervals = timed("intervals", scorer.calibration.intervals)
        scorer._never_impossible = timed("never impossible", scorer._never_impossible)
        t = time.process_time()
        scored = scorer.score(rows)
        total = time.process_time() - t
        staged = timed("advice", scoring.target_forecasts)([scored], rows, 80.0, "bench", datetime.now(UTC))
        timed("parquet", staged.select(forecast.FORECAST_COLUMNS).write_parquet)(out_path)
        clock["rest of score"] = total - sum(v for k, v in clock.items() if k not in ("advice", "parquet"))
        per = {k: f"{k} {v / n * 1e6:.2f}" for k, v in clock.items()}
        print(f"{ch.target} {ch.model}{' (compiled)' if _compiled(scorer) else ''}: loaded in {load:.2f} CPU-s; CPU-s "
              f"per 1M jobs: score {total / n * 1e6:.2f} ("
              + ", ".join(v for k, v in per.items() if k not in ("advice", "parquet"))
              + f"), staging {(clock['advice'] + clock['parquet']) / n * 1e6:.2f} ({per['advice']}, {per['parquet']})", flush=True)
    out_path.unlink(missing_ok=True)


def _compiled(scorer) -> bool:
    from gpucast.tasks.learn.models.compiled import CompiledTrees

    inner = getattr(scorer.estimator, "regressor_", None)
    return isinstance(inner, CompiledTrees)


def predict_alone(champions: list, pending: pl.DataFrame) -> tuple[float, float, str]:
    """(seconds of the champions' predict through the path `gpucast score` uses, seconds of their library's own
    predict, which targets compiled with their compile seconds) on the pending jobs, encoded beforehand."""
    from gpucast.tasks.learn import features
    from gpucast.tasks.learn.models import store

    built = features.build(pending)
    floor = native = 0.0
    notes = []
    for ch in champions:
        folder = Path(ch.model_dir)
        fast, own = store.load_model(folder, ch.model, threads=2), store.load_model(folder, ch.model, use_compiled=False, threads=2)
        X = fast.encoder.transform(built)
        for model, add in ((fast, "floor"), (own, "native")):
            t = time.perf_counter()
            model.estimator.predict(X)
            if add == "floor":
                floor += time.perf_counter() - t
            else:
                native += time.perf_counter() - t
        info = store.read_metadata(folder).get("compiled") or {}
        notes.append(f"{ch.target} compiled in {info['compile_seconds']} s" if fast.compiled else
                     f"{ch.target} native: {str(info.get('reason', 'not compiled'))[:80]}")
    return floor, native, "; ".join(notes)


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
    print(f"\nnightly end to end: {out.ingest.rows_loaded:,} jobs loaded, {out.score.forecasts:,} forecasts, "
          f"trained {out.train.where}: {total:.1f} s ({total / 60:.1f} min)")
    print("  per step: " + ", ".join(f"{step} {s:,.1f} s" for step, s in out.seconds.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pending", type=int, default=1_000_000)
    ap.add_argument("--families", default=",".join(FAMILIES), help="tree families forced as champions, one after another "
                    f"('{DEMO}': trained as the demo does)")
    ap.add_argument("--runs", type=int, default=2, help="`gpucast score` runs per family")
    ap.add_argument("--first-score", action="store_true", help="then a fresh warehouse's first score against its next")
    ap.add_argument("--nightly-completed", type=int, default=100_000)
    ap.add_argument("--nightly-pending", type=int, default=10_000)
    ap.add_argument("--nn-epochs", type=int, default=3)
    ap.add_argument("--skip-nightly", action="store_true")
    ap.add_argument("--skip-scoring", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the benchmark's data folders (printed at the end)")
    ap.add_argument("--home", help="time `--runs` scores on this warehouse as it is (no setup, no training), then stop")
    ap.add_argument("--in-place", action="store_true", help="with --home: time the home itself, not a copy")
    ap.add_argument("--running-server", action="store_true",
                    help="with --home: each run against a running Prefect server, then the temporary one")
    ap.add_argument("--per-row", type=int, default=0, help="with --home: per-row CPU of each scoring piece on N jobs")
    args = ap.parse_args()
    if args.keep:
        atexit.register(lambda: print("data folders kept:", *WORK_DIRS))
    else:
        atexit.register(lambda: [shutil.rmtree(path, ignore_errors=True) for path in WORK_DIRS])
    if args.home:
        score_home(args.home, args.runs, args.in_place, args.running_server)
        if args.per_row:
            per_row(args.home, args.per_row)
        return
    if not args.skip_scoring:
        pending = part_scoring(args.pending, args.families.split(","), args.runs)
        if args.first_score:
            part_first_score(pending)
    if not args.skip_nightly:
        part_nightly(args.nightly_completed, args.nightly_pending, args.nn_epochs)
    parts = [name for name, skipped in (("scoring", args.skip_scoring), ("nightly", args.skip_nightly)) if not skipped]
    # One process: the peak is that of the heavier part (scoring 1M jobs); run a part alone for its own.
    print(f"\npeak RSS of this process ({' + '.join(parts)}): "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()
