"""Benchmark: ingest N simulated JSONL rows; compare with bare DuckDB converting the same file to Parquet.

    python tests/benchmarks/bench_ingest.py [--rows 1000000] [--dirty-fraction 0.01] [--running-server] [--source DIR]
    python tests/benchmarks/bench_ingest.py --small-files [--files 5000]

Two views, each run `--repeat` times (default 2), each run in a fresh process and a fresh warehouse:
* **the command**, as a data engineer waits for it: `gpucast ingest FILE`, wall clock from process start to
  exit (imports, Prefect's temporary API server, interpreter exit included), against bare DuckDB as a
  command (`python -c "import duckdb; COPY (SELECT * FROM read_json(...)) TO ... (FORMAT parquet)"`, its
  start-up included too), run just before and just after each command (the ratio takes their mean).
  Prefect's home is kept across the runs (a user's second run: its database and the bytecode of what the
  command imports are made once, by a warm-up command on the file's first 2,000 lines before the timings;
  `--only flow` has no warm-up, so its untimed start-up line still includes compiling); with `--running-server`,
  the command runs a second time against a `prefect server start`
  started once before the runs, as a deployment has (issue 40, decision 1: `PREFECT_API_URL` set, no temporary
  server; its goal, <= 5x, is on this figure, <= 8x on the first; `--running-server-only` skips the first);
  the flow view likewise runs against that server (the server's CPU then not in the flow's figure), after or
  instead of its run with the temporary server;
* **the flow**: the `ingest-job-logs` flow call alone, after a warm-up flow has started Prefect and GX's judge
  (expectations/judge.py: GX's import and context, 3-5 CPU-s, which `gpucast ingest` pays while Prefect starts;
  `--cold-judge` times it inside the flow, as this view did until 2026-11-29), against DuckDB's conversion alone
  (no start-up on either side).

`--small-files`: one folder of N one-row JSONL files (an exporter writing a file per job), ingested
by the same flow; reports the seconds, the per-file rate and the accounting (target: 5,000 files in
under 60 s on the 2-core machine; issue 27 item 9).

Each side reports its own peak RSS (Prefect's temporary API
server is a separate process, not counted). The gpucast figure is the `ingest-job-logs` flow call
(read -> normalise -> GX validation -> DuckDB merge -> lake) after a warm-up flow has started
Prefect; that start-up is reported on its own line. Targets: at most 5x the DuckDB time (issue "The night at
any scale"; issue 2 asked for 2x), at most 2 GB peak RSS.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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
t, cpu = time.perf_counter(), time.process_time()
duckdb.sql(f"COPY (SELECT * FROM read_json('{src}', ignore_errors = true)) TO '{dst}' (FORMAT parquet)")
print(json.dumps({"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - cpu, "rss_mb": peak_rss_mb()}))
"""

# CPU seconds of this process and every process it started (GX's judge, Prefect's temporary server), all threads,
# those still running and those ended and waited for: on a shared machine the wall clock measures the others' load
# as much as ours
CPU = """
import os, psutil
def cpu_seconds():
    me = psutil.Process()
    ended = os.times()
    total = ended.children_user + ended.children_system
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total
"""

GPUCAST = PEAK_RSS + CPU + """
import json, sys, time
t0 = time.perf_counter()
from gpucast.flows.environment import configure; configure()  # noqa: E702
from prefect import flow
from dataclasses import asdict
from gpucast.flows.ingest import ingest_job_logs
from gpucast.expectations import validate  # GX's judge is a process of its own (expectations/judge.py)
judge_start = cpu_seconds()
if sys.argv[3] == "warm":  # its start (GX's import and context, ~3-5 CPU-s) outside the timing, as `gpucast ingest`
    validate.warm_up()     # has it while Prefect starts (flows/cli/pipeline.py); waited for, so none of it is timed
    with validate._JUDGE.lock:
        validate._JUDGE.answer()
judge_start = cpu_seconds() - judge_start
flow(name="warm-up")(lambda: None)()  # starts Prefect's temporary API server, outside the timing
t, cpu = time.perf_counter(), cpu_seconds()
summary = ingest_job_logs(paths=[sys.argv[1]], chunk_rows=int(sys.argv[2]))
seconds, cpu = time.perf_counter() - t, cpu_seconds() - cpu
judge = validate._JUDGE.process
judge_mb = next((int(line.split()[1]) / 1024 for line in open(f"/proc/{judge.pid}/status")
                 if line.startswith("VmHWM:")), 0.0) if judge is not None and judge.poll() is None else 0.0
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "startup_seconds": t - t0, "judge_start_cpu": judge_start,
                  "rss_mb": peak_rss_mb(), "judge_rss_mb": judge_mb, **asdict(summary)}))
"""


