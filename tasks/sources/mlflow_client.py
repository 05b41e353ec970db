"""MLflow's runs read with MLflow's own client, as `tasks/sources/mlflow.py` takes them (`MlflowRun`).

The client is imported here only (the `mlflow` extra is optional), and a local store is looked at before MLflow
is handed it (`not_a_local_store`: MLflow creates what it lacks). What the client raises comes back as
`TrackerUnreachable` (the flow says it in one line, masked: `flows/imports.py`). An import reads the runs that
started or ended since each experiment's watermark, less `OVERLAP_MS` (`runs_since`); the flow keeps the
watermarks in the warehouse. The flow sets MLflow's defaults (`flows/environment.py` `configure_mlflow`) before
it asks for a client.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpucast.records.times import parse_iso
from gpucast.tasks.sources.errors import TrackerUnreachable
from gpucast.tasks.sources.mlflow import MlflowRun, gpu_memory_keys, series_peak

SEARCH_PAGE = 1000  # runs per MLflow search page
OVERLAP_MS = 3600_000  # an import re-reads the hour before its watermark: the clocks of the machines that log differ


def since_ms(since: str) -> int:
    """`--since` (ISO 8601; no zone means UTC) as ms since the epoch."""
    try:
        when = parse_iso(since.strip())
    except ValueError:
        raise ValueError(f"--since {since!r} is not an ISO 8601 time (e.g. 2026-11-01 or 2026-11-01T02:00:00Z)") from None
    return int(when.timestamp() * 1000)


def open_client(tracking_uri: str):
    """MLflow's client for `tracking_uri`. A local store is only read: one that is not an existing MLflow store is
    refused (exit 2) before MLflow sees it, since MLflow creates what it lacks (a `.trash` in any folder, an
    `mlflow.db` for an empty URI)."""
    from mlflow.tracking import MlflowClient

    if problem := not_a_local_store(tracking_uri):
        raise FileNotFoundError(f"mlflow {tracking_uri}: {problem}; give the tracking URI the runs were logged to "
                                "(file:///path/mlruns, sqlite:////path/mlflow.db or http://host:5000)")
    try:
        return MlflowClient(tracking_uri=tracking_uri)  # a database store is opened here
    except Exception as exc:  # noqa: BLE001  (see resolve_experiments)
        raise TrackerUnreachable(tracking_uri, exc) from None


def not_a_local_store(tracking_uri: str) -> str | None:
    """Why `tracking_uri` names no existing local MLflow store, or None (a server URL, or a store that is one).

    A file store (`file:` or a bare path) must be a folder holding an experiment (`<id>/meta.yaml`, as
    MLflow writes `0/meta.yaml` for its Default); a SQLite store (`sqlite:///`) a file holding MLflow's
    `experiments` table, opened read-only to look."""
    from urllib.parse import urlparse

    if not tracking_uri.strip():
        return "an empty tracking URI (MLflow would create ./mlflow.db)"
    where = urlparse(tracking_uri)
    if where.scheme == "sqlite":
        path = Path(tracking_uri.removeprefix("sqlite:///"))
        if not path.is_file():
            return f"no MLflow store at {path}"
        import sqlite3

        try:
            with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as con:
                tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.Error as exc:
            return f"{path} is not an MLflow store (not an SQLite database: {exc})"
        return None if "experiments" in tables else f"{path} is not an MLflow store (no experiments table)"
    if where.scheme not in ("file", "") and len(where.scheme) > 1:  # a server (http, databricks ...); C:\ is a path
        return None
    path = Path(where.path if where.scheme == "file" else tracking_uri).expanduser()
    if not path.is_dir():
        return f"no MLflow store at {path}"
    if not any((d / "meta.yaml").is_file() for d in path.iterdir() if d.is_dir() and d.name != ".trash"):
        return f"{path} is not an MLflow store (no experiment folder with a meta.yaml)"
    return None


def resolve_experiments(client, tracking_uri: str, names: tuple[str, ...]) -> dict[str, str]:
    """{experiment id: name} of the experiments named (none: every active one); an unknown name: exit 2."""
    try:
        every = {e.name: e.experiment_id for e in client.search_experiments()}
    except Exception as exc:  # noqa: BLE001  (MLflow raises its own, requests' and SQLAlchemy's errors)
        raise TrackerUnreachable(tracking_uri, exc) from None
    unknown = [n for n in names if n not in every]
    if unknown:
        raise ValueError(f"mlflow {tracking_uri}: no experiment named {', '.join(map(repr, unknown))} (experiments: "
                         f"{', '.join(sorted(every)) or 'none'}); give --experiment one of them, or none for all")
    return {every[n]: n for n in (names or tuple(every))}


def read_runs(tracking_uri: str, experiments: tuple[str, ...] = (), tagged: str | None = None
              ) -> list[tuple[MlflowRun, int]]:
    """Every active run of the experiments (none: all), or only those carrying the tag `tagged`."""
    client = open_client(tracking_uri)
    found = resolve_experiments(client, tracking_uri, experiments)
    return [got for exp_id in found for got in search(client, tracking_uri, exp_id, None, tagged)]


@dataclass(frozen=True)
class NewRuns:
    """The runs an import reads (`runs_since`), and each experiment's watermark once they are loaded: the latest
    start or end time it has seen (an experiment without runs has none yet)."""

    runs: list[MlflowRun] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)  # experiment id -> ms since the epoch


def runs_since(client, tracking_uri: str, experiments: Iterable[str], marks: Mapping[str, int],
               floor_ms: int | None, now_ms: int | None = None) -> NewRuns:
    """The runs of each experiment that started or ended since `floor_ms` (`--since`), else since the experiment's
    watermark in `marks` less `OVERLAP_MS`, else all of them; and the watermarks they move to, never past `now_ms`
    (default: this machine's clock): a run dated ahead (a training host's clock, a typo of year 3000) is quarantined by
    the time rule, and moved the mark past every run logged after it, lost for good (review 77 S2-3)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    runs: list[MlflowRun] = []
    seen: dict[str, int] = {}
    for exp_id in experiments:
        floor = floor_ms if floor_ms is not None else (marks[exp_id] - OVERLAP_MS if exp_id in marks else None)
        got = search(client, tracking_uri, exp_id, floor)
        runs += [r for r, _ in got]
        if mark := max([marks.get(exp_id, 0), *(min(t, now_ms) for _, t in got)]):
            seen[exp_id] = mark  # an experiment without runs has none yet
    return NewRuns(runs, seen)


