"""Run a Great Expectations suite (generated from the contract, `suite.py`) on a Polars frame.

GX reports, per expectation, the index of every row that broke it (`result_format=COMPLETE`);
this module turns that into one list of rule sentences per row (from each expectation's
`meta.rule`) and a per-expectation summary for the `validation_results` table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

import polars as pl

from gpucast.expectations.suite import SUITES

# GX may phone home; a nightly batch on a closed network must not (a safety switch, not a setting:
# it must hold before GX is imported, whoever imports this module).
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


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
    """Per-row reasons (row position -> sentences) and the per-expectation summary."""

    reasons: dict[int, list[str]]
    outcomes: list[ExpectationOutcome]

    @property
    def success(self) -> bool:
        return all(o.success for o in self.outcomes)


@cache
def _context_and_suite(name: str):
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    spec = SUITES[name]()
    context = gx.get_context(mode="ephemeral")
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
    import pandas as pd

    if pd.isna(value):
        return "nothing"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate_frame(frame: pl.DataFrame, suite_name: str = "job_logs") -> Validation:
    """Validate `frame` (its row positions are the keys of `reasons`) against a suite."""
    batch_definition, suite = _context_and_suite(suite_name)
    pdf = frame.to_pandas()
    batch = batch_definition.get_batch(batch_parameters={"dataframe": pdf})
    result = batch.validate(suite, result_format={"result_format": "COMPLETE"})
    reasons: dict[int, list[str]] = {}
    outcomes = []
    for res in result.results:
        cfg = res.expectation_config
        kwargs = cfg.kwargs
        rule = (cfg.meta or {}).get("rule") or cfg.type
        column = kwargs.get("column") or kwargs.get("column_A")
        raised = _raised(res.exception_info)
        if raised:
            # An expectation that crashed must fail loudly, never pass by default (GX issue #10738).
            outcomes.append(ExpectationOutcome(suite_name, cfg.type, column, rule, False, 0, raised))
            continue
        index = res.result.get("unexpected_index_list") or []
        for i in index:
            i = int(i)
            if "column" in kwargs and kwargs["column"] in pdf:
                sentence = f"{rule} (got {_show(pdf.at[i, kwargs['column']])})"
            elif "column_A" in kwargs:
                a, b = kwargs["column_A"], kwargs["column_B"]
                sentence = f"{rule} (got {a}={pdf.at[i, a]}, {b}={pdf.at[i, b]})"
            else:
                sentence = rule
            reasons.setdefault(i, []).append(sentence)
        count = int(res.result.get("unexpected_count") or len(index))
        outcomes.append(ExpectationOutcome(suite_name, cfg.type, column, rule, bool(res.success), count))
    return Validation(reasons, outcomes)
