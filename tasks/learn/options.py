"""What a train run does: `TrainOptions`, the `options` parameter of the `train-models` flow (prefect.yaml)
and the `gpucast train` flags' defaults, with the rules that refuse a bad one when it is built. The protocol
that reads them is `tasks/learn/train.py`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpucast.expectations import contract as c
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.models.presets import DEFAULT_PRESET, PRESET_NAMES

DEFAULT_MIN_LABELLED = 200
# Training reads at most this many of the most recent labelled jobs: memory and time stay bounded
# however long the history grows (and recent jobs best resemble tomorrow's).
DEFAULT_MAX_ROWS = 500_000
# The share of the zoo's reference set (tasks/learn/train.py `REFERENCE_SET`) that trains beside the site's history
# by default (0: none; the measured decision: docs/models.md "Learning from the zoo").
DEFAULT_REFERENCE_WEIGHT = 0.0
# The feature set models learn from unless told otherwise: the one that won on validation (docs/models.md). The sets
# themselves (`tasks/learn/features.py` FEATURE_SETS) are imported where a given set is checked, not here: they come
# with Polars and numpy, and every command builds these options with its settings (`gpucast status` too: 0.4-0.8 s
# of its start, docs/benchmarks.md "The command line's start-up").
DEFAULT_FEATURES = "residual"


class TrainOptions(BaseModel):
    """What a train run does: the `options` parameter of the `train-models` flow (prefect.yaml) and the
    `gpucast train` flags. Unknown keys and out-of-range values are refused when it is built."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    targets: tuple[str, ...] = c.TARGETS
    models: tuple[str, ...] | None = None  # None: every registry model the feature set allows
    preset: str = DEFAULT_PRESET  # the Transformer-BiGRU's (tasks/learn/models/presets.py)
    features: str = DEFAULT_FEATURES  # the feature set (tasks/learn/features.py: contract, hardware, priors, residual)
    repeats: int = Field(3, ge=1)  # repeated 70/30 holdouts
    seed: int = 0
    min_labelled: int = Field(DEFAULT_MIN_LABELLED, ge=1)  # a target with fewer labelled jobs is skipped
    device: str | None = None  # cuda or cpu; None: cuda when available
    epochs: int | None = Field(None, ge=1)  # caps the Transformer-BiGRU's epochs
    max_rows: int | None = Field(DEFAULT_MAX_ROWS, ge=1)  # None: every labelled job
    # Time limits. None: the setting's default (GPUCAST_NN_MAX_MINUTES, GPUCAST_NIGHT_BUDGET_MINUTES), filled in
    # at the flow's edge (flows/train.py `resolve`); 0: no limit. The night budget ends at an instant
    # (`budget_ends_at` below); a network fit stops at min(nn_max_minutes, the budget left).
    nn_max_minutes: float | None = Field(None, ge=0)  # per network fit
    night_budget_minutes: float | None = Field(None, ge=0)  # for every fit of the run together
    compile_trees: bool | None = None  # compile a tree champion for scoring; None: when the queue is large (flows/train.py)
    # The scoring budget (tasks/learn/champion.py `ScoreBudget`, issue 52 item 5): CPU seconds on one core that
    # scoring the pending queue may cost a target, counted from each fitted model; a model over it does not compete
    # for champion. None: the setting's (GPUCAST_SCORE_BUDGET_S), filled in at the flow's edge like the time limits;
    # 0: no budget. `pending_jobs`: the queue it is judged at, counted by the flow (`flows/train.py` `resolve`); None:
    # not known, no budget.
    score_budget_s: float | None = Field(None, ge=0)
    pending_jobs: int | None = Field(None, ge=0)
    # The zoo's reference set beside the history (`reference_rows`): the share of its rows (a seeded sample) that
    # trains with the site's jobs, 0 for none; the set's path (None: the shipped `REFERENCE_SET`); whether its rows
    # learn as traced jobs (their trace as the prior) or as jobs the zoo did not recognise (the analytic prior).
    reference_weight: float = Field(DEFAULT_REFERENCE_WEIGHT, ge=0, le=1)
    reference_set: str | None = None
    reference_traced: bool = False

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [t for t in v if t not in c.TARGETS]
        if unknown or not v:
            raise ValueError(f"unknown target(s) {', '.join(unknown) or '(none given)'}; targets: {', '.join(c.TARGETS)}")
        return v

    @field_validator("models")
    @classmethod
    def _known_models(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is None:
            return v
        unknown = [m for m in v if m not in registry.REGISTRY]
        if unknown or not v:
            raise ValueError(f"unknown model(s) {', '.join(unknown) or '(none given)'}; "
                             f"models: {', '.join(registry.REGISTRY)}")
        return v

    @model_validator(mode="after")
    def _prior_needs_priors(self) -> TrainOptions:
        if self.models and registry.PRIOR in self.models and _feature_sets()[self.features].prior_column(c.TARGETS[0]) is None:
            raise ValueError(f"model `prior` needs a feature set with the priors (priors, residual), not {self.features!r}")
        return self

    @field_validator("features", "preset")
    @classmethod
    def _known_name(cls, v: str, info) -> str:
        names = {"features": ("feature set", _feature_sets() if info.field_name == "features" else ()),
                 "preset": ("preset", PRESET_NAMES)}
        what, known = names[info.field_name]
        if v not in known:
            raise ValueError(f"unknown {what} {v!r}; {what}s: {', '.join(known)}")
        return v

    @property
    def model_names(self) -> tuple[str, ...]:
        """The models to compare: those asked for, else every model the feature set allows (the
        `prior` model needs a set with the priors)."""
        if self.models:
            return self.models
        has_priors = _feature_sets()[self.features].prior_column(c.TARGETS[0]) is not None
        return tuple(m for m in registry.MODEL_NAMES if m != registry.PRIOR or has_priors)

    def run_device(self) -> str:
        """The device the run records: where the network trains (`device`, else cuda when available) when it is among
        the models; else `device` or cpu, without importing torch (1.2-1.5 CPU-s a process; a `linear_fs`-only
        nightly's training never imports it): no other model here uses a GPU."""
        if registry.NN not in self.model_names:
            return self.device or "cpu"
        from gpucast.tasks.learn.models.transformer_bigru import pick_device

        return pick_device(self.device)

    def score_budget(self):
        """The scoring budget this run's champions are chosen by (`champion.ScoreBudget`: `score_budget_s` at
        `pending_jobs`); None where either is not filled in or the budget is 0."""
        from gpucast.tasks.learn.champion import ScoreBudget  # (numpy; options load with every command)

        return ScoreBudget.of(self.score_budget_s, self.pending_jobs)

    @property
    def nn_max_seconds(self) -> float | None:
        return self.nn_max_minutes * 60 if self.nn_max_minutes else None


def _feature_sets() -> dict:
    """`features.FEATURE_SETS`, imported when a feature set is checked (it comes with Polars and numpy)."""
    from gpucast.tasks.learn.features import FEATURE_SETS

    return FEATURE_SETS
