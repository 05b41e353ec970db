"""The one "stage the features" step: jobs read from the warehouse, their derived features added
(`tasks/learn/features.py`: the hardware context, the analytic priors, and the traced prior of the jobs
that name an architecture the model zoo knows, `tasks/learn/traced.py`), written as Parquet for the
steps after it. The nightly stages the labelled history and the pending jobs once for training and
scoring; `gpucast train` and `gpucast score` stage the part they need themselves, with the same task.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from prefect import get_run_logger, task

from gpucast.flows.settings import Storage, Tracing
from gpucast.records.results import FeaturesResult, FeatureSummary, TraceSummary
from gpucast.tasks.learn import features, traced
from gpucast.warehouse import db, training

HISTORY, PENDING = "history", "pending"


@task(name="stage-features")
def stage_features(storage: Storage, folder: Path, parts: tuple[str, ...] = (HISTORY, PENDING),
                   max_rows: int | None = None, tracing: Tracing | None = None, score_alone: bool = False) -> FeaturesResult:
    """Stage `parts` (the labelled `history`, at most `max_rows` recent jobs; the `pending` jobs) in
    `folder`; return their paths (`history_path`, `pending_path`), what the traced prior did
    (`traced.summary`: statuses, unknown architecture names) and what tonight's models see
    (`features.summary`) when both were staged. `tracing`: the traces' time bounds (default: the defaults);
    `score_alone`: for `gpucast score` on its own, which waits at most `traced.SCORE_ALONE_SECONDS` on traces."""
    staged, traces = _read_and_trace(storage, parts, max_rows, tracing, score_alone)
    trace = traced.summary(pl.concat(list(staged.values())), pl.concat(list(traces.values()))) if staged else TraceSummary()
    paths = {part: str(folder / f"{part}.parquet") for part in staged}
    for part, rows in staged.items():  # LZ4: a file of this run only, read once or twice: at 1M pending jobs x 60
        # columns 1.2 CPU-s to write and 0.5 to read against zstd's 1.8 and 0.6 (98 MB against 77; issue 52 item 5)
        features.build(rows, traces[part]).write_parquet(paths[part], compression="lz4")
    both = HISTORY in staged and PENDING in staged  # what tonight's models see: only when both are staged
    seen = features.summary(staged[HISTORY], staged[PENDING]) if both else FeatureSummary()
    return FeaturesResult.of(paths.get(HISTORY), paths.get(PENDING), trace, seen)


@task(name="stage-pending", persist_result=False)
def stage_pending(storage: Storage, tracing: Tracing | None = None) -> pl.DataFrame:
    """The pending jobs with their features (`stage_features`' pending part), for `gpucast score` on its own, which
    waits at most `traced.SCORE_ALONE_SECONDS` on traces: kept in memory, not staged as Parquet (the run read its own
    file back at once: 0.9-1.0 CPU-s to write and 0.3-0.5 to read at 1M pending jobs, issue 52 item 5). A big frame
    handed from a task to its flow, against the habit of handing over a file (STYLE.md habit 3), on purpose for that
    measured cost (+75 MiB peak RSS); its result is never persisted, so turning on Prefect's result persistence or a
    cache policy elsewhere does not pickle a million rows each run (review 66b S3-3)."""
    staged, traces = _read_and_trace(storage, (PENDING,), None, tracing, score_alone=True)
    return features.build(staged[PENDING], traces[PENDING])


def _read_and_trace(storage: Storage, parts: tuple[str, ...], max_rows: int | None, tracing: Tracing | None,
                    score_alone: bool) -> tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame]]:
    """`parts` read from the warehouse, and the traced prior's columns of each (`_trace`)."""
    with db.writer(storage) as con:
        frames = {HISTORY: training.read_training_jobs(con, max_rows) if HISTORY in parts else None,
                  PENDING: training.read_pending(con) if PENDING in parts else None}
    staged = {part: rows for part, rows in frames.items() if rows is not None}
    tracing = tracing or Tracing()
    return staged, _trace(staged, storage, traced.run_bounds(tracing.trace_seconds, tracing.trace_night_seconds,
                                                             score_alone))


def _trace(staged: dict[str, pl.DataFrame], storage: Storage, bounds: traced.Bounds) -> dict[str, pl.DataFrame]:
    """The traced prior's columns of every staged part, traced together (one night's budget, one cache)."""
    if not staged:
        return {}
    both = pl.concat(list(staged.values()))
    # Architectures are inferred from shapes for pending jobs only: a history job inferred and traced would count
    # towards the traced jobs a champion must learn from before it corrects traces (`ood.MIN_TRACED_ROWS`), and
    # on the measured set 24 of 840 synthetic networks fall within a zoo entry's tolerances (docs/models.md).
    infer = [part == PENDING for part, rows in staged.items() for _ in range(rows.height)]
    columns = traced.trace_jobs(both, storage.trace_cache_path, bounds, progress=get_run_logger().info, infer=infer)
    out, start = {}, 0
    for part, rows in staged.items():
        out[part], start = columns.slice(start, rows.height), start + rows.height
    return out
