"""The warehouse DDL: `sql/schema.sql`, with the contract's columns generated from the contract.

The two contract tables (`job_log_records`, `job_logs`) carry every contract field; their column
definitions are written here from `contract.FIELDS` (SQL type by kind, NOT NULL when required),
so adding a field to the contract adds its column without a second hand-written list.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from gpucast.expectations import contract as c

SQL_TYPES = {
    "string": "VARCHAR",
    "status": "VARCHAR",
    "precision": "VARCHAR",
    "timestamp": "TIMESTAMPTZ",
    "float": "DOUBLE",
    "int": "BIGINT",
    "bool": "BOOLEAN",
}
PLACEHOLDER = "@CONTRACT_COLUMNS@"


def contract_columns_ddl() -> str:
    """`job_id VARCHAR NOT NULL,\\n    submitted_at TIMESTAMPTZ NOT NULL, ...` in contract order."""
    return ",\n    ".join(f"{f.name} {SQL_TYPES[f.kind]}{' NOT NULL' if f.required else ''}" for f in c.FIELDS)


@cache
def schema_sql() -> str:
    """The whole DDL, idempotent: applied on every writer connection."""
    text = resources.files("gpucast.warehouse").joinpath("sql/schema.sql").read_text()
    return text.replace(PLACEHOLDER, contract_columns_ddl())
