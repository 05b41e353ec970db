"""Slurm accounting (`sacct --parsable2`) as contract rows: one row per job, its steps folded in.

Pure logic: text in, a Polars frame of contract fields (text, as any file's values) out; the flow writes
it as a staging file and ingests it like any other (`flows/ingest.py`). The decisions (ids, states,
times, GPUs, memory, model features) are written out in docs/sources.md, "Slurm accounting".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from gpucast.expectations import catalog
from gpucast.expectations import contract as c
from gpucast.tasks.sources.mapping import UNITS, Mapping, MappingError, named_fields

# The fields the docs recommend (`sacct --format=...`); Comment last, so a `|` inside it cannot shift the others.
SACCT_FIELDS = ("JobID", "JobName", "Cluster", "Partition", "Account", "User", "State", "ExitCode", "Submit",
                "Start", "End", "Elapsed", "Timelimit", "AllocTRES", "ReqTRES", "TRESUsageInMax", "WCKey", "Comment")
REQUIRED_FIELDS = ("JobID", "State", "Submit")

# Slurm's job states -> (contract status, failure_reason); a state not listed is left as written, so the
# contract quarantines the job ("status: 'X' is not one of ...") rather than gpucast guessing.
STATES: dict[str, tuple[str, str | None]] = {
    "PENDING": ("PENDING", None), "REQUEUED": ("PENDING", None), "REQUEUE_HOLD": ("PENDING", None),
    "REQUEUE_FED": ("PENDING", None),
    "RUNNING": ("RUNNING", None), "COMPLETING": ("RUNNING", None), "CONFIGURING": ("RUNNING", None),
    "SUSPENDED": ("RUNNING", None), "STAGE_OUT": ("RUNNING", None), "SIGNALING": ("RUNNING", None),
    "RESIZING": ("RUNNING", None),
    "COMPLETED": ("COMPLETED", None),
    "FAILED": ("FAILED", None),  # the reason is its exit code, see `_failure`
    "OUT_OF_MEMORY": ("FAILED", "OOM"), "TIMEOUT": ("FAILED", "TIMEOUT"), "NODE_FAIL": ("FAILED", "NODE_FAIL"),
    "BOOT_FAIL": ("FAILED", "BOOT_FAIL"), "DEADLINE": ("FAILED", "DEADLINE"),
    "CANCELLED": ("CANCELLED", None), "PREEMPTED": ("CANCELLED", "PREEMPTED"), "REVOKED": ("CANCELLED", "REVOKED"),
}
FINISHED = ("COMPLETED", "FAILED", "CANCELLED")
MISSING = ("", "Unknown", "None", "N/A")  # how sacct prints a time or value it does not have
# TRES usage suffixes (binary, as Slurm prints them) -> the mapping module's unit names
TRES_UNITS = {"": "B", "K": "KiB", "M": "MiB", "G": "GiB", "T": "TiB"}
_ELAPSED = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$")
_TRES_NUMBER = re.compile(r"^(\d+(?:\.\d+)?)([KMGT]?)$")


class NotSacctOutput(MappingError):
    """The input is not `sacct --parsable2` output (bad input: exit 2, one line)."""


@dataclass
class SlurmImport:
    """The jobs parsed from one sacct output, and what happened to its lines."""

    jobs: pl.DataFrame  # contract fields, text (None = missing), one row per job
    lines: int = 0  # data lines read (jobs and steps)
    steps: int = 0  # step lines folded into their job
    orphan_steps: int = 0  # step lines whose job line is not in the output (not loaded)
    superseded: int = 0  # job lines of a job id another of its lines is later than (`latest_record`): not loaded
    no_gpu: list[str] = field(default_factory=list)  # jobs that asked for no GPU (a CPU partition): not loaded
    no_gpu_mem: list[str] = field(default_factory=list)  # finished jobs without a GPU memory figure: loaded without one
    elapsed_from_times: list[str] = field(default_factory=list)  # finished jobs without a usable Elapsed: End - Start

    def accounted(self) -> int:
        """The lines this says what became of: each GPU job loaded (or quarantined by the contract), step folded or
        orphaned, job without GPUs, superseded line. Equal to `lines` (a test holds it)."""
        return self.jobs.height + self.steps + len(self.no_gpu) + self.superseded


def parse_sacct(text: str, source: str, mapping: Mapping | None = None) -> SlurmImport:
    """Parse `sacct --parsable2` output (any field order, extra fields ignored) into one contract row per job."""
    header, rows = _rows(text, source)
    jobs: dict[str, list[dict[str, str]]] = {}
    steps: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        job_id = row["JobID"]
        if "." in job_id:  # 123.batch, 123.extern, 123.0, 123_7.batch, 123+0.0
            steps.setdefault(job_id.split(".", 1)[0], []).append(row)
        else:
            jobs.setdefault(job_id, []).append(row)  # several: a requeued job (`--duplicates`), exports joined
    out = SlurmImport(pl.DataFrame(), lines=len(rows), steps=sum(len(s) for s in steps.values()))
    out.orphan_steps = sum(len(s) for j, s in steps.items() if j not in jobs)
    out.superseded = sum(len(lines) - 1 for lines in jobs.values())
    records = []
    for job_id, lines in jobs.items():
        row = latest_record(lines)
        record = _job(row, steps.get(job_id, []), mapping)
        if record[c.GPU_COUNT] is None:
            out.no_gpu.append(record[c.JOB_ID])
            continue
        if record[c.PEAK_GPU_MEM_GB] is None and record[c.STATUS] in FINISHED:
            out.no_gpu_mem.append(record[c.JOB_ID])
        runtime = record[c.RUNTIME_HOURS]
        if runtime and not runtime.startswith("Elapsed") and record[c.STATUS] in FINISHED and not _hours(row.get("Elapsed")):
            out.elapsed_from_times.append(record[c.JOB_ID])
        records.append(record)
    out.jobs = pl.DataFrame(records, schema={n: pl.String for n in c.COLUMNS}, orient="row") if records else \
        pl.DataFrame(schema={n: pl.String for n in c.COLUMNS})
    return out


# A job id's lines ordered by the lifecycle stage their state is (the later wins when their times tie)
STAGE = {"PENDING": 0, "RUNNING": 1, **dict.fromkeys(FINISHED, 2)}


def latest_record(lines: list[dict[str, str]]) -> dict[str, str]:
    """The line of a job id that is its latest record: the one whose latest known time (End, else Start, else
    Submit: the last thing that happened to it) is latest; on a tie, the later stage (finished > running >
    pending; a state gpucast does not know counts as pending); then the later line. So a requeued job's current
    attempt wins over the attempts before it, and a job seen pending, running and finished is finished."""
    def recency(numbered: tuple[int, dict[str, str]]) -> tuple:
        number, row = numbered
        times = [t for k in ("End", "Start", "Submit") if (t := _time(row.get(k))) is not None]
        state = STATES.get(row["State"].split(" ")[0], (None, None))[0]
        return max(times, default=datetime.min), STAGE.get(state, 0), number

    return max(enumerate(lines), key=recency)[1]


def _time(text: str | None) -> datetime | None:
    """sacct's `2026-11-20T08:05:00` (UTC: `read_sacct` runs it with TZ=UTC); None when missing or unreadable."""
    value = _value(text)
    try:
        return datetime.fromisoformat(value).replace(tzinfo=None) if value else None
    except ValueError:
        return None


