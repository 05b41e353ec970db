"""The site's P50 beside its P90 on the page (issue 53 item 3, session 14): both from the forecast of the site's total
(`gpus_site_p50`, `gpus_site_p90`: the rows' `gpus_total_p50_of_total` and `gpus_total_p90_of_total` summed), the
queues' own P50s summed (`gpus_total_p50`) named apart, so no planner reads the P90 against a second forecast's P50."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import polars as pl

from gpucast.tasks.report.site import render_site
from tests.tasks.report.test_literal import site_frames


def page(**columns) -> str:
    frames = site_frames(["a100-80g", "l4-24g"])  # two queues x two days; each row: P50 2, P90 3, 4 owned
    frames["plan"] = frames["plan"].with_columns(pl.lit(v).alias(c) for c, v in columns.items())
    return render_site(frames, datetime(2026, 11, 26, tzinfo=UTC))


def test_the_first_days_tile_shows_the_site_totals_p50_beside_its_p90():
    html = page(gpus_total_p50_of_total=5, gpus_total_p90_of_total=7)
    tile = re.search(r'<div class="tile[^"]*" id="site-day1">(.*?)</div>\s*</div>', html, re.S)
    assert tile, "no site tile"
    assert re.search(r'<span class="site-p50">10</span> to <span class="site-p90">14</span> GPUs', tile.group(1))
    assert "the queues' own P50s summed: 4" in tile.group(1) and "short 6 at P90" in tile.group(1)  # 8 owned
    table = re.search(r'<table id="site-days"><thead><tr>(.*?)</tr></thead><tbody>(.*?)</tbody>', html, re.S)
    assert re.findall(r"<th>(.*?)</th>", table.group(1))[:3] == ["day", "gpus_site_p50", "gpus_site_p90"]
    assert len(re.findall("<tr>", table.group(2))) == 2


def test_a_plan_recorded_before_the_columns_shows_the_rows_own_totals():
    tile = re.search(r'id="site-day1">(.*?)</div>\s*</div>', page(), re.S).group(1)
    assert '<span class="site-p50">4</span> to <span class="site-p90">6</span>' in tile
