"""Slurm accounting (`sacct --parsable2`) as contract rows: one row per job, its steps folded in.

Pure logic: lines in (bytes as read, or text), contract rows (text, as any file's values) out, a chunk of rows
at a time; the flow writes the chunks to one staging file and ingests it like any other (`flows/imports.py`).
The output is read once, line by line: per job only what its row needs is kept (of its latest line the fields
its row is built from, its steps' largest GPU memory figure, whether a step ran out of memory; nothing per task
of an array range), so memory grows with the jobs, not the bytes.
A line that cannot be used (not UTF-8, not the header's fields, a Comment nested too deep, an array range too
large) becomes a row carrying its reason (`SOURCE_ERROR`), which the ingest quarantines; the rest load. The
decisions (ids, states, times, GPUs, memory, arrays, model features) are written out in docs/sources.md,
"Slurm accounting".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import BinaryIO

import polars as pl

from gpucast.expectations import contract as c
from gpucast.records import catalog
from gpucast.records.times import parse_iso
from gpucast.tasks.ingest.readers import MAX_JSON_DEPTH, SOURCE_ERROR, json_depth
from gpucast.tasks.sources.mapping import UNITS, Mapping, MappingError, named_fields

# The fields the docs recommend (`sacct --format=...`); Comment last, so a `|` inside it cannot shift the others.
SACCT_FIELDS = ("JobID", "JobName", "Cluster", "Partition", "Account", "User", "State", "ExitCode", "Submit",
                "Start", "End", "Elapsed", "Timelimit", "AllocTRES", "ReqTRES", "TRESUsageInMax", "WCKey", "Comment")
REQUIRED_FIELDS = ("JobID", "State", "Submit")

# Slurm's job states -> (contract status, failure_reason), matched on the state's first word in upper case
# (`CANCELLED by 1234`, `completed`); a state not listed is left as written, so the contract quarantines the
# job ("status: 'X' is not one of ...") rather than gpucast guessing.
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
FINISHED = c.FINISHED_STATUSES
MISSING = ("", "Unknown", "None", "N/A")  # how sacct prints a time or value it does not have
NO_CLUSTER = "local"  # a job's cluster where the output names none (no Cluster field, or an empty one)
# TRES usage suffixes (binary, as Slurm prints them) -> the mapping module's unit names
TRES_UNITS = {"": "B", "K": "KiB", "M": "MiB", "G": "GiB", "T": "TiB"}
_ELAPSED = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$")
_TRES_NUMBER = re.compile(r"^(\d+(?:\.\d+)?)([KMGT]?)$")

MAX_LINE_BYTES = 1 << 20  # a longer line is quarantined; only this much of it is ever held
# Tasks one array range record (`7000_[1-1000]`) is expanded into. Slurm's own cap is MaxArraySize (default 1001,
# at most 4,000,001); a range naming more tasks than this is quarantined with the reason, not exploded into rows.
MAX_ARRAY_TASKS = 100_000
CHUNK_ROWS = 10_000  # rows handed on at a time (10,000 rows held as records: ~25 MB)
SCHEMA = {n: pl.String for n in (*c.COLUMNS, SOURCE_ERROR)}
_ARRAY_RANGE = re.compile(r"^(\d+)_\[([^\]]*)\](?:%\d+)?$")  # 7000_[1-1000], 7000_[1,3,5-9], 7000_[1-999:2%20]
_ARRAY_ITEM = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
_EPOCH = datetime(1970, 1, 1)


class NotSacctOutput(MappingError):
    """The input is not `sacct --parsable2` output (bad input: exit 2, one line)."""


class CutLine(bytes):
    """A line longer than MAX_LINE_BYTES (`lines_of`): its first MAX_LINE_BYTES bytes; the rest was skipped."""


def lines_of(stream: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary stream (a file, `sacct`'s stdout) one at a time, never more than MAX_LINE_BYTES of one
    held: a longer line is handed on cut (`CutLine`), the rest of it read and dropped."""
    while line := stream.readline(MAX_LINE_BYTES + 1):
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := stream.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield CutLine(line[:MAX_LINE_BYTES])
        else:
            yield line


