"""What the parent prints as it goes: a line, a check's result (and recorded), a timed phase, an error.

``error`` is the one place an ``ERROR`` line is printed: by the edge (``smoke.cli``) for an error that ends a
command, and by a command for what it could not do while its verdict stands.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

from smoke import markup
from smoke.results import CheckResult

if TYPE_CHECKING:
    from smoke.report import Run


def error(text: str) -> None:
    """One ERROR line on stderr: what could not be done, and the fix."""
    print(f"ERROR {markup.redact(text)}", file=sys.stderr, flush=True)


def say(text: str) -> None:
    print(markup.redact(text), flush=True)


def emit(run: Run, result: CheckResult) -> CheckResult:
    """A result, waived where the policy waives it (``Run.waivers``), recorded and printed."""
    if run.waivers is not None:
        result = run.waivers.apply(result)
    run.results.append(result)
    say(result.line())
    return result


@contextmanager
def phase(run: Run, name: str):
    """A phase of the parent: printed when it starts and with its duration, and recorded."""
    say(f"  ... {name}")
    start = time.monotonic()
    try:
        yield
    finally:
        seconds = round(time.monotonic() - start, 3)
        run.phases.append({"name": name, "seconds": seconds})
        say(f"  ... {name}: {seconds:.1f} s")
