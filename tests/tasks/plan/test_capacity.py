"""The capacity plan's packing and the inventory file: feasibility, the headroom rule, days, bad input."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import polars as pl
import pytest

from gpucast.records.inventory import InventoryError, load_inventory
from gpucast.tasks.plan.arrivals import EFFICIENCY_FLOOR, EXPECTED_COLUMNS, FORECAST_SCHEMA, PACKING_SCHEMA, add_expected
from gpucast.tasks.plan.capacity import best_fit, pack, plan_capacity

START = date(2026, 11, 23)
INVENTORY = """queues:
  big:
    - gpu_type: A100-80GB
      count: 2
  small:
    - gpu_type: l4 24gb
      count: 1
    - gpu_type: A100-40GB
      count: 3
"""


def jobs(rows: list[tuple]) -> pl.DataFrame:
    """(job_id, queue, day offset, gpu_count, mem_gb, hours_p50, hours_p90) rows as the plan's input."""
    return pl.DataFrame([(j, q, START + timedelta(days=d), n, m, h50, h90) for j, q, d, n, m, h50, h90 in rows],
                        schema={"job_id": pl.String, "queue": pl.String, "day": pl.Date, "gpu_count": pl.Int64,
                                "mem_gb": pl.Float64, "hours_p50": pl.Float64, "hours_p90": pl.Float64}, orient="row")


@pytest.fixture
def inventory(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY)
    return load_inventory(path)


def test_best_fit_puts_each_item_in_the_tightest_bin_that_holds_it():
    # 6 opens bin 0 (4 left), 5 opens bin 1 (5 left); 4 fits both: the tighter bin 0; 5 fills bin 1;
    # 3 opens bin 2 (7 left); 2 fits only bin 2
    assert best_fit(np.array([6, 5, 4, 5, 3, 2]), 10).tolist() == [0, 1, 0, 1, 2, 2]
    # best fit, not first fit: 3 goes to the bin with 3 left (bin 1), not the first with room (bin 0)
    assert best_fit(np.array([5, 7, 3]), 10).tolist() == [0, 1, 1]


def test_packing_never_overlaps_and_stays_near_the_area_bound():
    rng = np.random.default_rng(0)
    w = rng.integers(4, 120, 3000)
    h = rng.integers(1, 96, 3000)
    gpu, shelf = pack(w, h, 161, 96)
    frame = pl.DataFrame({"gpu": gpu, "shelf": shelf, "w": w, "h": h})
    shelves = frame.group_by("gpu", "shelf").agg(pl.col("w").sum(), pl.col("h").max())
    assert shelves["w"].max() <= 161  # side by side on a GPU: memory fits
    assert shelves.group_by("gpu").agg(pl.col("h").sum())["h"].max() <= 96  # one after another: the day fits
    area_bound = np.ceil((w * h).sum() / (161 * 96))  # no packing can do better
    assert area_bound <= gpu.max() + 1 <= 1.10 * area_bound  # measured 1.0x-1.04x on the simulator's jobs


def test_jobs_share_a_gpu_only_while_their_requests_and_contexts_fit(inventory):
    # 14-hour jobs (two cannot run one after the other in a day), so only memory decides.
    # 80 GB: 3 x 20 GB + 18.5 GB = 78.5 GB of requests + 3 extra contexts x 0.5 GB = 80 GB: one GPU
    fits = plan_capacity(jobs([(f"j{i}", "big", 0, 1, m, 14.0, 14.0) for i, m in enumerate([20, 20, 20, 18.5])]),
                         inventory, START, 1)
    assert fits.rows.filter(pl.col("queue") == "big")["gpus_needed_p90"].to_list() == [1]
    # 4 x 20 GB = 80 GB of requests but 1.5 GB of contexts more: two GPUs
    over = plan_capacity(jobs([(f"j{i}", "big", 0, 1, 20.0, 14.0, 14.0) for i in range(4)]), inventory, START, 1)
    assert over.rows.filter(pl.col("queue") == "big")["gpus_needed_p90"].to_list() == [2]
    assert over.colocation["jobs"].max() == 3


def with_compute(frame: pl.DataFrame, gflops: list[float | None], precision: str | None = "FP16") -> pl.DataFrame:
    return frame.with_columns(pl.Series("gflops_p50", gflops, dtype=pl.Float64),
                              pl.lit(precision, dtype=pl.String).alias("precision"))


