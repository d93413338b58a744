"""What the parent prints as it goes: a line, a check's result (and recorded), a timed phase, an error.

``error`` is the one place an ``ERROR`` line is printed: by the edge (``smoke.cli``) for an error that ends a
command, and by a command for what it could not do while its verdict stands. Under GitHub Actions each FAIL and
ERROR also annotates the job (``::error``), a WARN with ``::warning`` (``annotate``), escaped as GitHub's toolkit
escapes them, credentials masked.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

from smoke import markup
from smoke.results import CheckResult, Status

if TYPE_CHECKING:
    from smoke.report import Run


def annotate(level: str, title: str, message: str) -> None:
    """Under GitHub Actions, a workflow command (``::error``, ``::warning``) that annotates the job with ``title`` and
    ``message`` (docs.github.com, "Workflow commands for GitHub Actions"); elsewhere nothing. On stdout, where the
    runner reads it, after the line it repeats; credentials masked before the escaping (``markup.workflow_data``)."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return
    print(f"::{level} title={markup.workflow_property(markup.redact(title))}::{markup.workflow_data(markup.redact(message))}",
          flush=True)


def error(text: str) -> None:
    """One ERROR line on stderr: what could not be done, and the fix (and its annotation, under GitHub Actions)."""
    print(f"ERROR {markup.printable(text)}", file=sys.stderr, flush=True)
    annotate("error", "the gate could not run", text)


def fail(title: str, text: str) -> None:
    """A FAIL line that is no check's result (the matrix summary's problems), and its annotation titled ``title``."""
    say(f"FAIL {text}")
    annotate("error", title, text)


def say(text: str) -> None:
    print(markup.printable(text), flush=True)


def emit(run: Run, result: CheckResult) -> CheckResult:
    """A result, waived where the policy waives it (``Run.waivers``), recorded and printed."""
    result = run.waived(result)
    run.results.append(result)
    say(result.line())
    if result.status is Status.FAIL or (run.strict and result.status is Status.WARN):  # what fails the run
        annotate("error", result.name, result.told)
    elif result.status is Status.WARN:
        annotate("warning", result.name, result.told)
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
