"""Strings from data are shown as data (issue 27, items 1 and 10): on the page's charts and tables, in the
nightly's Markdown report and in the CLI's tables. Each case first reproduced on the code before the fix;
the property tests throw arbitrary text at the same renderers."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime, timedelta

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markupsafe import escape

from gpucast.records.results import NightResult, PlanResult
from gpucast.tasks.report.literal import markdown_text, visible
from gpucast.tasks.report.render import markdown_table, nightly_report, query_result_parts, status_text, text_table
from gpucast.tasks.report.site import demand_chart, outlook_chart, plan_chart, render_site
from tests.sample_jobs import HOSTILE_STRINGS

DAY = date(2026, 11, 23)
# Characters no page, SVG, terminal table or artifact may carry raw (XML 1.0 has no place for them).
RAW_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")


def glyph(char: str) -> str:
    """The id of `char`'s glyph in matplotlib's SVG (it defines each glyph drawn once, by its index in the font)."""
    from matplotlib import font_manager, ft2font

    font = ft2font.FT2Font(font_manager.findfont("DejaVu Sans"))
    return f'id="DejaVuSans-{font.get_char_index(ord(char)):x}"'


DOLLAR_GLYPH = glyph("$")


def demand(queues: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"day": [DAY + timedelta(days=d) for _ in queues for d in (0, 1)],
                         "queue": [q for q in queues for _ in (0, 1)],
                         "gpu_hours_p10": 1.0, "gpu_hours_p50": 2.0, "gpu_hours_p90": 3.0, "jobs": 1})


def plan(queues: list[str], gpu_type: str = "A100-80GB") -> pl.DataFrame:
    return pl.DataFrame({"day": [DAY + timedelta(days=d) for _ in queues for d in (0, 1)],
                         "queue": [q for q in queues for _ in (0, 1)], "gpu_type": gpu_type, "gpu_memory_gb": 80.0,
                         "jobs": 2, "gpus_needed_p50": 1, "gpus_needed_p90": 2, "lower_bound_p90": 1,
                         "shared_bound_p90": 1, "gpus_owned": 4, "shortfall_p90": 0, "gpus_needed_expected_p50": 1,
                         "gpus_needed_expected_p90": 1, "gpus_total_p50": 2, "gpus_total_p90": 3, "shortfall_total_p90": 0})


def outlook(queues: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(demand history, demand forecast) frames: two days of each per queue."""
    history = pl.DataFrame({"day": [DAY - timedelta(days=d) for _ in queues for d in (1, 0)],
                            "queue": [q for q in queues for _ in (0, 1)], "gpu_hours": 5.0})
    ahead = demand(queues).drop("jobs").with_columns(pl.col("day") + timedelta(days=1), method=pl.lit("AutoETS"))
    return history, ahead


