"""What the read-only commands show: the training report with its charts, and on-call's status.

Queries come from `warehouse/queries.py`, rendering from `tasks/report/render.py` (the status text from
`tasks/report/tables.py`, which needs no Polars: `gpucast status` prints DuckDB's rows, issue 52 item 4); this module only
wires the two (and the registry's saved test predictions) for the CLI.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gpucast.tasks.report import tables
from gpucast.warehouse import queries

if TYPE_CHECKING:  # (Polars and the renderer are imported where used: not for `status`)
    import polars as pl

    from gpucast.records.rows import Rows
    from gpucast.warehouse.concerns import Storage


def write_train_report(storage: Storage, run_id: str | None, out: Path | None) -> tuple[str, list[Path]]:
    """The Markdown report and charts of a train run (default: the latest successful one)."""
    import polars as pl

    from gpucast.tasks.learn.models import store  # (the models' module: numpy and the feature sets, not for `status`)
    from gpucast.tasks.report import render

    run_id = run_id or queries.latest_train_run(storage.query_path)
    summary, champions = queries.train_tables(storage.query_path, run_id)
    out = out or storage.reports_dir / run_id
    out.mkdir(parents=True, exist_ok=True)
    text = render.train_markdown(run_id, summary, champions)
    (out / "report.md").write_text(text)
    written = [out / "report.md"]
    for target, model_dir in champions.filter(pl.col("skipped_reason").is_null()).select("target", "model_dir").iter_rows():
        written.append(render.bar_chart(summary, target, out / f"metrics_{target}.png"))
        predictions = store.read_test_predictions(Path(model_dir))
        if predictions is not None:  # a model folder without saved test predictions: no scatter plot
            png = render.predicted_vs_actual(predictions, target, out / f"pred_vs_actual_{target}.png")
            if png:  # the network's column is there
                written.append(png)
    return text, written


def warehouse_status(storage: Storage, limit: int, backtest_days: int) -> str:
    """Recent runs, failures and rejected files, from the planners' copy (or the working file)."""
    if not storage.query_path.exists():
        return f"no warehouse at {storage.db_path} yet"
    frames = queries.status_tables(storage.query_path, limit, backtest_days)
    return (unpublished_text(storage, limit) + tables.status_text(_masked(frames), storage.query_path)
            + published_copy_text(storage.published_path))


def unpublished_text(storage: Storage, limit: int) -> str:
    """First, what the planners' copy cannot show: the warehouse's runs that failed, crashed or still run since the
    copy's newest run (review 85 S2-1: a failed night publishes nothing, and status showed the night before, all
    green); empty when there are none."""
    from gpucast.warehouse.errors import redact

    found = queries.unpublished_runs(storage, limit)
    if found is None or (not isinstance(found, str) and not found.height):
        return ""
    if isinstance(found, str):
        return f"Since the last publish: {found}\n\n"
    return (f"Runs since the last publish that have not succeeded: failed, crashed or still running ({storage.db_path}; "
            f"the planners' copy below does not hold them):\n{tables.text_table(tables.with_strings(found, redact))}\n\n")


def _masked(frames: dict[str, pl.DataFrame | Rows | None]) -> dict[str, pl.DataFrame | Rows | None]:
    """Every text cell with any URI's secrets masked (`redact`), before the tables cut a long one short (a cut could
    hide the `@` that marks a password). A guard: the warehouse's own rows are masked when stored, and those of an
    older gpucast once (`warehouse/schema.py` `redact_stored`); a copy published before that may still hold them."""
    from gpucast.warehouse.errors import redact

    return {name: None if df is None else tables.with_strings(df, redact) for name, df in frames.items()}


def published_copy_text(published: Path) -> str:
    """What is damaged now in the planners' copy, and what the last publishes found damaged and repaired
    (`warehouse/publish.py` `copy_health`); empty before the first publish."""
    from gpucast.warehouse.errors import printable
    from gpucast.warehouse.publish import copy_health

    if not published.exists():  # nothing published yet: nothing to say
        return ""
    health = copy_health(published)
    return tables.published_copy_lines(published, health.problems, health.repairs, printable, health.restored)


def capacity_summary(storage: Storage) -> str:
    """The capacity the pending queue needs per queue, the plan's days (queued + expected arrivals), and the
    champions (after a nightly run)."""
    from gpucast.tasks.report import render

    return render.capacity_summary(*queries.capacity_summary(storage.query_path))


def backtest_text(storage: Storage, backtest_days: int) -> str:
    """Recompute the backtest window, publish it, and say how every model did on it (`gpucast backtest`)."""
    from gpucast.flows.backtest import refresh_backtest
    from gpucast.tasks.report import render
    from gpucast.warehouse import backtest, db
    from gpucast.warehouse.publish import publish_snapshot

    now = datetime.now(UTC)  # this run's clock: the window never starts after it (warehouse/backtest.py)
    counts = refresh_backtest(storage, backtest_days, now)
    publish_snapshot(storage)  # planners read forecast_backtest in the published copy (an empty window included)
    table = None
    if counts.window_start is not None:  # the summary is read only when the window holds completed jobs
        with db.writer(storage) as con:
            table = backtest.summary(con, backtest_days, now)
    return render.backtest_text(counts, table, backtest_days, storage.published_path)
