"""Expected arrivals in the capacity plan: the jobs not queued yet, from the demand forecast, as GPUs.

The packing (`capacity.py`) plans the jobs already queued ("known"); they all wait "now", so after
the first days the known load is only the tails of long jobs. Each plan row (day x queue x GPU type)
also gets the GPUs for the jobs the demand forecast (`current_demand_forecast`) expects that day:

    expected_gpu_hours_q = the forecast's daily GPU-hours at quantile q (P50, P90) of the series mapped to the row
    packing_efficiency   = sum(gpu_hours_p50) / (24 x sum(gpus_needed_p50)) over the plan's own packing of
                           known jobs on recent days (the first day of this plan and of the last
                           RECENT_PLAN_DAYS days planned before it), per queue x GPU type; no such day: 1.0; never
                           under EFFICIENCY_FLOOR
    gpus_needed_expected_q = ceil(expected_gpu_hours_q / 24 / packing_efficiency)
    gpus_total_q         = gpus_needed_q (known jobs) + gpus_needed_expected_q
    shortfall_total_q    = max(0, gpus_total_q - gpus_owned - the spare GPUs of the queue's types of at least
                           the row's memory that cover it (below))
    gpus_needed_known    = gpus_needed_p50 and gpus_needed_expected = gpus_needed_expected_p50: the
                           issue's names for the two parts of the P50 total, kept as columns for planners

A day's GPU-hours over 24 hours are the GPUs busy on average through the day in steady state (the
overflow of long jobs into tomorrow is matched by yesterday's overflow into today); the efficiency
turns busy GPU-hours into GPUs as the packing really needs them (under 1: whole GPUs for partial
days; over 1: jobs sharing GPUs). The floor keeps a queue whose recent days held a single short job
(2 GPU-hours on one GPU: 0.08) from multiplying its expected GPUs by 12.

Series map to rows by GPU type: a series whose type is one of its queue's planned types goes to
that row; 'unknown' (or a type the queue is not planned on) goes to the queue's largest type, the
rule for a known job of unknown size (`capacity.largest_index`: the first listed of the largest memory, never the
last by name; a type a what-if adds to a queue takes no series: session 14, issue 53 item 4).
A queue whose series all land on one row (a queue planned on one GPU type:
its series, `unknown` included) gets the P90 of the queue's total arrivals as that row's `expected_gpu_hours_p90`
(session 9: its series' `gpu_hours_p90_of_queue`, the queue's own forecast's P90 split over its series by P50), not
its series' P90s summed. A queue planned on several types keeps each row's series' own P90s summed (review 59 M1: GPU
types are not fungible, so a row given its P50 share of the queue's P90 would be planned under its own P90); a
forecast without the column: the series' own P90s summed, as before. Either way a row's P90 is never above its
queue's (session 14: a part of the queue's arrivals is never more than the whole; before, a queue given a second
row saw its first row's P90 jump from its share of the queue's P90 to its series' own, above the queue's).

A row's shortfall (`shortfall_total_*`, session 14) is what its GPUs owned and the spare GPUs of its queue's types
of at least its memory do not cover (`covered_shortfall`): a job planned on one GPU runs on any of as much memory.

The site's P90 total (issue 53 item 3) is not the rows' P90s summed: each row also carries its part of the P90
of the site's total (`expected_gpu_hours_p90_of_total`: the demand forecast's `gpu_hours_p90_of_total`, the
total series' own P90 split over the series by their P50) and the GPUs it needs (`gpus_total_p90_of_total` =
the known jobs at P90 + those GPUs), so `by_day`'s sum over a day's rows is the P90 of the total expected
arrivals (plus the known jobs at their P90). A forecast without the column (older runs): the row's own P90.

Its pair at P50 (session 14): each row also carries its part of the site total's own P50
(`expected_gpu_hours_p50_of_total`, the forecast's `gpu_hours_p50_of_total`, split the same way) and its GPUs
(`gpus_total_p50_of_total` = the known jobs at P50 + those GPUs), summed by `by_day` as `gpus_site_p50`: the P50 of
the forecast whose P90 is `gpus_site_p90`. `gpus_total_p50` summed is the queues' own P50s (a second forecast: on the
demo, whose total follows the last weeks' higher level while the queues lag it, the site P90 was 3-11x that sum).
A forecast without the column: the row's own P50.
"""

