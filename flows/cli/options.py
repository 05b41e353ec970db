"""What every command group shares: the command's settings (the environment, read once, with its flags on top),
the training options its flags give, and the `ml` extra's check."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: the settings' table and the train options load pydantic (~0.1-0.2 s), which
    # `gpucast --help` does not need (flows/cli/parser.py)
    from gpucast.flows.settings import ReadSettings, Settings
    from gpucast.tasks.learn.options import TrainOptions

# Flags that override a setting, each named as its setting: flag -> setting name. Their defaults are the settings'.
SETTING_FLAGS = {"--oom-gpu-mem-gb": "oom_gpu_mem_gb", "--default-gpu-mem-gb": "default_gpu_mem_gb",
                 "--max-reject-fraction": "max_reject_fraction", "--train-runner": "train_runner",
                 "--dask-address": "dask_address", "--plan-days": "plan_days", "--backtest-days": "backtest_days"}
# Flags of train options whose default is a setting (`train_options` fills them from the command's settings): flag ->
# the TrainOptions field, which has the setting's name (the training concern is TrainOptions: flows/settings.py).
TRAIN_SETTING_FLAGS = {"--nn-max-minutes": "nn_max_minutes", "--night-budget-minutes": "night_budget_minutes",
                       "--score-budget-s": "score_budget_s"}
# Older spellings a flag still answers to, hidden from the help (scripts and deployments that use them keep working).
# `--days` once named each command's one count of days: the history (simulate, demo), the backtest window
# (backtest) and the plan's days (plan, demand); each of those commands has one, so on each it still names it.
FLAG_ALIASES = {"--night-budget-minutes": ("--budget-minutes",), "--train-runner": ("--runner",),
                "--plan-days": ("--horizon-days", "--days"), "--backtest-days": ("--window-days", "--days"),
                "--history-days": ("--days",)}
# A flag that once set two settings, split since: on a command it sets each of them the command has a flag for
# (`score`: the OOM threshold, `plan`: the plan's default GPU, `nightly` and `demo`: both, as before).
SPLIT_FLAGS = {"--gpu-mem-gb": ("--oom-gpu-mem-gb", "--default-gpu-mem-gb")}
ML_MODULES = {"torch", "sklearn", "xgboost", "lightgbm", "catboost", "crepes", "skops"}  # the `ml` extra


def dest(flag: str) -> str:
    """The attribute argparse keeps a flag's value in (`--plan-days`: plan_days)."""
    return flag.removeprefix("--").replace("-", "_")


# The commands that only read the warehouse and print, and have no setting flag: their settings are `ReadSettings`,
# every concern but training, whose type loads pydantic (~0.1-0.2 CPU-s of their 0.5 s, issue 52 item 4).
READ_COMMANDS = frozenset({"status", "sql"})


def command_settings(args: argparse.Namespace) -> Settings | ReadSettings:
    """The command's settings: the environment's (`Settings.from_env`, the one read of it), with the command's flags
    on top; errors name the variable or the flag. Built once, where the command starts (`process.run_command`),
    and handed to its handler, which passes each flow the concerns it takes. A read command's (`READ_COMMANDS`):
    `ReadSettings.from_env`, the same read and checks without the training concern."""
    if args.command in READ_COMMANDS:
        from gpucast.flows.settings import ReadSettings

        return ReadSettings.from_env()
    from gpucast.flows.settings import Settings

    values = {field: getattr(args, field, None) for field in SETTING_FLAGS.values()}
    sources = {field: flag for flag, field in SETTING_FLAGS.items()}
    for old, flags in SPLIT_FLAGS.items():
        if (value := getattr(args, dest(old), None)) is not None:
            for flag in flags:
                if hasattr(args, dest(flag)) and values[dest(flag)] is None:
                    values[dest(flag)], sources[dest(flag)] = value, old
    return Settings.from_env().override(sources, **values)


def train_options(args: argparse.Namespace, settings: Settings) -> TrainOptions:
    """`TrainOptions` from the flags given, the time limits not given from the command's settings (`settings.training`:
    GPUCAST_NN_MAX_MINUTES, GPUCAST_NIGHT_BUDGET_MINUTES), the rest at their defaults; errors name the flag."""
    import pydantic

    from gpucast.flows.settings import with_time_limits
    from gpucast.tasks.learn.options import TrainOptions

    given = {k: getattr(args, k) for k in TrainOptions.model_fields if getattr(args, k, None) is not None}
    for field, flag in (("targets", "target"), ("models", "models")):
        given.pop(field, None)
        if names := _csv(getattr(args, flag, None)):
            given[field] = names
    if given.get("max_rows") == 0:
        given["max_rows"] = None  # --max-rows 0: every labelled job
    try:
        return with_time_limits(TrainOptions(**given), settings.training)
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
