"""The capacity plan: how many GPUs of each type every queue needs each day, from the forecasts.

Input: one row per pending job with its queue, start day, `gpu_count`, memory request and run time
(P50 and P90). Output: per day x queue x GPU type the GPUs needed at P50 and at P90, beside the
lower bound and the GPUs owned; the jobs that fit no GPU of their queue; and the co-location groups.

**The model.** A GPU's day is a box `memory x 24 hours`. A job is a box `footprint x hours` on each
of its `gpu_count` GPUs; a job longer than its day continues on the next days (a segment per day,
each packed on its day). Jobs may share a GPU while their footprints fit its memory together:

* footprint = `safe_request_gb` (the P90 peak plus 10% allocator headroom, rounded up to 0.5 GB:
  `tasks/learn/score.py`, the same rule as `oom_risk`) plus **0.5 GB per extra process** on a shared GPU
  (each process holds its own CUDA context). In units of 0.5 GB that is `request + 1` per job
  against a capacity of `memory + 1`, so a job alone fits exactly when it is not at OOM risk.
* time is counted in quarter hours, rounded up (a plan never under-counts a job's time).

**Compute** (newcomer 27 P3): jobs side by side on one GPU also share its arithmetic. A job's compute share is
its forecast sustained GFLOP/s (`gpu_demand_gflops` P50) per GPU over the GPU type's dense peak at the job's
precision (records/reference/gpu_catalog.csv), in hundredths, rounded up; jobs share a GPU only while their shares
add up to at most the whole GPU. Before, memory alone decided, and the demo's first day ran 18 of 46 shelves at up
to 2.6x the GPU's peak: a count of GPUs no schedule could keep. A job without a compute forecast, or a GPU type the
catalogue lacks, counts no share (memory alone decides, as before); a job alone on a GPU always fits.

**The packing** is the classic two-stage shelf heuristic for this box-in-box problem (Hybrid First
Fit, Chung, Garey & Johnson 1982), with best fit in both stages: jobs sorted by time (longest first)
go onto "shelves" (jobs running side by side on one GPU, best fit by memory among the shelves with compute to
spare); shelves, tallest first, go onto GPUs by best fit on time (stacked one after another through the day).
Packed items never overlap in memory x time nor exceed the GPU's compute, so every GPU's plan is a schedule it can
run at the jobs' forecast speeds. Both stages are best-fit
decreasing over integer sizes, answered per item in O(log n) from the sizes still free; it packs
1M jobs in seconds (`tests/benchmarks/bench_plan.py`). Libraries measured first: `rectpack`
(MaxRects, best bin first) packs 2,000 jobs in 1.2 s and grows with the square of the bins, 1M jobs
would take hours; `binpacking` is one-dimensional with a linear scan over bins.

**Two lower bounds** are printed beside it. `lower_bound`: the group's exclusive GPU-hours (hours x
GPUs, unshared) over the 24 hours of the day, rounded up: what the queue needs with one job per GPU.
Sharing takes the plan under it; the gap is the gain from co-location. `shared_bound`: the jobs'
memory x time (footprints as above) over one GPU's memory x 24 hours, or the jobs' compute shares x time over
one GPU's x 24 hours where that is larger, rounded up: no packing that shares GPUs by these rules can use fewer,
so `gpus_needed / shared_bound` is the plan's slack.

A job with no memory forecast is planned as "unknown size": a whole GPU (its queue's largest) for
its first day, and counted. **Types of equal memory** (session 14): a queue's types are ordered by memory, and
among equal memories as the inventory lists them for the queue (not by name), so a job goes to the first listed
of the smallest memory that holds it and "the queue's largest type" is the first listed of the largest memory
(`largest_index`; the expected arrivals' `unknown` series go there too, tasks/plan/arrivals.py). A type a what-if
`add`s to a queue owning none of it (`GpuChoice.added`) comes after the queue's own types: a job goes to it only
when none of the queue's own types holds it, and never as the queue's largest; its spare GPUs cover the queue's
shortfall instead (arrivals.covered_shortfall). So 16 H100s added to a queue of A100-80GBs take none of its jobs or
series from the A100s (before, the H100s, last by name, took its jobs of unknown size and its `unknown` series, its
rows each kept their own P90 and the plan's shortfall rose: issue 53 item 4).
A job larger than every GPU of its queue is listed with the smallest
GPU of the catalogue that would hold it (or none), never packed.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np
import polars as pl

from gpucast.records import catalog
from gpucast.records.inventory import Inventory
from gpucast.tasks.learn.score import REQUEST_STEP_GB

DAY_HOURS = 24
SLOTS_PER_HOUR = 4  # time in quarter hours
CONTEXT_GB = 0.5  # each extra process on a shared GPU: its CUDA context
QUANTILES = ("p50", "p90")
# the columns the plan needs per job (warehouse/plan.py reads them from the latest forecasts)
JOB_COLUMNS = ("job_id", "queue", "day", "gpu_count", "mem_gb", "hours_p50", "hours_p90")
# ... and, where the forecasts have them, what a job's compute share is read from (the module doc; absent: no share)
COMPUTE_COLUMNS = ("gflops_p50", "precision")
COMPUTE_UNITS = 100  # a GPU's compute, in hundredths
SCAN_LIMIT = 64  # memory rooms a job looks in for a shelf with compute to spare (tightest first) before it opens its own
PLAN_COLUMNS = ("day", "queue", "gpu_type", "gpu_memory_gb", "jobs", "unknown_size_jobs", "gpu_hours_p50",
                "gpu_hours_p90", "lower_bound_p50", "lower_bound_p90", "shared_bound_p50", "shared_bound_p90",
                "gpus_needed_p50", "gpus_needed_p90", "gpus_owned", "shortfall_p50", "shortfall_p90")


@dataclass(frozen=True)
class GpuChoice:
    gpu_type: str
    memory_gb: float
    owned: int | None  # None: no inventory says
    gpus_per_node: int | None = None  # None: nodes not known (tasks/plan/gangs.py)
    added: bool = False  # a type a what-if adds to the queue (records/inventory.py `Owned.added`; the module doc)


@dataclass
class Plan:
    rows: pl.DataFrame  # PLAN_COLUMNS
    unplaceable: pl.DataFrame  # job_id, queue, mem_gb, gpu_count, smallest_fitting_gpu
    colocation: pl.DataFrame  # day, queue, gpu_type, group_id, jobs, job_ids, mem_gb
    jobs: int
    unknown_size_jobs: int
    notes: list[str]


def first_day(rows: pl.DataFrame) -> pl.DataFrame:
    """The plan's rows of its first day (what the CLI, the nightly report and the page lead with)."""
    return rows.filter(pl.col("day") == pl.col("day").min())


