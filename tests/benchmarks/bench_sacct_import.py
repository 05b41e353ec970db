"""Benchmark: `gpucast import slurm FILE` on a sacct export of a given size: peak RSS and time (issue 48 item 10).

    python tests/benchmarks/bench_sacct_import.py [--mb 145] [--repeat 2] [--workdir DIR] [--seed 48] [--jobs-only]

The export is **synthetic**, written line by line (never held whole) the way `sacct --parsable2 --allusers
-M all --format=<the recommended fields>` prints a busy site's month: two clusters whose job ids overlap
(`Cluster` column), each job followed by its `.batch`, `.extern` and `.0` steps (`gres/gpumem` in
`TRESUsageInMax` on `.batch` and `.0`), a fifth of the jobs on a CPU partition, a third with a JSON `Comment`,
job arrays (their tasks `<id>_<n>` with their steps, and on the last day pending ranges `<id>_[a-b]` with a
`%` throttle), some requeued jobs (two lines), and pending jobs at the end. `--jobs-only` leaves the steps out,
as `sacct -X` prints (about four times the jobs in the same bytes). The same seed, size and kind write the same
bytes; a kept `--workdir` reuses the file.

Each run is `gpucast import slurm FILE` as the console script runs it, in a fresh process and a fresh
GPUCAST_HOME (Prefect's home kept across runs, made once by a warm-up, as a user's second run): wall seconds
from process start to exit, and the process's own peak RSS (VmHWM, written by an atexit hook that runs last;
Prefect's temporary API server is a separate process, not counted). Printed: the file size, the seconds, the
peak RSS and its ratio to the file size, and the command's own summary lines. Goal: a 1 GB export within
2 GiB peak RSS.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: make `tests` importable
from gpucast.tasks.sources.slurm import SACCT_FIELDS  # noqa: E402
from tests.benchmarks.bench_ingest import COMMAND, warm_prefect, work_folder  # noqa: E402

START = datetime(2026, 10, 1)
DAYS = 30
GPUS = {"gpu-a100": "a100", "gpu-h100": "h100", "gpu-l4": "l4"}
MODELS = ("Transformer", "CNN", "LSTM", "GRU", "ResNet", "MLP")


def _hms(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _t(when: datetime) -> str:
    return when.isoformat(timespec="seconds")


class Export:
    """Writes one synthetic sacct export, job by job, until it reaches `size` bytes."""

    def __init__(self, out, seed: int, size: int, jobs_only: bool = False):
        self.out, self.rng, self.size, self.jobs_only = out, random.Random(seed), size, jobs_only
        self.written = 0
        self.next_id = {"hpc1": 100000, "hpc2": 100000}  # the two clusters' ids overlap

    def line(self, *values: str) -> None:
        text = "|".join(values) + "\n"
        self.out.write(text)
        self.written += len(text)

    def job(self, cluster: str, job_id: str, day: int, last_day: bool) -> None:
        r = self.rng
        cpu = r.random() < 0.2
        part = "cpu" if cpu else r.choice(list(GPUS))
        gpus = r.choice((1, 1, 1, 2, 4, 8))
        gres = "" if cpu else f",gres/gpu:{GPUS[part]}={gpus},gres/gpu={gpus}"
        tres = f"billing={4 * gpus},cpu={8 * gpus}{gres},mem={32 * gpus}G,node=1"
        user, account = f"u{r.randrange(300):03d}", r.choice(("nlp", "vision", "speech", "recsys", "bio"))
        name = f"{r.choice(('train', 'hpo', 'eval', 'finetune'))}_{r.choice(('bert', 'vit', 'gpt', 'unet'))}_{r.randrange(999)}"
        comment = "" if cpu or r.random() > 0.33 else \
            f'{{"model_type": "{r.choice(MODELS)}", "params_million": {r.randrange(1, 2000)}, "batch_size": {r.choice((8, 16, 32, 64))}}}'
        submit = START + timedelta(days=day, seconds=r.randrange(86400))
        limit = _hms(r.choice((1, 2, 4, 8, 24, 48)) * 3600)
        head = [job_id, name, cluster, part, account, user]
        if last_day and r.random() < 0.3:
            self.line(*head, "PENDING", "0:0", _t(submit), "Unknown", "Unknown", "00:00:00", limit, "", tres, "", "",
                      comment)
            return
        start = submit + timedelta(seconds=r.randrange(1, 3600))
        run = r.randrange(60, 48 * 3600)
        end = start + timedelta(seconds=run)
        state = r.choices(("COMPLETED", "FAILED", "CANCELLED by 1234", "TIMEOUT", "OUT_OF_MEMORY"), (80, 8, 6, 4, 2))[0]
        code = "0:0" if state == "COMPLETED" else "1:0"
        times = [_t(submit), _t(start), _t(end), _hms(run), limit]
        if r.random() < 0.02:  # requeued once: the earlier attempt's line too
            self.line(*head, "NODE_FAIL", "0:0", _t(submit), _t(start), _t(start + timedelta(seconds=30)), "00:00:30",
                      limit, tres, tres, "", "", comment)
        self.line(*head, state, code, *times, tres, tres, "", "", comment)
        if self.jobs_only:  # `sacct -X`: no step lines
            return
        mem = "" if cpu else f",gres/gpumem={r.randrange(1000, 80000) * gpus}M,gres/gpuutil={r.randrange(100)}"
        step_state = state.split(" ")[0] if state != "TIMEOUT" else "CANCELLED"
        usage = f"cpu={_hms(run // 2)},energy=0,fs/disk=1048576{mem},mem={r.randrange(10**6, 10**8)}K,pages=0,vmem=9000000K"
        for step, stepname, used in (("batch", "batch", usage), ("extern", "extern", "cpu=00:00:00,energy=0,fs/disk=5329,mem=0"),
                                     ("0", "python", usage)):
            self.line(f"{job_id}.{step}", stepname, cluster, "", account, "", step_state, code, _t(start), _t(start),
                      _t(end), _hms(run), "", tres, "", used, "", "")

    def write(self) -> None:
        self.line(*SACCT_FIELDS)
        day = 0
        while self.written < self.size:
            cluster = "hpc1" if self.rng.random() < 0.7 else "hpc2"
            self.next_id[cluster] += 1
            base = str(self.next_id[cluster])
            day = min(DAYS - 1, int(DAYS * self.written / self.size))
            last_day = day == DAYS - 1
            if self.rng.random() < 0.05:  # an array: its tasks that ran, then (the last day) the range still pending
                tasks = self.rng.randrange(5, 60)
                ran = tasks if not last_day else self.rng.randrange(0, tasks)
                for k in range(1, ran + 1):
                    self.job(cluster, f"{base}_{k}", day, False)
                if ran < tasks:
                    self._pending_range(cluster, base, ran + 1, tasks, day)
            else:
                self.job(cluster, base, day, last_day)

    def _pending_range(self, cluster: str, base: str, first: int, last: int, day: int) -> None:
        submit = START + timedelta(days=day, seconds=self.rng.randrange(86400))
        tres = "billing=4,cpu=8,gres/gpu:a100=1,gres/gpu=1,mem=32G,node=1"
        self.line(f"{base}_[{first}-{last}%10]", "hpo_sweep", cluster, "gpu-a100", "nlp", "u001", "PENDING", "0:0",
                  _t(submit), "Unknown", "Unknown", "00:00:00", "04:00:00", "", tres, "", "", '{"model_type": "CNN"}')


def export(path: Path, mb: float, seed: int, jobs_only: bool = False) -> Path:
    """The export of `mb` MB (1e6 bytes), written unless `path` already holds it (same size, seed and kind)."""
    size = int(mb * 1e6)
    stamp = path.with_suffix(".seed")
    if path.is_file() and stamp.is_file() and stamp.read_text() == f"{seed} {size} {jobs_only}":
        return path
    t = time.perf_counter()
    with open(path, "w", buffering=1 << 20) as out:
        Export(out, seed, size, jobs_only).write()
    stamp.write_text(f"{seed} {size} {jobs_only}")
    print(f"wrote {path} ({path.stat().st_size / 1e6:,.0f} MB) in {time.perf_counter() - t:.0f} s", flush=True)
    return path


def run(src: Path, work: Path, n: int) -> dict:
    """`gpucast import slurm SRC` in a fresh process and warehouse: wall seconds, peak RSS (MB), its summary lines."""
    home, rss = work / f"home-{n}", work / "rss.txt"
    shutil.rmtree(home, ignore_errors=True)
    env = dict(os.environ, GPUCAST_HOME=str(home), PREFECT_HOME=str(work / "prefect-command"))
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", COMMAND, str(rss), "import", "slurm", str(src)], capture_output=True,
                         text=True, env=env)
    wall = time.perf_counter() - t
    shutil.rmtree(home, ignore_errors=True)
    if out.returncode:
        sys.exit(f"gpucast import slurm failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    said = [x for x in out.stdout.splitlines() if x.startswith(("slurm:", "run "))]
    return {"seconds": wall, "rss_mb": float(rss.read_text()), "said": said}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, default=145.0, help="the export's size in MB (1e6 bytes)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--seed", type=int, default=48)
    p.add_argument("--workdir", help="keep the export (and reuse it) here; default: a temporary folder")
    p.add_argument("--jobs-only", action="store_true", help="no step lines, as `sacct -X` prints")
    a = p.parse_args(argv)
    work = work_folder(a.workdir, "gpucast-bench-sacct-")
    work.mkdir(parents=True, exist_ok=True)
    src = export(work / f"sacct-{a.mb:g}MB-{a.seed}{'-jobs' if a.jobs_only else ''}.txt", a.mb, a.seed, a.jobs_only)
    size_mb = src.stat().st_size / 1e6
    warm_prefect(work)
    for n in range(a.repeat):
        got = run(src, work, n)
        print(f"run {n + 1}: {size_mb:,.0f} MB export: {got['seconds']:,.1f} s, peak RSS {got['rss_mb']:,.0f} MB "
              f"({got['rss_mb'] / size_mb:.2f}x the file; goal: 1 GB within 2 GiB)", flush=True)
        for x in got["said"]:
            print(f"  {x}")


if __name__ == "__main__":
    main()
