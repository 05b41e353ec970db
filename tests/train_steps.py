"""One target trained by the `train-models` flow's own steps, in this process, without Prefect: for tests and
benchmarks that need a trained champion on disk.

The flow (flows/train.py `fit_models`, `_record`) runs exactly these pure steps of `tasks/learn/train.py`:
`labelled`, the fits of `order_fits` (a target with `too_few` jobs gets none), `fit_one` each, `finish_target`
(the champion chosen, refitted and calibrated), `save_champion`; it fans the fits out (Dask or in-process) under a
night budget, which a test leaves unset.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from gpucast.records.outcomes import TargetResult
from gpucast.tasks.learn import train as steps
from gpucast.tasks.learn.options import TrainOptions


def train_target(history: pl.DataFrame, target: str, options: TrainOptions, folder: Path, *, threads: int,
                 progress: Callable[[str], None] = lambda _: None, holdout: list[str] | None = None) -> TargetResult:
    """`target` trained on `history` as the flow trains it; its champion (if any) saved in `folder`.
    `holdout`: job ids of the gate's backtest window (`result.gate_predictions` then holds the champion's P50
    for them, fitted without them)."""
    rows = steps.labelled(history, target, options)
    outcomes = []
    if steps.too_few(rows, options) is None:
        for fit in (f for f in steps.order_fits(options) if f.target == target):
            outcomes.append(steps.fit_one(rows, target, options, fit.model, fit.repeat, threads=threads, progress=progress))
            progress(steps.describe_fit(outcomes[-1], options.repeats))
    finished = steps.finish_target(rows, target, options, outcomes, holdout, threads=threads, progress=progress)
    if finished.estimator is not None:
        steps.save_champion(folder, target, options, finished, threads=threads)
    return finished.result
