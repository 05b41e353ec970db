"""Reading JSONL, CSV and Parquet (plain and gzip) into string chunks; unreadable files."""

from __future__ import annotations

import csv
import gzip
import json
import time

import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.ingest import readers
from gpucast.tasks.ingest.readers import MAX_JSON_DEPTH, FileInfo, FileRejected, read_chunks, too_deep
from tests.conftest import write
from tests.sample_jobs import jsonl, record

SEED_HEADER = (
    "Model type,Parameters million,Batch size,Input dimension,Num layers,Iterations,Precision,"
    "Optimizer,Regularization,Data augmentation,Learning rate,Gpu demand gflops\n"
)
SEED_ROWS = "CNN,11.2,64,224,18,1000,FP32,SGD,Yes,No,0.01,5400\nTransformer,110,32,512,12,5000,FP16,Adam,No,Yes,0.0001,88000\n"


def read_all(path, chunk_rows=100_000) -> tuple[pl.DataFrame, FileInfo]:
    info = FileInfo(path)
    chunks = list(read_chunks(path, info, chunk_rows))
    return (pl.concat(chunks, how="diagonal") if chunks else pl.DataFrame()), info


def test_jsonl_rows_carry_line_numbers_and_raw_text(tmp_path):
    p = write(tmp_path / "a.jsonl", jsonl(record(job_id="a"), "", record(job_id="b")))
    df, info = read_all(p)
    assert info.fmt == "jsonl"
    assert df["_row"].to_list() == [1, 3]  # blank line 2 is not a record
    assert df[c.JOB_ID].to_list() == ["a", "b"]
    assert df["_raw"][0].startswith('{"job_id": "a"')


def test_malformed_json_lines_are_flagged_not_fatal(tmp_path):
    p = write(tmp_path / "a.jsonl", jsonl(record(job_id="a"), '{"job_id": "b", "sta', "[1, 2]", record(job_id="d")))
    df, _ = read_all(p)
    assert df.height == 4
    errors = df["_read_error"].to_list()
    assert errors[0] is None and errors[3] is None
    assert errors[1].startswith("not valid JSON")
    assert errors[2] == "a JSON line must be an object, got list"


def test_nan_literal_in_json_survives_as_text(tmp_path):
    p = write(tmp_path / "a.jsonl", '{"job_id": "a", "learning_rate": NaN}\n')
    df, _ = read_all(p)
    assert df[c.LEARNING_RATE][0] == "nan"


def nested(depth: int, opener: str = "[") -> str:
    closer = {"[": "]", "{": "}"}[opener]
    inner = '{"k": ' if opener == "{" else opener
    return inner * depth + "1" + closer * depth


@pytest.mark.parametrize("opener", ["[", "{"])
def test_a_line_nested_too_deep_is_that_rows_read_error(tmp_path, opener):
    """Issue 48 item 1: a value nested 2,000 levels deep raised RecursionError (json.loads) and stopped the whole
    ingest, 0 rows loaded. It is that row's read error; the rows around it are read; 100 levels still read."""
    deep = json.dumps(record(job_id="b"))[:-1] + ', "extra": ' + nested(2000, opener) + "}"
    edge = json.dumps(record(job_id="c"))[:-1] + ', "extra": ' + nested(MAX_JSON_DEPTH - 1, opener) + "}"
    in_text = json.dumps(record(job_id="d", team="[" * 3000))  # brackets inside a string are not nesting
    df, _ = read_all(write(tmp_path / "a.jsonl", jsonl(record(job_id="a"), deep, edge, in_text)))
    assert df["_row"].to_list() == [1, 2, 3, 4]
    assert df[c.JOB_ID].to_list() == ["a", None, "c", "d"]
    errors = df["_read_error"].to_list()
    assert errors[0] is None and errors[2] is None and errors[3] is None
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in errors[1]


def test_a_sample_of_deep_lines_still_maps_the_keys(tmp_path):
    """The key map reads a sample of lines with the stdlib: deep lines there are skipped, not fatal."""
    lines = ['{"Job ID": "x", "extra": ' + nested(5000) + "}"] * 3 + ['{"Job ID": "y", "submitted_at": "2026-11-01"}']
    df, _ = read_all(write(tmp_path / "a.jsonl", jsonl(*lines)))
    assert df[c.JOB_ID].to_list() == [None, None, None, "y"]


