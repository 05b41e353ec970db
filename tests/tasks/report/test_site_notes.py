"""What the plan lacks is on the page (issue 38, defect 10): a plan whose demand forecast covers none of its days
showed its zeros of expected arrivals as if none were expected, without a word."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import polars as pl

from gpucast.tasks.report.site import render_site
from tests.tasks.report.test_literal import site_frames

NOTE = ("NO EXPECTED ARRIVALS: the demand forecast (2026-11-02 to 2026-11-15) covers none of the plan's 14 days "
        "(2026-11-26 to 2026-12-09), so expected arrivals are 0 on every day")


def page(message: str) -> str:
    frames = site_frames(["a100-80g"])
    frames["plan_run"] = frames["plan_run"].with_columns(pl.lit(message).alias("message"))
    return render_site(frames, datetime(2026, 11, 26, tzinfo=UTC))


def test_the_plans_note_is_on_the_page():
    shown = re.search(r'<p class="note" id="plan-note"><b>About this plan:</b> (.*?)</p>', page(NOTE))
    assert shown and shown.group(1) == NOTE.replace("'", "&#39;")


def test_a_plan_without_a_note_shows_none():
    assert 'id="plan-note"' not in page("")