def site_frames(queues: list[str], job_id: str = "j-1", team: str = "nlp", model_type: str = "CNN") -> dict:
    """The frames `warehouse.queries.site_frames` reads, small, with data strings where the page shows them."""
    q = queues[0]
    return {
        "demand": demand(queues), "plan": plan(queues),
        "demand_history": outlook(queues)[0], "demand_outlook": outlook(queues)[1],
        "plan_run": pl.DataFrame({"plan_run_id": ["plan-1"], "started_at": [datetime(2026, 11, 23, tzinfo=UTC)],
                                  "start_day": [DAY], "days": [2], "inventory": [None], "score_run_id": ["score-1"],
                                  "jobs": [2 * len(queues)], "unknown_size_jobs": [0], "unplaceable_jobs": [1],
                                  "message": [""]}),
        "oom": pl.DataFrame({"job_id": [job_id], "queue": [q], "team": [team], "model_type": [model_type],
                             "mem_p90_gb": [90.0], "safe_request_gb": [99.0], "gpu_mem_gb": [80.0]}),
        "oom_count": pl.DataFrame({"jobs": [1]}),
        "unplaceable": pl.DataFrame({"job_id": [job_id], "queue": [q], "mem_gb": [999.0], "gpu_count": [1],
                                     "smallest_fitting_gpu": ["none in the catalogue"]}),
        "unplaceable_count": pl.DataFrame({"jobs": [1]}),
        "colocation": pl.DataFrame({"queue": [q], "gpu_type": ["A100-80GB"], "groups": [1], "jobs_in_groups": [2],
                                    "largest_group": [2]}),
        "champions": pl.DataFrame({"target": ["runtime_hours"], "model": ["lightgbm"], "gate": ["promoted"]}),
        "leaderboard": pl.DataFrame({"target": ["runtime_hours"], "rank": [1], "model": ["lightgbm"],
                                     "is_champion": [True]}),
        "coverage": pl.DataFrame({"target": ["runtime_hours"], "jobs": [3], "p90_coverage": [0.9]}),
        "runs": pl.DataFrame({"kind": ["plan"], "run_id": ["plan-1"], "status": ["succeeded"],
                              "started_at": [datetime(2026, 11, 23, tzinfo=UTC)], "message": [""]}),
        # the baseline and a what-if named like the first queue (a scenario's name is data too), and the waits
        "scenarios": pl.DataFrame([{"scenario": name, "status": "planned", "day": DAY + timedelta(days=d),
                                    "gpus_short_p90": short + d, "unplaceable_jobs": 0, "jobs_without_start": 0,
                                    "expected_wait_hours": 1.0, "longest_wait_hours": 2.0, "longest_wait_queue": q,
                                    "changes": f"+2 A100-80GB in {q}", "gpus_short_p90_vs_baseline": -short, "reason": None}
                                   for name, short in (("baseline", 0), (q, 2)) for d in range(2)]),
        "queue_waits": pl.DataFrame({"queue": [q], "gpu_type": ["A100-80GB"], "gpus_owned": [4],
                                     "wait_first_day_h": [3.5], "longest_wait_h": [7.0], "longest_on": [DAY]}),
        "job_waits": pl.DataFrame({"job_id": [job_id], "queue": [q], "gpu_type": ["A100-80GB"], "submitted": [DAY],
                                   "expected_start": [DAY], "expected_wait_hours": [7.0]}),
        "no_start_count": pl.DataFrame({"jobs": [0]}),
    }


def svgs(page: str) -> list[ET.Element]:
    """Every inlined SVG of a page, parsed as XML (comments kept: matplotlib writes each text drawn in one)."""
    found = re.findall(r"<svg.*?</svg>", page, re.S)
    return [ET.fromstring(s, parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))) for s in found]


