"""The capacity plan and the planners' page as planners and data engineers meet them: the nightly
writes both, `gpucast plan` / `gpucast site` redo them, a bad inventory stops the night before anything
runs, a failed plan leaves the last one in place, and the page renders in a real headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import duckdb
import numpy as np
import pytest

from gpucast.flows.cli import main
from gpucast.tasks.simulate import SimConfig, write_logs
from tests.conftest import key_latest
from tests.flows.conftest import SHARES_THE_QUICK_NIGHT

QUICK = ["--models", "lightgbm,linear_fs", "--repeats", "1", "--min-labelled", "50", "--runner", "local"]
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def _rows(path: Path, sql: str, params=None) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def _demo_inventory(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "inventory.yaml"
    path.write_text(resources.files("gpucast.records").joinpath("reference/demo_inventory.yaml").read_text())
    return path


def chromium(*args: str) -> subprocess.CompletedProcess:
    if CHROMIUM is None:
        pytest.skip("no headless Chromium: `make setup` installs Debian's `chromium` package; it could not be installed here")
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=120, check=True)


@SHARES_THE_QUICK_NIGHT
@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_the_nightly_plans_capacity_and_writes_a_page_a_browser_shows(home, tmp_path, capsys, monkeypatch, quick_night):
    # the night: `nightly` with QUICK's models and the demo inventory (tests/flows/conftest.py), in a data directory
    # this test copies; what it printed and the paths it recorded name that directory
    night = quick_night.home
    quick_night.copy_to(home)
    night_page = night / "site" / "index.html"
    assert f"planners' page: {night_page}" in quick_night.out or str(night_page) in quick_night.out
    page = home / "site" / "index.html"
    published = home / "published.duckdb"
    pending = _rows(published, "SELECT count(*) FROM job_logs WHERE status = 'PENDING'")[0][0]
    (run_id, status, jobs, unplaceable, days, inventory), = _rows(
        published, "SELECT plan_run_id, status, jobs, unplaceable_jobs, days, inventory FROM plan_runs")
    assert status == "succeeded" and days == 14 and inventory == str(night / "inventory.yaml")
    assert jobs + unplaceable == pending  # every pending job planned or listed, none dropped
    assert _rows(published, "SELECT count(*) FROM current_unplaceable_jobs")[0][0] == unplaceable
    plan = _rows(published, "SELECT queue, gpu_type, day, jobs, gpus_needed_p50, gpus_needed_p90, lower_bound_p90, "
                            "gpus_owned, shortfall_p90 FROM current_capacity_plan ORDER BY day, queue")
    assert {(q, t) for q, t, *_ in plan} == {("a100-80g", "A100-80GB"), ("a100-40g", "A100-40GB"), ("l4-24g", "L4-24GB")}
    assert len(plan) == 3 * 14
    first_day = min(d for _, _, d, *_ in plan)
    first = [r for r in plan if r[2] == first_day]
    assert sum(r[3] for r in first) == jobs  # the pending jobs wait now: all start on the first day
    assert all(0 < p50 <= p90 and o in (48, 32, 24) and s == max(0, p90 - o) for _, _, _, n, p50, p90, _, o, s in first if n)

    assert night_page.resolve().as_uri() in quick_night.capacity_page  # a link to the page
    assert quick_night.capacity_plan is not None

    # the page, rendered by a real browser: the plan's first-day numbers are in its DOM
    dom = chromium("--dump-dom", page.resolve().as_uri()).stdout
    for queue, gpu_type, _, _, _, p90, *_ in first:
        tile = re.search(rf'data-queue="{queue}" data-gpu-type="{gpu_type}">.*?class="needed-p90">(\d+)<', dom, re.S)
        assert tile and int(tile.group(1)) == p90, (queue, gpu_type)
    oom = _rows(published, "SELECT count(*) FROM pending_forecasts WHERE target = 'peak_gpu_mem_gb' AND oom_risk")[0][0]
    assert re.search(rf'id="oom-count">{oom}<', dom) and re.search(rf'id="unplaceable-count">{unplaceable}<', dom)
    assert "Champion leaderboard" in dom and "<svg" in dom
    # the champions that score now, and the leaderboard's row of each (newcomer 26 P4: its rank 1 read as the champion)
    table = lambda name: re.search(rf'<table id="{name}">(.*?)</table>', dom, re.S).group(1)  # noqa: E731
    for target, model in _rows(published, "SELECT target, model FROM current_champions ORDER BY target"):
        assert f"<tr><td>{target}</td><td>{model}</td>" in table("champions"), (target, model)
    board = table("leaderboard")
    assert "<th>is_champion</th>" in board
    marked = _rows(published, "SELECT target, rank, model FROM model_leaderboard WHERE is_champion ORDER BY ALL")
    assert marked and all(f"<tr><td>{t}</td><td>{r}</td><td>{m}</td><td>True</td>" in board for t, r, m in marked)
    shot = tmp_path / "page.png"
    chromium("--window-size=1280,1600", f"--screenshot={shot}", page.resolve().as_uri())
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float64)
    assert pixels.shape == (1600, 1280)
    assert (pixels < 128).mean() > 0.01 and pixels.std() > 20  # text and charts, not a blank page

    # `gpucast plan` narrowed to one GPU type and 3 days: a new plan replaces the current one
    assert main(["plan", "--horizon-days", "3", "--gpu-types", "a100 80gb"]) == 0
    printed = capsys.readouterr().out
    assert "A100-80GB" in printed and "current_capacity_plan" in printed
    rows = _rows(published, "SELECT DISTINCT gpu_type, count(*) OVER () FROM current_capacity_plan")
    assert rows == [("A100-80GB", 3 * 3)]  # every queue planned on A100-80GB (only a100-80g owns any)

    # a plan that fails leaves the last one in the planners' views
    def broken(*args, **kwargs):
        raise RuntimeError("packing failed")

    monkeypatch.setattr("gpucast.flows.plan.capacity.plan_capacity", broken)
    with pytest.raises(RuntimeError, match="packing failed"):
        main(["plan"])
    assert _rows(home / "warehouse.duckdb", "SELECT status FROM plan_runs ORDER BY started_at DESC LIMIT 1") == [("failed",)]
    assert _rows(published, "SELECT count(*) FROM current_capacity_plan")[0][0] == 9

    # on-call sees the plan runs (from the planners' copy: the failed one is in the working warehouse
    # and in the Prefect flow runs `gpucast status` lists)
    assert main(["status", "--no-flows"]) == 0
    status = capsys.readouterr().out
    assert "Recent capacity plan runs:" in status and status.count("succeeded") >= 2

    # `gpucast site --out`: the page on demand, elsewhere
    assert main(["site", "--out", str(tmp_path / "elsewhere")]) == 0
    assert (tmp_path / "elsewhere" / "index.html").read_text().count("needed-p90") >= 3


@pytest.mark.usefixtures("prefect_harness")
def test_a_bad_inventory_stops_the_nightly_before_anything_runs(home, capsys):
    write_logs(home / "inbox" / "week", SimConfig(days=1, jobs_per_day=50, seed=4))
    (home / "inventory.yaml").write_text("queues:\n  a100-80g:\n    - gpu_type: A100-80GB\n      count: -4\n")
    assert main(["nightly", *QUICK]) == 2
    err = capsys.readouterr().err
    assert f"{home / 'inventory.yaml'}:4: count must be a whole number >= 0, got -4" in err
    assert not (home / "warehouse.duckdb").exists() and not (home / "published.duckdb").exists()


def test_an_unknown_gpu_type_asked_for_is_a_clear_error(home, capsys):
    assert main(["plan", "--gpu-types", "A100-81GB"]) == 2
    assert "--gpu-types: unknown GPU type 'A100-81GB'" in capsys.readouterr().err


def _gpucast(home: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The real command line in its own process: what a person at a terminal sees (Prefect's console included)."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(GPUCAST_HOME=str(home), PREFECT_HOME=str(tmp_path / "prefect"))
    return subprocess.run([sys.executable, "-m", "gpucast.flows.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300)


def test_an_inventory_with_a_python_tag_exits_2_with_one_line_and_no_traceback(home, tmp_path):
    """Issue 27 items 6 and 8: a YAML tag gave a raw ConstructorError (exit 1, no file or line), and even a clear
    inventory error printed Prefect's ERROR record with a full traceback before the one line."""
    home.mkdir(parents=True)
    (home / "inventory.yaml").write_text("queues:\n  a100-80g:\n    - gpu_type: A100-80GB\n"
                                         "      count: !!python/name:os.system ''\n")
    out = _gpucast(home, tmp_path, "plan")
    assert out.returncode == 2, out.stderr[-3000:]
    said = [line for line in out.stderr.splitlines() if line.startswith("gpucast plan: ")]
    assert len(said) == 1 and said[0].startswith(
        f"gpucast plan: {home / 'inventory.yaml'}:4: tag !!python/name:os.system is not allowed"), out.stderr
    assert "Traceback" not in out.stderr + out.stdout and "Encountered exception" not in out.stderr + out.stdout
    assert "Finished in state Failed" in out.stderr  # the run's own state still says what failed


