"""The gate's checks, declared once, as data: the vocabulary every stage and the reports share.

A ``Check`` is a name (what the reports, the summary, the release rule and the benchmark call
it), the stage that decides it, its place in that stage, and the function that decides it where
the parent does (``None`` where the child decides it, in ``smoke.child.run``). The stages run in
order: the wheel file, the environment, the child. The child's own checks are declared here;
the others beside their functions (``smoke.checks.shipped``, ``smoke.checks.policy``, ``smoke.checks.resolve``,
``smoke.checks.installed``, ``smoke.backends``); ``smoke.checks.pipeline`` gathers a row's.

This module imports nothing heavy: the child imports it inside the gate's environment.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from smoke.results import CheckResult

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


# Decided in the child (smoke.child.run, smoke.checks.exported), and by the parent about the child itself.
CUDA_DEVICE = Check("CUDA device", CHILD, 10)  # a CUDA row's: smoke.child.delegates judges it
EXPORT = Check("export", CHILD, 20, per_model=True)
DELEGATE = Check("delegate", CHILD, 30, per_model=True)
DATA_FILE = Check("data file", CHILD, 40, per_model=True)
WEIGHTS = Check("weights in the data file", CHILD, 50)
RUN = Check("run with data file", CHILD, 60, per_model=True)
NEGATIVE = Check("negative control (weighted, no data file)", CHILD, 70)
# A program with no delegate, run on the wheel's portable kernels and compared with eager (smoke.child.portable).
PORTABLE = Check("portable kernels", CHILD, 75)
# Every *.cpython-*.so the wheel ships, each imported in a process of its own (smoke.child.extensions).
EXTENSIONS = Check("extension modules import", CHILD, 80)
CHILD_PROCESS = Check("child process", CHILD, 99)  # it crashed, hung or spoke garbage
CHILD_CHECKS = (EXPORT, DELEGATE, DATA_FILE, WEIGHTS, RUN, NEGATIVE, PORTABLE, EXTENSIONS, CHILD_PROCESS)

# Phases the child times, by these names; an export's phase is named as its check's result is.
IMPORT_PHASE = "import torch and executorch"
NEGATIVE_PHASE = "negative control"
# The child's last phase: waiting for what ran beside its work (the extension modules' imports, the libraries' loads)
# and judging it; time the benchmark shows, not hidden between phases.
BESIDE_PHASE = "the work beside the exports, collected"


def load_phase(model: str) -> str:
    return f"load and run ({model})"


# The checks a row that must execute may not skip: a skip there is work that did not happen. The seed's
# own (both exports, the delegate by id, the data file under the runners' name, its size over the
# weightless one's, the loads with it equal to eager, the negative control), and the portable kernels.
MUST_EXECUTE = (*EXPORT.names(), *DELEGATE.names(), *DATA_FILE.names(), WEIGHTS.name, *RUN.names(), NEGATIVE.name,
                PORTABLE.name)
# A row that must execute and left one of MUST_EXECUTE unrun (skipped, or never reported) FAILs by this
# result, which names them: it never PASSes with skips (smoke.engine.row).
EXECUTED = Check("must execute", CHILD, 98)


def run_check(check: Check, *args) -> "CheckResult":
    """Run a parent-side check and record how long it took."""
    if check.function is None:
        raise ValueError(f"{check.name!r} is decided in the child, not by the parent")
    start = time.monotonic()
    result = check.function(*args)
    return result.with_seconds(time.monotonic() - start)
