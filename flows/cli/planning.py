"""What planners act on: plan (GPUs needed vs owned), demand (the arrivals' forecast), site (their page)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpucast.flows.cli.options import _csv
from gpucast.flows.settings import Settings


def _plan(args: argparse.Namespace, s: Settings) -> int:
    from gpucast.flows.plan import capacity_plan
    from gpucast.records.scenario import load_scenarios
    from gpucast.tasks.plan.arrivals import by_day
    from gpucast.tasks.plan.capacity import first_day
    from gpucast.tasks.report.render import scenario_lines, text_table

    files = tuple(sc for path in args.scenario or () for sc in load_scenarios(Path(path)))  # a bad file: exit 2
    out = capacity_plan(gpu_types=_csv(args.gpu_types), storage=s.storage, planning=s.planning, scenario_files=files)
    rows = out.rows
    print(text_table(first_day(rows).select("day", "queue", "gpu_type", "jobs", "gpus_needed_p50", "gpus_needed_p90",
                                  "lower_bound_p90", "gpus_owned", "shortfall_p90")))
    print("every day, all queues: GPUs for the queued jobs (known) + the demand forecast's arrivals (expected)")
    print(text_table(by_day(rows)))
    print("whole plan: gpucast sql \"SELECT * FROM current_capacity_plan ORDER BY ALL\"; jobs that fit nowhere: "
          "current_unplaceable_jobs; co-location candidates: current_colocation")
    if out.scenarios is not None and out.scenarios["scenario"].n_unique() > 1:  # what-ifs drawn: side by side
        print("\n".join(scenario_lines(out.scenarios)))
    if out.note:  # what the plan lacks (no demand forecast, or one whose days miss the plan's): last, not lost
        print(f"note: {out.note}")
    return 0


def _demand(args: argparse.Namespace, s: Settings) -> int:
    from gpucast.flows.demand import demand_forecast
    from gpucast.tasks.demand.forecast import summary
    from gpucast.tasks.report.render import text_table

    out = demand_forecast(storage=s.storage, planning=s.planning)
    print(text_table(summary(out.forecast).select("queue", "gpu_type", "day1_p10", "day1_p50", "day1_p90", "all_days_p50", "jobs_p50",
                                  "method", "jobs_method", "fallback_reason")))
    print(f"GPU-hours a day from {out.history_end} + 1 (day1) and over {out.days} day(s) (all_days); every day: "
          "gpucast sql \"SELECT * FROM current_demand_forecast ORDER BY ALL\"; how good it is: "
          "gpucast sql \"SELECT * FROM demand_backtest_summary WHERE queue IS NULL ORDER BY horizon\"")
    return 0


def _site(args: argparse.Namespace, settings: Settings) -> int:
    from gpucast.flows.plan import write_site

    print(f"wrote {write_site(settings.storage, Path(args.out) if args.out else None, artifact=False)}")
    return 0