@dataclass
class SlurmImport:
    """What became of one sacct output's lines (`SacctReader.read`; the rows went to its `emit`)."""

    rows: int = 0  # contract rows given: a job's latest record, an array task, a quarantined line
    lines: int = 0  # data lines read (jobs and steps; not the first header, not blank lines)
    headers: int = 0  # header lines inside the output (exports joined, `sacct` run twice): skipped
    steps: int = 0  # step lines folded into their job
    orphan_steps: int = 0  # step lines whose job line is not in the output (not loaded)
    superseded: int = 0  # job lines of a job another of its lines is later than (`_recency`): not loaded
    quarantined: int = 0  # rows given with the import's reason (`SOURCE_ERROR`, the ingest rejects them)
    unreadable: int = 0  # of those, lines not read at all (not UTF-8, not the header's fields, too long)
    ranges: int = 0  # array range lines (`7000_[3-1000]`) expanded into one row per task
    tasks: int = 0  # the tasks those ranges name
    tasks_superseded: int = 0  # of those, tasks a later record of the task itself (or a later range) supersedes
    retired: int = 0  # array ranges an older gpucast stored as one job, retired by this output (`retired_ranges`)
    # counts, not the jobs' ids: a list of ids grows with the jobs and is kept through the ingest that follows
    # (a 145 MB jobs-only export: ~40 MB, and the memory of the read around them)
    no_gpu: int = 0  # jobs that asked for no GPU (a CPU partition): not loaded
    no_gpu_mem: int = 0  # finished jobs without a GPU memory figure: loaded without one
    elapsed_from_times: int = 0  # finished jobs without a usable Elapsed: End - Start

    @property
    def task_rows(self) -> int:
        return self.tasks - self.tasks_superseded

    def accounted(self) -> int:
        """The lines this says what became of: each row given for a line (a GPU job loaded or quarantined, an
        unreadable line), array range expanded (its tasks counted apart), step folded or orphaned, job without
        GPUs, superseded line, header inside the output. Equal to `lines` (a test holds it)."""
        return (self.rows - self.task_rows) + self.ranges + self.steps + self.no_gpu + self.superseded \
            + self.headers

    def summary(self) -> str:
        """One line: what became of every line (`gpucast import slurm` prints it after `slurm: `)."""
        jobs, refused = self.rows - self.task_rows - self.unreadable, self.quarantined - self.unreadable
        return (f"{self.lines:,} sacct line(s): {jobs:,} GPU job(s)"
                + (f" ({refused:,} quarantined by the import, with the reason)" if refused else "")
                + (f", {self.ranges:,} array range(s) expanded into {self.tasks:,} task(s)"
                   + (f" ({self.tasks_superseded:,} superseded by a later record of the task)"
                      if self.tasks_superseded else "") if self.ranges else "")
                + f", {self.steps - self.orphan_steps:,} step(s) folded into their job, {self.no_gpu:,} job(s) "
                  "without GPUs not loaded"
                + (f", {self.orphan_steps:,} step(s) without their job line not loaded" if self.orphan_steps else "")
                + (f", {self.superseded:,} line(s) superseded by a later record of their job" if self.superseded else "")
                + (f", {self.headers:,} header line(s) inside the output skipped" if self.headers else "")
                + (f", {self.unreadable:,} unreadable line(s) quarantined" if self.unreadable else "")
                + f"; {self.no_gpu_mem:,} finished job(s) without GPU memory (loaded without peak_gpu_mem_gb)"
                + (f"; {self.elapsed_from_times:,} finished job(s) without a usable Elapsed (missing, zero or "
                   "unreadable): run time from End - Start" if self.elapsed_from_times else "")
                + (f"; {self.retired:,} array range(s) stored as one job by an older gpucast retired (CANCELLED: "
                   "their tasks are jobs of their own)" if self.retired else ""))


@dataclass
class ParsedSacct(SlurmImport):
    """`parse_sacct`'s answer: what became of the lines, and the rows, all of them (`jobs`)."""

    jobs: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SCHEMA))


def parse_sacct(text: str | Iterable[bytes | str], source: str, mapping: Mapping | None = None) -> ParsedSacct:
    """Parse `sacct --parsable2` output (any field order, extra fields ignored) into one contract row per job,
    all of them in `jobs` at once (the flow streams them instead: `SacctReader`)."""
    frames: list[pl.DataFrame] = []
    out = SacctReader(source, mapping).read(text.split("\n") if isinstance(text, str) else text, frames.append)
    return ParsedSacct(**{f.name: getattr(out, f.name) for f in fields(out)},
                       jobs=pl.concat(frames) if frames else pl.DataFrame(schema=SCHEMA))


# A job's lines ordered by the lifecycle stage their state is (the later wins when their times tie)
STAGE = {"PENDING": 0, "RUNNING": 1, **dict.fromkeys(FINISHED, 2)}
# What is kept per job (a list, indexed by these): its latest line so far (only what its row is built from:
# `Kept`), and what its steps said
RECENCY, LINE, HEADER, NUMBER, STEP_MEM, STEP_OOM, STEP_LINES = range(7)
# The fields a job's row is built from (`_record`), besides JobID and Cluster (its key says them) and the fields a
# mapping names
ROW_FIELDS = ("JobName", "Partition", "Account", "State", "ExitCode", "Submit", "Start", "End", "Elapsed", "Timelimit",
              "AllocTRES", "ReqTRES", "TRESUsageInMax", "NNodes", "TRESPerNode", "Comment")


