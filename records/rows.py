"""A query's result as DuckDB's own fetch returns it: what the quick read commands (`gpucast status`, `gpucast sql`
as a table) print.

A few rows need neither Polars nor PyArrow: importing the two (with numpy) took 0.4-0.5 CPU-s of commands that may
take 0.5 s in all (issue 52 item 4, docs/benchmarks.md). `warehouse/queries.py` fills it, `tasks/report/tables.py`
prints it as Polars would have.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

# The DuckDB types a `Rows` carries (`plain_type`): their Python values are what `tasks/report/tables.py` formats as
# Polars does (a DECIMAL with no fraction digits too: `gpucast sql` shows it as an integer). Any other type (FLOAT,
# DECIMAL with a fraction, lists, structs, blobs, intervals ...) is read through Polars as before.
PLAIN_TYPES = frozenset({"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                         "UINTEGER", "UBIGINT", "DOUBLE", "VARCHAR", "DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE"})
_WHOLE_DECIMAL = re.compile(r"DECIMAL\(\d+,0\)")


def plain_type(kind: str) -> bool:
    """Whether a column of DuckDB type `kind` (its name, `str(DuckDBPyType)`) can be a `Rows` column."""
    return kind in PLAIN_TYPES or _WHOLE_DECIMAL.fullmatch(kind) is not None


@dataclass(frozen=True)
class Rows:
    """Column names, their DuckDB type names (`str(DuckDBPyType)`: "VARCHAR", "TIMESTAMP WITH TIME ZONE", ...; each a
    `plain_type`) and the rows, as tuples of the Python values DuckDB's `fetchall` gives (None for NULL)."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    time_zone: str = "UTC"  # the session's TimeZone, in which DuckDB gave the TIMESTAMP WITH TIME ZONE values

    @property
    def height(self) -> int:
        """The number of rows (the name Polars' frames use: the report reads either)."""
        return len(self.rows)

    def iter_rows(self, named: bool = False) -> Iterator[tuple[Any, ...] | dict[str, Any]]:
        """Each row, as a tuple or (`named`) a dict by column name, as Polars' `DataFrame.iter_rows` gives them."""
        for row in self.rows:
            yield dict(zip(self.columns, row, strict=True)) if named else row

    def with_strings(self, f: Callable[[str], str]) -> Rows:
        """These rows with `f` applied to every text value (not to NULLs)."""
        return Rows(self.columns, self.types,
                    tuple(tuple(f(v) if isinstance(v, str) else v for v in row) for row in self.rows), self.time_zone)
