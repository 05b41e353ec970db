"""Project-wide invariants: one definition of names, a pure layer free of Prefect."""

from __future__ import annotations

import ast
from pathlib import Path

import duckdb

from gpucast.tasks import contract as c
from gpucast.warehouse.db import schema_sql

ROOT = Path(__file__).resolve().parents[1]


def test_there_are_eleven_features():
    assert len(c.FEATURES) == 11
    assert set(c.FEATURES) <= set(c.COLUMNS)


def test_pure_layers_never_import_prefect():
    offenders = []
    for folder in ("tasks", "warehouse", "expectations"):
        for py in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(py.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n.split(".")[0] == "prefect" for n in names):
                    offenders.append(str(py.relative_to(ROOT)))
    assert offenders == []


def test_warehouse_tables_carry_the_contract_columns():
    con = duckdb.connect()
    con.execute(schema_sql())
    for table in (c.T_JOB_LOGS, c.T_JOB_LOG_RECORDS):
        cols = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
        assert cols[: len(c.COLUMNS)] == list(c.COLUMNS)
    required = {r[0] for r in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'job_logs' AND NOT is_nullable").fetchall()}
    assert set(c.REQUIRED) <= required


def test_schema_applies_twice():
    con = duckdb.connect()
    con.execute(schema_sql())
    con.execute(schema_sql())


def test_readme_contract_table_lists_every_column():
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Job-log contract v1")[1].split("Rules and decisions")[0]
    for f in c.FIELDS:
        assert f"| `{f.name}` |" in table, f.name
