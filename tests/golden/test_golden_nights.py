"""Issue 39, item 7: no behaviour change goes unnoticed. The demo's two nights at small deterministic settings
(tests/golden/nights.py) must give the forecasts, 14-day plan and page pinned in tests/data/golden/demo_nights.json;
an intended change regenerates that file (`python -m tests.golden.regenerate`, named in the commit)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta

import duckdb
import pytest

from tests.golden import nights

REGENERATE = "python -m tests.golden.regenerate"


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_the_demos_two_nights_give_the_golden_forecasts_plan_and_page(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # one thread: LightGBM's fits are bit-stable (as regenerate.py runs them)
    home = tmp_path / "home"
    monkeypatch.setenv("GPUCAST_HOME", str(home))
    expected = json.loads(nights.GOLDEN.read_text())
    results = nights.run_nights(home)
    diff = nights.differences(expected, nights.fingerprint(home))
    assert not diff, ("the demo's two nights no longer give the golden forecasts, plan and page "
                      f"({nights.GOLDEN.name}); if the change is intended, run `{REGENERATE}` and name it in the commit:\n"
                      + "\n".join(diff))
    # review 63 S2-2: each night hands its clock through the nightly to training (the gate's window; `train_runs.as_of`)
    sim = nights.sim_config()
    clocks = [datetime.combine(sim.start, time.min, tzinfo=UTC) + timedelta(days=sim.days + n) for n in range(2)]
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        recorded = [con.execute("SELECT as_of FROM train_runs WHERE train_run_id = ?", [r.train.train_run_id]).fetchone()[0]
                    for r in results]
    assert recorded == clocks


def test_a_difference_names_the_part_and_shows_its_first_differing_rows():
    expected = {"capacity_plan": ["day,gpus", "2026-09-26,2", "2026-09-27,1"], "page": ["a", "b"]}
    got = {"capacity_plan": ["day,gpus", "2026-09-26,3", "2026-09-27,1", "2026-09-28,0"], "page": ["a", "b"]}
    assert nights.differences(expected, got) == [
        "capacity_plan: 2 row(s) differ (3 expected, 4 now); first:",
        "  row 1: expected 2026-09-26,2", "  row 1:      got 2026-09-26,3",
        "  row 3: expected (none)", "  row 3:      got 2026-09-28,0"]
    assert nights.differences(expected, expected) == []


def test_the_page_text_keeps_words_and_figures_and_drops_run_ids_clock_times_paths_and_timings(tmp_path):
    page = (f"<h1>GPU capacity</h1><p>plan plan-20261126T155958Z-9d0fa9 generated 2026-11-26 15:59:58 UTC · "
            f"inventory {tmp_path}/inventory.yaml</p>"
            "<table><tr><th>model</th><th>test_rmse</th><th>train_seconds</th></tr>"
            "<tr><td>lightgbm</td><td>19,597.2</td><td>0.0681</td></tr></table><script>x()</script>")
    assert nights.page_text(page, tmp_path) == [
        "GPU capacity", "plan <run> generated <time> · inventory <home>/inventory.yaml",
        "model | test_rmse | train_seconds |", "lightgbm | 19,597.2 | <timed> |"]
