"""Each parent-side stage's check signature, and the one way each is run (timed).

A wheel-file check reads the wheel, its row and its native libraries; an environment check also reads the child's
facts. Every declared check is a ``FileCheck`` or an ``EnvironmentCheck``, so mypy holds its function to its stage's
signature; the child's checks have none.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from smoke.stages import ENVIRONMENT, FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel
    from smoke.results import CheckResult
    from smoke.rows import Row

FileFunction = Callable[["Wheel", "Row", "Libraries"], "CheckResult"]
EnvironmentFunction = Callable[["Wheel", "Row", "dict[str, Any]", "Libraries"], "CheckResult"]
FileCheck = Check[FileFunction]
EnvironmentCheck = Check[EnvironmentFunction]


def run_file(check: FileCheck, wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """Judge ``wheel`` by a wheel-file check, its time recorded."""
    if check.function is None or check.stage != FILE:
        raise ValueError(f"{check.name!r} is no wheel-file check of the parent's")
    start = time.monotonic()
    return check.function(wheel, row, libraries).with_seconds(time.monotonic() - start)


def run_environment(check: EnvironmentCheck, wheel: Wheel, row: Row, facts: dict[str, Any], libraries: Libraries) -> CheckResult:
    """Judge the installed environment, from the child's ``facts``, by an environment check, its time recorded."""
    if check.function is None or check.stage != ENVIRONMENT:
        raise ValueError(f"{check.name!r} is no environment check of the parent's")
    start = time.monotonic()
    return check.function(wheel, row, facts, libraries).with_seconds(time.monotonic() - start)
