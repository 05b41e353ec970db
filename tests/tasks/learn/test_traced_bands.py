"""The traced prior's interval per architecture family (issue 37, item 5), against the shipped H100 runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from gpucast.tasks.learn import traced, traced_bands, zoo

RUNS = Path(__file__).resolve().parents[2] / "data" / "gpu_archs_h100.csv"


@pytest.fixture(scope="module")
def runs() -> pl.DataFrame:
    df = pl.read_csv(RUNS).filter(pl.col("status") == "ok")
    return df.with_columns(pl.Series("traced_gb", traced.reported_gb(df["traced_peak_gb"].to_numpy() * 1e9)))


def test_the_shipped_bands_are_the_ones_fitted_on_the_h100_runs(runs):
    groups, families = traced_bands.fit(runs["family"].to_numpy(), runs["model_type"].to_numpy(),
                                        runs["device_used_gb"].to_numpy(), runs["traced_gb"].to_numpy())
    assert groups == traced_bands.GROUP_BANDS
    assert families == traced_bands.FAMILY_BANDS


def test_the_zoo_places_every_measured_family_in_the_group_it_was_fitted_in(runs):
    for arch, model_type in runs.select("arch", "model_type").unique().iter_rows():
        assert traced_bands.group_of(zoo.ARCHITECTURES[zoo.canonical(arch)].model_type) == traced_bands.group_of(model_type)


def test_p90_covers_at_least_90_percent_of_the_runs_in_every_family_where_one_factor_did_not(runs):
    low, high = traced_bands.bands(runs["arch"])
    actual, mem = runs["device_used_gb"].to_numpy(), runs["traced_gb"].to_numpy()
    family = runs["family"].to_numpy()
    for fam in np.unique(family):
        mine = family == fam
        assert np.mean(actual[mine] <= mem[mine] * high[mine]) >= 0.9, fam
        assert np.mean(actual[mine] >= mem[mine] * low[mine]) >= 0.9, fam
    vgg = family == "vgg"
    assert np.mean(actual[vgg] <= mem[vgg] * traced.REPORTED_INTERVAL) < 0.9  # the one factor of before


@pytest.mark.parametrize(("name", "band", "why"), [
    ("VGG-16", traced_bands.FAMILY_BANDS["vgg"], "a measured family: its own band"),
    ("bert-large-uncased", traced_bands.FAMILY_BANDS["bert"], "a measured family"),
    ("convnext_tiny", traced_bands.GROUP_BANDS["convnet"], "no runs of its family: its group's"),
    ("t5-small", traced_bands.GROUP_BANDS["transformer"], "no runs of its family: its group's"),
    ("MyNet-7", traced_bands.DEFAULT_BAND, "a name the zoo does not place: the one factor"),
])
def test_a_job_gets_the_band_of_its_family_else_its_group(name, band, why):
    low, high = traced_bands.bands(pl.Series([name]))
    assert (low[0], high[0]) == pytest.approx(band), why