def best_fit(sizes: np.ndarray, capacity: int, shares: np.ndarray | None = None) -> np.ndarray:
    """Bin of every item, items taken in the given order: each goes into the open bin whose free
    room is the smallest that holds it, else a new bin. Sizes are whole numbers in 1..capacity.
    `shares` (whole numbers in 0..COMPUTE_UNITS): a second room every bin has COMPUTE_UNITS of; an item goes only
    into a bin with that much to spare: the smallest room that has one, looking at up to SCAN_LIMIT rooms, and there
    the bin with the least compute to spare that holds it."""
    bins = np.empty(len(sizes), dtype=np.int64)
    free_by_room: dict[int, list[int]] = {}  # free room -> bins with exactly that room, by compute to spare (rising)
    spares_by_room: dict[int, list[int]] = {}  # ... and their compute to spare, in the same order (bisect in C)
    rooms: list[int] = []  # sorted rooms that have a bin
    spare: list[int] = []  # compute to spare, per bin
    opened = 0
    for i, size in enumerate(sizes.tolist()):
        share = 0 if shares is None else int(shares[i])
        at = bisect.bisect_left(rooms, size)
        found = _with_spare(rooms, spares_by_room, at, share) if share else (at, -1)
        if found is not None and found[0] < len(rooms):
            at, k = found
            room = rooms[at]
            stack = free_by_room[room]
            b = stack.pop(k)
            spares_by_room[room].pop(k)
            if not stack:
                del free_by_room[room], spares_by_room[room]
                rooms.pop(at)
        else:
            b, room = opened, capacity
            opened += 1
            spare.append(COMPUTE_UNITS)
        spare[b] -= share
        bins[i] = b
        left = room - size
        if left > 0:
            if left not in free_by_room:
                free_by_room[left], spares_by_room[left] = [], []
                bisect.insort(rooms, left)
            k = bisect.bisect_right(spares_by_room[left], spare[b])  # (after equals: the newest last, as a stack)
            spares_by_room[left].insert(k, spare[b])
            free_by_room[left].insert(k, b)
    return bins


