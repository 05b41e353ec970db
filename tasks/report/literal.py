"""Strings from data (a queue, a team, a model type, a job id) are shown literally, wherever they are shown.

A job log can hold any text: `$x^$`, `q|pipe`, `_hidden`, `**bold**`, NUL, ESC. Each way of showing
text interprets some of it, so each has one function here, applied where that way of showing begins:

* `visible` / `visible_frame`: control characters (C0, DEL, C1) and the two characters XML cannot hold
  at all (U+FFFE, U+FFFF) become `\\xNN` / `\\uNNNN` escapes: they would start new rows in a text or
  Markdown table, send terminal escape sequences, make an SVG chart ill-formed XML, and a NUL cannot be
  stored in a PostgreSQL-backed Prefect artifact. The page, the CLI's tables and the artifacts use it.
* `markdown_text` / `markdown_frame`: `visible`, then every character CommonMark or a GFM table would
  act on inline (`\\`, backtick, `*`, `_`, `~`, `[`, `]`, `<`, `>`, `&`, `|`) backslash-escaped, the escape
  CommonMark defines for any ASCII punctuation (spec section 2.4): a cell stays one cell and shows
  its text, not emphasis, code, a link, HTML or an entity.
* `plain` / `legend`: matplotlib parses any text with two `$` as TeX (mathtext; an unbalanced one
  raises) and a legend skips labels that start with `_`; `plain` turns the parsing off on the
  artists that show data (`Text.set_parse_math(False)`, no `usetex`), and `legend` takes its labels
  as given. Axis tick labels are left alone: a log axis draws its ticks with mathtext.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `visible` is all `gpucast status` and `sql` use: they print without Polars (tables.py)
    import polars as pl

# Every character no reader should receive raw: Unicode category Cc, and XML's two non-characters.
_ESCAPES = {chr(c): f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))} | {
    "\ufffe": "\\ufffe", "\uffff": "\\uffff"}
_TRANSLATE = str.maketrans(_ESCAPES)
MARKDOWN_INLINE = "\\`*_~[]<>&|"
_MARKDOWN = str.maketrans({ch: "\\" + ch for ch in MARKDOWN_INLINE})


def visible(text: str) -> str:
    """`text` with every control character written as its escape (see the module doc)."""
    return text.translate(_TRANSLATE)


def markdown_text(text: str) -> str:
    """`text` as Markdown that shows exactly `visible(text)`, also inside a table cell."""
    return visible(text).translate(_MARKDOWN)


def _strings(df: pl.DataFrame, expr) -> pl.DataFrame:
    """Apply `expr(column)` to every String column and to the strings of every List(String) column."""
    import polars as pl

    return df.with_columns(
        [expr(pl.col(name)) for name, dtype in df.schema.items() if dtype == pl.String]
        + [pl.col(name).list.eval(expr(pl.element())) for name, dtype in df.schema.items()
           if dtype == pl.List(pl.String)])


def _visible_expr(col: pl.Expr) -> pl.Expr:
    return col.str.replace_many(_ESCAPES)


def visible_frame(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with `visible` applied to every string."""
    return _strings(df, _visible_expr)


def markdown_frame(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with `markdown_text` applied to every string."""
    return _strings(df, lambda col: _visible_expr(col).str.replace_many(
        {ch: "\\" + ch for ch in MARKDOWN_INLINE}))


def plain(*texts):
    """matplotlib `Text` artists that show data: drawn as their characters (`visible`), never as TeX."""
    for t in texts:
        t.set_text(visible(t.get_text()))
        t.set_usetex(False)
        t.set_parse_math(False)
    return texts


def legend(ax, handles: list, labels: list[str], **kwargs):
    """`ax.legend` with one entry per handle, every label shown as given (also one that starts with `_`)."""
    drawn = ax.legend(handles, labels, **kwargs)
    plain(*drawn.get_texts())
    return drawn
