"""MLflow's client side of the import (`tasks/sources/mlflow_client.py`), against a fake client: no MLflow store, no
Prefect. The command's own tests (tests/flows/test_import_mlflow.py) run it on real stores."""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace

import pytest

from gpucast.tasks.sources.errors import TrackerUnreachable
from gpucast.tasks.sources.mlflow_client import OVERLAP_MS, not_a_local_store, resolve_experiments, runs_since, since_ms


class Page(list):
    token = None


class FakeClient:
    """Experiments by name -> id; runs per experiment as (run_id, start_ms, end_ms); every search's filter kept."""

    def __init__(self, experiments: dict[str, str], runs: dict[str, list[tuple[str, int, int | None]]], fail=False):
        self.experiments, self.runs, self.fail, self.filters = experiments, runs, fail, []

    def search_experiments(self):
        if self.fail:
            raise ConnectionError("http://alice:secret@host/mlflow refused")
        return [SimpleNamespace(name=n, experiment_id=i) for n, i in self.experiments.items()]

    def search_runs(self, exp_ids, filter_string, max_results, page_token):
        self.filters.append((exp_ids[0], filter_string))
        floor = int(filter_string.split(">= ")[1]) if filter_string else None
        field = 1 if "start_time" in filter_string else 2
        return Page(SimpleNamespace(info=SimpleNamespace(run_id=r[0], status="FINISHED", start_time=r[1], end_time=r[2]),
                                    data=SimpleNamespace(metrics={}, params={}, tags={}))
                    for r in self.runs.get(exp_ids[0], []) if floor is None or (r[field] or 0) >= floor)

    def get_metric_history(self, run_id, key):
        return []


def test_since_is_an_iso_time_in_utc_unless_it_names_a_zone():
    assert since_ms("2026-11-01") == 1_793_491_200_000
    assert since_ms("2026-11-01T02:00:00Z") == since_ms("2026-11-01T03:00:00+01:00") == 1_793_498_400_000
    with pytest.raises(ValueError, match=r"--since 'yesterday' is not an ISO 8601 time"):
        since_ms("yesterday")


def test_each_experiment_is_read_from_its_watermark_less_the_overlap_and_the_marks_move():
    client = FakeClient({"a": "1", "b": "2", "c": "3"}, {"1": [("r1", 5_000_000, 9_000_000), ("r2", 100, 200)],
                                                          "2": [("r3", 7_000_000, None)]})
    new = runs_since(client, "uri", ["1", "2", "3"], {"1": 8_000_000}, None)
    assert sorted(r.run_id for r in new.runs) == ["r1", "r3"]  # r2 ended before experiment 1's watermark less an hour
    assert ("1", f"attributes.start_time >= {8_000_000 - OVERLAP_MS}") in client.filters
    assert ("2", "") in client.filters  # no watermark yet: every run
    assert new.marks == {"1": 9_000_000, "2": 7_000_000}  # experiment 3 has no runs: no watermark yet
    since = runs_since(client, "uri", ["1"], {"1": 8_000_000}, 0)  # --since wins over the watermark
    assert sorted(r.run_id for r in since.runs) == ["r1", "r2"] and since.marks == {"1": 9_000_000}


def test_a_run_dated_ahead_moves_the_watermark_no_further_than_now():
    """Review 77 S2-3: a run of year 3000 (quarantined by the time rule) moved its experiment's watermark there, so
    every run logged later was never read again. The mark stops at the import's clock; the runs are all read."""
    client = FakeClient({"a": "1"}, {"1": [("r1", 5_000_000, 9_000_000), ("future", 32_503_680_000_000, None)]})
    new = runs_since(client, "uri", ["1"], {}, None, now_ms=10_000_000)
    assert sorted(r.run_id for r in new.runs) == ["future", "r1"] and new.marks == {"1": 10_000_000}
    client.runs["1"].append(("later", 11_000_000, 12_000_000))
    again = runs_since(client, "uri", ["1"], new.marks, None, now_ms=13_000_000)
    assert "later" in {r.run_id for r in again.runs} and again.marks == {"1": 13_000_000}


def test_experiments_are_named_or_all_and_an_unknown_name_lists_the_known_ones():
    client = FakeClient({"sweeps": "1", "Default": "0"}, {})
    assert resolve_experiments(client, "uri", ()) == {"1": "sweeps", "0": "Default"}
    assert resolve_experiments(client, "uri", ("sweeps",)) == {"1": "sweeps"}
    with pytest.raises(ValueError, match=r"no experiment named 'x' \(experiments: Default, sweeps\)"):
        resolve_experiments(client, "uri", ("x",))


def test_what_the_client_raises_comes_back_as_unreachable_with_its_cause():
    with pytest.raises(TrackerUnreachable) as err:
        resolve_experiments(FakeClient({}, {}, fail=True), "http://host/mlflow", ())
    assert err.value.tracking_uri == "http://host/mlflow" and isinstance(err.value.cause, ConnectionError)


def test_a_local_uri_must_name_an_mlflow_store(tmp_path):
    """MLflow creates what a local store lacks: a URI is looked at first (issue 38, defect 3)."""
    assert not_a_local_store("  ") == "an empty tracking URI (MLflow would create ./mlflow.db)"
    assert not_a_local_store("http://mlflow:5000") is None
    assert not_a_local_store(f"file://{tmp_path}/none") == f"no MLflow store at {tmp_path}/none"
    assert not_a_local_store(str(tmp_path)).endswith("is not an MLflow store (no experiment folder with a meta.yaml)")
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "meta.yaml").write_text("name: Default\n")
    assert not_a_local_store(str(tmp_path)) is None and not_a_local_store(f"file://{tmp_path}") is None
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE notes (x)")
    assert not_a_local_store(f"sqlite:///{db}") == f"{db} is not an MLflow store (no experiments table)"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE experiments (x)")
    assert not_a_local_store(f"sqlite:///{db}") is None
    assert not_a_local_store(f"sqlite:///{tmp_path}/missing.db") == f"no MLflow store at {tmp_path}/missing.db"
