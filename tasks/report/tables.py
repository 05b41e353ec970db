"""Text tables for the CLI, and on-call's status text: printed as Polars prints a frame, from Polars frames or from
rows DuckDB fetched itself (`records.rows.Rows`), which need neither Polars nor PyArrow.

`gpucast status` and `gpucast sql` may take 0.5 s (issue 52 item 4); importing Polars and PyArrow (with numpy) took
0.4-0.5 CPU-s of it, to print a few rows. So their rows come from DuckDB's own fetch and `plain_text` lays them out
the way `str(pl.DataFrame)` does under the CLI's `pl.Config` (`Layout`): the same box characters, widths, cell text
(Polars' float, date and time formats, `null`, `true`) and cut strings. Where it could differ from Polars' layout,
it does not guess: a value of a type it does not format (`PLAIN_TYPES`), a character other than printable ASCII (Polars
measures Unicode display widths), more rows or columns than the layout shows (Polars elides the middle), a table wider
than the layout (Polars wraps cells): it returns None, and the rows are printed by Polars itself (`frame`).
tests/tasks/report/test_tables.py compares the two on every case it lays out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.records.rows import Rows, plain_type
from gpucast.tasks.report.literal import visible

if TYPE_CHECKING:
    import polars as pl

TABLE_ROWS = 200  # text and Markdown tables show at most this many rows
TABLE_MAX_WIDTH = 65_535  # the widest table Polars prints (its width is a 16-bit number)


@dataclass(frozen=True)
class Layout:
    """The `pl.Config` a table is printed under: rows and columns shown (-1: every one), the widest table in
    characters, the longest string shown whole (a longer one is cut there and ends with `…`)."""

    rows: int
    cols: int
    width: int
    str_len: int


CLI = Layout(rows=TABLE_ROWS, cols=30, width=200, str_len=80)  # `text_table`: status, plan, backtest
SQL = Layout(rows=-1, cols=-1, width=TABLE_MAX_WIDTH, str_len=TABLE_MAX_WIDTH)  # `gpucast sql`'s table: whole strings


def text_table(df: pl.DataFrame | Rows) -> str:
    """A frame (or DuckDB's rows) as an aligned text table (the CLI); strings shown literally (`literal.visible`)."""
    if isinstance(df, Rows):
        return plain_text(df.with_strings(visible), CLI) or text_table(frame(df))
    import polars as pl

    from gpucast.tasks.report.literal import visible_frame

    df = visible_frame(df)
    with pl.Config(tbl_rows=CLI.rows, tbl_cols=CLI.cols, tbl_width_chars=CLI.width, fmt_str_lengths=CLI.str_len,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        return str(df)


def with_strings(df: pl.DataFrame | Rows, f: Callable[[str], str]) -> pl.DataFrame | Rows:
    """A frame (or DuckDB's rows) with `f` applied to every text value (not to NULLs)."""
    if isinstance(df, Rows):
        return df.with_strings(f)
    import polars as pl

    return df.with_columns(pl.col(pl.String).map_elements(f, return_dtype=pl.String, skip_nulls=True))


def rows_line(shown: int, total: int) -> str:
    """The row count under a `gpucast sql` table, saying when more rows than were shown matched."""
    line = f"{total:,} row{'s' if total != 1 else ''}"
    if total > shown:
        line = f"first {shown:,} of {line} shown (--max-rows N to see more; --format csv or json print every row)"
    return line


def plain_text(rows: Rows, layout: Layout) -> str | None:
    """`rows` laid out as `str(pl.DataFrame)` does under `layout` (shape and column types hidden), or None where
    that could differ (the module's doc). Strings are taken as given: the caller makes them visible."""
    if (layout.rows >= 0 and rows.height > layout.rows) or (layout.cols >= 0 and len(rows.columns) > layout.cols):
        return None
    if not rows.columns:
        return "┌┐\n╞╡\n└┘"
    if not all(plain_type(t) for t in rows.types) or not all(_ascii(name) and len(name) <= layout.str_len
                                                              for name in rows.columns):
        return None
    cells = []
    for row in rows.rows:
        line = [cell(v, layout.str_len) for v in row]
        if None in line:
            return None
        cells.append(line)
    widths = [max([len(name), *(len(line[i]) for line in cells)]) for i, name in enumerate(rows.columns)]
    if sum(widths) + 3 * len(widths) + 1 > layout.width:  # Polars would wrap the cells to fit
        return None

    def rule(left: str, fill: str, mid: str, right: str) -> str:
        return left + mid.join(fill * (w + 2) for w in widths) + right

    def line(texts: list[str]) -> str:
        return "│" + "┆".join(f" {t:<{w}} " for t, w in zip(texts, widths, strict=True)) + "│"

    return "\n".join([rule("┌", "─", "┬", "┐"), line(list(rows.columns)), rule("╞", "═", "╪", "╡"),
                      *(line(texts) for texts in cells), rule("└", "─", "┴", "┘")])


def _ascii(text: str) -> bool:
    """Printable ASCII only: one column per character, as Polars measures it too."""
    return text.isascii() and text.isprintable()


def cell(v: Any, str_len: int) -> str | None:
    """One value as Polars shows it in a table, or None where this module does not know that it would."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Decimal):  # DECIMAL(p, 0) (`plain_type`): shown as its integer
        return str(int(v)) if v == v.to_integral_value() else None
    if isinstance(v, float):
        return polars_float(v)
    if isinstance(v, str):
        if not _ascii(v):
            return None
        return v if len(v) <= str_len else v[:str_len] + "…"
    if isinstance(v, datetime):
        if not 1000 <= v.year <= 9999:
            return None
        text = v.strftime("%Y-%m-%d %H:%M:%S")
        if v.microsecond:  # chrono's `%.f`: milliseconds when they say it all, else microseconds
            text += f".{v.microsecond // 1000:03d}" if v.microsecond % 1000 == 0 else f".{v.microsecond:06d}"
        if v.tzinfo is None:
            return text
        offset = v.utcoffset()
        return f"{text} UTC" if v.tzname() == "UTC" and offset is not None and not offset else None
    if isinstance(v, date):
        return v.isoformat() if 1000 <= v.year <= 9999 else None
    return None


SCIENTIFIC_BOUND = 999_999.0  # Polars (polars-core's fmt.rs) shows larger whole floats in scientific notation


def polars_float(v: float) -> str:
    """A Float64 as Polars shows it in a table (its default float format, "mixed"): a whole number below
    SCIENTIFIC_BOUND with one decimal (12.0); a value whose shortest text is longer than 9 characters with 6 decimals,
    trailing zeros dropped (0.333333), or, outside 1e-6..SCIENTIFIC_BOUND, as 1.2346e6; a larger whole number
    with its shortest digits (1e7, 4.88146157e8); anything else as its shortest text (2.2, 0.0000015). Checked
    against Polars on 200,000 values of every magnitude (tests/tasks/report/test_tables.py keeps a sample)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    whole = v == int(v)
    if whole and abs(v) < SCIENTIFIC_BOUND:
        return f"{v:.1f}"
    shortest = Decimal(repr(v)).normalize()
    text = format(shortest, "f")  # Rust's `{}`: the shortest digits, never an exponent
    if len(text) > 9:
        if not 0.000001 <= abs(v) <= SCIENTIFIC_BOUND:
            mantissa, exponent = f"{v:.4e}".split("e")
            return f"{mantissa}e{int(exponent)}"
        fixed = f"{v:.6f}".rstrip("0")
        return fixed + "0" if fixed.endswith(".") else fixed
    if whole:  # Rust's `{:e}`: the shortest digits, one before the point
        sign, digits, exponent = shortest.as_tuple()
        d = "".join(map(str, digits))
        return ("-" if sign else "") + d[0] + ("." + d[1:] if len(d) > 1 else "") + f"e{exponent + len(d) - 1}"
    return text


def frame(rows: Rows) -> pl.DataFrame:
    """`rows` as the Polars frame DuckDB's `.pl()` gives for their types (`PLAIN_TYPES`; a HUGEINT or DECIMAL(p, 0)
    as Int64, the type `gpucast sql` casts them to): for what `plain_text` leaves to Polars."""
    import polars as pl

    kinds = {"BOOLEAN": pl.Boolean, "TINYINT": pl.Int8, "SMALLINT": pl.Int16, "INTEGER": pl.Int32, "BIGINT": pl.Int64,
             "HUGEINT": pl.Int64, "UTINYINT": pl.UInt8, "USMALLINT": pl.UInt16, "UINTEGER": pl.UInt32,
             "UBIGINT": pl.UInt64, "DOUBLE": pl.Float64, "VARCHAR": pl.String, "DATE": pl.Date,
             "TIMESTAMP": pl.Datetime("us"), "TIMESTAMP WITH TIME ZONE": pl.Datetime("us", rows.time_zone)}
    columns = list(zip(*rows.rows, strict=True)) if rows.rows else [()] * len(rows.columns)
    return pl.DataFrame([pl.Series(name, [int(v) if isinstance(v, Decimal) else v for v in values],
                                   dtype=pl.Int64 if kind.startswith("DECIMAL") else kinds[kind])
                         for name, kind, values in zip(rows.columns, rows.types, columns, strict=True)])


def status_text(frames: dict[str, pl.DataFrame | Rows], where: Path) -> str:
    """On-call's view of the warehouse (tables from `queries.status_tables`)."""
    lines = [f"Recent ingest runs ({where}):", text_table(frames["ingests"])]
    if frames["failures"].height:
        lines += ["", "Failed runs and rejected files:"]
        for row in frames["failures"].iter_rows(named=True):
            what = f"{row['source_file']}: {row['reason']}" if row["source_file"] else row["message"]
            lines.append(visible(f"- {row['run_id']}: {what}"))  # a file name or reason is data
    lines += ["", "Jobs in job_logs by status:", text_table(frames["jobs"])]
    if frames["trains"].height:
        lines += ["", "Recent train runs:", text_table(frames["trains"])]
    if frames["scores"].height:
        lines += ["", "Recent score runs (ood_forecasts: jobs unlike the champion's training jobs):",
                  text_table(frames["scores"])]
    if frames.get("plans") is not None and frames["plans"].height:
        lines += ["", "Recent capacity plan runs:", text_table(frames["plans"])]
    if frames.get("champions") is not None and frames["champions"].height:
        lines += ["", "Champions, the gate's last decision, and how their own forecasts did on the backtest window "
                  "(backtest_jobs 0: none of this champion's forecasts has completed yet, e.g. one just promoted; the "
                  "gate's reason counts the jobs it judged it on):", text_table(frames["champions"])]
    return "\n".join(lines)


def published_copy_lines(published: Path, problems: list[str], repairs: list[tuple[str, str]],
                         clean: Callable[[str], str], restored: str | None = None) -> str:
    """What is damaged now in the planners' copy, and what the last publishes found damaged and repaired
    (`warehouse/publish.py` `copy_health`), each of those lines made printable by `clean`; a copy `gpucast restore`
    put back (`restored`: when) is said to be that."""
    state = (f"the previous publish's copy, put back by `gpucast restore` at {restored}; the next publish builds it "
             f"again from the warehouse" if restored else "as the last publish wrote it")
    lines = [f"Planners' copy ({published} and its forecast files): "
             + (f"{len(problems)} problem(s) now" + (f" ({state})" if restored else "") + ":" if problems else state)]
    lines += [clean(f"- {problem}") for problem in problems]
    if repairs:
        lines.append("Found damaged and repaired by the last publishes (newest first):")
        lines += [clean(f"- {when}: {what}") for when, what in repairs]
    return "\n\n" + "\n".join(lines)