# `gpucast ingest ARGS` exactly as the console script runs it (`from gpucast.flows.cli import main`), with
# one atexit hook registered first, so it runs last: after Prefect's server has stopped, it writes this
# process's peak RSS and its CPU seconds to the file named by the first argument (JSON), with the clock times
# (time.time()) at which the reader opened the first file and handed over its first chunk: the command's fixed
# cost is start to the first (issue 52: <= 3 s); and at which the staging task took its first chunk to check (since
# session 22 `gpucast ingest FILE` starts reading before Prefect's import, so the reading may wait for the flow). The
# reader and the staging step are wrapped where staging calls them; nothing else changes.
COMMAND = PEAK_RSS + CPU + """
import atexit, json, sys, time
out = sys.argv.pop(1)
seen = {}
atexit.register(lambda: open(out, "w").write(json.dumps({"rss_mb": peak_rss_mb(), "cpu_seconds": cpu_seconds(), **seen})))
from gpucast.tasks.ingest import staging
_read = staging.read_chunks
def read_chunks(*args, **kwargs):
    if "opened" not in seen:
        seen.update(opened=time.time(), opened_cpu=cpu_seconds(), opened_own_cpu=time.process_time())
    for chunk in _read(*args, **kwargs):
        seen.setdefault("first_chunk", time.time())
        yield chunk
staging.read_chunks = read_chunks
_add = staging._Staged.add
def add(*args, **kwargs):
    seen.setdefault("first_staged", time.time())
    return _add(*args, **kwargs)
staging._Staged.add = add
sys.argv[0] = "gpucast"
from gpucast.flows.cli import main
sys.exit(main())
"""