def _rows(text: str, source: str) -> tuple[list[str], list[dict[str, str]]]:
    """The header's field names and each data line as {field: value}; `NotSacctOutput` when it is not sacct's."""
    lines = [ln for ln in text.lstrip("\ufeff").splitlines() if ln.strip()]
    header = lines[0].rstrip("|").split("|") if lines else []  # --parsable (not 2) ends every line with `|`
    absent = [f for f in REQUIRED_FIELDS if f not in header]
    if absent:
        # the first line is quoted only when it reads as a header of names: a file given by mistake
        # (`files: /etc/passwd`) must not have its lines copied into run messages that planners read
        first = lines[0] if lines else "an empty file"
        found = repr(first) if re.fullmatch(r"[A-Za-z0-9_ ,;|\t.\-]{1,120}", first) else \
            f"a line of {len(first)} characters that is not a header of names"
        raise NotSacctOutput(f"{source}: not sacct --parsable2 output: its first line names no {', '.join(absent)} "
                             f"(found {found}); export it with `sacct --parsable2 --format="
                             f"{','.join(SACCT_FIELDS)}` (docs/sources.md), or ingest it with `gpucast ingest`")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        values = line.split("|")
        if len(values) > len(header) and header[-1] == "Comment":  # a `|` inside the last field, the Comment
            values = values[:len(header) - 1] + ["|".join(values[len(header) - 1:])]
        if line.endswith("|") and len(values) == len(header) + 1 and values[-1] == "":
            values = values[:-1]
        if len(values) != len(header):
            raise NotSacctOutput(f"{source} line {number}: {len(values)} fields where its header has {len(header)}; "
                                 "export it again with `sacct --parsable2` (docs/sources.md)")
        rows.append(dict(zip(header, values, strict=True)))
    return header, rows


def _value(text: str | None) -> str | None:
    return None if text is None or text.strip() in MISSING else text.strip()