@pytest.mark.parametrize("text, deep", [
    ("[" * 101 + "]" * 101, True),
    ("[" * 100 + "]" * 100, False),
    ("[[]," * 150 + "1" + "]" * 150, True),  # 150 levels reached one by one
    ("[" + "[]," * 500 + "1]", False),  # 500 brackets, 2 levels
    ('["' + "[" * 500 + '"]', False),  # inside a string
    ('["\\", "\"[' + "[" * 500 + '"]', False),  # escaped quotes and backslashes do not end a string
    ('["' + "[" * 500, False),  # an unclosed string runs to the end
    ('{"a": "\\"' + "[" * 101, False),  # an escaped quote does not close it
])
def test_too_deep_counts_levels_not_brackets(text, deep):
    assert (too_deep(text) is not None) == deep


def test_a_line_built_to_be_slow_to_scan_is_read_in_linear_time(tmp_path):
    """Review of issue 48: a line with more than MAX_JSON_DEPTH brackets has its nesting counted before it is parsed
    (the key map's sample and the line's own decoding); that count stripped strings with a pattern that backtracks on
    an unclosed string of escapes, quadratic in the line (40 kB: 6 s; this 120 kB line ~45 s, twice). Milliseconds
    now, and the line is its row's read error alone."""
    slow = '{"job_id": "b", "team": "' + '\\"' * 60_000 + "[" * (MAX_JSON_DEPTH + 1)
    p = write(tmp_path / "a.jsonl", jsonl(record(job_id="a"), slow, record(job_id="c")))
    started = time.monotonic()
    df, _ = read_all(p)
    assert time.monotonic() - started < 5
    assert df[c.JOB_ID].to_list() == ["a", None, "c"]
    assert df["_read_error"][1].startswith("not valid JSON: Unterminated string")


def test_chunking_keeps_line_numbers(tmp_path):
    p = write(tmp_path / "a.jsonl", jsonl(*[record(job_id=str(i)) for i in range(10)]))
    info = FileInfo(p)
    chunks = list(read_chunks(p, info, chunk_rows=3))
    assert [ch.height for ch in chunks] == [3, 3, 3, 1]
    assert pl.concat(chunks)["_row"].to_list() == list(range(1, 11))


def test_key_spellings_are_mapped_and_unknown_keys_reported(tmp_path):
    p = write(tmp_path / "a.jsonl", '{"Job ID": "x", "Model": "CNN", "colour": "red", "submitted_at": "2026-11-01"}\n')
    df, info = read_all(p)
    assert df[c.JOB_ID][0] == "x" and df[c.MODEL_TYPE][0] == "CNN"
    assert info.ignored_columns == {"colour"}


def test_csv_with_bom_crlf_and_ragged_rows(tmp_path):
    text = "\ufeffjob_id,submitted_at,status,model_type\r\na,2026-11-01,PENDING,CNN\r\nb,2026-11-01\r\nc,2026-11-01,PENDING,CNN,extra\r\n"
    df, info = read_all(write(tmp_path / "a.csv", text))
    assert info.fmt == "csv"
    assert df["_row"].to_list() == [2, 3, 4]
    assert df["_read_error"].to_list() == [
        None,
        "row has 2 fields but the header has 4",
        "row has 5 fields but the header has 4",
    ]


def test_header_only_csv_has_no_rows(tmp_path):
    df, _ = read_all(write(tmp_path / "a.csv", "job_id,submitted_at,status,model_type\n"))
    assert df.height == 0


def test_empty_file_has_no_rows(tmp_path):
    assert read_all(write(tmp_path / "a.jsonl", ""))[0].height == 0
    assert read_all(write(tmp_path / "b.csv", ""))[0].height == 0


def test_csv_missing_required_columns_rejects_the_file(tmp_path):
    # contract v4: model_type is optional (missing means `unknown`), so only status is named
    with pytest.raises(FileRejected, match=r"missing required column\(s\) status in the header"):
        read_all(write(tmp_path / "a.csv", "job_id,submitted_at\na,2026-11-01\n"))


