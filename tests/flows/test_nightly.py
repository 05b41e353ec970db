"""The `nightly` flow and scoring as on-call and planners meet them: artifacts, failures, atomic publishing."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.cli import main
from gpucast.flows.settings import Settings
from gpucast.tasks.simulate import SimConfig, write_logs
from gpucast.warehouse import forecast
from gpucast.warehouse.db import writer
from tests.flows.conftest import SHARES_THE_PREFECT_SERVER, SHARES_THE_QUICK_NIGHT

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--models", "lightgbm,linear_fs", "--repeats", "1", "--min-labelled", "50"]


def _scalar(path: Path, sql: str, params=None):
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql, params or []).fetchone()[0]


@SHARES_THE_QUICK_NIGHT
@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_nightly_publishes_forecasts_views_and_an_artifact(home, tmp_path, capsys, quick_night):
    # the first night (`nightly` with QUICK's models, --gpu-mem-gb 40, 2 days x 250 jobs): tests/flows/conftest.py
    quick_night.copy_to(home)
    published = home / "published.duckdb"
    pending = _scalar(published, "SELECT count(*) FROM job_logs WHERE status = 'PENDING'")
    assert pending > 50
    assert _scalar(published, "SELECT count(*) FROM forecasts") == 3 * pending
    assert _scalar(published, "SELECT count(*) FROM pending_forecasts") == 3 * pending
    assert _scalar(published, "SELECT count(*) FROM model_leaderboard") == 3 * 2
    assert _scalar(published, "SELECT count(*) FROM model_leaderboard WHERE is_champion") == 3
    # the memory advice is judged against the job's logged GPU (the catalogue's memory), else the largest GPU its
    # queue owns in the inventory (newcomer 26 P7), else the GPU size asked for (--gpu-mem-gb); on the memory target only
    from gpucast.records.inventory import largest_memory_gb, load_inventory

    queues = largest_memory_gb(load_inventory(home / "inventory.yaml"))
    assert queues == {"a100-80g": 80.0, "a100-40g": 40.0, "l4-24g": 24.0}
    queue_gb = "CASE j.queue " + " ".join(f"WHEN '{q}' THEN {gb}" for q, gb in queues.items()) + " END"
    per_job = ("SELECT count(*) FROM forecasts f JOIN job_logs j USING (job_id) LEFT JOIN gpu_catalog g "
               f"ON g.gpu_type = j.gpu_type WHERE f.target = ? AND f.gpu_mem_gb = coalesce(g.memory_gb, {queue_gb}, 40)")
    assert _scalar(published, per_job, [c.PEAK_GPU_MEM_GB]) == pending
    by_queue = ("SELECT count(*) FROM forecasts f JOIN job_logs j USING (job_id) WHERE f.target = ? AND j.gpu_type IS NULL "
                "AND j.queue = 'l4-24g' AND f.gpu_mem_gb = 24")
    assert _scalar(published, by_queue, [c.PEAK_GPU_MEM_GB]) > 0  # not the 40 GB asked for: the L4s of the queue
    assert _scalar(published, "SELECT count(*) FROM forecasts WHERE gpu_mem_gb IS NOT NULL AND target <> ?",
                   [c.PEAK_GPU_MEM_GB]) == 0
    assert _scalar(published, "SELECT count(*) FROM forecasts WHERE oom_risk <> (safe_request_gb > gpu_mem_gb)") == 0
    assert _scalar(published, "SELECT bool_and(p10 <= p50 AND p50 <= p90) FROM forecasts")
    assert _scalar(published, "SELECT sum(jobs) FROM capacity_daily") == pending

    from prefect.artifacts import Artifact

    report = quick_night.report
    assert "**Succeeded**" in report and "rows read" in report and "## Leaderboard" in report
    assert "## Time per step" in report and "train " in report and "publish " in report

    # a second night with nothing new re-scores with tonight's champions; views show the latest run only
    assert main(["nightly", "--no-train"]) == 0
    assert _scalar(published, "SELECT count(*) FROM score_runs WHERE status = 'published'") == 2
    assert _scalar(published, "SELECT count(*) FROM pending_forecasts") == 3 * pending
    assert _scalar(published, "SELECT count(DISTINCT score_run_id) FROM pending_forecasts") == 1

    # a third night pulls the sources file: the Slurm export loads, the unreachable tracking server fails
    # alone, named in the report and in `gpucast status`; the night still scores and publishes
    sacct = ROOT / "tests" / "fixtures" / "slurm" / "sacct.txt"
    (home / "sources.yaml").write_text(f"mlflow:\n  - tracking_uri: http://127.0.0.1:9\nslurm:\n  - files: {sacct}\n")
    assert main(["nightly", "--no-train"]) == 0
    report = Artifact.get("nightly-report").data
    assert "**Succeeded**" in report and "- mlflow http://127.0.0.1:9 failed: SourceUnavailable: mlflow " in report
    # the fixture's 11 GPU jobs (1005, without a model type, as unknown) and the pending range 1010_[3-4] as its
    # 2 tasks (issue 48 item 3: a range is one job per task; it was one job, 12 in all)
    assert _scalar(published, "SELECT count(*) FROM job_logs WHERE job_id LIKE 'slurm-hpc1-%'") == 13
    assert _scalar(published, "SELECT count(*) FROM score_runs WHERE status = 'published'") == 3
    capsys.readouterr()
    assert main(["status"]) == 0
    assert "mlflow http://127.0.0.1:9 failed: SourceUnavailable" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_failed_validation_fails_the_run_visibly(home, tmp_path, capsys, monkeypatch):
    write_logs(tmp_path / "bad", SimConfig(days=1, jobs_per_day=200, dirty_fraction=0.5, seed=3))
    with _webhook_endpoint() as (url, received):
        monkeypatch.setenv("GPUCAST_ALERT_WEBHOOK_URL", url)
        assert main(["nightly", str(tmp_path / "bad"), *QUICK]) == 4
    err = capsys.readouterr().err
    assert "validation failed" in err and "rejected_job_logs" in err
    # on-call was told, once, through the webhook: which run, that it failed, and why
    assert len(received) == 1, received
    assert received[0]["subject"].startswith("gpucast nightly failed: ")
    assert "validation failed" in received[0]["body"] and "gpucast status" in received[0]["body"]

    from prefect.artifacts import Artifact

    assert "**FAILED**: ValidationFailed: validation failed" in Artifact.get("nightly-report").data
    published = home / "published.duckdb"
    assert _scalar(published, "SELECT count(*) FROM train_runs") == 0  # stopped before training
    assert _scalar(published, "SELECT count(*) FROM rejected_job_logs") > 0  # and the evidence is published

    assert main(["status", "--limit", "1", "--flows"]) == 0
    out = capsys.readouterr().out
    assert "nightly" in out and "Failed" in out
    assert "failed step: quality-gate" in out and "validation failed" in out


@SHARES_THE_QUICK_NIGHT
@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_page_that_fails_after_the_publish_is_said_and_a_site_that_is_a_file_stops_the_night_first(
        home, capsys, monkeypatch, quick_night):
    """Review 85 S1-1: a night whose page step failed had already published; the alert said "planners keep the last
    published copy" while SQL showed tonight and the page the previous night. And a site that is a file failed the
    night only after training and the publish (exit 2)."""
    import errno

    from gpucast.flows import plan as plan_flow
    from gpucast.flows.nightly import PUBLISHED_BEFORE_PAGE

    quick_night.copy_to(home)
    published = home / "published.duckdb"
    runs = _scalar(published, "SELECT count(*) FROM score_runs")

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(home / "site" / ".index.html.tmp"))

    with _webhook_endpoint() as (url, received), monkeypatch.context() as patch:
        patch.setenv("GPUCAST_ALERT_WEBHOOK_URL", url)
        patch.setattr(plan_flow, "render_site", disk_full)
        assert main(["nightly", "--no-train"]) == 5
    assert _scalar(published, "SELECT count(*) FROM score_runs") == runs + 1  # tonight's copy is what SQL reads
    capsys.readouterr()
    (sent,) = received
    assert PUBLISHED_BEFORE_PAGE in sent["body"] and "planners keep the last published copy" not in sent["body"]

    (home / "site").rename(home / "site.old")
    (home / "site").write_text("not a folder")
    assert main(["nightly", "--no-train"]) == 5
    assert "site" in capsys.readouterr().err
    assert _scalar(published, "SELECT count(*) FROM score_runs") == runs + 1  # nothing ran


@SHARES_THE_QUICK_NIGHT
@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_the_alert_reads_what_planners_read_from_the_copy_itself(home, caplog, monkeypatch, quick_night):
    """Review 86 S3-1: the alert's "published" was a flag set after the publish returned and cleared before the
    night's report: a publish that failed after renaming tonight's copy in, or a failure after the page was
    written, alerted "planners keep the last published copy" while they read tonight's."""
    import errno

    from gpucast.flows import nightly as nightly_flow
    from gpucast.flows.nightly import KEPT_COPY, PUBLISHED_BEFORE_PAGE, PUBLISHED_WITH_PAGE
    from gpucast.warehouse import publish

    quick_night.copy_to(home)
    published = home / "published.duckdb"
    runs = _scalar(published, "SELECT count(*) FROM score_runs")

    def note_on_a_full_disk(*args, **kwargs):  # after the rename: planners read tonight's copy
        raise OSError(errno.ENOSPC, "No space left on device", str(home / "published.state.json"))

    def report_fails(*args, **kwargs):  # after the page
        raise RuntimeError("the report's query failed")

    with _webhook_endpoint() as (url, received), monkeypatch.context() as patch:
        patch.setenv("GPUCAST_ALERT_WEBHOOK_URL", url)
        with monkeypatch.context() as step:
            step.setattr(publish, "_note_published", note_on_a_full_disk)
            assert main(["nightly", "--no-train"]) != 0
        assert _scalar(published, "SELECT count(*) FROM score_runs") == runs + 1
        with monkeypatch.context() as step:
            step.setattr(nightly_flow.queries, "leaderboard_and_capacity", report_fails)
            with pytest.raises(RuntimeError, match="the report's query failed"):  # not one of ours: raised as is
                main(["nightly", "--no-train"])
        assert _scalar(published, "SELECT count(*) FROM score_runs") == runs + 2
    assert f"the night failed after its publish: {PUBLISHED_BEFORE_PAGE}" in caplog.text  # the run's log
    after_rename, after_page = received
    assert PUBLISHED_BEFORE_PAGE in after_rename["body"] and KEPT_COPY not in after_rename["body"]
    assert PUBLISHED_WITH_PAGE in after_page["body"] and KEPT_COPY not in after_page["body"]
    assert nightly_flow._RUN_PUBLISH == {}  # nothing left behind in a long-lived worker


