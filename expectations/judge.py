"""Great Expectations' judge: a process of its own that validates Parquet rows with GX's SQL data source on DuckDB.

Why a process of its own (issue 52, decision 1): duckdb-engine (GX's way into DuckDB) and torch in one process print
~40 "nanobind: leaked N instances ... DuckDBPyType" lines at every exit (`python -c "import torch, duckdb_engine"`
alone does). duckdb-engine registers a SQL compiler on SQLAlchemy's `TryCast` (a class of SQLAlchemy's, so it
outlives duckdb-engine's module), whose function's globals hold the `duckdb` module: the `DuckDBPyConnection` type
(named in duckdb-engine's annotations; its 84 methods) and the 27 `duckdb.sqltypes` constants. Python's
finalisation frees such cycles only if nothing from outside still reaches them, and torch (and GX too, once it has
built a SQL data source: its context, engine and dialect) keeps objects alive past finalisation from which that
graph is reached, so nanobind's exit check finds the types and instances still alive and prints them. Releasing
the references at exit (`_release`) is enough without torch (asserted on a real `gpucast ingest`), not with it: a
nightly, the demo and any test process import torch. So the parent process (`validate.py`) never imports
duckdb-engine; it starts this module (`python -m gpucast.expectations.judge`), which imports GX and
duckdb-engine and never torch, and asks it over a pipe. A side gain: GX's import and context (3-4 s) build in
another process, on another core, while the ingest reads.

Protocol: one JSON object a line on stdin, one answer a line on the protocol's stdout (anything else that GX
or a library prints goes to stderr, the parent's):
* `{"suite": spec}`: build GX's context for the suite `spec` (an ExpectationSuite's dict; the parent's, so a
  test's own suite is judged as the parent has it). Answer `{"ok": true}`.
* `{"suite": spec, "paths": [...], "columns": [...]}`: `columns` of the Parquet files `paths` as the DuckDB view
  `batch` (the files are read where they lie, not copied) and validate it once (`result_format=BOOLEAN_ONLY`). Answer `{"verdicts":
  [[expectation, column, rule, success, error], ...]}`; `{"error": text}` if it could not.
The process ends at end of input (the parent closed the pipe or ended).

Why `_OwnCursors`: duckdb-engine hands SQLAlchemy cursors that all wrap the *same* DuckDB connection;
SQLAlchemy rolls back on it when GX's `with get_connection()` block ends, before GX fetches the rows, and that
discards the pending result (GX then fails every expectation with "list index out of range", issues #10738 /
#11579). Each cursor a DuckDB cursor of its own keeps the result.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from dataclasses import dataclass

BATCH = "batch"  # the DuckDB table GX validates: the rows of one run (or one frame)


@dataclass(frozen=True)
class _Judge:
    """GX's context for one suite: the in-memory DuckDB it reads, the batch definition over `BATCH`, the suite,
    and the data source (its engine is disposed of at exit)."""

    con: object
    batch_definition: object
    suite: object
    source: object


def _build(spec: dict) -> _Judge:
    import duckdb
    import great_expectations as gx
    from duckdb_engine import ConnectionWrapper, CursorWrapper
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    class _OwnCursors(ConnectionWrapper):
        """duckdb-engine's connection, each cursor a DuckDB cursor of its own (module doc)."""

        def __init__(self, con):
            super().__init__(con)
            self._own = con

        def cursor(self):
            return CursorWrapper(self._own.cursor(), self)

    name = spec["name"]
    con = duckdb.connect()  # in memory: it holds the view over the run's files (`_verdicts`), nothing else
    con.execute(f"CREATE TABLE {BATCH} (placeholder INTEGER)")  # GX checks the table exists when the asset is added
    # analytics off in the context's own configuration: a nightly batch on a closed network must not
    # phone home (GX's documented switch; no environment variable needed)
    config = DataContextConfig(analytics_enabled=False, store_backend_defaults=InMemoryStoreBackendDefaults())
    context = gx.get_context(mode="ephemeral", project_config=config)
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    suite = context.suites.add(gx.ExpectationSuite(**spec))
    source = context.data_sources.add_sql(name=f"{name}_duckdb", connection_string="duckdb://",
                                          kwargs={"creator": lambda: _OwnCursors(con.cursor())})
    batch_definition = source.add_table_asset(name=BATCH, table_name=BATCH).add_batch_definition_whole_table("all")
    return _Judge(con, batch_definition, suite, source)