from __future__ import annotations

import polars as pl

from gpucast.records import catalog
from gpucast.tasks.plan.capacity import DAY_HOURS, QUANTILES, first_day

RECENT_PLAN_DAYS = 6  # earlier days whose plan's first day measures the packing efficiency (with today's: a week)
EFFICIENCY_FLOOR = 0.5
# the demand forecast's columns the plan reads (warehouse/plan.py)
FORECAST_COLUMNS = ("day", "queue", "gpu_type", "gpu_hours_p50", "gpu_hours_p90", "gpu_hours_p90_of_total",
                    "gpu_hours_p90_of_queue", "gpu_hours_p50_of_total")
# the recent packing the efficiency is measured on: per earlier plan run's first day
PACKING_COLUMNS = ("queue", "gpu_type", "gpu_hours_p50", "gpus_needed_p50")
EXPECTED_COLUMNS = ("expected_gpu_hours_p50", "expected_gpu_hours_p90", "packing_efficiency",
                    "gpus_needed_expected_p50", "gpus_needed_expected_p90", "gpus_total_p50", "gpus_total_p90",
                    "shortfall_total_p50", "shortfall_total_p90", "gpus_needed_known", "gpus_needed_expected",
                    "expected_gpu_hours_p90_of_total", "gpus_total_p90_of_total", "expected_gpu_hours_p50_of_total",
                    "gpus_total_p50_of_total")
FORECAST_SCHEMA = {"day": pl.Date, "queue": pl.String, "gpu_type": pl.String, "gpu_hours_p50": pl.Float64,
                   "gpu_hours_p90": pl.Float64}
PACKING_SCHEMA = {"queue": pl.String, "gpu_type": pl.String, "gpu_hours_p50": pl.Float64, "gpus_needed_p50": pl.Int64}


def efficiency(gpu_hours: pl.Expr, gpus: pl.Expr) -> pl.Expr:
    """Exclusive GPU-hours per GPU-hour the packing needed: 1.0 when nothing was measured, never under the floor."""
    measured = (gpu_hours / (DAY_HOURS * gpus)).clip(lower_bound=EFFICIENCY_FLOOR)
    return pl.when((gpus > 0) & (gpu_hours > 0)).then(measured).otherwise(1.0)


def gpus_for(gpu_hours: pl.Expr, eff: pl.Expr) -> pl.Expr:
    """GPUs a day's expected GPU-hours need at packing efficiency `eff`, rounded up (0 for none)."""
    return pl.when(gpu_hours > 0).then((gpu_hours / DAY_HOURS / eff - 1e-9).ceil()).otherwise(0).cast(pl.Int64)


def packing_efficiency(rows: pl.DataFrame, recent: pl.DataFrame) -> pl.DataFrame:
    """queue, gpu_type, packing_efficiency: measured on this plan's first day and the recent runs' first days."""
    today = first_day(rows).select(PACKING_COLUMNS).cast(PACKING_SCHEMA)
    days = pl.concat([today, recent.select(PACKING_COLUMNS).cast(PACKING_SCHEMA)])
    sums = days.group_by("queue", "gpu_type").agg(pl.col("gpu_hours_p50").sum(), pl.col("gpus_needed_p50").sum())
    return sums.select("queue", "gpu_type",
                       efficiency(pl.col("gpu_hours_p50"), pl.col("gpus_needed_p50")).alias("packing_efficiency"))


# a series' part of the site's / its queue's P90, and of the site's P50 -> the series' own quantile it falls back to
SHARES = {"gpu_hours_p90_of_total": "gpu_hours_p90", "gpu_hours_p90_of_queue": "gpu_hours_p90",
          "gpu_hours_p50_of_total": "gpu_hours_p50"}


def _with_shares(forecast: pl.DataFrame) -> pl.DataFrame:
    """`forecast` with every one of `SHARES`; a forecast (or a row) without one: the series' own quantile (before
    issue 53 / session 9 / session 14: the P90s, or the P50s, summed)."""
    forecast = forecast.with_columns(pl.col(own).alias(c) for c, own in SHARES.items() if c not in forecast.columns)
    return forecast.with_columns(pl.col(c).fill_null(pl.col(own)) for c, own in SHARES.items())