@SHARES_THE_QUICK_NIGHT
@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_forecasts_are_published_all_or_nothing_and_open_readers_keep_their_copy(home, tmp_path, capsys, quick_night):
    # a published copy after a trained night: the session's (tests/flows/conftest.py); a night of this test's own
    # (1 day x 300 jobs, QUICK's models) trained the same kind of champions only to score with them here
    quick_night.copy_to(home)
    published = home / "published.duckdb"
    first = _scalar(published, "SELECT count(*) FROM forecasts")
    assert first > 0

    # A planner's session stays open on the published copy while the pipeline scores and publishes again.
    planner = duckdb.connect(str(published), read_only=True)
    try:
        assert main(["score"]) == 0
        assert planner.execute("SELECT count(*) FROM forecasts").fetchone()[0] == first  # its snapshot
        # a new session (another process: DuckDB shares one instance per path inside a process) sees both runs
        code = (f"import duckdb; con = duckdb.connect({str(published)!r}, read_only=True); "
                "print(con.execute('SELECT count(*) FROM forecasts').fetchone()[0])")
        assert int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout) == 2 * first
    finally:
        planner.close()

    # A publish that fails half-way (the second staged part is missing) leaves nothing of its run.
    settings = Settings.from_env().storage
    part = tmp_path / "part.parquet"
    with writer(settings) as con:
        con.execute(f"COPY (SELECT * REPLACE ('score-broken' AS score_run_id) FROM forecasts LIMIT 10) TO '{part}'")
        with pytest.raises(duckdb.Error):
            forecast.publish(con, "score-broken", [part, tmp_path / "missing.parquet"], 10, ["x"], 80.0, 30)
        assert con.execute("SELECT count(*) FROM forecasts WHERE score_run_id = 'score-broken'").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM score_runs WHERE score_run_id = 'score-broken'").fetchone()[0] == 0


