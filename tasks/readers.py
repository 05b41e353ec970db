"""Read job-log files (JSON Lines, CSV, Parquet; optionally gzip-compressed) in bounded chunks.

Each chunk is a Polars frame of *strings* with contract column names, plus:

* `_row`: where the record is in its file as a person counts (JSONL: line number; CSV: line
  number of the row's first line, the header being line 1; Parquet: 1-based row number);
* `_raw`: the record's original text (JSONL lines only; other formats rebuild it on rejection);
* `_read_error`: why the record could not be read (invalid JSON, a ragged CSV row), else null.

A file that cannot be read at all raises `FileRejected` with a reason a person can act on.
Typing and validation happen later (`normalize.py`, the expectation suites).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from gpucast.tasks import contract as c

DEFAULT_CHUNK_ROWS = 100_000
MAX_RAW_CHARS = 10_000
SUPPORTED_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".parquet", ".pq")
_SAMPLE_LINES = 200


class FileRejected(Exception):
    """The whole file cannot be read; `reason` says why, in words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class FileInfo:
    """What reading a file learned about it, for the run report."""

    path: Path
    fmt: str = ""
    compressed: bool = False
    seed_format: bool = False
    ignored_columns: set[str] = field(default_factory=set)


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
        yield from _read_jsonl(path, info, chunk_rows)
    elif info.fmt == "csv":
        yield from _read_csv(path, info, chunk_rows)
    else:
        yield from _read_parquet(path, info, chunk_rows)


# JSON Lines -------------------------------------------------------------------------------------

def _read_jsonl(path: Path, info: FileInfo, chunk_rows: int) -> Iterator[pl.DataFrame]:
    lines: list[str] = []
    numbers: list[int] = []
    line_no = 0
    try:
        with _open_text(path, info.compressed) as f:
            for line_no, line in enumerate(f, start=1):  # noqa: B007
                if line.strip():
                    lines.append(line.rstrip("\n"))
                    numbers.append(line_no)
                if len(lines) >= chunk_rows:
                    yield _decode_json_lines(lines, numbers, info)
                    lines, numbers = [], []
    except (UnicodeDecodeError, EOFError, OSError) as exc:
        raise _decode_error(exc, line_no + 1, path, info.compressed) from exc
    if lines:
        yield _decode_json_lines(lines, numbers, info)


def _key_map(lines: list[str], info: FileInfo) -> dict[str, str]:
    """Map the keys seen in a sample of lines (and every contract name) to contract names."""
    keys: set[str] = set(c.COLUMNS)
    for line in lines[:_SAMPLE_LINES]:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            keys.update(obj)
    mapping = {}
    for k in keys:
        name = normalise_name(k)
        if name in c.COLUMNS:
            mapping.setdefault(k, name)
        else:
            info.ignored_columns.add(k)
    return mapping


def _decode_json_lines(lines: list[str], numbers: list[int], info: FileInfo) -> pl.DataFrame:
    """Decode with Polars; a chunk with a bad line falls back to the stdlib to find it."""
    keys = _key_map(lines, info)
    dtype = pl.Struct({k: pl.String for k in keys})
    errors: list[str | None] = [None] * len(lines)
    good = pl.Series("line", lines, dtype=pl.String)
    try:
        decoded = good.str.json_decode(dtype=dtype)
        bad_mask = decoded.is_null() | ~good.str.strip_chars_start().str.starts_with("{")
    except pl.exceptions.PolarsError:
        bad_mask = None
    if bad_mask is None or bad_mask.any():
        ok_lines = []
        for i, line in enumerate(lines):
            try:
                obj = json.loads(line)
            except ValueError as exc:
                errors[i] = f"not valid JSON: {exc.msg} at character {exc.pos}"
                ok_lines.append(None)
                continue
            if not isinstance(obj, dict):
                errors[i] = f"a JSON line must be an object, got {type(obj).__name__}"
                ok_lines.append(None)
            else:
                # re-encode the values the stdlib accepts but Polars does not (NaN, Infinity)
                ok_lines.append(json.dumps({k: (None if v is None else str(v) if isinstance(v, float) else v)
                                            for k, v in obj.items()}))
        decoded = pl.Series("line", ok_lines, dtype=pl.String).str.json_decode(dtype=dtype)
    frame = decoded.struct.unnest() if keys else pl.DataFrame(index=range(len(lines)))
    # Several source keys may map to one contract name (e.g. `model` and `model_type`): first wins.
    cols = {}
    for k, name in keys.items():
        cols[name] = pl.coalesce(cols[name], pl.col(k)) if name in cols else pl.col(k)
    return frame.select(
        pl.Series("_row", numbers, dtype=pl.Int64),
        pl.Series("_raw", lines, dtype=pl.String).str.slice(0, MAX_RAW_CHARS),
        pl.Series("_read_error", errors, dtype=pl.String),
        *[e.alias(n) for n, e in cols.items()],
    )


# CSV --------------------------------------------------------------------------------------------

def _csv_columns(header: list[str], info: FileInfo) -> list[str | None]:
    keys = [header_key(h) for h in header]
    if c.JOB_ID not in keys and set(c.SEED_COLUMNS) <= set(keys):
        info.seed_format = True
        names = [c.SEED_COLUMNS.get(k, k) for k in keys]
    else:
        names = [normalise_name(h) for h in header]
    out: list[str | None] = []
    for raw, name in zip(header, names, strict=True):
        if name in c.COLUMNS and name not in out:
            out.append(name)
        else:
            out.append(None)
            info.ignored_columns.add(raw)
    missing = [r for r in c.REQUIRED if r not in out]
    if info.seed_format:
        missing = []
    if missing:
        raise FileRejected(
            f"missing required column(s) {', '.join(missing)} in the header; "
            f"found {', '.join(h for h in header) or 'nothing'}"
        )
    return out


