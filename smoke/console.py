"""What the parent prints as it goes: a line, a check's result (and recorded), a timed phase."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

from smoke.results import CheckResult

if TYPE_CHECKING:
    from smoke.report import Run


def say(text: str) -> None:
    print(text, flush=True)


def emit(run: Run, result: CheckResult) -> CheckResult:
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