@dataclass(frozen=True)
class Kept:
    """How a job's latest line is kept until its row is built: of a header's fields, only those its row is built
    from (a jobs-only export, `sacct -X`, is all job lines: kept whole, they made the reader ~2x the file), and of
    the TRES lists only the items read (`_trim`) unless a mapping names them. The Comment last, so a `|` inside it
    stays in it."""

    names: tuple[str, ...]  # the kept line's fields
    at: tuple[int, ...]  # their places in the header's lines
    cluster: bool  # the header has a Cluster field (the key's cluster is its value)
    tres: tuple[int | None, ...] | None  # places of AllocTRES, ReqTRES, TRESUsageInMax in the kept line: trimmed

    @classmethod
    def of(cls, header: tuple[str, ...], mapping: Mapping | None) -> Kept:
        mapped = {m.lower() for m in mapping.columns} if mapping else set()
        names = tuple(sorted((n for n in dict.fromkeys(header)
                              if n in ROW_FIELDS or (n.lower() in mapped and n not in ("JobID", "Cluster"))),
                             key=lambda n: n == "Comment"))
        trimmed = not mapped & {"alloctres", "reqtres", "tresusageinmax"}
        tres = tuple(names.index(n) if n in names else None for n in ("AllocTRES", "ReqTRES", "TRESUsageInMax"))
        return cls(names, tuple(header.index(n) for n in names), "Cluster" in header, tres if trimmed else None)

    def line(self, values: list[str]) -> str:
        kept = [values[i] for i in self.at]
        if self.tres:
            _trim(*self.tres, kept)
        return "|".join(kept)

    def row(self, key: str, line: str) -> dict[str, str]:
        """The kept line as {field: value}, with its JobID and Cluster (from its key)."""
        cluster, job_id = key.split("|", 1)
        row = dict(zip(self.names, _split(line, self.names), strict=True))
        row["JobID"] = job_id
        if self.cluster:
            row["Cluster"] = cluster
        return row


def _trim(alloc: int | None, req: int | None, usage: int | None, kept: list[str]) -> None:
    """Of the TRES lists in `kept` (a line's kept values, these their places), only what its row reads: of the
    list `_record` reads (AllocTRES, else ReqTRES) its GPU items (`_gpus`), the other list empty; of
    TRESUsageInMax its `gres/gpumem` (`_gpu_mem_gb`)."""
    read = alloc if alloc is not None and _value(kept[alloc]) else req
    for i in (alloc, req):
        if i is not None:
            kept[i] = ",".join(x for x in kept[i].split(",") if x.startswith(("gres/gpu=", "gres/gpu:"))) \
                if i == read else ""
    if usage is not None and kept[usage]:
        kept[usage] = ",".join(x for x in kept[usage].split(",") if x.startswith("gres/gpumem="))


