"""Write a sacct-like sample: a GPU cluster's accounting as plain `sacct --parsable2` prints it, no model features.

    python tests/data/make_sacct_sample.py [--out tests/data/sacct_sample.txt] [--days 42] [--jobs-per-day 30] [--seed 20261126]

No Comment, no WCKey, no mapping: what a site that starts from its scheduler's accounting has (issue 38).
It is **synthetic** (no public trace is shipped), built the way such accounting looks:
* users run *scripts* (`FAMILIES`, drawn once per seed): each has a name template (`train_bert_{n}`,
  `hpo-resnet-{n}`, ...), a partition (a GPU type), an account, a GPU count, a typical run time
  (log-normal, minutes to days) and the time limit its user always asks for: the typical time times a
  safety factor, rounded up to the next value users type (1, 2, 4, 8, 12, 24, 48, 72 h);
* each job picks a script (a few scripts are most of the jobs), runs the typical time times a
  log-normal spread (sigma 0.45); 7% fail early, 4% are cancelled part-way, a run that would pass its
  limit is stopped there (`TIMEOUT`, elapsed = limit);
* submissions follow a weekly rhythm (weekends at 40%); the last day's last jobs are `PENDING`;
* each job has a `.batch` step carrying `gres/gpumem` (the script's memory per GPU x GPUs, with spread)
  in `TRESUsageInMax`, as Slurm's NVML accounting writes it.
The same seed writes the same bytes. `tests/benchmarks/bench_scheduler_runtime.py` measures run-time
forecasts on it; docs/models.md ("Jobs without model features") has the figures.
"""

from __future__ import annotations

import argparse
import math
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

HEADER = "JobID|JobName|Partition|Account|User|State|ExitCode|Submit|Start|End|Elapsed|Timelimit|AllocTRES|ReqTRES|TRESUsageInMax"
PARTITIONS = {"gpu-a100": ("a100", 80.0), "gpu-h100": ("h100", 80.0), "gpu-l4": ("l4", 24.0)}
ACCOUNTS = ("nlp", "vision", "speech", "recsys", "bio", "robotics")
TEMPLATES = ("train_{w}_{n}", "hpo-{w}-{n}", "eval_{w}_{n}", "finetune-{w}-{n}", "preprocess_{w}_{n}", "{w}_sweep_{n}")
WORDS = ("bert", "resnet", "vit", "gpt", "unet", "lstm", "whisper", "diffusion", "gnn", "dlrm", "t5", "yolo")
LIMITS_H = (1, 2, 4, 8, 12, 24, 48, 72)
N_FAMILIES = 48
SPREAD = 0.45  # log-normal sigma of a job's run time around its script's typical time


def families(rng: np.random.Generator) -> list[dict]:
    """The scripts users run, drawn once per seed."""
    out = []
    for i in range(N_FAMILIES):
        partition = str(rng.choice(list(PARTITIONS), p=[0.5, 0.2, 0.3]))
        typical = float(np.exp(rng.normal(np.log(2.0), 1.3)))  # hours: median 2 h, minutes to days
        typical = min(max(typical, 0.05), 60.0)
        limit = next((h for h in LIMITS_H if h >= typical * rng.uniform(1.3, 4.0)), LIMITS_H[-1])
        out.append({"name": TEMPLATES[i % len(TEMPLATES)].replace("{w}", WORDS[int(rng.integers(len(WORDS)))]),
                    "partition": partition, "account": ACCOUNTS[int(rng.integers(len(ACCOUNTS)))],
                    "user": f"u{int(rng.integers(40)):02d}", "gpus": int(rng.choice([1, 1, 1, 2, 4, 8])),
                    "typical": typical, "limit": float(limit),
                    "mem_gb": float(min(PARTITIONS[partition][1] * rng.uniform(0.1, 0.95), PARTITIONS[partition][1]))})
    return out


