"""Any export through a mapping file (`gpucast ingest PATH... --mapping FILE`): source columns to
contract fields, unit conversions, value maps and constants, read from YAML (docs/sources.md).

    fields:                  # contract field: source column, or {column: ..., unit: ..., format: ...}
      job_id: JobID
      peak_gpu_mem_gb: {column: MaxGPUMem, unit: MiB}
    values:                  # contract field: {source value: contract value}
      status: {DONE: COMPLETED}
    constants:               # contract field: the value of every row
      queue: a100-80g

The reader names a mapped column by its field (`field_for`); `apply` then converts a chunk's
values, still text, so the normaliser and the contract's rules judge them as they judge any file.
A mapping that names a field the contract does not have, a unit it does not know, ... is refused
with its file and line (`MappingError`, a ValueError: exit 2).
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from gpucast.expectations import contract as c
from gpucast.records.plain_yaml import PLAIN_TAGS, line_of, read_config, shown_key, where
from gpucast.tasks.ingest.normalize import normalize
from gpucast.tasks.ingest.readers import FileRejected, _open_text, header_key, normalise_name, sniff_format

SECTIONS = ("fields", "values", "constants")
FIELD_KEYS = ("column", "unit", "format")

# Each unit's size in its family's base unit (bytes, seconds, FLOP/s). A contract field converts
# from the units of the family its own unit (`Field.unit`) belongs to; GB are decimal (10^9 bytes),
# as everywhere in gpucast. Names are matched without regard to case.
UNIT_FAMILIES: tuple[dict[str, int], ...] = (
    {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
     "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40},
    {"seconds": 1, "s": 1, "minutes": 60, "min": 60, "hours": 3600, "h": 3600, "days": 86400},
    {"FLOP/s": 1, "FLOPS": 1, "GFLOP/s": 10**9, "GFLOPS": 10**9, "TFLOP/s": 10**12, "TFLOPS": 10**12,
     "PFLOP/s": 10**15, "PFLOPS": 10**15},
)


def _family(unit: str) -> dict[str, int] | None:
    return next((fam for fam in UNIT_FAMILIES if unit.lower() in {u.lower() for u in fam}), None)


UNITS = {f.name: fam for f in c.FIELDS if (fam := _family(f.unit))}  # field -> the units it converts from
NAMED_KINDS = ("string", "status", "precision", "bool")  # fields whose values a value map may rename


class MappingError(ValueError):
    """A mapping file, or a file it is asked to read, that cannot be used: one line, with file and line."""


@dataclass(frozen=True)
class Mapping:
    """A parsed mapping file. Values are kept as written (YAML's own typing is not applied: `NO` stays `NO`)."""

    path: str
    sha256: str
    columns: dict[str, str] = field(default_factory=dict)  # source column, as written -> contract field
    scale: dict[str, tuple[int, int]] = field(default_factory=dict)  # field -> (multiply, divide)
    formats: dict[str, str] = field(default_factory=dict)  # timestamp field -> strptime format
    values: dict[str, dict[str, str]] = field(default_factory=dict)  # field -> {source value, lower case: value}
    constants: dict[str, str] = field(default_factory=dict)  # field -> the value of every row

    def field_for(self, column: str, usual: Callable[[str], str] = normalise_name) -> str:
        """A source column's contract name: the mapping's, else the usual spelling (`usual`: a source's own
        names, e.g. MLflow's params); a column whose usual name the mapping fills from another column or a
        constant is ignored ("")."""
        key = header_key(column)
        mapped = {header_key(s): f for s, f in self.columns.items()}
        if key in mapped:
            return mapped[key]
        name = usual(column)
        return "" if name in set(self.columns.values()) | set(self.constants) else name

    def apply(self, chunk: pl.DataFrame) -> pl.DataFrame:
        """A read chunk (text columns named by `field_for`) with units converted, timestamps in ISO 8601,
        values renamed and constants set. A value a conversion cannot read is left as it was, for the
        normaliser's rule to name ("'abc' is not a number"). `_raw` keeps the record as the source wrote it."""
        source = {f: s for s, f in self.columns.items()}
        present = [n for n in chunk.columns if not n.startswith("_")]
        exprs = []
        if present and "_raw" in chunk.columns:
            as_written = pl.struct([pl.col(n).alias(source.get(n, n)) for n in present]).struct.json_encode()
            exprs.append(pl.coalesce(pl.col("_raw"), as_written).alias("_raw"))
        for name in present:
            text = pl.col(name).str.strip_chars()
            if name in self.scale:
                mul, div = self.scale[name]
                number = text.cast(pl.Float64, strict=False)
                exprs.append(pl.when(number.is_not_null()).then((number * mul / div).cast(pl.String))
                             .otherwise(pl.col(name)).alias(name))
            elif name in self.formats:
                when = text.str.to_datetime(self.formats[name], strict=False, time_zone="UTC", time_unit="us")
                exprs.append(pl.when(when.is_not_null()).then(when.dt.strftime("%Y-%m-%dT%H:%M:%S%.6fZ"))
                             .otherwise(pl.col(name)).alias(name))
            elif name in self.values:
                exprs.append(text.str.to_lowercase().replace_strict(self.values[name], default=pl.col(name),
                                                                    return_dtype=pl.String).alias(name))
        exprs += [pl.lit(v, dtype=pl.String).alias(f) for f, v in self.constants.items()]
        return chunk.with_columns(exprs)


def named_fields(source: dict[str, str], mapping: Mapping | None,
                 usual: Callable[[str], str] = normalise_name) -> dict[str, str]:
    """Contract fields from one record's named values (a JSON Comment's keys, an MLflow run's params and
    tags): each name through the mapping's `fields`, else `usual`; the first value of a field wins; then
    the mapping's units, value maps, timestamp formats and constants. Values stay text."""
    out: dict[str, str] = {}
    for key, value in source.items():
        name = mapping.field_for(key, usual) if mapping else usual(key)
        if name in c.COLUMNS and name not in out:
            out[name] = value
    if mapping:
        frame = pl.DataFrame({"_one": ["1"], **{k: [v] for k, v in out.items()}},
                             schema={"_one": pl.String, **{k: pl.String for k in out}})
        applied = mapping.apply(frame).drop("_one").row(0, named=True)
        out = {k: v for k, v in applied.items() if v is not None}
    return out


# Parsing -----------------------------------------------------------------------------------------

def load_mapping(path: str | Path) -> Mapping:
    """Parse and check a mapping file; raise `MappingError` naming the file and line of the first problem."""
    shown = str(path)
    root, data = read_config(path, MappingError, "mapping file", "docs/sources.md")  # the one reader (plain_yaml)
    if root is None:
        raise MappingError(f"{where(shown, 1)}: empty; write the sections {', '.join(SECTIONS)} (docs/sources.md)")
    return _Parser(shown, hashlib.sha256(data).hexdigest()).parse(root)


class _Parser:
    def __init__(self, shown: str, sha256: str):
        self.shown, self.sha256 = shown, sha256

    def fail(self, node: yaml.Node, what: str) -> MappingError:
        return MappingError(f"{where(self.shown, line_of(node))}: {what}")

    def pairs(self, node: yaml.Node, what: str) -> list[tuple[str, yaml.Node, yaml.Node]]:
        """(key, key node, value node) of a YAML mapping; refuses tags, other shapes and repeated keys."""
        self.plain(node)
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping (`name: value` lines)")
        out, seen = [], {}
        for k, v in node.value:
            key = self.scalar(k, "a key")
            # a key written twice is refused by the loader (plain_yaml); these are keys that are one only once read:
            # `job_id` and `"job_id "` (a key is read without its edge spaces), `1` and `"1"` (two tags, one name)
            if key in seen:
                raise self.fail(k, f"{shown_key(key)} is given twice (first on line {seen[key]}, written another way: "
                                   "quoted, or with spaces); keep one")
            seen[key] = line_of(k)
            out.append((key, k, v))
        return out

    def plain(self, node: yaml.Node) -> None:
        if node.tag not in PLAIN_TAGS:
            raise self.fail(node, f"YAML tags are not allowed ({node.tag}); write plain values")

    def scalar(self, node: yaml.Node, what: str) -> str:
        self.plain(node)
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, f"{what} must be a single value")
        if node.tag.endswith(":null") and node.value in ("", "~", "null", "Null", "NULL"):
            raise self.fail(node, f"{what} is missing")
        return node.value.strip()

    def contract_field(self, key: str, node: yaml.Node) -> c.Field:
        if key not in c.FIELD_BY_NAME:
            raise self.fail(node, f"unknown contract field {shown_key(key)} (fields: {', '.join(c.COLUMNS)})")
        return c.FIELD_BY_NAME[key]

    def parse(self, root: yaml.Node) -> Mapping:
        m = Mapping(self.shown, self.sha256)
        sections = self.pairs(root, "a mapping file")
        for name, key, _ in sections:
            if name not in SECTIONS:
                raise self.fail(key, f"unknown section {shown_key(name)} (sections: {', '.join(SECTIONS)})")
        for name, _, value in sorted(sections, key=lambda s: SECTIONS.index(s[0])):  # constants after fields
            getattr(self, f"_{name}")(m, value)
        return m

    def _fields(self, m: Mapping, node: yaml.Node) -> None:
        where: dict[str, yaml.Node] = {}
        for name, key, value in self.pairs(node, "`fields`"):
            f = self.contract_field(name, key)
            if isinstance(value, yaml.MappingNode):
                spec = {k: (self.scalar(v, k), kn) for k, kn, v in self.pairs(value, f"the field {name}")}
                for k, (_, kn) in spec.items():
                    if k not in FIELD_KEYS:
                        raise self.fail(kn, f"unknown key {k!r} for {name} (keys: {', '.join(FIELD_KEYS)})")
                if "column" not in spec:
                    raise self.fail(value, f"{name} needs `column:` (the source column it comes from)")
                column = spec["column"][0]
                if "unit" in spec:
                    m.scale[name] = self.unit(f, *spec["unit"])
                if "format" in spec:
                    m.formats[name] = self.time_format(f, *spec["format"])
            else:
                column = self.scalar(value, f"the source column of {name}")
            if header_key(column) in where:
                raise self.fail(value, f"column {column!r} is already mapped, at line "
                                       f"{where[header_key(column)].start_mark.line + 1}; map each column once")
            where[header_key(column)] = value
            m.columns[column] = name

    def unit(self, f: c.Field, unit: str, node: yaml.Node) -> tuple[int, int]:
        if f.name not in UNITS:
            raise self.fail(node, f"{f.name} has no unit to convert to ({f.unit or 'no unit'}); "
                                  f"units apply to {', '.join(UNITS)}")
        family = {u.lower(): size for u, size in UNITS[f.name].items()}
        if unit.lower() not in family:
            raise self.fail(node, f"unknown unit {unit!r} for {f.name} (units: {', '.join(UNITS[f.name])})")
        mul, div = family[unit.lower()], family[f.unit.lower()]
        return mul // math.gcd(mul, div), div // math.gcd(mul, div)  # 1 TFLOPS = 1000/1 GFLOPS, exactly

    def time_format(self, f: c.Field, fmt: str, node: yaml.Node) -> str:
        if f.kind != "timestamp":
            raise self.fail(node, f"`format` is for timestamps ({', '.join(c.TIMESTAMP_COLUMNS)}), not {f.name}")
        try:
            pl.Series(["2026-11-01"]).str.to_datetime(fmt, strict=False)
        except (pl.exceptions.PolarsError, ValueError) as exc:
            raise self.fail(node, f"{fmt!r} is not a strptime format ({exc.__class__.__name__}); e.g. "
                                  "'%Y-%m-%d %H:%M:%S'") from None
        return fmt

    def _values(self, m: Mapping, node: yaml.Node) -> None:
        for name, key, value in self.pairs(node, "`values`"):
            f = self.contract_field(name, key)
            if f.kind not in NAMED_KINDS:
                raise self.fail(key, f"value maps rename names ({f.name} is a {f.kind}); for numbers use a `unit`")
            renames: dict[str, str] = {}
            for src, sk, target in self.pairs(value, f"the values of {name}"):
                if src.lower() in renames:
                    raise self.fail(sk, f"{src!r} is given twice (values are matched without regard to case)")
                renames[src.lower()] = self.value(f, self.scalar(target, f"the value for {src!r}"), target)
            m.values[name] = renames

    def _constants(self, m: Mapping, node: yaml.Node) -> None:
        for name, key, value in self.pairs(node, "`constants`"):
            f = self.contract_field(name, key)
            if f.name == c.JOB_ID:
                raise self.fail(key, "job_id cannot be a constant: it names each job")
            if f.name in m.columns.values():
                raise self.fail(key, f"{f.name} is both a column in `fields` and a constant; keep one")
            m.constants[name] = self.value(f, self.scalar(value, f"the constant {name}"), value)

    def value(self, f: c.Field, text: str, node: yaml.Node) -> str:
        """A value the mapping writes into `f`: it must pass the normaliser's rule and the field's allowed set."""
        row = normalize(pl.DataFrame({f.name: [text], "_row": [1], "_raw": [None], "_read_error": [None]},
                                     schema={f.name: pl.String, "_row": pl.Int64, "_raw": pl.String,
                                             "_read_error": pl.String}))
        if errors := row["_errors"][0].to_list():
            raise self.fail(node, "; ".join(errors))
        if f.values and row[f.name][0] not in f.values:
            raise self.fail(node, f"{text!r} is not a {f.name} (one of {', '.join(f.values)})")
        return text


