"""The input features: the 11 of the contract, and the columns derived from them.

`build` (Polars and numpy, once per run: the nightly's features step) adds to the job rows:
* the hardware context: `gpu_model` (the logged `gpu_type` as the GPU catalogue names it; null when
  not logged or not in the catalogue) and `peak_tflops` (the logged peak, else the catalogue's at the
  job's precision; null when unknown); `gpu_count` is a contract column (missing means 1);
* the analytic priors of `tasks/learn/priors.py` (model-state and activation memory, FLOPs per iteration,
  throughput, run time);
* the traced prior (`tasks/learn/traced.py`), for jobs whose `arch` the model zoo knows, when the caller
  traced them: `prior_mem_gb` and `prior_gflop_per_iter` (and so `prior_runtime_hours`) are then the
  traced values, the analytic ones kept as `analytic_mem_gb` and `analytic_gflop_per_iter`, and a
  missing parameter count, depth or input size is the traced network's;
* the per-GPU prior of jobs on many GPUs (`tasks/learn/llm_memory.py`), for jobs that log a contract v5 field
  (LLM training and fine-tuning: sharding, parallelism, adapters): `llm_mem_gb` and the memory, FLOPs and run-time
  priors are then its values (a job without v5 fields keeps every prior, feature and forecast it had).

A **feature set** says which of them a model sees (`FEATURE_SETS`): `contract`, the contract's 11 (the seed
paper's);
`hardware`, plus the hardware context; `priors`, plus the priors; `residual`, the same columns, with
the model learning log(actual / prior) of its target's prior instead of log(actual).

Encoding, learned on training rows only (`FeatureEncoder.fit`) and applied everywhere else:
* **categorical** (model_type, precision, optimizer, gpu_model): integer codes 1..K for the
  categories seen in training; 0 means "missing or never seen in training", so new categories
  score without error;
* **log** (every number: sizes, counts, rates, priors): the natural log, because they span orders of
  magnitude; missing -> the training median;
* **bool** (regularization, data_augmentation): 1 / 0; missing -> 0.5 (no information).
The output is a float32 matrix with the set's columns in order. Tree models use it as it is; the
Transformer-BiGRU embeds the categorical codes and the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records import catalog
from gpucast.records.results import FeatureSummary
from gpucast.tasks.learn import llm_memory, priors, traced


@dataclass(frozen=True)
class FeatureSpec:
    name: str
    kind: str  # "categorical" | "log" | "bool"


FEATURE_SPECS: tuple[FeatureSpec, ...] = (  # the seed paper's 11, in the contract's order
    FeatureSpec(c.MODEL_TYPE, "categorical"),
    FeatureSpec(c.PARAMS_MILLION, "log"),
    FeatureSpec(c.BATCH_SIZE, "log"),
    FeatureSpec(c.INPUT_DIM, "log"),
    FeatureSpec(c.NUM_LAYERS, "log"),
    FeatureSpec(c.ITERATIONS, "log"),
    FeatureSpec(c.PRECISION, "categorical"),
    FeatureSpec(c.OPTIMIZER, "categorical"),
    FeatureSpec(c.LEARNING_RATE, "log"),
    FeatureSpec(c.REGULARIZATION, "bool"),
    FeatureSpec(c.DATA_AUGMENTATION, "bool"),
)
assert tuple(s.name for s in FEATURE_SPECS) == c.FEATURES
CATEGORICAL = tuple(i for i, s in enumerate(FEATURE_SPECS) if s.kind == "categorical")

GPU_MODEL, PEAK_TFLOPS = priors.GPU_MODEL, priors.PEAK_TFLOPS
HARDWARE_SPECS = (FeatureSpec(GPU_MODEL, "categorical"), FeatureSpec(c.GPU_COUNT, "log"),
                  FeatureSpec(PEAK_TFLOPS, "log"))
PRIOR_SPECS = tuple(FeatureSpec(p, "log") for p in priors.PRIOR_COLUMNS)
RUNTIME_PRIOR = priors.PRIOR_FOR_TARGET[c.RUNTIME_HOURS]  # `prior_runtime_hours`: LLM jobs' at the learned utilisation


@dataclass(frozen=True)
class FeatureSet:
    name: str
    specs: tuple[FeatureSpec, ...]
    residual: bool = False  # the model learns log(actual / prior of its target)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    @property
    def categorical(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.specs) if s.kind == "categorical")

    def prior_column(self, target: str) -> int | None:
        """Index of `target`'s prior among the columns, when the set has the priors."""
        prior = priors.PRIOR_FOR_TARGET[target]
        return self.names.index(prior) if prior in self.names else None

    def base_column(self, target: str) -> int | None:
        """Index of `target`'s prior among the columns, when the set learns residuals on it."""
        return self.prior_column(target) if self.residual else None


