"""The warehouse DDL: `sql/schema.sql`, with the contract's columns generated from the contract, and the data
migrations that go with it (`redact_stored`, `rehash_stored`).

The contract table `job_log_records` carries every contract field; its column definitions are written here from
`contract.FIELDS` (SQL type by kind, NOT NULL when required), so adding a field to the contract adds its column without
a second hand-written list. `job_logs` is a view over it (each job's latest record, `job_logs_latest`), so it has the
same columns; a warehouse of an older gpucast, where `job_logs` was a table, has it turned into that view
(`latest_keys`).
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

import duckdb

from gpucast.expectations import contract as c
from gpucast.records import UNKNOWN_LLM_SIZE, UNKNOWN_RUNNING_HOURS
from gpucast.warehouse.errors import redact

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
UNKNOWN_SIZE_WORDS = "@UNKNOWN_LLM_SIZE@"  # (a literal: a view binds no parameter)
UNKNOWN_HOURS = "@UNKNOWN_RUNNING_HOURS@"
CONTRACT_TABLES = ("job_log_records",)  # (`job_logs` is a view over it since session 15: `latest_keys`)
RECORD_HASH = c.record_hash_sql()  # a record's identity (`warehouse/load.py` de-duplicates by it)
# kind -> (table, key column) of the run tables (warehouse/runs.py). The key names are the planners' public interface.
RUN_TABLES = {"ingest": ("ingest_runs", "run_id"), "train": ("train_runs", "train_run_id"),
              "score": ("score_runs", "score_run_id"), "plan": ("plan_runs", "plan_run_id"),
              "demand": ("demand_runs", "demand_run_id")}
# Raised with each change of a Python migration step (a rule `redact` gained that stored text must be masked by): the
# fingerprint changes with it, so every warehouse applies the schema and its migrations once more.
MIGRATION_STEPS = 1


def contract_columns_ddl() -> str:
    """`job_id VARCHAR NOT NULL,\\n    submitted_at TIMESTAMPTZ NOT NULL, ...` in contract order."""
    return ",\n    ".join(f"{f.name} {SQL_TYPES[f.kind]}{' NOT NULL' if f.required else ''}" for f in c.FIELDS)


def contract_migrations_ddl() -> str:
    """`ALTER TABLE ... ADD COLUMN IF NOT EXISTS` for every field added after v1, on `job_log_records`: a
    warehouse created under an older contract gains the columns (at the end; writes name columns), and `job_logs`, a view
    of its rows, with them."""
    return "\n".join(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {f.name} {SQL_TYPES[f.kind]};"
                     for table in CONTRACT_TABLES for f in c.FIELDS if f.since > 1)


@cache
def schema_sql() -> str:
    """The whole DDL, idempotent: applied by a writer connection to a warehouse that does not hold it yet
    (`schema_fingerprint`)."""
    text = resources.files("gpucast.warehouse").joinpath("sql/schema.sql").read_text()
    words = "'" + UNKNOWN_LLM_SIZE.replace("'", "''") + "'"
    return (text.replace(PLACEHOLDER, contract_columns_ddl()).replace(MIGRATIONS, contract_migrations_ddl())
            .replace(UNKNOWN_SIZE_WORDS, words).replace(UNKNOWN_HOURS, repr(float(UNKNOWN_RUNNING_HOURS))))


@cache
def schema_fingerprint() -> str:
    """The SHA-256 of `schema_sql()`, `MIGRATION_STEPS` and the record hash's definition: a warehouse that records it
    (table `schema_applied`) has this DDL and these migrations applied, its records hashed as `RECORD_HASH` hashes."""
    return hashlib.sha256(f"{schema_sql()}\n-- migration steps: {MIGRATION_STEPS}\n-- record hash: {RECORD_HASH}"
                          .encode()).hexdigest()


LATEST_KEYS = "job_logs_latest"  # each job's latest record's key (schema.sql): what `job_logs` reads


def latest_keys(con: duckdb.DuckDBPyConnection) -> bool:
    """Turn an older gpucast's `job_logs` table (each job's latest record, a second copy of its every column) into the
    keys `job_logs` is now a view of (`LATEST_KEYS`: job, arrival, coalesce(updated_at, submitted_at)); True when it
    did. Run in the schema's transaction, before its DDL (which makes the view `job_logs`: a name a table cannot
    keep). A latest row whose record is missing from `job_log_records` (only a warehouse changed by hand can hold one:
    every load inserts a record before it becomes a job's latest) is put back into the history first, so the view holds
    every row the table held; its lake day is then stale, and the next ingest writes it again
    (`load.stale_lake_days`). A warehouse without the table (new, or already turned) is left alone."""
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                       "AND schema_name = 'main' AND table_name = 'job_logs'").fetchall()[0][0]:
        return False
    con.execute("INSERT INTO job_log_records BY NAME SELECT * FROM job_logs j "
                "WHERE NOT EXISTS (SELECT 1 FROM job_log_records r WHERE r.arrival = j.arrival)")
    con.execute(f"CREATE TABLE {LATEST_KEYS} AS SELECT job_id, arrival, coalesce(updated_at, submitted_at) AS latest_at "
                "FROM job_logs")
    con.execute(f"ALTER TABLE {LATEST_KEYS} ALTER COLUMN job_id SET NOT NULL; "  # as schema.sql makes them
                f"ALTER TABLE {LATEST_KEYS} ALTER COLUMN arrival SET NOT NULL; "
                f"ALTER TABLE {LATEST_KEYS} ALTER COLUMN latest_at SET NOT NULL")
    con.execute("DROP TABLE job_logs")
    return True


REHASH_BATCH = 2_000_000  # arrivals a step of `rehash_stored` covers: each step's undo data stays within memory


def rehash_steps(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, int]]:
    """(table, first arrival, last arrival) of each step of `rehash_stored` over the contract tables."""
    steps = []
    for table in CONTRACT_TABLES:
        low, high = con.execute(f"SELECT min(arrival), max(arrival) FROM {table}").fetchall()[0]
        if low is not None:
            steps += [(table, start, start + REHASH_BATCH - 1) for start in range(low, high + 1, REHASH_BATCH)]
    return steps


def rehash_stored(con: duckdb.DuckDBPyConnection, table: str, first: int, last: int) -> int:
    """Hash the stored records of `table` with arrival in [first, last] again as `RECORD_HASH` does, where their
    stored hash differs (a warehouse of an older gpucast: until session 13 the record hash was md5 of
    `to_json(struct_pack(...))`, issue 52), so a record loaded before is still found a duplicate when it is sent
    again. The lake's files hold the hashes too: when any changed, every day of the lake is marked stale
    (`lake_partitions` emptied) and the next refresh writes each day again from the warehouse (`load.stale_lake_days`).
    The caller commits each step (`rehash_steps`) on its own, before the schema's record (`db.apply_schema`): an
    update of 10M rows at once would hold all their old values until its commit, and a run stopped half way leaves
    the record unwritten, so the next writer finishes it before anything is loaded. Returns how many rows changed."""
    n = con.execute(f"UPDATE {table} SET record_hash = {RECORD_HASH} WHERE arrival BETWEEN ? AND ? "
                    f"AND record_hash <> {RECORD_HASH}", [first, last]).fetchall()[0][0]
    if n:
        con.execute("DELETE FROM lake_partitions")
    return n


TEXT_WITH_URI = "(contains({0}, '://') OR contains({0}, '?') OR contains({0}, '#'))"  # what `redact` may change


def redact_stored(con: duckdb.DuckDBPyConnection) -> int:
    """Mask the URI secrets an older gpucast stored (before issue 48 it kept text as given): every text column of
    the run tables (an error quoting a tracking URI in `ingest_runs.message`, `train_runs.dask_address`, ...) and
    `source_watermarks.location`, which was the tracking URI as given, password and token included. Locations
    that are the same once masked (the URI with and without its password, two passwords for one server) become one,
    keeping the highest watermark of each experiment, so no import reads its store again from the start.
    Idempotent (masked text is kept as it is); the caller commits it with the schema's record (`db.apply_schema`),
    so it runs once per warehouse and gpucast version. Planners' copies get it at the next publish, which makes these
    tables again from the warehouse. Returns how many rows changed."""
    tables = dict(RUN_TABLES.values())
    text_columns: dict[str, list[str]] = {}
    for table, column in con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = current_database() AND "
            "schema_name = 'main' AND data_type = 'VARCHAR' AND list_contains(?, table_name) ORDER BY column_index",
            [list(tables)]).fetchall():
        if column != tables[table]:
            text_columns.setdefault(table, []).append('"' + column.replace('"', '""') + '"')  # our catalog's, quoted
    changed = 0
    for table, names in text_columns.items():
        key, cols = tables[table], ", ".join(names)
        where = " OR ".join(TEXT_WITH_URI.format(k) for k in names)
        for run_id, *texts in con.execute(f"SELECT {key}, {cols} FROM {table} WHERE {where}").fetchall():
            masked = [redact(t) if t is not None else None for t in texts]
            if masked != texts:
                sets = ", ".join(f"{k} = ?" for k in names)
                con.execute(f"UPDATE {table} SET {sets} WHERE {key} = ?", [*masked, run_id])
                changed += 1
    return changed + _merge_watermarks(con)


WATERMARK_COLUMNS = "source, location, scope, watermark_ms, ingest_run_id, updated_at"


def _merge_watermarks(con: duckdb.DuckDBPyConnection) -> int:
    """`source_watermarks` keyed by each location masked (`redact_stored`); how many rows changed."""
    where = TEXT_WITH_URI.format("location")
    rows = con.execute(f"SELECT {WATERMARK_COLUMNS} FROM source_watermarks WHERE {where}").fetchall()
    raw = [row for row in rows if redact(row[1]) != row[1]]
    if not raw:
        return 0
    kept: dict[tuple, tuple] = {}  # (source, masked location, scope) -> the row with the highest watermark
    for source, location, scope, mark, run_id, at in rows:
        key = (source, redact(location), scope)
        if key not in kept or (mark, at) > (kept[key][3], kept[key][5]):
            kept[key] = (*key, mark, run_id, at)
    con.executemany("DELETE FROM source_watermarks WHERE source = ? AND location = ? AND scope = ?",
                    [row[:3] for row in rows])
    con.executemany(f"INSERT INTO source_watermarks ({WATERMARK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", list(kept.values()))
    return len(raw)


# Each score run's forecast time from its kept forecasts, for the runs published before `score_runs.forecasts_at` was
# kept (schema.sql; warehouse/forecast.py `prune` reads it). Runs without forecasts (failed, pruned) keep it null.
BACKFILL_FORECASTS_AT = """
UPDATE score_runs SET forecasts_at = f.at
FROM (SELECT score_run_id, max(scored_at) AS at FROM forecasts
      WHERE score_run_id IN (SELECT score_run_id FROM score_runs WHERE forecasts_at IS NULL) GROUP BY score_run_id) f
WHERE score_runs.score_run_id = f.score_run_id AND score_runs.forecasts_at IS NULL
"""


def backfill_forecasts_at(con: duckdb.DuckDBPyConnection) -> int:
    """Set `score_runs.forecasts_at` where a run has forecasts and not the column (`BACKFILL_FORECASTS_AT`); the
    caller commits it with the schema's record (`db.apply_schema`), so it runs once per warehouse and gpucast version.
    Returns how many runs got it."""
    return con.execute(BACKFILL_FORECASTS_AT).fetchall()[0][0]
