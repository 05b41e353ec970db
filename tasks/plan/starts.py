"""When a pending job will start, and how long a job submitted on a plan day waits (issue 53, item 5).

The packing (`capacity.py`) says how many GPUs the jobs need; it does not say who waits when fewer are owned.
Here each queue's pending jobs are run, in the order they were submitted, on the GPUs its inventory owns of the
type the plan places them on (`capacity.assign_types`: the smallest type that holds the job):

* **first come, first served, whole GPUs, no backfill**: a job of `gpu_count` k starts when k of its type's GPUs
  are free (the k-th earliest), and holds them for its P50 run time (no run-time forecast: a day, the packing's
  rule for a job of unknown size). Schedulers hand out whole GPUs (Slurm's GRES); co-location is advice
  (`capacity_colocation`), so a wait is never shortened by it. Without backfill the wait is an upper estimate
  of a site whose scheduler backfills. The k GPUs are one gang (free at once, held to the end), on one node when
  the inventory says how many GPUs a node holds and the job fits one (`gangs.py`, issue 51 item 6).
* **running jobs hold their GPUs first**, each until its expected end: its whole expected run time given the hours
  it has already run (`job_demand.hours_expected`, survival-aware in SQL, issue 53 item 2: its forecast's P50 while
  that is still ahead; past it, the median of the longer finished runs of its queue, at least as long again, never
  beyond the queue's longest) from its start, so the remaining hours are that total less the hours run at the plan's
  start (never below 0: a job past its queue's longest run is expected to end now). A running job whose run time is
  unknown (never forecast and longer than its queue's history supports: likely an end never logged) holds its GPUs
  for `UNKNOWN_RUNNING_HOURS` from its start, as the demand history counts it as no forecast: a stale record does not
  block a queue for the whole plan. A running job sits on its logged GPU type when its queue plans on it, else on
  the queue's largest type.
* times are hours from the plan's start (its first day, 00:00 UTC). `expected_start` is the day the job starts,
  `expected_wait_hours` the hours from the plan's start to it. A job whose queue owns no GPU of its type, or fewer
  GPUs than it asks for, or whose queue's GPUs are not known (no inventory), has neither (null).

**A day's expected wait** (`expected_wait_hours` of a plan row) is what a job submitted at the start of that day
waits on its queue's GPUs of that type, by the same rule continued: each GPU is free from the time the run above
leaves it (the running and pending jobs served); a job submitted at the start of day d waits until the first GPU
is free, and the day's expected arrivals (the demand forecast's P50 GPU-hours) then fill the GPUs free earliest
first (water-filling: first come, first served on work that arrives in small pieces). A GPU a long runner holds
for weeks so delays nobody while others are free, as on the cluster. Null where no GPUs are owned (or known).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import numpy as np
import polars as pl

from gpucast.records import UNKNOWN_RUNNING_HOURS, catalog
from gpucast.records.inventory import Inventory
from gpucast.tasks.plan import gangs
from gpucast.tasks.plan.capacity import DAY_HOURS, GpuChoice, assign_types, choose_gpus, largest_index

# the running jobs the plan reads (warehouse/plan.py RUNNING_INPUT)
RUNNING_COLUMNS = ("job_id", "queue", "gpu_type", "gpu_count", "started_at", "hours_expected")
RUNNING_SCHEMA = {"job_id": pl.String, "queue": pl.String, "gpu_type": pl.String, "gpu_count": pl.Int64,
                  "started_at": pl.Datetime("us"), "hours_expected": pl.Float64}
STARTS_SCHEMA = {"job_id": pl.String, "queue": pl.String, "gpu_type": pl.String, "expected_start": pl.Date,
                 "expected_wait_hours": pl.Float64}
WAIT_SCHEMA = {"day": pl.Date, "queue": pl.String, "gpu_type": pl.String, "expected_wait_hours": pl.Float64}


@dataclass(frozen=True)
class Starts:
    """The pending jobs' expected starts (STARTS_SCHEMA), and per queue x GPU type (owned known and > 0) each GPU's
    free time (hours from the plan's start) once the running and pending jobs are served: where the days' waits go on."""

    jobs: pl.DataFrame
    free: dict[tuple[str, str], np.ndarray]
    notes: tuple[str, ...] = ()  # where running jobs hold more GPUs than a queue owns (`over_held_note`)


def expected_ends(running: pl.DataFrame, t0: datetime) -> np.ndarray:
    """Each running job's expected end, in hours from `t0` (see the module doc: survival-aware)."""
    if running.is_empty():
        return np.zeros(0)
    started = running["started_at"].dt.replace_time_zone(None).to_numpy()
    elapsed = np.maximum((np.datetime64(t0.replace(tzinfo=None), "us") - started) / np.timedelta64(1, "h"), 0.0)
    elapsed = np.nan_to_num(elapsed.astype(np.float64), nan=0.0)  # a start unknown: just started
    total = running["hours_expected"].fill_nan(None).fill_null(UNKNOWN_RUNNING_HOURS).to_numpy().astype(np.float64)
    return np.maximum(total - elapsed, 0.0)


def job_starts(jobs: pl.DataFrame, running: pl.DataFrame, inventory: Inventory | None, start: date,
               gpu_types: list[str] | None = None, default_gb: float = 80.0) -> Starts:
    """Every pending job's expected start and wait (see the module doc). `jobs`: the plan's input (JOB_COLUMNS,
    `submitted_at` when there is one: the order served, else day and id); `running`: RUNNING_COLUMNS."""
    t0 = datetime(start.year, start.month, start.day)
    order = [c for c in ("submitted_at", "day", "job_id") if c in jobs.columns]
    jobs = jobs.sort(order).with_columns(pl.col("gpu_count").fill_null(1).clip(1).cast(pl.Int64))
    running = running.with_columns(pl.col("gpu_count").fill_null(1).clip(1).cast(pl.Int64),
                                   pl.Series("_end", expected_ends(running, t0), dtype=pl.Float64))
    queues = jobs["queue"].unique().to_list() + running["queue"].unique().to_list()
    by_queue = jobs.partition_by("queue", as_dict=True) if jobs.height else {}
    run_by_queue = running.partition_by("queue", as_dict=True) if running.height else {}
    frames, free_at, notes = [], {}, []
    for queue, options in choose_gpus(inventory, queues, gpu_types, default_gb).items():
        qjobs = by_queue.get((queue,), jobs.clear())
        pick, too_big = assign_types(qjobs, options)
        names = [ch.gpu_type for ch in options]
        qrun = run_by_queue.get((queue,), running.clear())
        logged = [catalog.canonical(t) if t else None for t in qrun["gpu_type"].to_list()]
        run_pick = np.array([names.index(t) if t in names else largest_index(options) for t in logged], dtype=np.int64)
        held_by = np.concatenate([pick[~too_big], run_pick])
        asked = np.concatenate([qjobs["gpu_count"].to_numpy()[~too_big], qrun["gpu_count"].to_numpy()])
        is_running = np.concatenate([np.zeros(int((~too_big).sum()), bool), np.ones(qrun.height, bool)])
        lent = _lent(options, held_by, asked, is_running)
        for t, choice in enumerate(options):
            mine = (pick == t) & ~too_big
            sub = qjobs.filter(pl.Series(mine))
            ends = qrun.filter(pl.Series(run_pick == t))
            held = np.repeat(ends["_end"].to_numpy(), ends["gpu_count"].to_numpy()) if ends.height else np.zeros(0)
            wait = None
            gpus = (choice.owned or 0) + lent.get(t, 0)  # lent out: negative
            if gpus and (held > 0).sum() > gpus:  # (a running job past its expected end holds nothing)
                notes.append(over_held_note(queue, choice.gpu_type, held[held > 0], gpus, start))
            if gpus:
                hours = sub["hours_p50"].fill_nan(None).fill_null(float(DAY_HOURS)).to_numpy().astype(np.float64)
                # GPUs lent from an added type count as this type's nodes (review 64b S3-3): a gang may then span
                # the two, harmless for the single-GPU jobs that fill most queues
                wait, free = fcfs(np.sort(held)[::-1][:gpus], gpus, hours, sub["gpu_count"].to_numpy(),
                                  choice.gpus_per_node)
                free_at[queue, choice.gpu_type] = free
            frames.append(_starts_frame(sub, choice.gpu_type, wait, start))
        if too_big.any():
            frames.append(_starts_frame(qjobs.filter(pl.Series(too_big)), None, None, start))
    out = pl.concat(frames) if frames else pl.DataFrame(schema=STARTS_SCHEMA)
    return Starts(out.sort("job_id"), free_at, tuple(notes))


def over_held_note(queue: str, gpu_type: str, held: np.ndarray, gpus: int, start: date) -> str:
    """Newcomer 27 P2: the running jobs of a queue hold more of its GPUs at the plan's start than it owns (`held`:
    each held GPU's expected end, hours from the start). The packed `gpus_needed` count the queued jobs only, so
    the plan read "4 of 48 needed, nothing short" while every queued job waited days: said, with when the first GPU
    frees as the start model reads it (the owned count's longest holds kept, `job_starts`)."""
    first_free = start + timedelta(hours=float(np.sort(held)[len(held) - gpus]))
    return (f"{queue} on {gpu_type}: running jobs hold {len(held):,} GPUs at the plan's start, more than the "
            f"{gpus:,} owned (an inventory behind the cluster, or running records whose end was never logged?); the "
            f"GPUs needed count the queued jobs only, which wait until about {first_free:%Y-%m-%d} (expected_start)")


def _lent(options: list[GpuChoice], placed: np.ndarray, asked: np.ndarray, running: np.ndarray) -> dict[int, int]:
    """GPUs of a type a what-if adds to the queue (`GpuChoice.added`) that the jobs placed on it do not ask for
    (`placed`: the option each pending or running job is placed on, `asked`: its GPU count, `running`: whether it is a
    running one; all of them at once, so never more than are free), lent to the queue's own type of the most memory
    they hold (the first listed among equal memories): its jobs run on both, first come, first served (session 14: 16
    H100s added to a queue of A100-80GBs shorten its waits as 16 more A100s do; review 64b S2-3: 16 H200s added for one
    120 GB job lend the other 15, not none). The counts per option: + lent to it, - lent out of it."""
    out: dict[int, int] = {}
    for a, ch in enumerate(options):
        if not ch.added:  # (only an added type lends: the own types skip `_kept`'s placing, review 66a S3-2)
            continue
        on = placed == a
        spare = (ch.owned or 0) - _kept(asked[on & ~running], ch.gpus_per_node, ch.owned or 0,
                                        int(asked[on & running].sum()))
        if spare <= 0:
            continue
        fits = [i for i, own in enumerate(options) if not own.added and own.memory_gb <= ch.memory_gb]
        if fits:
            top = max(options[i].memory_gb for i in fits)
            to = next(i for i in fits if options[i].memory_gb == top)
            out[to] = out.get(to, 0) + spare
            out[a] = out.get(a, 0) - spare
    return out


def _kept(asked: np.ndarray, per_node: int | None, owned: int, held: int = 0) -> int:
    """The GPUs an added type of `owned` GPUs keeps for the jobs placed on it: the pending ones (`asked`: their GPU
    counts) and `held` GPUs of running ones. Those counts summed, or, where the inventory says how many GPUs a node
    holds, the whole nodes they touch when all placed at once as `fcfs` places them: the running jobs' GPUs on the first
    nodes, then each pending job by `gangs.fcfs_nodes` (a gang on one node when it fits one, single-GPU jobs
    best-fitted into a gang's node's free GPUs; review 65a S2-1: 16 H200s in nodes of 8 kept 10 for two 5-GPU jobs, so
    the second waited for the first; review 65b S3-2: a 5-GPU gang and three single-GPU jobs keep one node, not two;
    review 66a S3-1: the running jobs' GPUs placed first, as `fcfs` does). All of them when they cannot all start at
    once."""
    total = int(asked.sum()) + held
    if not per_node or per_node <= 1:
        return total
    if not total or owned <= 0:
        return 0
    if total > owned:  # (they cannot all start at once: no need to place them)
        return owned
    never = np.full(asked.size, 1e9)  # nobody ends: every job holds its GPUs at once
    placed, free = gangs.fcfs_nodes(np.full(held, 1e9), owned, per_node, never, asked.astype(np.int64))
    if any(p.start != 0.0 for p in placed):  # (NaN too: more than the type holds)
        return owned
    sizes = gangs.nodes_of(owned, per_node)
    ends = np.cumsum(sizes)
    busy = np.split(free, ends[:-1])  # per node: a GPU still free at 0 holds nothing
    return sum(size for size, node in zip(sizes, busy, strict=True) if (node > 0).any())


def fcfs(held: np.ndarray, gpus: int, hours: np.ndarray, counts: np.ndarray,
         per_node: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """First come, first served on `gpus` identical GPUs, whole GPUs, no backfill: (each job's start in hours, NaN
    when it asks for more GPUs than there are; each GPU's free time after them all). `held`: the free times of the
    GPUs running jobs hold (at most `gpus` of them), the others free at 0. A job's k GPUs are one gang (all free at
    once, all held to its end); `per_node` known: on one node when it fits (`gangs.fcfs_nodes`)."""
    if per_node:
        placed, free_nodes = gangs.fcfs_nodes(held, gpus, per_node, hours, counts)
        return np.array([p.start for p in placed], dtype=np.float64), free_nodes
    free = [float(h) for h in held] + [0.0] * (gpus - len(held))
    heapq.heapify(free)
    starts = np.full(len(hours), np.nan)
    for i, (h, k) in enumerate(zip(hours.tolist(), counts.tolist(), strict=True)):
        if k == 1:
            s = free[0]
            heapq.heapreplace(free, s + h)
        elif k <= gpus:
            taken = [heapq.heappop(free) for _ in range(k)]
            s = taken[-1]
            for _ in range(k):
                heapq.heappush(free, s + h)
        else:
            continue
        starts[i] = s
    return starts, np.asarray(free)


def _starts_frame(sub: pl.DataFrame, gpu_type: str | None, wait: np.ndarray | None, start: date) -> pl.DataFrame:
    if wait is None:
        wait = np.full(sub.height, np.nan)
    days = np.floor(wait / DAY_HOURS)
    return pl.DataFrame({
        "job_id": sub["job_id"], "queue": sub["queue"], "gpu_type": [gpu_type] * sub.height,
        "expected_start": [start + timedelta(days=int(d)) if np.isfinite(d) else None for d in days],
        "expected_wait_hours": pl.Series(wait, dtype=pl.Float64).fill_nan(None),
    }, schema=STARTS_SCHEMA)


def fill(free: np.ndarray, work: float, now: float) -> np.ndarray:
    """The GPUs' free times after `work` GPU-hours arrive at `now`, taken by the GPUs free earliest (water-filling:
    the lowest levels rise together to the level that holds the work)."""
    levels = np.sort(np.maximum(free, now))
    if work <= 0 or not len(levels):
        return levels
    k = np.arange(1, len(levels) + 1)
    cum = np.cumsum(levels)
    raised = int(np.searchsorted(k * levels - cum, work, side="right"))  # GPUs below the new level
    level = (work + cum[raised - 1]) / raised
    return np.maximum(levels, level)


def day_waits(rows: pl.DataFrame, free: dict[tuple[str, str], np.ndarray]) -> pl.DataFrame:
    """Per plan row (day x queue x GPU type) the wait of a job submitted at the start of the day (module doc): from
    the GPUs' free times in `free`, each day's `expected_gpu_hours_p50` filling them. WAIT_SCHEMA; null where no
    GPUs are owned."""
    out = []
    arrivals = "expected_gpu_hours_p50" if "expected_gpu_hours_p50" in rows.columns else None
    for (queue, gpu_type), sub in rows.sort("day").partition_by("queue", "gpu_type", as_dict=True,
                                                                 maintain_order=True).items():
        gpus = free.get((queue, gpu_type))
        incoming = sub[arrivals].fill_null(0.0).to_list() if arrivals else [0.0] * sub.height
        for d, (day, a) in enumerate(zip(sub["day"].to_list(), incoming, strict=True)):
            now = d * DAY_HOURS
            out.append((day, queue, gpu_type, max(0.0, float(gpus.min()) - now) if gpus is not None else None))
            if gpus is not None:
                gpus = fill(gpus, a, now)
    return pl.DataFrame(out, schema=WAIT_SCHEMA, orient="row")


def add_waits(rows: pl.DataFrame, free: dict[tuple[str, str], np.ndarray]) -> pl.DataFrame:
    """The plan's rows with `expected_wait_hours` (`day_waits`)."""
    return rows.join(day_waits(rows, free), on=["day", "queue", "gpu_type"], how="left")
