"""Read job-log files (JSON Lines, CSV, Parquet; optionally gzip-compressed) in bounded chunks.

Each chunk is a Polars frame of *strings* with contract column names, plus:

* `_row`: where the record is in its file as a person counts (JSONL: line number; CSV: line
  number of the row's first line, the header being line 1; Parquet: 1-based row number);
* `_raw`: the record's original text (JSONL lines only; other formats rebuild it on rejection);
* `_read_error`: why the record could not be read (invalid JSON, a ragged CSV row), else null. A
  Parquet file an importer staged (flows/imports.py) may carry it as its column `SOURCE_ERROR`: the
  importer's reason a record cannot be used (a negative MLflow memory series), which rejects it.

A file that cannot be read at all raises `FileRejected` with a reason a person can act on.
With a mapping file (`FileInfo.mapping`, tasks/sources/mapping.py) its columns are named through
the mapping, and each chunk is converted by it (`read_chunks`) before it is handed on.
Typing and validation happen later (`normalize.py`, the expectation suites).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import io
import json
import operator
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from gpucast.expectations import contract as c
from gpucast.tasks.ingest import DEFAULT_CHUNK_ROWS

MAX_RAW_CHARS = 10_000  # a rejected row's raw_record: its text cut here, bare (it is the record as read)
# one reason of a rejected row (`reasons`, and so `reason_text`): a reason quotes the value it refuses, which can be
# any size (a 100 kB MLflow param gave a 100,238-character reason); cut here and marked, with the length it had
MAX_REASON_CHARS = 1_000
CUT_MARK = " …[cut: {} characters]"
SUPPORTED_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".parquet", ".pq")
# levels of `[` and `{` one JSON line may nest: a job record needs two or three. Python's json module recurses once per
# level (2,000 levels raised RecursionError and stopped the whole ingest) and Polars' reader refuses ~1,000; a line
# nested deeper is that row's read error, the same on every stack depth. The Slurm import's limit for a JSON Comment too
MAX_JSON_DEPTH = 100
_SAMPLE_LINES = 200


class FileRejected(Exception):
    """The whole file cannot be read; `reason` says why, in words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ColumnMapping(Protocol):
    """What reading needs of a mapping file (`tasks/sources/mapping.py` `Mapping` is the one there is). A protocol,
    so the mapping, which uses this module's readers, is not imported back from here (no import cycle)."""

    columns: dict[str, str]  # source column, as written -> contract field
    constants: dict[str, str]  # field -> the value of every row

    def field_for(self, column: str) -> str: ...

    def apply(self, chunk: pl.DataFrame) -> pl.DataFrame: ...


@dataclass
class FileInfo:
    """What reading a file learned about it, for the run report."""

    path: Path
    fmt: str = ""
    compressed: bool = False
    seed_format: bool = False
    ignored_columns: set[str] = field(default_factory=set)
    mapping: ColumnMapping | None = None  # `--mapping FILE` (tasks/sources/mapping.py): names columns, converts values

    def name_of(self, column: str) -> str:
        """A source column's contract name (not a contract name: ignored)."""
        return self.mapping.field_for(column) if self.mapping else normalise_name(column)

    def supplied(self) -> set[str]:
        """Fields the mapping sets for every row, so a file need not have their columns."""
        return set(self.mapping.constants) if self.mapping else set()


def header_key(name: str) -> str:
    """`" Parameters  Million"` -> `parameters_million`."""
    return re.sub(r"[^0-9a-z]+", "_", name.strip().lstrip("\ufeff").lower()).strip("_")


