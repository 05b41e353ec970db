"""The Great Expectations suite `job_logs`, generated from the contract's fields.

Every bound, allowed set, length limit and required column comes from `contract.FIELDS`, so the
suite cannot drift from the contract (it used to be a hand-written JSON copy). Each expectation's
`meta.rule` is the sentence a quarantined row carries in `rejected_job_logs.reasons`.
Parsing rules (a value that is not a number, a timestamp, ...) are in `tasks/ingest/normalize.py`.
"""

from __future__ import annotations

from gpucast.expectations import contract as c

JOB_LOGS = "job_logs"


def _expectation(kind: str, rule: str, **kwargs) -> dict:
    return {"type": f"expect_{kind}", "kwargs": kwargs, "meta": {"rule": rule}}


def _field_rules(f: c.Field) -> list[dict]:
    rules = []
    if f.required:
        rules.append(_expectation("column_values_to_not_be_null", f"{f.name} is required", column=f.name))
    if f.max_length is not None:
        rules.append(_expectation("column_value_lengths_to_be_between", f"{f.name} is 1 to {f.max_length} characters",
                                  column=f.name, min_value=1, max_value=f.max_length))
    if f.values:
        rules.append(_expectation("column_values_to_be_in_set", f"{f.name} is one of {', '.join(f.values)}",
                                  column=f.name, value_set=list(f.values)))
    if f.maximum is not None:
        what = "a measurement" if f.measured else "a value"
        rules.append(_expectation("column_values_to_be_between",
                                  f"{f.name} must be > 0 and at most {f.maximum:g} ({what} outside that is implausible)",
                                  column=f.name, min_value=0, strict_min=True, max_value=f.maximum))
    return rules


def job_logs_suite() -> dict:
    """The suite as GX's `ExpectationSuite(**spec)` takes it."""
    expectations = [_expectation("table_columns_to_match_set", "the table has exactly the contract's columns",
                                 column_set=list(c.COLUMNS), exact_match=True)]
    for f in c.FIELDS:
        expectations += _field_rules(f)
    expectations.append(_expectation("column_pair_values_a_to_be_greater_than_b", "updated_at is not before submitted_at",
                                     column_A=c.UPDATED_AT, column_B=c.SUBMITTED_AT, or_equal=True,
                                     ignore_row_if="either_value_is_missing"))
    return {"name": JOB_LOGS, "meta": {"contract_version": c.CONTRACT_VERSION}, "expectations": expectations}


SUITES = {JOB_LOGS: job_logs_suite}
