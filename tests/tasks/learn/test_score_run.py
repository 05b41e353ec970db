"""The rules of a score run (`tasks/learn/score.py`), without Prefect or a trained model: the pending jobs split
once, the no-champion failure, the cluster's partitions with a failed one scored again, one target's forecasts put
together with the memory advice."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.records.outcomes import Champion
from gpucast.records.results import NightResult, TrainedTarget, TrainResult
from gpucast.tasks.learn import score as steps
from gpucast.tasks.learn.history import FORECAST_SCHEMA
from gpucast.tasks.learn.score import NO_CHAMPION, Pending


def pending() -> pl.DataFrame:
    """Three jobs: two with model features (a model type, a batch size), one without (model type unknown)."""
    rows = {f: [None, None, None] for f in c.FEATURES}
    rows[c.MODEL_TYPE] = ["CNN", None, c.UNKNOWN_MODEL_TYPE]
    rows[c.BATCH_SIZE] = [None, 32, None]
    return pl.DataFrame({c.JOB_ID: ["a", "b", "c"], **rows},
                        schema_overrides={f: pl.Float64 for f in c.FEATURES if f not in (c.MODEL_TYPE,)} | {
                            c.MODEL_TYPE: pl.String, c.OPTIMIZER: pl.String, c.PRECISION: pl.String})


CHAMPION = Champion(c.RUNTIME_HOURS, "lightgbm", "train-1", "/m")


def test_the_pending_jobs_split_once_into_the_champions_and_the_historys():
    split = Pending.of(pending())
    assert split.jobs == 3 and split.featureless_jobs == 1
    assert split.known()[c.JOB_ID].to_list() == ["a", "b"] and split.unknown()[c.JOB_ID].to_list() == ["c"]
    assert split.targets([CHAMPION]) == list(c.TARGETS)  # a featureless job: every target from the history
    only_known = Pending.of(pending().head(2))
    assert only_known.targets([CHAMPION]) == [c.RUNTIME_HOURS] and only_known.targets([]) == []


def test_without_a_champion_only_featureless_jobs_can_be_scored():
    Pending.of(pending().tail(1)).check_champions([])  # only the history's jobs: the run goes on
    Pending.of(pending()).check_champions([CHAMPION])
    with pytest.raises(FileNotFoundError, match=NO_CHAMPION.replace("(", r"\(").replace(")", r"\)")):
        Pending.of(pending()).check_champions([])
    with pytest.raises(FileNotFoundError, match=r"this run's training fitted none \(every target: 0 labelled"):
        Pending.of(pending()).check_champions([], "every target: 0 labelled COMPLETED jobs")


def test_a_train_run_that_fitted_no_target_says_each_reason_once():
    def trained(*skipped: str | None) -> TrainResult:
        return TrainResult("train-x", tuple(TrainedTarget(t, None if why else "lightgbm", why, 0, 0)
                                            for t, why in zip(c.TARGETS, skipped, strict=False)))

    assert trained("few", "few", "few").fitted_nothing() == "every target: few"
    assert trained("few", "none finished", "few").fitted_nothing() == (
        f"{c.TARGETS[0]}: few; {c.TARGETS[1]}: none finished; {c.TARGETS[2]}: few")
    assert trained("few", None, "few").fitted_nothing() is None  # one champion: scoring goes on
    assert NightResult().untrained() is None and NightResult(train=trained("few")).untrained() == "every target: few"


class FakeScorer:
    """Scores each job with P50 = the number of the scorer (so the test sees which scored which rows)."""

    made = 0

    def __init__(self):
        FakeScorer.made += 1
        self.number = FakeScorer.made

    def score(self, rows, batch_rows, progress=None):
        return rows.select(c.JOB_ID, pl.lit(float(self.number)).alias("p50"))


def test_a_partition_that_failed_on_the_cluster_is_scored_again_here_in_the_same_cut():
    known = Pending.of(pending()).known()
    first, second = steps.partitions(known, 2)
    on_cluster = (first.select(c.JOB_ID, pl.lit(0.0).alias("p50")), None)
    FakeScorer.made = 0
    got = steps.champion_forecasts(known, 10, scorer=FakeScorer, cluster_parts=on_cluster, rescorer=FakeScorer)
    assert got.rows() == [("a", 0.0), ("b", 1.0)]  # the failed second partition, scored here
    assert steps.champion_forecasts(known, 10, scorer=FakeScorer)[c.JOB_ID].to_list() == ["a", "b"]
    made = FakeScorer.made
    assert steps.champion_forecasts(known.head(0), 10, scorer=FakeScorer) is None and FakeScorer.made == made


def test_the_champions_load_in_the_background_from_the_start_and_a_failed_load_is_tried_again():
    """Issue 52 item 5: `Loading` starts every champion's load when it is made (a score run makes it before staging,
    so the loads overlap it); a target waits for its own; a failed load raises there and the retry loads anew."""
    import threading

    other = Champion(c.PEAK_GPU_MEM_GB, "random_forest", "train-1", "/m")
    started, release, loads = threading.Event(), threading.Event(), []

    def load(champion):
        loads.append((champion.target, threading.current_thread().name))
        started.set()
        release.wait(10)
        if champion is other and len(loads) <= 2:
            raise OSError("the model file is not readable yet")
        return f"scorer of {champion.target}"

    loading = steps.Loading([CHAMPION, other], load)
    assert started.wait(10)  # began before anyone asked for a scorer
    assert loads[0][0] == c.RUNTIME_HOURS and loads[0][1].startswith("gpucast-champions")
    release.set()
    assert loading.scorer(CHAMPION) == f"scorer of {c.RUNTIME_HOURS}"
    with pytest.raises(OSError, match="not readable"):
        loading.scorer(other)
    assert [target for target, _ in loads] == [c.RUNTIME_HOURS, c.PEAK_GPU_MEM_GB]  # each loaded once, in turn
    assert loading.scorer(other) == f"scorer of {c.PEAK_GPU_MEM_GB}" and len(loads) == 3  # the retry loaded it anew
    late = Champion(c.GPU_DEMAND_GFLOPS, "lightgbm", "train-1", "/m")
    assert loading.scorer(late) == f"scorer of {c.GPU_DEMAND_GFLOPS}"  # not given at the start: loaded when asked
    on_demand = steps.Loading([late], lambda ch: loads.append(ch.target) or ch.target, background=False)
    assert len(loads) == 4 and on_demand.scorer(late) == c.GPU_DEMAND_GFLOPS and loads[-1] == c.GPU_DEMAND_GFLOPS


def test_the_history_is_read_only_when_jobs_without_features_are_pending():
    def unread():
        raise AssertionError("read")

    assert steps.history_forecasts(c.RUNTIME_HOURS, Pending.of(pending()).unknown().head(0), unread, "score-1", 1) is None


def test_a_targets_forecasts_carry_the_memory_advice_and_the_runs_stamp():
    made = pl.DataFrame({c.JOB_ID: ["a", "b"], "p10": [1.0, 2.0], "p50": [2.0, 3.0], "p90": [10.0, 30.0],
                         "model": ["lightgbm"] * 2, "ood": [False, True], "ood_reason": [None, "far"],
                         "arch_inferred": [None, None], "arch_match_distance": [None, None],
                         "target": [c.PEAK_GPU_MEM_GB] * 2, "train_run_id": ["train-1"] * 2},
                        schema_overrides={k: v for k, v in FORECAST_SCHEMA.items()})
    at = datetime(2026, 11, 28, tzinfo=UTC)
    scored = steps.target_forecasts([made, None], pending(), 24.0, "score-1", at)
    assert scored["safe_request_gb"].to_list() == [11.0, 33.0] and scored["oom_risk"].to_list() == [False, True]
    assert set(scored["score_run_id"]) == {"score-1"} and set(scored["scored_at"]) == {at}
    assert steps.ood_forecasts(scored) == 1
    assert steps.target_forecasts([None], pending(), 24.0, "score-1", at).height == 0


def test_a_job_that_logs_no_gpu_is_judged_against_its_queues_largest_gpu():
    """Newcomer 26 P7: a job of an L4 queue that logged no GPU type was judged against the 80 GB setting (no OOM risk)
    while the plan found no GPU of its queue to hold it. Its logged GPU first, then its queue's largest GPU in the
    inventory (`records.inventory.largest_memory_gb`), then the setting; no inventory: the setting, as before."""
    from pathlib import Path

    from gpucast.records.inventory import largest_memory_gb, load_inventory, read_inventory
    from gpucast.tasks.learn.features import GPU_MODEL

    demo = load_inventory(Path(steps.__file__).parents[2] / "records" / "reference" / "demo_inventory.yaml")
    assert largest_memory_gb(demo) == {"a100-40g": 40.0, "a100-80g": 80.0, "l4-24g": 24.0}
    assert largest_memory_gb(None) == {} and read_inventory(None) is None
    with pytest.raises(FileNotFoundError, match="GPUCAST_INVENTORY names .*which does not exist"):
        read_inventory(Path("/nonexistent/inventory.yaml"))
    rows = pl.DataFrame({c.JOB_ID: ["logged", "l4", "a40", "elsewhere", "none"],
                         GPU_MODEL: ["H100-80GB", None, None, None, None],
                         c.QUEUE: ["l4-24g", "l4-24g", "a100-40g", "cpu", None]})
    got = steps.job_gpu_memory(rows, 80.0, largest_memory_gb(demo))
    assert got["gpu_mem_gb"].to_list() == [80.0, 24.0, 40.0, 80.0, 80.0]
    assert steps.job_gpu_memory(rows, 80.0)["gpu_mem_gb"].to_list() == [80.0] * 5
