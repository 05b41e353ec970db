"""The planners' page: one self-contained HTML file (inline CSS and SVG charts, no network).

`render_site(frames, generated_at)` turns the frames of `warehouse.queries.site_frames` into the
page's HTML with a Jinja2 template (`templates/site.html.j2`); charts are drawn by matplotlib as
SVG and inlined. Nothing here reads a database or writes a file.
"""

from __future__ import annotations

import io
import re
import warnings
from datetime import datetime

import polars as pl
from jinja2 import Environment, PackageLoader, select_autoescape

from gpucast.records import catalog
from gpucast.tasks.plan.arrivals import by_day
from gpucast.tasks.plan.capacity import first_day
from gpucast.tasks.report.literal import legend, plain, visible_frame
from gpucast.tasks.report.render import scenario_table

MAX_DAY_LABELS = 7  # day labels on the demand chart's axis
QUEUE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _figure(figsize: tuple[float, float], ncols: int = 1):
    """A figure and its row of axes (`squeeze=False`: `axes[0][k]`), without pyplot: no window, no backend to pick
    and no global list of open figures to close (a nightly run has no display)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(1, ncols, squeeze=False)


PAD_INCHES = 0.1  # white space kept around a chart's drawn parts (matplotlib's `savefig.pad_inches`)
_SIZE = re.compile(r'<svg([^>]*?) width="[^"]*" height="[^"]*" viewBox="[^"]*"')


def _svg(fig) -> str:
    """The figure as SVG, cropped to what is drawn (as `bbox_inches="tight"` crops) from ONE draw.

    `savefig(bbox_inches="tight")` draws the figure twice (once to measure, once to write), and drawing is most of a
    page's CPU time. Here the figure is written once at its full size; the tight box is measured in that draw
    (`draw_event`, with the draw's own renderer, whose text sizes are cached) and the SVG's `viewBox` shows only it:
    the same picture at the same size in points, x0.77-0.81 of the CPU seconds a render on the demo warehouse
    (tests/benchmarks/bench_site.py, docs/benchmarks.md)."""
    boxes = []
    fig.canvas.mpl_connect("draw_event", lambda event: boxes.append(fig.get_tightbbox(event.renderer)))
    text = _save(fig)
    (x0, y0, x1, y1), top = boxes[-1].padded(PAD_INCHES).extents * 72, fig.get_figheight() * 72  # inches -> points
    w, h = x1 - x0, y1 - y0  # SVG's y runs down from the top: the box's top edge is at top - y1
    text, n = _SIZE.subn(lambda m: f'<svg{m[1]} width="{w:.6f}pt" height="{h:.6f}pt" viewBox="{x0:.6f} {top - y1:.6f} {w:.6f} {h:.6f}"',
                         text, count=1)
    # a header `_SIZE` does not match (a matplotlib that writes its attributes otherwise) would leave the chart at the
    # full figure's size, uncropped: matplotlib's own crop then, at the cost of its second draw
    return text if n else _save(fig, bbox_inches="tight", pad_inches=PAD_INCHES)


def _save(fig, **options) -> str:
    """The figure as SVG for inlining in HTML (from `<svg`: the XML prologue dropped); `options`: savefig's."""
    buf = io.StringIO()
    with warnings.catch_warnings():
        # a queue or job named in a script the bundled font lacks (CJK, emoji) is drawn as boxes on the chart and
        # named in full in the page's tables: matplotlib's warning is not the planner's to act on
        warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
        fig.savefig(buf, format="svg", **options)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def demand_chart(demand: pl.DataFrame) -> str | None:
    """GPU-hours per day and queue: P50 bars with the P10-P90 band as error bars."""
    if demand.is_empty():
        return None
    days = sorted(demand["day"].unique().to_list())
    queues = sorted(demand["queue"].unique().to_list())
    fig, ((ax,),) = _figure((8, 3.2))
    width = 0.8 / len(queues)
    bars = []
    for k, q in enumerate(queues):
        sub = {r["day"]: r for r in demand.filter(pl.col("queue") == q).iter_rows(named=True)}
        xs = [i + (k - (len(queues) - 1) / 2) * width for i, d in enumerate(days) if d in sub]
        rows = [sub[d] for d in days if d in sub]
        p50 = [r["gpu_hours_p50"] for r in rows]
        err = [[r["gpu_hours_p50"] - r["gpu_hours_p10"] for r in rows], [r["gpu_hours_p90"] - r["gpu_hours_p50"] for r in rows]]
        bars.append(ax.bar(xs, p50, width, yerr=err, capsize=3, color=QUEUE_COLOURS[k % len(QUEUE_COLOURS)]))
    step = -(-len(days) // MAX_DAY_LABELS)  # weeks of pending jobs: a label every `step` days, not a smudge
    ax.set_xticks(range(0, len(days), step), [f"{d:%a %d %b}" for d in days[::step]], fontsize=8)
    p50 = demand["gpu_hours_p50"].filter(demand["gpu_hours_p50"] > 0)
    log = p50.len() > 1 and p50.max() > 30 * p50.median()  # one huge day would flatten the others
    if log:
        ax.set_yscale("log")
    ax.set_ylabel("GPU-hours (P50, bar P10-P90)" + (", log scale" if log else ""))
    legend(ax, bars, queues, fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def bands_summed(series: int | None) -> str:
    """What a queue's forecast band is when it adds up the bands of its series (one per GPU type, `unknown` for the
    jobs that logged none: `series` of them, `warehouse.queries.DEMAND_OUTLOOK`): the sum of their P90s is above the
    P90 of the queue's total (issue 53 item 3), and no forecast of the queue's total exists to show instead (the demo's
    three queues each have two: their type and `unknown`). Empty for a band of one series."""
    return f"the sum of its {series} series' bands, one per GPU type (unknown too)" if series and series > 1 else ""


def outlook_chart(history: pl.DataFrame, outlook: pl.DataFrame) -> str | None:
    """Daily GPU-hours per queue: the history (`demand_daily`) and the forecast's P50 line in its P10-P90 fan (a
    queue on several GPU types: the sum of their bands, said in its title, `bands_summed`)."""
    queues = sorted(set(history["queue"].to_list()) | set(outlook["queue"].to_list()))
    if not queues:
        return None
    fig, axes = _figure((3.6 * len(queues), 2.8), len(queues))
    for k, (ax, q) in enumerate(zip(axes[0], queues, strict=True)):
        colour = QUEUE_COLOURS[k % len(QUEUE_COLOURS)]
        past = history.filter(pl.col("queue") == q).sort("day")
        ahead = outlook.filter(pl.col("queue") == q).sort("day")
        ax.plot(past["day"].to_list(), past["gpu_hours"].to_list(), color=colour, linewidth=1, label="history")
        if ahead.height:
            ax.fill_between(ahead["day"].to_list(), ahead["gpu_hours_p10"].to_list(), ahead["gpu_hours_p90"].to_list(),
                            color=colour, alpha=0.2, linewidth=0, label="forecast P10-P90")
            ax.plot(ahead["day"].to_list(), ahead["gpu_hours_p50"].to_list(), color=colour, linestyle="--",
                    label="forecast P50")
        series = ahead["series"].max() if "series" in ahead.columns and ahead.height else None
        plain(ax.set_title(q, fontsize=9, pad=14 if bands_summed(series) else 6))  # 6: matplotlib's own pad
        if bands_summed(series):  # under the title, not in it: `plain` shows a data string's newline as its escape
            ax.text(0.5, 1.01, f"band: its {series} series' bands summed", transform=ax.transAxes, ha="center",
                    va="bottom", fontsize=7, color="#666").set_parse_math(False)
        ax.tick_params(axis="x", labelsize=7, rotation=30)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0][0].set_ylabel("GPU-hours per day")
    axes[0][0].legend(fontsize=7, frameon=False)
    return _svg(fig)


def plan_chart(plan: pl.DataFrame) -> str | None:
    """GPUs needed per day, queue and GPU type: queued jobs (known) and expected arrivals stacked (P50),
    the P90 total, owned."""
    if plan.is_empty():
        return None
    keys = plan.select("queue", "gpu_type").unique(maintain_order=True).rows()
    fig, axes = _figure((3.2 * len(keys), 2.8), len(keys))
    for ax, (q, t) in zip(axes[0], keys, strict=True):
        sub = plan.filter((pl.col("queue") == q) & (pl.col("gpu_type") == t)).sort("day")
        x = list(range(sub.height))
        known = sub["gpus_needed_p50"].to_list()
        ax.bar(x, known, color="#1f77b4", label="known P50")
        ax.bar(x, sub["gpus_needed_expected_p50"].fill_null(0).to_list(), bottom=known, color="#aec7e8",
               label="expected P50")
        ax.step(x, sub["gpus_total_p90"].fill_null(sub["gpus_needed_p90"]).to_list(), where="mid", color="#d62728",
                label="total P90")
        if sub["gpus_owned"].null_count() < sub.height:
            ax.step(x, sub["gpus_owned"].to_list(), where="mid", color="black", linestyle="--", label="owned")
        plain(ax.set_title(f"{q} · {t}", fontsize=9))
        every = max(1, -(-len(x) // 4))  # at most 4 labels: 14 day labels overlap
        ax.set_xticks(x[::every], [f"{d:%d %b}" for d in sub["day"].to_list()][::every],
                      fontsize=7)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0][0].set_ylabel("GPUs")
    axes[0][0].legend(fontsize=7, frameon=False)
    return _svg(fig)


def scenario_chart(scenarios: pl.DataFrame) -> str | None:
    """GPUs unmet per day at P90 (all queues: GPUs short plus the GPUs the jobs that fit no GPU would hold that day,
    `gpus_unplaceable`), a line per scenario: the what-ifs side by side with the baseline. GPUs short alone rise where
    a purchase lets the jobs that fit no GPU run (review 67a S3-2); their sum never does. Rows recorded before session
    15 (no `gpus_unplaceable`): GPUs short alone."""
    planned = scenarios.filter(pl.col("status") == "planned") if not scenarios.is_empty() else scenarios
    names = planned["scenario"].unique(maintain_order=True).to_list() if not planned.is_empty() else []
    if len(names) < 2:  # the baseline alone: nothing to compare
        return None
    fig, ((ax,),) = _figure((8, 2.8))
    for k, name in enumerate(names):
        sub = planned.filter(pl.col("scenario") == name).sort("day")
        unmet = sub["gpus_short_p90"] + sub["gpus_unplaceable"].fill_null(0) if "gpus_unplaceable" in sub.columns \
            else sub["gpus_short_p90"]
        ax.step(sub["day"].to_list(), unmet.to_list(), where="mid", label=name,
                color=QUEUE_COLOURS[k % len(QUEUE_COLOURS)], linewidth=2.2 if k == 0 else 1.4,
                linestyle="-" if k == 0 else "--")
    ax.set_ylabel("GPUs unmet (P90)")
    ax.tick_params(axis="x", labelsize=7, rotation=30)
    legend(ax, ax.get_lines(), names, fontsize=7, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def outlook_first_day(outlook: pl.DataFrame) -> list[dict]:
    """The forecast's first day per queue: GPU-hours P10 / P50 / P90, the method, and what the band is where it adds
    up several GPU types' bands (`summed`, `bands_summed`)."""
    if outlook.is_empty():
        return []
    rows = first_day(outlook).to_dicts()
    return [r | {"summed": bands_summed(r.get("series"))} for r in rows]


def _table(df: pl.DataFrame) -> dict:
    """Columns and rows of a frame, floats rounded, for the template."""
    def show(v):
        if isinstance(v, float):
            return f"{v:,.1f}" if abs(v) >= 10 else f"{v:,.3g}"
        if isinstance(v, list):
            return ", ".join(map(str, v))
        return "" if v is None else v
    return {"columns": df.columns, "rows": [[show(v) for v in row] for row in df.rows()]}


FITS_SHOWN = 4  # GPU types named per large job (the smallest that fit); the rest counted


SIZE_UNKNOWN = "unknown: an LLM of unknown size (log params_million); planned on a whole GPU of its queue's largest type"


def fitting_types(request_gb: float | None) -> str:
    """The catalogue's GPU types whose memory holds a per-GPU request (smallest first), or why none does."""
    if request_gb is None:
        return "unknown (no memory forecast)"
    fits = sorted((g for g in catalog.gpus().values() if g.memory_gb >= request_gb),
                  key=lambda g: (g.memory_gb, g.gpu_type))
    if not fits:
        return "none: above every GPU of the catalogue"
    names = [g.gpu_type for g in fits[:FITS_SHOWN]]
    return ", ".join(names) + (f" (+{len(fits) - FITS_SHOWN} more)" if len(fits) > FITS_SHOWN else "")


def large_jobs_table(large: pl.DataFrame) -> pl.DataFrame:
    """The large pending jobs (warehouse `LARGE_JOBS`: several GPUs, or a per-GPU P90 near its GPU's memory) with their
    layout (issue 51): GPUs, tensor x pipeline x context parallel and the data-parallel ranks left, sharding, adapter,
    per-GPU memory P50 / P90, and the GPU types whose memory holds the per-GPU request (P90 + headroom). A job of
    unknown size (`size_unknown`, an LLM the zoo does not know and no parameter count) shows no memory: the plan
    reads it as unknown (review 65b S3-3)."""
    if large.is_empty():
        return pl.DataFrame()
    rows = []
    for r in large.iter_rows(named=True):
        split = r["tp"] * r["pp"] * r["cp"]
        request = r["safe_request_gb"] if r["safe_request_gb"] is not None else r["mem_p90_gb"]
        unsized = bool(r.get("size_unknown"))
        if unsized:
            r = {**r, "mem_p50_gb": None, "mem_p90_gb": None}
        rows.append({"job_id": r["job_id"], "queue": r["queue"], "model": r["arch"] or "", "GPUs": r["gpus"],
                     "TP x PP x CP": f"{r['tp']} x {r['pp']} x {r['cp']}",
                     "data parallel": r["gpus"] // split if split and r["gpus"] % split == 0 else None,
                     "sharding": r["sharding"] or "none", "adapter": r["adapter"] or "none",
                     "per-GPU P50 GB": r["mem_p50_gb"], "per-GPU P90 GB": r["mem_p90_gb"],
                     "fits": SIZE_UNKNOWN if unsized else fitting_types(request)})
    return pl.DataFrame(rows, infer_schema_length=None)


def headline(plan: pl.DataFrame) -> list[dict]:
    """The plan's first day per queue and GPU type: needed at P50/P90, its bound, owned, short."""
    if plan.is_empty():
        return []
    first = first_day(plan)
    return first.select("queue", "gpu_type", "jobs", "gpus_needed_p50", "gpus_needed_p90", "lower_bound_p90",
                        "shared_bound_p90", "gpus_owned", "shortfall_p90", "gpus_needed_expected_p90", "gpus_total_p90",
                        "shortfall_total_p90").to_dicts()


def site_days(plan: pl.DataFrame) -> pl.DataFrame:
    """The plan's days over all queues (`arrivals.by_day`): the site's P50 and P90 totals, a pair from the forecast of
    the site's total (`gpus_site_p50`, `gpus_site_p90`), beside the queues' own P50s summed (`gpus_total_p50`)."""
    if plan.is_empty():
        return pl.DataFrame()
    return by_day(plan).select("day", "gpus_site_p50", "gpus_site_p90", "gpus_total_p50", "gpus_owned", "site_short_p90")


def render_site(frames: dict[str, pl.DataFrame], generated_at: datetime) -> str:
    """The page's HTML (see the module doc). Every string in `frames` is shown literally: control
    characters as escapes (`literal.visible`), in the charts too; the template escapes HTML."""
    frames = {name: visible_frame(df) for name, df in frames.items()}
    env = Environment(loader=PackageLoader("gpucast.tasks.report", "templates"), autoescape=select_autoescape(["html", "j2"]))
    plan = frames["plan"]
    shortfall = (plan.group_by("day").agg(pl.col("shortfall_total_p90").sum()).sort("day") if not plan.is_empty()
                 else pl.DataFrame(schema={"day": pl.Date, "shortfall_total_p90": pl.Int64}))
    run = frames["plan_run"].to_dicts()[0] if frames["plan_run"].height else None
    site = site_days(plan)
    return env.get_template("site.html.j2").render(
        generated_at=f"{generated_at:%Y-%m-%d %H:%M} UTC",
        plan_run=run,
        headline=headline(plan),
        shortfall=_table(shortfall.filter(pl.col("shortfall_total_p90") > 0)),
        demand_svg=demand_chart(frames["demand"]),
        outlook_svg=outlook_chart(frames["demand_history"], frames["demand_outlook"]),
        outlook=outlook_first_day(frames["demand_outlook"]),
        plan_svg=plan_chart(plan),
        plan=_table(plan.drop("gpu_memory_gb")),
        site=site.to_dicts(), site_table=_table(site),
        oom=_table(frames["oom"]), oom_count=frames["oom_count"].item(0, 0),
        unplaceable=_table(frames["unplaceable"]), unplaceable_count=frames["unplaceable_count"].item(0, 0),
        colocation=_table(frames["colocation"]),
        champions=_table(frames["champions"]), leaderboard=_table(frames["leaderboard"]),
        coverage=_table(frames["coverage"]),
        runs=_table(frames["runs"]),
        featureless=frames["featureless"].to_dicts()[0] if "featureless" in frames and frames["featureless"].height else None,
        scenarios=_table(scenario_table(frames["scenarios"])) if frames["scenarios"]["scenario"].n_unique() > 1 else None,
        scenario_svg=scenario_chart(frames["scenarios"]),
        queue_waits=_table(frames["queue_waits"]), job_waits=_table(frames["job_waits"]),
        no_start_count=frames["no_start_count"].item(0, 0),
        large_jobs=_table(large_jobs_table(frames["large_jobs"])) if "large_jobs" in frames else None,
        large_jobs_count=(frames["large_jobs_count"].item(0, 0) if "large_jobs_count" in frames
                          else frames["large_jobs"].height if "large_jobs" in frames else None),
    )
