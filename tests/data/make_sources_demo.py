"""Write a small MLflow store and a sacct file for `make demo-sources` (docs/sources.md), with MLflow itself.

    python tests/data/make_sources_demo.py FOLDER [--runs 240] [--seed 0]

writes FOLDER/mlflow.db (a SQLite tracking store) and FOLDER/sacct.txt (as `sacct --parsable2` prints it).
Each run logs the params a training script logs (batch size, learning rate, optimizer, model, layers, steps,
precision), the tags `queue`, `team`, `gpu_type`, and one `system/gpu_N_memory_usage_megabytes` series per
GPU, as MLflow's system-metrics monitor writes it. Memory and run time grow with the model's size, the batch
and the steps, so the models have something to learn. Three quarters of the runs are in experiment
`demo-sweeps`, launched outside Slurm; the rest ran as Slurm jobs and are in `demo-cluster`, tagged `slurm_job_id`:
their sacct lines carry the scheduler's view (partition, account, state, times, GPUs, memory) and no model
features, which the join gives. Twelve more jobs wait in the queue (PENDING, with their features in a JSON
Comment): what the demo forecasts. `log_run` is also what the tests log their runs with.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

GPU_MEMORY = "system/gpu_{}_memory_usage_megabytes"
MODELS = {"ResNet": (25.0, 50), "Transformer": (110.0, 12), "CNN": (5.0, 8), "LSTM": (20.0, 4), "MLP": (2.0, 3)}
SACCT_HEADER = ("JobID|JobName|Cluster|Partition|Account|User|State|ExitCode|Submit|Start|End|Elapsed|AllocTRES|"
                "ReqTRES|TRESUsageInMax|WCKey|Comment")


def log_run(client, experiment_id: str, *, start_ms: int, end_ms: int | None = None, status: str = "FINISHED",
            params: dict | None = None, tags: dict | None = None, gpu_mb: list[list[float]] | None = None) -> str:
    """Log one run with MLflow's client: params, tags, one memory series per GPU (sampled every 10 s
    from the start), then its end (a RUNNING run is left going). Returns the run id."""
    from mlflow.entities import Metric, Param

    run = client.create_run(experiment_id, start_time=start_ms, tags={k: str(v) for k, v in (tags or {}).items()})
    run_id = run.info.run_id
    metrics = [Metric(GPU_MEMORY.format(gpu), value, start_ms + 10_000 * step, step)
               for gpu, series in enumerate(gpu_mb or []) for step, value in enumerate(series)]
    client.log_batch(run_id, metrics=metrics, params=[Param(k, str(v)) for k, v in (params or {}).items()])
    if status != "RUNNING":
        client.set_terminated(run_id, status, end_time=end_ms)
    return run_id


def demo_run(rng: random.Random) -> dict:
    """One simulated training run: its params, tags, GPUs, peak memory (MB) and hours."""
    model = rng.choice(list(MODELS))
    millions, layers = MODELS[model]
    batch = rng.choice([16, 32, 64, 128])
    steps = rng.choice([2_000, 5_000, 10_000])
    precision = rng.choice(["fp32", "bf16"])
    gpus = rng.choice([1, 1, 2, 4])
    scale = 1.0 if precision == "fp32" else 0.6
    peak_mb = min(80_000.0, (2_000 + millions * 60 + batch * millions * 4 * scale) * rng.uniform(0.9, 1.1))
    hours = steps * batch * millions / 4e7 / gpus * rng.uniform(0.8, 1.2) + 0.05
    status = rng.choices(["FINISHED", "FAILED", "KILLED"], weights=[8, 1, 1])[0]
    return {"model": model, "gpus": gpus, "peak_mb": peak_mb, "hours": hours, "status": status,
            "params": {"model": model, "batch_size": batch, "lr": rng.choice([1e-4, 3e-4, 1e-3]),
                       "optimizer": rng.choice(["adamw", "sgd"]), "num_layers": layers, "max_steps": steps,
                       "precision": precision, "num_params": int(millions * 1e6)},
            "tags": {"queue": "gpu-a100", "team": rng.choice(["vision", "nlp"]), "gpu_type": "A100-80GB"}}


def write_demo(folder: Path, runs: int = 240, seed: int = 0) -> tuple[Path, Path]:
    """FOLDER/mlflow.db and FOLDER/sacct.txt (see the module doc); both overwritten."""
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    folder.mkdir(parents=True, exist_ok=True)
    db, sacct = folder / "mlflow.db", folder / "sacct.txt"
    db.unlink(missing_ok=True)
    client = MlflowClient(tracking_uri=f"sqlite:///{db.resolve()}")
    sweeps, cluster = client.create_experiment("demo-sweeps"), client.create_experiment("demo-cluster")
    rng = random.Random(seed)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=14)
    lines = [SACCT_HEADER]
    for i in range(runs):
        run = demo_run(rng)
        t0 = start + timedelta(days=13 * i / runs)
        t1 = t0 + timedelta(hours=run["hours"])
        series = [[run["peak_mb"] * f * rng.uniform(0.95, 1.0) for f in (0.3, 1.0, 0.8)] for _ in range(run["gpus"])]
        job_id = str(50_000 + i) if i % 4 == 0 else None  # a quarter of the runs ran under Slurm
        tags = run["tags"] | ({"slurm_job_id": job_id} if job_id else {})
        log_run(client, cluster if job_id else sweeps, start_ms=int(t0.timestamp() * 1000),
                end_ms=int(t1.timestamp() * 1000), status=run["status"], params=run["params"], tags=tags, gpu_mb=series)
        if job_id:
            lines.append(_sacct_line(job_id, run, t0, t1))
    now = datetime.now(UTC).replace(microsecond=0)
    for i in range(12):  # waiting in the queue: no run yet; the submit script wrote the features into the Comment
        run = demo_run(rng)
        lines.append(_sacct_line(str(60_000 + i), run, now, None))
    sacct.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return db, sacct


def _sacct_line(job_id: str, run: dict, t0: datetime, t1: datetime | None) -> str:
    """One job line as `sacct --parsable2` prints it (times in UTC); `t1` None: the job is pending."""
    when = lambda t: t.strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731  (sacct prints local time: TZ=UTC here)
    tres = f"billing=8,cpu=8,gres/gpu:a100={run['gpus']},gres/gpu={run['gpus']},mem=64G,node=1"
    if t1 is None:
        p = run["params"]
        comment = json.dumps({"model_type": p["model"], "batch_size": p["batch_size"], "learning_rate": p["lr"],
                              "optimizer": p["optimizer"], "num_layers": p["num_layers"], "iterations": p["max_steps"],
                              "precision": p["precision"], "params_million": p["num_params"] / 1e6})
        return "|".join([job_id, f"train-{run['model'].lower()}", "demo", "gpu-a100", run["tags"]["team"], "alice",
                         "PENDING", "0:0", when(t0), "Unknown", "Unknown", "00:00:00", "", tres, "", "", comment])
    state = {"FINISHED": "COMPLETED", "FAILED": "FAILED", "KILLED": "CANCELLED by 1234"}[run["status"]]
    seconds = int((t1 - t0).total_seconds())
    elapsed = f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    gpumem = f"gres/gpumem={int(run['peak_mb'] * 1e6 / 2**20)}M"  # one GPU's peak, in MiB as Slurm prints it
    code = "0:0" if run["status"] == "FINISHED" else "1:0"
    return "|".join([job_id, f"train-{run['model'].lower()}", "demo", "gpu-a100", run["tags"]["team"], "alice", state,
                     code, when(t0 - timedelta(minutes=5)), when(t0), when(t1), elapsed, tres, tres, gpumem, "", ""])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--runs", type=int, default=240)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    db, sacct = write_demo(args.folder, args.runs, args.seed)
    print(f"wrote {db} (experiments demo-sweeps and demo-cluster, {args.runs} runs) and {sacct}")


if __name__ == "__main__":
    main()