class SacctReader:
    """Reads sacct output a line at a time; `read` hands the rows on in chunks and returns what became of each line.

    Per job (keyed by cluster and JobID: `sacct -M all` prints each cluster's 5001) it keeps its latest line
    (what its row is built from, `Kept`; its number; how late it is), its steps' largest GPU memory and whether
    one ran out of memory; the rows are built at the end, one chunk at a time. An array range record is expanded
    there into its tasks, which take nothing per task while it is read."""

    def __init__(self, source: str, mapping: Mapping | None = None, chunk_rows: int = CHUNK_ROWS):
        self.source, self.mapping, self.chunk_rows = source, mapping, chunk_rows
        self.asked: set[str] = set()  # arrays ("cluster|array id", `stored_arrays`) to say whether a record names
        self.out = SlurmImport()
        self.header: tuple[str, ...] = ()
        self._at: dict[str, int] = {}
        self._kept = Kept((), (), False, None)  # how this header's job lines are kept
        self._number = 0
        self._jobs: dict[str, list] = {}  # "cluster|JobID" -> [RECENCY, LINE, HEADER (its Kept), NUMBER, STEP_MEM, ...]
        self._ranges: dict[str, None] = {}  # the keys of array range records (a JobID with `[`), in order
        # Of the arrays `asked`, those with a record here (a task or a range). Only those: an object kept from
        # every array's line would pin the memory of the jobs' lines around it after they are freed (a 1 GB export
        # kept ~600 MB more through the ingest that follows).
        self.arrays: set[str] = set()
        self.clusters: set[str] = set()  # the clusters of the output's lines
        self._rows: list[dict] = []
        self._emit: Callable[[pl.DataFrame], object] = self._rows.extend
        self._garbled, self._first_garbled = 0, ""
        self._task_rows = 0

    # reading ---------------------------------------------------------------------------------------

    def start(self, lines: Iterator[bytes | str]) -> None:
        """Read the header (the first line that is not blank); `NotSacctOutput` when it is not sacct's."""
        for raw in lines:
            self._number += 1
            if isinstance(raw, bytes):
                try:
                    raw = raw.decode("utf-8-sig")
                except UnicodeDecodeError:
                    raise NotSacctOutput(f"{self.source}: not sacct --parsable2 output (not UTF-8 text); export it "
                                         "with `sacct --parsable2` (docs/sources.md)") from None
            if text := raw.lstrip("\ufeff").rstrip("\r\n"):
                if text.strip():
                    self._header(text)
                    return
        self._header("")

    def _header(self, first: str) -> None:
        header = first.rstrip("|").split("|") if first else []  # --parsable (not 2) ends every line with `|`
        absent = [f for f in REQUIRED_FIELDS if f not in header]
        if absent:
            # the first line is quoted only when it reads as a header of names: a file given by mistake
            # (`files: /etc/passwd`) must not have its lines copied into run messages that planners read
            first = first or "an empty file"
            found = repr(first) if re.fullmatch(r"[A-Za-z0-9_ ,;|\t.\-]{1,120}", first) else \
                f"a line of {len(first)} characters that is not a header of names"
            raise NotSacctOutput(f"{self.source}: not sacct --parsable2 output: its first line names no "
                                 f"{', '.join(absent)} (found {found}); export it with `sacct --parsable2 --format="
                                 f"{','.join(SACCT_FIELDS)}` (docs/sources.md), or ingest it with `gpucast ingest`")
        self.header = tuple(header)
        self._at = {name: i for i, name in reversed(list(enumerate(header)))}  # a name twice: its first place
        self._kept = Kept.of(self.header, self.mapping)

    def read(self, lines: Iterable[bytes | str], emit: Callable[[pl.DataFrame], object]) -> SlurmImport:
        """Read every line (the header first, unless `start` read it), hand the rows to `emit` a chunk at a time;
        what became of each line. `NotSacctOutput` when more than half of its lines cannot be read."""
        lines = iter(lines)
        if not self.header:
            self.start(lines)
        self._emit = emit
        for raw in lines:
            self.feed(raw)
        return self._finish()

    def feed(self, raw: bytes | str) -> None:
        """One line: a job's record, a step, a header inside the output, or a line that cannot be read."""
        self._number += 1
        why, cut = None, False
        if isinstance(raw, bytes):
            cut, raw = isinstance(raw, CutLine), raw.rstrip(b"\r\n")
            try:
                text = raw.decode()
            except UnicodeDecodeError as exc:
                text, why = raw.decode(errors="replace"), self._not_utf8(raw, exc)
            if cut:
                why = f"longer than {MAX_LINE_BYTES:,} bytes (only that much was read)"
        else:
            text = raw.rstrip("\r\n")
        if not text.strip():
            return
        self.out.lines += 1
        if "Submit" in text and self._is_header(text):
            self.out.headers += 1
            self._header(text)
            return
        values = _split(text, self.header)
        garbled = cut or len(values) != len(self.header)  # not a line of this output (a Latin-1 name is one)
        if why is None and garbled:
            why = f"{len(values)} fields where its header has {len(self.header)}"
        if why is not None:
            self._unreadable(values, why, garbled)
            return
        at = self._at
        cluster = _value(values[at["Cluster"]]) or NO_CLUSTER if "Cluster" in at else NO_CLUSTER
        self.clusters.add(cluster)
        job_id = values[at["JobID"]]
        if "." in job_id:  # 123.batch, 123.extern, 123.0, 123_7.batch, 123+0.0
            self._step(f"{cluster}|{job_id.split('.', 1)[0]}", values)
        else:
            self._job(f"{cluster}|{job_id}", job_id, values)

    def shared(self, job_id: str) -> bool:
        """Whether jobs of several clusters of this output have the JobID `job_id` (`sacct -M all`: each cluster
        numbers its own), so a run naming only the JobID cannot tell which one ran it (`mlflow.join_runs`). Asked
        while the rows are handed on (`read` has read every line)."""
        if len(self.clusters) < 2:
            return False
        return sum((e := self._jobs.get(f"{cluster}|{job_id}")) is not None and e[LINE] is not None
                   for cluster in self.clusters) > 1

    def _is_header(self, text: str) -> bool:
        """A header line inside the output (two exports joined): it names the required fields, and where this
        header has its JobID it has no job id (they start with a digit)."""
        names = text.rstrip("|").split("|")
        if not all(f in names for f in REQUIRED_FIELDS):
            return False
        i = self._at["JobID"]
        return i >= len(names) or not names[i][:1].isdigit()

    def _job(self, key: str, job_id: str, values: list[str]) -> None:
        recency = _recency(values, self._at)
        entry = self._jobs.get(key)
        if entry is None:
            self._jobs[key] = [recency, self._kept.line(values), self._kept, self._number, 0.0, False, 0]
        elif entry[LINE] is None or recency >= entry[RECENCY]:  # the later line wins a tie
            self.out.superseded += entry[LINE] is not None
            entry[:STEP_MEM] = [recency, self._kept.line(values), self._kept, self._number]
        else:
            self.out.superseded += 1
            return
        if "_" in job_id and self.asked:  # an array's task (`7000_5`) or range record (`7000_[3-1000]`)
            if (array := f"{key.split('|', 1)[0]}|{job_id.split('_', 1)[0]}") in self.asked:
                self.arrays.add(array)
        if "[" in job_id:  # a range record: expanded at the end (`_array_ranges`)
            self._ranges[key] = None

    def _step(self, key: str, values: list[str]) -> None:
        entry = self._jobs.get(key)
        if entry is None:
            entry = self._jobs[key] = [None, None, None, 0, 0.0, False, 0]
        self.out.steps += 1
        entry[STEP_LINES] += 1
        if "TRESUsageInMax" in self._at and (mem := _gpu_mem_gb(values[self._at["TRESUsageInMax"]])) > entry[STEP_MEM]:
            entry[STEP_MEM] = mem
        if values[self._at["State"]].split(" ")[0].upper() == "OUT_OF_MEMORY":
            entry[STEP_OOM] = True

    def _not_utf8(self, raw: bytes, exc: UnicodeDecodeError) -> str:
        place = raw[:exc.start].count(b"|")
        name = self.header[min(place, len(self.header) - 1)]
        return (f"{name} holds byte 0x{raw[exc.start]:02x} (byte {exc.start + 1} of the line), which is not UTF-8; "
                "export with a UTF-8 locale (LANG=C.UTF-8 sacct ...) or convert the file "
                "(iconv -f latin1 -t utf-8)")

    def _unreadable(self, values: list[str], why: str, garbled: bool) -> None:
        """A line that cannot be read: a row with what could be read of it, and the reason, for the ingest to
        quarantine (never the whole output for one line). `garbled`: not even the header's fields (counted to
        tell output that is mostly not sacct's, `_finish`)."""
        why = f"{self.source} line {self._number}: {why}"
        if garbled:
            self._first_garbled = self._first_garbled or why
            self._garbled += 1
        self.out.unreadable += 1
        if len(values) == len(self.header):
            record = _record(dict(zip(self.header, values, strict=True)), 0.0, False, None)
        else:
            record = dict.fromkeys(SCHEMA)
            if (i := self._at["JobID"]) < len(values):
                cluster = _value(values[self._at["Cluster"]]) if self._at.get("Cluster", len(values)) < len(values) \
                    else None
                record[c.JOB_ID] = f"slurm-{cluster or NO_CLUSTER}-{values[i]}"
        record[SOURCE_ERROR] = why
        self._add(record)

    # the rows ----------------------------------------------------------------------------------------

    def _finish(self) -> SlurmImport:
        out = self.out
        if self._garbled * 2 > out.lines:  # mostly not lines of its header's fields: not sacct's output at all
            raise NotSacctOutput(f"{self._first_garbled}; {self._garbled:,} of its {out.lines:,} line(s) cannot be "
                                 "read, so it is not sacct --parsable2 output: export it again with `sacct "
                                 "--parsable2` (docs/sources.md)")
        ranges, arrays = self._array_ranges()
        for key, entry in self._jobs.items():
            if key in ranges:
                row, record, spans = ranges[key]
                if spans is None:  # not expanded: the job's own row (its record says why where it cannot be used)
                    self._job_row(record, row)
                else:
                    self._tasks(key, row, record, spans, arrays)
            elif arrays and (named := _range_naming(key, arrays)) is not None \
                    and (entry[LINE] is None or entry[RECENCY] < named[0]):
                out.superseded += entry[LINE] is not None  # a task whose latest record is a range's: its row there
            elif entry[LINE] is None:
                out.orphan_steps += entry[STEP_LINES]
            else:
                row, record = self._built(key, entry)
                self._job_row(record, row)
        self._flush()
        out.tasks_superseded = out.tasks - self._task_rows
        self._jobs, self._ranges = {}, {}  # the jobs' lines: freed before the ingest that follows needs memory
        return out

    def _built(self, key: str, entry: list) -> tuple[dict[str, str], dict]:
        """A job's latest line as {field: value}, and its contract record (a reason names the line)."""
        row = entry[HEADER].row(key, entry[LINE])
        record = _record(row, entry[STEP_MEM], entry[STEP_OOM], self.mapping)
        if record[SOURCE_ERROR] is not None:
            record[SOURCE_ERROR] = f"{self.source} line {entry[NUMBER]}: {record[SOURCE_ERROR]}"
        return row, record

    def _job_row(self, record: dict, row: dict[str, str]) -> None:
        """Hand on one job's row (a job without GPUs is only counted), counting what the summary says of it."""
        out = self.out
        if record[SOURCE_ERROR] is None:
            if record[c.GPU_COUNT] is None:
                out.no_gpu += 1
                return
            if record[c.PEAK_GPU_MEM_GB] is None and record[c.STATUS] in FINISHED:
                out.no_gpu_mem += 1
            runtime = record[c.RUNTIME_HOURS]
            if runtime and not runtime.startswith("Elapsed") and record[c.STATUS] in FINISHED \
                    and not _hours(row.get("Elapsed")):
                out.elapsed_from_times += 1
        self._add(record)

    def _array_ranges(self) -> tuple[dict[str, tuple], dict[str, list[tuple[int, int, str, list[range]]]]]:
        """Each array range record built once: {key: (line as fields, record, task id spans)}, the spans None where
        it is not expanded (not a GPU job, or its record cannot be used, or it is not written as Slurm writes ranges
        or names more than MAX_ARRAY_TASKS tasks: then its record says why); and of those expanded, per array
        ("cluster|array id"), [(recency, line number, key, spans)] (`_range_naming`). Nothing is kept per task."""
        ranges: dict[str, tuple] = {}
        arrays: dict[str, list[tuple[int, int, str, list[range]]]] = {}
        for key in self._ranges:
            entry = self._jobs[key]
            row, record = self._built(key, entry)
            spans = None
            if record[SOURCE_ERROR] is None and record[c.GPU_COUNT] is not None:
                try:
                    array, spans = _expandable(row["JobID"])
                except ValueError as exc:
                    record[SOURCE_ERROR] = f"{self.source} line {entry[NUMBER]}: JobID {row['JobID']}: {exc}"
                else:
                    late = (entry[RECENCY], entry[NUMBER], key, spans)
                    arrays.setdefault(f"{key.split('|', 1)[0]}|{array}", []).append(late)
            ranges[key] = (row, record, spans)
        return ranges, arrays

    def _tasks(self, key: str, row: dict[str, str], record: dict, spans: list[range],
               arrays: dict[str, list[tuple[int, int, str, list[range]]]]) -> None:
        """An array range record (`7000_[3-1000]`): one row per task (`slurm-<cluster>-7000_5`), each the range's
        record under the task's id, so the task's later record (running, finished) replaces it like any job's.
        A task is left out where a later range names it too, or where its own line is as late or later (that
        line is its row)."""
        cluster, job_id = key.split("|", 1)
        array = job_id.split("_", 1)[0]
        rivals, recency = arrays[f"{cluster}|{array}"], self._jobs[key][RECENCY]
        self.out.ranges += 1
        for task in _task_ids(spans):
            self.out.tasks += 1
            if len(rivals) > 1 and _latest(rivals, task)[2] != key:
                continue  # a later range names it
            task_id = f"{array}_{task}"
            own = self._jobs.get(f"{cluster}|{task_id}")
            if own is not None and own[LINE] is not None and own[RECENCY] >= recency:
                continue  # its own line is as late or later
            if own is not None and own[STEP_LINES]:  # steps of the task itself without its line (rare): folded in
                row_of_task = {**row, "JobID": task_id}
                self._job_row(_record(row_of_task, own[STEP_MEM], own[STEP_OOM], self.mapping), row_of_task)
            else:
                self._job_row({**record, c.JOB_ID: f"slurm-{cluster}-{task_id}"}, row)
            self._task_rows += 1

    def _add(self, record: dict) -> None:
        self._rows.append(record)
        self.out.rows += 1
        self.out.quarantined += record[SOURCE_ERROR] is not None
        if len(self._rows) >= self.chunk_rows:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            self._emit(pl.DataFrame(self._rows, schema=SCHEMA))
            self._rows = []