def _job(row: dict[str, str], steps: list[dict[str, str]], mapping: Mapping | None) -> dict[str, str | None]:
    """One job's contract record: its own line's state and times, its steps' peak GPU memory."""
    cluster = _value(row.get("Cluster")) or "local"
    state_word = row["State"].split(" ")[0]  # `CANCELLED by 1234`
    status, reason = STATES.get(state_word, (row["State"], None))
    if status == "FAILED" and reason is None:
        reason = _failure(row, steps)
    submitted, start, end = (_value(row.get(k)) for k in ("Submit", "Start", "End"))
    finished = status in FINISHED
    gpu_type, gpu_count = _gpus(_value(row.get("AllocTRES")) or _value(row.get("ReqTRES")) or "")
    record: dict[str, str | None] = dict.fromkeys(c.COLUMNS)
    record.update({
        c.JOB_ID: f"slurm-{cluster}-{row['JobID']}", c.SUBMITTED_AT: submitted,
        c.UPDATED_AT: (end if finished else None) or start or submitted, c.STATUS: status,
        c.QUEUE: _value(row.get("Partition")), c.TEAM: _value(row.get("Account")), c.FAILURE_REASON: reason,
        # contract v4: what the job asked for and its name forecast the run time of jobs without model features
        c.JOB_NAME: _value(row.get("JobName")), c.TIME_LIMIT_HOURS: _hours(row.get("Timelimit")),
        c.GPU_TYPE: gpu_type, c.GPU_COUNT: gpu_count,
        c.RUNTIME_HOURS: _runtime(row) if finished else None,
        c.PEAK_GPU_MEM_GB: _gpu_mem_gb([row, *steps]),
    })
    for name, value in _features(row, mapping).items():
        # what sacct records wins over what a Comment says, except GPU memory: Slurm's gres/gpumem is a task's
        # (summed over the GPUs the task drives), a site's own figure is the contract's per-GPU peak
        if record.get(name) is None or name == c.PEAK_GPU_MEM_GB:
            record[name] = value
    return record


def _failure(row: dict[str, str], steps: list[dict[str, str]]) -> str:
    """A FAILED job's reason: OOM when one of its steps ran out of memory, else its exit code."""
    if any(s["State"].split(" ")[0] == "OUT_OF_MEMORY" for s in steps):
        return "OOM"
    code = (_value(row.get("ExitCode")) or "").split(":")[0]
    return f"exit code {code}" if code not in ("", "0") else "FAILED"


def _gpus(tres: str) -> tuple[str | None, str | None]:
    """(gpu_type, gpu_count) from `gres/gpu=2` or `gres/gpu:a100=2` in a TRES list; type canonicalised."""
    typed, count = None, None
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == "gres/gpu":
            count = value
        elif key.startswith("gres/gpu:") and typed is None:
            typed, count = key.removeprefix("gres/gpu:"), count or value
    if count is not None and not count.isdigit():
        count = None
    if count == "0":
        count = None
    gpu_type = (catalog.canonical(typed) or typed) if typed else None
    return gpu_type, count


def _gpu_mem_gb(lines: list[dict[str, str]]) -> str | None:
    """The maximum `gres/gpumem` over the job's lines (TRESUsageInMax), in GB (decimal, the contract's unit)."""
    sizes = UNITS[c.PEAK_GPU_MEM_GB]
    peaks = []
    for line in lines:
        for item in (line.get("TRESUsageInMax") or "").split(","):
            key, _, value = item.partition("=")
            if key == "gres/gpumem" and (m := _TRES_NUMBER.match(value.strip())):
                peaks.append(float(m[1]) * sizes[TRES_UNITS[m[2]]] / sizes["GB"])
    best = max(peaks, default=0.0)
    return repr(best) if best > 0 else None  # 0: the GPU reported nothing, not a job that used none


def _runtime(row: dict[str, str]) -> str | None:
    """A finished job's run time: its Elapsed; when Elapsed is missing or unreadable (`UNLIMITED`, `INVALID`,
    `-00:01:00`, `1:2:3:4`), End - Start when both are known. An unreadable Elapsed without both times is passed
    on as `Elapsed <text>`, so the contract quarantines the job naming the field (`runtime_hours: 'Elapsed
    UNLIMITED' is not a number`) rather than loading it with no run time, silently."""
    if (hours := _hours(row.get("Elapsed"))) is not None:
        return hours
    start, end = _time(row.get("Start")), _time(row.get("End"))
    if start is not None and end is not None and end >= start:
        return _hours_of((end - start).total_seconds())
    elapsed = _value(row.get("Elapsed"))
    return f"Elapsed {elapsed}" if elapsed is not None and not _ELAPSED.match(elapsed) else None


def _hours_of(seconds: float) -> str | None:
    return repr(seconds / 3600) if seconds > 0 else None


def _hours(elapsed: str | None) -> str | None:
    """`[D-][HH:]MM:SS` as hours; None for a missing or zero time (and for `UNLIMITED`, `Partition_Limit`)."""
    m = _ELAPSED.match((elapsed or "").strip())
    if not m:
        return None
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    total = days * 24 + hours + minutes / 60 + seconds / 3600
    return repr(total) if total > 0 else None


def _features(row: dict[str, str], mapping: Mapping | None) -> dict[str, str]:
    """Contract fields a site writes itself: the keys of a JSON `Comment` (contract names, their aliases, or
    names the mapping's `fields` give), and sacct fields the mapping names (`model_type: WCKey`)."""
    comment = _value(row.get("Comment")) or ""
    source: dict[str, str] = {}
    if comment.startswith("{"):
        try:
            data = json.loads(comment)
        except json.JSONDecodeError:
            data = {}
        if isinstance(data, dict):
            source = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items() if v is not None}
    if mapping:
        named = {k.lower(): k for k in row}
        for column in mapping.columns:
            if column not in source and column.lower() in named and _value(row[named[column.lower()]]):
                source[column] = row[named[column.lower()]].strip()
    return named_fields(source, mapping)