def normalise_name(name: str) -> str:
    """A header or key as a contract column name, through the contract's aliases."""
    key = header_key(name)
    return c.COLUMN_ALIASES.get(key, key)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sniff_format(path: Path) -> tuple[str, bool]:
    """Return (format, gzip-compressed) from the name, else from the first bytes."""
    name = path.name.lower()
    compressed = name.endswith(".gz")
    if compressed:
        name = name[:-3]
    for suffix, fmt in ((".jsonl", "jsonl"), (".ndjson", "jsonl"), (".json", "jsonl"), (".csv", "csv"),
                        (".parquet", "parquet"), (".pq", "parquet")):
        if name.endswith(suffix):
            return fmt, compressed
    with open(path, "rb") as f:
        head = f.read(4)
    if head[:2] == b"\x1f\x8b":
        raise FileRejected("gzip-compressed file without a known inner extension (.jsonl.gz, .csv.gz)")
    if head == b"PAR1":
        return "parquet", False
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{":
        return "jsonl", False
    raise FileRejected(
        f"unknown format: expected a name ending in {', '.join(SUPPORTED_SUFFIXES)} (optionally .gz)"
    )


def _open_text(path: Path, compressed: bool) -> io.TextIOWrapper:
    raw = gzip.open(path, "rb") if compressed else open(path, "rb")  # noqa: SIM115
    # utf-8-sig drops a leading BOM; newline=None turns \r\n and \r into \n (mixed line endings).
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline=None)