def test_jobs_share_a_gpu_only_while_their_compute_fits_it_too(inventory):
    """Newcomer 27 P3: memory alone packed jobs whose forecast GFLOP/s added up to 2.6x the GPU's peak. An
    A100-80GB's dense FP16 peak is 312 TFLOP/s: four 10 GB jobs of 100 TFLOP/s each (33 hundredths) fit three to a
    GPU; at 160 TFLOP/s (52 hundredths) one to a GPU; a 2-GPU job's share is per GPU."""
    four = jobs([(f"j{i}", "big", 0, 1, 10.0, 14.0, 14.0) for i in range(4)])
    memory_only = plan_capacity(four, inventory, START, 1)
    assert memory_only.rows.filter(pl.col("queue") == "big")["gpus_needed_p90"].to_list() == [1]
    three = plan_capacity(with_compute(four, [100e3] * 4), inventory, START, 1)
    assert three.rows.filter(pl.col("queue") == "big")["gpus_needed_p90"].to_list() == [2]
    assert sorted(three.colocation["jobs"].to_list()) == [3]
    alone = plan_capacity(with_compute(four, [160e3] * 4), inventory, START, 1)
    assert alone.rows.filter(pl.col("queue") == "big")["gpus_needed_p90"].to_list() == [4]
    assert alone.colocation.is_empty()
    two_gpus = jobs([("a", "big", 0, 2, 10.0, 14.0, 14.0), ("b", "big", 0, 1, 10.0, 14.0, 14.0)])
    per_gpu = plan_capacity(with_compute(two_gpus, [320e3, 140e3]), inventory, START, 1)  # a: 52 a GPU, b: 45
    assert per_gpu.rows.filter(pl.col("queue") == "big")["gpus_needed_p90"].to_list() == [2]
    # a job with no compute forecast, or at a precision the GPU has no peak for, counts no share: memory decides
    unknown = plan_capacity(with_compute(four, [None] * 4), inventory, START, 1)
    assert unknown.rows.filter(pl.col("queue") == "big")["gpus_needed_p90"].to_list() == [1]
    # a job over the whole GPU alone still gets one
    huge = plan_capacity(with_compute(four.head(1), [900e3]), inventory, START, 1)
    assert huge.rows.filter(pl.col("queue") == "big")["gpus_needed_p90"].to_list() == [1]


def test_best_fit_with_compute_takes_the_tightest_bin_with_compute_to_spare():
    # sizes 6, 5 open bins 0 and 1 (4 and 5 left); 4 fits both by memory, bin 0 is tighter but has 30 of compute
    # left: the item of 50 goes to bin 1; the item of 20 then to bin 0 (tightest with room for both)
    got = best_fit(np.array([6, 5, 4, 3]), 10, np.array([70, 10, 50, 20])).tolist()
    assert got == [0, 1, 1, 0]
    assert best_fit(np.array([6, 5, 4, 3]), 10).tolist() == best_fit(np.array([6, 5, 4, 3]), 10, np.zeros(4)).tolist()
    # review 86 S1-1: bins whose compute is used up while memory is left must not stop the search (1,000 jobs of 40
    # hundredths and little memory took 936 bins: two fit a bin's compute, so 500 do)
    many = best_fit(np.ones(1000, dtype=np.int64), 100, np.full(1000, 40))
    assert len(set(many.tolist())) == 500


def test_time_packs_jobs_one_after_another_and_long_jobs_continue_next_days(inventory):
    # two 12-hour jobs of 70 GB run one after the other on one GPU; a 60-hour job needs one GPU 3 days
    plan = plan_capacity(jobs([("a", "big", 0, 1, 70.0, 12.0, 12.0), ("b", "big", 0, 1, 70.0, 12.0, 12.0),
                               ("long", "big", 0, 1, 70.0, 60.0, 60.0)]), inventory, START, 4)
    big = plan.rows.filter(pl.col("queue") == "big").sort("day")
    assert big["gpus_needed_p90"].to_list() == [2, 1, 1, 0]
    assert big["gpu_hours_p90"].to_list() == [48.0, 24.0, 12.0, 0.0]
    assert big["lower_bound_p90"].to_list() == [2, 1, 1, 0]
    assert big["gpus_owned"].to_list() == [2] * 4 and big["shortfall_p90"].to_list() == [0] * 4


