"""The one "stage the features" step: jobs read from the warehouse, their derived features added
(`tasks/learn/features.py`: the hardware context and the analytic priors), written as Parquet for the
steps after it. The nightly stages the labelled history and the pending jobs once for training and
scoring; `gpucast train` and `gpucast score` stage the part they need themselves, with the same task.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task

from gpucast.tasks.learn import features
from gpucast.warehouse import db, training
from gpucast.warehouse.settings import Storage

HISTORY, PENDING = "history", "pending"


@task(name="stage-features")
def stage_features(storage: Storage, folder: Path, parts: tuple[str, ...] = (HISTORY, PENDING),
                   max_rows: int | None = None) -> dict:
    """Stage `parts` (the labelled `history`, at most `max_rows` recent jobs; the `pending` jobs) in
    `folder`; return their paths (`history_path`, `pending_path`) and what tonight's models see
    (`features.summary`) when both were staged."""
    with db.writer(storage) as con:
        frames = {HISTORY: training.read_training_jobs(con, max_rows) if HISTORY in parts else None,
                  PENDING: training.read_pending(con) if PENDING in parts else None}
    out: dict = {}
    for part, rows in frames.items():
        if rows is not None:
            path = folder / f"{part}.parquet"
            features.build(rows).write_parquet(path)
            out[f"{part}_path"] = str(path)
    if frames[HISTORY] is not None and frames[PENDING] is not None:
        out.update(features.summary(frames[HISTORY], frames[PENDING]))
    return out