def _with_spare(rooms: list[int], spares_by_room: dict[int, list[int]], at: int, share: int) -> tuple[int, int] | None:
    """(position in `rooms`, position in its stack) of the bin, from room `rooms[at]` up, with the least compute to
    spare that holds `share` (each room's bins are ordered by it); None when the first SCAN_LIMIT rooms have none.
    Review 86 S1-1: the limit counted bins, and once 64 bins of used-up compute sat in the tight rooms every later
    job opened its own (1,000 jobs of 40 hundredths took 936 bins, not 500)."""
    for r in range(at, min(len(rooms), at + SCAN_LIMIT)):
        spares = spares_by_room[rooms[r]]
        if spares[-1] >= share:  # the room's most to spare holds it: its tightest that does
            return r, bisect.bisect_left(spares, share)
    return None


def pack(widths: np.ndarray, heights: np.ndarray, width_cap: int, height_cap: int,
         shares: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Two-stage shelf packing (see the module doc). Returns (GPU of every item, shelf of every item);
    items are boxes width x height, GPUs width_cap x height_cap; `shares`: each item's compute (`best_fit`)."""
    if len(widths) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort((-widths, -heights))  # longest first, wider first among equals
    shelf_of = np.empty(len(widths), dtype=np.int64)
    shelf_of[order] = best_fit(widths[order], width_cap, None if shares is None else shares[order])
    # a shelf is as tall as its first (tallest) item; shelves are numbered in the order they opened
    n_shelves = int(shelf_of.max()) + 1
    shelf_height = np.zeros(n_shelves, dtype=np.int64)
    np.maximum.at(shelf_height, shelf_of, heights)
    shelf_order = np.argsort(-shelf_height, kind="stable")
    gpu_of_shelf = np.empty(n_shelves, dtype=np.int64)
    gpu_of_shelf[shelf_order] = best_fit(shelf_height[shelf_order], height_cap)
    return gpu_of_shelf[shelf_of], shelf_of


def _units(gb: np.ndarray) -> np.ndarray:
    return np.ceil(np.asarray(gb, dtype=np.float64) / REQUEST_STEP_GB - 1e-9).astype(np.int64)


def choose_gpus(inventory: Inventory | None, queues: list[str], gpu_types: list[str] | None,
                default_gb: float) -> dict[str, list[GpuChoice]]:
    """Per queue, the GPU types it is planned on, smallest memory first. Without an inventory (or a
    queue it does not list): one GPU of `default_gb`, owned unknown. `gpu_types` narrows the plan to
    those types; a queue owning none of them is planned on them with none owned. Among equal memories the order
    the inventory lists them (the module doc)."""
    owned = inventory.queues() if inventory else {}
    wanted = [catalog.gpus()[t] for t in gpu_types] if gpu_types else []
    out = {}
    for q in sorted(set(queues) | set(owned)):
        choices = [GpuChoice(o.gpu_type, o.memory_gb, o.count, o.gpus_per_node, o.added) for o in owned.get(q, [])]
        if wanted:
            choices = [ch for ch in choices if ch.gpu_type in gpu_types] or \
                      [GpuChoice(g.gpu_type, g.memory_gb, 0) for g in wanted]
        if not choices:
            choices = [GpuChoice(f"any-{default_gb:g}GB", default_gb, None)]
        out[q] = sorted(choices, key=lambda ch: ch.memory_gb)  # stable: equal memories as listed
    return out


def smallest_catalogue_gpu(mem_gb: float) -> str | None:
    fits = [g for g in catalog.gpus().values() if g.memory_gb >= mem_gb]
    return min(fits, key=lambda g: (g.memory_gb, g.gpu_type)).gpu_type if fits else None


def segments(day_offset: np.ndarray, hours: np.ndarray, days: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split every job's hours into per-day pieces from its start day: (job row, day offset, hours),
    pieces past the plan's last day left out."""
    n = np.maximum(np.ceil(hours / DAY_HOURS - 1e-9).astype(np.int64), 1)
    row = np.repeat(np.arange(len(hours)), n)
    k = np.arange(len(row)) - np.repeat(np.cumsum(n) - n, n)  # 0, 1, ... within each job
    piece = np.minimum(hours[row] - k * DAY_HOURS, DAY_HOURS)
    day = day_offset[row] + k
    keep = day < days
    return row[keep], day[keep], piece[keep]


PLAN_SCHEMA = {"day": pl.Date, "queue": pl.String, "gpu_type": pl.String, "gpu_memory_gb": pl.Float64,
               "gpus_owned": pl.Int64, "jobs": pl.Int64, "unknown_size_jobs": pl.Int64,
               "gpu_hours_p50": pl.Float64, "lower_bound_p50": pl.Int64, "gpus_needed_p50": pl.Int64,
               "shared_bound_p50": pl.Int64, "gpu_hours_p90": pl.Float64, "lower_bound_p90": pl.Int64,
               "gpus_needed_p90": pl.Int64, "shared_bound_p90": pl.Int64}
UNPLACEABLE_SCHEMA = {"job_id": pl.String, "queue": pl.String, "mem_gb": pl.Float64, "gpu_count": pl.Int64,
                      "smallest_fitting_gpu": pl.String, "first_day": pl.Date, "hours_p90": pl.Float64}
COLOCATION_SCHEMA = {"queue": pl.String, "gpu_type": pl.String, "day": pl.Date, "group_id": pl.Int64, "jobs": pl.Int64,
                     "job_ids": pl.List(pl.String), "mem_gb": pl.Float64}


@dataclass(frozen=True)
class DayFigures:
    """One day of one queue's jobs on one GPU type, packed at one quantile of their run times."""

    gpus: int = 0
    gpu_hours: float = 0.0
    shared_bound: int = 0
    jobs: int = 0
    unknown: int = 0

    @property
    def lower_bound(self) -> int:
        return math.ceil(self.gpu_hours / DAY_HOURS - 1e-9)


@dataclass
class Packed:
    """A queue's jobs on one GPU type packed at one quantile: figures per day offset, and (at P90) the
    co-location groups."""

    days: dict[int, DayFigures]
    groups: list[dict]


def plan_capacity(jobs: pl.DataFrame, inventory: Inventory | None, start: date, days: int,
                  gpu_types: list[str] | None = None, default_gb: float = 80.0, progress=None,
                  queues: list[str] | None = None, cache: dict | None = None) -> Plan:
    """The plan for `days` days from `start` (see the module doc). `jobs` has JOB_COLUMNS; a job's
    `day` before `start` starts on `start` (it is waiting now). `queues`: planned too with no job queued
    (the queues the demand forecast expects jobs in). Steps: the jobs' day offsets, the GPU
    types of each queue, then per queue each job on the smallest type that holds it, packed per type.
    `cache`: a dict kept between plans of the same jobs (the what-if scenarios, tasks/plan/scenarios.py): a queue
    planned on the same GPU types for the same days is packed once (the count owned does not change a packing)."""
    notes = []
    if inventory is None:
        notes.append(f"no inventory: each queue planned on GPUs of {default_gb:g} GB (GPUCAST_DEFAULT_GPU_MEM_GB), owned unknown")
    jobs = _in_window(jobs, start, days)
    by_queue = jobs.partition_by("queue", as_dict=True, maintain_order=True) if jobs.height else {}
    rows, unplaceable, coloc, unknown_total = [], [], [], 0
    planned: dict[str, set[str]] = {}  # queue -> the GPU types a pending job is planned on
    for queue, options in choose_gpus(inventory, jobs["queue"].unique().to_list() + list(queues or []), gpu_types, default_gb).items():
        key = (queue, tuple((ch.gpu_type, ch.memory_gb, ch.added) for ch in options), start, days)
        if cache is None or key not in cache:
            packed = _plan_queue(queue, by_queue.get((queue,), jobs.clear()), options, days, progress)
            if cache is not None:
                cache[key] = packed
        big, groups = cache[key] if cache is not None else packed
        if big is not None:
            unplaceable.append(big)
        for choice, (p50, p90, n, unknown) in zip(options, groups, strict=True):
            unknown_total += unknown
            if n:
                planned.setdefault(queue, set()).add(choice.gpu_type)
            rows += _day_rows(queue, choice, start, days, p50, p90)
            coloc += [{**g, "queue": queue, "gpu_type": choice.gpu_type, "day": start + timedelta(days=g["day"])}
                      for g in p90.groups]
    if inventory is not None:
        notes += unused_inventory(inventory, set(jobs["queue"].unique().to_list()), planned, set(queues or []),
                                  gpu_types)
    plan_rows = pl.DataFrame(rows, schema=PLAN_SCHEMA).with_columns(
        *[(pl.col(f"gpus_needed_{q}") - pl.col("gpus_owned")).clip(0).alias(f"shortfall_{q}") for q in QUANTILES]
    ).select(PLAN_COLUMNS).sort("day", "queue", "gpu_memory_gb", maintain_order=True)  # a queue's types in its order
    unplaceable_df = (pl.concat(unplaceable).with_columns(
        (pl.lit(start) + pl.duration(days=pl.col("_offset"))).alias("first_day")).select(list(UNPLACEABLE_SCHEMA))
        if unplaceable else pl.DataFrame(schema=UNPLACEABLE_SCHEMA))
    return Plan(plan_rows, unplaceable_df, pl.DataFrame(coloc, schema=COLOCATION_SCHEMA),
                jobs.height - unplaceable_df.height, unknown_total, notes)


def _plan_queue(queue: str, qjobs: pl.DataFrame, options: list[GpuChoice], days: int,
                progress=None) -> tuple[pl.DataFrame | None, list[tuple[Packed, Packed, int, int]]]:
    """One queue's jobs (with `_offset`) on its GPU types: (the jobs no type holds (None: none), per type (P50
    packing, P90 packing, jobs, jobs of unknown size))."""
    pick, too_big = assign_types(qjobs, options)
    big = _unplaceable(qjobs.filter(pl.Series(too_big))) if too_big.any() else None
    groups = []
    for t, choice in enumerate(options):
        sub = qjobs.filter(pl.Series((pick == t) & ~too_big))
        unknown = np.isnan(sub["mem_gb"].to_numpy().astype(np.float64))
        p50, p90 = (_pack_group(sub, unknown, choice, q, days) for q in QUANTILES)
        groups.append((p50, p90, sub.height, int(unknown.sum())))
        if progress:
            progress(f"planned {queue} on {choice.gpu_type}: {sub.height:,} job(s)")
    return big, groups


def unused_inventory(inventory: Inventory, pending: set[str], planned: dict[str, set[str]], expected: set[str],
                     gpu_types: list[str] | None = None) -> list[str]:
    """Notes naming what the inventory and the jobs do not share (issue 48: a queue `gpу`, Cyrillic у, was planned
    as a queue of its own with no jobs while the real `gpu` showed owned = null, with no note): inventory queues
    with no pending job in the plan (`pending`) and no expected arrivals (`expected`: the queues the demand
    forecast knows); the queues of pending jobs the inventory does not list (planned with owned unknown); and, in
    a queue with pending jobs, an owned GPU type none of them is planned on (`planned`: queue -> types used;
    narrowed to `gpu_types` when given). Empty when everything is used."""
    owned = inventory.queues()
    unused = [q for q in owned if q not in pending and q not in expected]
    unlisted = sorted(q for q in pending if q not in owned)
    idle = [f"{o.gpu_type} of {q!r}" for q in owned if q in pending for o in owned[q]
            if o.gpu_type not in planned.get(q, set()) and (not gpu_types or o.gpu_type in gpu_types)]
    out = []
    if unused:
        out.append(f"inventory queue(s) no job uses: {', '.join(map(repr, unused))} (no pending job, no expected "
                   f"arrivals; spelt as the job logs spell it? {inventory.source})")
    if unlisted:
        shown = ", ".join(map(repr, unlisted[:10])) + (f" and {len(unlisted) - 10} more" if len(unlisted) > 10 else "")
        out.append(f"queue(s) of pending jobs the inventory does not list, planned with owned unknown: {shown}")
    if idle:
        out.append(f"owned GPU type(s) no pending job is planned on: {', '.join(idle)}")
    return out


def _in_window(jobs: pl.DataFrame, start: date, days: int) -> pl.DataFrame:
    """The jobs starting within the plan, each with its day offset from `start` (`_offset`, 0 for a job
    waiting since before it) and its GPU count (missing: 1)."""
    return jobs.with_columns(
        pl.max_horizontal(((pl.col("day") - pl.lit(start)).dt.total_days()), pl.lit(0)).alias("_offset"),
        pl.col("gpu_count").fill_null(1).clip(1).cast(pl.Int64),
    ).filter(pl.col("_offset") < days)


def assign_types(qjobs: pl.DataFrame, options: list[GpuChoice]) -> tuple[np.ndarray, np.ndarray]:
    """(index into `options` of each job's GPU type, jobs no type holds): the smallest type that holds its
    request alone (without a context), the first listed among equal memories; a job of unknown size goes on the
    queue's largest type (`largest_index`). The plan's packing and the pending jobs' expected starts
    (tasks/plan/starts.py) both place a job by it."""
    mem = qjobs["mem_gb"].to_numpy().astype(np.float64)  # NaN: unknown size
    known = ~np.isnan(mem)
    need = np.where(known, mem, 0.0) - 1e-9
    pick = np.full(len(mem), len(options), dtype=np.int64)
    for group in _own_then_added(options):  # the queue's own types first; a what-if's added ones for what they miss
        caps = np.array([options[i].memory_gb for i in group])
        at = np.searchsorted(caps, need, side="left")
        fits = (pick == len(options)) & (at < len(group))
        pick[fits] = np.asarray(group)[np.minimum(at, len(group) - 1)][fits]
    too_big = known & (pick >= len(options))
    return np.where(known, pick, largest_index(options)), too_big


def _own_then_added(options: list[GpuChoice]) -> list[list[int]]:
    own = [i for i, ch in enumerate(options) if not ch.added]
    added = [i for i, ch in enumerate(options) if ch.added]
    return [own, added] if own and added else [own or added]


def largest_index(options: list[GpuChoice]) -> int:
    """The queue's largest type in `options` (`choose_gpus`' order): the first listed of the largest memory of the
    queue's own types (a what-if's added types only when it has none: the module doc)."""
    mine = _own_then_added(options)[0]
    top = max(options[i].memory_gb for i in mine)
    return next(i for i in mine if options[i].memory_gb == top)


def _unplaceable(big: pl.DataFrame) -> pl.DataFrame:
    """Jobs no GPU of their queue holds, with the smallest catalogue GPU that would, their day offset in the plan and
    their P90 run time (the GPUs they would hold, day by day: tasks/plan/scenarios.py)."""
    return big.select("job_id", "queue", "mem_gb", "gpu_count", "_offset", "hours_p90").with_columns(
        pl.col("mem_gb").map_elements(smallest_catalogue_gpu, return_dtype=pl.String).alias("smallest_fitting_gpu"))


def _day_rows(queue: str, choice: GpuChoice, start: date, days: int, p50: Packed, p90: Packed) -> list[dict]:
    """The plan's rows of one queue and GPU type, one per day (PLAN_SCHEMA), from its two packings."""
    rows = []
    for d in range(days):
        a, b = p50.days.get(d, DayFigures()), p90.days.get(d, DayFigures())
        rows.append({"day": start + timedelta(days=d), "queue": queue, "gpu_type": choice.gpu_type,
                     "gpu_memory_gb": choice.memory_gb, "gpus_owned": choice.owned, "jobs": b.jobs,
                     "unknown_size_jobs": b.unknown,
                     "gpu_hours_p50": a.gpu_hours, "lower_bound_p50": a.lower_bound, "gpus_needed_p50": a.gpus,
                     "shared_bound_p50": a.shared_bound,
                     "gpu_hours_p90": b.gpu_hours, "lower_bound_p90": b.lower_bound, "gpus_needed_p90": b.gpus,
                     "shared_bound_p90": b.shared_bound})
    return rows


def _pack_group(sub: pl.DataFrame, unknown: np.ndarray, choice: GpuChoice, q: str, days: int) -> Packed:
    """Pack one queue's jobs on one GPU type at quantile `q`: per day GPUs, GPU-hours, jobs; and the
    co-location groups (shelves holding 2+ jobs, kept at P90)."""
    hours = sub[f"hours_{q}"].to_numpy().astype(np.float64)
    hours = np.where(np.isnan(hours) | unknown, DAY_HOURS, hours)  # unknown: a whole day
    mem = np.where(unknown, choice.memory_gb, sub["mem_gb"].to_numpy().astype(np.float64))
    job_row, day, piece = segments(sub["_offset"].to_numpy().astype(np.int64), hours, days)
    keep = ~unknown[job_row] | (day == sub["_offset"].to_numpy()[job_row])  # unknown size: its first day only
    job_row, day, piece = job_row[keep], day[keep], piece[keep]
    copies = sub["gpu_count"].to_numpy()[job_row]
    job_row, day, piece = (np.repeat(a, copies) for a in (job_row, day, piece))
    cap = _units(choice.memory_gb) + 1
    width = np.where(unknown[job_row], cap, _units(mem[job_row]) + 1)
    height = np.ceil(piece * SLOTS_PER_HOUR - 1e-9).astype(np.int64).clip(1)
    share = compute_shares(sub, choice)[job_row]
    out = Packed({}, [])
    ids = sub["job_id"].to_numpy()
    order = np.argsort(day, kind="stable")
    bounds = np.searchsorted(day[order], np.arange(days + 1))
    for d in range(days):
        idx = order[bounds[d]:bounds[d + 1]]
        if not len(idx):
            continue
        gpu, shelf = pack(width[idx], height[idx], cap, DAY_HOURS * SLOTS_PER_HOUR, share[idx])
        area = max(float((width[idx] * height[idx]).sum()) / cap,  # memory x time, and compute x time
                   float((share[idx] * height[idx]).sum()) / COMPUTE_UNITS) / (DAY_HOURS * SLOTS_PER_HOUR)
        rows_today = np.unique(job_row[idx])
        out.days[d] = DayFigures(int(gpu.max()) + 1, float(piece[idx].sum()), math.ceil(area - 1e-9),
                                 len(rows_today), int(unknown[rows_today].sum()))
        if q == "p90":
            out.groups.extend(_groups(shelf, job_row[idx], ids, mem, start_day=d))
    return out


def compute_shares(jobs: pl.DataFrame, choice: GpuChoice) -> np.ndarray:
    """Each job's compute share of one GPU of `choice` (the module doc), in hundredths (0..COMPUTE_UNITS): its
    `gflops_p50` per GPU over the type's dense peak at its precision; 0 without a forecast or a catalogued peak."""
    gpu = catalog.gpus().get(choice.gpu_type)
    if gpu is None or not set(COMPUTE_COLUMNS) <= set(jobs.columns):
        return np.zeros(jobs.height, dtype=np.int64)
    peaks = np.array([gpu.peak_tflops(p) or np.nan for p in jobs["precision"].to_list()], dtype=np.float64) * 1e3
    per_gpu = jobs["gflops_p50"].cast(pl.Float64).to_numpy() / jobs["gpu_count"].to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        units = np.ceil(per_gpu / peaks * COMPUTE_UNITS - 1e-9)
    return np.where(np.isfinite(units), units, 0.0).clip(0, COMPUTE_UNITS).astype(np.int64)


def _groups(shelf: np.ndarray, job_row: np.ndarray, ids: np.ndarray, mem: np.ndarray, start_day: int) -> list[dict]:
    """Shelves holding two or more different jobs: jobs that fit one GPU together (MIG/MPS candidates)."""
    frame = pl.DataFrame({"shelf": shelf, "row": job_row}).unique()
    many = (frame.group_by("shelf").agg(pl.col("row").sort()).filter(pl.col("row").list.len() > 1)
            .sort("shelf").unique("row", keep="first", maintain_order=True))  # a multi-GPU job's copies repeat a
    # group: once, as its lowest shelf (sorted first: group_by's order varies from run to run, and with it which
    # copy `keep="first"` kept, so a group's id did; the golden nights caught it, tests/golden)
    return [{"day": start_day, "group_id": int(s), "jobs": len(rows), "job_ids": [str(ids[r]) for r in rows],
             "mem_gb": float(mem[rows].sum())} for s, rows in many.iter_rows()]
