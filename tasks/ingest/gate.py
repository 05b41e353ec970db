"""The nightly's reject-share gate: the night stops when more of tonight's rows were rejected than the
limit allows (GPUCAST_MAX_REJECT_FRACTION), else the rejections become warnings. Pure: the counts in,
the decision and its words out; the flow (`flows/nightly.py` `quality_gate`) reads the most common
reasons from the warehouse and raises."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RejectGate:
    """What the gate decided on one ingest run's counts."""

    rows_read: int
    rows_rejected: int
    files_rejected: int
    limit: float  # the largest rejected share that passes, of the rows and of the files
    files: int = 0  # the files the run read, those rejected whole included

    @property
    def share(self) -> float:
        """The rejected share of the rows read (0 when none were read)."""
        return self.rows_rejected / self.rows_read if self.rows_read else 0.0

    @property
    def files_share(self) -> float:
        """The share of tonight's files rejected whole (unreadable, a wrong encoding, no required column): their rows
        were never read, so the rows' share cannot see them (review 77 S2-5: a night whose every file was unreadable
        read 0 rows and passed)."""
        return self.files_rejected / self.files if self.files else 0.0

    @property
    def failed(self) -> bool:
        return self.share > self.limit or self.files_share > self.limit

    def warnings(self) -> list[str]:
        """The night's warnings when the gate passes: files rejected whole, then rows rejected."""
        out = []
        if self.files_rejected:
            out.append(f"{self.files_rejected} file(s) rejected whole: see rejected_files")
        if self.rows_rejected:
            out.append(f"{self.rows_rejected:,} row(s) rejected ({self.share:.1%}): see rejected_job_logs")
        return out

    def failure(self, reasons: Sequence[tuple[str, int]], run_id: str) -> str:
        """The one line a failed gate ends the night with: the share, the limit, the most common `reasons`
        (reason, rows) and where the rows are."""
        common = "; ".join(f"{n:,} x {r}" for r, n in reasons)
        if self.files_share > self.limit:
            return (f"validation failed: {self.files_rejected:,} of {self.files:,} file(s) rejected whole "
                    f"({self.files_share:.1%}), more than {self.limit:.0%} (GPUCAST_MAX_REJECT_FRACTION); why is in "
                    f"rejected_files (ingest_run_id = '{run_id}'); fix the exporter or raise the limit, then rerun.")
        return (f"validation failed: {self.rows_rejected:,} of {self.rows_read:,} rows rejected ({self.share:.1%}), more "
                f"than {self.limit:.0%} (GPUCAST_MAX_REJECT_FRACTION); most common: {common}. Rows are in "
                f"rejected_job_logs (ingest_run_id = '{run_id}'); fix the exporter or raise the limit, then rerun.")
