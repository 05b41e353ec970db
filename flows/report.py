"""What the read-only commands show: the training report with its charts, and on-call's status.

Queries come from `warehouse/queries.py`, rendering from `tasks/report/render.py`; this module only
wires the two (and the registry's saved test predictions) for the CLI.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from gpucast.tasks.learn.models import store
from gpucast.tasks.report import render
from gpucast.warehouse import queries
from gpucast.warehouse.settings import Settings


def write_train_report(settings: Settings, run_id: str | None, out: Path | None) -> tuple[str, list[Path]]:
    """The Markdown report and charts of a train run (default: the latest successful one)."""
    run_id = run_id or queries.latest_train_run(settings.query_path)
    summary, champions = queries.train_tables(settings.query_path, run_id)
    out = out or settings.reports_dir / run_id
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


def warehouse_status(settings: Settings, limit: int) -> str:
    """Recent runs, failures and rejected files, from the planners' copy (or the working file)."""
    if not settings.query_path.exists():
        return f"no warehouse at {settings.db_path} yet"
    frames = queries.status_frames(settings.query_path, limit, settings.backtest_days)
    return render.status_text(frames, settings.query_path)


def capacity_summary(settings: Settings) -> str:
    """The capacity the pending queue needs per queue, and the champions (after a nightly run)."""
    capacity, champions = queries.capacity_summary(settings.query_path)
    return ("\nCapacity needed by the pending queue (capacity_daily, summed over days):\n" + render.text_table(capacity)
            + "\n\nChampions (model_leaderboard):\n" + render.text_table(champions) + "\n")


def run_backtest(settings: Settings) -> str:
    """Recompute the backtest window and say how every model did on it (`gpucast backtest`)."""
    from datetime import UTC, datetime

    from gpucast.warehouse import backtest, db

    with db.writer(settings) as con:
        counts = backtest.run(con, settings.backtest_days, datetime.now(UTC))
        table = backtest.summary(con, settings.backtest_days)
    if counts["window_start"] is None:
        return "no completed jobs in the warehouse yet: nothing to backtest"
    return (f"backtest of the jobs completed since {counts['window_start']:%Y-%m-%d %H:%M} UTC ({settings.backtest_days} "
            f"days): {counts['jobs']:,} job x target pairs, {counts['forecast']:,} forecast before they ran, "
            f"{counts['not_forecast']:,} not forecast\n" + render.text_table(table))
