"""smoke.markup: any text shows as written, in one cell of one row, or in one code span (issue 23, class 6)."""

from __future__ import annotations

import html.parser

from hypothesis import given, settings
from hypothesis import strategies as st

from smoke import markup
from tests.helpers import MD, rendered, shown

# --- the escaping itself: any text shows as written, in one cell of one row


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_text_is_one_cell_that_shows_as_written(value):
    cells = rendered(f"| a | b |\n|---|---|\n| {markup.text(value)} | after |\n")
    assert cells.rows[1:] == [[shown(value), "after"]] and not "".join(cells.outside).strip()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40).filter(lambda v: markup.plain(v).strip()))
def test_any_text_is_one_code_span_that_shows_as_written(value):
    """The benchmark's Command line: a backtick in an argument does not end the span early."""
    rendered_html = MD.render(f"Command: {markup.code(value)} after\n")
    parsed = _Code()
    parsed.feed(rendered_html)
    assert parsed.spans == [markup.plain(value)] and "".join(parsed.outside).strip().endswith("after")


class _Code(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.spans: list[str] = []
        self.inside = False
        self.outside: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "code":
            self.inside = True
            self.spans.append("")

    def handle_endtag(self, tag):
        self.inside = self.inside and tag != "code"

    def handle_data(self, data):
        if self.inside:
            self.spans[-1] += data
        else:
            self.outside.append(data)