@contextlib.contextmanager
def _webhook_endpoint() -> Iterator[tuple[str, list[dict]]]:
    """An HTTP endpoint on 127.0.0.1 that records the JSON bodies POSTed to it (a chat tool's webhook)."""
    received: list[dict] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802  (the standard library's name)
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook", received
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
@SHARES_THE_PREFECT_SERVER
def test_a_real_server_creates_the_nightly_schedule(prefect_server, tmp_path):
    """`prefect server start` (the session's, tests/flows/conftest.py) + `prefect deploy --all` from prefect.yaml: the
    cron creates scheduled runs."""
    import httpx

    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": prefect_server,
           "GPUCAST_REPO": str(ROOT), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
           "GPUCAST_HOME": str(tmp_path / "data"), "GPUCAST_ALERT_WEBHOOK_URL": "http://127.0.0.1:9/hook"}
    prefect = [sys.executable, "-m", "prefect"]
    # the server's own REST API, read and written from here: the work pools deploy needs, the scheduled runs and
    # the deployment (what `prefect work-pool create`, `prefect flow-run ls` and the client send, without a Python
    # process each: five to eight of them cost ~30 s of this test)
    api = httpx.Client(base_url=prefect_server, timeout=30)
    try:
        for pool in ("cpu", "gpu"):
            api.post("/work_pools/", json={"name": pool, "type": "process"}).raise_for_status()
        subprocess.run([*prefect, "--no-prompt", "deploy", "--all"], env=env, check=True, cwd=ROOT)
        deadline = time.monotonic() + 90
        scheduled = {"flows": {"name": {"any_": ["nightly"]}}, "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}}}
        while not (runs := api.post("/flow_runs/filter", json=scheduled).raise_for_status().json()):
            assert time.monotonic() < deadline, "no scheduled nightly run within 90 s of the deploy"
            time.sleep(1)
        # the cron is 02:00 UTC: every scheduled run starts at 02:00
        starts = {r["expected_start_time"][11:16] for r in runs}
        assert starts == {"02:00"}, runs

        # what on-call leans on: one night at a time, the data directory and the alert URL handed to the worker
        nightly = api.get("/deployments/name/nightly/nightly").raise_for_status().json()
        assert nightly["global_concurrency_limit"]["limit"] == 1
        assert nightly["concurrency_options"]["collision_strategy"] == "CANCEL_NEW"
        assert nightly["job_variables"]["env"] == {"GPUCAST_HOME": str(tmp_path / "data"),
                                                   "GPUCAST_ALERT_WEBHOOK_URL": "http://127.0.0.1:9/hook"}
        # and `gpucast status` says when the next night starts
        status = subprocess.run([sys.executable, "-m", "gpucast.flows.cli", "status", "--limit", "1"], env=env,
                                capture_output=True, text=True, cwd=tmp_path)
        assert "Next scheduled run: nightly/nightly at " in status.stdout and " 02:00 UTC" in status.stdout, status
    finally:
        api.close()
