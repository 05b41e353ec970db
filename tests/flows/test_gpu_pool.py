"""The GPU pool's training result: read back from the shared warehouse its run wrote, the same `TrainResult` the
in-process path returns, so the nightly report shows the gate's decisions wherever training ran (issue 39, item 1).

The worker's side is a real `train-models` flow run (the one the `gpu-train` deployment starts); the caller's side
is `pool_result`, which `train_where_possible` calls once that flow run has completed. Handing a run to a real
worker is tested in tests/flows/test_train_flow.py.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from gpucast.records.results import IN_PROCESS, NightResult, TrainResult
from gpucast.tasks.simulate import SimConfig, write_logs

# the demo's shape, shorter: five days of history at 80 jobs a weekday, half of each day's jobs wait, and 90% of
# those start (and finish) the next day, so night 2's training has a backtest window for the gate to judge on
SIM = SimConfig(days=5, jobs_per_day=80, pending_fraction=0.5, dirty_fraction=0.0, start=date(2026, 9, 4), start_next_day=0.9)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_the_nightly_report_shows_the_gate_decisions_of_training_on_the_gpu_pool(home, tmp_path):
    from gpucast.flows.gpu_pool import ON_THE_POOL, pool_result
    from gpucast.flows.ingest import ingest_job_logs
    from gpucast.flows.score import score_pending
    from gpucast.flows.settings import Settings
    from gpucast.flows.train import train_models
    from gpucast.tasks.learn.options import TrainOptions
    from gpucast.tasks.report.render import nightly_report

    settings = Settings.from_env().ensure()
    days = write_logs(tmp_path / "logs", SimConfig(**{**SIM.__dict__, "days": SIM.days + 1}))
    options = TrainOptions(models=("linear_fs",), repeats=1, min_labelled=30, compile_trees=False)
    night_1 = datetime.combine(SIM.start, datetime.min.time(), tzinfo=UTC) + timedelta(days=SIM.days)

    # night 1: the history, a first champion per target, and its forecasts of the jobs still waiting
    ingest_job_logs(paths=[str(f) for f in days[:-1]], publish=False, storage=settings.storage)
    train_models(options, publish=False, storage=settings.storage)
    score_pending(publish=False, as_of=night_1, storage=settings.storage)
    # night 2: the next day, in which most of those jobs ran; training as the pool's worker runs it (a flow run of
    # `train-models` writing to the shared warehouse), gating tonight's best against night 1's champion
    ingest_job_logs(paths=[str(days[-1])], publish=False, storage=settings.storage)
    state = train_models(options, publish=False, storage=settings.storage, return_state=True)
    on_the_worker: TrainResult = state.result()
    decided = {t.target: t.decision for t in on_the_worker.targets if t.decision}
    assert decided and set(decided.values()) <= {"promoted", "kept"}  # the gate judged on a backtest window

    pooled = pool_result(settings, str(state.state_details.flow_run_id), options.targets)
    assert isinstance(pooled, TrainResult)
    assert (pooled.where, pooled.flow_run_id, pooled.train_run_id) == (
        ON_THE_POOL, str(state.state_details.flow_run_id), on_the_worker.train_run_id)
    assert pooled.targets == on_the_worker.targets  # champions, skips, rows, skipped fits and the gate's decisions
    assert (pooled.device, pooled.fits_on) == (on_the_worker.device, on_the_worker.fits_on)
    assert on_the_worker.where == IN_PROCESS

    report = nightly_report(NightResult(train=pooled), None)
    assert f"where: work pool gpu; run `{on_the_worker.train_run_id}`" in report
    for target, decision in decided.items():
        assert f"- {target}: tonight's best {next(t.champion for t in pooled.targets if t.target == target)}; " \
               f"gate: {decision}" in report


def test_a_pool_run_that_left_nothing_in_the_warehouse_is_an_error_naming_it(home):
    """A completed pool run whose train run is not in this warehouse (the worker's GPUCAST_HOME is another): one
    line that says so, not a report without training."""
    from gpucast.flows.gpu_pool import pool_result
    from gpucast.flows.settings import Settings

    settings = Settings.from_env().ensure()
    with pytest.raises(RuntimeError, match=r"flow run no-such-run\) but no succeeded train run of it is in .*GPUCAST_HOME"):
        pool_result(settings, "no-such-run", ("runtime_hours",))
