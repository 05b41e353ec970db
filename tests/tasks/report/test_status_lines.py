"""What the read-only commands print, rendered from typed records (`tasks/report/render.py`): `gpucast status`'s
Prefect part and planners' copy, `gpucast backtest`'s summary. No Prefect, no warehouse."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from gpucast.records.results import BacktestResult, FlowRunLine, ScheduledRun
from gpucast.tasks.report import render

AT = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)


def test_the_flow_runs_say_the_next_run_and_a_failed_runs_step():
    ok = FlowRunLine(flow="nightly", run="bold-fox", state="Completed", started=AT, seconds=61.0, id="1")
    failed = FlowRunLine(flow="nightly", run="calm-owl", state="Failed", started=None, seconds=0.5, id="2",
                         failed_step="score-target", error=None)
    text = render.flow_runs_lines([ok, failed], [ScheduledRun("nightly", "nightly", AT)])
    assert text.splitlines() == [
        "Next scheduled run: nightly/nightly at 2026-11-28 02:00 UTC",
        "Recent flow runs (newest first):",
        "- nightly          Completed  2026-11-28 02:00:00     61.0 s  bold-fox (1)",
        "- nightly          Failed     not started      0.5 s  calm-owl (2)",
        "    failed step: score-target; error: ?"]
    assert render.flow_runs_lines([], []).splitlines() == [
        "Next scheduled run: none (no deployment schedule on this Prefect API; docs/operations.md 'Scheduling the nightly run')",
        "Recent flow runs: none recorded by this Prefect API yet."]


def test_the_planners_copy_lists_its_problems_and_repairs_made_printable():
    text = render.published_copy_lines(Path("/p.duckdb"), ["a\nb"], [("today", "c")], lambda s: s.replace("\n", "\\n"))
    assert text == ("\n\nPlanners' copy (/p.duckdb and its forecast files): 1 problem(s) now:\n- a\\nb\n"
                    "Found damaged and repaired by the last publishes (newest first):\n- today: c")
    assert render.published_copy_lines(Path("/p.duckdb"), [], [], str).endswith("as the last publish wrote it")


def test_the_backtest_summary_says_when_there_is_nothing_to_backtest():
    empty = BacktestResult(window_start=None, jobs=0, forecast=0, not_forecast=0)
    assert render.backtest_text(empty, None, 7, Path("/p")) == "no completed jobs in the warehouse yet: nothing to backtest"
    counts = BacktestResult(window_start=AT, jobs=3, forecast=2, not_forecast=1)
    text = render.backtest_text(counts, pl.DataFrame({"target": ["t"], "jobs": [3]}), 7, Path("/p"))
    assert text.startswith("backtest of the jobs completed since 2026-11-28 02:00 UTC (7 days): 3 job x target pairs, "
                           "2 forecast before they ran, 1 not forecast; published to /p\n")