def _queue_two_jobs_and_forecast_demand(start, forecast: bool) -> None:
    """Without `forecast`: two pending a100-80g jobs with no forecast (unknown size: a whole GPU each for the
    first day) and one finished job a week ago (history). With it: a succeeded demand run for 14 days from `start`."""
    from datetime import timedelta

    from gpucast.expectations import contract as c
    from gpucast.flows.settings import Settings
    from gpucast.warehouse import db

    with db.writer(Settings.from_env().storage) as con:
        if not forecast:
            for arrival, (job_id, status, ago) in enumerate((("p1", "PENDING", 0), ("p2", "PENDING", 0),
                                                             ("done", "COMPLETED", 7)), start=1):
                con.execute(f"INSERT INTO job_log_records ({c.JOB_ID}, {c.SUBMITTED_AT}, {c.STATUS}, {c.QUEUE}, {c.MODEL_TYPE}, "
                            f"{c.RUNTIME_HOURS}, record_hash, arrival, source_file, source_row, ingest_run_id, loaded_at) "
                            "VALUES (?, ?, ?, 'a100-80g', 'CNN', 3.0, 'h', ?, 'f', 1, 'i', now())",
                            [job_id, start - timedelta(days=ago), status, arrival])
            key_latest(con)  # each job's record its latest, as a load leaves them (`job_logs` reads them)
            return
        con.execute("INSERT INTO demand_runs (demand_run_id, started_at, status, as_of, days) "
                    "VALUES ('demand-1', now(), 'succeeded', ?, 14)", [start - timedelta(days=1)])
        for h in range(1, 15):  # a100-80g: 36 + 12 (type unknown) GPU-hours P50 a day, 60 at P90
            for gpu_type, p50, p90 in (("A100-80GB", 36.0, 45.0), ("unknown", 12.0, 15.0)):
                con.execute("INSERT INTO demand_forecast (demand_run_id, day, horizon, queue, gpu_type, "
                            "gpu_hours_p10, gpu_hours_p50, gpu_hours_p90, jobs_p50, method, fallback_reason) "
                            "VALUES ('demand-1', ?, ?, 'a100-80g', ?, ?, ?, ?, 2.0, 'AutoETS', NULL)",
                            [start + timedelta(days=h - 1), h, gpu_type, p50 - 6, p50, p90])


