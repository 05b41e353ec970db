"""Every setting reaches the run on both paths people start one by: the CLI, and a deployment run.

A deployment run calls the flow with its `prefect.yaml` parameters and no settings object, so the
flow builds `Settings.from_env()` from the worker's environment; the CLI builds the same object and
puts its flags on top. Each path is run for real on a small simulated night, with every variable
set to a value whose effect can be seen in the warehouse.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
import yaml

from gpucast.flows.cli import main
from gpucast.flows.settings import Settings, Storage
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.simulate import SimConfig, write_logs
from gpucast.warehouse import db

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]
ROOT = Path(__file__).resolve().parents[2]

# Every variable away from its default, each with an effect the test can see.
ENV = {
    "GPUCAST_GPU_MEM_GB": "24",  # forecasts.gpu_mem_gb
    "GPUCAST_MAX_REJECT_FRACTION": "0.9",  # a 50%-dirty night passes (the default 0.2 fails it)
    "GPUCAST_NN_MAX_MINUTES": "0.00001",  # the network stops after its first epoch
    "GPUCAST_KEEP_TRAIN_RUNS": "1",  # an older run's model folder is removed
    "GPUCAST_DUCKDB_MEMORY": "300MB",  # the writer's memory limit
    "GPUCAST_LOCK_TIMEOUT_S": "7",  # the writer's wait
}
QUICK = TrainOptions(models=("transformer_bigru", "linear_fs"), preset="tiny", epochs=3, repeats=1, min_labelled=30)


def _older_run(settings: Storage) -> Path:
    """A successful train run from January, with a model folder named by its run id (pruning removes only folders named
    like one, tasks/learn/models/store.py): GPUCAST_KEEP_TRAIN_RUNS=1 removes it."""
    run_id = "train-20260101T020000Z-0a1b2c"
    folder = settings.models_dir / run_id
    folder.mkdir(parents=True)
    with db.writer(settings) as con:
        con.execute("INSERT INTO train_runs (train_run_id, started_at, status) VALUES (?, ?, 'succeeded')",
                    [run_id, datetime(2026, 1, 1, 2, tzinfo=UTC)])
    return folder


def _check_effects(home: Path, old: Path) -> None:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        # jobs whose GPU the catalogue does not know are judged against the setting (the others, their GPU's)
        unknown_gpu = ("SELECT DISTINCT f.gpu_mem_gb FROM forecasts f JOIN job_logs j USING (job_id) WHERE f.gpu_mem_gb "
                       "IS NOT NULL AND (j.gpu_type IS NULL OR j.gpu_type NOT IN (SELECT gpu_type FROM gpu_catalog))")
        assert con.execute(unknown_gpu).fetchall() == [(24.0,)]
        assert con.execute("SELECT DISTINCT epochs FROM model_metrics WHERE model = 'transformer_bigru'").fetchall() == [(1,)]
    assert not old.exists()
    with db.writer(Settings.from_env().storage) as con:
        assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] in ("286.1 MiB", "300.0 MB")
    assert Settings.from_env().storage.lock_timeout_s == 7.0


def _dirty_night(folder: Path) -> None:
    write_logs(folder, SimConfig(days=1, jobs_per_day=300, pending_fraction=0.2, dirty_fraction=0.5, seed=8))


def test_the_cli_honours_every_setting(home, tmp_path, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    old = _older_run(Settings.from_env().ensure().storage)
    _dirty_night(tmp_path / "logs")
    args = ["nightly", str(tmp_path / "logs"), "--models", ",".join(QUICK.models), "--preset", "tiny", "--epochs", "3",
            "--repeats", "1", "--min-labelled", "30"]
    assert main(args) == 0
    _check_effects(home, old)


def test_a_flag_beats_its_variable(home, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCAST_MAX_REJECT_FRACTION", "0.9")
    _dirty_night(tmp_path / "logs")
    assert main(["nightly", str(tmp_path / "logs"), "--max-reject-fraction", "0.2", "--no-train"]) == 4


def test_a_deployment_run_honours_every_setting(home, tmp_path, monkeypatch):
    """The nightly deployment's parameters, as prefect.yaml gives them, with the worker's environment."""
    from gpucast.flows.nightly import nightly

    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    old = _older_run(Settings.from_env().ensure().storage)
    _dirty_night(tmp_path / "logs")
    spec = {d["name"]: d for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]}
    parameters = spec["nightly"]["parameters"]
    # the deployment's own options, made quick for a test (the validation below covers the rest)
    parameters = {**parameters, "paths": [str(tmp_path / "logs")], "options": {**parameters["options"],
                                                                             **QUICK.model_dump(mode="json")}}
    nightly(**nightly.validate_parameters(parameters))
    _check_effects(home, old)


@pytest.mark.parametrize("name", ["nightly", "gpu-train"])
def test_prefect_yaml_parameters_validate_and_a_typo_is_refused(name):
    from prefect.exceptions import ParameterTypeError
    from prefect.flows import load_flow_from_entrypoint

    spec = {d["name"]: d for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]}[name]
    flow = load_flow_from_entrypoint(str(ROOT / spec["entrypoint"]))
    validated = flow.validate_parameters(spec["parameters"])
    assert isinstance(validated["options"], TrainOptions)
    with pytest.raises(ParameterTypeError, match="repeets"):
        flow.validate_parameters({"options": {**spec["parameters"]["options"], "repeets": 3}})
