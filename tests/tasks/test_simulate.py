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


def test_no_record_is_dated_after_the_logs_end(tmp_path):
    """The golden nights failed CI on 2026-11-29 at 15:45 and passed at 15:30: a simulated completion dated
    2026-11-30 15:41 was rejected by the ingest's clock check until the wall clock came within a day of it.
    A job still running when the logs end is logged RUNNING, last seen a second before the end, without outcomes."""
    from datetime import UTC, date, datetime

    cfg = SimConfig(days=3, jobs_per_day=400, fmt="parquet", seed=5, start=date(2026, 9, 1))
    df = pl.concat([pl.read_parquet(p) for p in write_logs(tmp_path, cfg)])
    end = datetime(2026, 9, 4, tzinfo=UTC)
    assert df[c.UPDATED_AT].max() < end
    still = df.filter(pl.col(c.UPDATED_AT) == datetime(2026, 9, 3, 23, 59, 59, tzinfo=UTC))
    assert still.height > 10 and set(still[c.STATUS]) == {"RUNNING"}  # long jobs of any day
    assert still.select(*c.TARGETS, c.FAILURE_REASON).null_count().row(0) == (still.height,) * (len(c.TARGETS) + 1)
    assert still[c.SUBMITTED_AT].min() < datetime(2026, 9, 2, tzinfo=UTC)


def test_unknown_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown format"):
        write_logs(tmp_path, SimConfig(fmt="xml"))


def test_job_ids_carry_the_seed_so_two_simulations_never_collide(tmp_path):
    (a,) = write_logs(tmp_path / "a", SimConfig(days=1, jobs_per_day=50, fmt="parquet", seed=1))
    (b,) = write_logs(tmp_path / "b", SimConfig(days=1, jobs_per_day=50, fmt="parquet", seed=2))
    ids_a, ids_b = set(pl.read_parquet(a)[c.JOB_ID]), set(pl.read_parquet(b)[c.JOB_ID])
    assert ids_a.isdisjoint(ids_b)
    assert min(ids_a) == "sim-s1-20261101-0000000"


