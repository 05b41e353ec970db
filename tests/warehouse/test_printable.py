"""`printable`: the one escaping of what reaches a terminal or a run's message (issue 38, defect 11)."""

from __future__ import annotations

import pytest

from gpucast.warehouse.errors import printable
from gpucast.warehouse.runs import describe


@pytest.mark.parametrize(("text", "shown"), [
    ("plain, accents é, CJK 日本, a backslash \\", "plain, accents é, CJK 日本, a backslash \\"),  # kept as it is
    ("two\nlines\r\n", "two\\nlines\\r\\n"),  # one line stays one line
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),  # no terminal escape reaches the terminal
    ("tab\there\x00\x7f\x9b", "tab\\there\\x00\\x7f\\x9b"),  # C0, DEL and C1 (CSI) controls
    ("abc\u202edcba", "abc\\u202edcba"),  # a bidi override cannot reorder what follows
])
def test_controls_are_escaped_and_the_rest_kept(text, shown):
    assert printable(text) == shown


def test_a_runs_message_is_one_line():
    assert describe(ValueError("store 'x\n\x1b]0;title\x07'")) == "ValueError: store 'x\\n\\x1b]0;title\\x07'"

