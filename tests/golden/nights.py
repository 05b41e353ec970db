"""The golden nights: the demo's two nights (`flows/demo.py`) at small, deterministic settings, and a
fingerprint of what the planners read after them (issue 39, item 7: the same data gives the same
forecasts, plan and page).

What is pinned (`fingerprint`), as text lines so a difference reads as rows:
- `pending_forecasts`: job_id, target, p50, p90, model, ood, ood_reason of the latest published run;
- `capacity_plan`: the 14-day plan of the latest succeeded plan run (every day x queue x GPU type);
- `unplaceable` and `colocation`: the plan's other two tables;
- `demand_forecast`: the demand forecast the plan added its expected arrivals from;
- `page`: the planners' page (`site/index.html`) as text, run ids and clock times normalised.

Numbers are written to `SIGNIFICANT` significant digits: the nights run one model set (LightGBM only: no
champion choice between models, so the champion rule's tie-break on a timed scoring cost cannot flip it),
fixed seeds, `--runner local` and one OpenMP thread, which is bit-stable here; the rounding is there so a
last-bit difference of a summed float (DuckDB's parallel `sum` adds in any order) is not a behaviour change.
"""

from __future__ import annotations

import html
import re
from dataclasses import replace
from datetime import date
from pathlib import Path

import duckdb

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "demo_nights.json"
# The traced prior's cache the nights start from (`tasks/learn/traced.py`): tracing runs each architecture in a
# child process under a time bound (60 s), so whether a trace finishes, times out or dies depends on the machine's
# load; from a cache the same configurations get the same columns every run, in no time. Written by
# `regenerate.py --retrace` (tracing itself is tested in tests/tasks/learn/test_traced.py).
TRACES = GOLDEN.with_name("demo_traces.json")
SIGNIFICANT = 4
# The smallest demo that still runs every step of both nights: three weeks (the demand forecast sees weekly
# seasonality in 21 days), 40 jobs a weekday, half of them queued a day, 90% of those starting the next day
# (night 2's backtest has completions to check); the demo's own start day and rhythm.
HISTORY_DAYS, JOBS_PER_DAY, SEED = 21, 40, 0
MODELS = ("lightgbm",)  # one model for every target: the champion is never a choice between timed scoring costs


def sim_config():
    from gpucast.flows.cli.pipeline import DEMO

    return replace(DEMO, days=HISTORY_DAYS, jobs_per_day=JOBS_PER_DAY, seed=SEED)


def train_options():
    from gpucast.tasks.learn.options import TrainOptions

    return TrainOptions(models=MODELS, repeats=1, seed=SEED, min_labelled=50, night_budget_minutes=0,
                        nn_max_minutes=0, compile_trees=False)


def run_nights(home: Path, traces: Path | None = TRACES) -> list:
    """The demo's two nights into `home` (an empty data directory), as `gpucast demo` runs them, the trace
    cache seeded from `traces` (None: trace afresh)."""
    import shutil

    from gpucast.flows.demo import run_demo
    from gpucast.flows.settings import Settings

    settings = Settings.from_env({"GPUCAST_HOME": str(home)}).override(train_runner="local")
    if traces is not None:
        settings.storage.trace_cache_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(traces, settings.storage.trace_cache_path)
    return run_demo(settings, sim_config(), train_options(), say=lambda _: None)


def num(x) -> str:
    if x is None:
        return ""
    if isinstance(x, list | tuple):
        return "[" + " ".join(num(v) for v in x) + "]"
    if isinstance(x, bool | int | str | date):
        return str(x)
    value = float(x)
    # a difference of sums (a scenario's delta from the baseline) can end as +-1e-15 or as 0 by the order DuckDB adds in
    return f"{0.0 if abs(value) < 1e-9 else value:.{SIGNIFICANT}g}"


QUERIES = {
    "pending_forecasts": "SELECT job_id, target, p50, p90, model, ood, ood_reason FROM pending_forecasts ORDER BY job_id, target",
    "capacity_plan": "SELECT * EXCLUDE (plan_run_id) FROM current_capacity_plan ORDER BY day, queue, gpu_type",
    "unplaceable": "SELECT * EXCLUDE (plan_run_id) FROM current_unplaceable_jobs ORDER BY ALL",
    "colocation": "SELECT * EXCLUDE (plan_run_id) FROM current_colocation ORDER BY ALL",
    "demand_forecast": "SELECT * EXCLUDE (demand_run_id) FROM current_demand_forecast ORDER BY day, queue, gpu_type",
    "plan_scenarios": "SELECT * EXCLUDE (plan_run_id) FROM current_plan_scenarios ORDER BY scenario, day",
    "job_starts": "SELECT * EXCLUDE (plan_run_id) FROM current_job_starts ORDER BY job_id",
}
# Run ids (uuids, hex stamps) and clock times differ every run; the page's words and figures must not.
RUN_ID = re.compile(r"\b[a-z]+-\d{8}T\d{6}Z-[0-9a-f]+\b"  # gpucast's run ids: train-20261126T155934Z-87bf06
                    r"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")  # Prefect's flow run ids
