"""Benchmark: ingest N simulated JSONL rows; compare with bare DuckDB converting the same file to Parquet.

    python tests/benchmarks/bench_ingest.py [--rows 1000000] [--dirty-fraction 0.01]
    python tests/benchmarks/bench_ingest.py --small-files [--files 5000]

`--small-files`: one folder of N one-row JSONL files (an exporter writing a file per job), ingested
by the same flow; reports the seconds, the per-file rate and the accounting (target: 5,000 files in
under 60 s on the 2-core machine; issue 27 item 9).

Each side runs in its own fresh process and reports its own peak RSS (Prefect's temporary API
server is a separate process, not counted). The gpucast figure is the `ingest-job-logs` flow call
(read -> normalise -> GX validation -> DuckDB merge -> lake) after a warm-up flow has started
Prefect; that start-up is reported on its own line. Targets: at most 5x the DuckDB time (issue "The night at
any scale"; issue 2 asked for 2x), at most 2 GB peak RSS.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpucast.tasks.ingest.readers import DEFAULT_CHUNK_ROWS

# DuckDB skips bad lines silently (ignore_errors): the bare conversion gpucast is compared with.
# Peak RSS from /proc: ru_maxrss survives exec, so a child would report its parent's peak.
PEAK_RSS = """
def peak_rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
"""

BASELINE = PEAK_RSS + """
import duckdb, json, sys, time
src, dst = sys.argv[1], sys.argv[2]
t = time.perf_counter()
duckdb.sql(f"COPY (SELECT * FROM read_json('{src}', ignore_errors = true)) TO '{dst}' (FORMAT parquet)")
print(json.dumps({"seconds": time.perf_counter() - t, "rss_mb": peak_rss_mb()}))
"""

GPUCAST = PEAK_RSS + """
import json, sys, time
t0 = time.perf_counter()
from gpucast.flows.environment import configure; configure()  # noqa: E702
from prefect import flow
from gpucast.flows.ingest import ingest_job_logs
flow(name="warm-up")(lambda: None)()  # starts Prefect's temporary API server, outside the timing
t = time.perf_counter()
summary = ingest_job_logs(paths=[sys.argv[1]], chunk_rows=int(sys.argv[2]))
print(json.dumps({"seconds": time.perf_counter() - t, "startup_seconds": t - t0,
                  "rss_mb": peak_rss_mb(), **summary}))
