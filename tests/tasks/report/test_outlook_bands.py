"""A queue on several GPU types: its forecast tile and chart panel say that its band adds up its types' bands
(issue 53 item 3: a sum of P90s is not the P90 of the total, and the queue's total is not forecast)."""

from __future__ import annotations

import html
from datetime import UTC, datetime

import polars as pl

from gpucast.tasks.report.site import outlook_first_day, render_site
from tests.tasks.report.test_literal import site_frames

SUMMED = "the sum of its 2 series' bands, one per GPU type (unknown too)"


def test_a_queue_on_two_gpu_types_says_its_band_is_their_bands_summed():
    frames = site_frames(["q1", "q2"])  # q1's forecast adds two GPU types' series, q2's is one series
    older = frames["demand_outlook"]  # without `series` (an older caller): no label, no error
    frames["demand_outlook"] = older.with_columns(series=pl.when(pl.col("queue") == "q1").then(2).otherwise(1))
    page = html.unescape(render_site(frames, datetime(2026, 11, 23, tzinfo=UTC)))
    outlook = page.split('<div class="tiles" id="outlook">')[1]
    tiles = outlook.split("<svg")[0].split('<div class="tile" data-queue=')[1:]
    assert [t.count(SUMMED) for t in tiles] == [1, 0]  # q1's tile, not q2's
    assert "wider than the P10-P90 of the queue's total" in tiles[0]
    # the chart's panel of q1, once (matplotlib draws text as paths and names it in a comment)
    assert outlook.split("<svg")[1].count("band: its 2 series' bands summed") == 1
    assert [r["summed"] for r in outlook_first_day(older)] == ["", ""]