CLOCK = re.compile(r"\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d| UTC)?")
SECONDS = re.compile(r"\b\d+(\.\d+)? ?(s|ms|min|seconds|minutes)\b")


TIMED_COLUMNS = ("train_seconds",)  # the page's leaderboard shows how long fits took: a timing, not a behaviour


def page_text(page: str, home: Path) -> list[str]:
    """The page's visible text, a line per block, with run ids, clock times, durations, the data directory and
    the timed columns of its tables normalised."""
    page = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", page)
    page = re.sub(r"(?i)<(br|/p|/div|/tr|/li|/h\d|/table|/caption|/figcaption|/summary)\b[^>]*>", "\n", page)
    page = re.sub(r"(?i)</t[dh]>", " | ", page)
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    lines, header = [], []
    for line in text.replace(str(home), "<home>").splitlines():
        line = re.sub(r"\s+", " ", line).strip()
        if not line:
            continue
        cells = [x.strip() for x in line.split("|")[:-1]] if line.endswith("|") else None  # a table row
        if cells and any(t in cells for t in TIMED_COLUMNS):
            header = cells
        elif cells and header and len(cells) == len(header):
            line = " ".join(f"{'<timed>' if h in TIMED_COLUMNS else v} |" for h, v in zip(header, cells, strict=True))
            line = re.sub(r"\s+", " ", line)
        else:
            header = [] if not cells else header
        lines.append(SECONDS.sub("<duration>", CLOCK.sub("<time>", RUN_ID.sub("<run>", line))))
    return lines


def fingerprint(home: Path) -> dict[str, list[str]]:
    """What the planners read after the nights, as text lines per part (module doc)."""
    from gpucast.flows.settings import Settings

    storage = Settings.from_env({"GPUCAST_HOME": str(home)}).storage
    out: dict[str, list[str]] = {}
    with duckdb.connect(str(storage.query_path), read_only=True) as con:
        for name, sql in QUERIES.items():
            cur = con.execute(sql)
            cols = [d[0] for d in cur.description]
            out[name] = [",".join(cols)] + [",".join(num(v) for v in row) for row in cur.fetchall()]
    out["page"] = page_text((storage.site_dir / "index.html").read_text(), home)
    return out


def fingerprint_of_fresh_nights(traces: Path | None = TRACES) -> dict[str, list[str]]:
    """Run the nights in a temporary data directory and return their fingerprint."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gpucast-golden-") as tmp:
        run_nights(Path(tmp) / "home", traces)
        return fingerprint(Path(tmp) / "home")


def retrace(to: Path = TRACES) -> None:
    """Trace the nights' architectures afresh (no cache) and keep the cache they leave as `to`."""
    import shutil
    import tempfile

    from gpucast.flows.settings import Settings

    with tempfile.TemporaryDirectory(prefix="gpucast-golden-") as tmp:
        run_nights(Path(tmp) / "home", traces=None)
        to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Settings.from_env({"GPUCAST_HOME": str(Path(tmp) / "home")}).storage.trace_cache_path, to)


def differences(expected: dict[str, list[str]], got: dict[str, list[str]], show: int = 5) -> list[str]:
    """Per part that differs, its first `show` differing rows (expected, then got), in words."""
    out = []
    for part in sorted(set(expected) | set(got)):
        want, have = expected.get(part, []), got.get(part, [])
        if want == have:
            continue
        rows = [i for i in range(max(len(want), len(have))) if (want[i:i + 1] or [None]) != (have[i:i + 1] or [None])]
        out.append(f"{part}: {len(rows)} row(s) differ ({len(want)} expected, {len(have)} now); first:")
        for i in rows[:show]:
            out.append(f"  row {i}: expected {want[i] if i < len(want) else '(none)'}")
            out.append(f"  row {i}:      got {have[i] if i < len(have) else '(none)'}")
    return out
