"""Shared fixtures: an isolated data directory per test, one Prefect test server per session.

`make test` runs the suite on parallel workers (pytest-xdist, `-n`): each worker is a session of its own,
with its own data directory, Prefect home and Prefect test server (on a free port), so tests never share
state across workers. docs/testing.md says how to run, group and time the tests.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# The variables this file set in a parent pytest process: xdist's workers inherit the controller's
# environment, and must not share its data directory or Prefect home (each worker makes its own).
_SET_HERE = "GPUCAST_TEST_SESSION_SET"
for _name in os.environ.pop(_SET_HERE, "").split():
    os.environ.pop(_name, None)
_before = set(os.environ)

# Before anything imports gpucast.flows (which reads these to configure Prefect).
if "GPUCAST_HOME" not in os.environ:
    _session_home = tempfile.mkdtemp(prefix=f"gpucast-test-home-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-")
    os.environ["GPUCAST_HOME"] = _session_home
    atexit.register(shutil.rmtree, _session_home, ignore_errors=True)
# A temporary Prefect server's start (the harness below, a command's own) waits up to 180 s: at load 20-36 on 2 cores
# (several sessions' test runs on one machine) 90 s was passed and every test of that worker needing the harness
# errored (2026-11-28); a quiet machine starts one in ~10 s.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
# Parallel workers share the cores: each gets its share of OpenMP threads (torch reads this when it is first
# imported; gpucast passes it to the tree libraries, `flows/environment.py` `cores_here`). Two workers each running
# LightGBM on both cores of a 2-core machine made fits 10-30x slower (docs/testing.md).
if "PYTEST_XDIST_WORKER_COUNT" in os.environ and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

# No new traces of the traced prior in the suite's nights (GPUCAST_TRACE_NIGHT_SECONDS=0: cached traces are still
# used). A night on simulated logs recognises zoo architectures from their shapes and traced them for up to the
# 600 s budget, in every test that runs a night: minutes each, and a trace that timed out on a loaded machine
# changed the forecasts. The tests of tracing set their own bounds (tests/tasks/learn/test_traced.py) or the
# variable (tests/flows/test_failure_paths.py).
os.environ.setdefault("GPUCAST_TRACE_NIGHT_SECONDS", "0")
# Fits one after another in the test's own process: a local Dask cluster per training call cost ~18 CPU-s to start
# and stop, at ~40 call sites (docs/testing.md). The tests of the Dask path set `dask` themselves
# (tests/flows/test_dask_training.py, tests/reliability/test_sigterm.py, the GPU-pool deployment's environment).
os.environ.setdefault("GPUCAST_TRAIN_RUNNER", "local")

from gpucast.flows.environment import configure  # noqa: E402

configure()  # Prefect's defaults under the session's home, before any test module imports a flow
os.environ[_SET_HERE] = " ".join(sorted(set(os.environ) - _before))

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _no_reading_left_behind() -> Iterator[None]:
    """A test that fails between `staging.start_reading` and its staging (or a command's early reading, review 72 S3)
    leaves no reading for the next test of the worker: dropped after each test, if staging was ever imported."""
    yield
    if (staging := sys.modules.get("gpucast.tasks.ingest.staging")) is not None:
        staging.stop_reading()


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh, empty GPUCAST_HOME for one test."""
    path = tmp_path / "home"
    monkeypatch.setenv("GPUCAST_HOME", str(path))
    return path


# A Prefect server started on a new SQLite database first migrates it (alembic, ~150 steps): ~10 CPU-s and ~14 s of
# its start at load 5 (`prefect server database upgrade` on a new file 18.1 CPU-s, on a migrated one 7.8). The
# session's harness (one per xdist worker), gpucast's temporary server under the session's PREFECT_HOME and the
# crash module's server each started on a new one. The first harness of a run keeps a copy of its database just
# after its start (migrated, nothing run yet), and each later new database starts as a copy of it: the same schema
# and rows a server writes at its start, without the migrations (docs/testing.md, session 21).
PREFECT_DB_TEMPLATE = "prefect-db-template.sqlite"
HARNESS_DB = "prefect-test.db"  # the file name `prefect_test_harness` gives its database, in a new `mkdtemp()` folder


@contextlib.contextmanager
def _prefect_db_template(tmp_path_factory) -> Iterator[Path]:
    """The run's template database path (it may not exist yet), held under a lock shared by the xdist workers (their
    base temporary folders share a parent), so one worker writes it while another waits to read it."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    with open(shared / f"{PREFECT_DB_TEMPLATE}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield shared / PREFECT_DB_TEMPLATE
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def _harness_database_from(template: Path | None) -> Iterator[None]:
    """While the harness starts: its new temporary folder holds a copy of `template` as its database (None: as
    before, a new one). Should Prefect name that file otherwise, the copy is ignored and the server migrates a new
    database as before: slower, not wrong."""
    import prefect.testing.utilities as harness

    made = harness.mkdtemp
    if template is None:
        yield
        return

    def seeded(*args, **kwargs) -> str:
        folder = made(*args, **kwargs)
        shutil.copyfile(template, Path(folder) / HARNESS_DB)
        return folder

    harness.mkdtemp = seeded
    try:
        yield
    finally:
        harness.mkdtemp = made


def _keep_database(url: str, template: Path) -> None:
    """A consistent copy of the running server's SQLite database (`url`) as `template` (SQLite's backup API: the server
    may be writing; written beside it, then renamed in, so a reader never sees half a file)."""
    source = url.split(":///", 1)[1]
    part = template.with_name(template.name + ".part")
    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(part)) as dst:
        src.backup(dst)
    os.replace(part, template)


def seed_prefect_home(home: Path, template: Path | None) -> None:
    """A Prefect home whose database (Prefect's default, `prefect.db` in it) starts as a copy of `template`, when there
    is one and the home has no database yet."""
    if template is not None and template.exists() and not (home / "prefect.db").exists():
        home.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, home / "prefect.db")


@pytest.fixture(scope="session")
def prefect_db_template(tmp_path_factory) -> Path | None:
    """The run's template database if a harness has kept one (on any worker), else None; never starts a harness
    itself: for the tests that start servers of their own without one (`seed_prefect_home`)."""
    with _prefect_db_template(tmp_path_factory) as template:
        return template if template.exists() else None


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory) -> Iterator[Path | None]:
    """A temporary Prefect API (SQLite) for the whole session: flows run for real against it. Yields the run's
    template database (`seed_prefect_home`), None when it could not be kept."""
    import prefect.settings
    from prefect.logging.configuration import setup_logging
    from prefect.testing.utilities import prefect_test_harness

    from gpucast.flows import children

    # Bind Prefect's console handler to the session's stream now; a handler first made inside a
    # test that uses `capsys` would keep writing to that test's closed stream.
    setup_logging(incremental=False)
    # The harness stands for gpucast's temporary server (it ends with the session): no flow-run heartbeats,
    # as `children.serving` runs that server's flows
    with contextlib.ExitStack() as stack:
        with _prefect_db_template(tmp_path_factory) as template:
            seeded = template.exists()
            if not seeded:  # the run's first harness: started and copied under the lock, so the others wait for the copy
                stack.enter_context(prefect_test_harness(server_startup_timeout=180))
                url = prefect.settings.PREFECT_SERVER_DATABASE_CONNECTION_URL.value()
                with contextlib.suppress(sqlite3.Error, IndexError, OSError):  # no template: each server migrates
                    _keep_database(url, template)
        if seeded:  # a later harness: the copy is whole (renamed in), so its start holds no lock (review 71 S3-5)
            with _harness_database_from(template):
                stack.enter_context(prefect_test_harness(server_startup_timeout=180))
        kept = template if template.exists() else None
        seed_prefect_home(Path(os.environ["PREFECT_HOME"]), kept)  # the session's, where commands' servers start
        stack.enter_context(children.without_heartbeats())
        yield kept


def write(path: Path, text: str | bytes) -> Path:
    """Write a small fixture file (bytes are written as they are)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def key_latest(con, where: str = "true", params: list | None = None) -> None:
    """Make the records of `job_log_records` that match `where` (SQL over its columns, `params` bound) their jobs'
    latest: the keys `job_logs`, a view since session 15, reads (`job_logs_latest`), replacing those jobs' keys; of a
    job's several matching records, the latest by `load.LATEST_FIRST`. What a test wrote into `job_logs` itself when it
    was a table: its rows now go into `job_log_records` (one arrival each), then this."""
    from gpucast.warehouse.load import LATEST_FIRST

    picked = f"SELECT * FROM job_log_records WHERE {where} QUALIFY row_number() OVER (PARTITION BY job_id ORDER BY {LATEST_FIRST}) = 1"
    con.execute(f"DELETE FROM job_logs_latest WHERE job_id IN (SELECT job_id FROM ({picked}))", params or [])
    con.execute(f"INSERT INTO job_logs_latest SELECT job_id, arrival, coalesce(updated_at, submitted_at) FROM ({picked})",
                params or [])


def add_latest(con, select: str, params: list | None = None) -> None:
    """Insert the rows `select` gives (`job_log_records`' columns in its order: a query over `job_logs`, say) as new
    records, their arrivals numbered after the history's, each its job's latest (`key_latest`)."""
    base = con.execute("SELECT coalesce(max(arrival), 0) FROM job_log_records").fetchall()[0][0]
    con.execute(f"INSERT INTO job_log_records SELECT * REPLACE ({int(base)} + row_number() OVER () AS arrival) "
                f"FROM ({select})", params or [])
    key_latest(con, "arrival > ?", [base])


@pytest.hookimpl(wrapper=True, tryfirst=True)  # the marks before xdist's own hook reads them; the ids after it
def pytest_collection_modifyitems(config, items):
    """For parallel runs (`make test`: `-n ... --dist loadgroup`), two scheduling rules:

    * a module whose tests share a module-scoped fixture (a trained model, a reference night) keeps them
      on one worker, so the fixture is built once, not once per worker that gets one of its tests;
    * tests marked `slow` start first, so the longest ones do not run alone at the end.

    And one repair: xdist 3.8 puts a test in its group by appending "@<group>" to `item._nodeid`, which pytest 9
    no longer reads (a node's id is `item._id`, a `NodeId`): every group was ignored, each module fixture built on
    both workers (found 2026-11-28, docs/testing.md). After xdist's hook, an id without its group gets it.
    """
    if "PYTEST_XDIST_WORKER" in os.environ:  # xdist's workers collect; a plain run keeps the file order
        for item in items:
            defs = getattr(item, "_fixtureinfo", None)
            shared = defs and any(d.scope in ("module", "package", "class")
                                  for fixturedefs in defs.name2fixturedefs.values() for d in fixturedefs)
            if shared:
                item.add_marker(pytest.mark.xdist_group(item.module.__name__))
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    result = yield
    if getattr(config.option, "loadgroup", False):
        _group_ids(items)
    return result


def _group_ids(items) -> None:
    """Each grouped test's id as xdist means it, `<id>@<group>` (its groups joined by `_`, as xdist joins them)."""
    try:
        from _pytest.nodeid import NodeId  # (pytest 9's, private; an older pytest reads xdist's `_nodeid` itself)
    except ImportError:
        return

    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        suffix = f"@{'_'.join(names)}"
        grouped = item.nodeid.removesuffix(suffix) + suffix  # (an id with '@' of its own keeps it)
        if names and isinstance(getattr(item, "_id", None), NodeId) and item.nodeid != grouped:
            item._id = NodeId.parse(grouped)
