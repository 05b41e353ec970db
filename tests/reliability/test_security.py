"""Security properties that are cheap to break by accident: each one is asserted here.

Covered elsewhere: SQL-looking strings and path-looking job ids in job logs
(test_hostile_inputs.py), `gpucast sql` cannot write, ATTACH, COPY or read files
(tests/flows/test_cli.py), skops refuses types outside the allow-list (tests/tasks/learn/test_models.py),
the documented `prefect server start` listens on loopback only (tests/flows/test_nightly.py).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class Payload:
    """Unpickling this would run code."""

    def __reduce__(self):
        return (print, ("pwned",))


def test_a_checkpoint_with_pickled_objects_is_refused(tmp_path):
    import pickle

    import torch

    from gpucast.tasks.learn.models.transformer_bigru import TransformerBiGRURegressor

    path = tmp_path / "transformer_bigru.pt"
    torch.save({"preset": "tiny", "evil": Payload()}, path)
    with pytest.raises(pickle.UnpicklingError):
        TransformerBiGRURegressor.load(path)


def listening_addresses(port: int) -> set[str]:
    """The local addresses (IPv4 and IPv6, as /proc/net shows them) with a socket LISTENing on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1, as /proc/net/tcp{,6} write them


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_prefect_temporary_server_listens_on_loopback_only():
    """The API server a flow run talks to (here the session's temporary one) binds 127.0.0.1, nothing else."""
    from urllib.parse import urlparse

    from prefect.settings import PREFECT_API_URL

    port = urlparse(PREFECT_API_URL.value()).port
    addresses = listening_addresses(port)
    assert addresses and addresses <= LOOPBACK, addresses


def test_the_listener_check_sees_a_socket_open_to_every_interface():
    """The check above can fail: a socket bound to 0.0.0.0 is reported as not loopback."""
    import socket

    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        assert listening_addresses(s.getsockname()[1]) == {"00000000"}


# SQL built as text may only interpolate SQL fragments we write ourselves: module constants
# (UPPER_CASE), the contract's names (`c.X`), and these local names, each of which holds a column
# list, a table or key name from a fixed mapping, or a number we computed. Values from outside (a
# job id, a reason, a file name, a query) must be bound parameters.
SQL_FRAGMENT_NAMES = {
    "cols", "table", "key", "names", "sets", "labelled", "missing", "limit", "kind", "CONTRACT_COLS", "files",
    # the incremental publish (warehouse/publish.py): `into`, `source`, `k` are sql_name(...) of our own catalog's
    # tables and columns; `where` and `in_runs(...)` are filters whose run ids are bound `?` parameters
    "into", "source", "k", "where",
    # the copy's `forecasts` view (warehouse/publish.py `_publish_forecasts`): our catalog's column names and types,
    # and the Parquet files the publish itself wrote, each through sql_name / sql_string
    "body",
    # the ingest's merge (warehouse/load.py `_merge_valid`): `columns` is job_log_records' own columns (sql_name) cast
    # to the types DuckDB's catalog gives; `fresh` a sub-query on that table filtered by an int(...) arrival number
    "columns", "fresh",
}
OWN_FRAGMENT_CALLS = ("int", "len", "sql_string", "sql_name", "in_runs")
SQL_WORDS = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|WHERE|VALUES|SET|FROM|COPY)\b")