def test_p50_and_p90_differ_by_run_time_and_shortfall_is_needed_minus_owned(inventory):
    # 60 GB jobs cannot share an 80 GB GPU; 8 hours: 3 one after another per GPU-day; 16 hours: 1
    rows = [(f"j{i}", "big", 0, 1, 60.0, 8.0, 16.0) for i in range(6)]
    plan = plan_capacity(jobs(rows), inventory, START, 1).rows.filter(pl.col("queue") == "big")
    assert plan["gpus_needed_p50"].item() == 2 and plan["gpus_needed_p90"].item() == 6
    assert plan["lower_bound_p90"].item() == 4  # 96 GPU-hours / 24: whole jobs cannot be split to reach it
    # memory x time: 6 x (120 + 1) half-GB units x 64 quarter hours over (160 + 1) x 96 = 3.006 -> 4
    assert plan["shared_bound_p90"].item() == 4 and plan["shared_bound_p50"].item() == 2
    assert plan["shortfall_p50"].item() == 0 and plan["shortfall_p90"].item() == 4


def test_jobs_go_to_the_smallest_gpu_of_their_queue_that_holds_them(inventory):
    plan = plan_capacity(jobs([("s", "small", 0, 1, 10.0, 5.0, 5.0), ("m", "small", 0, 1, 30.0, 5.0, 5.0)]),
                         inventory, START, 1)
    small = {r["gpu_type"]: r["jobs"] for r in plan.rows.filter(pl.col("queue") == "small").iter_rows(named=True)}
    assert small == {"L4-24GB": 1, "A100-40GB": 1}


def test_unknown_size_is_planned_as_a_whole_gpu_and_counted_and_too_big_is_listed(inventory):
    plan = plan_capacity(jobs([("unknown", "big", 0, 1, None, 2.0, 2.0), ("tiny", "big", 0, 1, 1.0, 2.0, 2.0),
                               ("huge", "big", 0, 1, 100.0, 2.0, 2.0), ("giant", "big", 0, 1, 500.0, 2.0, 2.0)]),
                         inventory, START, 1)
    big = plan.rows.filter(pl.col("queue") == "big")
    assert big["unknown_size_jobs"].item() == 1 and big["gpus_needed_p90"].item() == 2  # nothing shares its GPU
    assert plan.jobs == 2 and plan.unknown_size_jobs == 1
    listed = dict(plan.unplaceable.select("job_id", "smallest_fitting_gpu").iter_rows())
    assert listed == {"huge": "Gaudi3-128GB", "giant": None}  # the catalogue's smallest >= 100 GB (128 GB, first by name); none >= 500 GB


def test_a_queue_without_inventory_is_planned_on_the_default_gpu_with_owned_unknown(inventory):
    plan = plan_capacity(jobs([("x", "elsewhere", 0, 2, 30.0, 5.0, 5.0)]), inventory, START, 1, default_gb=80.0)
    row = plan.rows.filter(pl.col("queue") == "elsewhere").to_dicts()[0]
    assert row["gpu_type"] == "any-80GB" and row["gpus_owned"] is None and row["shortfall_p90"] is None
    assert row["gpus_needed_p90"] == 1  # its two GPUs' shares of 30 GB fit one 80 GB GPU together
    none = plan_capacity(jobs([("x", "big", 0, 1, 30.0, 5.0, 5.0)]), None, START, 1)
    assert none.notes and none.rows["gpus_owned"].to_list() == [None]


def test_the_note_names_inventory_queues_and_gpu_types_no_job_uses(tmp_path):
    """Issue 48 item 9: an inventory queue spelt otherwise than the logs' (`gpu` with a Cyrillic у) was planned as a
    queue with no jobs while the real one showed owned = null, and no note said so. Each side is named."""
    path = tmp_path / "inventory.yaml"
    path.write_text("queues:\n  \u0433\u0440\u0443:\n    - {gpu_type: A100-80GB, count: 8}\n"
                    "  small:\n    - {gpu_type: L4-24GB, count: 1}\n    - {gpu_type: A100-40GB, count: 3}\n"
                    "  idle:\n    - {gpu_type: L4-24GB, count: 1}\n", encoding="utf-8")
    plan = plan_capacity(jobs([("a", "gpu", 0, 1, 30.0, 5.0, 5.0), ("b", "small", 0, 1, 10.0, 5.0, 5.0)]),
                         load_inventory(path), START, 1, queues=["idle"])  # `idle`: the demand forecast expects jobs
    assert plan.notes == [
        f"inventory queue(s) no job uses: '\u0433\u0440\u0443' (no pending job, no expected arrivals; spelt as the "
        f"job logs spell it? {path})",
        "queue(s) of pending jobs the inventory does not list, planned with owned unknown: 'gpu'",
        "owned GPU type(s) no pending job is planned on: A100-40GB of 'small'",
    ]