def _first_bad_utf8(path: Path, compressed: bool) -> tuple[int, int]:
    """(line, byte offset) of the first byte that is not UTF-8: the decoder reads ahead, so find it again."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line, offset = 1, 0
    with gzip.open(path, "rb") if compressed else open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                start = max(exc.start - (len(exc.object) - len(block)), 0)
                return line + block[:start].count(b"\n"), offset + start
            line += block.count(b"\n")
            offset += len(block)
    return line, offset


def _decode_error(exc: Exception, line: int, path: Path, compressed: bool) -> FileRejected:
    if isinstance(exc, UnicodeDecodeError):
        if exc.object[:2] in (b"\xff\xfe", b"\xfe\xff"):
            return FileRejected("not valid UTF-8: it looks like UTF-16; re-export the file as UTF-8")
        bad_line, offset = _first_bad_utf8(path, compressed)
        return FileRejected(f"not valid UTF-8 at line {bad_line} (byte {offset}): {exc.reason}; re-export as UTF-8")
    if isinstance(exc, EOFError | gzip.BadGzipFile):
        return FileRejected(f"gzip stream is truncated or corrupt near line {line}: {exc}")
    return FileRejected(f"cannot read the file near line {line}: {exc}")


def read_chunks(path: Path, info: FileInfo | None = None, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[pl.DataFrame]:
    """Yield string frames of at most `chunk_rows` records; raise `FileRejected` for an unreadable file."""
    info = info or FileInfo(path)
    info.fmt, info.compressed = sniff_format(path)
    if info.fmt == "jsonl":
        chunks = _read_jsonl(path, info, chunk_rows)
    elif info.fmt == "csv":
        chunks = _read_csv(path, info, chunk_rows)
    else:
        chunks = _read_parquet(path, info, chunk_rows)
    try:
        yield from (info.mapping.apply(chunk) for chunk in chunks) if info.mapping else chunks
    except FileRejected:
        raise
    except Exception as exc:  # a case nobody foresaw (exit 1, a traceback): its last line names the file
        exc.add_note(f"gpucast: this happened while reading {path}")
        raise


# JSON Lines -------------------------------------------------------------------------------------

BLOCK_BYTES = 8 << 20
# The longest JSON line read: a longer one is cut here and quarantined alone, the rest of it skipped unread. A job log's
# line is a few kB; the reader held a line whole (~11x its size in memory), so a 300 kB gzip of one 300 MB line took
# 3.3 GB and a 1 MB one would have been killed for memory, every night (review 77 S1-5; the Slurm reader's cap, larger:
# a 5 MB line stays a row whose long values the length caps then name).
MAX_LINE_CHARS = 16 << 20
# A CSV field up to this many characters is read, for the length caps to quarantine its row alone: at the csv module's
# default (131,072) one long `failure_reason` rejected the whole file, its good rows lost (review 77 S2-6). A longer
# field still rejects the file, naming its line. Not MAX_LINE_CHARS: the csv module holds a row's fields whole, so a row
# may take width x this (review 78: at 16 Mi, 8 wide fields from a 125 kB gzip took 518 MB). The csv module's limit is
# the process's: set exactly here (the mapping reader's CSV reads the same) and again as each job-log file is opened,
# so a library that raised it cannot lift the cap (review 79 S3-8).
MAX_CSV_FIELD_CHARS = 1 << 20
csv.field_size_limit(MAX_CSV_FIELD_CHARS)
# A CSV row is held as the contract's columns only (the rest dropped as it is read) and a chunk ends at `chunk_rows` rows
# or once its values take about this many bytes, whichever comes first (review 79 S1-3: rows of ~1 Mi fields were held
# 100,000 at a time, 800 rows from a 0.8 MB gzip peaked at 1.8 GB; review 80: so were 2,000 empty columns a row). A
# value is counted as CPython holds it: `CSV_VALUE_BYTES` (its header and the tuple's pointer) and a byte a character,
# or 4 where the record is not ASCII (review 81: a count of characters let emoji take 4x; `sys.getsizeof` itself cost
# ~3 us a row). A job log's row of ~25 short values takes ~1.7 kB, so ~40,000 such rows a chunk.
CSV_CHUNK_BYTES = 64 << 20
CSV_VALUE_BYTES = 57


def _line_blocks(path: Path, compressed: bool) -> Iterator[tuple[int, list[str]]]:
    """Yield (number of the first line, complete lines) per block of the file, decoding strictly.

    Reading big blocks and splitting them is several times faster than iterating a text file;
    a line cut by a block boundary is carried into the next block. \r\n and lone \r end lines.
    """
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    pending, first_line, skipping = "", 1, False
    with gzip.open(path, "rb") if compressed else open(path, "rb") as raw:
        while True:
            block = raw.read(BLOCK_BYTES)
            text = pending + decoder.decode(block, final=not block)
            if "\r" in text:
                held = text.endswith("\r") and bool(block)  # its \n may open the next block
                text = (text[:-1] if held else text).replace("\r\n", "\n").replace("\r", "\n") + ("\r" if held else "")
            lines = text.split("\n")
            pending = lines.pop() if block else ""
            if skipping:  # inside a line longer than MAX_LINE_CHARS, yielded cut already: its rest is dropped
                if not lines:
                    pending = ""
                    continue
                lines.pop(0)
                skipping = False
            if not block and pending == "" and lines and lines[-1] == "":
                lines.pop()
            if len(text) > MAX_LINE_CHARS:  # (rare: the cap is above a block) a whole line within it may pass it too
                lines = [line[:MAX_LINE_CHARS + 1] for line in lines]
            if lines:
                yield first_line, lines
                first_line += len(lines)
            if len(pending) > MAX_LINE_CHARS:  # one character more than the cap: `loads_bounded` names it
                yield first_line, [pending[:MAX_LINE_CHARS + 1]]
                first_line, pending, skipping = first_line + 1, "", bool(block)
            if not block:
                if pending:
                    yield first_line, [pending]
                return


def _read_jsonl(path: Path, info: FileInfo, chunk_rows: int) -> Iterator[pl.DataFrame]:
    first_line = 1
    buffer: list[pl.DataFrame] = []
    buffered = 0
    try:
        for first_line, lines in _line_blocks(path, info.compressed):  # noqa: B007
            block = pl.DataFrame({"line": lines}, schema={"line": pl.String}).with_row_index("_row", offset=first_line)
            block = block.filter(pl.col("line").str.strip_chars() != "")  # blank lines are not records
            buffer.append(block)
            buffered += block.height
            while buffered >= chunk_rows:
                frame = pl.concat(buffer)
                yield _decode_json_lines(frame.head(chunk_rows), info)
                rest = frame.slice(chunk_rows)
                buffer, buffered = [rest], rest.height
    except (UnicodeDecodeError, EOFError, OSError) as exc:
        raise _decode_error(exc, first_line, path, info.compressed) from exc
    if buffered:
        yield _decode_json_lines(pl.concat(buffer), info)


# a JSON string (its closing quote optional: an unclosed one runs to the end of the text) or a bracket; the string's
# loop is possessive, so each character is read once whatever the text holds (a pattern that backtracks over an
# unclosed string of escapes, `{"a":"\"\"...`, is quadratic: 40 kB took 6 s, 1 MB about an hour)
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+"?|[\[\]{}]', re.DOTALL)


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep JSON `text` nests (`[` and `{` outside strings), counted without parsing it, in time linear in its
    length (it is a user's text); 0 when it has at most `limit` opening brackets, so cannot nest deeper (the usual
    record: two counts). Also the Slurm import's, for a JSON `Comment` (tasks/sources/slurm.py)."""
    if text.count("[") + text.count("{") <= limit:
        return 0
    depth = deepest = 0
    for m in _JSON_TOKEN.finditer(text):  # left to right, each character once
        if m[0] in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif m[0] in ("]", "}"):
            depth -= 1
    return deepest


