"""Benchmark: how long the quick commands take, start to exit, as a person types them (issues 31 item 4, 52 item 4).

    python tests/benchmarks/bench_cli.py [--runs 3] [--home DIR] [--source CHECKOUT]

Times `gpucast --help`, `gpucast --version`, `gpucast plan --help`, `gpucast status` and `gpucast sql "SELECT
count(*) FROM job_logs"`, each `--runs` times in a fresh process (the console script's own start: `from
gpucast.flows.cli import main`), on a warehouse: `--home`'s, else a small simulated one made first (not timed).
Each run prints its wall seconds and its CPU seconds (user + system: on a shared machine the wall time grows with
the load, the CPU time much less). Then, per command, `python -X importtime`'s five slowest top-level imports of
that command's own process (what it loaded, as it ran), and the heavy libraries among them. Targets: `--help`,
`status`, `sql` <= 0.5 s (issue 52); every command under 2 s (issue 31). Every run is printed, none is dropped;
the named baseline, timed the same way in the same run, is the bare interpreter (`python -c "import sys"`), so a
figure measured on a busy machine can be read as a ratio to what no Python command can beat there.

`--source CHECKOUT` times another checkout's code (a `git worktree` of an older commit: the "before" of a change)
with this environment's libraries, by putting a `gpucast` folder of links to its five code folders first on
PYTHONPATH.
"""

from __future__ import annotations

import argparse
import atexit
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONSOLE_SCRIPT = "import sys; from gpucast.flows.cli import main; sys.argv[0] = 'gpucast'; sys.exit(main())"
COMMANDS = {
    "--help": ["--help"],
    "--version": ["--version"],
    "plan --help": ["plan", "--help"],
    "status": ["status"],
    "sql": ["sql", "SELECT count(*) FROM job_logs"],
}


HEAVY = ("numpy", "polars", "pyarrow", "duckdb", "pydantic", "yaml", "prefect", "torch", "great_expectations",
         "sklearn", "skops", "lightgbm", "xgboost", "catboost", "scipy", "altair", "sqlalchemy", "dask", "mlflow",
         "pandas")
GOAL_S = {"--help": 0.5, "status": 0.5, "sql": 0.5}  # issue 52 item 4; every command: under 2 s (issue 31)


def gpucast(*args: str, env: dict, code: str = CONSOLE_SCRIPT) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `gpucast ARGS` process, start to exit (it must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        sys.exit(f"gpucast {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def source_env(env: dict, checkout: Path) -> dict:
    """`env` with another checkout's code first on PYTHONPATH (a `gpucast` folder linking its code folders)."""
    farm = Path(tempfile.mkdtemp(prefix="gpucast-bench-cli-source-"))
    atexit.register(shutil.rmtree, farm, ignore_errors=True)
    (farm / "gpucast").mkdir()
    for layer in ("flows", "tasks", "warehouse", "expectations", "records"):
        (farm / "gpucast" / layer).symlink_to(checkout.resolve() / layer)
    return dict(env, PYTHONPATH=os.pathsep.join(filter(None, (str(farm), env.get("PYTHONPATH")))))


def small_warehouse(env: dict) -> None:
    """One simulated day of 500 jobs, ingested: what `status` and `sql` read (not timed)."""
    logs = Path(env["GPUCAST_HOME"]) / "bench-logs"
    gpucast("simulate", "--out", str(logs), "--history-days", "1", "--jobs-per-day", "500", env=env)
    gpucast("ingest", str(logs), env=env)


def import_times(args: list[str], env: dict, top: int = 5) -> tuple[list[tuple[int, str]], list[str]]:
    """The `top` slowest top-level imports of one `gpucast ARGS` process, as it ran (cumulative microseconds, module),
    and the heavy libraries (`HEAVY`) it imported."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", CONSOLE_SCRIPT, *args], capture_output=True,
                         text=True, env=env)
    rows, loaded = [], set()
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line.removeprefix("import time:").split("|")
            loaded.add(name.strip().split(".")[0])
            if not name.removeprefix(" ").startswith(" "):  # a top-level import (nested ones are indented)
                rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:top], [h for h in HEAVY if h in loaded]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--home", default=None, help="an existing data directory (default: a small simulated one)")
    ap.add_argument("--source", type=Path, default=None, help="time this checkout's code (the 'before' of a change)")
    args = ap.parse_args()
    home = args.home or tempfile.mkdtemp(prefix="gpucast-bench-cli-")
    if not args.home:
        atexit.register(shutil.rmtree, home, ignore_errors=True)
    env = dict(os.environ, GPUCAST_HOME=home)
    if not args.home:
        small_warehouse(env)
    if args.source:
        env = source_env(env, args.source)
        print(f"code: {args.source} (PYTHONPATH {env['PYTHONPATH']})")
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    bare = [gpucast(env=env, code="import sys") for _ in range(args.runs)]
    print(f"{'bare python (baseline)':<20} " + "  ".join(f"{w:5.2f} s" for w, _ in bare), flush=True)
    for name, argv in COMMANDS.items():
        runs = [gpucast(*argv, env=env) for _ in range(args.runs)]
        goal = GOAL_S.get(name)
        print(f"gpucast {name:<12} " + "  ".join(f"{w:5.2f} s (cpu {c:4.2f})" for w, c in runs)
              + f"   {sum(w for w, _ in runs) / sum(w for w, _ in bare):4.1f}x the bare interpreter; under 2 s: "
              f"{sum(w < 2 for w, _ in runs)} of {len(runs)}"
              + (f"; <= {goal} s: {sum(w <= goal for w, _ in runs)} of {len(runs)}" if goal else ""), flush=True)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, argv in COMMANDS.items():
        slowest, heavy = import_times(argv, env)
        print(f"\ngpucast {name}: python -X importtime, the five slowest top-level imports (cumulative); heavy "
              f"libraries loaded: {', '.join(heavy) or 'none'}")
        for micros, module in slowest:
            print(f"  {micros / 1000:7.0f} ms  {module}")


if __name__ == "__main__":
    main()