def test_no_note_when_the_inventory_and_the_jobs_match(inventory):
    plan = plan_capacity(jobs([("a", "big", 0, 1, 30.0, 5.0, 5.0), ("b", "small", 0, 1, 10.0, 5.0, 5.0),
                               ("c", "small", 0, 1, 30.0, 5.0, 5.0)]), inventory, START, 1)
    assert plan.notes == []
    narrowed = plan_capacity(jobs([("b", "small", 0, 1, 10.0, 5.0, 5.0)]), inventory, START, 1,
                             gpu_types=["L4-24GB"], queues=["big"])
    assert narrowed.notes == []  # A100-40GB is left out by --gpu-types, not unused


def test_jobs_waiting_since_before_the_plan_start_on_its_first_day_and_later_ones_on_theirs(inventory):
    plan = plan_capacity(jobs([("old", "big", -3, 1, 70.0, 5.0, 5.0), ("later", "big", 2, 1, 70.0, 5.0, 5.0),
                               ("beyond", "big", 9, 1, 70.0, 5.0, 5.0)]), inventory, START, 3)
    assert plan.rows.filter(pl.col("queue") == "big").sort("day")["jobs"].to_list() == [1, 0, 1]


@pytest.mark.parametrize("text, line, message", [
    ("queues:\n  big:\n    - gpu_type: A100-81GB\n      count: 2\n", 3, "unknown GPU type 'A100-81GB'"),
    ("queues:\n  big:\n    - gpu_type: A100-80GB\n      count: -2\n", 4, "count must be a whole number >= 0, got -2"),
    ("queues:\n  big:\n    - gpu_type: A100-80GB\n      count: 1.5\n", 4, "count must be a whole number"),
    ("queues:\n  big:\n    - gpu_type: A100-80GB\n", 3, "the entry has no count"),
    ("queues:\n  big:\n    - gpu_type: A100-80GB\n      count: 1\n      colour: red\n", 5, "unknown key 'colour'"),
    ("gpus: 3\n", 1, "must hold the key `queues:`"),
])
def test_a_bad_inventory_names_the_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    with pytest.raises(InventoryError, match=rf"inventory.yaml:{line}: .*{message}" if line > 0 else message):
        load_inventory(path)


def test_the_demo_inventory_is_valid():
    from importlib import resources

    from gpucast.tasks.simulate import QUEUE_GPU

    path = resources.files("gpucast.records").joinpath("reference/demo_inventory.yaml")
    inv = load_inventory(path)
    assert {o.queue: o.gpu_type for o in inv.owned} == QUEUE_GPU and all(o.count > 0 for o in inv.owned)



# Expected arrivals (issue 30): the demand forecast's GPU-hours as GPUs beside the queued jobs'
def forecast(rows: list[tuple]) -> pl.DataFrame:
    """(day offset, queue, gpu_type, gpu_hours_p50, gpu_hours_p90) rows as `current_demand_forecast` gives them."""
    return pl.DataFrame([(START + timedelta(days=d), q, t, h50, h90) for d, q, t, h50, h90 in rows],
                        schema=FORECAST_SCHEMA, orient="row")


