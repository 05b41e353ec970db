"""Run a Great Expectations suite (JSON under `expectations/suites/`) on a Polars frame.

GX reports, per expectation, the index of every row that broke it (`result_format=COMPLETE`);
this module turns that into one list of rule sentences per row (from each expectation's
`meta.rule`) and a per-expectation summary for the `validation_results` table.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import polars as pl

SUITES_DIR = Path(__file__).parent / "suites"

# GX may phone home; a nightly batch on a closed network must not.
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


def suite_path(name: str) -> Path:
    return SUITES_DIR / f"{name}.json"


@cache
def _context_and_suite(name: str):
    import great_expectations as gx

    spec = json.loads(suite_path(name).read_text())
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    suite = context.suites.add(gx.ExpectationSuite(**spec))
    asset = context.data_sources.add_pandas(f"{name}_frames").add_dataframe_asset("frame")
    batch_definition = asset.add_batch_definition_whole_dataframe("whole")
    return batch_definition, suite


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
        raised = (res.exception_info or {}).get("raised_exception", False)
        if raised:
            # An expectation that crashed must fail loudly, never pass by default (GX issue #10738).
            message = (res.exception_info or {}).get("exception_message")
            outcomes.append(ExpectationOutcome(suite_name, cfg.type, column, rule, False, 0, str(message)))
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