def test_csv_extra_columns_are_ignored_and_reported(tmp_path):
    df, info = read_all(write(tmp_path / "a.csv", "job_id,submitted_at,status,model_type,gpu_vendor\na,2026-11-01,PENDING,CNN,nv\n"))
    assert "gpu_vendor" not in df.columns and info.ignored_columns == {"gpu_vendor"}


def test_parquet_typed_columns_come_back_as_text(tmp_path):
    p = tmp_path / "a.parquet"
    pl.DataFrame({"job_id": ["a"], "submitted_at": ["2026-11-01"], "status": ["PENDING"], "model_type": ["CNN"],
                  "batch_size": [32], "learning_rate": [float("nan")]}).write_parquet(p)
    df, info = read_all(p)
    assert info.fmt == "parquet"
    assert df["batch_size"][0] == "32" and df["learning_rate"][0] == "NaN" and df["_row"][0] == 1


def test_parquet_columns_under_an_alias_are_read(tmp_path):
    # `id` and `lr` are aliases: the renamed columns' types were looked up under the new names in the old frame
    p = tmp_path / "a.parquet"
    pl.DataFrame({"id": ["a"], "submitted_at": ["2026-11-01"], "status": ["PENDING"], "model_type": ["CNN"],
                  "lr": [0.001]}).write_parquet(p)
    df, _ = read_all(p)
    assert (df[c.JOB_ID][0], df[c.LEARNING_RATE][0]) == ("a", "0.001")


def test_a_parquet_column_of_lists_rejects_the_file(tmp_path):
    """Issue 48 item 1: a contract column holding lists could not be cast to text: the polars error stopped the
    ingest (exit 1). The file is rejected with one reason naming the column."""
    p = tmp_path / "a.parquet"
    pl.DataFrame({"job_id": ["a"], "submitted_at": ["2026-11-01"], "status": ["PENDING"],
                  "team": [["x", "y"]]}).write_parquet(p)
    with pytest.raises(FileRejected, match=r"column 'team' holds nested values \(list\), not one value per row"):
        read_all(p)


@pytest.mark.parametrize(("column", "array", "said"), [
    ("params_million", "decimal256", r"column 'params_million' is of Parquet type decimal256\(50, 10\)"),
    ("runtime_hours", "duration", r"column 'runtime_hours' is of Parquet type duration\[s\]"),
    ("team", "binary", r"column 'team' is of Parquet type binary"),
    ("job_id", "twice", r"column name\(s\) 'job_id' appear more than once"),
])
def test_a_parquet_column_gpucast_cannot_read_as_a_value_rejects_the_file_naming_it(tmp_path, column, array, said):
    """Review 77 S1-3: a 256-bit decimal (a Rust panic), a duration (a failed cast), binary (invalid UTF-8) and a column
    name given twice each stopped the ingest with an error naming neither file nor column, every night. The file is
    rejected whole with one reason naming the column; 128-bit decimals, dates and dictionaries of text still read."""
    import datetime as dt
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    base = {"job_id": pa.array(["a"]), "submitted_at": pa.array(["2026-11-01"]), "status": pa.array(["PENDING"])}
    made = {"decimal256": lambda: pa.array([decimal.Decimal("110.5")], pa.decimal256(50, 10)),
            "duration": lambda: pa.array([dt.timedelta(hours=3)], pa.duration("s")),
            "binary": lambda: pa.array([b"\xff\xfebin"], pa.binary())}
    p = tmp_path / "a.parquet"
    if array == "twice":
        pq.write_table(pa.table(base).append_column("job_id", pa.array(["b"])), p)
    else:
        pq.write_table(pa.table({**base, column: made[array]()}), p)
    with pytest.raises(FileRejected, match=said):
        read_all(p)
    fine = tmp_path / "b.parquet"
    pq.write_table(pa.table({**base, "params_million": pa.array([decimal.Decimal("110.5")], pa.decimal128(10, 2)),
                             "team": pa.array(["nlp"]).dictionary_encode(),
                             "updated_at": pa.array([dt.date(2026, 11, 2)])}), fine)
    df, _ = read_all(fine)
    assert (df[c.PARAMS_MILLION][0], df[c.TEAM][0], df[c.UPDATED_AT][0]) == ("110.50", "nlp", "2026-11-02")