def test_expected_arrivals_are_forecast_gpu_hours_over_the_day_and_the_measured_packing_efficiency(inventory):
    # known: three 60 GB jobs of 6 h run one after another on one A100-80GB: 18 GPU-hours on 1 GPU today
    known = plan_capacity(jobs([(f"j{i}", "big", 0, 1, 60.0, 6.0, 6.0) for i in range(3)]), inventory, START, 3)
    # an earlier plan's first day: 30 GPU-hours on 2 GPUs; efficiency (18 + 30) / (24 x (1 + 2)) = 2/3
    recent = pl.DataFrame({"queue": ["big"], "gpu_type": ["A100-80GB"], "gpu_hours_p50": [30.0], "gpus_needed_p50": [2]})
    demand = forecast([
        (1, "big", "A100-80GB", 32.0, 48.0), (1, "big", "unknown", 8.0, 16.0),  # unknown type: the queue's largest
        (1, "small", "a100 40gb", 20.0, 25.0),  # a catalogue alias of a type the queue is planned on
        (1, "small", "unknown", 4.0, 4.0), (1, "small", "H100-80GB", 0.0, 1.0),  # not planned on small: its largest
        (9, "big", "A100-80GB", 99.0, 99.0),  # past the plan's 3 days
    ])
    rows, notes = add_expected(known.rows, demand, recent)
    by = {(r["queue"], r["gpu_type"], (r["day"] - START).days): r for r in rows.iter_rows(named=True)}
    big = by["big", "A100-80GB", 1]
    assert big["expected_gpu_hours_p50"] == 40.0 and big["expected_gpu_hours_p90"] == 64.0
    assert big["packing_efficiency"] == pytest.approx(2 / 3)
    # P50: 40 / 24 / (2/3) = 2.5 -> 3 GPUs; P90: 64 / 24 / (2/3) = 4.0 exactly -> 4, not 5
    assert (big["gpus_needed_expected_p50"], big["gpus_needed_expected_p90"]) == (3, 4)
    assert (big["gpus_needed_p50"], big["gpus_total_p50"], big["gpus_total_p90"]) == (0, 3, 4)  # no known job on day 1
    assert (big["shortfall_total_p50"], big["shortfall_total_p90"]) == (1, 2)  # 2 owned
    today = by["big", "A100-80GB", 0]  # the first day: the known jobs only (no forecast for it)
    assert (today["gpus_needed_p50"], today["gpus_needed_expected_p50"], today["gpus_total_p90"]) == (1, 0, 1)
    small = by["small", "A100-40GB", 1]  # nothing measured on small: efficiency 1.0
    assert small["packing_efficiency"] == 1.0 and small["expected_gpu_hours_p90"] == 30.0
    assert (small["gpus_needed_expected_p50"], small["gpus_needed_expected_p90"]) == (1, 2)  # 24 h -> 1; 30 h -> 2
    assert by["small", "L4-24GB", 1]["gpus_needed_expected_p90"] == 0
    assert rows.select(EXPECTED_COLUMNS).null_count().sum_horizontal().item() == 0
    assert notes == [f"the demand forecast covers 1 of the plan's 3 days ({START + timedelta(days=1)} to "
                     f"{START + timedelta(days=9)}); the others have no expected arrivals (forecast as far as the plan "
                     "with `gpucast demand --plan-days 2`)"]


def test_a_forecast_of_days_before_the_plan_is_said_not_taken_for_zero_arrivals(inventory):
    """Issue 38, defect 10: history ending 11-01, forecast 11-02..11-15, plan 11-26..12-09: expected 0 every day
    and not a word (the note said only how many days were covered, and nothing printed it)."""
    plan_start = date(2026, 11, 26)
    known = plan_capacity(jobs([("j", "big", 0, 1, 60.0, 6.0, 6.0)]), inventory, plan_start, 14)
    demand = pl.DataFrame([(date(2026, 11, 2) + timedelta(days=d), "big", "A100-80GB", 40.0, 60.0) for d in range(14)],
                          schema=FORECAST_SCHEMA, orient="row")
    rows, notes = add_expected(known.rows, demand, pl.DataFrame(schema=PACKING_SCHEMA))
    assert rows["gpus_needed_expected_p90"].sum() == 0
    assert notes == ["NO EXPECTED ARRIVALS: the demand forecast (2026-11-02 to 2026-11-15) covers none of the plan's 14 "
                     "days (2026-11-26 to 2026-12-09), so expected arrivals are 0 on every day and the plan holds the "
                     "queued jobs only; import the jobs since the history's end, or forecast as far as the plan with "
                     "`gpucast demand --plan-days 38`"]


def test_a_day_of_one_short_job_does_not_multiply_the_expected_gpus_past_the_floor(inventory):
    known = plan_capacity(jobs([("short", "big", 0, 1, 60.0, 2.0, 2.0)]), inventory, START, 2)  # 2 h on 1 GPU: 0.08
    rows, _ = add_expected(known.rows, forecast([(1, "big", "A100-80GB", 24.0, 24.0)]), pl.DataFrame(schema=PACKING_SCHEMA))
    day1 = rows.filter((pl.col("queue") == "big") & (pl.col("day") == START + timedelta(days=1))).to_dicts()[0]
    assert day1["packing_efficiency"] == EFFICIENCY_FLOOR and day1["gpus_needed_expected_p50"] == 2  # 24 / 24 / 0.5


def test_without_a_demand_forecast_the_plan_is_the_queued_jobs_and_says_so(inventory):
    known = plan_capacity(jobs([("a", "big", 0, 1, 60.0, 30.0, 30.0)]), inventory, START, 3)
    rows, notes = add_expected(known.rows, pl.DataFrame(schema=FORECAST_SCHEMA), pl.DataFrame(schema=PACKING_SCHEMA))
    assert rows.select(pl.col("^gpus_needed_expected_.*$").sum()).row(0) == (0, 0)
    assert rows["gpus_total_p90"].to_list() == rows["gpus_needed_p90"].to_list()
    assert rows["shortfall_total_p90"].to_list() == rows["shortfall_p90"].to_list()
    assert notes and notes[0].startswith("no demand forecast")