def forecast_queues(forecast: pl.DataFrame) -> list[str]:
    """The queues the demand forecast expects jobs in: planned even with none queued."""
    return sorted(forecast["queue"].unique().to_list())


def map_series(forecast: pl.DataFrame, rows: pl.DataFrame, added: set | frozenset = frozenset()) -> pl.DataFrame:
    """The forecast's daily GPU-hours summed per day x queue x the plan's GPU type (see the module doc);
    series of a queue the plan has no row for are left out (the caller plans every forecast queue). `added`: the
    (queue, GPU type) rows a what-if added (tasks/plan/capacity.py): no series goes there."""
    types = rows.select("queue", "gpu_type", "gpu_memory_gb").unique(maintain_order=True)  # the plan's order
    mine = pl.struct("queue", "gpu_type").is_in([{"queue": q, "gpu_type": t} for q, t in added]).not_() \
        if added else pl.lit(True)
    types = types.filter(mine | mine.any().over("queue").not_())  # a queue of added types only keeps them
    # the queue's largest type: the first listed of its largest memory (capacity.largest_index), never by name
    largest = types.group_by("queue", maintain_order=True).agg(
        pl.col("gpu_type").filter(pl.col("gpu_memory_gb") == pl.col("gpu_memory_gb").max()).first().alias("_largest"))
    names = {t: catalog.canonical(t) or t for t in forecast["gpu_type"].unique().to_list()}
    forecast = _with_shares(forecast)
    f = (forecast.select(FORECAST_COLUMNS).with_columns(pl.col("gpu_type").replace_strict(names))
         .join(largest, on="queue", how="inner")
         .join(types.select("queue", "gpu_type", pl.lit(True).alias("_planned")), on=["queue", "gpu_type"], how="left")
         .with_columns(pl.when(pl.col("_planned")).then(pl.col("gpu_type")).otherwise(pl.col("_largest")).alias("gpu_type")))
    # a queue whose series land on one row takes its queue's P90; one planned on several types keeps each row's
    # series' own P90s: GPU types are not fungible, so a row's share of the queue's P90 would plan it under its own;
    # but never more than the queue's P90 (a part of the queue's arrivals is never above the whole: session 14)
    one_row = pl.col("gpu_type").n_unique().over("day", "queue") == 1
    f = f.with_columns(pl.when(one_row).then(pl.col("gpu_hours_p90_of_queue")).otherwise(pl.col("gpu_hours_p90"))
                       .alias("_row_p90"), pl.col("gpu_hours_p90_of_queue").sum().over("day", "queue").alias("_queue_p90"),
                       one_row.alias("_one_row"))
    # the cap only where the queue spans rows: a one-row queue's sum is its P90 as summed here, to the bit (review
    # 64b S3-1: the two sums can differ in the last place)
    return f.group_by("day", "queue", "gpu_type").agg(
        pl.col("gpu_hours_p50").sum().alias("expected_gpu_hours_p50"),
        pl.when(pl.col("_one_row").first()).then(pl.col("_row_p90").sum())
        .otherwise(pl.min_horizontal(pl.col("_row_p90").sum(), pl.col("_queue_p90").first())).alias("expected_gpu_hours_p90"),
        pl.col("gpu_hours_p90_of_total").sum().alias("expected_gpu_hours_p90_of_total"),
        pl.col("gpu_hours_p50_of_total").sum().alias("expected_gpu_hours_p50_of_total"))


