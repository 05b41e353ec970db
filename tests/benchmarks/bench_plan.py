"""Capacity planning at scale: 1M pending jobs over 14 days and 4 queues, timed, against its lower bound.

The jobs are the simulator's (`tasks/simulate.py`: configurations, queues, GPU counts, and what each
job would measure, memory and run time), submitted evenly over 14 days; a fourth queue (`h100-80g`)
takes a fifth of the A100-80GB queue's jobs. Their "forecasts" are the simulated outcomes: P50 = the
run time, P90 = 1.3 x it, memory = the P90 request of the simulated peak (`safe_request_gb`), so the
benchmark times the plan alone, with no model in it. Printed: the plan's wall time (goal < 60 s) and,
per quantile, the GPUs needed summed over days, queues and GPU types against the sum of the lower
bounds: the exclusive one (GPU-hours / 24, the issue's) and the shared one (memory x time, the true
bound when GPUs are shared; goal: within 10% of it), with each queue's figures.

With `--scenarios` (issue 53, item 4) it then times the plan as the flow makes it (the packing, the expected
arrivals of a demand forecast of each queue's mean daily GPU-hours, the pending jobs' expected starts and the days'
waits: `tasks/plan/scenarios.py` plan_once) for the baseline and for each of four what-if scenarios planned beside
it from the same inputs (`plan_scenarios`: the packings of queues whose GPU types did not change are shared), each
against the baseline's time (goal <= 2x).

With `--compute` the jobs also carry their simulated sustained GFLOP/s as `gflops_p50` and their precision, so
jobs share a GPU only while their compute fits it too (tasks/plan/capacity.py, "Compute"); the shared bound is still
then the larger of memory x time and compute x time.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_plan.py [--jobs 1000000] [--days 14] [--scenarios] [--compute]
"""

from __future__ import annotations

import argparse
import time
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records.inventory import load_inventory
from gpucast.tasks.learn.score import safe_request_gb
from gpucast.tasks.plan.capacity import plan_capacity
from gpucast.tasks.simulate import simulate_jobs

START = date(2026, 11, 23)
INVENTORY = """queues:
  a100-80g: [{gpu_type: A100-80GB, count: 400}]
  h100-80g: [{gpu_type: H100-80GB, count: 100}]
  a100-40g: [{gpu_type: A100-40GB, count: 300}]
  l4-24g: [{gpu_type: L4-24GB, count: 200}]
"""


def pending_jobs(n: int, days: int, seed: int = 0, compute: bool = False) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    sim = simulate_jobs(n, rng, START, 1.0, keep_outcomes=True)
    queue = sim[c.QUEUE].to_numpy().astype(object)
    queue[(queue == "a100-80g") & (rng.random(n) < 0.2)] = "h100-80g"
    hours = sim["_runtime_h"].to_numpy()
    return pl.DataFrame({
        "job_id": sim[c.JOB_ID], "queue": queue.tolist(),
        "day": [START + timedelta(days=int(d)) for d in rng.integers(0, days, n)],
        "gpu_count": sim[c.GPU_COUNT], "mem_gb": safe_request_gb(sim["_mem_gb"].to_numpy()),
        "hours_p50": hours, "hours_p90": hours * 1.3,
        **({"gflops_p50": sim["_gflops"], "precision": sim[c.PRECISION]} if compute else {}),
    })


SCENARIOS = """scenarios:
  - name: buy 100 H100
    add: [{queue: h100-80g, gpu_type: H100-80GB, count: 100}]
  - name: retire half the L4s
    remove: [{queue: l4-24g, gpu_type: L4-24GB, count: 100}]
  - name: a100-40g onto A100-80GB
    move: [{queue: a100-40g, gpu_type: A100-80GB}]
  - name: a100-80g +30%, 21 days
    scale: [{queue: a100-80g, factor: 1.3}]
    plan_days: 21
"""