def test_a_queue_only_the_forecast_names_is_planned_with_owned_unknown():
    known = plan_capacity(jobs([]), None, START, 2, queues=["new"])
    rows, _ = add_expected(known.rows, forecast([(0, "new", "unknown", 48.0, 72.0)]), pl.DataFrame(schema=PACKING_SCHEMA))
    first = rows.sort("day").to_dicts()[0]
    assert (first["queue"], first["gpu_type"], first["gpus_needed_expected_p50"], first["gpus_total_p90"]) == \
        ("new", "any-80GB", 2, 3)
    assert first["gpus_owned"] is None and first["shortfall_total_p90"] is None


def test_the_site_p90_total_is_the_total_forecast_s_p90_not_the_rows_p90s_summed():
    """Issue 53 item 3: two queues whose own P90s are 96 GPU-hours each, while the site's total P90 is 120 (the demand
    forecast's `gpu_hours_p90_of_total`: 60 a queue, split by P50): by_day's P90 total is 6 GPUs (3 a row for 60
    GPU-hours), not the rows' P90s summed (8: 4 a row for 96), which each row keeps as its own."""
    from gpucast.tasks.plan.arrivals import by_day

    known = plan_capacity(jobs([]), None, START, 1, queues=["a", "b"])
    demand = forecast([(0, "a", "unknown", 48.0, 96.0), (0, "b", "unknown", 48.0, 96.0)]).with_columns(
        pl.lit(60.0).alias("gpu_hours_p90_of_total"))
    rows, _ = add_expected(known.rows, demand, pl.DataFrame(schema=PACKING_SCHEMA))
    assert rows["gpus_total_p90"].to_list() == [4, 4] and rows["gpus_total_p90_of_total"].to_list() == [3, 3]
    day = by_day(rows).to_dicts()[0]
    assert (day["gpus_total_p50"], day["gpus_site_p90"]) == (4, 6)  # ceil(60 / 24) = 3 per row: 6 <= 8 summed
    older, _ = add_expected(known.rows, demand.drop("gpu_hours_p90_of_total"), pl.DataFrame(schema=PACKING_SCHEMA))
    assert by_day(older)["gpus_site_p90"].to_list() == [8]  # a forecast before the column: the sum, as before


def test_the_site_never_needs_fewer_gpus_than_one_of_its_queues():
    """Newcomer 26 P2: the site's P90 split over the rows by P50 gave a busy queue fewer GPU-hours than its own P90 and
    the other queue more, so the site's GPUs summed (85 on the demo) fell below that queue's own (89). By day, the
    site's GPUs at P50 and P90 are at least the largest queue's own (its rows' `gpus_total_*` summed)."""
    from gpucast.tasks.plan.arrivals import by_day

    known = plan_capacity(jobs([]), None, START, 1, queues=["a", "b"])
    demand = forecast([(0, "a", "unknown", 24.0, 240.0), (0, "b", "unknown", 24.0, 24.0)]).with_columns(
        pl.Series([96.0, 24.0]).alias("gpu_hours_p90_of_total"), pl.lit(24.0).alias("gpu_hours_p50_of_total"))
    rows, _ = add_expected(known.rows, demand, pl.DataFrame(schema=PACKING_SCHEMA))
    assert rows["gpus_total_p90"].to_list() == [10, 1] and rows["gpus_total_p90_of_total"].to_list() == [4, 1]
    day = by_day(rows).row(0, named=True)
    assert (day["gpus_site_p50"], day["gpus_site_p90"]) == (2, 10)  # a's own 10 GPUs at P90, not the parts' 4 + 1