FEATURE_SETS = {fs.name: fs for fs in (
    FeatureSet("contract", FEATURE_SPECS),
    FeatureSet("hardware", FEATURE_SPECS + HARDWARE_SPECS),
    FeatureSet("priors", FEATURE_SPECS + HARDWARE_SPECS + PRIOR_SPECS),
    FeatureSet("residual", FEATURE_SPECS + HARDWARE_SPECS + PRIOR_SPECS, residual=True),
)}


def build(rows: pl.DataFrame, trace: pl.DataFrame | None = None) -> pl.DataFrame:
    """`rows` (contract columns) with the hardware context and the priors added; idempotent. `trace`:
    `traced.trace_jobs(rows, ...)`, the traced prior's columns (None: those `rows` carry, else none)."""
    missing = [pl.lit(None, dtype=pl.Float64 if n in (c.GPU_COUNT, c.GPU_PEAK_TFLOPS) else pl.String).alias(n)
               for n in (*c.HARDWARE, c.ARCH) if n not in rows.columns]  # rows from before contract v2 / v3
    missing += [pl.lit(None, dtype=pl.Int64 if n in c.INT_COLUMNS else pl.String).alias(n)
                for n in c.LLM_COLUMNS if n not in rows.columns]  # rows from before contract v5
    rows = rows.with_columns(missing) if missing else rows
    if trace is not None or not set(traced.TRACE_COLUMNS) <= set(rows.columns):
        rows = rows.drop([n for n in traced.TRACE_COLUMNS if n in rows.columns])
        rows = pl.concat([rows, trace if trace is not None else traced.empty_columns(rows.height)], how="horizontal")
    return llm_memory.use_llm_prior(traced.use_traced_prior(priors.with_priors(traced.fill_features(rows))))


# Names a feature set had before (encoders saved then still load): old name -> name.
RENAMED_FEATURE_SETS = {"paper": "contract"}