def _latest(ranges: list[tuple[int, int, str, list[range]]], task: int) -> tuple[int, int, str, list[range]] | None:
    """Of an array's expanded ranges, the latest (by recency, then line number) that names task `task`."""
    return max((r for r in ranges if any(task in span for span in r[3])), key=lambda r: r[:2], default=None)


def _range_naming(key: str, arrays: dict[str, list[tuple[int, int, str, list[range]]]]
                  ) -> tuple[int, int, str, list[range]] | None:
    """For a job that is an array's task (`cluster|7000_5`), the latest expanded range of its array naming it."""
    cluster, job_id = key.split("|", 1)
    array, _, task = job_id.partition("_")
    if not task.isdigit() or (ranges := arrays.get(f"{cluster}|{array}")) is None:
        return None
    return _latest(ranges, int(task))


RETIRED = ("superseded: gpucast loads a pending array range as one job per task since issue 48 (the tasks are "
           "jobs of their own: {}_<task>)")
_STORED_RANGE = re.compile(r"^slurm-(.+)-(\d+)_\[")


def stored_arrays(stored: pl.DataFrame) -> set[str]:
    """The arrays ("cluster|array id") of array ranges an older gpucast stored as one job (`retired_ranges`)."""
    return {f"{m[1]}|{m[2]}" for job in stored[c.JOB_ID] if (m := _STORED_RANGE.match(job))} if stored.height else set()