def search(client, tracking_uri: str, exp_id: str, floor_ms: int | None, tagged: str | None = None
           ) -> list[tuple[MlflowRun, int]]:
    """(run, its latest start or end time) of the runs that started or ended at or after `floor_ms` (all
    when None): two searches, as MLflow's filter has no OR; a run still going is read again when it ends."""
    filters = ([f"attributes.start_time >= {floor_ms}", f"attributes.end_time >= {floor_ms}"]
               if floor_ms is not None else [""])
    if tagged:
        filters = [" and ".join(x for x in (f, f"tags.`{tagged}` LIKE '%'") if x) for f in filters]
    runs = {}
    try:
        for text in filters:
            token = None
            while True:
                page = client.search_runs([exp_id], filter_string=text, max_results=SEARCH_PAGE, page_token=token)
                runs.update({r.info.run_id: r for r in page})
                if not (token := page.token):
                    break
        return [(run_of(client, r), max(r.info.start_time or 0, r.info.end_time or 0)) for r in runs.values()]
    except Exception as exc:  # noqa: BLE001  (see resolve_experiments)
        raise TrackerUnreachable(tracking_uri, exc) from None


def run_of(client, run) -> MlflowRun:
    """One MLflow run as `tasks/sources/mlflow.py` reads it: each GPU memory series as one figure (`series_peak`)."""
    keys = gpu_memory_keys(run.data.metrics)
    peaks = {gpu: series_peak(m.value for m in client.get_metric_history(run.info.run_id, key))
             for gpu, key in keys.items()}
    return MlflowRun(run.info.run_id, run.info.status, run.info.start_time, run.info.end_time,
                     dict(run.data.params), dict(run.data.tags), peaks)
