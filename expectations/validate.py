"""Run a Great Expectations suite (generated from the contract, `suite.py`) on job rows.

Two views of the same suite (issue 52, decision 1):
* **row rules** (`check_rows`): each expectation as a Polars condition (`ROW_RULES`), true where a row breaks
  it. They decide which rows are good and which are quarantined, with each row's list of rule sentences (from the
  expectation's `meta.rule`) and the per-expectation counts for the `validation_results` table. They run on
  every chunk the ingest reads: Polars is ~0.1 s a million rows here, where GX on pandas took 1.2-1.4 s plus
  the frame's conversion, chunk after chunk.
* **Great Expectations** validates the run's checked rows **once per run**, over DuckDB (`validate_staged`: GX's
  SQL data source through duckdb-engine on a DuckDB view over the Parquet files the ingest staged), with
  `result_format=BOOLEAN_ONLY`: whether each expectation holds, and any expectation that could not run.
The two must agree on whether each expectation holds over the run (`agree`), or validation raises
`RuleMismatch` and the run fails, nothing loaded or published half-checked. That a rule picks the same rows as GX
is tested against GX's own row indexes (`result_format=COMPLETE`) on dirty simulated logs and edge values
(tests/expectations). `validate_frame` is both views on one frame (the tests' way in).

GX runs in a process of its own, the judge (`judge.py`, started by `warm_up` or the first validation, asked
over a pipe): duckdb-engine, GX's way into DuckDB, and torch in one process print ~40 "nanobind: leaked" lines at
every exit (`python -c "import torch, duckdb_engine"`; the cause in judge.py's doc), and a nightly or a test
process imports torch. This module never imports duckdb-engine (tests/expectations/test_judge.py).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

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


class _Worker:
    """The judge process (`judge.py`), started once per process and asked over a pipe, one request at a time."""

    def __init__(self, command: tuple[str, ...] = (sys.executable, "-m", "gpucast.expectations.judge")) -> None:
        self.command = command
        self.lock = threading.Lock()
        self.process: subprocess.Popen | None = None
        self.pending = 0  # requests sent whose answer is not read yet (a warm-up's)
        self.starts = 0

    def send(self, request: dict) -> None:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(list(self.command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                            encoding="utf-8", bufsize=1)
            self.pending, self.starts = 0, self.starts + 1
            atexit.register(self.close)
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        self.pending += 1

    def answer(self) -> dict:
        """The answer to the last request sent (earlier ones, a warm-up's, read and dropped)."""
        while self.pending:
            line = self.process.stdout.readline()
            self.pending -= 1
            if not line:
                code = self.process.wait()
                raise RuntimeError(f"Great Expectations' judge (python -m gpucast.expectations.judge) ended, exit code "
                                   f"{code}: its error is on stderr above")
        return json.loads(line)

    def close(self) -> None:
        """End of input: the judge releases DuckDB and exits (`judge._release`); waited for, so what it prints at
        exit is printed before this process's own end. A judge that has validated nothing since its warm-up (a
        command that failed, or ended, before its validation) is stopped instead: nothing waits for its build."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        if self.pending:  # only a warm-up asked: its answer unread, the build perhaps under way
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
            if process.poll() is None:
                process.kill()
                process.wait()
            return
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_JUDGE = _Worker()


def warm_up(suite_name: str = "job_logs") -> None:
    """Start Great Expectations' judge and let it build the suite's context now (3-5 CPU-s, in its own process), for
    a caller that has something else to do meanwhile (`gpucast ingest`: Prefect's import and server, the reading);
    the first validation's answer waits for that build if it is still under way."""
    with _JUDGE.lock:
        _JUDGE.send({"suite": SUITES[suite_name]()})


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


# Expectation type -> whether a table of `columns` meets it, on the expectation's kwargs (no row breaks it).
TABLE_RULES: dict[str, Callable[[dict, list[str]], bool]] = {
    "expect_table_columns_to_match_set": lambda kw, columns: (
        set(columns) == set(kw["column_set"]) if kw.get("exact_match", True) else set(kw["column_set"]) <= set(columns)),
}


def _key(expectation: str, kwargs: dict, rule: str) -> tuple:
    return expectation, kwargs.get("column") or kwargs.get("column_A"), rule


def check_rows(frame: pl.DataFrame, suite_name: str = "job_logs") -> Validation:
    """The row rules alone on `frame` (its row positions are the keys of `reasons`): each expectation holds
    where no row breaks it. What the ingest runs on every chunk; GX judges the run once (`validate_staged`). An
    expectation on a column the rows do not have is an outcome with `error` (GX raises there too)."""
    frame = frame.fill_nan(None)  # the ingest stages NaN as missing (`staging._split`): GX never sees one
    outcomes, rules = [], []
    for e in SUITES[suite_name]()["expectations"]:
        kwargs, rule = dict(e["kwargs"]), (e.get("meta") or {}).get("rule") or e["type"]
        column = kwargs.get("column") or kwargs.get("column_A")
        if e["type"] in TABLE_RULES:
            outcomes.append(ExpectationOutcome(suite_name, e["type"], column, rule, TABLE_RULES[e["type"]](kwargs, frame.columns), 0))
            continue
        missing = [kwargs[k] for k in ("column", "column_A", "column_B") if k in kwargs and kwargs[k] not in frame.columns]
        if missing:
            outcomes.append(ExpectationOutcome(suite_name, e["type"], column, rule, False, 0,
                                               f"column {missing[0]!r} is not among the rows' columns"))
            continue
        outcomes.append(ExpectationOutcome(suite_name, e["type"], column, rule, True, 0))
        rules.append((len(outcomes) - 1, kwargs, _row_rule(e["type"], kwargs, frame.columns)))
    if not rules:
        return Validation({}, outcomes)
    broken = frame.select(*[cond.fill_null(False).alias(str(i)) for i, _, cond in rules])
    for (i, _, _), count in zip(rules, broken.sum().row(0), strict=True):
        outcomes[i] = replace(outcomes[i], success=count == 0, unexpected_count=int(count))
    reasons: dict[int, list[str]] = {}
    flagged = broken.with_row_index("_pos").filter(pl.any_horizontal(pl.exclude("_pos")))
    if flagged.height:
        rows = frame[flagged["_pos"].to_list()].to_dicts()
        for pos, row, marks in zip(flagged["_pos"].to_list(), rows, flagged.drop("_pos").iter_rows(), strict=True):
            reasons[pos] = [_sentence(outcomes[i].rule, kwargs, row)
                            for (i, kwargs, _), hit in zip(rules, marks, strict=True) if hit]
    return Validation(reasons, outcomes, broken)


def _judged(suite_name: str, paths: list, columns: list[str]) -> dict[tuple, tuple[bool, str | None]]:
    """GX's verdict per expectation (`_key`: (success, the error of one that could not run)) on `columns` of the
    Parquet files `paths`, from the judge process (`judge.py`)."""
    with _JUDGE.lock:
        _JUDGE.send({"suite": SUITES[suite_name](), "paths": [str(p) for p in paths], "columns": list(columns)})
        reply = _JUDGE.answer()
    if "error" in reply:
        raise RuntimeError(f"Great Expectations could not validate the rows: {reply['error']}\n{reply.get('trace', '')}")
    return {_key(expectation, {"column": column}, rule): (success, error)
            for expectation, column, rule, success, error in reply["verdicts"]}


def agree(ours: list[ExpectationOutcome], judged: dict[tuple, tuple[bool, str | None]]) -> list[ExpectationOutcome]:
    """The row rules' outcomes over some rows with GX's verdict on the same rows: an expectation GX could not run
    gets its error (it must fail loudly, never pass by default: GX issue #10738); one judged differently raises
    `RuleMismatch`."""
    out = []
    for o in ours:
        success, error = judged.get(_key(o.expectation, {"column": o.column}, o.rule), (None, None))
        if error or o.error:
            out.append(replace(o, success=False, error=o.error or error))
            continue
        if success is None:
            raise RuleMismatch(f"suite {o.suite!r}, {o.expectation} on {o.column}: Great Expectations did not run it")
        if success != o.success:
            raise RuleMismatch(
                f"suite {o.suite!r}, {o.expectation} on {o.column}: Great Expectations says "
                f"{'it holds' if success else 'it is broken'}, the row rule found {o.unexpected_count:,} row(s) breaking "
                "it; fix ROW_RULES in expectations/validate.py")
        out.append(o)
    return out


def validate_frame(frame: pl.DataFrame, suite_name: str = "job_logs") -> Validation:
    """Both views on one frame: the row rules (`check_rows`), and GX on DuckDB agreeing with them (`agree`)."""
    ours = check_rows(frame, suite_name)
    with tempfile.TemporaryDirectory(prefix="gpucast-judge-") as folder:
        path = Path(folder) / "frame.parquet"
        frame.fill_nan(None).write_parquet(path)
        judged = _judged(suite_name, [path], frame.columns)
    return replace(ours, outcomes=agree(ours.outcomes, judged))


def validate_staged(paths: list, columns: list[str], ours: list[ExpectationOutcome],
                    suite_name: str = "job_logs") -> list[ExpectationOutcome]:
    """GX once over a run's checked rows: `columns` of the Parquet files `paths` (the rows the row rules judged,
    `ours` their outcomes summed over the run), judged in the judge process, then `agree`."""
    return agree(ours, _judged(suite_name, paths, columns))