def test_the_site_p50_total_is_the_total_forecast_s_p50_the_pair_of_its_p90():
    """Session 14 (issue 53 item 3): two queues whose own P50s are 24 GPU-hours each (1 GPU a row), while the site
    total's own P50 is 96 (the demand forecast's `gpu_hours_p50_of_total`: 48 a queue) and its P90 144 (72 a queue):
    by_day's site P50 is 4 GPUs (2 a row), beside the site P90 of 6 (3 a row); the queues' P50s summed stay
    `gpus_total_p50` (2); a forecast before the column: the site P50 is that sum, as before."""
    from gpucast.tasks.plan.arrivals import by_day

    known = plan_capacity(jobs([]), None, START, 1, queues=["a", "b"])
    demand = forecast([(0, "a", "unknown", 24.0, 96.0), (0, "b", "unknown", 24.0, 96.0)]).with_columns(
        pl.lit(72.0).alias("gpu_hours_p90_of_total"), pl.lit(48.0).alias("gpu_hours_p50_of_total"))
    rows, _ = add_expected(known.rows, demand, pl.DataFrame(schema=PACKING_SCHEMA))
    assert rows["expected_gpu_hours_p50_of_total"].to_list() == [48.0, 48.0]
    assert rows["gpus_total_p50"].to_list() == [1, 1] and rows["gpus_total_p50_of_total"].to_list() == [2, 2]
    day = by_day(rows).row(0, named=True)
    assert (day["gpus_total_p50"], day["gpus_site_p50"], day["gpus_site_p90"]) == (2, 4, 6)
    assert by_day(rows).columns.index("gpus_site_p50") == by_day(rows).columns.index("gpus_site_p90") - 1  # beside
    older, _ = add_expected(known.rows, demand.drop("gpu_hours_p50_of_total"), pl.DataFrame(schema=PACKING_SCHEMA))
    assert by_day(older)["gpus_site_p50"].to_list() == [2]
    assert by_day(rows.drop("gpus_total_p50_of_total"))["gpus_site_p50"].to_list() == [2]  # a plan before the column


def test_a_rows_p90_is_its_queues_own_p90_not_its_series_p90s_summed():
    """Session 9 (issue 53 item 3): a queue planned on one GPU type whose two series (its type and `unknown`) have own
    P90s of 72 GPU-hours each, while the queue's total P90 is 96 (the demand forecast's `gpu_hours_p90_of_queue`: 48
    each, split by P50): the row expects 96 GPU-hours at P90, 4 GPUs, not the P90s summed (144, 6 GPUs)."""
    known = plan_capacity(jobs([]), None, START, 1, queues=["a"])
    demand = forecast([(0, "a", "unknown", 24.0, 72.0), (0, "a", "any-80GB", 24.0, 72.0)]).with_columns(
        pl.lit(48.0).alias("gpu_hours_p90_of_queue"))
    rows, _ = add_expected(known.rows, demand, pl.DataFrame(schema=PACKING_SCHEMA))
    row = rows.to_dicts()[0]
    assert (row["expected_gpu_hours_p90"], row["gpus_needed_expected_p90"], row["gpus_total_p90"]) == (96.0, 4, 4)
    assert row["expected_gpu_hours_p50"] == 48.0
    older, _ = add_expected(known.rows, demand.drop("gpu_hours_p90_of_queue"), pl.DataFrame(schema=PACKING_SCHEMA))
    assert older["expected_gpu_hours_p90"].to_list() == [144.0]  # a forecast before the column: the sum, as before


def test_a_queue_planned_on_two_gpu_types_keeps_each_rows_own_p90(inventory):
    """Review 59 M1: queue `small` is planned on two GPU types, a series on each (P50 10, own P90 30 GPU-hours; the
    queue's total P90 40, 20 each by P50): each row expects its own series' P90 (30), not its share of the queue's
    (20): an L4 row cannot borrow an A100 row's slack. All of a queue's series on one row: the queue's P90."""
    known = plan_capacity(jobs([]), inventory, START, 2)
    demand = forecast([(1, "small", "l4 24gb", 10.0, 30.0), (1, "small", "A100-40GB", 10.0, 30.0),
                       (1, "big", "A100-80GB", 10.0, 30.0), (1, "big", "unknown", 10.0, 30.0)]).with_columns(
        pl.lit(20.0).alias("gpu_hours_p90_of_queue"))
    rows, _ = add_expected(known.rows, demand, pl.DataFrame(schema=PACKING_SCHEMA))
    day1 = {(r["queue"], r["gpu_type"]): r for r in rows.filter(pl.col("day") == START + timedelta(days=1)).to_dicts()}
    assert [day1["small", t]["expected_gpu_hours_p90"] for t in ("L4-24GB", "A100-40GB")] == [30.0, 30.0]
    assert [day1["small", t]["expected_gpu_hours_p50"] for t in ("L4-24GB", "A100-40GB")] == [10.0, 10.0]
    assert day1["big", "A100-80GB"]["expected_gpu_hours_p90"] == 40.0  # both series on one row: the queue's P90


