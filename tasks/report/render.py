"""Everything gpucast shows people, rendered from frames and dicts: one module.

* text tables (the CLI: `tables.py`, which prints DuckDB's rows without Polars too, for `gpucast status` and
  `sql`), Markdown tables (Prefect artifacts), CSV and JSON (`gpucast sql`);
* the training report: the seed's Table 3 layout (models x MSE/RMSE/MAE/MAPE/R², per target), a
  bar chart of those metrics per model and a predicted-vs-actual plot;
* the nightly run's report (the on-call status text: `tables.py`).
The data comes from the warehouse's queries (`warehouse/queries.py`) or from a run's own results;
nothing here reads a database or a file.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from gpucast.tasks.learn.models.registry import NN
from gpucast.tasks.report.literal import markdown_frame, markdown_text, visible_frame

# The CLI's text tables and on-call's status text live in tables.py, which needs no Polars (`gpucast status` and `sql`
# print without it, issue 52 item 4); they are read here too, as before
from gpucast.tasks.report.tables import (  # noqa: F401
    TABLE_MAX_WIDTH,
    TABLE_ROWS,
    published_copy_lines,
    rows_line,
    status_text,
    text_table,
)

if TYPE_CHECKING:  # the results' types, for the signatures only: their module loads numpy, which `gpucast sql` and
    # `status` do not need (the plan's modules below are imported where used, for the same reason)
    from gpucast.records.results import BacktestResult, FlowRunLine, NightResult, PlanResult, ScheduledRun

METRICS = ("mse", "rmse", "mae", "mape", "r2")


def markdown_table(df: pl.DataFrame) -> str:
    """A frame as a Markdown table (Prefect artifacts); strings shown literally (`literal.markdown_text`)."""
    df = markdown_frame(df)
    with pl.Config(tbl_formatting="MARKDOWN", tbl_rows=TABLE_ROWS, tbl_cols=30, fmt_str_lengths=80, float_precision=3,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True, tbl_width_chars=400):
        return str(df)


PIECE_BYTES = 8 * 10**6  # csv and json are rendered and printed about this much of the result at a time


def query_result_parts(df: pl.DataFrame, fmt: str = "table", total: int | None = None) -> Iterator[str]:
    """A query's result as `gpucast sql` prints it, in pieces: csv or json (every row given) rendered
    about PIECE_BYTES of the result at a time, so that printing holds one piece's text, never the whole
    result's (a 100 MB result took 480 MB printed whole); or a table of every row given, whole strings
    and headers (up to Polars' widest table, TABLE_MAX_WIDTH characters; csv and json have no limit),
    and a last line with the row count that says when `total` (the query's row count) is more than was shown."""
    if fmt in ("csv", "json"):
        step = max(1, min(df.height, PIECE_BYTES * df.height // max(1, df.estimated_size())))
        starts = range(0, df.height, step)
        if fmt == "csv":
            for start in starts or [0]:
                yield df.slice(start, step).write_csv(include_header=start == 0)
            return
        if not df.height:
            yield df.write_json() + "\n"
            return
        for start in starts:
            yield ("[" if start == 0 else ",") + df.slice(start, step).write_json()[1:-1]
        yield "]\n"
        return
    total = df.height if total is None else total
    # a table: control characters as escapes (csv and json carry the data as it is); a string is shown up
    # to TABLE_MAX_WIDTH characters, so only that much of it is escaped and laid out
    df = visible_frame(df.with_columns(pl.col(pl.String).str.slice(0, TABLE_MAX_WIDTH + 1)))
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=TABLE_MAX_WIDTH, fmt_str_lengths=TABLE_MAX_WIDTH,
                   fmt_table_cell_list_len=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        table = str(df)
    yield f"{table}\n({rows_line(df.height, total)})\n"


def flow_runs_lines(rows: list[FlowRunLine], upcoming: list[ScheduledRun]) -> str:
    """`gpucast status`'s Prefect part: the next scheduled run, then the recent flow runs, newest first, a failed
    one with its failed step and error (`flows/status.py` reads them)."""
    lines = []
    if upcoming:
        nxt = upcoming[0]
        lines.append(f"Next scheduled run: {nxt.flow}/{nxt.deployment} at {nxt.at:%Y-%m-%d %H:%M} UTC")
    else:
        lines.append("Next scheduled run: none (no deployment schedule on this Prefect API; "
                     "docs/operations.md 'Scheduling the nightly run')")
    if not rows:
        return "\n".join([*lines, "Recent flow runs: none recorded by this Prefect API yet."])
    lines.append("Recent flow runs (newest first):")
    for r in rows:
        started = r.started.strftime("%Y-%m-%d %H:%M:%S") if r.started else "not started"
        lines.append(f"- {r.flow:<16} {r.state:<10} {started}  {r.seconds:>7.1f} s  {r.run} ({r.id})")
        if r.failed_step or r.error:
            lines.append(f"    failed step: {r.failed_step or '?'}; error: {r.error or '?'}")
    return "\n".join(lines)


def capacity_summary(capacity: pl.DataFrame, champions: pl.DataFrame, plan: pl.DataFrame) -> str:
    """`gpucast plan`'s and the nightly command's summary: the capacity the pending queue needs per queue, the
    plan's days (queued + expected arrivals), and the champions."""
    from gpucast.tasks.plan.arrivals import by_day  # (the plan's modules: numpy; not for `status` or `sql`)

    days = ("" if plan.is_empty() else "\n\nGPUs needed every day of the plan, all queues: the queued jobs (known) + the "
            "demand forecast's arrivals (expected) (current_capacity_plan):\n" + text_table(by_day(plan)))
    return ("\nCapacity needed by the pending queue (capacity_daily, summed over days):\n" + text_table(capacity)
            + days + "\n\nChampions (current_champions; metrics from the run that trained each):\n" + text_table(champions) + "\n")


def backtest_text(counts: BacktestResult, table: pl.DataFrame | None, backtest_days: int, published: Path) -> str:
    """`gpucast backtest`'s summary: the window's counts and how every model did on it (`table`, the window's
    summary; None without a completed job)."""
    if counts.window_start is None or table is None:
        return "no completed jobs in the warehouse yet: nothing to backtest"
    return (f"backtest of the jobs completed since {counts.window_start:%Y-%m-%d %H:%M} UTC ({backtest_days} "
            f"days): {counts.jobs:,} job x target pairs, {counts.forecast:,} forecast before they ran, "
            f"{counts.not_forecast:,} not forecast; published to {published}\n" + text_table(table))


def _fmt(v: float | None, spread: float | None = None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    text = f"{v:.4g}"
    return text + (f" ± {spread:.2g}" if spread is not None and not math.isnan(spread) else "")


def train_markdown(run_id: str, summary: pl.DataFrame, champions: pl.DataFrame) -> str:
    """`summary`: target, model, split, metric means and `<metric>_std`, repeats, train_seconds."""
    lines = [f"# Training run {run_id}", "",
             "Out-of-fold metrics (each row forecast by a fit that never saw it), mean ± standard deviation over the "
             "folds of a repeated 3-fold; MAPE in %; the planner loss in the target's units (sqrt(mean(w err²)), "
             "w = 3 on under-forecasts). The champion (**bold**) is chosen on the pooled out-of-fold planner loss, "
             "never worse than the plain LightGBM.", ""]
    for champ in champions.iter_rows(named=True):
        target = champ["target"]
        lines.append(f"## {target}")
        if champ["skipped_reason"]:
            lines += [f"Skipped: {champ['skipped_reason']}", ""]
            continue
        rows = summary.filter((pl.col("target") == target) & (pl.col("split") == "test")).sort("rmse")
        lines.append(f"{champ['labelled_rows']:,} labelled jobs; champion: **{champ['model']}**")
        if champ.get("choice_reason"):
            lines.append(f"Why: {champ['choice_reason']}")
        lines.append("")
        lines.append("| model | planner loss | MSE | RMSE | MAE | MAPE % | R² | train s | repeats |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for r in rows.iter_rows(named=True):
            name = f"**{r['model']}**" if r["model"] == champ["model"] else r["model"]
            cells = [_fmt(r[m], r.get(f"{m}_std")) for m in ("planner_loss", *METRICS)]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['train_seconds']:.1f} | {r['repeats']} |")
        lines.append("")
    return "\n".join(lines)


def bar_chart(summary: pl.DataFrame, target: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary.filter((pl.col("target") == target) & (pl.col("split") == "test")).sort("rmse")
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 4))
    for ax, m in zip(axes, METRICS, strict=True):
        ax.barh(rows["model"].to_list(), rows[m].to_list(), xerr=rows[f"{m}_std"].fill_null(0).to_list())
        ax.set_title(m.upper() + (" %" if m == "mape" else ""))
        ax.invert_yaxis()
    fig.suptitle(f"{target}: test metrics per model (mean ± sd over repeats)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def predicted_vs_actual(predictions: pl.DataFrame, target: str, path: Path, model: str = NN) -> Path | None:
    if model not in predictions.columns:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    actual, pred = predictions["actual"].to_numpy(), predictions[model].to_numpy()
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.scatter(actual, pred, s=6, alpha=0.4)
    lo, hi = float(min(actual.min(), pred.min())), float(max(actual.max(), pred.max()))
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"actual {target}")
    ax.set_ylabel(f"predicted {target}")
    ax.set_title(f"{model} on the test rows")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _backtest_lines(back: BacktestResult) -> list[str]:
    lines = ["", "## Backtest", f"{back.jobs:,} completed job x target pairs in the window (since "
             f"{back.window_start}): {back.forecast:,} forecast before they ran, {back.not_forecast:,} not forecast"]
    for r in back.champions:
        # the champion in place before this night's training, judged on the window's jobs it forecast (newcomer 27 P5:
        # "champion X" read as the model scoring tonight, which a night's training may have replaced)
        lines.append(f"- {r.target}: {r.model} (train run `{r.train_run_id}`), on the {r.jobs:,} jobs it forecast: P90 "
                     f"covered {r.p90_coverage:.0%} and [P10, P90] {r.p10_p90_coverage:.0%}; MAPE {r.mape:.1f}%")
    return lines


def capacity_plan_lines(plan: PlanResult) -> list[str]:
    """The capacity plan as the nightly report and the demo show it: the plan run in one line, then its
    first day per queue and GPU type (a Markdown table)."""
    from gpucast.tasks.plan.capacity import first_day  # (the plan's modules: numpy; not for `status` or `sql`)

    lines = [f"plan run `{plan.plan_run_id}`: {plan.jobs:,} pending jobs over {plan.days} day(s) from "
             f"{plan.start_day}; {plan.unknown_size_jobs:,} of unknown size, {plan.unplaceable_jobs:,} fit no "
             "GPU of their queue" + (f" ({plan.note})" if plan.note else "")]
    rows = plan.rows
    if rows.height:
        first = first_day(rows).select(
            "queue", "gpu_type", "jobs", "gpus_needed_p50", "gpus_needed_p90", "lower_bound_p90", "gpus_owned",
            "shortfall_p90")
        lines += ["", markdown_table(first)]
    return lines


def scenario_table(rows: pl.DataFrame) -> pl.DataFrame:
    """The what-if scenarios side by side (one row each, the baseline first), from `plan_scenarios`' day rows: GPU-days
    short at P90 over the plan and its worst day, jobs that fit no GPU (and the GPUs they hold on the first day) or
    cannot start, the first day's and the worst day's expected wait, the GPU-days short against the baseline's, and
    the one figure to compare by: `gpu_days_unmet_p90`, the GPU-days short at P90 plus the GPU-days of the jobs that
    fit no GPU (`gpus_unplaceable`, per day while they would run: tasks/plan/scenarios.py), and its difference from the
    baseline's over the days both plan (`gpu_days_unmet_vs_baseline`; a scenario of another `plan_days` is compared on
    the days in common only). Adding GPUs to a queue the inventory lists never raises it, where GPU-days short can
    rise as jobs that fitted no GPU start to fit (review 64b S2-1, 65a S3-1, 66a S2-1). `day1_unmet_vs_baseline`: the
    same on the first day only. `their_gpus`: the GPUs the jobs that fit no GPU hold on the first day. Null where
    either side has no `gpus_unplaceable` (days recorded before session 15); days recorded before session 17 carried
    the plan-wide figure on every day, so their sums over-count it."""
    from gpucast.records.scenario import BASELINE

    if "gpus_unplaceable" not in rows.columns:  # days recorded before session 15
        rows = rows.with_columns(pl.lit(None, pl.Int64).alias("gpus_unplaceable"))
    planned = rows.filter(pl.col("status") == "planned").with_columns(
        (pl.col("gpus_short_p90") + pl.col("gpus_unplaceable")).alias("_unmet"))  # (null when `gpus_unplaceable` is)
    baseline = planned.filter(pl.col("scenario") == BASELINE).select("day", pl.col("_unmet").alias("_baseline_unmet"))
    compared = planned.join(baseline, on="day", how="left", maintain_order="left").with_columns(
        (pl.col("_unmet") - pl.col("_baseline_unmet")).alias("_unmet_vs"))
    table = compared.group_by("scenario", maintain_order=True).agg(
        pl.col("status").first(), pl.col("changes").first(), pl.len().alias("days"),
        pl.col("gpus_short_p90").sum().alias("gpu_days_short_p90"),
        pl.col("gpus_short_p90").max().alias("worst_day_short_p90"),
        pl.col("unplaceable_jobs").first().alias("fit_no_gpu"),
        pl.col("gpus_unplaceable").sort_by("day").first().alias("their_gpus"),
        pl.col("jobs_without_start").first().alias("cannot_start"),
        pl.col("expected_wait_hours").sort_by("day").first().round(1).alias("wait_day1_h"),
        pl.col("longest_wait_hours").max().round(1).alias("worst_wait_h"),
        pl.col("gpus_short_p90_vs_baseline").sum().alias("gpu_days_short_vs_baseline"),
        _sum_or_null("_unmet").alias("gpu_days_unmet_p90"),
        _sum_or_null("_unmet_vs").alias("gpu_days_unmet_vs_baseline"),
        pl.col("_unmet_vs").sort_by("day").first().alias("day1_unmet_vs_baseline"),
        pl.col("reason").first())  # a planned scenario's: what its plan notes that the baseline's does not
    failed = rows.filter(pl.col("status") == "failed").select("scenario", "status", "changes", "reason")
    return pl.concat([table, failed], how="diagonal_relaxed")


def _sum_or_null(name: str) -> pl.Expr:
    """The column's sum over its known rows; null where none is known (a sum of nothing known is not 0)."""
    return pl.when(pl.col(name).null_count() < pl.len()).then(pl.col(name).sum())


def scenario_lines(rows: pl.DataFrame) -> list[str]:
    """`gpucast plan`'s what-if part: the scenarios side by side, and where the days are."""
    return ["what if: each scenario planned beside the plan (the baseline) from the same forecasts",
            text_table(scenario_table(rows)),
            "every day: gpucast sql \"SELECT * FROM current_plan_scenarios ORDER BY scenario, day\""]


def page_line(page: str) -> str:
    return f"Planners' page: {page}"


def nightly_report(night: NightResult, error: str | None, board: pl.DataFrame | None = None,
                   totals: pl.DataFrame | None = None) -> str:
    """The nightly run's Markdown report from what each step returned (a step that did not run is None);
    on failure the report is built from those alone, so it never needs a working warehouse."""
    ingest, features, train, score = night.ingest, night.features, night.train, night.score
    lines = ["# gpucast nightly", "", f"**FAILED**: {markdown_text(error)}" if error else "**Succeeded**"]
    if ingest:
        lines += ["", "## Ingest", f"run `{ingest.run_id}`: {ingest.files} file(s), rows read {ingest.rows_read:,} = "
                  f"loaded {ingest.rows_loaded:,} + rejected {ingest.rows_rejected:,} + duplicate "
                  f"{ingest.rows_duplicate:,}; files rejected {ingest.files_rejected}"]
    if features:
        lines += ["", "## Features", f"{features.labelled_jobs:,} labelled jobs read, {features.pending:,} pending; "
                  "labelled per target: " + ", ".join(f"{t} {n:,}" for t, n in features.labelled.items())]
        if features.unknown_gpu_types:
            lines.append("GPU types not in the catalogue (kept; no peak throughput for them): " + ", ".join(
                f"{markdown_text(t)} ({n:,} jobs)" for t, n in features.unknown_gpu_types.items()))
        if features.unknown_layout_words:
            lines.append("Sharding, adapter, loss-precision, trained-module or kernel words nobody knew (kept as "
                         "`unknown`; forecast as no sharding, all weights trained, the loss on fp32 logits, no module "
                         "trained in full beside an adapter, the model's own kernels): "
                         + ", ".join(f"{f} ({n:,} jobs)" for f, n in features.unknown_layout_words.items()))
        if features.trace_statuses:
            lines.append("Traced prior, jobs naming an architecture: " + ", ".join(
                f"{markdown_text(t)} {n:,}" for t, n in features.trace_statuses.items()))
        if features.unknown_archs:
            lines.append("Architecture names the model zoo does not know (kept; analytic prior used): " + ", ".join(
                f"{markdown_text(t)} ({n:,} jobs)" for t, n in features.unknown_archs.items()))
    if night.backtest:
        lines += _backtest_lines(night.backtest)
    if train:
        lines += ["", "## Training", f"where: {train.where}; run `{train.train_run_id}`"]
        lines += [f"- {o.target}: tonight's best {o.champion}; gate: {o.decision}" for o in train.targets if o.decision]
        lines += [f"- {o.target}: {o.champion}: {markdown_text(o.choice_reason)}" for o in train.targets if o.choice_reason]
    if board is not None and board.height:
        lines += ["", "## Leaderboard (latest train run per target)", markdown_table(board)]
    if score:
        lines += ["", "## Forecasts", f"score run `{score.score_run_id}`: {score.forecasts:,} forecasts for "
                  f"{score.pending_jobs:,} pending jobs; {score.ood_forecasts:,} out of distribution "
                  "(each one's `ood_reason` says why and which estimate it got)"]
        if totals is not None:
            lines += ["", markdown_table(totals)]
    if plan := night.plan:
        lines += ["", "## Capacity plan", *capacity_plan_lines(plan)]
    if night.page:
        lines += ["", page_line(night.page)]
    if night.seconds:
        lines += ["", "## Time per step", ", ".join(f"{step} {s:,.1f} s" for step, s in night.seconds.items())]
    if night.warnings:
        lines += ["", "## Warnings", *[f"- {w}" for w in night.warnings]]
    return "\n".join(lines) + "\n"
