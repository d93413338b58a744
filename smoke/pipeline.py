"""A row's checks, gathered in the order they run.

The checks are declared as data (``smoke.stages.Check``) beside the functions that decide them:
the wheel file (``smoke.shipped``, ``smoke.policy``, ``smoke.resolve``; also alone in ``nox -s inspect``), the
environment (``smoke.installed``, ``smoke.resolve``, judged on what the child reports after its
imports), the child (``smoke.stages``). A row runs those common checks and the ones its backend
declares (``smoke.backends``); ``for_row`` lists them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smoke import installed, loads, policy, resolve, shipped, tagged
from smoke.rows import ROWS
from smoke.stages import CHILD_CHECKS, CHILD_PROCESS, STAGES, Check

if TYPE_CHECKING:
    from smoke.rows import Row


def common() -> tuple[Check, ...]:
    """Every row's checks."""
    return (*tagged.CHECKS, *shipped.CHECKS, *policy.CHECKS, *resolve.FILE_CHECKS, *installed.CHECKS, *resolve.ENVIRONMENT_CHECKS, *CHILD_CHECKS, *loads.CHECKS)


def for_row(row: Row, stage: str | None = None) -> list[Check]:
    """The row's checks in the order they run (of one stage, or all)."""
    declared = [c for c in (*common(), *row.backend.checks) if stage is None or c.stage == stage]
    return sorted(declared, key=lambda c: (STAGES.index(c.stage), c.order))


def result_names(row: Row) -> list[str]:
    """Every result a full run of the row reports, in order (the child process's only when it failed)."""
    return [name for check in for_row(row) if check is not CHILD_PROCESS for name in check.names()]


def declared(result: str) -> Check | None:
    """The declared check a result's name belongs to ("data file (weighted)" -> DATA_FILE)."""
    backends = {row.backend.name: row.backend for row in ROWS.values()}.values()  # one of each kind the rows use
    for check in (*common(), *(c for b in backends for c in b.checks)):
        if result in check.names():
            return check
    return None