def test_types_of_equal_memory_go_as_listed_and_spare_larger_gpus_cover_smaller_rows(tmp_path):
    """Session 14 (issue 53 item 4): among a queue's types of equal memory the first the inventory lists is taken
    (not the first, or last, by name): the known jobs, the job of unknown size and the `unknown` series all go to the
    H100s listed first; a row's P90 is never above its queue's (the typed series' own 90 over the queue's 60); and a
    row's shortfall is what the spare GPUs of its queue's types of at least its memory do not cover."""
    path = tmp_path / "inventory.yaml"
    path.write_text("queues:\n  q:\n    - {gpu_type: H100-80GB, count: 1}\n    - {gpu_type: A100-80GB, count: 5}\n"
                    "    - {gpu_type: L4-24GB, count: 1}\n")
    plan = plan_capacity(jobs([("k", "q", 0, 1, 70.0, 24.0, 24.0), ("u", "q", 0, 1, None, 24.0, 24.0),
                               ("s1", "q", 0, 1, 20.0, 24.0, 24.0), ("s2", "q", 0, 1, 20.0, 24.0, 24.0),
                               ("s3", "q", 0, 1, 20.0, 24.0, 24.0)]), load_inventory(path), START, 1)
    placed = {r["gpu_type"]: r["jobs"] for r in plan.rows.to_dicts()}
    assert placed == {"L4-24GB": 3, "H100-80GB": 2, "A100-80GB": 0}
    demand = forecast([(0, "q", "unknown", 24.0, 90.0)]).with_columns(pl.lit(60.0).alias("gpu_hours_p90_of_queue"))
    split = forecast([(0, "q", "L4-24GB", 12.0, 90.0), (0, "q", "unknown", 12.0, 30.0)]).with_columns(
        pl.lit(30.0).alias("gpu_hours_p90_of_queue"))
    for f, expected in ((demand, {"H100-80GB": 60.0}), (split, {"L4-24GB": 60.0, "H100-80GB": 30.0})):
        rows, _ = add_expected(plan.rows, f, pl.DataFrame(schema=PACKING_SCHEMA))
        assert {r["gpu_type"]: r["expected_gpu_hours_p90"] for r in rows.to_dicts() if r["expected_gpu_hours_p90"]} == expected
    rows, _ = add_expected(plan.rows, demand, pl.DataFrame(schema=PACKING_SCHEMA))
    got = {r["gpu_type"]: (r["gpus_total_p90"], r["gpus_owned"], r["shortfall_total_p90"]) for r in rows.to_dicts()}
    # H100: 2 jobs + 3 GPUs expected against 1 owned: 4 short, 4 of the A100s' 5 spare cover them; the L4s' 3 jobs
    # against 1 owned: 2 short, covered by the A100s' last spare GPU (1) only: 1 short. An L4 never covers an A100.
    assert got == {"H100-80GB": (5, 1, 0), "A100-80GB": (0, 5, 0), "L4-24GB": (3, 1, 1)}


def test_the_site_is_short_only_of_what_its_p90_total_lacks_and_the_queues_shortfalls_are_named_apart():
    from gpucast.tasks.plan.arrivals import by_day

    # queue a: P90 needs 2 of its 8 GPUs; queue b: 5 of its 2 (3 short at its own P90); the site: 6 of 10 at its P90
    rows = pl.DataFrame({"day": [START, START], "queue": ["a", "b"], "gpus_needed_p50": [1, 2],
                         "gpus_needed_expected_p50": [0, 1], "gpus_total_p50": [1, 3], "gpus_total_p90": [2, 5],
                         "gpus_total_p90_of_total": [2, 4], "gpus_owned": [8, 2], "shortfall_total_p90": [0, 3]})
    day = by_day(rows).row(0, named=True)
    assert (day["gpus_site_p90"], day["gpus_owned"], day["site_short_p90"], day["shortfall_total_p90"]) == (6, 10, 0, 3)
    short = by_day(rows.with_columns(pl.Series("gpus_owned", [2, 2]))).row(0, named=True)
    assert short["site_short_p90"] == 2 and by_day(rows.with_columns(pl.lit(None, pl.Int64).alias("gpus_owned"))
                                                    ).row(0, named=True)["site_short_p90"] is None  # owned unknown


def test_a_group_repeated_on_several_shelves_is_named_by_its_lowest_shelf_every_run():
    """A multi-GPU job's copies put the same jobs together on several shelves: the group is listed once, as its
    lowest shelf. Before, the shelf kept followed polars' group_by order, which varies from run to run (the golden
    nights, tests/golden, saw a group_id change between two runs of the same data)."""
    from gpucast.tasks.plan.capacity import _groups

    shelves = 64
    shelf, job_row = np.repeat(np.arange(shelves), 2), np.tile([0, 1], shelves)
    ids, mem = np.array(["a", "b"]), np.array([3.0, 4.0])
    for _ in range(5):
        assert _groups(shelf, job_row, ids, mem, start_day=0) == [
            {"day": 0, "group_id": 0, "jobs": 2, "job_ids": ["a", "b"], "mem_gb": 7.0}]
