"""The `gpucast` command line as people use it."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys

import pytest

from gpucast.flows.cli import main
from gpucast.flows.cli.process import ExpectedErrors
from gpucast.flows.nightly_steps import NIGHTLY_CHAIN, NIGHTLY_STEPS
from gpucast.warehouse.publish import PublishFailed
from tests.conftest import write
from tests.sample_jobs import jsonl, record

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


# Two fast models: the demo's output is the point, not which model wins (the network's fits are tested in
# tests/flows/test_train_flow.py and tests/flows/test_dask_training.py)
QUICK = ["--models", "lightgbm,linear_fs", "--repeats", "1", "--min-labelled", "50"]


def test_demo_runs_the_nightly_flow_then_status_and_sql(home, capsys):
    assert main(["demo", "--history-days", "2", "--jobs-per-day", "200", *QUICK]) == 0
    out = capsys.readouterr().out
    assert "Capacity needed by the pending queue" in out and "Where to look next" in out
    # the summary's headings are the view's own column names (capacity_daily), so a planner can query what they read
    capacity = out.split("Capacity needed by the pending queue", 1)[1].split("\n\n", 1)[0]
    assert all(f"┆ {col} " in capacity for col in ("jobs_over_24gb", "jobs_over_80gb", "jobs_unknown_size"))
    # the demo announces the nightly's steps as the flow runs them (flows/nightly_steps.py, the one list)
    assert f"UTC: {NIGHTLY_CHAIN}\n" in out
    ran = re.search(r"^night 2 took \d+ s: (.*)$", out, re.M).group(1)
    assert [step.rsplit(" ", 2)[0] for step in ran.split(", ")] == list(NIGHTLY_STEPS)
    plan_days = out.split("GPUs needed every day of the plan", 1)[1].split("Champions", 1)[0]
    assert len(re.findall(r"^│ \d{4}-\d\d-\d\d ┆", plan_days, re.M)) == 14  # known + expected, every day of the plan
    champions = out.split("Champions (current_champions", 1)[1].split("Where to look next", 1)[0]
    assert all(f"│ {t} " in champions for t in ("gpu_demand_gflops", "peak_gpu_mem_gb", "runtime_hours"))

    assert main(["sql", "SELECT sum(jobs) AS n FROM capacity_daily", "--format", "json"]) == 0
    planned = json.loads(capsys.readouterr().out)[0]["n"]
    assert main(["sql", "SELECT count(*) AS n FROM job_logs WHERE status = 'PENDING'", "--format", "json"]) == 0
    assert planned == json.loads(capsys.readouterr().out)[0]["n"] > 20

    assert main(["sql", "SELECT status, count(*) AS n FROM job_logs GROUP BY ALL ORDER BY 1", "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("status,n\n")

    assert main(["status", "--limit", "3", "--flows"]) == 0
    out = capsys.readouterr().out
    assert "Recent score runs" in out and "published" in out
    assert "nightly" in out and "Completed" in out


def test_status_answers_from_the_warehouse_and_asks_prefect_only_when_told_where(home, capsys, monkeypatch):
    """No Prefect API configured: the flow runs are skipped, saying how to get them (no temporary server
    started). One configured but down: one line naming it, and the command still succeeds."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    write(home / "inbox" / "a.jsonl", jsonl(record(job_id="a")))
    assert main(["ingest"]) == 0
    capsys.readouterr()
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "Recent ingest runs" in out
    assert "Prefect flow runs: skipped" in out and "gpucast status --flows" in out and "Recent flow runs" not in out

    # a real process (the test session's own Prefect API would answer in-process); nothing listens on port 9
    env = {**os.environ, "GPUCAST_HOME": str(home), "PREFECT_API_URL": "http://127.0.0.1:9/api"}
    done = subprocess.run([sys.executable, "-m", "gpucast.flows.cli", "status"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Recent ingest runs" in done.stdout and "the API at http://127.0.0.1:9/api did not answer" in done.stdout


def test_status_names_rejected_files(home, tmp_path, capsys):
    write(tmp_path / "x.csv", "id\n1\n")
    write(tmp_path / "ok.jsonl", jsonl(record()))
    assert main(["ingest", str(tmp_path / "*")]) == 0
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "x.csv: missing required column(s)" in out


@pytest.fixture(scope="session")  # (not module: a module fixture puts its tests in a group of their own, conftest.py)
def one_job_ingested(prefect_harness, tmp_path_factory):
    """A data directory after `gpucast ingest` of one job (copy it before using it): each case below ingested it for
    itself (a flow run, Great Expectations' validation and a publish, the same each time)."""
    import shutil

    home = tmp_path_factory.mktemp("one-job") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUCAST_HOME", str(home))
        assert main(["ingest", str(write(home.parent / "a.jsonl", jsonl(record())))]) == 0
    return lambda to: shutil.copytree(home, to)


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM job_logs",
        "CREATE TABLE t (a INT)",
        "ATTACH '/tmp/other.duckdb' AS other",
        "SELECT * FROM read_csv('/etc/passwd')",
        "COPY job_logs TO '/tmp/leak.csv'",
    ],
)
def test_sql_is_read_only(home, one_job_ingested, capsys, statement):
    one_job_ingested(home)
    capsys.readouterr()
    assert main(["sql", statement]) == 2
    assert "gpucast sql:" in capsys.readouterr().err
    assert main(["sql", "SELECT count(*) AS n FROM job_logs", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 1}]


def test_missing_path_is_a_clear_error(home, capsys):
    assert main(["ingest", "/no/such/file.jsonl"]) == 2
    assert "no such file, folder or glob match: '/no/such/file.jsonl'" in capsys.readouterr().err


def test_sql_before_any_ingest_says_what_to_do(home, capsys):
    assert main(["sql", "SELECT 1"]) == 2
    assert "run `gpucast ingest`" in capsys.readouterr().err


def test_version_names_the_installed_package(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"gpucast {version('gpucast')}"


class _Kept(logging.Handler):
    """What a console handler with the CLI's filter would print."""

    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.mark.parametrize("error, shown", [
    (lambda: PublishFailed("cannot read back job_logs"), False),  # exit 6
    (lambda: PermissionError(13, "Permission denied", "/srv/site/index.html"), False),  # the page step: exit 5
    (lambda: ValueError("bad input"), False),  # exit 2
    (lambda: RuntimeError("a bug nobody foresaw"), True),
])
def test_a_failed_run_shows_a_traceback_only_for_an_unexpected_error(error, shown):
    """Issue 27 item 8: for an error the CLI answers with exit 2-6 and one line, Prefect's ERROR record of the
    failed flow and task run (with its traceback) is not printed; an unexpected error (exit 1) keeps it.
    The run's state keeps the error either way."""
    from prefect import flow, task

    @task(name="page-step")
    def page():
        raise error()

    @flow(name="fails-at-the-page")
    def night():
        page()

    kept = _Kept()
    kept.addFilter(ExpectedErrors())
    logging.getLogger().addHandler(kept)
    try:
        state = night(return_state=True)
    finally:
        logging.getLogger().removeHandler(kept)
    assert state.is_failed() and type(error()).__name__ in state.message
    printed = [r for r in kept.records if r.exc_info]
    assert {r.name for r in printed} == ({"prefect.flow_runs", "prefect.task_runs"} if shown else set())
