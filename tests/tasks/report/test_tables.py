"""The CLI's tables printed from DuckDB's rows without Polars (`tasks/report/tables.py`, issue 52 item 4) are the text
Polars prints for the same rows, and what the plain printer cannot lay out as Polars would is printed by Polars."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime
from decimal import Decimal

import polars as pl
import pytest

from gpucast.records.rows import Rows
from gpucast.tasks.report import render, tables
from gpucast.tasks.report.sql_table import sql_table

AT = datetime(2026, 11, 28, 19, 25, 10, tzinfo=UTC)
# Floats at the edges of Polars' formats (whole numbers, 9 characters, 1e-6, the scientific bound) and in between.
FLOATS = [0.0, -0.0, 1.0, -1.0, 2.2, 0.1, 1 / 3, 123456.789, 999998.0, 999999.0, 1e6, 1e7, 1234567.5, 1000000.5,
          488146157.0, 1e9, 1e10, 12345678901.5, 1e-5, 1e-6, 9.9e-7, 1.5e-6, 1.5e-7, 0.000123456789, 12.0000000001,
          99999.99999, 1e16, 1e300, 5e-324, float("nan"), float("inf"), float("-inf"), 18255.928, 0.979]


def rows(columns: dict[str, tuple[str, list]]) -> Rows:
    """Rows from {name: (DuckDB type, values)}."""
    kinds = tuple(kind for kind, _ in columns.values())
    return Rows(tuple(columns), kinds, tuple(zip(*(values for _, values in columns.values()), strict=True)))


def polars_cli(r: Rows) -> str:
    """What the CLI printed before: the rows as the frame DuckDB's `.pl()` gives, through Polars."""
    return tables.text_table(tables.frame(r))


MIXED = rows({
    "run_id": ("VARCHAR", ["ingest-1", "a-much-longer-run-name", None, "", "x" * 81]),
    "started_at": ("TIMESTAMP WITH TIME ZONE", [AT, AT.replace(microsecond=500_000), AT.replace(microsecond=808_100),
                                                 None, AT.replace(microsecond=123)]),
    "day": ("DATE", [date(2026, 11, 1), None, date(2026, 1, 2), date(1999, 12, 31), date(2026, 2, 28)]),
    "seconds": ("DOUBLE", [2.2, 0.0, None, 1e-7, 1234567.891]),
    "rows_read": ("BIGINT", [216, -5, 0, None, 2**40]),
    "ok": ("BOOLEAN", [True, False, None, True, False]),
    "total": ("HUGEINT", [1, 10**9, None, 0, -3]),
    "whole": ("DECIMAL(18,0)", [Decimal(5), None, Decimal(-12), Decimal(0), Decimal(10**9)]),
})


def test_a_status_table_is_what_polars_printed():
    text = tables.plain_text(MIXED.with_strings(str), tables.CLI)
    assert text is not None  # laid out without Polars (not the fallback)
    assert text == polars_cli(MIXED)
    assert "x" * 80 + "…" in text and "2026-11-28 19:25:10.808100 UTC" in text and "1.2346e6" in text


@pytest.mark.parametrize("r", [
    rows({"n": ("BIGINT", [])}),  # no rows
    Rows((), (), ()),  # no columns (a statement without a result)
    rows({"count_star()": ("BIGINT", [200])}),
    rows({"x": ("DOUBLE", FLOATS)}),
    rows({"naive": ("TIMESTAMP", [datetime(2026, 1, 1), datetime(2026, 1, 1, 0, 0, 0, 123), None,
                                  datetime(2026, 12, 31, 23, 59, 59, 999_000)]),
          "long": ("VARCHAR", ["x" * 300, "", None, "a b"]), "big": ("BIGINT", [2**62, -(2**63), 0, None])}),
], ids=["no-rows", "no-columns", "one-count", "floats", "times-and-long-text"])
def test_the_sql_table_is_what_polars_printed(r):
    assert tables.plain_text(r, tables.SQL) is not None
    assert sql_table(r, 2_500) == "".join(render.query_result_parts(tables.frame(r), "table", 2_500))


def test_floats_of_every_magnitude_are_shown_as_polars_shows_them():
    """A sample of the 200,000 values the format was checked on (whole, rounded and any, 1e-9 to 1e14)."""
    rng = random.Random(52)
    values = []
    for _ in range(3_000):
        v = rng.choice([-1, 1]) * 10 ** rng.uniform(-9, 14)
        pick = rng.random()
        values.append(round(v, rng.randint(0, 4)) if pick < 0.3 else float(int(v)) if pick < 0.4 else v)
    with pl.Config(tbl_rows=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        shown = [line.split("│")[1].strip() for line in str(pl.DataFrame({"x": values})).splitlines()[3:-1]]
    assert [tables.polars_float(v) for v in values] == shown


@pytest.mark.parametrize("r", [
    rows({"queue": ("VARCHAR", ["gpu-é", "a"])}),  # Polars measures display widths: left to it
    rows({"n": ("BIGINT", list(range(tables.CLI.rows + 1)))}),  # Polars shows the first and last rows
    rows({f"c{i}": ("VARCHAR", ["y" * 30]) for i in range(8)}),  # wider than 200: Polars wraps cells
    rows({f"c{i}": ("BIGINT", [i]) for i in range(tables.CLI.cols + 1)}),  # Polars elides the middle columns
], ids=["non-ascii", "rows", "width", "columns"])
def test_what_it_cannot_lay_out_as_polars_is_printed_by_polars(r):
    assert tables.plain_text(r, tables.CLI) is None
    assert tables.text_table(r) == polars_cli(r)
