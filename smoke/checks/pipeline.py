"""A row's checks, gathered in the order they run.

Checks are declared as data (``smoke.stages.Check``) beside the functions that decide them: on the wheel file (also
alone in ``nox -s inspect``), on the environment (judged on what the child reports), and in the child. A row runs
the common checks of its system (``BY_SYSTEM``) and its backend's own (``smoke.backends``); ``for_row`` lists them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smoke.checks import duplicates, foreign, linux, macos, requirements, startup, tagged, toplevel, windows
from smoke.checks.kinds import EnvironmentCheck, FileCheck
from smoke.child import loads
from smoke.readers.systems import LINUX, MACOS, SYSTEMS, WINDOWS
from smoke.rows import ROWS
from smoke.stages import CHILD_CHECKS, CHILD_PROCESS, EXECUTED, STAGES, Check

if TYPE_CHECKING:
    from smoke.rows import Row


# Each system's own checks, in a module of its own: its file checks read its ELF, Mach-O or PE files.
BY_SYSTEM = {LINUX: linux, MACOS: macos, WINDOWS: windows}


def common_file(system: str = LINUX) -> tuple[FileCheck, ...]:
    """Every row's wheel-file checks, for a wheel of that system (``Row.system``)."""
    own = BY_SYSTEM[system]
    return (*tagged.CHECKS, *foreign.CHECKS, *startup.CHECKS, *requirements.CHECKS, *own.FILE_CHECKS, *duplicates.CHECKS,
            *toplevel.CHECKS)


def common(system: str = LINUX) -> tuple[Check[Any], ...]:
    """Every row's checks, for a wheel of that system (``Row.system``)."""
    return (*common_file(system), *BY_SYSTEM[system].ENVIRONMENT_CHECKS, *CHILD_CHECKS, *loads.CHECKS)


def _backends(row: Row) -> bool:
    return SYSTEMS[row.system].reads_elf  # a backend's file checks read ELF files


def for_row(row: Row, stage: str | None = None) -> list[Check[Any]]:
    """The row's checks in the order they run (of one stage, or all)."""
    own = row.backend.checks if _backends(row) else ()
    declared = [c for c in (*common(row.system), *own) if stage is None or c.stage == stage]
    return sorted(declared, key=lambda c: (STAGES.index(c.stage), c.order))


def file_checks(row: Row) -> list[FileCheck]:
    """The row's wheel-file checks in the order they run (``for_row(row, FILE)``), each of the stage's signature."""
    declared: list[FileCheck] = [*common_file(row.system), *(row.backend.file_checks if _backends(row) else ())]
    return sorted(declared, key=lambda c: c.order)


def environment_checks(row: Row) -> list[EnvironmentCheck]:
    """The row's environment checks in the order they run (``for_row(row, ENVIRONMENT)``), of the stage's signature."""
    declared: list[EnvironmentCheck] = [*BY_SYSTEM[row.system].ENVIRONMENT_CHECKS,
                                        *(row.backend.environment_checks if _backends(row) else ())]
    return sorted(declared, key=lambda c: c.order)


def result_names(row: Row) -> list[str]:
    """Every result a full run of the row reports, in order (the child process's only when it failed)."""
    return [name for check in for_row(row) if check is not CHILD_PROCESS for name in check.names()]


def check_names() -> set[str]:
    """The name of every check the gate has, on any row (what a waiver may name)."""
    backends = {row.backend.name: row.backend for row in ROWS.values()}.values()
    return {c.name for c in (*(c for system in BY_SYSTEM for c in common(system)), *(c for b in backends for c in b.checks),
                             EXECUTED)}


def declared(result: str) -> Check[Any] | None:
    """The declared check a result's name belongs to ("data file (weighted)" -> DATA_FILE)."""
    backends = {row.backend.name: row.backend for row in ROWS.values()}.values()  # one of each kind the rows use
    for check in (*(c for system in BY_SYSTEM for c in common(system)), *(c for b in backends for c in b.checks)):
        if result in check.names():
            return check
    return None
