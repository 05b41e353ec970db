"""Benchmark: publishing the planners' copy with `--kept` score runs of `--pending` jobs x 3 targets kept.

    .venv/bin/python tests/benchmarks/bench_publish.py [--pending 1000000] [--kept 10] [--jobs 1000000] [--home DIR]

A warehouse (a fresh `GPUCAST_HOME`, or `--home`, kept and reused between runs) holds `--kept` published
score runs of 3 forecasts per pending job, values drawn like real ones (bench_growth.py's), and `--jobs`
jobs in `job_logs` and `job_log_records`. Each night an ingest run loads a newer record of a tenth of the
jobs (appended to the history, replacing the job's row in `job_logs`), and one score run is added through
the real publish path
(`warehouse.forecast.publish`: insert, mark published, prune past the retention, which is set so
`--kept` runs stay), so the kept forecasts stay at kept x pending x 3 (30M by default: the goal's size).
Then, alternately, the two ways to publish (warehouse/publish.py), timed around `publish_snapshot` alone:

* the named baseline, `full=True`: every table read back whole into a new file (the only way before issue 40);
* `full=False` (the default): the previous copy's file (two publishes old; after a full publish, the copy it
  replaced) brought up to date in place with the difference; a byte copy of the last copy first where that file
  cannot be used (the first incremental publish of a home made by an older gpucast). The copy's `forecasts` is a
  view over Parquet files per run: the night's new run takes the part its score run staged and kept (renamed,
  not written again); a full publish writes every run's file from the warehouse.

Each publish prints its wall time and its CPU time (all threads; load inflates the first, hardly the second).

Every forecast file a publish reuses is verified (issue 48): it must be there with its size, and one whose identity
(inode, times) changed since it was written is read whole to compare its SHA-256. `--rehash` gives every file a new
change time before each publish (`os.utime`), so that publish reads and hashes them all: the cost of verifying the
whole folder, against the usual night's stat of each file and the SHA-256 of the new run's parts only.

After each publish the copy is compared with the warehouse (rows per run, sum of P50, every table's row
count, every view), outside the timing. Goal (issue 40): publish at 30M kept forecasts <= 3 s.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from gpucast.expectations import contract as c
from gpucast.flows.settings import Settings, Storage
from gpucast.warehouse import db, forecast, runs
from gpucast.warehouse.publish import LATEST, publish_snapshot

NIGHT0 = datetime(2026, 11, 1, 2, tzinfo=UTC)
GOAL_S = 3.0

STAGED = """
COPY (
    SELECT 'job-' || (i // 3) AS job_id, ([?, ?, ?])[(i % 3) + 1] AS target,
           random() * 10 AS p10, 10 + random() * 10 AS p50, 20 + random() * 30 AS p90,
           'lightgbm' AS model, 'train-20261101T020000Z-abc123' AS train_run_id, ? AS score_run_id,
           ?::TIMESTAMPTZ AS scored_at, 20 + random() * 40 AS safe_request_gb, 80.0 AS gpu_mem_gb,
           random() < 0.05 AS oom_risk, random() < 0.02 AS ood,
           CASE WHEN random() < 0.02 THEN 'batch_size above the training range (max 4096)' END AS ood_reason,
           NULL::VARCHAR AS arch_inferred, NULL::DOUBLE AS arch_match_distance
    FROM range(?) t(i)
) TO '{path}' (FORMAT parquet)
"""

# A value per column type for the job tables (their columns come from the contract): what matters here is
# their size, not their meaning.
BY_TYPE = {"VARCHAR": "'v-' || (i % 997)", "DOUBLE": "random() * 100", "BIGINT": "i % 4096", "BOOLEAN": "i % 2 = 0",
           "TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ '2026-10-01' + to_seconds(i)"}


def ingest(con: duckdb.DuckDBPyConnection, run_id: str, first: int, n: int) -> None:
    """An ingest run that loads a new record of jobs `first` .. `first + n - 1` (new jobs, or newer versions of
    loaded ones): appended to `job_log_records`, replacing the job's row in `job_logs` (its key in `job_logs_latest`, as
    warehouse/load.py does)."""
    base = con.execute("SELECT coalesce(max(arrival), 0) FROM job_log_records").fetchall()[0][0]
    cols = con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'job_logs' "
                       "ORDER BY column_index").fetchall()
    exprs = {"job_id": "'job-' || i", "status": "'PENDING'", "arrival": f"{base} + i - {first} + 1",
             "ingest_run_id": "?"}
    select = ", ".join(f"{exprs.get(name, BY_TYPE[kind])} AS {name}" for name, kind in cols)
    con.execute(f"CREATE OR REPLACE TEMP TABLE fresh AS SELECT {select} FROM range(?, ?) t(i)", [run_id, first, first + n])
    con.execute("INSERT INTO job_log_records SELECT * FROM fresh")
    con.execute("DELETE FROM job_logs_latest WHERE job_id IN (SELECT job_id FROM fresh)")
    con.execute("INSERT INTO job_logs_latest SELECT job_id, arrival, coalesce(updated_at, submitted_at) FROM fresh")


def night(storage: Storage, n: int, pending: int, kept: int, jobs: int) -> None:
    """Night `n`: an ingest updates a tenth of the `jobs` (a different tenth each night), then score run `n`
    (one day after run n-1) of `pending` jobs x 3 targets is published; retention keeps `kept` runs."""
    run_id, at = f"score-night{n:03d}", NIGHT0 + timedelta(days=n)
    part = storage.staging_dir / f"{run_id}.parquet"
    with db.writer(storage) as con:
        ingest(con, f"ingest-night{n:03d}", (n % 10) * (jobs // 10), jobs // 10)
        runs.start(con, runs.Run("score", run_id, at, None))
        con.execute(STAGED.format(path=part), [*c.TARGETS, run_id, at, 3 * pending])
        forecast.publish(con, run_id, [part], pending, list(c.TARGETS), 80.0, kept - 1,
                         keep_in=db.forecast_files_dir(storage.published_path))  # as flows/score.py does
        con.execute("CHECKPOINT")
    part.unlink()


def check(storage: Storage) -> tuple[int, int]:
    """The copy equals the warehouse (runs, rows, P50 sums, table counts, views); return (forecasts, runs)."""
    con = duckdb.connect()
    con.execute(f"ATTACH '{storage.db_path}' AS w (READ_ONLY)")
    con.execute(f"ATTACH '{storage.published_path}' AS p (READ_ONLY)")
    per_run = "SELECT score_run_id, count(*), sum(p50) FROM {}.forecasts GROUP BY ALL ORDER BY 1"
    w, p = (con.execute(per_run.format(d)).fetchall() for d in ("w", "p"))
    assert [r[:2] for r in w] == [r[:2] for r in p], "the published runs or their row counts differ from the warehouse's"
    assert all(math.isclose(a[2], b[2], rel_tol=1e-9) for a, b in zip(w, p, strict=True)), "the published P50s differ"
    for (name,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'w'").fetchall():
        assert con.execute(f"SELECT (SELECT count(*) FROM w.{name}) = (SELECT count(*) FROM p.{name})").fetchone()[0], name
    views = "SELECT view_name, sql FROM duckdb_views() WHERE database_name = '{}' AND NOT internal ORDER BY 1"
    # the copy's own views: forecasts over the runs' Parquet files, job_logs over its job_log_records (session 11)
    assert con.execute(views.format("w")).fetchall() == [
        v for v in con.execute(views.format("p")).fetchall() if v[0] not in ("forecasts", LATEST)]
    con.close()
    return sum(r[1] for r in w), len(w)


def touch_forecast_files(storage: Storage) -> None:
    """A new change time for every forecast file (their bytes unchanged): the next publish reads and hashes each."""
    for path in db.forecast_files_dir(storage.published_path).glob("*.parquet"):
        os.utime(path)


def gib(path: Path) -> float:
    """The size of a file, or of the files in a folder, in GiB."""
    files = path.iterdir() if path.is_dir() else [path]
    return sum(f.stat().st_size for f in files) / 2**30


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pending", type=int, default=1_000_000)
    p.add_argument("--kept", type=int, default=10)
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=2, help="full + incremental pairs, one night before each publish")
    p.add_argument("--no-baseline", action="store_true", help="incremental publishes only (steady state: each builds on the last)")
    p.add_argument("--home", help="keep the warehouse here and reuse it on the next run (default: a temporary one)")
    p.add_argument("--rehash", action="store_true", help="touch every forecast file before each publish, so each is "
                   "read and its SHA-256 compared (the cost of verifying them all)")
    args = p.parse_args()
    home = Path(args.home or tempfile.mkdtemp(prefix="gpucast-bench-publish-"))
    storage = Settings.from_env({"GPUCAST_HOME": str(home)}).storage.ensure()
    marker = home / "bench-nights.txt"
    try:
        nights = int(marker.read_text()) if marker.exists() else 0
        if not nights:
            t = time.perf_counter()
            with db.writer(storage) as con:
                ingest(con, "ingest-first", 0, args.jobs)
            for n in range(args.kept):
                night(storage, n, args.pending, args.kept, args.jobs)
            nights = args.kept
            marker.write_text(str(nights))
            publish_snapshot(storage, full=True)  # the copy the first incremental publish builds on
            print(f"built {args.kept} runs x {args.pending:,} pending x 3 targets + {args.jobs:,} jobs in "
                  f"{time.perf_counter() - t:.0f} s")
        times: dict[bool, list[float]] = {True: [], False: []}
        cpus: dict[bool, list[float]] = {True: [], False: []}  # CPU seconds of all threads: what load cannot inflate
        for _ in range(args.rounds):
            for full in (False,) if args.no_baseline else (True, False):
                night(storage, nights, args.pending, args.kept, args.jobs)
                nights += 1
                marker.write_text(str(nights))
                if args.rehash:
                    touch_forecast_files(storage)
                t, cpu = time.perf_counter(), time.process_time()
                publish_snapshot(storage, full=full)
                times[full].append(time.perf_counter() - t)
                cpus[full].append(time.process_time() - cpu)
                kept, n_runs = check(storage)
                print(f"night {nights}: {'full (baseline)' if full else 'incremental':16} {times[full][-1]:6.2f} s "
                      f"(CPU {cpus[full][-1]:6.2f} s, load {os.getloadavg()[0]:.1f}); "
                      f"{kept:,} forecasts in {n_runs} runs kept; copy {gib(storage.published_path):.2f} GiB + its forecast "
                      f"files {gib(db.forecast_files_dir(storage.published_path)):.2f} GiB, "
                      f"warehouse {storage.db_path.stat().st_size / 2**30:.2f} GiB")
        if not args.rounds:
            return
        base, incr = (min(times[f], default=math.nan) for f in (True, False))
        print(f"publish at {kept:,} kept forecasts: full copy (baseline) best {base:.2f} s {[round(x, 2) for x in times[True]]}, "
              f"incremental best {incr:.2f} s {[round(x, 2) for x in times[False]]}: {base / incr:.1f}x faster; "
              f"goal <= {GOAL_S:.0f} s {'met' if max(times[False]) <= GOAL_S else 'NOT met'}; "
              f"CPU s full {[round(x, 2) for x in cpus[True]]}, "
              f"incremental {[round(x, 2) for x in cpus[False]]}")
    finally:
        if not args.home:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("TZ", "UTC")
    main()
