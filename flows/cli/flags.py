"""The flags several commands share, each written once: a flag named as its setting (its older spellings hidden), the
train options' flags, the nightly's, the simulated arrivals' calendar, a refused flag. `parser.py` calls them from
the function that adds a command's flags, when that command is used; the modules their defaults come from are
imported there too, not when the command line loads.
"""

from __future__ import annotations

import argparse

from gpucast.flows.cli.options import FLAG_ALIASES, SETTING_FLAGS, SPLIT_FLAGS, TRAIN_SETTING_FLAGS, dest


def _train_defaults():
    """The train options' defaults (`TrainOptions()`), for the help of the flags that set them."""
    from gpucast.tasks.learn.options import TrainOptions

    return TrainOptions()


def _older_spellings(p: argparse.ArgumentParser, flag: str, **kw) -> None:
    """The older spellings of `flag` (`FLAG_ALIASES`), hidden from the help: each sets what `flag` sets."""
    for old in FLAG_ALIASES.get(flag, ()):
        p.add_argument(old, dest=dest(flag), default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kw)


def _setting_flag(p: argparse.ArgumentParser, flag: str, what: str, kind: type = float, **kw) -> None:
    """A flag named as its setting, whose default is the setting (a setting itself, or a train option the setting
    defaults), with its older spellings hidden."""
    from gpucast.flows.settings import SPEC_BY_FIELD

    spec = SPEC_BY_FIELD[SETTING_FLAGS.get(flag) or TRAIN_SETTING_FLAGS[flag]]
    assert dest(flag) == spec.field, f"{flag} is not named as its setting {spec.field}"
    p.add_argument(flag, dest=spec.field, type=kind, default=None,
                   help=f"{what} (env {spec.env}, default {spec.default or 'none'})", **kw)
    _older_spellings(p, flag, type=kind, **kw)


def _split_flag(p: argparse.ArgumentParser, old: str) -> None:
    """A flag that set two settings before they were split (`SPLIT_FLAGS`), hidden: it sets each of them this
    command has a flag for (`options.command_settings`)."""
    assert old in SPLIT_FLAGS
    p.add_argument(old, dest=dest(old), type=float, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


class _Refused(argparse.Action):
    """A flag a command accepts only to refuse, hidden: it means nothing there, and once was taken and silently
    ignored. `process.run_command` answers it with one line (its `why`) and exit code 2, before anything runs."""

    def __init__(self, option_strings, dest, why: str, **kw):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kw)
        self.why = why

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.refused = f"{option_string}: {self.why}"


def _days_flag(p: argparse.ArgumentParser, flag: str, default: int, what: str) -> None:
    """A count of days that is not a setting (the simulated history), with its older spelling `--days` hidden."""
    p.add_argument(flag, type=int, default=default, metavar="N", help=f"{what} (default {default})")
    _older_spellings(p, flag, type=int)


def _training_flags(p: argparse.ArgumentParser, repeats: int | None = None, epochs: int | None = None,
                    preset: str | None = None) -> None:
    """The train options' flags. Each keeps its value under the name of the `TrainOptions` field it sets (`--repeats`:
    repeats, tasks/learn/options.py); `options.train_options` builds the run's options from them."""
    from gpucast.flows.settings import RUNNERS
    from gpucast.tasks.learn.features import FEATURE_SETS
    from gpucast.tasks.learn.models.presets import PRESET_NAMES

    d = _train_defaults()
    p.add_argument("--models", help="comma-separated registry names (default: all)")
    p.add_argument("--preset", default=preset, choices=PRESET_NAMES,
                   help=f"Transformer-BiGRU preset (default {preset or d.preset})")
    p.add_argument("--features", default=None, choices=tuple(FEATURE_SETS),
                   help=f"what models learn from: contract (the 11), hardware (+ GPU), priors (+ analytic priors), "
                        f"residual (priors, learning actual/prior) (default {d.features})")
    p.add_argument("--repeats", type=int, default=repeats, help=f"repeated 70/30 holdouts (default {repeats or d.repeats})")
    p.add_argument("--epochs", type=int, default=epochs, help="cap the Transformer-BiGRU's epochs")
    _setting_flag(p, "--nn-max-minutes", "the Transformer-BiGRU's time budget per fit, in minutes; 0: no limit")
    _setting_flag(p, "--night-budget-minutes", "minutes training may spend comparing models; fits not finished are skipped "
                                         "and recorded (skipped_fits); 0: no budget")
    _setting_flag(p, "--score-budget-s", "CPU seconds a target's champion's predict may cost on the pending queue, counted; "
                                         "a model over it does not compete, one over twice it at its last count is "
                                         "fitted once; 0: no budget")
    _setting_flag(p, "--train-runner", "where the fits run: dask (a local Dask cluster, or --dask-address's) or local "
                                 "(one after another in this process)", str, choices=RUNNERS)
    _setting_flag(p, "--dask-address", "an existing Dask scheduler to fan the fits out to (tcp://host:8786)", str)
    p.add_argument("--compile-trees", action=argparse.BooleanOptionalAction, default=None,
                   help="compile a tree champion (LightGBM; RandomForest, ExtraTrees up to 200k nodes) to native code for "
                        "faster scoring (default: when 200,000 or more jobs are pending; compiling takes minutes)")
    p.add_argument("--min-labelled", type=int, default=None,
                   help=f"skip a target with fewer labelled jobs (default {d.min_labelled})")


def _nightly_flags(p: argparse.ArgumentParser, repeats: int | None = None, epochs: int | None = None,
                   preset: str | None = None) -> None:
    _training_flags(p, repeats, epochs, preset)
    _setting_flag(p, "--oom-gpu-mem-gb", "GPU memory oom_risk is judged against for a job whose GPU is unknown")
    _setting_flag(p, "--default-gpu-mem-gb", "GPU memory a queue without an inventory is planned on")
    _split_flag(p, "--gpu-mem-gb")
    _setting_flag(p, "--max-reject-fraction", "fail the run above this share of rejected rows")


def _rhythm_flags(p: argparse.ArgumentParser) -> None:
    """The arrivals' calendar (tasks/simulate.py `Rhythm`): each volume is Poisson around its mean."""
    from gpucast.tasks.simulate import Rhythm

    r = Rhythm()
    p.add_argument("--weekend-factor", type=float, default=r.weekend_factor,
                   help=f"a weekend day's volume as a share of a weekday's (default {r.weekend_factor})")
    p.add_argument("--trend-per-week", type=float, default=r.trend_per_week,
                   help=f"growth of the volume per week, compounding (default {r.trend_per_week}; 0: none)")
    p.add_argument("--burst-chance", type=float, default=r.burst_chance,
                   help=f"chance that a day is a deadline (default {r.burst_chance}, about one a month)")
    p.add_argument("--burst-factor", type=float, default=r.burst_factor,
                   help=f"volume multiplier on the 3 days before a deadline (default {r.burst_factor})")
    p.add_argument("--flat", action="store_true", help="no rhythm: exactly --jobs-per-day jobs every day")