def test_an_unforeseen_error_names_the_file_it_was_reading(tmp_path, monkeypatch):
    """An error nobody foresaw still stops the run (exit 1, a traceback), and its last lines name the file."""
    def broken(*_):
        raise RuntimeError("a defect")
    monkeypatch.setattr(readers, "_decode_json_lines", broken)
    p = write(tmp_path / "a.jsonl", jsonl(record(job_id="a")))
    with pytest.raises(RuntimeError) as caught:
        read_all(p)
    assert caught.value.__notes__ == [f"gpucast: this happened while reading {p}"]


def test_gzip_jsonl_reads(tmp_path):
    p = tmp_path / "a.jsonl.gz"
    p.write_bytes(gzip.compress(jsonl(record(job_id="a"), record(job_id="b")).encode()))
    df, info = read_all(p)
    assert df.height == 2 and info.compressed


@pytest.mark.parametrize(
    "name, content, reason",
    [
        ("bad.jsonl", b'{"job_id": "a"}\n{"job_id": "\xff\xfe"}\n', "not valid UTF-8 at line 2"),
        ("utf16.csv", "job_id,submitted_at\n".encode("utf-16"), "looks like UTF-16"),
        ("cut.jsonl.gz", gzip.compress(jsonl(*[record(job_id=str(i)) for i in range(500)]).encode())[:-40],
         "gzip stream is truncated"),
        ("notes.txt", b"hello world\n", "unknown format"),
        ("broken.parquet", b"PAR1 this is not parquet", "not a readable Parquet file"),
    ],
)
def test_unreadable_files_are_rejected_with_a_reason(tmp_path, name, content, reason):
    with pytest.raises(FileRejected, match=reason):
        read_all(write(tmp_path / name, content))


def test_seed_table_is_recognised_by_its_header(tmp_path):
    df, info = read_all(write(tmp_path / "seed.csv", SEED_HEADER.upper().replace(" ", "_") + SEED_ROWS))
    assert info.seed_format
    assert df[c.STATUS].to_list() == ["COMPLETED", "COMPLETED"]
    assert df[c.PARAMS_MILLION].to_list() == ["11.2", "110"]
    assert all(i.startswith("seed-") for i in df[c.JOB_ID])


def test_seed_ids_are_stable_and_survive_appended_rows(tmp_path):
    first, _ = read_all(write(tmp_path / "a.csv", SEED_HEADER + SEED_ROWS))
    again, _ = read_all(write(tmp_path / "b.csv", SEED_HEADER + SEED_ROWS))
    longer, _ = read_all(write(tmp_path / "c.csv", SEED_HEADER + SEED_ROWS + SEED_ROWS.splitlines()[0] + "\n"))
    assert first[c.JOB_ID].to_list() == again[c.JOB_ID].to_list()
    assert longer[c.JOB_ID].to_list()[:2] == first[c.JOB_ID].to_list()
    assert longer[c.JOB_ID].n_unique() == 3  # an identical third row gets its own id
    row = SEED_ROWS.splitlines()[0] + "\n"
    chunked, _ = read_all(write(tmp_path / "d.csv", SEED_HEADER + row * 4), chunk_rows=3)
    assert chunked[c.JOB_ID].n_unique() == 4  # review 81: copies in two chunks shared an id (the count was a chunk's)


@pytest.mark.parametrize("block_bytes", [7, 64, 1 << 20])
def test_lines_split_across_blocks_keep_their_numbers(tmp_path, monkeypatch, block_bytes):
    from gpucast.tasks.ingest import readers

    monkeypatch.setattr(readers, "BLOCK_BYTES", block_bytes)
    recs = [record(job_id=f"id-{i}", team="é" * i) for i in range(6)]  # multi-byte characters too
    text = jsonl(*recs).replace("\n", "\r\n", 2)  # mixed line endings: two CRLF, then LF
    p = write(tmp_path / "a.jsonl", "\n" + text + '{"job_id": "last"}')  # leading blank, no final newline
    df, _ = read_all(p)
    assert df["_row"].to_list() == [2, 3, 4, 5, 6, 7, 8]
    assert df[c.JOB_ID].to_list() == [f"id-{i}" for i in range(6)] + ["last"]
    assert df["_read_error"].null_count() == 7


