"""The load's per-file rows (`ingest_files`, `rejected_files`, `validation_results`): written in bulk, typed as the
tables type them, and without pandas (issue 52, session 18: PyArrow's `pa.array` imported it, 0.35-0.6 CPU-s of
`gpucast ingest`, which loads pandas nowhere else)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# In a fresh interpreter, as `gpucast ingest`'s load runs it: a new warehouse, then the rows of one run of three
# files (loaded, rejected whole, loaded with an ignored column and two outcomes), in the load's transaction.
CODE = """
import json, sys
from datetime import UTC, datetime
from gpucast.flows.settings import Settings
from gpucast.records.outcomes import FileResult
from gpucast.warehouse import load
from gpucast.warehouse.db import connect_writer, transaction

now = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
outcome = dict(suite="job_logs", expectation="expect_column_values_to_not_be_null", column="job_id",
               rule="job_id is required", success=False, unexpected_count=3, error=None)
results = [
    FileResult(path="/in/a.jsonl", sha256="a" * 64, index=0, fmt="jsonl", rows_read=5, rows_valid=4, rows_rejected=1),
    FileResult(path="/in/b.csv", sha256="b" * 64, index=1, status="rejected", reason="not UTF-8 at line 2"),
    FileResult(path="/in/c.jsonl", sha256="c" * 64, index=2, fmt="jsonl.gz", rows_read=7, rows_valid=7,
               ignored_columns=["colour", "mood"], outcomes=[outcome, {**outcome, "column": "queue", "success": True,
                                                                      "unexpected_count": 0, "error": "x"}]),
]
con = connect_writer(Settings.from_env().storage)
with transaction(con):
    totals = load._record_files(con, "ingest-1", results, {"/in/a.jsonl": 3, "/in/c.jsonl": 7}, now)
cells = lambda r: [None if v is None else str(v) for v in r]  # a NULL stays null, not the text "None"
print(json.dumps({
    "pandas": "pandas" in sys.modules,
    "totals": totals,
    "files": [cells(r) for r in con.execute("SELECT * FROM ingest_files ORDER BY source_file").fetchall()],
    "rejected": [cells(r) for r in con.execute("SELECT * FROM rejected_files").fetchall()],
    "outcomes": [cells(r) for r in con.execute("SELECT * FROM validation_results ORDER BY column_name").fetchall()],
}))
"""


def test_the_loads_rows_per_file_are_written_typed_and_without_pandas(home):
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=dict(os.environ), check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["totals"] == {"files_rejected": 1, "rows_read": 12, "rows_loaded": 10, "rows_rejected": 1,
                             "rows_duplicate": 1, "message": "b.csv: not UTF-8 at line 2; c.jsonl: ignored unknown "
                                                             "column(s) colour, mood"}
    assert got["files"] == [
        ["ingest-1", "/in/a.jsonl", "a" * 64, "jsonl", "5", "3", "1", "1", "loaded", None, "[]"],
        ["ingest-1", "/in/b.csv", "b" * 64, None, "0", "0", "0", "0", "rejected", "not UTF-8 at line 2", "[]"],
        ["ingest-1", "/in/c.jsonl", "c" * 64, "jsonl.gz", "7", "7", "0", "0", "loaded", None, "['colour', 'mood']"],
    ]
    assert got["rejected"] == [["/in/b.csv", "b" * 64, "not UTF-8 at line 2", "ingest-1", "2026-11-30 08:00:00+00:00"]]
    assert got["outcomes"] == [
        ["ingest-1", "/in/c.jsonl", "job_logs", "expect_column_values_to_not_be_null", "job_id", "job_id is required",
         "False", "3", None],
        ["ingest-1", "/in/c.jsonl", "job_logs", "expect_column_values_to_not_be_null", "queue", "job_id is required",
         "True", "0", "x"],
    ]
    assert got["pandas"] is False  # nothing of the load imports pandas
