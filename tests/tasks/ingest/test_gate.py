"""The reject-share gate (`tasks/ingest/gate.py`): the decision, its warnings and its message, without Prefect."""

from __future__ import annotations

import pytest

from gpucast.tasks.ingest.gate import RejectGate


@pytest.mark.parametrize(("read", "rejected", "limit", "failed"), [
    (100, 5, 0.05, False),  # exactly at the limit: passes (the limit is the largest share that passes)
    (100, 6, 0.05, True),  # one row over
    (0, 0, 0.0, False),  # nothing read: share 0, never a failure (an empty night is not a bad one)
    (10, 10, 1.0, False),  # a limit of 1 lets everything through
])
def test_the_gate_fails_only_above_the_limit(read, rejected, limit, failed):
    assert RejectGate(read, rejected, 0, limit).failed is failed


def test_warnings_name_files_then_rows_with_the_share():
    assert RejectGate(1000, 12, 2, 0.05).warnings() == [
        "2 file(s) rejected whole: see rejected_files", "12 row(s) rejected (1.2%): see rejected_job_logs"]
    assert RejectGate(1000, 0, 0, 0.05).warnings() == []


def test_the_failure_names_the_share_the_limit_the_reasons_and_where_the_rows_are():
    gate = RejectGate(2000, 300, 0, 0.05)
    assert gate.share == pytest.approx(0.15)
    assert gate.failure([("gpu_mem_gb above the GPU", 200), ("no job_id", 100)], "ingest-1") == (
        "validation failed: 300 of 2,000 rows rejected (15.0%), more than 5% (GPUCAST_MAX_REJECT_FRACTION); most "
        "common: 200 x gpu_mem_gb above the GPU; 100 x no job_id. Rows are in rejected_job_logs (ingest_run_id = "
        "'ingest-1'); fix the exporter or raise the limit, then rerun.")


def test_files_rejected_whole_count_against_the_limit_as_rows_do():
    """Review 77 S2-5: a night whose every file was unreadable (a new encoding, a truncated gzip) read 0 rows and passed
    the gate: files rejected whole never had rows read. Their share of tonight's files is held to the same limit."""
    assert RejectGate(0, 0, 40, 0.2, files=40).failed
    assert RejectGate(10, 0, 39, 0.2, files=40).failed
    assert not RejectGate(1000, 0, 1, 0.2, files=40).failed  # 2.5%: a warning
    assert not RejectGate(0, 0, 0, 0.2, files=0).failed  # an empty night is not a bad one
    assert RejectGate(0, 0, 3, 0.2, files=3).failure([], "ingest-1") == (
        "validation failed: 3 of 3 file(s) rejected whole (100.0%), more than 20% (GPUCAST_MAX_REJECT_FRACTION); why is "
        "in rejected_files (ingest_run_id = 'ingest-1'); fix the exporter or raise the limit, then rerun.")
