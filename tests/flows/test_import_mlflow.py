"""`gpucast import mlflow`, `import slurm --mlflow-uri` and the sources file, against real MLflow stores
(a file store and a SQLite database) written by MLflow itself, through the real ingest flow."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import duckdb
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.cli import main
from gpucast.flows.environment import configure_mlflow
from tests.conftest import write
from tests.data.make_sources_demo import SACCT_HEADER, log_run

T0 = int(datetime(2026, 11, 20, 8, tzinfo=UTC).timestamp() * 1000)
HOUR = 3_600_000
COLUMNS = (c.STATUS, c.QUEUE, c.TEAM, c.MODEL_TYPE, c.BATCH_SIZE, c.LEARNING_RATE, c.OPTIMIZER, c.NUM_LAYERS,
           c.ITERATIONS, c.PRECISION, c.PARAMS_MILLION, c.GPU_TYPE, c.GPU_COUNT, c.PEAK_GPU_MEM_GB, c.RUNTIME_HOURS,
           c.SUBMITTED_AT, c.UPDATED_AT)
CNN = {"bs": 32, "lr": 0.001, "optimizer": "Adam", "model": "CNN", "num_layers": 8, "max_steps": 1000,
       "precision": "fp32"}
BERT = {"train_batch_size": 16, "learning_rate": 3e-5, "optimizer_name": "AdamW", "model_type": "Transformer",
        "n_layers": 24, "iterations": 20000, "bf16": True, "num_params": 350_000_000}
L4 = {"queue": "gpu-l4", "team": "vision", "gpu_type": "L4"}
A100 = {"queue": "gpu-a100", "team": "nlp", "gpu_type": "A100-80GB"}


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def client_for(uri: str):
    configure_mlflow()
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def empty_store(tmp_path) -> tuple[str, object, str]:
    """A file store with an empty experiment `sweeps`: (URI, client, experiment id)."""
    uri = f"file://{tmp_path / 'mlruns'}"
    client = client_for(uri)
    return uri, client, client.create_experiment("sweeps")


def store(uri: str) -> tuple[object, str, dict[str, str]]:
    """Runs of every kind in experiment `sweeps`: (client, experiment id, {name: run id})."""
    client = client_for(uri)
    exp = client.create_experiment("sweeps")
    series = lambda *peaks: [[p * 0.4, p, p * 0.9] for p in peaks]  # noqa: E731  (MB, one list per GPU)
    ids = {
        "one": log_run(client, exp, start_ms=T0, end_ms=T0 + 2 * HOUR, params=CNN, tags=L4, gpu_mb=series(21_500)),
        "four": log_run(client, exp, start_ms=T0 + HOUR, end_ms=T0 + 4 * HOUR, params=BERT, tags=A100,
                        gpu_mb=series(50_000, 61_000, 70_500, 40_000)),
        "failed": log_run(client, exp, start_ms=T0 + 2 * HOUR, end_ms=T0 + 2 * HOUR + HOUR // 4, status="FAILED",
                          params=BERT, tags=A100, gpu_mb=series(79_000, 80_100)),
        "killed": log_run(client, exp, start_ms=T0 + 3 * HOUR, end_ms=T0 + 3 * HOUR + HOUR // 2, status="KILLED",
                          params=CNN, tags=L4, gpu_mb=series(9_000, 9_500, 10_000)),
        "going": log_run(client, exp, start_ms=T0 + 4 * HOUR, status="RUNNING", params=CNN, tags=L4,
                         gpu_mb=series(12_000)),
        "no_gpu": log_run(client, exp, start_ms=T0 + 5 * HOUR, end_ms=T0 + 6 * HOUR, params=CNN, tags=L4),
        "bad": log_run(client, exp, start_ms=T0 + 6 * HOUR, end_ms=T0 + 7 * HOUR, params={**CNN, "bs": "large"},
                       tags=L4, gpu_mb=series(1_000)),
    }
    return client, exp, ids


def rows(home, sql: str) -> list[tuple]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def loaded(home) -> dict[str, tuple]:
    return {r[0]: r[1:] for r in rows(home, f"SELECT job_id, {', '.join(COLUMNS)} FROM job_logs")}


@pytest.fixture(params=["file", "sqlite"])
def uri(request, tmp_path) -> str:
    return f"file://{tmp_path / 'mlruns'}" if request.param == "file" else f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_runs_load_field_by_field(home, uri, capsys):
    _, _, ids = store(uri)
    assert main(["import", "mlflow", "--tracking-uri", uri, "--experiment", "sweeps"]) == 0
    out = capsys.readouterr().out
    assert (f"mlflow {uri}: 1 experiment(s), 7 run(s) new or changed: 7 job(s), 0 run(s) not started (not loaded); "
            "1 finished run(s) without GPU metrics (loaded without peak_gpu_mem_gb)") in out
    assert "7 rows read: 6 loaded, 1 rejected, 0 duplicate" in out
    cnn = ("gpu-l4", "vision", "CNN", 32, 0.001, "Adam", 8, 1000.0, "FP32", None, "L4-24GB")
    bert = ("gpu-a100", "nlp", "Transformer", 16, 3e-5, "AdamW", 24, 20000.0, "BF16", 350.0, "A100-80GB")
    assert loaded(home) == {
        f"mlflow-{ids['one']}": ("COMPLETED", *cnn, 1, 21.5, 2.0, at(T0), at(T0 + 2 * HOUR)),
        f"mlflow-{ids['four']}": ("COMPLETED", *bert, 4, 70.5, 3.0, at(T0 + HOUR), at(T0 + 4 * HOUR)),
        f"mlflow-{ids['failed']}": ("FAILED", *bert, 2, 80.1, 0.25, at(T0 + 2 * HOUR), at(T0 + 2 * HOUR + HOUR // 4)),
        f"mlflow-{ids['killed']}": ("CANCELLED", *cnn, 3, 10.0, 0.5, at(T0 + 3 * HOUR), at(T0 + 3 * HOUR + HOUR // 2)),
        f"mlflow-{ids['going']}": ("RUNNING", *cnn, 1, None, None, at(T0 + 4 * HOUR), at(T0 + 4 * HOUR)),
        f"mlflow-{ids['no_gpu']}": ("COMPLETED", *cnn, None, None, 1.0, at(T0 + 5 * HOUR), at(T0 + 6 * HOUR)),
    }
    assert rows(home, "SELECT job_id, reason_text FROM rejected_job_logs") == [
        (f"mlflow-{ids['bad']}", "batch_size: 'large' is not a number")]
    (run,) = rows(home, "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate, source FROM ingest_runs")
    assert run == (7, 6, 1, 0, "mlflow")


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_mapping_file_names_the_params_and_is_recorded_with_the_run(home, tmp_path, capsys):
    uri, client, exp = empty_store(tmp_path)
    log_run(client, exp, start_ms=T0, end_ms=T0 + HOUR, params={**CNN, "global_bs": 512, "optimizer": "adam_w"},
            tags=L4, gpu_mb=[[4_000.0]])
    m = write(tmp_path / "names.yaml", "fields:\n  batch_size: global_bs\nvalues:\n  optimizer: {adam_w: AdamW}\n"
                                       "constants:\n  team: research\n")
    assert main(["import", "mlflow", "--tracking-uri", uri, "--mapping", str(m)]) == 0
    assert "1 rows read: 1 loaded, 0 rejected, 0 duplicate" in capsys.readouterr().out
    assert rows(home, "SELECT batch_size, optimizer, team, model_type FROM job_logs") == [(512, "AdamW", "research",
                                                                                            "CNN")]
    assert rows(home, "SELECT source, mapping_path FROM ingest_runs") == [("mlflow", str(m.resolve()))]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_second_import_reads_what_is_new_or_changed(home, tmp_path, capsys):
    uri = f"file://{tmp_path / 'mlruns'}"
    client, exp, ids = store(uri)
    assert main(["import", "mlflow", "--tracking-uri", uri]) == 0  # every experiment: `Default` is empty
    assert "2 experiment(s), 7 run(s) new or changed" in capsys.readouterr().out
    assert rows(home, "SELECT location, scope, watermark_ms FROM source_watermarks") == [(uri, exp, T0 + 7 * HOUR)]

    # again: only the runs of the hour before the watermark are read, and they add nothing
    assert main(["import", "mlflow", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert "2 experiment(s), 2 run(s) new or changed" in out  # `no_gpu` ended, `bad` started and ended in that hour
    assert "2 rows read: 0 loaded, 1 rejected, 1 duplicate" in out

    # the run that was going ends; a new one starts: both read, both loaded; the older runs are not read
    client.set_terminated(ids["going"], "FINISHED", end_time=T0 + 8 * HOUR)
    new = log_run(client, exp, start_ms=T0 + 9 * HOUR, end_ms=T0 + 10 * HOUR, params=CNN, tags=L4, gpu_mb=[[2_000.0]])
    assert main(["import", "mlflow", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out  # and the hour before the watermark again (`no_gpu`, `bad`): nothing new there
    assert "2 experiment(s), 4 run(s) new or changed" in out
    assert "4 rows read: 2 loaded, 1 rejected, 1 duplicate" in out
    assert rows(home, f"SELECT job_id, status, runtime_hours, peak_gpu_mem_gb FROM job_logs WHERE job_id IN "
                      f"('mlflow-{ids['going']}', 'mlflow-{new}') ORDER BY submitted_at") == [
        (f"mlflow-{ids['going']}", "COMPLETED", 4.0, 12.0), (f"mlflow-{new}", "COMPLETED", 1.0, 2.0)]
    assert rows(home, "SELECT watermark_ms FROM source_watermarks") == [(T0 + 10 * HOUR,)]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_slurm_jobs_take_their_model_features_from_the_run_they_ran(home, tmp_path, capsys):
    uri, client, exp = empty_store(tmp_path)
    log_run(client, exp, start_ms=T0, end_ms=T0 + HOUR, params=BERT, tags={"slurm_job_id": "7001"},
            gpu_mb=[[30_000.0]])
    sacct = write(tmp_path / "sacct.txt", SACCT_HEADER + "\n" + "\n".join([
        "7001|train|hpc|gpu-a100|nlp|bob|COMPLETED|0:0|2026-11-20T07:55:00|2026-11-20T08:00:00|2026-11-20T09:00:00|"
        "01:00:00|gres/gpu:a100=2,gres/gpu=2|gres/gpu=2|||",
        "7002|train|hpc|gpu-a100|nlp|bob|COMPLETED|0:0|2026-11-20T07:55:00|2026-11-20T08:00:00|2026-11-20T09:00:00|"
        "01:00:00|gres/gpu:a100=1,gres/gpu=1|gres/gpu=1|||{\"model_type\": \"CNN\"}"]) + "\n")
    assert main(["import", "slurm", str(sacct), "--mlflow-uri", uri, "--mlflow-experiment", "sweeps"]) == 0
    out = capsys.readouterr().out
    assert f"mlflow {uri}: 1 job(s) joined to their run by the tag slurm_job_id" in out
    assert rows(home, "SELECT job_id, model_type, batch_size, precision, params_million, gpu_count, "
                      "peak_gpu_mem_gb, runtime_hours, queue FROM job_logs ORDER BY job_id") == [
        ("slurm-hpc-7001", "Transformer", 16, "BF16", 350.0, 2, 30.0, 1.0, "gpu-a100"),  # Slurm's GPUs, the run's memory
        ("slurm-hpc-7002", "CNN", None, None, None, 1, None, 1.0, "gpu-a100")]


@pytest.mark.parametrize(("target", "code", "says"), [
    ("sqlite:///{tmp}/none.db", 2, "mlflow sqlite:///{tmp}/none.db: no MLflow store at {tmp}/none.db; give the "
                                  "tracking URI the runs were logged to"),
    ("file://{tmp}/mlruns", 2, "mlflow file://{tmp}/mlruns: no experiment named 'nope' (experiments: Default); "
                               "give --experiment one of them, or none for all"),
    ("http://127.0.0.1:9", 5, "mlflow http://127.0.0.1:9: cannot be read (API request to "),
])
def test_a_store_that_cannot_be_read_is_one_line(home, tmp_path, capsys, target, code, says):
    client_for(f"file://{tmp_path}/mlruns").search_experiments()  # an empty file store, with its `Default`
    uri = target.format(tmp=tmp_path)
    assert main(["import", "mlflow", "--tracking-uri", uri, "--experiment", "nope"]) == code
    err = capsys.readouterr().err
    assert err.startswith("gpucast import: " + says.format(tmp=tmp_path)) and err.count("\n") == 1
    assert not (tmp_path / "none.db").exists()  # MLflow was not let create it
    assert not (home / "warehouse.duckdb").exists() or rows(home, "SELECT count(*) FROM ingest_runs") == [(0,)]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_nan_samples_are_ignored_and_a_negative_series_quarantines_its_run(home, tmp_path, capsys):
    """Issue 38, defect 7, through a real store and the real ingest: NaN samples count nowhere in a series,
    a GPU whose series has no finite sample is no measurement, a negative series rejects its run naming it."""
    uri, client, exp = empty_store(tmp_path)
    nan = float("nan")
    ids = {name: log_run(client, exp, start_ms=T0 + i * HOUR, end_ms=T0 + i * HOUR + HOUR // 2, params=CNN, tags=L4,
                         gpu_mb=series)
           for i, (name, series) in enumerate({"last_nan": [[5000.0, nan]], "first_nan": [[nan, 5000.0]],
                                               "gpu1_nan": [[40_000.0], [nan, nan]], "gpu0_nan": [[nan, nan], [40_000.0]],
                                               "negative": [[20_000.0], [3000.0, -512.0]]}.items())}
    assert main(["import", "mlflow", "--tracking-uri", uri]) == 0
    capsys.readouterr()
    peaks = dict(rows(home, "SELECT job_id, peak_gpu_mem_gb FROM job_logs"))
    assert {name: peaks.get(f"mlflow-{run_id}") for name, run_id in ids.items()} == {
        "last_nan": 5.0, "first_nan": 5.0, "gpu1_nan": 40.0, "gpu0_nan": 40.0, "negative": None}
    assert rows(home, "SELECT job_id, reason_text FROM rejected_job_logs") == [
        (f"mlflow-{ids['negative']}", "system/gpu_1_memory_usage_megabytes: -512 MB is a negative memory reading "
                                      "(MLflow's system metrics are broken for this run)")]


def _tree(folder) -> dict[str, bytes | None]:
    """Every path under `folder` (hidden ones too) with its bytes (None for a folder)."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("target", ["file://{dir}", "{dir}", "sqlite:///{dir}/notes.db", "sqlite:///{dir}/readme.txt",
                                    "file://{dir}/missing"])
