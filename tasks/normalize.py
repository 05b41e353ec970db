"""Turn a chunk of string columns into typed contract columns, naming every value that will not parse.

Parsing rules live here (a value that is not a number, a whole number, a boolean or a timestamp);
quality rules on the typed values (ranges, allowed sets, required fields) live in the Great
Expectations suite `expectations/suites/job_logs.json`. Each broken parsing rule adds a sentence
to the row's `_errors` list.
"""

from __future__ import annotations

import polars as pl

from gpucast.tasks import contract as c

MISSING_TOKENS = ("", "null", "none", "na", "n/a")
TRUE_TOKENS = ("true", "t", "yes", "y", "1", "on", "1.0")
FALSE_TOKENS = ("false", "f", "no", "n", "0", "off", "0.0", "none")

STATUS_SYNONYMS = {
    "QUEUED": "PENDING",
    "SUBMITTED": "PENDING",
    "WAITING": "PENDING",
    "STARTED": "RUNNING",
    "SUCCEEDED": "COMPLETED",
    "SUCCESS": "COMPLETED",
    "DONE": "COMPLETED",
    "FINISHED": "COMPLETED",
    "ERROR": "FAILED",
    "OOM": "FAILED",
    "CANCELED": "CANCELLED",
    "KILLED": "CANCELLED",
}
PRECISION_SYNONYMS = {
    **dict.fromkeys(("fp16", "float16", "half", "16", "f16", "amp", "mixed", "fp16-mixed"), "FP16"),
    **dict.fromkeys(("bf16", "bfloat16", "bf16-mixed"), "BF16"),
    **dict.fromkeys(("fp32", "float32", "single", "float", "32", "f32", "tf32"), "FP32"),
    **dict.fromkeys(("fp64", "float64", "double", "64", "f64"), "FP64"),
}
MODEL_TYPE_SYNONYMS = {
    **{m.lower(): m for m in c.KNOWN_MODEL_TYPES},
    "convnet": "CNN",
    "resnet50": "ResNet",
    "transformers": "Transformer",
}
OPTIMIZER_SYNONYMS = {o.lower(): o for o in c.KNOWN_OPTIMIZERS}

TIMESTAMP_FORMATS = (
    "%Y-%m-%dT%H:%M:%S%.f%z",
    "%Y-%m-%d %H:%M:%S%.f%z",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%dT%H:%M%z",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%d",
)


def _text(name: str, missing: tuple[str, ...] = MISSING_TOKENS) -> pl.Expr:
    """The stripped value, or null for a missing token."""
    s = pl.col(name).str.strip_chars()
    return pl.when(s.str.to_lowercase().is_in(missing)).then(None).otherwise(s)


def _error(cond: pl.Expr, name: str, what: str) -> pl.Expr:
    """`"<name>: '<value>' <what>"` where `cond` holds, else null."""
    return pl.when(cond).then(pl.format("{}: '{}' " + what, pl.lit(name), _text(name).str.slice(0, 60)))


def _number(name: str, integer: bool) -> tuple[pl.Expr, pl.Expr]:
    s = _text(name)
    v = s.cast(pl.Float64, strict=False)
    bad = s.is_not_null() & v.is_null()
    not_finite = v.is_not_null() & ~v.is_finite()
    err = (
        _error(bad, name, "is not a number")
        .when(not_finite).then(pl.format("{}: {} is not a finite number", pl.lit(name), s))
    )
    if integer:
        fractional = v.is_finite() & (v != v.round(0))
        err = err.when(fractional).then(pl.format("{}: {} is not a whole number", pl.lit(name), s))
        ok = v.is_finite() & ~fractional & (v.abs() < 9.0e18)
        return pl.when(ok).then(v).otherwise(None).cast(pl.Int64), err
    return pl.when(v.is_finite()).then(v).otherwise(None), err


def _boolean(name: str) -> tuple[pl.Expr, pl.Expr]:
    # "none" is an answer here (no regularization), not a missing value
    s = _text(name, tuple(t for t in MISSING_TOKENS if t != "none")).str.to_lowercase()
    value = pl.when(s.is_in(TRUE_TOKENS)).then(True).when(s.is_in(FALSE_TOKENS)).then(False)
    bad = s.is_not_null() & ~s.is_in(TRUE_TOKENS) & ~s.is_in(FALSE_TOKENS)
    return value.otherwise(None), _error(bad, name, "is not a yes/no value (true/false, yes/no, 1/0)")


def _timestamp(name: str) -> tuple[pl.Expr, pl.Expr]:
    s = _text(name).str.replace(r"[Zz]$", "+00:00")
    parsed = pl.coalesce(
        [s.str.to_datetime(format=f, strict=False, time_zone="UTC", time_unit="us") for f in TIMESTAMP_FORMATS]
    )
    bad = s.is_not_null() & parsed.is_null()
    return parsed, _error(bad, name, "is not an ISO 8601 timestamp (e.g. 2026-11-01T10:00:00Z)")


def _canonical(name: str, synonyms: dict[str, str], upper: bool = False) -> pl.Expr:
    s = _text(name)
    key = s.str.to_lowercase()
    fallback = s.str.to_uppercase() if upper else s
    return key.replace_strict(synonyms, default=fallback, return_dtype=pl.String)


def normalize(chunk: pl.DataFrame) -> pl.DataFrame:
    """Typed contract columns + `_row`, `_raw` and `_errors` (list of parsing-rule sentences)."""
    missing = [n for n in c.COLUMNS if n not in chunk.columns]
    chunk = chunk.with_columns([pl.lit(None, dtype=pl.String).alias(n) for n in missing])
    values: dict[str, pl.Expr] = {}
    errors: list[pl.Expr] = [pl.col("_read_error")]
    for name in c.FLOAT_COLUMNS + c.INT_COLUMNS:
        values[name], err = _number(name, integer=name in c.INT_COLUMNS)
        errors.append(err)
    for name in c.BOOL_COLUMNS:
        values[name], err = _boolean(name)
        errors.append(err)
    for name in c.TIMESTAMP_COLUMNS:
        values[name], err = _timestamp(name)
        errors.append(err)

    status = _text(c.STATUS).str.to_uppercase()
    values[c.STATUS] = status.replace_strict(STATUS_SYNONYMS, default=status, return_dtype=pl.String)
    values[c.PRECISION] = _canonical(c.PRECISION, PRECISION_SYNONYMS, upper=True)
    values[c.MODEL_TYPE] = _canonical(c.MODEL_TYPE, MODEL_TYPE_SYNONYMS)
    values[c.OPTIMIZER] = _canonical(c.OPTIMIZER, OPTIMIZER_SYNONYMS)
    values[c.JOB_ID] = _text(c.JOB_ID)
    values[c.QUEUE] = _text(c.QUEUE).fill_null(c.DEFAULT_QUEUE)
    values[c.TEAM] = _text(c.TEAM)
    values[c.FAILURE_REASON] = _text(c.FAILURE_REASON)

    return chunk.select(
        "_row",
        "_raw",
        *[values[n].alias(n) for n in c.COLUMNS],
        pl.concat_list([e.cast(pl.String) for e in errors]).list.drop_nulls().alias("_errors"),
    )
