"""The flows' own errors, and Prefect's side of environment errors (`warehouse/errors.py`): tasks that
retry transient failures do not retry a full disk or a permission error, which stay as they are.
Nothing here imports Prefect: the CLI maps these to exit codes without paying for its import."""

from __future__ import annotations

from gpucast.tasks.sources.errors import SourceUnavailable  # raised by the sources (tasks/sources/): exit code 5
from gpucast.warehouse.errors import environment_error

__all__ = ["SourceUnavailable", "ValidationFailed", "no_retry_on_environment"]


class ValidationFailed(RuntimeError):
    """Too much of tonight's input broke the contract to trust a retrain on it (exit code 4)."""


def no_retry_on_environment(task, task_run, state) -> bool:
    """Prefect `retry_condition_fn`: retry a failed task unless the machine is what failed, or a damaged model file
    (the same file on every try: review 85 S2-3)."""
    from gpucast.tasks.learn.models.store import ModelFolderDamaged

    try:
        state.result()
    except Exception as exc:  # noqa: BLE001  (the failed task's own exception, re-raised by Prefect)
        return environment_error(exc) is None and not isinstance(exc, ModelFolderDamaged)
    return True