def _allowed(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id.isupper() or node.id in SQL_FRAGMENT_NAMES
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id == "c" or node.attr.isupper()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
        return all(_allowed(a) or isinstance(a, ast.GeneratorExp | ast.ListComp) for a in node.args)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in OWN_FRAGMENT_CALLS:
        return True  # a number, a path we created or a name from our own catalog, quoted (DDL takes no bound value)
    return False


def _sql_fstrings(tree: ast.AST) -> list[ast.JoinedStr]:
    """f-strings handed to DuckDB (`.execute(...)`, `.sql(...)`), or kept as SQL text in a variable."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("execute", "sql"):
            found += [n for arg in node.args for n in ast.walk(arg) if isinstance(n, ast.JoinedStr)]
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.JoinedStr):
            found.append(node.value)
    return found


def sql_interpolations(source: str) -> list[tuple[int, str]]:
    """(line, expression) of every value interpolated into SQL text that is not one of our own fragments."""
    bad = []
    for node in _sql_fstrings(ast.parse(source)):
        text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        if not SQL_WORDS.search(text):
            continue
        for v in node.values:
            if isinstance(v, ast.FormattedValue) and not _allowed(v.value):
                bad.append((node.lineno, ast.unparse(v.value)))
    return bad


def test_warehouse_sql_binds_values():
    """f-string SQL (single- or triple-quoted) in the code interpolates only our own SQL fragments."""
    offenders = []
    for folder in ("warehouse", "flows", "tasks"):
        for path in (ROOT / folder).rglob("*.py"):
            offenders += [f"{path.relative_to(ROOT)}:{line}: {expr}" for line, expr in sql_interpolations(path.read_text())]
    assert offenders == []


def test_the_sql_guard_catches_a_value_in_sql_text():
    """The guard above can fail: single-line and triple-quoted SQL with a value in it are both caught."""
    source = '''
con.execute(f"SELECT * FROM job_logs WHERE job_id = '{job_id}'")
con.execute(f"""
    DELETE FROM rejected_job_logs
    WHERE source_file = '{path}'
""")
con.execute(f"SELECT {CONTRACT_COLS} FROM job_logs WHERE {c.STATUS} = ?", [status])
'''
    assert sql_interpolations(source) == [(2, "job_id"), (3, "path")]


# Credentials in a tracking URI (issue 48, item 5): user info, a token in the query string, one in the fragment
SECRETS = ("S3cretPw", "T0kenQuery", "Fr4gment")


def _dead_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed: nothing listens there


def _tables_text(path: Path) -> str:
    """Every row of every table and view of a DuckDB file, as text."""
    import duckdb

    with duckdb.connect(str(path), read_only=True) as con:
        names = [n for (n,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        return "\n".join(repr(con.execute(f'SELECT * FROM "{n}"').fetchall()) for n in names)


def test_credentials_in_a_tracking_uri_reach_no_table_status_line_or_log(home, tmp_path, monkeypatch, capsys, caplog):
    """A real, failing MLflow pull of sources.yaml's credential-bearing URIs, and `gpucast import mlflow` given one:
    the secrets are in no table of the warehouse or the published copy, no `gpucast status` line, nothing printed
    and no log record; the runs are still recorded failed, naming the host."""
    import logging

    from gpucast.flows.cli import main
    from gpucast.flows.imports import pull_sources
    from gpucast.flows.settings import Settings
    from gpucast.warehouse.publish import publish_snapshot

    port = _dead_port()
    uris = [f"http://alice:{SECRETS[0]}@127.0.0.1:{port}/mlflow", f"http://127.0.0.1:{port}/mlflow?access_token={SECRETS[1]}",
            f"http://127.0.0.1:{port}/mlflow#token={SECRETS[2]}", f"postgresql://alice:{SECRETS[0]}@127.0.0.1:{port}/mlflow"]
    sources = tmp_path / "sources.yaml"
    sources.write_text("mlflow:\n" + "".join(f"  - tracking_uri: '{u}'\n" for u in uris))
    monkeypatch.setenv("GPUCAST_SOURCES", str(sources))
    caplog.set_level(logging.DEBUG)

    pulled = pull_sources(Settings.from_env().ensure())
    assert len(pulled.failed) == 4 and not pulled.runs
    assert f"mlflow http://***@127.0.0.1:{port}/mlflow failed: SourceUnavailable" in " ".join(pulled.failed.values())
    assert main(["import", "mlflow", "--tracking-uri", uris[1]]) == 5
    storage = Settings.from_env().storage
    publish_snapshot(storage)
    assert main(["status", "--no-flows"]) == 0

    out, err = capsys.readouterr()
    assert "127.0.0.1" in out and f"gpucast import: mlflow http://127.0.0.1:{port}/mlflow?***: cannot be read" in err
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    stored = _tables_text(storage.db_path) + _tables_text(storage.published_path)
    assert "failed: SourceUnavailable: mlflow http://***@127.0.0.1" in stored
    for secret in SECRETS:
        for where, text in (("printed", out + err), ("logged", logged), ("pulled", repr(pulled)), ("stored", stored)):
            assert secret not in text, (where, secret)
        assert not [f for f in home.rglob("*") if f.is_file() and secret.encode() in f.read_bytes()]


def test_log_records_have_uri_secrets_masked_in_message_and_traceback():
    """The filter the CLI puts on the console's and Prefect's API log handlers (flows/cli/process.py)."""
    import io
    import logging

    from gpucast.flows.cli.process import RedactedUris

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactedUris())
    log = logging.getLogger("tests.redacted")
    log.addHandler(handler)
    try:
        log.warning("View at %s/runs/1", f"http://alice:{SECRETS[0]}@host:4200")
        try:
            raise ConnectionError(f"http://host/mlflow?access_token={SECRETS[1]} refused")
        except ConnectionError:
            log.exception("pull failed")
    finally:
        log.removeHandler(handler)
    shown = stream.getvalue()
    assert "View at http://***@host:4200/runs/1" in shown and "ConnectionError: http://host/mlflow?*** refused" in shown
    assert not any(secret in shown for secret in SECRETS)


def test_the_failure_alert_has_uri_secrets_masked():
    """Review of issue 48, W 11: the webhook's body quoted the failed run's message (the raw error) unmasked."""
    from types import SimpleNamespace

    from gpucast.flows.nightly import alert_on_failure
    from tests.flows.test_nightly import _webhook_endpoint

    state = SimpleNamespace(name="Failed", message=f"SourceUnavailable: mlflow http://alice:{SECRETS[0]}@h/mlflow?"
                                                   f"access_token={SECRETS[1]}: cannot be read")
    with _webhook_endpoint() as (url, received), pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUCAST_ALERT_WEBHOOK_URL", url)
        alert_on_failure(None, SimpleNamespace(name="nightly-x", id="1"), state)
    (sent,) = received
    assert "SourceUnavailable: mlflow http://***@h/mlflow?***: cannot be read" in sent["body"], sent
    assert not any(secret in repr(sent) for secret in SECRETS)


def test_a_failed_alert_never_prints_the_webhooks_url(capsys):
    """Review 77 S1-9: a Slack, Teams or Discord webhook carries its token in the path, which `redact` keeps; a failed
    alert printed the URL twice (the line and the HTTP library's error) into the flow-run log. It names the host."""
    import socket
    from types import SimpleNamespace

    from gpucast.flows.nightly import alert_on_failure

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/services/T0AAAA/B0BBBB/S3CRETtokenXYZ"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUCAST_ALERT_WEBHOOK_URL", url)
        alert_on_failure(None, SimpleNamespace(name="nightly-x", id="2"), SimpleNamespace(name="Failed", message="x"))
    out = capsys.readouterr().out
    assert "could not send the failure alert to the webhook at 127.0.0.1 (GPUCAST_ALERT_WEBHOOK_URL): " in out, out
    assert "S3CRET" not in out


def test_secrets_an_older_gpucast_stored_are_masked_once_and_never_published(home):
    """Review of issue 48, MUST 4: an older gpucast stored the tracking URI as given (the watermarks' key) and its
    errors unmasked (`ingest_runs.message`, ...); the publish copied them to planners every night. The first writer
    of this version masks them (`schema.redact_stored`), merging the watermarks of locations that are one once
    masked with the highest watermark kept; the next publish copies no secret, and `gpucast status` shows none."""
    from datetime import UTC, datetime

    import duckdb

    from gpucast.flows.report import warehouse_status
    from gpucast.flows.settings import Settings
    from gpucast.warehouse.db import connect_writer
    from gpucast.warehouse.publish import publish_snapshot
    from gpucast.warehouse.watermarks import read_watermarks

    storage = Settings.from_env().ensure().storage
    connect_writer(storage).close()
    at = datetime(2026, 11, 1, tzinfo=UTC)
    old = f"http://alice:{SECRETS[0]}@h:5000/mlflow"
    with duckdb.connect(str(storage.db_path)) as con:  # what an older gpucast wrote, and its schema's record
        con.execute("UPDATE schema_applied SET fingerprint = 'an older gpucast'")
        con.executemany("INSERT INTO source_watermarks VALUES ('mlflow', ?, ?, ?, 'ingest-old', ?)", [
            (old, "1", 300, at), (old, "2", 50, at),
            (f"http://bob:{SECRETS[1]}@h:5000/mlflow", "1", 200, at),  # another password for the same store
            ("http://***@h:5000/mlflow", "1", 100, at),  # stored masked since (issue 48): re-read from the start
            (f"http://h:5000/mlflow?access_token={SECRETS[1]}", "1", 7, at),
        ])
        con.execute("INSERT INTO ingest_runs (run_id, started_at, files, files_rejected, rows_read, rows_loaded, "
                    "rows_rejected, rows_duplicate, status, message, source) VALUES ('ingest-old', ?, 0, 0, 0, 0, 0, 0, "
                    "'failed', ?, 'mlflow')", [at, f"SourceUnavailable: mlflow {old}: cannot be read ({old}/api/2.0)"])
        con.execute("INSERT INTO train_runs (train_run_id, started_at, status, dask_address, fits_on, message) VALUES "
                    "('train-old', ?, 'succeeded', ?, ?, NULL)",
                    [at, f"tcp://u:{SECRETS[2]}@d:8786", f"Dask at tcp://u:{SECRETS[2]}@d:8786: 2 worker(s)"])
    assert read_watermarks(storage, "mlflow", "http://***@h:5000/mlflow") == {"1": 300, "2": 50}  # the migration ran
    assert read_watermarks(storage, "mlflow", "http://h:5000/mlflow?***") == {"1": 7}
    publish_snapshot(storage)
    with duckdb.connect(str(storage.published_path), read_only=True) as con:
        assert con.execute("SELECT message FROM ingest_runs").fetchall() == [
            ("SourceUnavailable: mlflow http://***@h:5000/mlflow: cannot be read (http://***@h:5000/mlflow/api/2.0)",)]
        assert con.execute("SELECT dask_address, fits_on FROM train_runs").fetchall() == [
            ("tcp://***@d:8786", "Dask at tcp://***@d:8786: 2 worker(s)")]
        assert con.execute("SELECT count(*) FROM source_watermarks").fetchone() == (3,)
    stored = _tables_text(storage.db_path) + _tables_text(storage.published_path)
    shown = warehouse_status(storage, 10, 30)
    for secret in SECRETS:
        assert secret not in stored and secret not in shown, secret
    with connect_writer(storage) as con:  # once: recorded, and masking again changes nothing
        from gpucast.warehouse.schema import redact_stored

        assert redact_stored(con) == 0


def test_status_masks_what_it_shows_whatever_the_copy_holds(home):
    """A guard at display: a run's text that holds a secret (a copy published before the migration, a row written
    by hand) is shown masked, before the table cuts a long cell short."""
    from datetime import UTC, datetime

    import duckdb

    from gpucast.flows.report import warehouse_status
    from gpucast.flows.settings import Settings
    from gpucast.warehouse.db import connect_writer

    storage = Settings.from_env().ensure().storage
    connect_writer(storage).close()
    long = "x" * 70 + f" tcp://u:{SECRETS[2]}@d:8786"
    with duckdb.connect(str(storage.db_path)) as con:
        con.execute("INSERT INTO ingest_runs (run_id, started_at, files, files_rejected, rows_read, rows_loaded, "
                    "rows_rejected, rows_duplicate, status, message) VALUES ('ingest-x', ?, 0, 0, 0, 0, 0, 0, "
                    "'failed', ?)", [datetime(2026, 11, 1, tzinfo=UTC), f"mlflow http://alice:{SECRETS[0]}@h: failed"])
        con.execute("INSERT INTO train_runs (train_run_id, started_at, status, message) VALUES ('train-x', ?, "
                    "'succeeded', ?)", [datetime(2026, 11, 1, tzinfo=UTC), long])
    shown = warehouse_status(storage, 10, 30)
    assert "mlflow http://***@h: failed" in shown, shown
    assert not any(secret in shown for secret in SECRETS), shown
