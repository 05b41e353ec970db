"""The real `train-models` flow on simulated, ingested jobs; the report; the deployment file."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml

from gpucast.expectations import contract as c
from gpucast.flows.cli import main
from gpucast.tasks.simulate import SimConfig, write_logs

ROOT = Path(__file__).resolve().parents[2]
MODELS = "transformer_bigru,lightgbm,linear_fs"


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_train_then_report(home, tmp_path, capsys):
    write_logs(tmp_path / "logs", SimConfig(days=1, jobs_per_day=600, seed=2))
    assert main(["ingest", str(tmp_path / "logs")]) == 0
    args = ["train", "--models", MODELS, "--preset", "tiny", "--repeats", "2", "--min-labelled", "100"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "gpu_demand_gflops: champion" in out

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        run_id, status, device = con.execute("SELECT train_run_id, status, device FROM train_runs").fetchone()
        assert status == "succeeded" and device in ("cpu", "cuda")
        n = con.execute("SELECT count(*) FROM model_metrics WHERE train_run_id = ?", [run_id]).fetchone()[0]
        fits = con.execute("SELECT count(*) FROM model_metrics WHERE train_run_id = ? AND model <> 'blend'", [run_id]).fetchone()[0]
        # targets x models x repeats x (validation, test: the held-out fold; the generalisation holdout), issue 50
        assert fits == 3 * 3 * 2 * 3
        # the blend (issue 50 item 2), where it competes: one validation, one test and two holdout rows a target
        blends = con.execute("SELECT target, count(*) FROM model_metrics WHERE train_run_id = ? AND model = 'blend' "
                             "GROUP BY ALL", [run_id]).fetchall()
        assert all(k == 4 for _, k in blends) and n == fits + 4 * len(blends)
        epochs = con.execute("SELECT model, min(epochs), max(epochs) FROM model_metrics WHERE model <> 'blend' "
                             "GROUP BY ALL ORDER BY 1").fetchall()
        assert epochs == [("lightgbm", None, None), ("linear_fs", None, None), ("transformer_bigru", 2, 2)]  # tiny: 2
        champs = con.execute("SELECT target, model, model_dir FROM model_champions ORDER BY target").fetchall()
        costs = con.execute("SELECT min(score_seconds_per_million), count(score_seconds_per_million) FROM model_metrics").fetchone()
        assert costs[0] > 0 and costs[1] == n  # every fit's scoring cost was counted (the champion rule's tie-break)
        chosen = con.execute("SELECT challenger, most_accurate_model, choice_reason FROM model_champions").fetchall()
    assert all(best in MODELS.split(",") and reason for _, best, reason in chosen)
    # not the most accurate: tied with it (the reason names the tie and the challenger: the cheaper to score, or under
    # the cost floor the first in the preference order) or made champion by a check
    assert all(challenger == best or ("tied" in reason and challenger in reason) or "is champion" in reason
               for challenger, best, reason in chosen)
    assert [t for t, _, _ in champs] == sorted(c.TARGETS)
    for _, model, model_dir in champs:
        assert model in MODELS.split(",") and (Path(model_dir) / "metadata.json").exists()

    assert main(["report", "--out", str(tmp_path / "report")]) == 0
    written = {p.name for p in (tmp_path / "report").iterdir()}
    assert {"report.md", "metrics_gpu_demand_gflops.png", "pred_vs_actual_runtime_hours.png"} <= written
    assert "| model | planner loss | MSE | RMSE | MAE | MAPE % | R² |" in (tmp_path / "report" / "report.md").read_text()

    from prefect.artifacts import Artifact

    artifact = Artifact.get("train-report")
    assert artifact is not None and run_id in artifact.data


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_target_with_too_few_labels_is_skipped_with_reason(home, tmp_path, capsys):
    write_logs(tmp_path / "logs", SimConfig(days=1, jobs_per_day=120, seed=2))
    main(["ingest", str(tmp_path / "logs")])
    assert main(["train", "--models", "linear_fs", "--repeats", "1", "--min-labelled", "5000"]) == 0
    assert "skipped (" in capsys.readouterr().out
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        reasons = con.execute("SELECT target, model, skipped_reason FROM model_champions ORDER BY target").fetchall()
    assert [t for t, _, _ in reasons] == sorted(c.TARGETS)  # one row per target, none left out
    # issue 50: a target too thin to compare models on gets the plain LightGBM alone, and the reason says so
    assert all(model == "lightgbm_plain" and "fewer than the minimum 5000" in r and "alone scores it" in r
               for _, model, r in reasons)


def test_deployment_definitions_load():
    from prefect.flows import load_flow_from_entrypoint

    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    names = {d["name"]: d for d in spec["deployments"]}
    assert names["gpu-train"]["work_pool"]["name"] == "gpu"
    assert names["nightly"]["work_pool"]["name"] == "cpu"
    assert names["nightly"]["schedules"][0]["cron"] == "0 2 * * *"
    flows = {d["name"]: load_flow_from_entrypoint(str(ROOT / d["entrypoint"])).name for d in spec["deployments"]}
    assert flows == {"gpu-train": "train-models", "nightly": "nightly"}



def _gpu_deployment(client, root: Path) -> None:
    """The `gpu-train` deployment as prefect.yaml defines it, registered on the test server."""
    from prefect.client.schemas.actions import WorkPoolCreate

    from gpucast.flows.gpu_pool import GPU_POOL

    client.create_work_pool(WorkPoolCreate(name=GPU_POOL, type="process"))
    client.create_deployment(
        flow_id=client.create_flow_from_name("train-models"), name="gpu-train", work_pool_name=GPU_POOL,
        entrypoint="flows/train.py:train_models",
        pull_steps=[{"prefect.deployments.steps.set_working_directory": {"directory": str(root)}}],
    )


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_training_goes_to_the_gpu_pool_only_when_a_worker_takes_it(home, tmp_path):
    """No pool, a pool without workers, a worker that never picks up: in-process. A real worker: there."""
    import dataclasses
    import os
    import subprocess
    import sys

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    from gpucast.flows.gpu_pool import GPU_POOL, gpu_worker_online, train_where_possible

    write_logs(tmp_path / "logs", SimConfig(days=1, jobs_per_day=300, seed=2))
    assert main(["ingest", str(tmp_path / "logs")]) == 0
    from gpucast.flows.settings import Settings
    from gpucast.tasks.learn.options import TrainOptions

    # what the nightly was given (its settings and flags): a budget, a backtest window, a runner and a Dask
    # address other than the defaults; the worker's own environment says otherwise (below), and the
    # worker's run must still record the nightly's
    given = Settings.from_env().override(train_runner="local", dask_address="tcp://127.0.0.1:9",
                                         night_budget_minutes=7.5, backtest_days=3)
    options = TrainOptions(models=("linear_fs",), repeats=1, min_labelled=50, epochs=2, seed=5)
    params = {"options": options, "settings": given}
    assert not gpu_worker_online()
    assert train_where_possible(**params).where == "in-process"

    with get_client(sync_client=True) as client:
        _gpu_deployment(client, ROOT)
        try:
            assert not gpu_worker_online()  # the pool exists, nobody serves it
            assert train_where_possible(**params).where == "in-process"

            client.send_worker_heartbeat(GPU_POOL, "stuck-worker", heartbeat_interval_seconds=30)
            assert gpu_worker_online()
            out = train_where_possible(pickup_timeout_s=3, **params)
            assert out.where == "in-process"
            assert client.read_flow_run(out.cancelled_flow_run_id).state.is_cancelled()

            env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_WORKER_QUERY_SECONDS": "2",
                   "GPUCAST_NIGHT_BUDGET_MINUTES": "99", "GPUCAST_BACKTEST_DAYS": "99", "GPUCAST_TRAIN_RUNNER": "dask"}
            # one worker for both hand-offs below (a second worker process cost ~10 s of start-up and polling)
            worker = subprocess.Popen([sys.executable, "-m", "prefect", "worker", "start", "--pool", GPU_POOL,
                                       "--name", "gpu-box"], env=env)
            try:
                out = train_where_possible(pickup_timeout_s=120, **params)
                assert out.where == "work pool gpu"
                handed = client.read_flow_run(out.flow_run_id)
                assert handed.state.is_completed()
                # every option the nightly had, its time limits filled in from the nightly's settings
                sent = {**options.model_dump(mode="json"), "night_budget_minutes": 7.5,
                        "nn_max_minutes": given.training.nn_max_minutes,
                        "score_budget_s": given.training.score_budget_s}
                assert handed.parameters["options"] == sent
                assert handed.parameters["quality"]["backtest_days"] == 3
                # every cluster setting of the nightly's (not the worker's environment, which says `dask`), the
                # overridden two named: a literal dict of all of them broke at each new cluster setting (754e050)
                assert handed.parameters["cluster"] == dataclasses.asdict(given.cluster)
                assert handed.parameters["cluster"]["train_runner"] == "local"
                assert handed.parameters["cluster"]["dask_address"] == "tcp://127.0.0.1:9"

                # a run the worker starts and that then fails is a real training failure: it fails the caller.
                # One target: each failing fit is retried once after 5 s (flows/train.py `fit_model`), and the run
                # fails when every fit has; three targets waited 15 s for the same failure
                broken = TrainOptions(models=("transformer_bigru",), targets=(c.RUNTIME_HOURS,), preset="tiny",
                                      device="no-such-device", repeats=1, min_labelled=50)
                with pytest.raises(RuntimeError, match="training on the 'gpu' pool ended Failed"):
                    train_where_possible(broken, given, pickup_timeout_s=120)
            finally:
                worker.terminate()
                worker.wait(timeout=60)
        finally:
            client.delete_work_pool(GPU_POOL)  # later tests in this session must train in-process
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        runs = con.execute("SELECT status, night_budget_minutes, train_runner, dask_address, fits_on FROM train_runs "
                           "ORDER BY started_at").fetchall()
    # three in-process runs and the worker's, same warehouse; then the worker's failed one
    assert [r[0] for r in runs] == ["succeeded"] * 4 + ["failed"]
    # every run, the GPU worker's (the 4th) included, trained with what the nightly was given
    assert {r[1:4] for r in runs[:4]} == {(7.5, "local", "tcp://127.0.0.1:9")}
    assert runs[3][4] == "this process (one fit at a time)"


@pytest.mark.usefixtures("prefect_harness")
def test_the_scoring_budget_is_judged_at_the_queue_pending_when_training_runs(home, tmp_path, capsys):
    """`resolve` counts the pending jobs the night will score; `--score-budget-s` (GPUCAST_SCORE_BUDGET_S) reaches the
    champion's choice, and a model over it does not compete (issue 52 item 5, session 23)."""
    from gpucast.flows.settings import Settings
    from gpucast.flows.train import resolve
    from gpucast.tasks.learn.options import TrainOptions

    write_logs(tmp_path / "logs", SimConfig(days=1, jobs_per_day=400, seed=3))
    assert main(["ingest", str(tmp_path / "logs")]) == 0
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        pending = con.execute("SELECT count(*) FROM job_logs WHERE status = 'PENDING'").fetchone()[0]
    assert pending > 0
    settings = Settings.from_env()
    filled = resolve(TrainOptions(), settings)
    assert (filled.pending_jobs, filled.score_budget_s, filled.compile_trees) == (pending, 10.0, False)
    assert resolve(TrainOptions(pending_jobs=7), settings).pending_jobs == 7  # a caller's count is kept
    # a budget no model but the plain LightGBM (which always competes) fits in: it is every target's champion
    assert main(["train", "--models", "lightgbm,lightgbm_plain,linear_fs", "--repeats", "1", "--min-labelled", "50",
                 "--train-runner", "local", "--score-budget-s", "1e-9"]) == 0
    from gpucast.warehouse import training

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        chosen = con.execute("SELECT challenger, choice_reason FROM model_champions").fetchall()
        # what the run was judged by, for on-call (train_runs)
        assert con.execute("SELECT score_budget_s, pending_jobs FROM train_runs").fetchall() == [(1e-9, pending)]
        run_id, costs = con.execute("SELECT train_run_id, avg(score_seconds_per_million) FROM model_metrics WHERE "
                                    "model = 'lightgbm_plain' AND split = 'test' AND target = 'runtime_hours' "
                                    "GROUP BY ALL").fetchone()
        # what the gate judges a current champion by, tomorrow night (`GateWindow.cost`)
        assert costs > 0 and training.champion_cost(con, "runtime_hours", run_id, "lightgbm_plain") == pytest.approx(costs)
        assert training.champion_cost(con, "runtime_hours", run_id, "no_such_model") is None
    assert chosen and all(model == "lightgbm_plain" for model, _ in chosen)
    # the next night's gate reads it as the current champion's cost (`GateWindow.cost`)
    from gpucast.flows.train import gate_windows

    windows = gate_windows.fn(settings, ("runtime_hours",), refresh=False)
    assert windows.champion("runtime_hours").model == "lightgbm_plain"
    assert windows.of("runtime_hours").cost == pytest.approx(costs)
    assert all(f"over the scoring budget (1e-09 CPU-s a target for the {pending:,} pending jobs" in reason
               for _, reason in chosen)

    # The next night, the same budget and 2 repeats: the models it priced out are fitted once (their last counted cost
    # far over it), their second repeat not run, recorded in skipped_fits and said; the plain LightGBM is fitted on
    # both (review 73 S3-11, session 24)
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        last = training.last_costs(con, "tuned", "residual")
    assert set(last) == {"gpu_demand_gflops", "peak_gpu_mem_gb", "runtime_hours"}
    assert {"lightgbm", "lightgbm_plain", "linear_fs"} <= set(last["runtime_hours"])
    assert last["runtime_hours"]["lightgbm_plain"] == pytest.approx(costs)
    capsys.readouterr()
    assert main(["train", "--models", "lightgbm,lightgbm_plain,linear_fs", "--repeats", "2", "--min-labelled", "50",
                 "--train-runner", "local", "--score-budget-s", "1e-9"]) == 0
    said = capsys.readouterr().out
    assert "runtime_hours: champion lightgbm_plain" in said
    assert "fits not run, over the scoring budget: lightgbm, linear_fs" in said
    targets = ("gpu_demand_gflops", "peak_gpu_mem_gb", "runtime_hours")
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        second, message = con.execute("SELECT train_run_id, message FROM train_runs ORDER BY started_at DESC LIMIT 1").fetchone()
        fitted = con.execute("SELECT DISTINCT target, model, repeat FROM model_metrics WHERE train_run_id = ? "
                             "AND model != 'blend'", [second]).fetchall()
        skipped = con.execute("SELECT target, model, repeat, reason FROM skipped_fits WHERE train_run_id = ? ORDER BY ALL",
                              [second]).fetchall()
        reasons = con.execute("SELECT choice_reason FROM model_champions WHERE train_run_id = ?", [second]).fetchall()
        # as the GPU pool's run hands it back (read from the warehouse): the priced-out models apart from fits cut
        flow_run = con.execute("SELECT flow_run_id FROM train_runs WHERE train_run_id = ?", [second]).fetchone()[0]
        pooled = training.train_result(con, flow_run, "work pool gpu", ("runtime_hours",))
    assert {(t.target, t.skipped_fits, t.priced_out) for t in pooled.targets} == {
        (t, 0, ("lightgbm", "linear_fs")) for t in targets}
    assert sorted(fitted) == sorted([(t, m, 0) for t in targets for m in ("lightgbm", "lightgbm_plain", "linear_fs")]
                                    + [(t, "lightgbm_plain", 1) for t in targets])
    assert [row[:3] for row in skipped] == [(t, m, 1) for t in targets for m in ("lightgbm", "linear_fs")]
    assert all(r.startswith("not fitted: at its last counted scoring cost it would cost ") and
               f"for the {pending:,} pending jobs, over 2x the scoring budget (1e-09 CPU-s a target" in r
               for *_, r in skipped)
    assert "fits not run, over the scoring budget at their last counted cost: lightgbm, linear_fs (skipped_fits)" in message
    assert "fit(s) skipped" not in message  # not fits the night failed to finish
    assert all("fits not run tonight, over the scoring budget at their last counted cost (table skipped_fits), each "
               "fitted once: lightgbm (not competing: over it at tonight's count too), linear_fs (not competing" in r
               for (r,) in reasons)
    # no budget (0): every model is fitted again
    assert main(["train", "--models", "lightgbm,lightgbm_plain,linear_fs", "--repeats", "1", "--min-labelled", "50",
                 "--train-runner", "local", "--score-budget-s", "0"]) == 0
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        third = con.execute("SELECT train_run_id FROM train_runs ORDER BY started_at DESC LIMIT 1").fetchone()[0]
        assert con.execute("SELECT count(DISTINCT model) FROM model_metrics WHERE train_run_id = ? AND model != 'blend'",
                           [third]).fetchone()[0] == 3
        assert con.execute("SELECT count(*) FROM skipped_fits WHERE train_run_id = ?", [third]).fetchone()[0] == 0
