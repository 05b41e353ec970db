"""What every command group shares: the settings and training options its flags give, and the `ml` extra's check."""

from __future__ import annotations

import argparse

from gpucast.flows.settings import Settings
from gpucast.tasks.learn.options import TrainOptions

# Flags that override a setting: flag -> setting name. Their defaults are the settings' own.
SETTING_FLAGS = {"--gpu-mem-gb": "gpu_mem_gb", "--max-reject-fraction": "max_reject_fraction",
                 "--runner": "train_runner", "--dask-address": "dask_address"}
# Flags of train options whose default is a setting (filled in by the train flow, `flows/train.py`
# `resolve`): flag -> the TrainOptions field, which has the setting's name.
TRAIN_SETTING_FLAGS = {"--nn-max-minutes": "nn_max_minutes", "--night-budget-minutes": "night_budget_minutes"}
# Older spellings a flag still answers to (scripts and deployments that use them keep working).
FLAG_ALIASES = {"--night-budget-minutes": ("--budget-minutes",)}
ML_MODULES = {"torch", "sklearn", "xgboost", "lightgbm", "catboost", "crepes", "skops"}  # the `ml` extra


def settings_from(args: argparse.Namespace) -> Settings:
    """The environment's settings with this command's flags on top (errors name the flag)."""
    values = {field: getattr(args, field, None) for field in SETTING_FLAGS.values()}
    return Settings.from_env().override({f: flag for flag, f in SETTING_FLAGS.items()}, **values)


def train_options(args: argparse.Namespace) -> TrainOptions:
    """`TrainOptions` from the flags given (the rest keep their defaults); errors name the flag."""
    import pydantic

    given = {k: getattr(args, k) for k in TrainOptions.model_fields if getattr(args, k, None) is not None}
    for field, flag in (("targets", "target"), ("models", "models")):
        given.pop(field, None)
        if names := _csv(getattr(args, flag, None)):
            given[field] = names
    if given.get("max_rows") == 0:
        given["max_rows"] = None  # --max-rows 0: every labelled job
    try:
        return TrainOptions(**given)
    except pydantic.ValidationError as exc:
        flags = {"targets": "--target"}
        raise ValueError("; ".join(f"{flags.get(str(e['loc'][0]), '--' + str(e['loc'][0]).replace('_', '-'))}: "
                                   f"{e['msg'].removeprefix('Value error, ')}" for e in exc.errors())) from None


def _csv(text: str | None) -> tuple[str, ...] | None:
    return tuple(x.strip() for x in text.split(",") if x.strip()) if text else None


def _require_ml() -> None:
    """Fail before any flow starts when the `ml` extra is missing (main() turns it into exit 5 and one line)."""
    import importlib.util

    for name in sorted(ML_MODULES):
        try:
            found = importlib.util.find_spec(name) is not None
        except ValueError:  # a module set to None in sys.modules
            found = False
        if not found:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
