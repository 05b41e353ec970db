"""`gpucast sql`'s table (issue 52 item 4): DuckDB's rows laid out by `tables.plain_text` without Polars, else by
`render.query_result_parts` (Polars), the same text either way. A module of its own because it needs both: `render`
imports `tables`, so `tables` cannot import `render` back (tests/test_one_definition.py: no import cycles)."""
from __future__ import annotations

from gpucast.records.rows import Rows
from gpucast.tasks.report.literal import visible
from gpucast.tasks.report.tables import SQL, TABLE_MAX_WIDTH, frame, plain_text, rows_line


def sql_table(rows: Rows, total: int | None = None) -> str:
    """`gpucast sql`'s table of DuckDB's rows (`render.query_result_parts`' table, the same text): every row given,
    strings whole up to TABLE_MAX_WIDTH characters, and the line with the row count."""
    shown = rows.with_strings(lambda s: visible(s[:TABLE_MAX_WIDTH + 1]))
    table = plain_text(shown, SQL)
    if table is None:
        from gpucast.tasks.report.render import query_result_parts  # Polars: only where plain_text cannot match it

        return "".join(query_result_parts(frame(rows), "table", total))
    return f"{table}\n({rows_line(rows.height, rows.height if total is None else total)})\n"