def add_expected(rows: pl.DataFrame, forecast: pl.DataFrame, recent: pl.DataFrame,
                 added: set | frozenset = frozenset()) -> tuple[pl.DataFrame, list[str]]:
    """The plan's rows with EXPECTED_COLUMNS (see the module doc), and notes on what the forecast covered. `added`:
    the (queue, GPU type) rows a what-if added (`map_series`)."""
    notes = []
    if forecast.is_empty():
        notes.append("no demand forecast (run `gpucast demand`): expected arrivals 0, the plan holds the queued jobs only")
    else:
        notes += coverage_notes(rows["day"].unique(), forecast["day"])
    eff = packing_efficiency(rows, recent)
    typed = _with_shares(forecast).select(FORECAST_COLUMNS).cast(
        FORECAST_SCHEMA | dict.fromkeys(SHARES, pl.Float64))
    # the rows' order kept (`covered_shortfall` reads equal memories in the plan's order; review 64b S3-2)
    out = (rows.join(map_series(typed, rows, added), on=["day", "queue", "gpu_type"], how="left", maintain_order="left")
           .join(eff, on=["queue", "gpu_type"], how="left", maintain_order="left")
           .with_columns(pl.col("^expected_gpu_hours_.*$").fill_null(0.0), pl.col("packing_efficiency").fill_null(1.0)))
    for q in QUANTILES:
        out = out.with_columns(gpus_for(pl.col(f"expected_gpu_hours_{q}"), pl.col("packing_efficiency"))
                               .alias(f"gpus_needed_expected_{q}"))
        out = out.with_columns((pl.col(f"gpus_needed_{q}") + pl.col(f"gpus_needed_expected_{q}")).alias(f"gpus_total_{q}"))
        out = out.with_columns(covered_shortfall(out, f"gpus_total_{q}").alias(f"shortfall_total_{q}"),
                               # the queued jobs' shortfall too, so it is never above the total's (review 64b S1-1)
                               covered_shortfall(out, f"gpus_needed_{q}").alias(f"shortfall_{q}"))
    # the row's part of the site's P90 total: the known jobs at P90 + its share of the total arrivals' P90; and at P50
    out = out.with_columns((pl.col(f"gpus_needed_{q}") + gpus_for(pl.col(f"expected_gpu_hours_{q}_of_total"),
                                                                  pl.col("packing_efficiency"))).alias(f"gpus_total_{q}_of_total")
                           for q in QUANTILES)
    # the names for the two parts at P50: the queued jobs and the expected arrivals
    out = out.with_columns(pl.col("gpus_needed_p50").alias("gpus_needed_known"),
                           pl.col("gpus_needed_expected_p50").alias("gpus_needed_expected"))
    return out.select(*rows.columns, *EXPECTED_COLUMNS), notes


def covered_shortfall(rows: pl.DataFrame, needed: str) -> pl.Series:
    """Each row's GPUs short: `needed` less its GPUs owned, less what the spare GPUs of its queue's types of at least
    its memory cover that day (a job planned on a GPU runs on any GPU of as much memory: one spare GPU covers one
    GPU short). Spare GPUs cover the rows of the largest memory first, equal memories pooled, then down, in the
    plan's order; a row whose owned count is unknown: null. Before session 14 each row's shortfall stood alone, so
    GPUs of a type added to a queue never covered its other types (issue 53 item 4, the demo's "buy 16 H100")."""
    need, owned = rows[needed].to_numpy(), rows["gpus_owned"].to_numpy()
    keys = rows.select("day", "queue", "gpu_memory_gb").rows()
    out = [None if o is None or o != o else max(0, int(n) - int(o)) for n, o in zip(need, owned, strict=True)]
    spare: dict = {}  # (day, queue) -> memory -> spare GPUs of the rows of that memory
    for k, n, o in zip(keys, need, owned, strict=True):
        if o is not None and o == o:
            by_mem = spare.setdefault(k[:2], {})
            by_mem[k[2]] = by_mem.get(k[2], 0) + max(0, int(o) - int(n))
    order = sorted(range(len(keys)), key=lambda i: -keys[i][2])  # stable: the plan's order among equal memories
    pool: dict = {}  # (day, queue) -> (spare not yet used, memories already pooled)
    for i in order:
        if out[i] is None:
            continue
        day_queue, mem = keys[i][:2], keys[i][2]
        left, pooled = pool.get(day_queue, (0, set()))
        if mem not in pooled:
            left, pooled = left + spare.get(day_queue, {}).get(mem, 0), pooled | {mem}
        used = min(left, out[i])
        out[i] -= used
        pool[day_queue] = (left - used, pooled)
    return pl.Series(out, dtype=pl.Int64)


