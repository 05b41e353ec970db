"""The warehouse DDL: `sql/schema.sql`, with the contract's columns generated from the contract.

The two contract tables (`job_log_records`, `job_logs`) carry every contract field; their column
definitions are written here from `contract.FIELDS` (SQL type by kind, NOT NULL when required),
so adding a field to the contract adds its column without a second hand-written list.
"""

from __future__ import annotations

import hashlib
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
MIGRATIONS = "@CONTRACT_MIGRATIONS@"
CONTRACT_TABLES = ("job_log_records", "job_logs")


def contract_columns_ddl() -> str:
    """`job_id VARCHAR NOT NULL,\\n    submitted_at TIMESTAMPTZ NOT NULL, ...` in contract order."""
    return ",\n    ".join(f"{f.name} {SQL_TYPES[f.kind]}{' NOT NULL' if f.required else ''}" for f in c.FIELDS)


def contract_migrations_ddl() -> str:
    """`ALTER TABLE ... ADD COLUMN IF NOT EXISTS` for every field added after v1, on both tables: a
    warehouse created under an older contract gains the columns (at the end; writes name columns)."""
    return "\n".join(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {f.name} {SQL_TYPES[f.kind]};"
                     for table in CONTRACT_TABLES for f in c.FIELDS if f.since > 1)


@cache
def schema_sql() -> str:
    """The whole DDL, idempotent: applied by a writer connection to a warehouse that does not hold it yet
    (`schema_fingerprint`)."""
    text = resources.files("gpucast.warehouse").joinpath("sql/schema.sql").read_text()
    return text.replace(PLACEHOLDER, contract_columns_ddl()).replace(MIGRATIONS, contract_migrations_ddl())


@cache
def schema_fingerprint() -> str:
    """The SHA-256 of `schema_sql()`: a warehouse that records it (table `schema_applied`) has this DDL applied."""
    return hashlib.sha256(schema_sql().encode()).hexdigest()
