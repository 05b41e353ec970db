"""Run a Great Expectations suite (generated from the contract, `suite.py`) on a Polars frame.

Two views of the same suite, each on every row:
* **Great Expectations** validates the batch (`result_format=BOOLEAN_ONLY`): whether each
  expectation holds, and any expectation that could not run;
* **row rules**: each expectation as a Polars condition (`ROW_RULES`), true where a row breaks it,
  which gives each row's list of rule sentences (from the expectation's `meta.rule`) and the
  per-expectation counts for the `validation_results` table.
On every batch the two must agree on whether each expectation holds, or validation raises
`RuleMismatch`; that a rule picks the same rows as GX is tested against GX's own row indexes
(`result_format=COMPLETE`) on dirty simulated logs and edge values (tests/expectations). Asking GX itself for every broken row's index
(`result_format=COMPLETE`) and building the lists from pandas took 1.7x as long (docs/benchmarks.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import polars as pl

from gpucast.expectations.suite import SUITES


@dataclass(frozen=True)
class ExpectationOutcome:
    """One expectation's result on one frame."""

    suite: str
    expectation: str
    column: str | None
    rule: str
    success: bool
    unexpected_count: int
    error: str | None = None


@dataclass
class Validation:
    """Per-row reasons (row position -> sentences) and the per-expectation summary. `broken`: one
    boolean column per outcome with a row rule (named by the outcome's index), true where a row
    breaks it; `outcomes_by` splits the summary by a grouping of the rows (the files of a batch)."""

    reasons: dict[int, list[str]]
    outcomes: list[ExpectationOutcome]
    broken: pl.DataFrame | None = None

    @property
    def success(self) -> bool:
        return all(o.success for o in self.outcomes)

    def outcomes_by(self, groups: pl.Series, keys: list[int]) -> dict[int, list[ExpectationOutcome]]:
        """Per group in `keys` (`groups`: each validated row's group): the outcomes as if that group's rows
        had been validated alone (a group without rows: none broken). A row rule counts the group's own
        rows; an expectation without one (the table's columns) or that could not run keeps the whole
        frame's outcome."""
        ruled = [int(n) for n in self.broken.columns] if self.broken is not None else []
        counts: dict[int, dict[int, int]] = {k: dict.fromkeys(ruled, 0) for k in keys}
        if ruled and self.broken.height:
            per_group = self.broken.with_columns(groups.alias("_group")).group_by("_group").agg(pl.all().sum())
            for row in per_group.iter_rows(named=True):
                group = int(row.pop("_group"))
                counts[group] = {int(n): int(v) for n, v in row.items()}
        return {k: [replace(o, success=per[i] == 0, unexpected_count=per[i]) if i in per else o
                    for i, o in enumerate(self.outcomes)] for k, per in counts.items()}


_BUILDING = threading.Lock()  # one build per suite when `warm_up` runs in a thread beside the first validation


def warm_up(suite_name: str = "job_logs") -> None:
    """Import Great Expectations and build the suite's context now (3-4 s the first time in a process), for
    a caller that has something to wait for meanwhile (`gpucast ingest`: Prefect's temporary server
    starting); `validate_frame` then finds it built, or waits for the build under way."""
    _built(suite_name)


def _built(name: str):
    with _BUILDING:
        return _context_and_suite(name)


@cache
def _context_and_suite(name: str):
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    spec = SUITES[name]()
    # analytics off in the context's own configuration: a nightly batch on a closed network must not
    # phone home (GX's documented switch; no environment variable needed)
    config = DataContextConfig(analytics_enabled=False, store_backend_defaults=InMemoryStoreBackendDefaults())
    context = gx.get_context(mode="ephemeral", project_config=config)
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    suite = context.suites.add(gx.ExpectationSuite(**spec))
    asset = context.data_sources.add_pandas(f"{name}_frames").add_dataframe_asset("frame")
    batch_definition = asset.add_batch_definition_whole_dataframe("whole")
    return batch_definition, suite


def _raised(info: dict | None) -> str | None:
    """The message of an exception GX caught while running an expectation, else None. GX 1.x puts it
    at the top level or, when a metric failed, under each metric's id: both are looked at."""
    if not info:
        return None
    for entry in (info, *[v for v in info.values() if isinstance(v, dict)]):
        if entry.get("raised_exception"):
            return str(entry.get("exception_message") or "the expectation raised an exception")
    return None


def _show(value) -> str:
    if value is None:
        return "nothing"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


class RuleMismatch(RuntimeError):
    """Great Expectations and the row rules judged an expectation differently."""


def _map(column: str, breaks: Callable[[pl.Expr], pl.Expr]) -> pl.Expr:
    """A column-map expectation: GX leaves missing values out (the not-null rule is their judge)."""
    col = pl.col(column)
    return col.is_not_null() & breaks(col)