def _raised(info: dict | None) -> str | None:
    """The message of an exception GX caught while running an expectation, else None. GX 1.x puts it
    at the top level or, when a metric failed, under each metric's id: both are looked at."""
    if not info:
        return None
    for entry in (info, *[v for v in info.values() if isinstance(v, dict)]):
        if entry.get("raised_exception"):
            return str(entry.get("exception_message") or "the expectation raised an exception")
    return None


def _quoted(text: str) -> str:
    """A SQL string literal (a view cannot hold a bound parameter): the staging files' own paths, quotes doubled."""
    return "'" + text.replace("'", "''") + "'"


def _verdicts(judge: _Judge, paths: list[str], columns: list[str]) -> list[list]:
    """GX over `BATCH` as a view on the Parquet files, not a copy of their rows: the judge's memory stays flat as
    runs grow (a copied table held ~360 MB more per million rows); DuckDB scans the files for each of GX's
    queries."""
    listed = ", ".join('"' + name.replace('"', '""') + '"' for name in columns)  # the contract's names, not values
    files = "[" + ", ".join(_quoted(p) for p in paths) + "]"
    _drop_batch(judge.con)
    judge.con.execute(f"CREATE VIEW {BATCH} AS SELECT {listed} FROM read_parquet({files}, union_by_name = true)")
    try:
        result = judge.batch_definition.get_batch().validate(judge.suite, result_format={"result_format": "BOOLEAN_ONLY"})
    finally:
        _drop_batch(judge.con)
        judge.con.execute(f"CREATE TABLE {BATCH} (placeholder INTEGER)")  # nothing left reading the run's files
    out = []
    for res in result.results:
        cfg = res.expectation_config
        column = cfg.kwargs.get("column") or cfg.kwargs.get("column_A")
        out.append([cfg.type, column, (cfg.meta or {}).get("rule") or cfg.type, bool(res.success),
                    _raised(res.exception_info)])
    return out


def _drop_batch(con) -> None:
    kind = con.execute("SELECT table_type FROM information_schema.tables WHERE table_name = ?", [BATCH]).fetchone()
    if kind:
        con.execute(f"DROP {'VIEW' if kind[0] == 'VIEW' else 'TABLE'} {BATCH}")


def _release(judges: dict[str, _Judge]) -> None:
    """Before exit: drop what keeps DuckDB's bindings alive past their teardown (module doc): duckdb-engine's
    compiler on SQLAlchemy's `TryCast`, each engine's pooled connection, the DuckDB connections."""
    if not judges:
        return
    from sqlalchemy import TryCast

    TryCast._compiler_dispatcher.specs.pop("duckdb", None)
    for judge in judges.values():
        judge.source.get_engine().dispose()
        judge.con.close()
    judges.clear()


def serve(lines, answer) -> None:
    """Answer each request line of `lines` with `answer(dict)` (the protocol in the module doc)."""
    judges: dict[str, _Judge] = {}  # by the suite's JSON text: a changed suite is a new context
    try:
        for line in lines:
            request = json.loads(line)
            try:
                key = json.dumps(request["suite"], sort_keys=True)
                if key not in judges:
                    judges[key] = _build(request["suite"])
                if "paths" in request:
                    answer({"verdicts": _verdicts(judges[key], request["paths"], request["columns"])})
                else:
                    answer({"ok": True})
            except Exception as e:  # the parent raises it where validation runs, with the worker's trace
                answer({"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()})
    finally:
        _release(judges)


def main() -> None:
    # Ctrl-C reaches the whole process group: the command decides (its run is recorded as failed) and closes the
    # pipe, which ends this process; a KeyboardInterrupt traceback of its own would only add noise
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # what GX or a library prints goes to stderr, not the pipe

    def answer(message: dict) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    serve(sys.stdin, answer)


if __name__ == "__main__":
    main()
