"""Issue 52, session 22: can one DuckDB pass read a JSONL file, normalise it and apply the parsing rules for less CPU?

A prototype, not product code. It builds, in one in-process DuckDB connection, what `readers.read_chunks` +
`normalize.normalize` give today for a JSON Lines file: the typed contract columns, `_row` (the line number), `_raw`
(the line, cut at MAX_RAW_CHARS) and `_errors` (the parsing-rule sentences), chunk by chunk as Polars frames, and
times it against today's path on the same file (CPU seconds of this process, all threads, imports and the connection
made before the clock starts). The lines the strict-JSON check refuses (bad JSON, NaN, too many brackets: under 1% of the
benchmark's file) go through today's Python decode (`readers._python_decode`), as they do today, and the same SQL
then runs on their repaired text.

    PYTHONPATH=$PWD .venv/bin/python tests/benchmarks/stage_duckdb_probe.py time FILE --way WAY [--not-after ISO]
    PYTHONPATH=$PWD .venv/bin/python tests/benchmarks/stage_duckdb_probe.py agree FILE [FILE ...] [--way WAY]

WAY: `today` (read_chunks + normalize), `read` (read_chunks alone), `stage` (staging.stage_file whole: + the row
rules and the staged Parquet), `duck-read` (formulation (c): DuckDB reads the lines, checks them and takes the
strings out with `json_extract_string`; `normalize.normalize` types them as today), `sql` (formulation (b): the
same, and every parsing rule in SQL too, timestamps by strptime), `sql-cast` (the same, timestamps by a checked
cast), `sql-struct` (`json_transform` to a struct of VARCHAR instead of the path list), `read-json` (formulation (a):
read_json with every column VARCHAR to Arrow; no `_row`, `_raw` nor bad lines: its cost only), `baseline`
(bench_ingest's bare DuckDB conversion to Parquet, in this process).
`agree` compares `today` with WAY row for row (verdict, every reason, every typed value) and prints each difference.
docs/benchmarks.md, "Ingest, session 22: one DuckDB pass for read, normalise and rules, measured (issue 52)".
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.ingest import DEFAULT_CHUNK_ROWS
from gpucast.tasks.ingest import normalize as nz
from gpucast.tasks.ingest.readers import (
    _SAMPLE_LINES,
    MAX_JSON_DEPTH,
    MAX_RAW_CHARS,
    FileInfo,
    _key_map,
    _python_decode,
    read_chunks,
    sniff_format,
)

# Rust's `str::trim` (Polars' strip_chars) strips Unicode White_Space; DuckDB's one-argument trim strips spaces only
WHITESPACE = "".join(chr(x) for x in (*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028,
                                      0x2029, 0x202F, 0x205F, 0x3000))
# `\s` of Rust's regex is Unicode; RE2's is ASCII: the class spelled out
WS_CLASS = "".join(f"\\x{{{ord(ch):X}}}" for ch in WHITESPACE)
WS_LITERAL = "'" + WHITESPACE + "'"


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def q(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def in_list(values) -> str:
    return "(" + ", ".join(q(v) for v in values) + ")"


def sql_map(table: dict[str, str]) -> str:
    return "MAP {" + ", ".join(f"{q(k)}: {q(v)}" for k, v in table.items()) + "}"


# ---------------------------------------------------------------------------------------------------------------------
# the lines


def has_carriage_return(path: Path, compressed: bool) -> bool:
    """Whether the file holds a \\r (gzip: not looked at). DuckDB's CSV reader counts \\r\\n as two line ends in a file
    of mixed endings (measured), so such a file is split by `read_text` instead."""
    if compressed or path.stat().st_size == 0:
        return False
    import mmap

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(b"\r") >= 0


def lines_relation(path: Path, compressed: bool) -> str:
    """(_row, line) for every line, in file order, blank ones NULL or blank: DuckDB's CSV reader with a delimiter JSON
    never holds unescaped (NUL: a control character is not allowed raw in a JSON string), no quotes, no header;
    a file holding \\r read whole (`read_text`) and split, as `readers._line_blocks` does."""
    if has_carriage_return(path, compressed):
        text = ("regexp_replace(replace(ltrim(content, chr(65279)), chr(13) || chr(10), chr(10)), chr(13), chr(10), "
                "'g')")
        return (f"SELECT i::BIGINT AS _row, parts[i] AS line FROM (SELECT parts, generate_subscripts(parts, 1) AS i "
                f"FROM (SELECT string_split(CASE WHEN suffix({text}, chr(10)) THEN left({text}, -1) ELSE {text} END, "
                f"chr(10)) AS parts FROM read_text({q(str(path))})))")
    comp = "gzip" if compressed else "none"
    return (f"SELECT ordinality::BIGINT AS _row, line FROM read_csv({q(str(path))}, columns={{'line': 'VARCHAR'}}, "
            f"delim='{chr(0)}', quote='', escape='', header=false, auto_detect=false, compression='{comp}', "
            f"strict_mode=false, null_padding=true, max_line_size={1 << 30}) WITH ORDINALITY")


STRICT = (f"coalesce(json_valid(line) AND starts_with(ltrim(line), '{{') AND CASE WHEN contains(line, 'NaN') OR "
          f"contains(line, 'Infinity') THEN NOT regexp_matches(line, '[:,\\[]\\s*[-+]?(NaN|Infinity)') ELSE true END, "
          f"false) AND len(string_split(line, '[')) + len(string_split(line, '{{')) - 2 <= {MAX_JSON_DEPTH}")
# (the bracket count by string_split: 0.2 CPU-s per 200,000 lines here, by translate() 3.7, by replace() 0.4)


# ---------------------------------------------------------------------------------------------------------------------
# the rules, as SQL generated from the contract and normalize.py's tables (every name once)


def _pointer(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


def extract_columns(keys: dict[str, str], how: str) -> tuple[str, list[str], list[str]]:
    """The SELECT list that takes each contract column's raw text out of `js` (first source key wins), and the
    column names. `how`: `paths` (one json_extract_string with a list of JSON pointers) or `struct`
    (json_transform to a struct of VARCHAR)."""
    src = list(keys)
    if how == "paths":
        head = "json_extract_string(js, [" + ", ".join(q(_pointer(k)) for k in src) + "]) AS __x"
        ref = {k: f"__x[{i + 1}]" for i, k in enumerate(src)}
    else:
        shape = json.dumps({k: "VARCHAR" for k in src})
        head = f"json_transform(js, {q(shape)}) AS __x"
        ref = {k: f"__x[{q(k)}]" for k in src}
    by_name: dict[str, list[str]] = {}
    for k, name in keys.items():
        by_name.setdefault(name, []).append(ref[k])
    cols = [f"coalesce({', '.join(refs)}) AS {ident(name)}" if len(refs) > 1 else f"{refs[0]} AS {ident(name)}"
            for name, refs in by_name.items()]
    return head, cols, list(by_name)


_WS_ORDS = ", ".join(str(ord(ch)) for ch in WHITESPACE)


def _strip_sql(name: str) -> str:
    """The value stripped of Unicode whitespace. DuckDB's trim with a set of characters costs ~1.4 CPU-s a million
    values here (the plain one-space trim 0.14): only a value that starts or ends with one of them is trimmed."""
    x = ident(name)
    return (f"CASE WHEN ord({x}) IN ({_WS_ORDS}) OR ord(right({x}, 1)) IN ({_WS_ORDS}) THEN trim({x}, {WS_LITERAL}) "
            f"ELSE {x} END")


def _stripped(name: str) -> str:
    return ident(f"__s_{name}")


def _text(name: str, missing: tuple[str, ...]) -> str:
    s = _stripped(name)
    return f"CASE WHEN {s} IN {in_list(nz.spellings(missing))} THEN NULL ELSE {s} END"


def _bad(name: str, cond: str, what: str) -> str:
    shown = f"left({_stripped(name)}, 60)"
    return f"CASE WHEN {cond} THEN {q(name + ': ' + chr(39))} || {shown} || {q(chr(39) + ' ' + what)} END"


def _fmt_future(not_after: datetime | None) -> str:
    return (f"is in the future: after {not_after:%Y-%m-%d %H:%M} UTC, the ingest's time plus "
            "GPUCAST_FUTURE_TOLERANCE_HOURS") if not_after else ""


def t_(n):
    return ident(f"__t_{n}")


def v_(n):
    return ident(f"__v_{n}")


def rules_sql(source: str, present: list[str], not_after: datetime | None, timestamps: str) -> str:
    """SQL over `source` (columns `_row`, `_raw`, `_read_error`, `ok`, `bad_line` and the contract columns in
    `present`, raw text) giving normalize's frame: `_row`, `_raw`, the typed contract columns, `_errors`, plus `ok` and
    `bad_line`."""
    missing = [n for n in c.COLUMNS if n not in present]
    numbers = c.FLOAT_COLUMNS + c.INT_COLUMNS
    bool_missing = tuple(t for t in nz.MISSING_TOKENS if t != "none")
    # 1. texts
    texts = []
    for n in c.COLUMNS:
        if n in missing:
            texts.append(f"NULL::VARCHAR AS {t_(n)}")
        elif n in c.BOOL_COLUMNS:
            texts.append(f"lower({_text(n, bool_missing)}) AS {t_(n)}")
        elif n in c.TIMESTAMP_COLUMNS:
            texts.append(f"{_text(n, nz.MISSING_TOKENS)} AS {ident('__z_' + n)}")
        else:
            texts.append(f"{_text(n, nz.MISSING_TOKENS)} AS {t_(n)}")
    raw = [f"NULL::VARCHAR AS {ident(n)}" for n in missing]
    stage0 = f"SELECT *{''.join(', ' + r for r in raw)} FROM ({source})"
    stage0 = f"SELECT *, {', '.join(f'{_strip_sql(n)} AS {_stripped(n)}' for n in c.COLUMNS)} FROM ({stage0})"
    stage1 = f"SELECT *, {', '.join(texts)} FROM ({stage0})"
    # timestamps: "[Zz]$" -> "+00:00", then the first "T" -> " " (one layout for the formats)
    zs = []
    for n in c.TIMESTAMP_COLUMNS:
        z = ident("__z_" + n)
        zs.append(f"regexp_replace(CASE WHEN suffix({z}, 'Z') OR suffix({z}, 'z') THEN left({z}, -1) || '+00:00' "
                  f"ELSE {z} END, 'T', ' ') AS {t_(n)}")
    stage1 = f"SELECT *, {', '.join(zs)} FROM ({stage1})"
    # 2. values
    # DuckDB's cast reads `1_000` as 1000; Polars' refuses it
    vals = [f"CASE WHEN NOT contains({t_(n)}, '_') THEN TRY_CAST({t_(n)} AS DOUBLE) END AS {v_(n)}" for n in numbers]
    for n in c.TIMESTAMP_COLUMNS:
        vals.append(f"{timestamp_sql(t_(n), timestamps)} AS {v_(n)}")
    stage2 = f"SELECT *, {', '.join(vals)} FROM ({stage1})"
    # 3. typed values, errors, flags
    values: dict[str, str] = {}
    errors: list[str] = ["_read_error"]
    flags: list[str] = ["_read_error IS NOT NULL"]
    for n in numbers:
        integer = n in c.INT_COLUMNS
        t, v = t_(n), v_(n)
        nan, inf = f"({t} IS NOT NULL AND {v} IS NULL)", f"({v} IS NOT NULL AND NOT isfinite({v}))"
        frac = f"(isfinite({v}) AND {v} <> round({v}))"
        err = (f"CASE WHEN {nan} THEN {q(n + ': ' + chr(39))} || left({_stripped(n)}, 60) || {q(chr(39) + ' is not a number')} "
               f"WHEN {inf} THEN {q(n + ': ')} || {t} || ' is not a finite number'")
        if integer:
            err += f" WHEN {frac} THEN {q(n + ': ')} || {t} || ' is not a whole number'"
            values[n] = (f"CASE WHEN isfinite({v}) AND {v} = round({v}) AND abs({v}) < 9.0e18 THEN {v}::BIGINT END")
            flags.append(f"coalesce({nan} OR {inf} OR {frac}, false)")
        else:
            values[n] = f"CASE WHEN isfinite({v}) THEN {v} END"
            flags.append(f"coalesce({nan} OR {inf}, false)")
        errors.append(err + " END")
    for n in c.BOOL_COLUMNS:
        t = t_(n)
        values[n] = f"CASE WHEN {t} IN {in_list(nz.TRUE_TOKENS)} THEN true WHEN {t} IN {in_list(nz.FALSE_TOKENS)} THEN false END"
        bad = f"({t} IS NOT NULL AND {t} NOT IN {in_list(nz.TRUE_TOKENS)} AND {t} NOT IN {in_list(nz.FALSE_TOKENS)})"
        errors.append(_bad(n, bad, "is not a yes/no value (true/false, yes/no, 1/0)"))
        flags.append(f"coalesce({bad}, false)")
    for n in c.TIMESTAMP_COLUMNS:
        values[n] = v_(n)
        bad = f"({t_(n)} IS NOT NULL AND {v_(n)} IS NULL)"
        errors.append(_bad(n, bad, "is not an ISO 8601 timestamp (e.g. 2026-11-01T10:00:00Z)"))
        flags.append(f"coalesce({bad}, false)")
        if not_after is not None:
            future = f"({v_(n)} > TIMESTAMPTZ {q(not_after.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f+00'))})"
            errors.append(_bad(n, future, _fmt_future(not_after)))
            flags.append(f"coalesce({future}, false)")
    status = f"upper({t_(c.STATUS)})"
    values[c.STATUS] = f"coalesce({sql_map(nz.STATUS_SYNONYMS)}[{status}], {status})"
    values[c.PRECISION] = f"coalesce({sql_map(nz.PRECISION_SYNONYMS)}[lower({t_(c.PRECISION)})], upper({t_(c.PRECISION)}))"
    values[c.MODEL_TYPE] = (f"coalesce({sql_map(nz.MODEL_TYPE_SYNONYMS)}[lower({t_(c.MODEL_TYPE)})], {t_(c.MODEL_TYPE)}, "
                            f"{q(c.UNKNOWN_MODEL_TYPE)})")
    values[c.OPTIMIZER] = f"coalesce({sql_map(nz.OPTIMIZER_SYNONYMS)}[lower({t_(c.OPTIMIZER)})], {t_(c.OPTIMIZER)})"
    values[c.QUEUE] = f"coalesce({t_(c.QUEUE)}, {q(c.DEFAULT_QUEUE)})"
    for n in (c.JOB_ID, c.TEAM, c.FAILURE_REASON, c.GPU_TYPE, c.ARCH, c.JOB_NAME):
        values[n] = t_(n)
    for n, table in nz.LLM_WORDS.items():
        noise = nz.WORD_NOISE.get(n, r"[\s_\-]").replace(r"\s", WS_CLASS)
        key = f"regexp_replace(lower({t_(n)}), {q(noise)}, '', 'g')"
        fallback = f"CASE WHEN {t_(n)} IS NOT NULL THEN {q(c.UNKNOWN_WORD)} END" if n in c.UNKNOWN_KEPT else t_(n)
        values[n] = f"coalesce({sql_map(table)}[{key}], {fallback})"
    # the layout rule
    tp, pp, cp, gpus, ep = [f"coalesce({v_(n)}, 1.0)" for n in (*c.PARALLELISM, c.GPU_COUNT, c.EXPERT_PARALLEL)]
    whole = " AND ".join(f"(isfinite({p}) AND {p} > 0 AND {p} = round({p}))" for p in (tp, pp, cp, gpus, ep))
    split = f"({tp} * {pp} * {cp})"
    any_par = " OR ".join(f"{v_(n)} IS NOT NULL" for n in c.PARALLELISM)
    broken = f"(({whole}) AND ({any_par}) AND fmod({gpus}, {split}) <> 0)"
    experts = f"(({whole}) AND NOT {broken} AND {v_(c.EXPERT_PARALLEL)} IS NOT NULL AND fmod({gpus}, {ep} * {pp}) <> 0)"
    big = "::BIGINT::VARCHAR"
    sentence = (f"'tensor_parallel x pipeline_parallel x context_parallel must divide gpu_count (got ' || {tp}{big} || ' x ' "
                f"|| {pp}{big} || ' x ' || {cp}{big} || ' = ' || {split}{big} || ' on ' || {gpus}{big} || ' GPUs)'")
    said = (f"'expert_parallel x pipeline_parallel must divide gpu_count (got ' || {ep}{big} || ' x ' || {pp}{big} || "
            f"' = ' || ({ep} * {pp}){big} || ' on ' || {gpus}{big} || ' GPUs)'")
    errors.append(f"CASE WHEN {broken} THEN {sentence} WHEN {experts} THEN {said} END")
    flags.append(f"coalesce({broken} OR {experts}, false)")
    flagged = " OR ".join(f"({f})" for f in flags)
    errs = f"CASE WHEN {flagged} THEN list_filter([{', '.join(errors)}], lambda x: x IS NOT NULL) ELSE []::VARCHAR[] END"
    typed = ", ".join(f"{values[n]} AS {ident(n)}" for n in c.COLUMNS)
    return f"SELECT _row, _raw, {typed}, {errs} AS _errors, ok, bad_line FROM ({stage2})"


def timestamp_sql(t: str, how: str) -> str:
    """A timestamp's text (already "Z" -> "+00:00", "T" -> " ") as TIMESTAMPTZ in UTC, or NULL."""
    if how == "cast":  # DuckDB's ISO cast, guarded by the layouts normalize.py accepts
        layout = (r"^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?([+-]\d{2}:?\d{2})?$")
        return (f"CASE WHEN regexp_full_match({t}, {q(layout)}) THEN TRY_CAST({t} AS TIMESTAMPTZ) END")
    # chrono's `%.f` (optional fraction, up to 9 digits): DuckDB's %f takes 1-6 digits, %n 7-9
    zoned = ["%Y-%m-%d %H:%M:%S.%f%z", "%Y-%m-%d %H:%M:%S%z", "%Y-%m-%d %H:%M%z"]
    naive = ["%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"]
    return (f"coalesce(try_strptime({t}, {sql_list(zoned)}), timezone('UTC', try_strptime({t}, {sql_list(naive)})), "
            f"try_strptime({t}, '%Y-%m-%d %H:%M:%S.%n%z')::TIMESTAMPTZ, "
            f"timezone('UTC', try_strptime({t}, '%Y-%m-%d %H:%M:%S.%n')::TIMESTAMP))")