# Checking files against a mapping, before anything is read -----------------------------------

def check_files(mapping: Mapping, files: list[str] | list[Path]) -> None:
    """Raise `MappingError` for the first file that is not the export the mapping describes: a format
    gpucast does not read, or a CSV/Parquet header without the mapped (or required) columns. JSON Lines
    are checked line by line, as without a mapping; a file damaged past its header is left to the reader."""
    for p in map(Path, files):
        if p.is_symlink():
            continue  # refused unread by staging
        try:
            fmt, compressed = sniff_format(p)
        except FileRejected as exc:
            raise MappingError(f"{p}: {exc.reason}; --mapping reads CSV, JSON Lines or Parquet exports") from None
        header = _header(p, fmt, compressed)
        if header is None:
            continue
        keys = {header_key(h) for h in header}
        absent = [s for s in mapping.columns if header_key(s) not in keys]
        named = {mapping.field_for(h) for h in header} | set(mapping.constants)
        absent += [r for r in c.REQUIRED if r not in named and r not in mapping.columns.values()]
        if absent:
            raise MappingError(
                f"{p}: not the export {mapping.path} describes: no column(s) {', '.join(absent)} in its header "
                f"(found {', '.join(header) or 'nothing'}); ingest it with its own mapping, or without --mapping")


def _header(path: Path, fmt: str, compressed: bool) -> list[str] | None:
    """A CSV's or Parquet file's column names; None for JSON Lines, an empty or an unreadable file."""
    try:
        if fmt == "csv":
            with _open_text(path, compressed) as f:
                return next(csv.reader(f), None)
        if fmt == "parquet" and not compressed:
            return list(pq.ParquetFile(path).schema_arrow.names)
    except (UnicodeDecodeError, EOFError, OSError, csv.Error, pa.ArrowException):
        return None
    return None