def _between(kw: dict) -> Callable[[pl.Expr], pl.Expr]:
    def breaks(col: pl.Expr) -> pl.Expr:
        ok = pl.lit(True)
        if kw.get("min_value") is not None:
            ok = ok & ((col > kw["min_value"]) if kw.get("strict_min") else (col >= kw["min_value"]))
        if kw.get("max_value") is not None:
            ok = ok & ((col < kw["max_value"]) if kw.get("strict_max") else (col <= kw["max_value"]))
        return ~ok
    return breaks


def _pair_a_greater(kw: dict) -> pl.Expr:
    if kw.get("ignore_row_if") != "either_value_is_missing":
        raise ValueError("only ignore_row_if='either_value_is_missing' has a row rule")
    a, b = pl.col(kw["column_A"]), pl.col(kw["column_B"])
    return a.is_not_null() & b.is_not_null() & ~((a >= b) if kw.get("or_equal") else (a > b))


# Expectation type -> the condition, on the expectation's kwargs, that a row breaks it (None: a
# table-level expectation, no row breaks it). A suite using another type fails loudly here.
ROW_RULES: dict[str, Callable[[dict], pl.Expr | None]] = {
    "expect_table_columns_to_match_set": lambda kw: None,
    "expect_column_values_to_not_be_null": lambda kw: pl.col(kw["column"]).is_null(),
    "expect_column_values_to_be_in_set": lambda kw: _map(kw["column"], lambda col: ~col.is_in(kw["value_set"])),
    "expect_column_values_to_be_between": lambda kw: _map(kw["column"], _between(kw)),
    "expect_column_value_lengths_to_be_between": lambda kw: _map(
        kw["column"], lambda col: _between(kw)(col.str.len_chars())),
    "expect_column_pair_values_a_to_be_greater_than_b": _pair_a_greater,
}


def _row_rule(expectation_type: str, kwargs: dict, columns: list[str]) -> pl.Expr | None:
    if expectation_type not in ROW_RULES:
        raise NotImplementedError(f"{expectation_type} has no row rule in expectations/validate.py: add one to ROW_RULES")
    needed = [kwargs[k] for k in ("column", "column_A", "column_B") if k in kwargs]
    if any(n not in columns for n in needed):
        return None  # (GX raises on a missing column first, and that outcome never gets here)
    return ROW_RULES[expectation_type](kwargs)


def _sentence(rule: str, kwargs: dict, row: dict) -> str:
    if "column" in kwargs:
        return f"{rule} (got {_show(row[kwargs['column']])})"
    if "column_A" in kwargs:
        a, b = kwargs["column_A"], kwargs["column_B"]
        return f"{rule} (got {a}={row[a]}, {b}={row[b]})"
    return rule


def validate_frame(frame: pl.DataFrame, suite_name: str = "job_logs") -> Validation:
    """Validate `frame` (its row positions are the keys of `reasons`) against a suite."""
    batch_definition, suite = _built(suite_name)
    frame = frame.fill_nan(None)  # pandas, hence GX, reads NaN as missing; Polars would compare it
    batch = batch_definition.get_batch(batch_parameters={"dataframe": frame.to_pandas()})
    result = batch.validate(suite, result_format={"result_format": "BOOLEAN_ONLY"})
    outcomes, rules = [], []
    for res in result.results:
        cfg = res.expectation_config
        kwargs = dict(cfg.kwargs)
        rule = (cfg.meta or {}).get("rule") or cfg.type
        column = kwargs.get("column") or kwargs.get("column_A")
        raised = _raised(res.exception_info)
        if raised:
            # An expectation that crashed must fail loudly, never pass by default (GX issue #10738).
            outcomes.append(ExpectationOutcome(suite_name, cfg.type, column, rule, False, 0, raised))
            continue
        condition = _row_rule(cfg.type, kwargs, frame.columns)
        outcomes.append(ExpectationOutcome(suite_name, cfg.type, column, rule, bool(res.success), 0))
        if condition is not None:
            rules.append((len(outcomes) - 1, kwargs, condition))
    if not rules:
        return Validation({}, outcomes)

    broken = frame.select(*[cond.fill_null(False).alias(str(i)) for i, _, cond in rules])
    counts = broken.sum().row(0)
    for (i, _, _), count in zip(rules, counts, strict=True):
        o = outcomes[i]
        if o.success != (count == 0):
            raise RuleMismatch(
                f"suite {suite_name!r}, {o.expectation} on {o.column}: Great Expectations says "
                f"{'it holds' if o.success else 'it is broken'}, the row rule found {count:,} row(s) breaking it; "
                "fix ROW_RULES in expectations/validate.py")
        outcomes[i] = replace(o, unexpected_count=int(count))
    reasons: dict[int, list[str]] = {}
    flagged = broken.with_row_index("_pos").filter(pl.any_horizontal(pl.exclude("_pos")))
    if flagged.height:
        rows = frame[flagged["_pos"].to_list()].to_dicts()
        for pos, row, marks in zip(flagged["_pos"].to_list(), rows, flagged.drop("_pos").iter_rows(), strict=True):
            reasons[pos] = [_sentence(outcomes[i].rule, kwargs, row)
                            for (i, kwargs, _), hit in zip(rules, marks, strict=True) if hit]
    return Validation(reasons, outcomes, broken)