def too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Why JSON `text` may not be parsed (it nests deeper than `limit` levels), else None."""
    if json_depth(text, limit) > limit:
        return f"a value is nested deeper than {limit} levels of brackets; write it flatter"
    return None


def loads_bounded(text: str) -> object:
    """`json.loads`, for text a user wrote: `ValueError` (never `RecursionError`) for text nested too deep, or a line
    longer than `MAX_LINE_CHARS` (cut there by `_line_blocks`)."""
    if len(text) > MAX_LINE_CHARS:
        raise ValueError(f"the line is longer than {MAX_LINE_CHARS:,} characters: only that much of it was read")
    if reason := too_deep(text):
        raise ValueError(reason)
    try:
        return json.loads(text)
    except RecursionError:  # not reached below MAX_JSON_DEPTH; kept so no stack depth can make it escape
        raise ValueError(f"a value is nested deeper than {MAX_JSON_DEPTH} levels of brackets") from None


def _key_map(lines: list[str], info: FileInfo, late: Iterable[str] = ()) -> dict[str, str]:
    """Map the keys seen in a sample of lines, the `late` ones (`_late_aliases`) and every contract name to contract
    names, in a fixed order: the contract's own names first, then a mapping file's, then the others as they first
    appear, so where a record holds a name and its alias (`job_id` and `id`) the contract's name wins, every run
    (review 77 S2-2: the order was a set's, so which won changed with the process's hash seed)."""
    seen: dict[str, None] = {}
    for line in lines:
        try:
            obj = loads_bounded(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            seen.update(dict.fromkeys(obj))
    mapping = {}
    for k in dict.fromkeys([*c.COLUMNS, *(info.mapping.columns if info.mapping else ()), *seen, *late]):
        name = info.name_of(k)
        if name in c.COLUMNS:
            mapping.setdefault(k, name)
        elif k in seen:  # (a late match is a name found in the text, maybe in a value: decoded where it is a key, never
            info.ignored_columns.add(k)  # listed as a column the file holds)
    return mapping


# A contract name is decoded whatever the sample saw; an alias (`lr`, `state`, `id` ...) only where the sample holds it,
# or where it is found by name, quoted and in any letter case, in a line after the sample (review 77 S2-1: a file whose
# later lines spelled `lr` for `learning_rate`, two exporters concatenated, lost those values unsaid). Measured on
# 200,000-line blocks (median of 5, run twice): +1.0 CPU-s per million lines where no alias follows the sample, +1.9
# where one does (review 78); decoding every alias's column always cost ~1.3 s. Not covered, decided (review 78): the
# contract's own names in another case (`Status`, `Learning_Rate`) or another spelling (`"Learning Rate"`) first written
# after the sample are not read, nor listed as ignored. Searching those too (323 quoted spellings, case-sensitive: a
# case-insensitive search matches every line's own names) measured +1-2 CPU-s per million lines more on every file.
_ALIAS_KEYS = [f'"{alias}"' for alias in c.COLUMN_ALIASES]


def _late_aliases(rest: pl.Series) -> list[str]:
    """The aliases written as keys (any letter case) in `rest`, the lines after the sample, in a fixed order."""
    if rest.is_empty() or not rest.str.contains_any(_ALIAS_KEYS, ascii_case_insensitive=True).any():
        return []
    found = rest.str.extract_many(_ALIAS_KEYS, ascii_case_insensitive=True).explode().drop_nulls().unique()
    return sorted(k[1:-1] for k in found)


# The NaN/Infinity pattern runs only on lines that contain either word (a plain substring test is
# 15x cheaper than the regular expression on every line).
STRICT_JSON_OBJECT = r"""
SELECT coalesce(json_valid(line) AND starts_with(ltrim(line), '{')
                AND CASE WHEN contains(line, 'NaN') OR contains(line, 'Infinity')
                         THEN NOT regexp_matches(line, '[:,\[]\s*[-+]?(NaN|Infinity)') ELSE true END, false) AS ok