def time_scenarios(jobs: pl.DataFrame, inventory, days: int) -> None:
    """The baseline as the flow plans it, then each scenario beside it, timed (see the module doc)."""
    from gpucast.records.scenario import load_scenarios
    from gpucast.tasks.plan import scenarios
    from gpucast.tasks.plan.arrivals import FORECAST_SCHEMA, PACKING_SCHEMA
    from gpucast.tasks.plan.starts import RUNNING_SCHEMA

    daily = jobs.group_by("queue").agg((pl.col("hours_p50") * pl.col("gpu_count")).sum() / days)
    forecast = pl.DataFrame([(START + timedelta(days=d), q, "unknown", h, 1.3 * h) for q, h in daily.rows()
                             for d in range(3 * days)], schema=FORECAST_SCHEMA, orient="row")
    inputs = scenarios.PlanInputs(jobs, pl.DataFrame(schema=RUNNING_SCHEMA), forecast,
                                  pl.DataFrame(schema=PACKING_SCHEMA), START, None, 80.0)
    path = Path("/tmp") / f"gpucast-bench-scenarios-{time.time_ns()}.yaml"
    path.write_text(SCENARIOS)
    drawn = load_scenarios(path)
    path.unlink()
    cache: dict = {}
    t0 = time.perf_counter()
    baseline = scenarios.plan_once(inputs, inventory, days, cache=cache)
    base_s = time.perf_counter() - t0
    print(f"baseline as the flow plans it (pack, expected arrivals, starts, waits): {base_s:.1f} s")
    for s in drawn:
        t0 = time.perf_counter()
        rows = scenarios.plan_scenarios(inputs, inventory, days, baseline, (s,), cache)
        took = time.perf_counter() - t0
        mine = rows.filter(pl.col("scenario") == s.name)
        print(f"  scenario {s.name!r} ({s.changes()}): {took:.1f} s = {took / base_s:.2f}x the baseline (goal <= 2x: "
              f"{'met' if took <= 2 * base_s else 'NOT met'}); {mine['status'][0]}, GPU-days short at P90 "
              f"{mine['gpus_short_p90'].sum():,} vs the baseline's "
              f"{rows.filter(pl.col('scenario') == 'baseline')['gpus_short_p90'].sum():,}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--scenarios", action="store_true", help="then time the what-if scenarios against the baseline")
    ap.add_argument("--compute", action="store_true", help="jobs carry their compute forecast (shares of a GPU)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    jobs = pending_jobs(args.jobs, args.days, compute=args.compute)
    print(f"simulated {jobs.height:,} pending jobs over {args.days} days, "
          f"{jobs['queue'].n_unique()} queues in {time.perf_counter() - t0:.1f} s", flush=True)
    path = Path("/tmp") / f"gpucast-bench-plan-{time.time_ns()}.yaml"
    path.write_text(INVENTORY)
    inventory = load_inventory(path)
    path.unlink()
    t0 = time.perf_counter()
    plan = plan_capacity(jobs, inventory, START, args.days)
    seconds = time.perf_counter() - t0
    rows = plan.rows
    print(f"plan: {seconds:.1f} s for {plan.jobs:,} jobs ({plan.unplaceable.height:,} fit no GPU of their queue), "
          f"{rows.height} day x queue x GPU rows; goal < 60 s: {'met' if seconds < 60 else 'NOT met'}")
    for q in ("p50", "p90"):
        need, bound, shared = (rows[f"{k}_{q}"].sum() for k in ("gpus_needed", "lower_bound", "shared_bound"))
        print(f"  {q.upper()}: GPUs needed {need:,} (GPU-days) vs lower bound (exclusive GPU-hours / 24) {bound:,}: "
              f"{need / bound:.3f}x; vs shared bound (memory or compute x time) {shared:,}: {need / shared:.3f}x "
              f"(goal within 10% of its bound: {'met' if need / shared <= 1.10 else 'NOT met'})")
    per_queue = rows.group_by("queue", "gpu_type").agg(
        pl.col("jobs").sum(), pl.col("gpus_needed_p90", "lower_bound_p90", "shared_bound_p90").sum(),
        pl.col("gpus_needed_p90").max().alias("peak_day_p90"), pl.col("gpus_owned").first()).sort("queue")
    with pl.Config(tbl_rows=20, tbl_cols=20, tbl_width_chars=200, tbl_hide_dataframe_shape=True):
        print(per_queue.with_columns((pl.col("gpus_needed_p90") / pl.col("shared_bound_p90")).round(3).alias("vs_shared")))
    if args.scenarios:
        time_scenarios(jobs, inventory, args.days)


if __name__ == "__main__":
    main()
