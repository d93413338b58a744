"""The gate's checks, declared once, as data.

A ``Check`` is a name (what the reports, the summary, the release rule and the benchmark call
it), the stage that decides it, its place in that stage, and the function that decides it where
the parent does (``None`` where the child decides it, in ``smoke.child``). The stages run in
order: the wheel file (``smoke.shipped``, also alone in ``nox -s inspect``), the environment
(``smoke.installed``, judged on what the child reports after its imports), the child (exports,
artifacts, loads, the negative control). A row runs the common checks declared here and in those
modules, and the checks its backend declares (``smoke.backends``); ``for_row`` lists them.

This module imports nothing heavy: the child imports it inside the gate's environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from smoke.results import CheckResult
    from smoke.rows import Row

FILE, ENVIRONMENT, CHILD = "wheel file", "environment", "child"
STAGES = (FILE, ENVIRONMENT, CHILD)
# The child's two models, in the order it builds them: a weightless x + y and a seeded nn.Linear.
MODELS = ("weightless", "weighted")


@dataclass(frozen=True)
class Check:
    name: str
    stage: str
    order: int  # its place in its stage
    function: Callable[..., CheckResult] | None = None
    per_model: bool = False  # one result per model: "NAME (weightless)", "NAME (weighted)"

    def of(self, model: str) -> str:
        return f"{self.name} ({model})"

    def names(self) -> tuple[str, ...]:
        return tuple(self.of(model) for model in MODELS) if self.per_model else (self.name,)


# Decided in the child (smoke.child, smoke.checks), and by the parent about the child itself.
EXPORT = Check("export", CHILD, 20, per_model=True)
DELEGATE = Check("delegate", CHILD, 30, per_model=True)
DATA_FILE = Check("data file", CHILD, 40, per_model=True)
WEIGHTS = Check("weights in the data file", CHILD, 50)
RUN = Check("run with data file", CHILD, 60, per_model=True)
NEGATIVE = Check("negative control (weighted, no data file)", CHILD, 70)
# A program with no delegate, run on the wheel's portable kernels and compared with eager (smoke.portable).
PORTABLE = Check("portable kernels", CHILD, 75)
# Every *.cpython-*.so the wheel ships, each imported in a process of its own (smoke.extensions).
EXTENSIONS = Check("extension modules import", CHILD, 80)
CHILD_PROCESS = Check("child process", CHILD, 99)  # it crashed, hung or spoke garbage
CHILD_CHECKS = (EXPORT, DELEGATE, DATA_FILE, WEIGHTS, RUN, NEGATIVE, PORTABLE, EXTENSIONS, CHILD_PROCESS)

# Phases the child times, by these names; an export's phase is named as its check's result is.
IMPORT_PHASE = "import torch and executorch"
NEGATIVE_PHASE = "negative control"


def load_phase(model: str) -> str:
    return f"load and run ({model})"


# The checks a row that must execute may not skip: a skip there is work that did not happen.
MUST_EXECUTE = (*RUN.names(), NEGATIVE.name, PORTABLE.name)


def common() -> tuple[Check, ...]:
    """Every row's checks (imported here, not at the top: the child has no ELF or wheel reader)."""
    from smoke import installed, policy, shipped

    return (*shipped.CHECKS, *policy.FILE_CHECKS, *installed.CHECKS, *policy.ENVIRONMENT_CHECKS, *CHILD_CHECKS)


def for_row(row: Row, stage: str | None = None) -> list[Check]:
    """The row's checks in the order they run (of one stage, or all)."""
    declared = [c for c in (*common(), *row.backend.checks) if stage is None or c.stage == stage]
    return sorted(declared, key=lambda c: (STAGES.index(c.stage), c.order))


def result_names(row: Row) -> list[str]:
    """Every result a full run of the row reports, in order (the child process's only when it failed)."""
    return [name for check in for_row(row) if check is not CHILD_PROCESS for name in check.names()]


def declared(result: str) -> Check | None:
    """The declared check a result's name belongs to ("data file (weighted)" -> DATA_FILE)."""
    from smoke.backends import in_use

    for check in (*common(), *(c for b in in_use() for c in b.checks)):
        if result in check.names():
            return check
    return None


def run_check(check: Check, *args) -> "CheckResult":
    """Run a parent-side check and record how long it took."""
    import time

    start = time.monotonic()
    result = check.function(*args)
    return result.with_seconds(time.monotonic() - start)