@pytest.mark.parametrize("block_bytes", [16, 333, 1 << 20])
@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_line_longer_than_the_cap_is_cut_and_quarantined_alone(tmp_path, monkeypatch, block_bytes, ending):
    """Review 77 S1-5: a line was held whole, ~11x its size in memory (a 300 kB gzip of one 300 MB line: 3.3 GB). A
    line longer than `MAX_LINE_CHARS` is read up to it, its rest skipped: one row with its reason, the lines after it
    with their own numbers; a line at the cap is read as any other."""
    from gpucast.tasks.ingest import readers

    monkeypatch.setattr(readers, "BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(readers, "MAX_LINE_CHARS", 2000)
    at_cap = json.dumps(record(job_id="at-cap", team="t"))
    at_cap = at_cap[:-1] + " " * (2000 - len(at_cap)) + "}"
    huge = json.dumps(record(job_id="huge", team="x" * 5000))
    p = write(tmp_path / "a.jsonl", ending.join([json.dumps(record(job_id="a")), huge, at_cap, huge,
                                                 json.dumps(record(job_id="b"))]) + ending)
    df, _ = read_all(p)
    assert df["_row"].to_list() == [1, 2, 3, 4, 5]
    errors = df["_read_error"].to_list()
    said = "not read: the line is longer than 2,000 characters: only that much of it was read"
    assert errors[1] == errors[3] == said, errors
    assert errors[0] is None and errors[2] is None and errors[4] is None
    assert df[c.JOB_ID].to_list()[2:5:2] == ["at-cap", "b"]


def test_lone_carriage_returns_end_lines(tmp_path):
    p = write(tmp_path / "a.jsonl", jsonl(record(job_id="a")).replace("\n", "\r") + jsonl(record(job_id="b")))
    df, _ = read_all(p)
    assert df[c.JOB_ID].to_list() == ["a", "b"] and df["_row"].to_list() == [1, 2]


class _Stream:
    """A stand-in for stderr that says whether it is a terminal and keeps what was written."""

    def __init__(self, tty: bool):
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("tty", [True, False])
def test_staging_shows_a_progress_bar_on_a_terminal_only(tmp_path, monkeypatch, tty):
    import sys

    from gpucast.tasks.ingest.staging import stage_file
    from gpucast.tasks.simulate import SimConfig, write_logs

    (path,) = write_logs(tmp_path / "logs", SimConfig(days=1, jobs_per_day=300, seed=2))
    err = _Stream(tty)
    monkeypatch.setattr(sys, "stderr", err)
    stage_file(path, tmp_path / "staging", 0, chunk_rows=100)
    if tty:
        assert path.name in err.text and "rows" in err.text  # the bar, with the file's name and rows read
    else:
        assert err.text == ""  # CI logs stay quiet (the per-chunk progress lines go to the run's logger)


def test_a_contract_name_wins_over_its_alias_in_every_process(tmp_path):
    """Review 77 S2-2: a record holding a contract name and its alias (`job_id` and `id`, `status` and `state`,
    `model_type` and `model`, `learning_rate` and `lr`): which won depended on the process's hash seed, so the same
    file loaded another job id or status from one night to the next. The contract's own name wins, in any process."""
    import json
    import os
    import subprocess
    import sys

    p = tmp_path / "both.jsonl"
    p.write_text(json.dumps({**record(job_id="from-job_id"), "id": "from-id", "status": "COMPLETED", "state": "FAILED",
                             "model": "CNN", "model_type": "Transformer", "lr": 0.5, "learning_rate": 0.001}) + "\n")
    code = ("import sys; from pathlib import Path; from gpucast.tasks.ingest.readers import FileInfo, read_chunks; "
            "p = Path(sys.argv[1]); print([ch.select('job_id', 'status', 'model_type', 'learning_rate').row(0) "
            "for ch in read_chunks(p, FileInfo(p))][0])")
    seen = {subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout.strip() for seed in range(1, 7)}
    assert seen == {"('from-job_id', 'COMPLETED', 'Transformer', '0.001')"}


def test_a_csv_field_longer_than_the_csv_modules_default_is_a_row_not_the_files_loss(tmp_path):
    """Review 77 S2-6: one field over 131,072 characters (the csv module's default limit) rejected the whole file, its
    good rows lost and not counted. The field is read (up to the JSON line cap), and its row is the length cap's."""
    from gpucast.tasks.ingest.staging import stage_file

    rows = [record(job_id=f"r{i}", status="FAILED") for i in range(5)]
    rows[2]["failure_reason"] = "x" * 200_000
    header = list(rows[0])
    text = ",".join(header) + "\n" + "".join(",".join(str(r[h]) if r[h] is not None else "" for h in header) + "\n"
                                             for r in rows)
    p = write(tmp_path / "big.csv", text)
    df, _ = read_all(p)
    assert df.height == 5 and df["_read_error"].null_count() == 5
    result = stage_file(p, tmp_path / "staging", 0)
    assert (result.status, result.rows_read, result.rows_valid, result.rows_rejected) == ("staged", 5, 4, 1)


def test_an_alias_first_written_after_the_sample_lines_is_read(tmp_path):
    """Review 77 S2-1: keys were learned from a chunk's first 200 lines, so a file whose later lines spell `LR` and
    `State` (two exporters concatenated) lost those values unsaid. An alias found by name after the sample is read."""
    import json

    rows = [record(job_id=f"j{i}") for i in range(400)]
    for r in rows[250:300]:
        r["LR"], r["State"] = r.pop("learning_rate"), r.pop("status")
    for r in rows[300:]:
        r["lr"], r["state"], r["Model"] = r.pop("learning_rate"), r.pop("status"), r.pop("model_type")
    rows[350]["failure_reason"] = "partition"  # an alias's word as a whole value: nothing read, nothing listed
    p = write(tmp_path / "two-exporters.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    df, info = read_all(p)
    assert df.height == 400 and all(df[k].null_count() == 0 for k in ("learning_rate", "status", "model_type"))
    assert df["learning_rate"].to_list()[260] == str(rows[260]["LR"])
    assert df["model_type"].to_list()[360] == rows[360]["Model"] and df["job_id"].to_list()[350] == "j350"
    assert info.ignored_columns == set()


def test_a_late_word_that_names_a_column_no_mapping_reads_is_not_listed_as_ignored(tmp_path):
    """Review 78 / 79 S3-1: the late scan finds names anywhere in a line, a value's words too; through a mapping that
    reads `JobState` as `status`, a later value `"state"` was listed as a column the file ignores, which it never had."""
    from gpucast.tasks.sources.mapping import Mapping

    rows = [{"job_id": f"j{i}", "JobState": "COMPLETED", "submitted_at": "2026-01-01T00:00:00Z"} for i in range(300)]
    rows[250]["failure_reason"] = "state"
    p = write(tmp_path / "mapped.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    info = FileInfo(p, mapping=Mapping(path="m.yaml", sha256="x", columns={"JobState": "status"}))
    assert sum(chunk.height for chunk in read_chunks(p, info)) == 300
    assert info.ignored_columns == set()


def test_a_csv_field_past_the_field_cap_rejects_the_file_naming_the_line_and_the_cap(tmp_path):
    """Review 78: the csv module holds a row's fields whole, so the cap on one field is 1 Mi characters, not the JSON
    line cap (16 Mi: 8 such fields from a 125 kB gzip took 518 MB). A longer field rejects the file, said so."""
    from gpucast.tasks.ingest.readers import MAX_CSV_FIELD_CHARS

    head, t = "job_id,status,submitted_at,failure_reason\n", "2026-01-01T00:00:00Z"
    p = write(tmp_path / "wide.csv", f"{head}a,FAILED,{t},ok\nb,FAILED,{t}," + "x" * (MAX_CSV_FIELD_CHARS + 1) + "\n")
    with pytest.raises(FileRejected, match=r"a field longer than 1,048,576 characters near line 3"):
        read_all(p)
    csv.field_size_limit(MAX_CSV_FIELD_CHARS * 8)  # review 79 S3-8: a library raised the process's limit
    with pytest.raises(FileRejected, match=r"a field longer than 1,048,576 characters near line 3"):
        read_all(p)
    assert csv.field_size_limit() == MAX_CSV_FIELD_CHARS  # set back as the file was read
    wide_header = write(tmp_path / "header.csv", "job_id,status,submitted_at," + "x" * (MAX_CSV_FIELD_CHARS + 1) + "\n")
    with pytest.raises(FileRejected, match=r"near line 1:"):  # (review 79 S3-9: it said line 2)
        read_all(wide_header)


def test_csv_rows_are_chunked_by_what_they_hold(tmp_path, monkeypatch):
    """Review 79 S1-3, review 80: rows were held `chunk_rows` at a time whatever their size, every column of them, so
    rows of ~1 Mi fields (800 rows from a 0.8 MB gzip: 1.8 GB) or of 2,000 empty columns (40,000 rows from 0.24 MB:
    0.8 GB) filled memory. A row is held as its contract columns, and a chunk ends at `CSV_CHUNK_BYTES`, each value
    counted as its characters (x4 in a record not ASCII) and `CSV_VALUE_BYTES`; every row is read once, numbered by its line."""
    monkeypatch.setattr(readers, "CSV_CHUNK_BYTES", 10_000, raising=False)
    head, t = "job_id,status,submitted_at,failure_reason", "2026-01-01T00:00:00Z"
    p = write(tmp_path / "long.csv", head + "\n" + "".join(f"j{i},FAILED,{t},{'x' * 3_000}\n" for i in range(10)))
    chunks = list(read_chunks(p, FileInfo(p), 100_000))
    assert [ch.height for ch in chunks] == [4, 4, 2]  # 3 rows take 3 x (3,028 + 4 x 57) = 9,768 bytes
    assert pl.concat(chunks)["_row"].to_list() == list(range(2, 12))
    ignored = ",".join(f"extra{k}" for k in range(2_000))
    p = write(tmp_path / "wide.csv", f"{head},{ignored}\n" + "".join(f"j{i},FAILED,{t},oom{',' * 2_000}\n"
                                                                      for i in range(100)))
    chunks = list(read_chunks(p, FileInfo(p), 100_000))
    assert [ch.height for ch in chunks] == [39, 39, 22]  # 31 characters + 4 x 57 a row, no empty column kept
    assert pl.concat(chunks)["job_id"].to_list() == [f"j{i}" for i in range(100)]

def test_a_csv_record_past_the_line_cap_rejects_the_file_before_it_is_held(tmp_path, monkeypatch):
    """Review 81 S1-4: the csv module builds a record's fields whole before any is dropped, so one record of 300 ignored
    1 Mi fields (0.31 MB of gzip) took 0.74 GB; a record past MAX_LINE_CHARS, quoted newlines and all, rejects the
    file naming the line it began on, before the rest of it is read."""
    monkeypatch.setattr(readers, "MAX_LINE_CHARS", 5_000)
    head, t = "job_id,status,submitted_at,extra1,extra2", "2026-01-01T00:00:00Z"
    p = write(tmp_path / "wide.csv", f"{head}\na,FAILED,{t},x,y\nb,FAILED,{t},\"{'z' * 3_000}\n{'z' * 3_000}\",y\n")
    with pytest.raises(FileRejected, match=r"a record longer than 5,000 characters from line 3"):
        read_all(p)
    assert read_all(write(tmp_path / "ok.csv", f"{head}\na,FAILED,{t},{'z' * 2_000},{'y' * 2_000}\n"))[0].height == 1


def test_csv_chunks_count_the_bytes_text_takes_not_its_characters(tmp_path, monkeypatch):
    """Review 81 S2-1: CPython holds text outside Latin-1 in 2 or 4 bytes a character, so a budget of characters let
    emoji rows take ~4x what it meant (100 rows of ~1 Mi emoji: 0.92 GB, ASCII 0.27 GB)."""
    monkeypatch.setattr(readers, "CSV_CHUNK_BYTES", 10_000)
    head, t = "job_id,status,submitted_at,failure_reason", "2026-01-01T00:00:00Z"
    p = write(tmp_path / "emoji.csv", head + "\n" + "".join(f"j{i},FAILED,{t},{'😀' * 600}\n" for i in range(10)))
    chunks = list(read_chunks(p, FileInfo(p), 100_000))
    assert [ch.height for ch in chunks] == [4, 4, 2]  # 628 characters x 4 + 4 x 57 = 2,740 bytes a row