def retired_ranges(stored: pl.DataFrame, arrays: set[str]) -> pl.DataFrame:
    """Rows that retire the array ranges an older gpucast stored as one pending job (`slurm-hpc1-7000_[1-1000]`,
    never written again, so pending for ever): of `stored` (their latest records, as the warehouse holds them),
    each range of an array this output has a record of (`SacctReader.arrays`), again, as CANCELLED with the reason
    (`RETIRED`) at its own time, so the warehouse's latest-record rule makes it the job's row. Contract text in
    (`warehouse/sources.py` selects it so), contract text out."""
    keep = [bool((m := _STORED_RANGE.match(job)) and f"{m[1]}|{m[2]}" in arrays) for job in stored[c.JOB_ID]]
    stored = stored.filter(pl.Series(keep, dtype=pl.Boolean)) if keep else stored
    return stored.select(c.COLUMNS).with_columns(
        pl.lit("CANCELLED").alias(c.STATUS), pl.lit(None, dtype=pl.String).alias(c.RUNTIME_HOURS),
        pl.format(RETIRED, pl.col(c.JOB_ID).str.replace(r"_\[.*$", "")).alias(c.FAILURE_REASON),
        pl.lit(None, dtype=pl.String).alias(SOURCE_ERROR)).select(SCHEMA.keys())