FROM frame
"""


_local = threading.local()


def _json_objects_mask(lines: pl.Series) -> pl.Series:
    """True where a line is a strict JSON object (DuckDB's C++ validator, which lets NaN pass: caught here) with at
    most MAX_JSON_DEPTH opening brackets (a deeper line may be nested too deep: `_python_decode` looks, ~15% of
    this mask's time). One in-memory DuckDB per thread, kept: opening one cost ~20 ms, per file of a folder of
    one-row files."""
    con = getattr(_local, "duckdb", None)
    if con is None:
        con = _local.duckdb = duckdb.connect()
    con.register("frame", pl.DataFrame({"line": lines}))
    try:
        valid = con.sql(STRICT_JSON_OBJECT).pl()["ok"]
    finally:
        con.unregister("frame")
    return valid & (lines.str.count_matches(r"[\[{]") <= MAX_JSON_DEPTH)


def _python_decode(line: str) -> tuple[str | None, str | None]:
    """(re-encoded object, None) or (None, error) for a line the fast path refused."""
    try:
        obj = loads_bounded(line)  # also accepts NaN and Infinity, which the rules then name
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc.msg} at character {exc.pos}"
    except ValueError as exc:  # nested too deep
        return None, f"not read: {exc}"
    if not isinstance(obj, dict):
        return None, f"a JSON line must be an object, got {type(obj).__name__}"
    return json.dumps({k: str(v) if isinstance(v, float) else v for k, v in obj.items()}), None


def _decode_with(series: pl.Series, ok: pl.Series, schema: dict) -> tuple[pl.DataFrame, pl.Series]:
    """Decode every line with Polars' NDJSON reader; lines not `ok` are first repaired (NaN) or
    replaced by `{}` and given their error."""
    decodable = series.clone()
    errors = pl.Series("_read_error", [None] * len(series), dtype=pl.String)
    if not ok.all():
        repaired = [(i, *_python_decode(series[i])) for i in ok.not_().arg_true().to_list()]
        idx = [i for i, _, _ in repaired]
        decodable.scatter(idx, pl.Series([line or "{}" for _, line, _ in repaired], dtype=pl.String))
        errors.scatter(idx, pl.Series([err for _, _, err in repaired], dtype=pl.String))
    # The lines back to NDJSON bytes without a Python string per line (the CSV writer, no quoting,
    # one column: each value as it is, one per line): 25% faster than "\n".join and far less memory.
    payload = io.BytesIO()
    pl.DataFrame({"line": decodable}).write_csv(payload, include_header=False, quote_style="never")
    payload.seek(0)
    frame = pl.read_ndjson(payload, schema=schema)
    if frame.height != len(series):
        raise pl.exceptions.ComputeError("line count changed while decoding")
    return frame, errors


def _capped(lines: pl.Series) -> pl.Series:
    """The lines cut to MAX_RAW_CHARS; the same Series (no copy of the chunk's text) when none is longer."""
    if (lines.str.len_bytes().max() or 0) <= MAX_RAW_CHARS:
        return lines
    return lines.str.slice(0, MAX_RAW_CHARS)


def _decode_json_lines(block: pl.DataFrame, info: FileInfo) -> pl.DataFrame:
    """Decode valid lines with Polars; only the others go through the stdlib, to name the problem."""
    series = block["line"]
    keys = _key_map(series.head(_SAMPLE_LINES).to_list(), info, _late_aliases(series.slice(_SAMPLE_LINES)))
    schema = {k: pl.String for k in keys}
    ok = _json_objects_mask(series)
    try:
        frame, errors = _decode_with(series, ok, schema)
    except pl.exceptions.ComputeError:  # the fast check let a bad line through: check each line
        frame, errors = _decode_with(series, pl.Series([False] * len(series)), schema)
    # Several source keys may map to one contract name (e.g. `model` and `model_type`): the first in `keys`' order wins
    # (the contract's own name, `_key_map`).
    cols: dict[str, pl.Expr] = {}
    for k, name in keys.items():
        cols[name] = pl.coalesce(cols[name], pl.col(k)) if name in cols else pl.col(k)
    return frame.select(
        block["_row"].cast(pl.Int64),
        _capped(series).alias("_raw"),
        errors,
        *[e.alias(n) for n, e in cols.items()],
    )


# CSV --------------------------------------------------------------------------------------------

def _csv_columns(header: list[str], info: FileInfo) -> list[str | None]:
    keys = [header_key(h) for h in header]
    if info.mapping is None and c.JOB_ID not in keys and set(c.SEED_COLUMNS) <= set(keys):
        info.seed_format = True
        names = [c.SEED_COLUMNS.get(k, k) for k in keys]
    else:
        names = [info.name_of(h) for h in header]
    out: list[str | None] = []
    for raw, name in zip(header, names, strict=True):
        if name in c.COLUMNS and name not in out:
            out.append(name)
        else:
            out.append(None)
            info.ignored_columns.add(raw)
    missing = [r for r in c.REQUIRED if r not in out and r not in info.supplied()]
    if info.seed_format:
        missing = []
    if missing:
        raise FileRejected(
            f"missing required column(s) {', '.join(missing)} in the header; "
            f"found {', '.join(h for h in header) or 'nothing'}"
        )
    return out


def _read_csv(path: Path, info: FileInfo, chunk_rows: int) -> Iterator[pl.DataFrame]:
    line_no = 0  # the last line read whole (an error is met on the line after it)
    csv.field_size_limit(MAX_CSV_FIELD_CHARS)
    record = [0, True]  # the record being read (`_record_lines`): its characters, all ASCII; reset as each is done
    try:
        with _open_text(path, info.compressed) as f:
            reader = csv.reader(_record_lines(f, record))
            try:
                header = next(reader)
            except StopIteration:
                return  # an empty file: nothing to read
            line_no, record[:] = reader.line_num, (0, True)
            columns = _csv_columns(header, info)
            width = len(header)
            keep = [(i, n) for i, n in enumerate(columns) if n]
            kept = operator.itemgetter(*[i for i, _ in keep]) if len(keep) > 1 else None
            row_bytes = CSV_VALUE_BYTES * len(keep)
            seen: Counter[str] = Counter()  # a seed-format row's copies so far (`_seed_ids`)
            rows: list[tuple[str | None, ...]] = []
            numbers: list[int] = []
            errors: list[str | None] = []
            raws: list[str | None] = []
            held = 0  # bytes in `rows` and `raws`, about
            for fields in reader:
                start, line_no, ascii_only = line_no + 1, reader.line_num, record[1]
                record[:] = (0, True)
                if not fields or not any(x.strip() for x in fields):
                    continue
                if len(fields) == width and kept is not None:
                    values, raw, error = kept(fields), None, None
                else:  # one kept column, or the wrong number of fields: then the row as read is its raw record
                    values = tuple(fields[i] if i < len(fields) else None for i, _ in keep)
                    error = None if len(fields) == width else f"row has {len(fields)} fields but the header has {width}"
                    # (each field and their number cut first: the same text, without a copy of a long row)
                    raw = json.dumps([x[:MAX_RAW_CHARS] for x in fields[:MAX_RAW_CHARS]])[:MAX_RAW_CHARS] if error else None
                    held += len(raw or "")
                held += row_bytes + sum(map(len, filter(None, values))) * (1 if ascii_only else 4)
                rows.append(values)
                numbers.append(start)
                errors.append(error)
                raws.append(raw)
                if len(rows) >= chunk_rows or held >= CSV_CHUNK_BYTES:
                    yield _csv_frame(rows, numbers, errors, raws, keep, info, seen)
                    rows, numbers, errors, raws, held = [], [], [], [], 0
            if rows:
                yield _csv_frame(rows, numbers, errors, raws, keep, info, seen)
    except _RecordTooLong as exc:
        raise FileRejected(f"a record longer than {MAX_LINE_CHARS:,} characters from line {line_no + 1}: shorten or "
                           "leave out its long columns at the exporter, or close its quotes") from exc
    except csv.Error as exc:
        if "field larger than field limit" in str(exc):
            raise FileRejected(f"a field longer than {MAX_CSV_FIELD_CHARS:,} characters near line {line_no + 1}: "
                               "shorten or leave out that column at the exporter") from exc
        raise _decode_error(exc, line_no + 1, path, info.compressed) from exc
    except (UnicodeDecodeError, EOFError, OSError) as exc:
        raise _decode_error(exc, line_no + 1, path, info.compressed) from exc


class _RecordTooLong(Exception):
    """A CSV record past MAX_LINE_CHARS (`_record_lines`)."""


def _record_lines(f: io.TextIOBase, record: list) -> Iterator[str]:
    """The lines of `f`, adding each one's characters to `record[0]` and noting in `record[1]` whether all were ASCII
    (the caller resets both after each record): past MAX_LINE_CHARS, `_RecordTooLong`, before the csv module holds
    more of the record. A line is read at most MAX_LINE_CHARS + 1 characters at a time, so one long line is not held
    whole either. One CSV record (a quoted field's newlines included) is so capped as a JSON line is: the csv module
    builds a record's fields whole before any is dropped, so one record of 300 ignored fields of 1 Mi (a 0.31 MB
    gzip) took 0.74 GB (review 81 S1-4)."""
    limit = MAX_LINE_CHARS + 1
    while line := f.readline(limit):
        record[0] += len(line)
        if record[0] > MAX_LINE_CHARS:
            raise _RecordTooLong
        if not line.isascii():
            record[1] = False
        yield line


def _csv_frame(rows, numbers, errors, raws, keep, info: FileInfo, seen: Counter[str]) -> pl.DataFrame:
    """A chunk's rows (each its contract columns' values, in `keep`'s order) as a frame of strings."""
    names = [n for _, n in keep]
    frame = pl.DataFrame(dict(zip(names, zip(*rows, strict=True), strict=True)) if names else {},
                         schema={n: pl.String for n in names})
    frame = frame.with_columns(
        pl.Series("_row", numbers, dtype=pl.Int64),
        pl.Series("_raw", raws, dtype=pl.String),
        pl.Series("_read_error", errors, dtype=pl.String),
    )
    if info.seed_format:
        frame = _seed_ids(frame, seen)
    return frame


def _seed_ids(frame: pl.DataFrame, seen: Counter[str]) -> pl.DataFrame:
    """Seed rows have no id: derive a stable one from the row's values and its repeat count in the file (`seen`: the
    copies of each in the file's earlier chunks; review 81: counted per chunk, copies in two chunks shared an id).

    The same file (or the same rows in a longer file) always gives the same ids.
    """
    values = [n for n in c.SEED_COLUMNS.values() if n in frame.columns]
    text = pl.concat_str([pl.col(v).fill_null("") for v in values], separator="\x1f")
    digests = [hashlib.sha1(t.encode()).hexdigest()[:16] for t in frame.select(text).to_series()]
    ids = []
    for d in digests:
        ids.append(f"seed-{d}-{seen[d]}")
        seen[d] += 1
    return frame.with_columns(
        pl.Series(c.JOB_ID, ids, dtype=pl.String),
        pl.lit(c.SEED_SUBMITTED_AT).alias(c.SUBMITTED_AT),
        pl.lit("COMPLETED").alias(c.STATUS),
        pl.lit(c.SEED_QUEUE).alias(c.QUEUE),
    )


# Parquet ----------------------------------------------------------------------------------------

SOURCE_ERROR = "_source_error"  # a staged file's column: why the importer could not use the record (null: it could)


def _read_parquet(path: Path, info: FileInfo, chunk_rows: int) -> Iterator[pl.DataFrame]:
    if info.compressed:
        raise FileRejected("gzip-compressed Parquet is not supported: Parquet compresses itself")
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise FileRejected(f"not a readable Parquet file: {exc}") from exc
    errors = SOURCE_ERROR in pf.schema_arrow.names
    twice = sorted({n for n in pf.schema_arrow.names if pf.schema_arrow.names.count(n) > 1})
    if twice:  # (which of the two to read cannot be told; reading either raised: review 77 S1-3)
        raise FileRejected(f"column name(s) {', '.join(map(repr, twice))} appear more than once; give each column one name")
    names = {n: info.name_of(n) for n in pf.schema_arrow.names if n != SOURCE_ERROR}
    kept = {}
    for src, name in names.items():
        if name in c.COLUMNS and name not in kept.values():
            kept[src] = name
        else:
            info.ignored_columns.add(src)
    missing = [r for r in c.REQUIRED if r not in kept.values() and r not in info.supplied()]
    if missing:
        raise FileRejected(f"missing required column(s) {', '.join(missing)}; found {', '.join(names) or 'none'}")
    for src in kept:  # a list or a struct cannot be read as one value (casting it to text raised, stopping the ingest)
        if pa.types.is_nested(kind := pf.schema_arrow.field(src).type):
            shape = str(kind).split("<")[0].removeprefix("large_")  # list, struct, map, fixed_size_list
            raise FileRejected(f"column {src!r} holds nested values ({shape}), not one value per row; write it as "
                               "text or a number")
        if not _readable(kind):
            raise FileRejected(f"column {src!r} is of Parquet type {kind}, which gpucast does not read as a value; "
                               "write it as text, a number, a yes/no or a timestamp")
    start = 1
    try:
        for batch in pf.iter_batches(batch_size=chunk_rows, columns=list(kept) + ([SOURCE_ERROR] if errors else [])):
            frame = pl.from_arrow(batch)
            assert isinstance(frame, pl.DataFrame)
            error = frame[SOURCE_ERROR].cast(pl.String) if errors else pl.lit(None, dtype=pl.String)
            frame = frame.drop(SOURCE_ERROR, strict=False).rename(kept)  # the types of the renamed frame (an alias such as `id` is renamed)
            frame = frame.with_columns([_as_string(frame.schema[n], n) for n in kept.values()])
            yield frame.with_columns(
                pl.int_range(start, start + frame.height, dtype=pl.Int64).alias("_row"),
                pl.lit(None, dtype=pl.String).alias("_raw"),
                error.alias("_read_error"),
            )
            start += frame.height
    except (pa.ArrowException, OSError) as exc:
        raise FileRejected(f"Parquet file is corrupt near row {start}: {exc}") from exc
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:  # (a Rust panic is a BaseException)
        raise FileRejected(f"Parquet values near row {start} could not be read: {exc}") from exc


def _readable(kind: pa.DataType) -> bool:
    """A Parquet column's type whose values read as one contract value each: text (a dictionary of text included),
    numbers, yes/no, dates and timestamps, or all null. Not binary, durations, times of day, intervals or 256-bit
    decimals: each stopped the ingest (review 77 S1-3: a Rust panic, a failed cast, invalid UTF-8), the file now rejected
    whole, naming the column."""
    if pa.types.is_dictionary(kind):
        return _readable(kind.value_type)
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind)
            or pa.types.is_floating(kind) or pa.types.is_boolean(kind) or pa.types.is_timestamp(kind)
            or pa.types.is_date(kind) or pa.types.is_decimal128(kind) or pa.types.is_null(kind)
            or str(kind) == "string_view")


def _as_string(dtype: pl.DataType, name: str) -> pl.Expr:
    if isinstance(dtype, pl.Datetime):
        fmt = "%Y-%m-%dT%H:%M:%S%.f" + ("%z" if dtype.time_zone else "")
        return pl.col(name).dt.strftime(fmt)
    return pl.col(name).cast(pl.String)  # NaN and inf stay visible as text for the rules