def coverage_notes(plan_days: pl.Series, forecast_days: pl.Series) -> list[str]:
    """What the plan's days miss of the demand forecast, with what to run: none when it covers them all. A forecast
    whose days are all before the plan (its history ends long before the plan's first day) gives no arrivals at all:
    said first, so no planner reads the plan's zeros as a quiet fortnight (issue 38, defect 10)."""
    covered = forecast_days.filter(forecast_days.is_in(plan_days.implode())).n_unique()
    if covered == plan_days.len():
        return []
    first, last = forecast_days.min(), forecast_days.max()
    plan_first, plan_last = plan_days.min(), plan_days.max()
    further = f"`gpucast demand --plan-days {(plan_last - first).days + 1}`"
    if covered == 0:
        return [f"NO EXPECTED ARRIVALS: the demand forecast ({first} to {last}) covers none of the plan's "
                f"{plan_days.len()} days ({plan_first} to {plan_last}), so expected arrivals are 0 on every day and "
                "the plan holds the queued jobs only; import the jobs since the history's end, or forecast as far as "
                f"the plan with {further}"]
    return [f"the demand forecast covers {covered} of the plan's {plan_days.len()} days ({first} to {last}); the "
            f"others have no expected arrivals (forecast as far as the plan with {further})"]


def site_gpus(rows: pl.DataFrame) -> pl.DataFrame:
    """Per day of the plan's `rows`, the site's GPUs at P50 and P90 (`gpus_site_p50`, `gpus_site_p90`): the rows' parts
    of the site total's own forecast summed (`gpus_total_{q}_of_total`, module doc; a plan recorded before those
    columns: the rows' own `gpus_total_{q}`), and never fewer than one queue's own (its rows' `gpus_total_{q}` summed).
    The site's hours are at least each queue's already (`demand.forecast.at_least_its_parts`), but the split by P50
    moves a queue's hours onto rows of another packing efficiency, so in GPUs the sum could still fall below one
    queue's: the demo's page showed the site needing 85 GPUs at P90 beside a100-80g's 89 (newcomer 26 P2)."""
    site = {q: f"gpus_total_{q}_of_total" if f"gpus_total_{q}_of_total" in rows.columns else f"gpus_total_{q}"
            for q in QUANTILES}
    summed = rows.group_by("day").agg(
        *(pl.col(site[q]).fill_null(pl.col(f"gpus_total_{q}")).sum().alias(f"gpus_site_{q}") for q in QUANTILES))
    queue = (rows.group_by("day", "queue").agg(*(pl.col(f"gpus_total_{q}").sum() for q in QUANTILES))
             .group_by("day").agg(*(pl.col(f"gpus_total_{q}").max().alias(f"_queue_{q}") for q in QUANTILES)))
    return (summed.join(queue, on="day", how="left")
            .with_columns(*(pl.max_horizontal(f"gpus_site_{q}", f"_queue_{q}").alias(f"gpus_site_{q}") for q in QUANTILES))
            .select("day", *(f"gpus_site_{q}" for q in QUANTILES)))


def by_day(rows: pl.DataFrame) -> pl.DataFrame:
    """The plan's days over all queues and GPU types: GPUs needed known + expected (P50), the totals, owned, short.
    `gpus_site_p90` is the site's P90 total (the rows' `gpus_total_p90_of_total`, module doc), not the rows' own P90s
    (`gpus_total_p90`) summed (a plan recorded before that column: their sum), and `gpus_site_p50` its pair, the P50 of
    the same forecast of the site's total (the rows' `gpus_total_p50_of_total`; before that column: `gpus_total_p50`),
    where `gpus_total_p50` is the queues' own P50s summed, each never below one queue's own (`site_gpus`);
    `site_short_p90` what the site lacks at its P90 (owned
    known), and `shortfall_total_p90` the queues' own shortfalls summed, each at its own P90: a queue short while
    another has GPUs to spare counts there, not in the site's."""
    days = rows.group_by("day").agg(
        pl.col("gpus_needed_p50").sum().alias("known_p50"), pl.col("gpus_needed_expected_p50").sum().alias("expected_p50"),
        pl.col("gpus_total_p50").sum(),
        pl.when(pl.col("gpus_owned").is_not_null().any()).then(pl.col("gpus_owned").sum()).alias("gpus_owned"),
        pl.col("shortfall_total_p90").sum(),
    ).join(site_gpus(rows), on="day", how="left").sort("day")
    site_short = (pl.col("gpus_site_p90") - pl.col("gpus_owned")).clip(lower_bound=0).alias("site_short_p90")
    return days.with_columns(site_short).select("day", "known_p50", "expected_p50", "gpus_total_p50", "gpus_site_p50",
                                                "gpus_site_p90", "gpus_owned", "site_short_p90", "shortfall_total_p90")
