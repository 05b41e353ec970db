"""The simulator: seeded, every format, physically sensible outcomes."""

from __future__ import annotations

import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.simulate import SimConfig, write_logs


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_same_seed_same_bytes(tmp_path, fmt):
    cfg = SimConfig(days=1, jobs_per_day=100, dirty_fraction=0.1, fmt=fmt, seed=7)
    (a,) = write_logs(tmp_path / "a", cfg)
    (b,) = write_logs(tmp_path / "b", cfg)
    assert a.read_bytes() == b.read_bytes()


def test_clean_logs_have_every_status_and_plausible_outcomes(tmp_path):
    (p,) = write_logs(tmp_path, SimConfig(days=1, jobs_per_day=3000, fmt="parquet", seed=1))
    df = pl.read_parquet(p)
    assert set(df[c.STATUS]) == set(c.STATUSES)
    done = df.filter(pl.col(c.STATUS) == "COMPLETED")
    assert done[c.GPU_DEMAND_GFLOPS].min() > 0 and done[c.PEAK_GPU_MEM_GB].min() > 0.5
    assert df.filter(pl.col(c.STATUS) == "PENDING")[c.TARGETS].null_count().sum_horizontal()[0] > 0
    # memory grows with parameters; compute rate grows with batch size
    assert done.select(pl.corr(pl.col(c.PARAMS_MILLION).log(), pl.col(c.PEAK_GPU_MEM_GB).log()))[0, 0] > 0.5
    assert done.select(pl.corr(pl.col(c.BATCH_SIZE).log(), pl.col(c.GPU_DEMAND_GFLOPS).log()))[0, 0] > 0.3
    oom = df.filter(pl.col(c.FAILURE_REASON) == "OOM")
    assert oom.height > 0 and (oom[c.QUEUE] != "a100-80g").any()


def test_unknown_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown format"):
        write_logs(tmp_path, SimConfig(fmt="xml"))


def test_job_ids_carry_the_seed_so_two_simulations_never_collide(tmp_path):
    (a,) = write_logs(tmp_path / "a", SimConfig(days=1, jobs_per_day=50, fmt="parquet", seed=1))
    (b,) = write_logs(tmp_path / "b", SimConfig(days=1, jobs_per_day=50, fmt="parquet", seed=2))
    ids_a, ids_b = set(pl.read_parquet(a)[c.JOB_ID]), set(pl.read_parquet(b)[c.JOB_ID])
    assert ids_a.isdisjoint(ids_b)
    assert min(ids_a) == "sim-s1-20261101-0000000"
