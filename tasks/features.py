"""The 11 input features: one definition (name, kind, encoding) and the Polars step that builds them.

Encoding, learned on training rows only (`FeatureEncoder.fit`) and applied everywhere else:

* **categorical** (model_type, precision, optimizer): integer codes 1..K for the categories seen in
  training; 0 means "missing or never seen in training", so new categories score without error;
* **log** (params_million, batch_size, input_dim, num_layers, iterations, learning_rate): the
  natural log, because these span orders of magnitude; missing -> the training median;
* **bool** (regularization, data_augmentation): 1 / 0; missing -> 0.5 (no information).

The output is a float32 matrix with the 11 columns in `contract.FEATURES` order. Tree models use it
as it is; the Transformer-BiGRU embeds the categorical codes and projects the numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from gpucast.expectations import contract as c


@dataclass(frozen=True)
class FeatureSpec:
    name: str
    kind: str  # "categorical" | "log" | "bool"


FEATURE_SPECS: tuple[FeatureSpec, ...] = (
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


@dataclass
class FeatureEncoder:
    """Learns category codes and medians on training rows; turns any rows into the feature matrix."""

    vocab_: dict[str, list[str]] = field(default_factory=dict)
    medians_: dict[str, float] = field(default_factory=dict)

    def fit(self, rows: pl.DataFrame) -> FeatureEncoder:
        for spec in FEATURE_SPECS:
            col = rows[spec.name]
            if spec.kind == "categorical":
                self.vocab_[spec.name] = sorted(col.drop_nulls().unique().to_list())
            elif spec.kind == "log":
                med = col.drop_nulls().cast(pl.Float64).log().median()
                self.medians_[spec.name] = 0.0 if med is None or math.isnan(med) else float(med)
        return self

    @property
    def cardinalities(self) -> tuple[int, ...]:
        """Embedding sizes of the categorical features (codes 0..K, 0 = unknown)."""
        return tuple(len(self.vocab_[FEATURE_SPECS[i].name]) + 1 for i in CATEGORICAL)

    def expressions(self) -> list[pl.Expr]:
        exprs = []
        for spec in FEATURE_SPECS:
            col = pl.col(spec.name)
            if spec.kind == "categorical":
                codes = {v: i + 1 for i, v in enumerate(self.vocab_[spec.name])}
                e = col.replace_strict(codes, default=0, return_dtype=pl.Int32)
            elif spec.kind == "log":
                e = col.cast(pl.Float64).log().fill_null(self.medians_[spec.name])
            else:
                e = col.cast(pl.Float64).fill_null(0.5)
            exprs.append(e.cast(pl.Float32).alias(spec.name))
        return exprs

    def transform(self, rows: pl.DataFrame) -> np.ndarray:
        """(n_rows, 11) float32, columns in `contract.FEATURES` order."""
        if not self.vocab_:
            raise RuntimeError("FeatureEncoder.transform called before fit")
        return rows.select(self.expressions()).to_numpy().astype(np.float32, copy=False)

    def to_dict(self) -> dict:
        return {"vocab": self.vocab_, "medians": self.medians_}

    @classmethod
    def from_dict(cls, d: dict) -> FeatureEncoder:
        return cls(vocab_={k: list(v) for k, v in d["vocab"].items()}, medians_=dict(d["medians"]))


def labelled_rows(job_logs: pl.DataFrame, target: str) -> pl.DataFrame:
    """COMPLETED jobs with a measured `target` (> 0): the rows a model of `target` learns from."""
    return job_logs.filter(_labelled(target))


def _labelled(target: str) -> pl.Expr:
    return (pl.col(c.STATUS) == "COMPLETED") & pl.col(target).is_not_null() & (pl.col(target) > 0)


def summary(history: pl.DataFrame, pending: pl.DataFrame) -> dict:
    """What tonight's models learn from and score: labelled jobs per target, pending jobs, and the
    share of missing values per feature among the jobs read."""
    both = pl.concat([history.select(c.FEATURES), pending.select(c.FEATURES)])
    missing = both.select(pl.col(f).is_null().mean() for f in c.FEATURES).row(0, named=True) if both.height else {}
    return {"labelled_jobs": history.height, "pending": pending.height,
            "labelled": {t: history.filter(_labelled(t)).height for t in c.TARGETS},
            "missing_feature_share": {f: round(missing.get(f) or 0.0, 4) for f in c.FEATURES}}