def _records_written(path) -> int:
    """Records in a simulated file as written: Parquet rows, JSONL lines, CSV lines after the header."""
    if path.suffix == ".parquet":
        return pl.read_parquet(path).height
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return len(lines) - (path.suffix == ".csv")


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_every_documented_flag_combination_writes_logs_that_ingest_and_reconcile(tmp_path_factory):
    """Days, jobs per day, pending and dirty fractions over their whole ranges (0 and 1 included: a
    multi-day run with every job pending once crashed), every format, any seed: the files are written,
    ingest without an error, and every record written is loaded, rejected or a duplicate."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from gpucast.flows.ingest import ingest_job_logs
    from gpucast.flows.settings import Settings
    from gpucast.tasks.simulate import FORMATS

    fraction = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0, 1))

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(days=st.integers(1, 3), jobs=st.integers(1, 40), pending=fraction, dirty=fraction,
           fmt=st.sampled_from(FORMATS), seed=st.integers(0, 2**31 - 1))
    def check(days, jobs, pending, dirty, fmt, seed):
        root = tmp_path_factory.mktemp("sim")
        paths = write_logs(root / "logs", SimConfig(days=days, jobs_per_day=jobs, pending_fraction=pending,
                                                    dirty_fraction=dirty, seed=seed, fmt=fmt))
        assert len(paths) == days
        s = ingest_job_logs(paths=[str(root / "logs")], publish=False,
                            storage=Settings.from_env().override(home=root / "home").storage)
        assert s.files == days and s.files_rejected == 0
        assert s.rows_read == sum(_records_written(p) for p in paths)
        assert s.rows_read == s.rows_loaded + s.rows_rejected + s.rows_duplicate

    check()


def test_every_job_pending_over_several_days_is_simulated(tmp_path):
    """The case that crashed (`--pending-fraction 1.0`, more than one day): the next day starts some of them."""
    paths = write_logs(tmp_path, SimConfig(days=2, jobs_per_day=50, pending_fraction=1.0, fmt="parquet", seed=3))
    first, second = (pl.read_parquet(p) for p in paths)
    assert set(first[c.STATUS]) == {"PENDING"}
    assert {"RUNNING", "PENDING"} <= set(second[c.STATUS])


def test_the_rhythm_gives_quiet_weekends_a_trend_and_deadline_bursts():
    """`Rhythm`: weekend days carry about `weekend_factor` of a weekday's jobs, the volume grows by
    `trend_per_week`, and the days before a deadline carry `burst_factor` times it; without a rhythm
    every day has exactly `jobs_per_day` (what the tests' fixtures rely on)."""
    from datetime import timedelta

    from gpucast.tasks.simulate import Rhythm, daily_volumes

    flat = SimConfig(days=28, jobs_per_day=40)
    assert daily_volumes(flat).tolist() == [40] * 28
    cfg = SimConfig(days=364, jobs_per_day=200, rhythm=Rhythm(weekend_factor=0.25, trend_per_week=0.01, burst_chance=0.0))
    v = daily_volumes(cfg)
    weekend = [(cfg.start + timedelta(days=d)).weekday() >= 5 for d in range(cfg.days)]
    weekday_mean, weekend_mean = v[~pl.Series(weekend).to_numpy()].mean(), v[pl.Series(weekend).to_numpy()].mean()
    assert weekend_mean / weekday_mean == pytest.approx(0.25, abs=0.03)
    assert v[-28:].mean() / v[:28].mean() == pytest.approx(1.01 ** 48, rel=0.1)  # 48 weeks apart
    bursty = daily_volumes(SimConfig(days=364, jobs_per_day=200, rhythm=Rhythm(weekend_factor=1.0, trend_per_week=0.0,
                                                                              burst_chance=0.05, burst_factor=2.0)))
    assert (bursty > 300).sum() >= 20 and (bursty < 260).sum() > 200  # ~3 burst days per deadline, ~18 deadlines
    assert daily_volumes(cfg).tolist() == v.tolist()  # seeded


@pytest.mark.parametrize("bad", [{"weekend_factor": -0.1}, {"burst_chance": 1.5}, {"trend_per_week": -1.0}])
def test_a_rhythm_out_of_range_is_refused(bad):
    from gpucast.tasks.simulate import Rhythm

    with pytest.raises(ValueError, match=next(iter(bad))):
        Rhythm(**bad)


def test_gpucast_simulate_has_a_rhythm_by_default_and_flat_on_request(tmp_path, capsys):
    from gpucast.flows.cli import main

    def submitted_per_day(folder) -> list[int]:
        """Jobs submitted on each file's own day (ids carry it; a file also logs the day before's starts)."""
        return [pl.read_parquet(p).filter(pl.col(c.JOB_ID).str.contains(p.stem.removeprefix("jobs-").replace("-", "")))
                [c.JOB_ID].n_unique() for p in sorted(folder.iterdir())]

    common = ["--history-days", "7", "--jobs-per-day", "60", "--format", "parquet"]
    assert main(["simulate", "--out", str(tmp_path / "flat"), *common, "--flat"]) == 0
    assert submitted_per_day(tmp_path / "flat") == [60] * 7
    assert main(["simulate", "--out", str(tmp_path / "rhythm"), *common, "--weekend-factor", "0.1", "--burst-chance", "0"]) == 0
    days = submitted_per_day(tmp_path / "rhythm")
    assert days[0] < 15 and days[6] < 15 and min(days[1:6]) > 40  # Sunday 2026-11-01 and Saturday: quiet
    assert main(["simulate", "--out", str(tmp_path / "bad"), "--burst-chance", "2"]) == 2
    assert "--burst-chance" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_tiny_simulations_with_days_of_no_jobs_are_written(tmp_path, fmt):
    """Issue 48 item 11: `gpucast simulate --history-days 1 --jobs-per-day 5 --seed 3` drew 0 jobs for its one day
    (a Sunday, at the rhythm's weekend factor) and stopped on a Polars error (the untyped, empty `submitted_at`).
    A day of no jobs is a file of no records; a Friday's pending jobs still start on a Saturday of none."""
    from datetime import date

    from gpucast.tasks.ingest.readers import read_chunks
    from gpucast.tasks.simulate import Rhythm

    cfg = SimConfig(days=3, jobs_per_day=6, pending_fraction=0.5, start=date(2026, 10, 30), fmt=fmt, seed=3,
                    rhythm=Rhythm(weekend_factor=0.0, trend_per_week=0.0, burst_chance=0.0))  # Fri, Sat, Sun
    paths = write_logs(tmp_path, cfg)
    rows = [sum(ch.height for ch in read_chunks(p)) for p in paths]
    assert rows[0] >= 6 and rows[2] == 0
    saturday = pl.concat(list(read_chunks(paths[1])), how="diagonal") if rows[1] else None
    assert saturday is None or set(saturday[c.STATUS]) <= {"RUNNING", "COMPLETED", "FAILED"}  # Friday's starts only


def test_gpucast_simulate_one_quiet_day(tmp_path, capsys):
    from gpucast.flows.cli import main

    assert main(["simulate", "--out", str(tmp_path), "--history-days", "1", "--jobs-per-day", "5", "--seed", "3"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["jobs-2026-11-01.jsonl"]