def child(code: str, *args: str, env: dict | None = None) -> tuple[dict, float]:
    """Run `code` in a fresh interpreter; return its JSON line (it reports its own peak RSS) and wall seconds."""
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if out.returncode:
        sys.exit(f"benchmark child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1]), wall


def source_path(checkout: Path) -> str:
    """PYTHONPATH with another checkout's code first (a `gpucast` folder linking its code folders), as
    bench_cli.py's `--source`."""
    farm = Path(tempfile.mkdtemp(prefix="gpucast-bench-ingest-source-"))
    atexit.register(shutil.rmtree, farm, ignore_errors=True)
    (farm / "gpucast").mkdir()
    for layer in ("flows", "tasks", "warehouse", "expectations", "records"):
        (farm / "gpucast" / layer).symlink_to(checkout.resolve() / layer)
    return os.pathsep.join(filter(None, (str(farm), os.environ.get("PYTHONPATH"))))


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
from dataclasses import asdict
from gpucast.flows.ingest import ingest_job_logs
flow(name="warm-up")(lambda: None)()
t = time.perf_counter()
summary = ingest_job_logs(paths=[sys.argv[1]])
print(json.dumps({"seconds": time.perf_counter() - t, "startup_seconds": t - t0, "rss_mb": peak_rss_mb(), **asdict(summary)}))
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


def command(src: Path, work: Path, run: int, api_url: str | None = None) -> dict:
    """`gpucast ingest SRC` in a fresh process and warehouse: wall seconds from start to exit, peak RSS. With
    `api_url`, against that running Prefect server (PREFECT_API_URL: no temporary server is started)."""
    home, rss = work / f"home-command-{run}", work / "command-rss.txt"
    shutil.rmtree(home, ignore_errors=True)
    env = dict(os.environ, GPUCAST_HOME=str(home), PREFECT_HOME=str(work / "prefect-command"))
    if api_url:
        env["PREFECT_API_URL"] = api_url
    t, started = time.perf_counter(), time.time()
    out = subprocess.run([sys.executable, "-c", COMMAND, str(rss), "ingest", str(src)], capture_output=True, text=True,
                         env=env)
    wall = time.perf_counter() - t
    if out.returncode:
        sys.exit(f"gpucast ingest failed:\n{out.stderr[-3000:]}")
    summary = next((x for x in out.stdout.splitlines() if x.startswith("run ")), "")
    seen = json.loads(rss.read_text())
    return {"seconds": wall, "rss_mb": seen["rss_mb"], "cpu_seconds": seen["cpu_seconds"], "line": summary,
            "fixed": seen.get("opened", started) - started, "fixed_cpu": seen.get("opened_cpu", 0.0),
            "fixed_own_cpu": seen.get("opened_own_cpu", 0.0),
            "first_chunk": seen.get("first_chunk", started) - started,
            "first_staged": seen.get("first_staged", started) - started}


def warm_prefect(work: Path, src: Path) -> None:
    """What a user's second run finds, made once before the timings: Prefect's database under the commands'
    PREFECT_HOME, and the bytecode of every module `gpucast ingest` imports. The warm-up is that command on the
    file's first 2,000 lines, with PYTHONDONTWRITEBYTECODE unset (as the Makefile's `RUN` runs the demo and the
    tests): a machine that sets it (this one does) otherwise makes every timed command compile gpucast's, Prefect's
    and their libraries' sources again, ~0.5 CPU-s that an installed wheel (compiled at install) or a second run
    never pays (session 18, docs/benchmarks.md)."""
    head = work / "warm-up.jsonl"
    with src.open("rb") as whole, head.open("wb") as out:
        out.writelines(itertools.islice(whole, 2_000))
    env = dict(os.environ, GPUCAST_HOME=str(work / "home-warm"), PREFECT_HOME=str(work / "prefect-command"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    shutil.rmtree(work / "home-warm", ignore_errors=True)
    out = subprocess.run([sys.executable, "-c", COMMAND, str(work / "warm-up-rss.txt"), "ingest", str(head)],
                         capture_output=True, text=True, env=env)
    if out.returncode:
        sys.exit(f"the warm-up `gpucast ingest` of {head} failed:\n{out.stderr[-3000:]}")


def simulate(rows: int, dirty_fraction: float, work: Path) -> tuple[Path, int]:
    """The benchmark's one JSONL file (reused when a kept --workdir already holds it) and its line count."""
    from gpucast.tasks.simulate import SimConfig, write_logs

    made = work / "logs" / f".made-{rows}-{dirty_fraction}"  # a kept --workdir's file of these settings, complete
    if made.exists() and (kept := sorted((work / "logs").glob("jobs-*.jsonl"))):
        src = kept[0]
    else:
        print(f"simulating {rows:,} jobs (dirty fraction {dirty_fraction}) into {work} ...", flush=True)
        made.unlink(missing_ok=True)
        (src,) = write_logs(work / "logs", SimConfig(days=1, jobs_per_day=rows, dirty_fraction=dirty_fraction,
                                                     update_fraction=0.0, seed=11))
        made.touch()
    lines = sum(1 for _ in open(src, "rb"))
    print(f"input: {src.name}, {lines:,} lines, {src.stat().st_size / 1e6:,.0f} MB", flush=True)
    return src, lines


def input_options(ap: argparse.ArgumentParser) -> None:
    """The simulated input's flags, the same in every ingest benchmark (this one, ingest_stages.py, bench_load.py)."""
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dirty-fraction", type=float, default=0.01)
    ap.add_argument("--workdir", default=None, help="kept: the next run reuses its simulated file")


def simulated_input(args: argparse.Namespace, prefix: str) -> tuple[Path, Path, int]:
    """(work folder, the JSONL file, its line count) from `input_options`' flags (`work_folder`, `simulate`)."""
    work = work_folder(args.workdir, prefix)
    return work, *simulate(args.rows, args.dirty_fraction, work)


def fresh_folder(folder: Path) -> Path:
    """`folder`, emptied (made if missing): each run stages or loads into a folder of its own."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def flow_run(src: Path, work: Path, chunk_rows: int, lines: int, cold_judge: bool = False,
             api_url: str | None = None) -> None:
    """The flow alone against DuckDB's conversion alone (each in its own process), printed. GX's judge is started
    before the timing (as Prefect's server is; `gpucast ingest` starts it while Prefect starts), unless `cold_judge`
    (its start then counts in the flow's figures, as it did until 2026-11-29). `api_url`: the flow reports to that
    running Prefect server (PREFECT_API_URL, as a deployment's flows do; issue 52's goals are on this figure), so the
    server's CPU is not the flow's; without it the warm-up starts Prefect's temporary server, a child process whose
    CPU during the flow (handling the flow's and tasks' states and logs) counts in the flow's figure."""
    base, _ = child(BASELINE, str(src), str(work / "baseline.parquet"))
    home = work / "home"
    shutil.rmtree(home, ignore_errors=True)  # a fresh warehouse each run (a kept --workdir reuses the logs only)
    env = dict(os.environ, GPUCAST_HOME=str(home)) | ({"PREFECT_API_URL": api_url} if api_url else {})
    ours, wall = child(GPUCAST, str(src), str(chunk_rows), "cold" if cold_judge else "warm", env=env)
    print(f"  Prefect: {'the running server at ' + api_url if api_url else 'its temporary server (a child process)'}")
    print(f"  bare DuckDB read_json -> Parquet : {base['seconds']:7.2f} s  {lines / base['seconds']:>10,.0f} rows/s  "
          f"peak RSS {base['rss_mb']:,.0f} MB, CPU {base['cpu_seconds']:.2f} s")
    print(f"  gpucast ingest-job-logs flow    : {ours['seconds']:7.2f} s  {lines / ours['seconds']:>10,.0f} rows/s  "
          f"peak RSS {ours['rss_mb']:,.0f} MB (GX's judge process beside it: {ours['judge_rss_mb']:,.0f} MB)")
    judge = ("GX's judge started in the flow, in its figures" if cold_judge else
             f"GX's judge's start {ours['judge_start_cpu']:.1f} CPU-s")
    print(f"    (imports + Prefect server start {ours['startup_seconds']:.1f} s, {judge}, whole process {wall:.1f} s: "
          f"not in this ratio); rows read {ours['rows_read']:,} = loaded {ours['rows_loaded']:,} + rejected "
          f"{ours['rows_rejected']:,} + duplicate {ours['rows_duplicate']:,}")
    stages = {**ours["stage_seconds"], **ours["load_seconds"]}
    print("    where the time goes: " + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items())
          + f", the rest (Prefect, finding and hashing the file, the run's records) "
            f"{ours['seconds'] - sum(stages.values()):.1f} s  (read = JSONL decode; normalise = parsing rules; "
            "rules = the suite's row rules and the sort; gx = Great Expectations' one validation, in its judge)")
    print(f"  flow ratio                      : {ours['seconds'] / base['seconds']:7.2f}x  peak RSS "
          f"{ours['rss_mb']:,.0f} MB; CPU seconds {ours['cpu_seconds']:.1f} s (the judge's and Prefect's server's "
          f"included) / DuckDB's {base['cpu_seconds']:.2f} s = {ours['cpu_seconds'] / base['cpu_seconds']:.2f}x",
          flush=True)


def command_run(src: Path, work: Path, run: int, lines: int, api_url: str | None = None) -> None:
    """`gpucast ingest FILE` against bare DuckDB as a command, both wall clock from process start to exit. DuckDB
    runs just before and just after (on a shared machine the load moves within a minute); the ratio takes their mean.
    `api_url`: the command uses that running Prefect server (issue 40's goal: <= 5x) instead of its temporary one
    (<= 8x)."""
    first, before = child(BASELINE, str(src), str(work / "baseline.parquet"))
    ours = command(src, work, run, api_url)
    second, after = child(BASELINE, str(src), str(work / "baseline.parquet"))
    base, base_cpu = (before + after) / 2, (first["cpu_seconds"] + second["cpu_seconds"]) / 2
    where, goal = ("a running Prefect server", 5) if api_url else ("its temporary Prefect server", 8)
    print(f"  bare DuckDB as a command        : {before:7.2f} s before, {after:.2f} s after (mean {base:.2f} s)")
    print(f"  gpucast ingest FILE ({where})\n  {'':32}: {ours['seconds']:7.2f} s  {lines / ours['seconds']:>10,.0f} rows/s  "
          f"peak RSS {ours['rss_mb']:,.0f} MB, CPU {ours['cpu_seconds']:.1f} s")
    print(f"    fixed cost (start to the reader opening the file): {ours['fixed']:.2f} s (goal <= 3 s), CPU "
          f"{ours['fixed_cpu']:.2f} s ({ours['fixed_own_cpu']:.2f} s of it the command's own process, the rest GX's "
          f"judge and any server it started); to its first chunk of rows decoded: {ours['first_chunk']:.2f} s; to the "
          f"staging task's first chunk checked: {ours['first_staged']:.2f} s")
    print(f"    ({ours['line']})")
    print(f"  command ratio                   : {ours['seconds'] / base:7.2f}x  (goal <= {goal}x, peak RSS <= 2048 MB); "
          f"CPU seconds {ours['cpu_seconds']:.1f} / DuckDB's {base_cpu:.2f} (mean) = {ours['cpu_seconds'] / base_cpu:.2f}x",
          flush=True)


@contextlib.contextmanager
def running_server(work: Path) -> Iterator[str]:
    """`prefect server start` on a free loopback port, its own home and database, as a deployment runs one; its API
    URL once it answers. Stopped after."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = work / "prefect-server"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {
        "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    url, deadline = f"http://127.0.0.1:{port}/api", time.monotonic() + 180
    with open(home / "server.log", "wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                                   "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=log,
                                  start_new_session=True)
        try:
            while True:
                if server.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"prefect server start did not answer: {(home / 'server.log').read_text()[-2000:]}")
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                time.sleep(0.25)
            print(f"a running Prefect server at {url} (prefect server start; it stays up, idle, during the other "
                  "views' runs too)", flush=True)
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    input_options(ap)
    ap.add_argument("--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS, help="default: the product's (gpucast ingest)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each view (the command, the flow)")
    ap.add_argument("--only", choices=("command", "flow"), default=None, help="one view only")
    ap.add_argument("--small-files", action="store_true", help="many one-row files instead of one big file")
    ap.add_argument("--files", type=int, default=5_000, help="with --small-files: how many")
    ap.add_argument("--source", type=Path, default=None,
                    help="run another checkout's code (a `git archive` of an older commit: the 'before' of a change)")
    ap.add_argument("--running-server", action="store_true",
                    help="the command and the flow also against a running `prefect server start` (issue 40: <= 5x "
                         "there; issue 52's goals)")
    ap.add_argument("--running-server-only", action="store_true",
                    help="with --running-server: the command and the flow against the running server only (a 10M-row "
                         "run each way takes long on a shared machine)")
    ap.add_argument("--cold-judge", action="store_true",
                    help="the flow view with GX's judge started inside the timing (as measured until 2026-11-29)")
    args = ap.parse_args()
    if args.small_files:
        small_files(args.files, args.workdir)
        return
    work, src, lines = simulated_input(args, "gpucast-bench-")
    if args.source:
        os.environ["PYTHONPATH"] = source_path(args.source)  # every child (flow, command) imports that code
        print(f"code: {args.source} (PYTHONPATH {os.environ['PYTHONPATH']})")
    if args.only != "flow":
        warm_prefect(work, src)
    with running_server(work) if args.running_server else contextlib.nullcontext() as api_url:
        for run in range(1, args.repeat + 1):
            print(f"\nrun {run}:")
            if args.only != "flow":
                if not (api_url and args.running_server_only):
                    command_run(src, work, run, lines)
                if api_url:
                    command_run(src, work, run, lines, api_url)
            if args.only != "command":
                if not (api_url and args.running_server_only):
                    flow_run(src, work, args.chunk_rows, lines, args.cold_judge)
                if api_url:
                    flow_run(src, work, args.chunk_rows, lines, args.cold_judge, api_url)


if __name__ == "__main__":
    main()