def _read_csv(path: Path, info: FileInfo, chunk_rows: int) -> Iterator[pl.DataFrame]:
    line_no = 1
    try:
        with _open_text(path, info.compressed) as f:
            reader = csv.reader(f)
            try:
                header = next(reader)
            except StopIteration:
                return  # an empty file: nothing to read
            columns = _csv_columns(header, info)
            width = len(header)
            keep = [(i, n) for i, n in enumerate(columns) if n]
            rows: list[list[str]] = []
            numbers: list[int] = []
            errors: list[str | None] = []
            for fields in reader:
                start, line_no = line_no + 1, reader.line_num
                if not fields or not any(x.strip() for x in fields):
                    continue
                errors.append(None if len(fields) == width else
                              f"row has {len(fields)} fields but the header has {width}")
                rows.append(fields)
                numbers.append(start)
                if len(rows) >= chunk_rows:
                    yield _csv_frame(rows, numbers, errors, keep, info)
                    rows, numbers, errors = [], [], []
            if rows:
                yield _csv_frame(rows, numbers, errors, keep, info)
    except (UnicodeDecodeError, EOFError, OSError, csv.Error) as exc:
        raise _decode_error(exc, line_no + 1, path, info.compressed) from exc


def _csv_frame(rows, numbers, errors, keep, info: FileInfo) -> pl.DataFrame:
    data = {name: [r[i] if i < len(r) else None for r in rows] for i, name in keep}
    frame = pl.DataFrame(data, schema={n: pl.String for _, n in keep})
    raw = [json.dumps(r)[:MAX_RAW_CHARS] if e else None for r, e in zip(rows, errors, strict=True)]
    frame = frame.with_columns(
        pl.Series("_row", numbers, dtype=pl.Int64),
        pl.Series("_raw", raw, dtype=pl.String),
        pl.Series("_read_error", errors, dtype=pl.String),
    )
    if info.seed_format:
        frame = _seed_ids(frame)
    return frame


def _seed_ids(frame: pl.DataFrame) -> pl.DataFrame:
    """Seed rows have no id: derive a stable one from the row's values and its repeat count.

    The same file (or the same rows in a longer file) always gives the same ids.
    """
    values = [n for n in c.SEED_COLUMNS.values() if n in frame.columns]
    text = pl.concat_str([pl.col(v).fill_null("") for v in values], separator="\x1f")
    digest = [hashlib.sha1(t.encode()).hexdigest()[:16] for t in frame.select(text).to_series()]
    frame = frame.with_columns(pl.Series("_digest", digest))
    occurrence = pl.int_range(pl.len()).over("_digest")
    return frame.with_columns(
        (pl.lit("seed-") + pl.col("_digest") + pl.lit("-") + occurrence.cast(pl.String)).alias(c.JOB_ID),
        pl.lit(c.SEED_SUBMITTED_AT).alias(c.SUBMITTED_AT),
        pl.lit("COMPLETED").alias(c.STATUS),
        pl.lit(c.SEED_QUEUE).alias(c.QUEUE),
    ).drop("_digest")


# Parquet ----------------------------------------------------------------------------------------

def _read_parquet(path: Path, info: FileInfo, chunk_rows: int) -> Iterator[pl.DataFrame]:
    if info.compressed:
        raise FileRejected("gzip-compressed Parquet is not supported: Parquet compresses itself")
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise FileRejected(f"not a readable Parquet file: {exc}") from exc
    names = {n: normalise_name(n) for n in pf.schema_arrow.names}
    kept = {}
    for src, name in names.items():
        if name in c.COLUMNS and name not in kept.values():
            kept[src] = name
        else:
            info.ignored_columns.add(src)
    missing = [r for r in c.REQUIRED if r not in kept.values()]
    if missing:
        raise FileRejected(f"missing required column(s) {', '.join(missing)}; found {', '.join(names) or 'none'}")
    start = 1
    try:
        for batch in pf.iter_batches(batch_size=chunk_rows, columns=list(kept)):
            frame = pl.from_arrow(batch)
            assert isinstance(frame, pl.DataFrame)
            frame = frame.rename(kept).with_columns(
                [_as_string(frame.schema[n], n) for n in kept.values()]
            )
            yield frame.with_columns(
                pl.int_range(start, start + frame.height, dtype=pl.Int64).alias("_row"),
                pl.lit(None, dtype=pl.String).alias("_raw"),
                pl.lit(None, dtype=pl.String).alias("_read_error"),
            )
            start += frame.height
    except (pa.ArrowException, OSError) as exc:
        raise FileRejected(f"Parquet file is corrupt near row {start}: {exc}") from exc


def _as_string(dtype: pl.DataType, name: str) -> pl.Expr:
    if isinstance(dtype, pl.Datetime):
        fmt = "%Y-%m-%dT%H:%M:%S%.f" + ("%z" if dtype.time_zone else "")
        return pl.col(name).dt.strftime(fmt)
    return pl.col(name).cast(pl.String)  # NaN and inf stay visible as text for the rules
