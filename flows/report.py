"""What the read-only commands show: the training report with its charts, and on-call's status.

Queries come from `warehouse/queries.py`, rendering from `tasks/report/render.py`; this module only
wires the two (and the registry's saved test predictions) for the CLI.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from gpucast.flows.settings import Storage
from gpucast.tasks.learn.models import store
from gpucast.tasks.report import render
from gpucast.warehouse import queries


def write_train_report(storage: Storage, run_id: str | None, out: Path | None) -> tuple[str, list[Path]]:
    """The Markdown report and charts of a train run (default: the latest successful one)."""
    run_id = run_id or queries.latest_train_run(storage.query_path)
    summary, champions = queries.train_tables(storage.query_path, run_id)
    out = out or storage.reports_dir / run_id
    out.mkdir(parents=True, exist_ok=True)
    text = render.train_markdown(run_id, summary, champions)
    (out / "report.md").write_text(text)
    written = [out / "report.md"]
    for champ in champions.filter(pl.col("skipped_reason").is_null()).iter_rows(named=True):
        written.append(render.bar_chart(summary, champ["target"], out / f"metrics_{champ['target']}.png"))
        predictions = store.read_test_predictions(Path(champ["model_dir"]))
        if predictions is not None:
            png = render.predicted_vs_actual(predictions, champ["target"], out / f"pred_vs_actual_{champ['target']}.png")
            if png:
                written.append(png)
    return text, written


def warehouse_status(storage: Storage, limit: int, backtest_days: int) -> str:
    """Recent runs, failures and rejected files, from the planners' copy (or the working file)."""
    if not storage.query_path.exists():
        return f"no warehouse at {storage.db_path} yet"
    frames = queries.status_frames(storage.query_path, limit, backtest_days)
    return render.status_text(_masked(frames), storage.query_path) + published_copy_text(storage.published_path)


def _masked(frames: dict[str, pl.DataFrame | None]) -> dict[str, pl.DataFrame | None]:
    """Every text cell with any URI's secrets masked (`redact`), before the tables cut a long one short (a cut could
    hide the `@` that marks a password). A guard: the warehouse's own rows are masked when stored, and those of an
    older gpucast once (`warehouse/schema.py` `redact_stored`); a copy published before that may still hold them."""
    from gpucast.warehouse.errors import redact

    text = pl.col(pl.String).map_elements(redact, return_dtype=pl.String, skip_nulls=True)
    return {name: None if df is None else df.with_columns(text) for name, df in frames.items()}


def published_copy_text(published: Path) -> str:
    """What is damaged now in the planners' copy, and what the last publishes found damaged and repaired
    (`warehouse/publish.py` `copy_health`); empty before the first publish."""
    from gpucast.warehouse.errors import printable
    from gpucast.warehouse.publish import copy_health

    if not published.exists():
        return ""
    health = copy_health(published)
    lines = [f"Planners' copy ({published} and its forecast files): "
             + (f"{len(health.problems)} problem(s) now:" if health.problems else "as the last publish wrote it")]
    lines += [printable(f"- {problem}") for problem in health.problems]
    if health.repairs:
        lines.append("Found damaged and repaired by the last publishes (newest first):")
        lines += [printable(f"- {when}: {what}") for when, what in health.repairs]
    return "\n\n" + "\n".join(lines)


def capacity_summary(storage: Storage) -> str:
    """The capacity the pending queue needs per queue, the plan's days (queued + expected arrivals), and the
    champions (after a nightly run)."""
    from gpucast.tasks.plan.arrivals import by_day

    capacity, champions, plan = queries.capacity_summary(storage.query_path)
    days = ("" if plan.is_empty() else "\n\nGPUs needed every day of the plan, all queues: the queued jobs (known) + the "
            "demand forecast's arrivals (expected) (current_capacity_plan):\n" + render.text_table(by_day(plan)))
    return ("\nCapacity needed by the pending queue (capacity_daily, summed over days):\n" + render.text_table(capacity)
            + days + "\n\nChampions (current_champions; metrics from the run that trained each):\n" + render.text_table(champions) + "\n")


def backtest_text(storage: Storage, backtest_days: int) -> str:
    """Recompute the backtest window, publish it, and say how every model did on it (`gpucast backtest`)."""
    from gpucast.flows.backtest import refresh_backtest
    from gpucast.warehouse import backtest, db
    from gpucast.warehouse.publish import publish_snapshot

    now = datetime.now(UTC)  # this run's clock: the window never starts after it (warehouse/backtest.py)
    counts = refresh_backtest(storage, backtest_days, now)
    publish_snapshot(storage)  # planners read forecast_backtest in the published copy (an empty window included)
    if counts.window_start is None:
        return "no completed jobs in the warehouse yet: nothing to backtest"
    with db.writer(storage) as con:
        table = backtest.summary(con, backtest_days, now)
    return (f"backtest of the jobs completed since {counts.window_start:%Y-%m-%d %H:%M} UTC ({backtest_days} "
            f"days): {counts.jobs:,} job x target pairs, {counts.forecast:,} forecast before they ran, "
            f"{counts.not_forecast:,} not forecast; published to {storage.published_path}\n" + render.text_table(table))