def svgs_text(page: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", page, re.S)


def legend_labels(svg: str) -> list[str]:
    """The labels a demand chart's legend draws, as matplotlib's SVG comments hold them."""
    (root,) = svgs(svg)
    group = next(e for e in root.iter() if e.get("id") == "legend_1")
    return [c.text.strip(" ") for e in group.iter() if (e.get("id") or "").startswith("text_")
            for c in e if c.tag is ET.Comment]


def svg_comment(text: str) -> str:
    """`text` as matplotlib's SVG writer puts it in a comment (`backend_svg._escape_comment`)."""
    return re.sub("-(?=-)", "- ", html.escape(text, quote=False)).strip(" ")


# --- item 1: a queue name is parsed as TeX -------------------------------------------------------------

@pytest.mark.parametrize("queue", ["$x^$", r"$\undefinedmacro{x}$"])
def test_a_tex_queue_name_is_drawn_as_its_characters(queue):
    """Before: matplotlib's mathtext raised a parse error; the nightly's page step failed with it."""
    svg = demand_chart(demand([queue, "a100-80g"]))
    assert legend_labels(svg) == [svg_comment(queue), "a100-80g"]
    assert DOLLAR_GLYPH in svg  # the `$` drawn, not taken for math
    assert DOLLAR_GLYPH in plan_chart(plan([queue]))


def test_balanced_tex_is_not_typeset_either():
    """`$\\alpha$` parses as math (it rendered an alpha); shown as data it is its eight characters."""
    for svg in (demand_chart(demand([r"$\alpha$"])), plan_chart(plan(["a"], gpu_type=r"$\alpha$")),
                outlook_chart(*outlook([r"$\alpha$"]))):
        assert DOLLAR_GLYPH in svg and "Oblique" not in svg  # mathtext draws an alpha from the italic font


def test_the_page_renders_with_a_tex_queue_name():
    page = render_site(site_frames(["$x^$", "a100-80g"]), datetime(2026, 11, 23, tzinfo=UTC))
    assert 'data-queue="$x^$"' in page and len(svgs(page)) == 4
    assert legend_labels(svgs_text(page)[3]) == ["baseline", svg_comment("$x^$")]  # the what-if chart: literal too


# --- item 10: a pipe splits a Markdown cell; a leading underscore hides a legend entry --------------------

MD = MarkdownIt("commonmark").enable("table")


def markdown_cells(markdown: str) -> list[list[str]]:
    """The rows of every Markdown table in `markdown` as a CommonMark+GFM-table parser reads them: each
    cell's text; a cell whose text a parser would turn into emphasis, code, a link or HTML fails here."""
    rows, row = [], None
    for tok in MD.parse(markdown):
        if tok.type == "tr_open":
            row = []
        elif tok.type == "tr_close":
            rows.append(row)
            row = None
        elif tok.type == "inline" and row is not None:
            assert {c.type for c in tok.children} <= {"text"}, (tok.content, [c.type for c in tok.children])
            row.append("".join(c.content for c in tok.children))
    return rows


def report_with_plan(queues: list[str]) -> str:
    rows = plan(queues)
    plan_run = PlanResult(plan_run_id="plan-1", jobs=2, days=2, start_day=DAY, unknown_size_jobs=0, unplaceable_jobs=0,
                          rows=rows)
    return nightly_report(NightResult(plan=plan_run), None)


def test_a_pipe_in_a_queue_name_stays_in_its_cell_of_the_nightly_report():
    """Before: `q|pipe` made its row one cell longer than the header, shifting every number after it."""
    rows = markdown_cells(report_with_plan(["q|pipe", "a100-80g"]))
    assert [len(r) for r in rows] == [8, 8, 8]
    assert sorted(r[0] for r in rows[1:]) == ["a100-80g", "q|pipe"]


def test_markdown_in_a_name_is_shown_not_interpreted():
    names = ["**bold**", "_hidden_", "`code`", "[x](http://e.com)", "<b>hi</b>", "&amp;", "back\\slash", "a~~b~~"]
    rows = markdown_cells(markdown_table(pl.DataFrame({"queue": names, "n": range(len(names))})))
    assert [r[0] for r in rows[1:]] == names


def test_a_queue_named_with_a_leading_underscore_has_its_legend_entry():
    """Before: matplotlib's legend skipped labels starting with `_`: a bar with no name."""
    assert legend_labels(demand_chart(demand(["_hidden", "a100-80g"]))) == ["_hidden", "a100-80g"]


# --- control characters: XML cannot hold them, a Markdown or text table breaks its row on a newline --------

def test_control_characters_are_shown_as_escapes_on_the_page():
    """Before: a NUL went raw into the page and its SVG (not well-formed XML), and a newline split a row."""
    frames = site_frames(["nul\x00here", "esc\x1b[2Jnew\nline"], job_id="j\x07", team="t\x7f", model_type="m\ufffe")
    page = render_site(frames, datetime(2026, 11, 23, tzinfo=UTC))
    assert RAW_CONTROL.search(page) is None
    assert len(svgs(page)) == 4  # every chart (the what-if chart too) is well-formed XML
    for shown in (r"nul\x00here", r"esc\x1b[2Jnew\x0aline", r"j\x07", r"t\x7f", r"m\ufffe"):
        assert f">{shown}<" in page, shown


def test_control_characters_do_not_break_markdown_or_text_tables():
    df = pl.DataFrame({"queue": ["a\nb", "c\x00d"], "n": [1, 2]})
    assert [r[0] for r in markdown_cells(markdown_table(df))[1:]] == [r"a\x0ab", r"c\x00d"]
    # borders, header, its rule and one line per row (`gpucast sql` adds the row count)
    for text, lines in ((text_table(df), 4 + 2), ("".join(query_result_parts(df)), 4 + 2 + 1)):
        assert RAW_CONTROL.search(text) is None and r"a\x0ab" in text and len(text.splitlines()) == lines, text
    assert "".join(query_result_parts(df, "csv")).count("\x00") == 1  # csv and json carry the data as it is


def test_a_rejected_file_name_cannot_send_escapes_to_on_calls_terminal(tmp_path):
    """`gpucast status` lists rejected files by name: a name with ESC or a newline is shown escaped."""
    failures = pl.DataFrame({"run_id": ["ingest-1"], "source_file": ["in/\x1b[2Jevil\nname.jsonl"],
                             "reason": ["not valid UTF-8"], "message": [None]}, schema_overrides={"message": pl.String})
    empty = pl.DataFrame({"n": []})
    text = status_text({"ingests": empty, "failures": failures, "jobs": empty, "trains": empty, "scores": empty},
                        tmp_path)
    assert RAW_CONTROL.search(text) is None and r"in/\x1b[2Jevil\x0aname.jsonl: not valid UTF-8" in text


def test_a_failure_message_with_data_in_it_cannot_break_the_report():
    report = nightly_report(NightResult(), "ValueError: queue `$x^$`\n| a | b |\x00")
    assert RAW_CONTROL.search(report) is None
    assert "**FAILED**" in report and markdown_cells(report) == []


# --- properties: any text, as queue, team, model type and job id -----------------------------------------

# Text as a job log can hold it (JSON and UTF-8: no lone surrogates), weighted towards the corpus.
names = st.one_of(st.sampled_from(HOSTILE_STRINGS), st.text(min_size=1, max_size=12),
                  st.text(st.characters(codec="ascii"), min_size=1, max_size=12))


# 15 examples, each a whole page of four charts and one more (25 took 60 s of a loaded CI run); the corpus strings
# are a third of the draws, and the tests above pin the known cases one by one.
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queues=st.lists(names, min_size=1, max_size=3, unique_by=visible), job_id=names, team=names, model_type=names,
       gpu_type=names)