def array_tasks(job_id: str) -> tuple[str, list[range]]:
    """(array id, task id spans) of an array range record's JobID as Slurm writes it: `7000_[1-1000]`,
    `7000_[1,3,5-9]`, `7000_[1-999:2]` (every second), with a `%20` throttle (how many run at once: ignored);
    ValueError when it is not written so."""
    m = _ARRAY_RANGE.match(job_id)
    if not m:
        raise ValueError("not an array range as Slurm writes one (7000_[1-1000], 7000_[1,3,5-9], 7000_[1-999:2], "
                         "with a %N throttle)")
    spans = []
    for item in m[2].split("%", 1)[0].split(","):
        part = _ARRAY_ITEM.match(item.strip())
        first, last, step = (int(part[1]), int(part[2] or part[1]), int(part[3] or 1)) if part else (1, 0, 0)
        if not part or last < first or step < 1:
            raise ValueError(f"{item!r} is not a task id, a span a-b or a span with a step a-b:s")
        spans.append(range(first, last + 1, step))
    return m[1], spans


def _expandable(job_id: str) -> tuple[str, list[range]]:
    """`array_tasks`, and ValueError for a range that names more than MAX_ARRAY_TASKS tasks."""
    array, spans = array_tasks(job_id)
    if (count := sum(len(s) for s in spans)) > MAX_ARRAY_TASKS:
        raise ValueError(f"an array range of {count:,} tasks, more than the {MAX_ARRAY_TASKS:,} one range record is "
                         "expanded into; each task loads when it has a record of its own (running, finished)")
    return array, spans


def _task_ids(spans: list[range]) -> Iterator[int]:
    """The task ids of the spans, each once, in their order."""
    if len(spans) == 1:
        yield from spans[0]
        return
    seen: set[int] = set()
    for span in spans:
        for task in span:
            if task not in seen:
                seen.add(task)
                yield task


def _recency(values: list[str], at: dict[str, int]) -> int:
    """How late a job's line is: its latest known time (End, else Start, else Submit: the last thing that happened
    to it), then its lifecycle stage (finished > running > pending; a state gpucast does not know counts as
    pending), as one number; the later line wins a tie. So a requeued job's current attempt wins over the attempts
    before it, and a job seen pending, running and finished is finished."""
    times = [t for k in ("End", "Start", "Submit") if k in at and (t := _time(values[at[k]])) is not None]
    seconds = int((max(times) - _EPOCH).total_seconds()) if times else -(10**12)
    state = STATES.get(values[at["State"]].split(" ")[0].upper(), (None, None))[0]
    return seconds * 4 + STAGE.get(state, 0)


def _time(text: str | None) -> datetime | None:
    """sacct's `2026-11-20T08:05:00` (UTC: `read_sacct` runs it with TZ=UTC); None when missing or unreadable."""
    value = _value(text)
    try:
        return parse_iso(value).replace(tzinfo=None) if value else None
    except ValueError:
        return None


def _split(line: str, header: tuple[str, ...]) -> list[str]:
    """A data line's values in its header's order (a `|` inside the last field, the Comment, kept in it)."""
    values = line.split("|")
    if len(values) > len(header) and header[-1] == "Comment":
        values = values[:len(header) - 1] + ["|".join(values[len(header) - 1:])]
    if line.endswith("|") and len(values) == len(header) + 1 and values[-1] == "":  # --parsable's trailing `|`
        values = values[:-1]
    return values


def _value(text: str | None) -> str | None:
    return None if text is None or text.strip() in MISSING else text.strip()