@pytest.mark.usefixtures("prefect_harness")
def test_the_plan_adds_the_forecast_arrivals_on_every_day_and_the_page_shows_the_forecast(home, capsys):
    from datetime import UTC, datetime

    _demo_inventory(home)
    start = datetime.now(UTC).date()  # no score run: the plan starts today
    _queue_two_jobs_and_forecast_demand(start, forecast=False)
    assert main(["plan", "--horizon-days", "14"]) == 0
    published = home / "published.duckdb"
    (message, demand_run), = _rows(published, "SELECT message, demand_run_id FROM plan_runs")
    assert "no demand forecast" in message and demand_run is None
    assert _rows(published, "SELECT sum(gpus_needed_expected_p90), sum(gpus_total_p90 - gpus_needed_p90) "
                            "FROM current_capacity_plan") == [(0, 0)]

    _queue_two_jobs_and_forecast_demand(start, forecast=True)
    assert main(["plan", "--horizon-days", "14"]) == 0
    printed = capsys.readouterr().out
    assert "known_p50" in printed and "expected_p50" in printed  # the 14 days, known + expected
    assert _rows(published, "SELECT demand_run_id FROM plan_runs ORDER BY started_at DESC LIMIT 1") == [("demand-1",)]
    days = _rows(published, "SELECT day, gpus_needed_p50, packing_efficiency, expected_gpu_hours_p50, "
                            "gpus_needed_expected_p50, gpus_needed_expected_p90, gpus_total_p50, gpus_total_p90, "
                            "shortfall_total_p90 FROM current_capacity_plan WHERE queue = 'a100-80g' ORDER BY day")
    assert len(days) == 14
    # the packing measured on the first day (this plan's; the plan before started the same day, not read again: one
    # plan a day, session 22): 2 unknown-size jobs = 2 GPUs
    # for 48 GPU-hours, efficiency 1.0; 48 GPU-hours expected a day (A100-80GB 36 + unknown-type 12) / 24 = 2
    # GPUs at P50, 60 / 24 = 2.5 -> 3 at P90; the first day adds the 2 queued jobs
    assert days[0][1:] == (2, 1.0, 48.0, 2, 3, 4, 5, 0)
    assert all(row[1:] == (0, 1.0, 48.0, 2, 3, 2, 3, 0) for row in days[1:])  # GPUs needed on every one of the 14 days
    parts = _rows(published, "SELECT gpus_needed_known, gpus_needed_expected FROM current_capacity_plan "
                             "WHERE queue = 'a100-80g' ORDER BY day")
    assert parts == [(row[1], row[4]) for row in days]  # the names: known and expected at P50

    assert main(["site"]) == 0
    dom = chromium("--dump-dom", (home / "site" / "index.html").resolve().as_uri()).stdout
    tile = re.search(r'id="outlook">.*?data-queue="a100-80g">.*?forecast for ([0-9-]+).*?class="forecast-p50">([0-9.,]+)<',
                     dom, re.S)
    assert tile and tile.groups() == (str(start), "48.0")  # the forecast's first day, in the browser's DOM
    assert "demand forecast demand-1" in dom
    first = re.search(r'data-queue="a100-80g" data-gpu-type="A100-80GB">.*?class="needed-p90">(\d+)<.*?'
                      r'class="expected-p90">(\d+)<', dom, re.S)
    assert first and first.groups() == ("2", "3")  # the first day: 2 GPUs for the queued jobs + 3 expected (P90)
    # the charts: history + forecast fan, and the GPUs needed (no pending job has a run-time forecast: no third)
    # the demand's and the plan's charts, and the what-ifs' beside them (the demo inventory draws scenarios: issue 53)
    assert dom.count("<svg") == 3 and "forecast P10-P90" in dom and "expected P50" in dom
    assert "What if: scenarios beside the plan" in dom and "No scenario drawn" not in dom


def test_site_out_an_existing_file_is_one_line_and_leaves_the_file(home, tmp_path, capsys):
    """Before: `FileExistsError` and a traceback (exit 1). The file given is never written over."""
    taken = tmp_path / "notes.txt"
    taken.write_text("mine\n")
    assert main(["site", "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert err == f"gpucast site: --out {taken} is a file, not a folder; give a folder (the page is written as " \
                  "<folder>/index.html)\n"
    assert taken.read_text() == "mine\n"


@pytest.mark.usefixtures("prefect_harness")
def test_plan_ends_with_what_it_lacks(home, capsys):
    """The plan's notes (no demand forecast, or one whose days miss the plan's: issue 38, defect 10) were only in
    the run's log line and plan_runs.message; `gpucast plan` ends with them."""
    assert main(["plan"]) == 0
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert last.startswith("note: ") and "no demand forecast (run `gpucast demand`): expected arrivals 0" in last
