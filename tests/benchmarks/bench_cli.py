"""Benchmark: how long the quick commands take, start to exit, as a person types them (issue 31, item 4).

    python tests/benchmarks/bench_cli.py [--runs 3] [--home DIR]

Times `gpucast --version`, `gpucast plan --help`, `gpucast status` and `gpucast sql "SELECT count(*) FROM
job_logs"`, each `--runs` times in a fresh process (the console script's own start: `from gpucast.flows.cli
import main`), on a warehouse: `--home`'s, else a small simulated one made first (not timed). Then prints
`python -X importtime -c "import gpucast.flows.cli"`'s ten slowest imports. Target: each command under 2 s on
the 2-core machine. Every run is printed, none is dropped; the named baseline, timed the same way in the same
run, is the bare interpreter (`python -c "import sys"`), so a figure measured on a busy machine can be read as a
ratio to what no Python command can beat there.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONSOLE_SCRIPT = "import sys; from gpucast.flows.cli import main; sys.argv[0] = 'gpucast'; sys.exit(main())"
COMMANDS = {
    "--version": ["--version"],
    "plan --help": ["plan", "--help"],
    "status": ["status"],
    "sql": ["sql", "SELECT count(*) FROM job_logs"],
}


def gpucast(*args: str, env: dict, code: str = CONSOLE_SCRIPT) -> float:
    """Wall seconds of one `gpucast ARGS` process, start to exit (it must succeed)."""
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t
    if out.returncode:
        sys.exit(f"gpucast {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return seconds


def small_warehouse(env: dict) -> None:
    """One simulated day of 500 jobs, ingested: what `status` and `sql` read (not timed)."""
    logs = Path(env["GPUCAST_HOME"]) / "bench-logs"
    gpucast("simulate", "--out", str(logs), "--history-days", "1", "--jobs-per-day", "500", env=env)
    gpucast("ingest", str(logs), env=env)


def import_times(top: int = 10) -> list[tuple[int, str]]:
    """The `top` slowest imports of the CLI module (cumulative microseconds, module)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import gpucast.flows.cli"], capture_output=True,
                         text=True, check=True)
    rows = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line.removeprefix("import time:").split("|")
            rows.append((int(cumulative), name.rstrip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--home", default=None, help="an existing data directory (default: a small simulated one)")
    args = ap.parse_args()
    home = args.home or tempfile.mkdtemp(prefix="gpucast-bench-cli-")
    if not args.home:
        atexit.register(shutil.rmtree, home, ignore_errors=True)
    env = dict(os.environ, GPUCAST_HOME=home)
    if not args.home:
        small_warehouse(env)
    bare = [gpucast(env=env, code="import sys") for _ in range(args.runs)]
    print(f"{'bare python (baseline)':<20} " + "  ".join(f"{s:5.2f} s" for s in bare), flush=True)
    for name, argv in COMMANDS.items():
        runs = [gpucast(*argv, env=env) for _ in range(args.runs)]
        print(f"gpucast {name:<12} " + "  ".join(f"{s:5.2f} s" for s in runs)
              + f"   {sum(runs) / sum(bare):4.1f}x the bare interpreter; under 2 s: {sum(s < 2 for s in runs)} of "
              f"{len(runs)} runs", flush=True)
    print("\npython -X importtime -c 'import gpucast.flows.cli', the ten slowest (cumulative):")
    for micros, module in import_times():
        print(f"  {micros / 1000:7.0f} ms  {module}")


if __name__ == "__main__":
    main()
