"""The real `train-models` flow on simulated, ingested jobs; the report; the deployment file."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml

from gpucast.flows.cli import main
from gpucast.tasks import contract as c
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
        assert n == 3 * 3 * 2 * 2  # targets x models x repeats x (validation, test)
        champs = con.execute("SELECT target, model, model_dir FROM model_champions ORDER BY target").fetchall()
    assert [t for t, _, _ in champs] == sorted(c.TARGETS)
    for _, model, model_dir in champs:
        assert model in MODELS.split(",") and (Path(model_dir) / "metadata.json").exists()

    assert main(["report", "--out", str(tmp_path / "report")]) == 0
    written = {p.name for p in (tmp_path / "report").iterdir()}
    assert {"report.md", "metrics_gpu_demand_gflops.png", "pred_vs_actual_runtime_hours.png"} <= written
    assert "| model | MSE | RMSE | MAE | MAPE % | R² |" in (tmp_path / "report" / "report.md").read_text()

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
        reasons = con.execute("SELECT skipped_reason FROM model_champions").fetchall()
    assert all("fewer than the minimum 5000" in r for (r,) in reasons)


def test_deployment_definitions_load():
    from prefect.flows import load_flow_from_entrypoint

    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    names = {d["name"]: d for d in spec["deployments"]}
    assert names["gpu-train"]["work_pool"]["name"] == "gpu"
    for d in spec["deployments"]:
        flow = load_flow_from_entrypoint(str(ROOT / d["entrypoint"]))
        assert flow.name == "train-models"