@dataclass
class FeatureEncoder:
    """Learns category codes and medians on training rows; turns any rows into the feature matrix."""

    feature_set: str  # a FEATURE_SETS name: the run's options say which (tasks/learn/options.py DEFAULT_FEATURES)
    vocab_: dict[str, list[str]] = field(default_factory=dict)
    medians_: dict[str, float] = field(default_factory=dict)
    # issue 51 item 5: the achieved share of peak FLOPs of the training rows' LLM jobs with a measured run time
    # (`llm_memory.fit_utilisation`; read-only, parsed once where a saved encoder is read); their run-time prior uses
    # it, else the stated prior. Saved as `Utilisation.to_json` under "utilisation" ({} when nothing was learned)
    utilisation_: llm_memory.Utilisation = field(default_factory=llm_memory.Utilisation)

    @property
    def specs(self) -> tuple[FeatureSpec, ...]:
        return FEATURE_SETS[self.feature_set].specs

    @property
    def categorical(self) -> tuple[int, ...]:
        return FEATURE_SETS[self.feature_set].categorical

    @property
    def names(self) -> tuple[str, ...]:
        return FEATURE_SETS[self.feature_set].names

    def fit(self, rows: pl.DataFrame) -> FeatureEncoder:
        for spec in self.specs:
            col = rows[spec.name]
            if spec.kind == "categorical":
                self.vocab_[spec.name] = sorted(col.drop_nulls().unique().to_list())
            elif spec.kind == "log":
                med = col.drop_nulls().cast(pl.Float64).log().median()
                self.medians_[spec.name] = 0.0 if med is None or math.isnan(med) else float(med)
        if RUNTIME_PRIOR in self.names and (learned := llm_memory.fit_utilisation(rows)).jobs:
            self.utilisation_ = learned
        return self

    @property
    def cardinalities(self) -> tuple[int, ...]:
        """Embedding sizes of the categorical features (codes 0..K, 0 = unknown)."""
        return tuple(len(self.vocab_[self.specs[i].name]) + 1 for i in self.categorical)

    def expressions(self, columns: Collection[str]) -> list[pl.Expr]:
        """The feature matrix's columns as expressions over a frame whose columns are `columns`."""
        exprs = []
        for spec in self.specs:
            col = pl.col(spec.name)
            if spec.kind == "categorical":
                codes = {v: i + 1 for i, v in enumerate(self.vocab_[spec.name])}
                e = col.replace_strict(codes, default=0, return_dtype=pl.Int32)
            elif spec.kind == "log":
                if spec.name == RUNTIME_PRIOR:  # LLM jobs at the learned utilisation (none learned: as it was)
                    col = llm_memory.with_learned_utilisation(col, self.utilisation_, columns)
                e = col.cast(pl.Float64).log().fill_null(self.medians_[spec.name])
            else:
                e = col.cast(pl.Float64).fill_null(0.5)
            exprs.append(e.cast(pl.Float32).alias(spec.name))
        return exprs

    def transform(self, rows: pl.DataFrame) -> np.ndarray:
        """(n_rows, n_features) float32, columns in the feature set's order."""
        if not self.vocab_:
            raise RuntimeError("FeatureEncoder.transform called before fit")
        return rows.select(self.expressions(rows.columns)).to_numpy().astype(np.float32, copy=False)

    def to_dict(self) -> dict:
        return {"feature_set": self.feature_set, "vocab": self.vocab_, "medians": self.medians_,
                "utilisation": self.utilisation_.to_json() if self.utilisation_.jobs else {}}

    @classmethod
    def from_dict(cls, d: dict) -> FeatureEncoder:
        name = d.get("feature_set", "contract")  # encoders saved before feature sets existed had the 11
        return cls(feature_set=RENAMED_FEATURE_SETS.get(name, name), vocab_={k: list(v) for k, v in d["vocab"].items()},
                   medians_=dict(d["medians"]), utilisation_=llm_memory.Utilisation.from_json(d.get("utilisation")))


def labelled_rows(job_logs: pl.DataFrame, target: str) -> pl.DataFrame:
    """COMPLETED jobs with a measured `target` (> 0): the rows a model of `target` learns from."""
    return job_logs.filter(_labelled(target))


def _labelled(target: str) -> pl.Expr:
    return (pl.col(c.STATUS) == "COMPLETED") & pl.col(target).is_not_null() & (pl.col(target) > 0)


def summary(history: pl.DataFrame, pending: pl.DataFrame) -> FeatureSummary:
    """What tonight's models learn from and score: labelled jobs per target, pending jobs, the share of
    missing values per feature, GPU types the catalogue does not know (kept, with no peak), and the jobs whose
    sharding, adapter, loss-precision, trained-module or kernel word nobody knew (contracts v5-v8: kept as `unknown`,
    forecast as the plain case)."""
    both = pl.concat([history.select(*c.FEATURES, c.GPU_TYPE), pending.select(*c.FEATURES, c.GPU_TYPE)])
    missing = both.select(pl.col(f).is_null().mean() for f in c.FEATURES).row(0, named=True) if both.height else {}
    unknown = (both.filter(pl.col(c.GPU_TYPE).is_not_null())
               .filter(pl.col(c.GPU_TYPE).map_elements(lambda t: catalog.canonical(t) is None, return_dtype=pl.Boolean))
               .group_by(c.GPU_TYPE).len().sort("len", descending=True))
    layout = {n: int(sum(f[n].eq(c.UNKNOWN_WORD).sum() for f in (history, pending) if n in f.columns))
              for n in c.UNKNOWN_KEPT}
    return FeatureSummary(labelled_jobs=history.height, pending=pending.height,
                          unknown_layout_words={n: k for n, k in layout.items() if k},
                          labelled={t: history.filter(_labelled(t)).height for t in c.TARGETS},
                          missing_feature_share={f: round(missing.get(f) or 0.0, 4) for f in c.FEATURES},
                          unknown_gpu_types=dict(unknown.iter_rows()))