def sql_list(values) -> str:
    return "[" + ", ".join(q(v) for v in values) + "]"


# ---------------------------------------------------------------------------------------------------------------------
# the pass


def connect() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return con


def duckdb_chunks(con: duckdb.DuckDBPyConnection, path: Path, not_after: datetime | None, how: str = "paths",
                  timestamps: str = "strptime", chunk_rows: int = DEFAULT_CHUNK_ROWS, rules: bool = True
                  ) -> Iterator[pl.DataFrame]:
    """normalize(read_chunks(path)) computed by DuckDB, in chunks of about `chunk_rows` rows; with `rules` False,
    DuckDB reads the lines and takes the strings out of the JSON, and `normalize.normalize` does the rest."""
    info = FileInfo(path)
    info.fmt, info.compressed = sniff_format(path)
    lines = lines_relation(path, info.compressed)
    blank = f"(line IS NULL OR (ord(line) IN ({_WS_ORDS}) AND trim(line, {WS_LITERAL}) = ''))"  # trim only if needed
    sample = [r[0] for r in con.execute(f"SELECT line FROM ({lines}) WHERE NOT {blank} "
                                        f"LIMIT {_SAMPLE_LINES}").fetchall()]
    keys = _key_map(sample, info)
    head, cols, present = extract_columns(keys, how)

    def source(inner: str) -> str:
        return (f"SELECT _row, _raw, _read_error, ok, bad_line, {', '.join(cols)} FROM "
                f"(SELECT *, {head} FROM ({inner}))")

    checked = f"SELECT _row, line, {STRICT} AS ok FROM ({lines}) WHERE NOT {blank}"
    main = (f"SELECT _row, left(line, {MAX_RAW_CHARS}) AS _raw, NULL::VARCHAR AS _read_error, ok, "
            f"CASE WHEN NOT ok THEN line END AS bad_line, CASE WHEN ok THEN line ELSE '{{}}' END AS js "
            f"FROM ({checked})")
    patch = source("SELECT _row, _raw, _read_error, true AS ok, NULL::VARCHAR AS bad_line, js FROM __bad")
    if rules:
        sql, patch_sql = rules_sql(source(main), present, not_after, timestamps), rules_sql(patch, present, not_after,
                                                                                            timestamps)
    else:  # formulation (c): DuckDB reads and extracts the strings; normalize.py types them, as today
        sql, patch_sql = source(main), patch
    side = con.cursor()  # the refused lines' query, while the main result streams on `con`
    reader = con.sql(sql).to_arrow_reader(chunk_rows)
    for batch in reader:
        frame = pl.from_arrow(batch)
        assert isinstance(frame, pl.DataFrame)
        if not frame["ok"].all():
            frame = _patched(side, frame, patch_sql, rules)
        frame = frame.drop("ok", "bad_line")
        yield frame if rules else nz.normalize(frame, not_after)