"""


def child(code: str, *args: str, env: dict | None = None) -> tuple[dict, float]:
    """Run `code` in a fresh interpreter; return its JSON line (it reports its own peak RSS) and wall seconds."""
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if out.returncode:
        sys.exit(f"benchmark child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1]), wall


def work_folder(workdir: str | None, prefix: str) -> Path:
    """`workdir` as given (kept, so a next run can reuse it), else a temporary folder removed at exit."""
    if workdir:
        return Path(workdir)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    return work


SMALL = PEAK_RSS + """
import json, sys, time
t0 = time.perf_counter()
from gpucast.flows.environment import configure; configure()  # noqa: E702
from prefect import flow
from gpucast.flows.ingest import ingest_job_logs
flow(name="warm-up")(lambda: None)()
t = time.perf_counter()
summary = ingest_job_logs(paths=[sys.argv[1]])
print(json.dumps({"seconds": time.perf_counter() - t, "startup_seconds": t - t0, "rss_mb": peak_rss_mb(), **summary}))
"""


def small_files(files: int, workdir: str | None) -> None:
    """N one-row JSONL files in one folder through the ingest flow."""
    from gpucast.tasks.simulate import SimConfig, write_logs

    work = work_folder(workdir, "gpucast-bench-small-")
    folder = work / "small"
    if not folder.is_dir() or sum(1 for _ in folder.iterdir()) != files:
        shutil.rmtree(folder, ignore_errors=True)
        (src,) = write_logs(work / "logs", SimConfig(days=1, jobs_per_day=files, dirty_fraction=0.0, update_fraction=0.0,
                                                     seed=12))
        folder.mkdir(parents=True)
        with open(src) as f:
            for i, line in enumerate(x for x in f if x.strip()):
                (folder / f"job-{i:05d}.jsonl").write_text(line)
    n = sum(1 for _ in folder.iterdir())
    home = work / "home"
    shutil.rmtree(home, ignore_errors=True)
    ours, wall = child(SMALL, str(folder), env=dict(os.environ, GPUCAST_HOME=str(home)))
    print(f"{n:,} one-row files: {ours['seconds']:.1f} s ({1000 * ours['seconds'] / n:.1f} ms per file), "
          f"peak RSS {ours['rss_mb']:,.0f} MB (target: 5,000 files under 60 s)")
    print(f"  rows read {ours['rows_read']:,} = loaded {ours['rows_loaded']:,} + rejected {ours['rows_rejected']:,}"
          f" + duplicate {ours['rows_duplicate']:,}; files {ours['files']:,}")
    stages = {**ours["stage_seconds"], **ours["load_seconds"]}
    print("  where the time goes: " + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items())
          + f"  (imports + Prefect start {ours['startup_seconds']:.1f} s, whole process {wall:.1f} s: not counted)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dirty-fraction", type=float, default=0.01)
    ap.add_argument("--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS, help="default: the product's (gpucast ingest)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--small-files", action="store_true", help="many one-row files instead of one big file")
    ap.add_argument("--files", type=int, default=5_000, help="with --small-files: how many")
    args = ap.parse_args()
    if args.small_files:
        small_files(args.files, args.workdir)
        return

    from gpucast.tasks.simulate import SimConfig, write_logs

    work = work_folder(args.workdir, "gpucast-bench-")
    print(f"simulating {args.rows:,} jobs (dirty fraction {args.dirty_fraction}) into {work} ...", flush=True)
    (src,) = write_logs(work / "logs", SimConfig(days=1, jobs_per_day=args.rows, dirty_fraction=args.dirty_fraction,
                                                 update_fraction=0.0, seed=11))
    lines = sum(1 for _ in open(src, "rb"))
    size_mb = src.stat().st_size / 1e6
    print(f"input: {src.name}, {lines:,} lines, {size_mb:,.0f} MB", flush=True)

    base, _ = child(BASELINE, str(src), str(work / "baseline.parquet"))
    home = work / "home"
    shutil.rmtree(home, ignore_errors=True)  # a fresh warehouse each run (a kept --workdir reuses the logs only)
    env = dict(os.environ, GPUCAST_HOME=str(home))
    ours, wall = child(GPUCAST, str(src), str(args.chunk_rows), env=env)

    ratio = ours["seconds"] / base["seconds"]
    base_rss, ours_rss = base["rss_mb"], ours["rss_mb"]
    print()
    print(f"bare DuckDB read_json -> Parquet : {base['seconds']:7.2f} s  {lines / base['seconds']:>12,.0f} rows/s  "
          f"peak RSS {base_rss:,.0f} MB")
    print(f"gpucast ingest-job-logs flow    : {ours['seconds']:7.2f} s  {lines / ours['seconds']:>12,.0f} rows/s  "
          f"peak RSS {ours_rss:,.0f} MB")
    print(f"  (imports + Prefect server start {ours['startup_seconds']:.1f} s, whole process {wall:.1f} s: not in the ratio)")
    print(f"  rows read {ours['rows_read']:,} = loaded {ours['rows_loaded']:,} + rejected {ours['rows_rejected']:,}"
          f" + duplicate {ours['rows_duplicate']:,}")
    stages = {**ours["stage_seconds"], **ours["load_seconds"]}
    print("  where the time goes: " + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items())
          + "  (read = JSONL decode; check = normalise + Great Expectations)")
    print(f"ratio gpucast / DuckDB           : {ratio:7.2f}x   (target <= 5x; issue 2 asked for 2x)")
    print(f"peak RSS                         : {ours_rss:7.0f} MB (target <= 2048 MB)")


if __name__ == "__main__":
    main()