def test_any_string_renders_on_the_page_as_itself(queues, job_id, team, model_type, gpu_type):
    frames = site_frames(queues, job_id=job_id, team=team, model_type=model_type)
    frames["plan"] = frames["plan"].with_columns(gpu_type=pl.lit(gpu_type))
    page = render_site(frames, datetime(2026, 11, 23, tzinfo=UTC))
    assert RAW_CONTROL.search(page) is None
    assert len(svgs(page)) == 4
    for value in (*queues, job_id, team, model_type):
        assert f">{escape(visible(value))}<" in page, value  # as Jinja2's autoescape writes it
    assert legend_labels(demand_chart(demand(queues))) == [svg_comment(visible(q)) for q in sorted(queues)]


@settings(max_examples=150, deadline=None)
@given(queues=st.lists(names, min_size=1, max_size=4, unique_by=visible))
def test_any_queue_name_keeps_the_nightly_capacity_table_whole(queues):
    report = report_with_plan(queues)
    assert RAW_CONTROL.search(report) is None
    rows = markdown_cells(report)
    assert {len(r) for r in rows} == {8} and len(rows) == 1 + len(queues)
    assert sorted(r[0] for r in rows[1:]) == sorted(visible(q).strip() for q in queues)


@given(st.text())
def test_markdown_text_shows_exactly_the_visible_text(text):
    (cells,) = markdown_cells(f"| h |\n|---|\n| {markdown_text(text)} |\n")[1:]
    assert cells == [visible(text).strip()]