def _patched(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame, patch_sql: str, rules: bool = True) -> pl.DataFrame:
    """The lines the strict check refused, decoded by Python as today (`_python_decode`) and run through the same
    SQL with their read error; put back in place."""
    bad = frame.filter(~pl.col("ok")).select("_row", "_raw", "bad_line")
    decoded = [_python_decode(line) for line in bad["bad_line"].to_list()]
    small = bad.select("_row", "_raw").with_columns(
        pl.Series("js", [js or "{}" for js, _ in decoded], dtype=pl.String),
        pl.Series("_read_error", [err for _, err in decoded], dtype=pl.String))
    con.register("__bad", small)
    try:
        fixed = con.sql(patch_sql).pl()
    finally:
        con.unregister("__bad")
    fixed = fixed.with_columns(pl.lit(True).alias("ok"), pl.lit(None, dtype=pl.String).alias("bad_line"),
                               *[pl.col(n).dt.convert_time_zone("UTC") for n in c.TIMESTAMP_COLUMNS if rules])
    return pl.concat([frame.filter(pl.col("ok")), fixed.select(frame.columns)]).sort("_row")


def today_chunks(path: Path, not_after: datetime | None, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[pl.DataFrame]:
    for chunk in read_chunks(path, FileInfo(path), chunk_rows):
        yield nz.normalize(chunk, not_after)


# ---------------------------------------------------------------------------------------------------------------------
# timing and agreement


def run_way(way: str, path: Path, not_after: datetime | None) -> tuple[int, int]:
    """Run `way` over `path`; (rows, rows with an error)."""
    if way == "today":
        frames = today_chunks(path, not_after)
    elif way == "read":  # today's reader alone
        n = sum(ch.height for ch in read_chunks(path, FileInfo(path)))
        return n, 0
    elif way == "stage":
        from gpucast.tasks.ingest import staging  # its row rules are Polars, in this process (GX's judge: not used)
        with tempfile.TemporaryDirectory() as out:
            r = staging.stage_file(path, Path(out), 0, not_after=not_after)
        return r.rows_read, r.rows_rejected
    elif way == "baseline":
        with tempfile.TemporaryDirectory() as out:
            duckdb.sql(f"COPY (SELECT * FROM read_json({q(str(path))}, ignore_errors = true)) TO "
                       f"{q(out + '/b.parquet')} (FORMAT parquet)")
        return 0, 0
    elif way == "read-json":
        shape = "{" + ", ".join(f"{q(n)}: 'VARCHAR'" for n in c.COLUMNS) + "}"
        con = connect()
        reader = con.sql(f"SELECT * FROM read_json({q(str(path))}, format='newline_delimited', columns={shape}, "
                             "ignore_errors=true)").to_arrow_reader(DEFAULT_CHUNK_ROWS)
        n = sum(pl.from_arrow(b).height for b in reader)
        return n, 0
    else:
        how = "struct" if way == "sql-struct" else "paths"
        timestamps = "cast" if way == "sql-cast" else "strptime"
        frames = duckdb_chunks(connect(), path, not_after, how, timestamps, rules=way != "duck-read")
    rows = errs = 0
    for f in frames:
        rows += f.height
        errs += f.filter(pl.col("_errors").list.len() > 0).height
    return rows, errs


def agree(path: Path, way: str, not_after: datetime | None, show: int = 30) -> dict:
    """Today's frame and WAY's, row for row: rows only one side has, verdict differences (errors or not), reason
    differences, typed value differences. Returns the counts; prints up to `show` examples of each."""
    how = "struct" if way == "sql-struct" else "paths"
    timestamps = "cast" if way == "sql-cast" else "strptime"
    out: dict = {"file": str(path)}
    def whole(chunks) -> pl.DataFrame | Exception:
        try:
            frames = list(chunks)
            return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()
        except Exception as exc:  # noqa: BLE001
            return exc

    a = whole(today_chunks(path, not_after))
    b = whole(duckdb_chunks(connect(), path, not_after, how, timestamps, rules=way != "duck-read"))
    if isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame) and a.height == 0 and b.height == 0:
        out["rows"] = (0, 0)
        print(json.dumps(out))
        return out
    if isinstance(a, Exception) or isinstance(b, Exception):
        out["today"] = f"{type(a).__name__}: {a}"[:300] if isinstance(a, Exception) else f"{a.height} rows"
        out["probe"] = f"{type(b).__name__}: {b}"[:300] if isinstance(b, Exception) else f"{b.height} rows"
        print(json.dumps(out))
        return out
    out["rows"] = (a.height, b.height)
    j = a.join(b, on="_row", how="full", suffix="__b", coalesce=True)
    out["only_today"] = j.filter(pl.col("_raw__b").is_null() & pl.col("_raw").is_not_null()).height
    out["only_probe"] = j.filter(pl.col("_raw").is_null() & pl.col("_raw__b").is_not_null()).height
    both = j.filter(pl.col("_raw").is_not_null() & pl.col("_raw__b").is_not_null())
    verdict = both.filter((pl.col("_errors").list.len() > 0) != (pl.col("_errors__b").list.len() > 0))
    reasons = both.filter(pl.col("_errors").list.join("\n") != pl.col("_errors__b").list.join("\n"))
    out["verdict_differs"] = verdict.height
    out["reasons_differ"] = reasons.height
    diffs = {}
    for n in ("_raw", *c.COLUMNS):
        left, right = pl.col(n), pl.col(f"{n}__b")
        if both.schema[n] != both.schema[f"{n}__b"]:
            right = right.cast(both.schema[n])
        d = both.filter(left.ne_missing(right))
        if d.height:
            diffs[n] = d.height
    out["values_differ"] = diffs
    print(json.dumps(out))
    for label, frame in (("verdict", verdict), ("reasons", reasons)):
        for row in frame.head(show).iter_rows(named=True):
            print(f"  {label} line {row['_row']}: today {row['_errors']} | probe {row['_errors__b']}")
    for n in diffs:
        right = f"{n}__b"
        for row in both.filter(pl.col(n).ne_missing(pl.col(right).cast(both.schema[n]))).head(5).iter_rows(named=True):
            print(f"  value {n} line {row['_row']}: today {row[n]!r} | probe {row[right]!r}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("time", "agree"))
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--way", default="sql", choices=("today", "read", "stage", "duck-read", "sql", "sql-cast", "sql-struct", "read-json",
                                                      "baseline"))
    ap.add_argument("--not-after", default=None, help="ISO time; default: now + 24 h (the ingest's default tolerance)")
    args = ap.parse_args()
    not_after = (datetime.fromisoformat(args.not_after) if args.not_after else
                 datetime.now(UTC) + timedelta(hours=24))
    if args.mode == "agree":
        for f in args.files:
            agree(f, args.way, not_after)
        return
    (path,) = args.files
    from gpucast.tasks.ingest import staging  # noqa: F401  (imported by every way before the clock, used by `stage`)

    connect().execute("SELECT 1")  # DuckDB's own start, outside the clock
    pl.DataFrame({"a": [1]}).select(pl.col("a") + 1)
    t, c0 = time.perf_counter(), cpu()
    rows, errs = run_way(args.way, path, not_after)
    print(json.dumps({"way": args.way, "file": str(path), "rows": rows, "rows_with_errors": errs,
                      "cpu_s": round(cpu() - c0, 2), "wall_s": round(time.perf_counter() - t, 2)}), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
