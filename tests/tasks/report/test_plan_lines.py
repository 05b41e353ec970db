"""The capacity plan's lines, as the nightly report and the demo show them (`tasks/report/render.py`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import polars as pl

from gpucast.records.results import NightResult, PlanResult
from gpucast.tasks.report.render import capacity_plan_lines, nightly_report, page_line

ROWS = pl.DataFrame({
    "day": [date(2026, 11, 27), date(2026, 11, 27), date(2026, 11, 28)], "queue": ["a", "b", "a"],
    "gpu_type": ["A100", "H100", "A100"], "jobs": [4, 1, 2], "gpus_needed_p50": [2, 1, 1], "gpus_needed_p90": [3, 1, 2],
    "lower_bound_p90": [2, 1, 1], "gpus_owned": [2, 4, 2], "shortfall_p90": [1, 0, 0]})
PLAN = PlanResult(plan_run_id="plan-1", jobs=7, days=2, start_day=date(2026, 11, 27), unknown_size_jobs=1,
                  unplaceable_jobs=0, note=None, rows=ROWS)


def test_the_plan_is_one_line_then_its_first_day_per_queue_and_gpu_type():
    lines = capacity_plan_lines(PLAN)
    assert lines[0] == ("plan run `plan-1`: 7 pending jobs over 2 day(s) from 2026-11-27; 1 of unknown size, 0 fit no "
                        "GPU of their queue")
    table = lines[2].splitlines()
    assert lines[1] == "" and len(table) == 4  # header, rule, the first day's two rows (not the second day's)
    assert "| a " in table[2] and "| b " in table[3] and "shortfall_p90" in table[0]
    assert capacity_plan_lines(replace(PLAN, rows=ROWS.clear())) == lines[:1]  # no rows: no table
    assert capacity_plan_lines(replace(PLAN, note="no demand forecast"))[0].endswith(" (no demand forecast)")


def test_the_nightly_reports_plan_section_is_those_lines_then_the_page():
    report = nightly_report(NightResult(plan=PLAN, page="/site/index.html"), None)
    section = report.split("## Capacity plan\n", 1)[1]
    assert section.startswith("\n".join([*capacity_plan_lines(PLAN), "", page_line("/site/index.html")]))
