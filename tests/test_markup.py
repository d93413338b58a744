"""smoke.markup: any text shows as written, in one cell of one row, or in one code span (issue 23, class 6)."""

from __future__ import annotations

import html.parser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smoke import markup
from tests.helpers import MD, examples, rendered, shown, workflow_unescape

# --- the escaping itself: any text shows as written, in one cell of one row


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=80))
def test_any_text_is_one_cell_that_shows_as_written(value):
    cells = rendered(f"| a | b |\n|---|---|\n| {markup.text(value)} | after |\n")
    assert cells.rows[1:] == [[shown(value), "after"]] and not "".join(cells.outside).strip()


@settings(max_examples=examples(300), deadline=None)
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


# --- credentials (issue 37): nothing the gate prints or writes holds one


@pytest.mark.parametrize(("given", "shown"), [
    ("https://user:TOKEN@host/simple", "https://user:****@host/simple"),
    ("index https://TOKEN@h.example/x and file:///opt/pypi/simple", "index https://****@h.example/x and file:///opt/pypi/simple"),
    ("git+https://u:p%40ss@github.com/a/b.git", "git+https://u:****@github.com/a/b.git"),
    ("mail user@example.com, https://host/simple", "mail user@example.com, https://host/simple"),
])
def test_a_urls_credentials_are_masked_as_pip_masks_them(given, shown):
    assert markup.redact(given) == shown


@given(st.text(alphabet=st.characters(blacklist_characters="@/", blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")), max_size=30))
def test_no_password_survives_whatever_it_holds(secret):
    assert markup.redact(f"extra index https://user:{secret}@example.com/simple") == "extra index https://user:****@example.com/simple"


# --- GitHub's workflow commands (smoke.console.annotate)


@given(st.text(max_size=60))
def test_a_workflow_commands_title_and_message_are_one_line_and_read_back_as_written(value):
    """Escaped as actions/toolkit's command.ts escapes them: the runner's unescape gives the text back, a message holds no
    line break (which would end the command), a title no ':' or ',' (which would end the property)."""
    message, title = markup.workflow_data(value), markup.workflow_property(value)
    assert "\n" not in message and "\r" not in message
    assert not {"\n", "\r", ":", ","} & set(title)
    assert workflow_unescape(message, prop=False) == value and workflow_unescape(title, prop=True) == value


@pytest.mark.parametrize(("given", "shown"), [
    # issue 48: a token in a query string was printed by the progress line, the ERROR line and uv's error
    ("--wheel-index http://host/simple/?token=SECRET", "--wheel-index http://host/simple/?token=****"),
    ("PIP_EXTRA_INDEX_URL=https://h.example/simple?a=1&key=SECRET#x", "PIP_EXTRA_INDEX_URL=https://h.example/simple?a=****&key=****#x"),
    ("https://h.example/simple?SECRET", "https://h.example/simple?****"),
    ("https://user:TOKEN@h.example/s?t=SECRET", "https://user:****@h.example/s?t=****"),
    ("no URL? key=value", "no URL? key=value"),
])
def test_a_urls_query_values_are_masked(given, shown):
    assert markup.redact(given) == shown


def test_a_legacy_workflow_command_or_a_terminal_escape_in_a_line_is_shown_not_obeyed():
    """GitHub's runner parses ``##[`` anywhere in a line (a member named so stopped every later annotation), and a
    terminal obeys ESC (issue 48)."""
    said = markup.printable("FAIL x: executorch/a##[stop-commands]token and \x1b[31mred\x1b[0m\tkept")
    assert said == "FAIL x: executorch/a##\\[stop-commands]token and \\x1b[31mred\\x1b[0m\tkept"
    assert "##[" not in said and "\x1b" not in said


def test_redacting_a_long_run_of_letters_takes_linear_time_and_still_masks_a_url_at_its_end():
    """Issue 58: each start in a run of letters was scanned to its end (a scheme of any length): a 50,000-letter reason
    took 11 s to redact, twice per report written."""
    import time

    from smoke import markup

    start = time.monotonic()
    assert markup.redact("x" * 200_000) == "x" * 200_000
    assert time.monotonic() - start < 2
    assert markup.redact("a" * 5000 + "https://user:SECRET@host/simple") == "a" * 5000 + "https://user:****@host/simple"
    assert markup.redact("9http://TOKEN@host/x?token=abc") == "9http://****@host/x?token=****"