def test_an_import_creates_nothing_where_there_is_no_mlflow_store(home, tmp_path, capsys, target):
    """Issue 38, defect 3: `--tracking-uri file:///etc` created /etc/.trash (any folder given as a file store got
    one). A URI naming no existing MLflow store is refused, one line, exit 2, and nothing there changes."""
    import sqlite3

    folder = tmp_path / "not-a-store"
    write(folder / "readme.txt", "some folder\n")
    write(folder / "sub" / "data.csv", "a,b\n")
    with sqlite3.connect(folder / "notes.db") as con:  # an SQLite file, not MLflow's: MLflow would add its tables
        con.execute("CREATE TABLE notes (n TEXT)")
    before = _tree(folder)
    uri = target.format(dir=folder)
    assert main(["import", "mlflow", "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpucast import: mlflow {uri}: ") and err.count("\n") == 1
    assert "MLflow store" in err
    assert _tree(folder) == before


def test_an_empty_tracking_uri_creates_no_database_here(home, tmp_path, monkeypatch, capsys):
    """`--tracking-uri ''` created a 954 kB ./mlflow.db and exited 0."""
    monkeypatch.chdir(tmp_path)
    assert main(["import", "mlflow", "--tracking-uri", ""]) == 2
    assert capsys.readouterr().err == ("gpucast import: mlflow : an empty tracking URI (MLflow would create ./mlflow.db); "
                                       "give the tracking URI the runs were logged to (file:///path/mlruns, "
                                       "sqlite:////path/mlflow.db or http://host:5000)\n")
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()


def test_since_must_be_a_time(home, tmp_path, capsys):
    assert main(["import", "mlflow", "--tracking-uri", f"file://{tmp_path}", "--since", "yesterday"]) == 2
    assert capsys.readouterr().err == ("gpucast import: --since 'yesterday' is not an ISO 8601 time (e.g. 2026-11-01 "
                                       "or 2026-11-01T02:00:00Z)\n")


def test_without_the_extra_the_command_says_how_to_get_it(home, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)  # as if MLflow were not installed
    assert main(["import", "mlflow", "--tracking-uri", f"file://{tmp_path}"]) == 5
    assert capsys.readouterr().err == ("gpucast import: this command needs the `mlflow` extra (mlflow.tracking is not "
                                       "installed): pip install 'gpucast[mlflow]'\n")


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_the_sources_file_pulls_each_source_and_names_the_one_that_fails(home, tmp_path, monkeypatch, capsys):
    from gpucast.flows.imports import pull_sources
    from gpucast.flows.settings import Settings

    uri = f"file://{tmp_path / 'mlruns'}"
    client, exp, ids = store(uri)
    log_run(client, exp, start_ms=T0, end_ms=T0 + HOUR, params=BERT, tags={"slurm_job_id": "7001"})
    sacct = write(tmp_path / "exports" / "sacct-1.txt", SACCT_HEADER + "\n7001|train|hpc|gpu-a100|nlp|bob|COMPLETED|"
                  "0:0|2026-11-20T07:55:00|2026-11-20T08:00:00|2026-11-20T09:00:00|01:00:00|gres/gpu=1|gres/gpu=1|"
                  "||{\"model_type\": \"CNN\"}\n")
    sources = write(tmp_path / "sources.yaml", f"mlflow:\n  - tracking_uri: http://127.0.0.1:9\n"
                    f"  - tracking_uri: {uri}\n    experiments: sweeps\nslurm:\n  - files: exports/*.txt\n"
                    f"    mlflow_uri: {uri}\n")
    monkeypatch.setenv("GPUCAST_SOURCES", str(sources))
    pulled = pull_sources(Settings.from_env().ensure())
    assert list(pulled.failed) == ["mlflow http://127.0.0.1:9"]
    assert pulled.failed["mlflow http://127.0.0.1:9"].startswith(
        "mlflow http://127.0.0.1:9 failed: SourceUnavailable: mlflow http://127.0.0.1:9: cannot be read")
    assert {k: v.rows_loaded for k, v in pulled.runs.items()} == {f"mlflow {uri}": 7, f"slurm {sacct}": 1}
    assert rows(home, "SELECT source, status, left(message, 40) FROM ingest_runs ORDER BY started_at") == [
        ("mlflow", "failed", "mlflow http://127.0.0.1:9 failed: Source"), ("mlflow", "succeeded", None),
        ("slurm", "succeeded", None)]
    assert rows(home, "SELECT count(*) FROM job_logs") == [(8,)]
    # the Slurm entry joins its job to the run tagged with it: the run's model, not the Comment's
    assert rows(home, "SELECT model_type, batch_size FROM job_logs WHERE job_id = 'slurm-hpc-7001'") == [
        ("Transformer", 16)]
    capsys.readouterr()
    assert main(["status"]) == 0
    assert "mlflow http://127.0.0.1:9 failed" in capsys.readouterr().out


def test_a_store_name_with_controls_is_printed_escaped_on_one_line(tmp_path, home, capsys):
    """An experiment named with a newline and a terminal escape (ESC[31m): the error lists the store's experiments,
    and before the fix printed both raw, breaking the one line and colouring the terminal (issue 38, defect 11)."""
    uri, client, _ = empty_store(tmp_path)
    client.create_experiment("evil\n\x1b[31mred")
    assert main(["import", "mlflow", "--tracking-uri", uri, "--experiment", "nope"]) == 2
    err = capsys.readouterr().err  # (Prefect's temporary server says its lines first)
    line = err[err.index("gpucast import: "):]
    assert line.count("\n") == 1 and line.endswith("\n") and "\x1b" not in err
    assert "(experiments: Default, evil\\n\\x1b[31mred, sweeps)" in line