def hms(hours: float) -> str:
    """Slurm's `[D-]HH:MM:SS`."""
    seconds = int(round(hours * 3600))
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


START = datetime(2026, 9, 1)


def lines(days: int, jobs_per_day: int, seed: int, start: datetime = START) -> list[str]:
    """The header and every job's lines (the job, then its `.batch` step), days from `start` (no zone: UTC)."""
    rng = np.random.default_rng(seed)
    fams = families(rng)
    weights = 1.0 / np.arange(1, len(fams) + 1) ** 0.9  # a few scripts are most of the jobs
    weights /= weights.sum()
    out, job = [HEADER], 100000
    for d in range(days):
        day = start + timedelta(days=d)
        n = int(rng.poisson(jobs_per_day * (0.4 if day.weekday() >= 5 else 1.0)))
        for k in range(n):
            job += 1
            f = fams[int(rng.choice(len(fams), p=weights))]
            submit = day + timedelta(hours=float(rng.uniform(7, 22)))
            name = f["name"].replace("{n}", str(int(rng.integers(1, 999))))
            gres = f"gres/gpu:{PARTITIONS[f['partition']][0]}={f['gpus']}"
            tres = f"billing={4 * f['gpus']},cpu={8 * f['gpus']},{gres},gres/gpu={f['gpus']},mem={32 * f['gpus']}G,node=1"
            head = [str(job), name, f["partition"], f["account"], f["user"]]
            if d == days - 1 and k >= n - max(3, n // 5):  # still waiting when the accounting was exported
                out.append("|".join([*head, "PENDING", "0:0", submit.isoformat(timespec="seconds"), "Unknown", "Unknown", "00:00:00",
                                     hms(f["limit"]), "", tres, ""]))  # pending: asked for, not yet allocated
                continue
            run = f["typical"] * float(np.exp(rng.normal(0.0, SPREAD)))
            u = rng.random()
            state, code = "COMPLETED", "0:0"
            if u < 0.07:
                state, code, run = "FAILED", "1:0", run * float(rng.uniform(0.01, 0.5))
            elif u < 0.11:
                state, run = f"CANCELLED by {int(rng.integers(1000, 1100))}", run * float(rng.uniform(0.0, 1.0))
            if run >= f["limit"]:
                state, run = "TIMEOUT", f["limit"] + 10 / 3600
            run = max(run, 30 / 3600)
            begin = submit + timedelta(minutes=float(rng.exponential(20)))
            end = begin + timedelta(hours=run)
            mem = f["mem_gb"] * float(np.exp(rng.normal(0.0, 0.15))) * f["gpus"]
            mem_mib = int(min(mem, PARTITIONS[f["partition"]][1] * f["gpus"]) * 1e9 / 2**20)
            times = [begin.isoformat(timespec="seconds"), end.isoformat(timespec="seconds"), hms(run)]
            out.append("|".join([*head, state, code, submit.isoformat(timespec="seconds"), *times, hms(f["limit"]),
                                 tres, tres, ""]))
            step = state.split(" ")[0] if state != "TIMEOUT" else "CANCELLED"
            out.append("|".join([f"{job}.batch", "batch", "", f["account"], "", step, code,
                                 begin.isoformat(timespec="seconds"), *times, "", tres, "",
                                 f"cpu={hms(run * 0.9)},gres/gpumem={mem_mib}M,gres/gpuutil={int(rng.integers(20, 100))}"]))
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(__file__).with_name("sacct_sample.txt"))
    p.add_argument("--days", type=int, default=42)
    p.add_argument("--jobs-per-day", type=int, default=30)
    p.add_argument("--seed", type=int, default=20261126)
    a = p.parse_args(argv)
    text = "\n".join(lines(a.days, a.jobs_per_day, a.seed)) + "\n"
    a.out.write_text(text)
    print(f"wrote {a.out}: {text.count(chr(10)) - 1:,} lines, {math.ceil(len(text) / 1024):,} kB")


if __name__ == "__main__":
    main()