def _record(row: dict[str, str], step_mem: float, step_oom: bool, mapping: Mapping | None) -> dict[str, str | None]:
    """One job's contract record: its own line's state and times, its steps' peak GPU memory; `SOURCE_ERROR` set
    when it cannot be used (a Comment nested too deep)."""
    cluster = _value(row.get("Cluster")) or NO_CLUSTER
    state_word = row["State"].split(" ")[0].upper()  # `CANCELLED by 1234`, `completed`
    status, reason = STATES.get(state_word, (row["State"], None))
    if status == "FAILED" and reason is None:
        reason = _failure(row, step_oom)
    submitted, start, end = (_value(row.get(k)) for k in ("Submit", "Start", "End"))
    finished = status in FINISHED
    gpu_type, gpu_count = _gpus(_value(row.get("AllocTRES")) or _value(row.get("ReqTRES")) or "")
    if gpu_count is None:  # an export with the GPUs per node only (TRESPerNode): per node x nodes (issue 51)
        gpu_type, gpu_count = _per_node_gpus(_value(row.get("TRESPerNode")), _value(row.get("NNodes")), gpu_type)
    peak = max(_gpu_mem_gb(row.get("TRESUsageInMax")), step_mem)
    record: dict[str, str | None] = dict.fromkeys(SCHEMA)
    record.update({
        c.JOB_ID: f"slurm-{cluster}-{row['JobID']}", c.SUBMITTED_AT: submitted,
        c.UPDATED_AT: (end if finished else None) or start or submitted, c.STATUS: status,
        c.QUEUE: _value(row.get("Partition")), c.TEAM: _value(row.get("Account")), c.FAILURE_REASON: reason,
        # contract v4: what the job asked for and its name forecast the run time of jobs without model features
        c.JOB_NAME: _value(row.get("JobName")), c.TIME_LIMIT_HOURS: _hours(row.get("Timelimit")),
        c.GPU_TYPE: gpu_type, c.GPU_COUNT: gpu_count,
        c.RUNTIME_HOURS: _runtime(row) if finished else None,
        c.PEAK_GPU_MEM_GB: repr(peak) if peak > 0 else None,  # 0: the GPU reported nothing, not a job that used none
    })
    features, record[SOURCE_ERROR] = _features(row, mapping)
    for name, value in features.items():
        # what sacct records wins over what a Comment says, except GPU memory: Slurm's gres/gpumem is a task's
        # (summed over the GPUs the task drives), a site's own figure is the contract's per-GPU peak
        if record.get(name) is None or name == c.PEAK_GPU_MEM_GB:
            record[name] = value
    return record


def _failure(row: dict[str, str], step_oom: bool) -> str:
    """A FAILED job's reason: OOM when one of its steps ran out of memory, else its exit code."""
    if step_oom:
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


_PER_NODE = re.compile(r"gres[/:]gpu(?::([A-Za-z][\w.-]*))?[:=](\d+)")


def _per_node_gpus(per_node: str | None, nodes: str | None, gpu_type: str | None) -> tuple[str | None, str | None]:
    """(gpu_type, gpu_count) from `TRESPerNode` (`gres/gpu:4`, `gres/gpu:a100:4`, `gres:gpu:4`) x `NNodes` (missing:
    one node); (gpu_type, None) without a GPU item."""
    m = _PER_NODE.search(per_node or "")
    if not m or m[2] == "0":
        return gpu_type, None
    count = int(m[2]) * (int(nodes) if nodes and nodes.isdigit() and int(nodes) > 0 else 1)
    typed = (catalog.canonical(m[1]) or m[1]) if m[1] else None
    return gpu_type or typed, str(count)


def _gpu_mem_gb(tres: str | None) -> float:
    """The `gres/gpumem` of one line's TRESUsageInMax, in GB (decimal, the contract's unit); 0.0 without one."""
    if not tres or "gres/gpumem=" not in tres:
        return 0.0
    sizes = UNITS[c.PEAK_GPU_MEM_GB]
    best = 0.0
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == "gres/gpumem" and (m := _TRES_NUMBER.match(value.strip())):
            best = max(best, float(m[1]) * sizes[TRES_UNITS[m[2]]] / sizes["GB"])
    return best


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


def _features(row: dict[str, str], mapping: Mapping | None) -> tuple[dict[str, str], str | None]:
    """Contract fields a site writes itself: the keys of a JSON `Comment` (contract names, their aliases, or
    names the mapping's `fields` give), and sacct fields the mapping names (`model_type: WCKey`); and why the
    job cannot be used (a Comment nested deeper than MAX_JSON_DEPTH, as a JSON Lines record may: no RecursionError),
    else None."""
    comment = _value(row.get("Comment")) or ""
    source: dict[str, str] = {}
    if comment.startswith("{"):
        if (depth := json_depth(comment)) > MAX_JSON_DEPTH:
            return {}, (f"Comment: JSON nested {depth:,} levels deep, more than the {MAX_JSON_DEPTH} read; write "
                        "the job's Comment as a flat JSON object of names and values")
        try:
            data = json.loads(comment)
        except (json.JSONDecodeError, RecursionError):
            data = {}
        if isinstance(data, dict):
            source = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items() if v is not None}
    if mapping:
        named = {k.lower(): k for k in row}
        for column in mapping.columns:
            if column not in source and column.lower() in named and _value(row[named[column.lower()]]):
                source[column] = row[named[column.lower()]].strip()
    return named_fields(source, mapping), None

