"""The feature encoder: hand-checkable values, unseen categories, missing values."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.learn.features import CATEGORICAL, FEATURE_SPECS, FeatureEncoder, labelled_rows


def rows(**overrides) -> pl.DataFrame:
    base = {c.MODEL_TYPE: ["CNN", "LSTM", "CNN"], c.PARAMS_MILLION: [1.0, math.e, None], c.BATCH_SIZE: [32, 64, 16],
            c.INPUT_DIM: [224, 128, 64], c.NUM_LAYERS: [10, 2, 4], c.ITERATIONS: [1000.0, 10.0, 100.0],
            c.PRECISION: ["FP32", "FP16", None], c.OPTIMIZER: ["SGD", "Adam", "Adam"],
            c.LEARNING_RATE: [0.1, 0.01, 0.001], c.REGULARIZATION: [True, False, None],
            c.DATA_AUGMENTATION: [False, True, True]}
    base.update(overrides)
    return pl.DataFrame(base)


def test_eleven_features_in_contract_order():
    assert len(FEATURE_SPECS) == 11
    assert [FEATURE_SPECS[i].name for i in CATEGORICAL] == [c.MODEL_TYPE, c.PRECISION, c.OPTIMIZER]


def test_encoding_is_hand_checkable():
    enc = FeatureEncoder("contract").fit(rows())
    X = enc.transform(rows())
    assert X.shape == (3, 11) and X.dtype == np.float32
    assert X[:, 0].tolist() == [1, 2, 1]  # CNN=1, LSTM=2 (sorted vocabulary), 0 is unknown
    assert X[1, 1] == pytest.approx(1.0)  # log(e)
    assert X[2, 1] == pytest.approx(0.5)  # missing -> median of log(1), log(e)
    assert X[:, 6].tolist() == [2, 1, 0]  # FP16=1, FP32=2, missing=0
    assert X[:, 9].tolist() == [1.0, 0.0, 0.5]  # missing yes/no -> 0.5
    assert enc.cardinalities == (3, 3, 3)


def test_unseen_categories_and_missing_features_encode():
    enc = FeatureEncoder("contract").fit(rows())
    new = rows(**{c.MODEL_TYPE: ["Mamba", None, "CNN"], c.OPTIMIZER: ["Lion", "SGD", None],
                  c.BATCH_SIZE: [None, None, None]})
    X = enc.transform(new)
    assert X[:, 0].tolist() == [0, 0, 1] and X[:, 7].tolist() == [0, 2, 0]
    assert np.isfinite(X).all()


def test_round_trip_through_json():
    enc = FeatureEncoder("contract").fit(rows())
    again = FeatureEncoder.from_dict(enc.to_dict())
    assert np.array_equal(enc.transform(rows()), again.transform(rows()))


def test_labelled_rows_are_completed_with_a_positive_measurement():
    df = pl.DataFrame({c.STATUS: ["COMPLETED", "COMPLETED", "FAILED", "PENDING"], "y": [1.0, None, 2.0, 3.0]})
    assert labelled_rows(df, "y").height == 1


def test_no_rows_build_float_priors():
    """A night with nothing pending (or no labelled job) stages an empty frame: its priors are floats, not
    numpy's object arrays of no element, which Polars kept as Object columns and could not combine (issue 38)."""
    from gpucast.tasks.learn import features, priors

    built = features.build(rows().head(0))
    assert built.height == 0
    assert {built.schema[p] for p in priors.PRIOR_COLUMNS} == {pl.Float64}
