"""Text from a wheel, a path or a message, made safe for the markup it goes into.

Markdown goes through ``text``, JUnit XML through ``xml``, a GitHub Actions workflow command's message and title
through ``workflow_data`` and ``workflow_property``. One place, so that a wheel named ``…<!--…`` cannot hide the rows
after it, a ``|`` or a newline cannot break a table, a backtick cannot open a code span and ``<script>`` shows as
text.
"""

from __future__ import annotations

import re
import unicodedata

# Characters that are Markdown (CommonMark and GitHub's tables) or HTML syntax wherever they
# stand in a line: each is written backslash-escaped, which CommonMark shows as the character.
_ALWAYS = re.compile(r"([\\`*\[\]<>|~&])")
# '_' opens emphasis only at a word's edge (CommonMark: never inside a word), so a wheel's
# manylinux_2_28_x86_64 stays as written and a lone _word_ is escaped.
_EDGE_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# '#' opens a heading, '+', '-' and '=' a list item or an underline, a digit and '.' an
# ordered list, only at a line's start: escaped there (a table cell or a heading never starts
# with the text, but a list item of the summary may).
_LINE_START = re.compile(r"^(\d*)([#+\-=.)])")
# Characters that change how the rest of a line shows without being visible: the bidirectional
# overrides (a name that reads backwards), line and paragraph separators.
_INVISIBLE = {"Cf", "Zl", "Zp", "Cs", "Co", "Cn"}


# A URL's credentials (``https://user:TOKEN@host/``, ``https://TOKEN@host/``): what pip and uv mask as they print.
# A scheme is at most 32 characters (a bound: unbounded, each start in a run of letters scanned to its end, and a
# 50,000-letter reason took 11 s to redact, issue 58).
_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)(?P<user>[^/@\s:]*)(?::[^/@\s]*)?@")


def redact(text: str) -> str:
    """Text with every URL's password masked, as pip masks it (``https://user:****@host``); a user name alone, which
    is how a token is often given (``https://TOKEN@host``), masked whole; and each value of a URL's query string.
    Everything the gate prints or writes (its lines, reports, the environment's stamp) passes through here."""
    def mask(found: re.Match) -> str:
        user = found.group("user")
        if ":" in found.group(0)[len(found.group("scheme")):]:
            return f"{found.group('scheme')}{user}:****@"
        return f"{found.group('scheme')}****@"

    return _QUERY.sub(_mask_query, _CREDENTIALS.sub(mask, text))


# A URL's query string (``https://host/simple/?token=SECRET``): its values are credentials as often as not (issue 48).
_QUERY = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s?#'\"<>]*)\?(?P<query>[^\s#'\"<>]*)")


def _mask_query(found: re.Match) -> str:
    """A URL's query with each value masked (``?token=****&x=****``; a bare item, ``?SECRET``, masked whole)."""
    items = [item.split("=", 1)[0] + "=****" if "=" in item else ("****" if item else "")
             for item in found.group("query").split("&")]
    return f"{found.group('head')}?{'&'.join(items)}"


def printable(text: str) -> str:
    """A line for the terminal or a CI log, as the gate prints it: credentials masked (``redact``), a line beginning
    with ``::`` marked ``| ::`` and ``##[`` written ``##\\[`` so a wheel's member name cannot smuggle in a workflow
    command, a control byte (ESC) written as its escape, and a lone surrogate written as its escape rather than crashing
    the print."""
    lines = redact(text).replace("\r\n", "\n").replace("\r", "\n").split("\n")  # a lone CR ends a line too
    safe = [f"| {line}" if line.lstrip().startswith("::") else line for line in lines]
    # GitHub's runner parses the legacy ``##[command]`` anywhere in a line (a member named ``a##[stop-commands]...``
    # stopped every later annotation), and a terminal obeys ESC and the other control bytes: each shown, not obeyed.
    joined = "\n".join(safe).replace("##[", "##\\[")
    joined = _CONTROL.sub(lambda found: f"\\x{ord(found.group(0)):02x}", joined)
    return joined.encode("utf-8", "backslashreplace").decode("utf-8")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # what a terminal may act on; a tab and a newline stay


def plain(value: object) -> str:
    """One line of printable text: a newline, a tab or another control character is a space;
    a character that would change how the line shows, or that cannot be encoded (a lone
    surrogate, from a file name that is not UTF-8), is U+FFFD."""
    out = []
    for char in str(value):
        category = unicodedata.category(char)
        if category == "Cc":
            out.append(" ")
        elif category in _INVISIBLE:
            out.append("\ufffd")
        else:
            out.append(char)
    return "".join(out)


def text(value: object) -> str:
    """``value`` as inline Markdown text: one line, every character of Markdown or HTML syntax
    escaped, so that it reads as written in a table cell, a heading or a list item."""
    line = _ALWAYS.sub(r"\\\1", plain(value))
    line = _EDGE_UNDERSCORE.sub(r"\\_", line)
    return _LINE_START.sub(r"\1\\\2", line)


# XML 1.0 allows tab, newline, carriage return and these ranges; anything else (other control
# characters, lone surrogates, U+FFFE/U+FFFF) makes the file unreadable to every XML parser.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml(value: object) -> str:
    """``value`` for an XML attribute or text (ElementTree escapes <, > and &): a character XML 1.0
    cannot hold is U+FFFD."""
    return _NOT_XML.sub("\ufffd", str(value))


def code(value: object) -> str:
    """``value`` as an inline code span: one line, fenced by more backticks than any run inside it
    (CommonMark's rule), so that a backtick in it cannot end the span early."""
    line = plain(value)
    longest = max((len(run) for run in re.findall(r"`+", line)), default=0)
    fence = "`" * (longest + 1)
    # CommonMark takes one space off each side where both have one: padded where that or a backtick edge is
    pad = " " if line[:1] == "`" or line[-1:] == "`" or (line[:1] == " " and line[-1:] == " " and line.strip()) else ""
    return f"{fence}{pad}{line}{pad}{fence}"


# GitHub's workflow commands (``::error title=TITLE::MESSAGE``): escaped as GitHub's own toolkit escapes them
# (actions/toolkit, packages/core/src/command.ts: escapeData, escapeProperty), which the runner undoes. A newline in
# a reason therefore cannot end the command and start another (``::add-mask::``, ``::stop-commands::``), and a ``:``
# or ``,`` in a title cannot end the property.


def workflow_data(value: object) -> str:
    """``value`` as a workflow command's message: ``%``, CR and LF percent-encoded."""
    return str(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(value: object) -> str:
    """``value`` as a workflow command's property (``title=``): as a message, and ``:`` and ``,`` too."""
    return workflow_data(value).replace(":", "%3A").replace(",", "%2C")
