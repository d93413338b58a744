"""The platform rows of the gate, one frozen record each.

A row names the machine a wheel is built for, its backend (``smoke.backends``: the delegate
its export goes through, the data file it writes, its own checks), and whether a missing
device is a failure (execution required) or a printed skip. A wheel or an interpreter of
another machine than the row's is refused here, naming the row that fits (``check_machine``,
``check_host``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from smoke.backends import CUDA_ARCHS, Backend, Cuda, Xnnpack
from smoke.errors import WrongPlatform

if TYPE_CHECKING:
    from smoke.wheel import Interpreter, Wheel


@dataclass(frozen=True)
class Row:
    name: str
    machine: str  # the wheel's platform-tag architecture: x86_64, aarch64
    backend: Backend
    execution_required: bool  # a missing device is a FAIL, not a SKIP
    description: str


ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        Row("cuda_x86_64", "x86_64", Cuda(archs=CUDA_ARCHS["x86_64"]), True,
            "CUDA wheel, x86_64: wheel and environment checks, then export, load with aoti_cuda_blob.ptd and run on the GPU (a GPU is required)"),
        Row("cuda_aarch64", "aarch64", Cuda(archs=CUDA_ARCHS["aarch64"]), False,
            "CUDA wheel, aarch64: the same checks; export and execution skip, with the reason, where no GPU is visible"),
        Row("cpu_x86_64", "x86_64", Xnnpack(), True,
            "CPU wheel, x86_64: wheel and environment checks, then export through XNNPACK with weights in model.ptd, load and run on the CPU"),
        Row("cpu_aarch64", "aarch64", Xnnpack(), True,
            "CPU wheel, aarch64: wheel and environment checks, then export through XNNPACK with weights in model.ptd, load and run on the CPU"),
    )
}


# What a release needs: the rows whose reports the matrix summary requires (the checks a row
# that must execute may not skip are smoke.stages.MUST_EXECUTE).
RELEASE_ROWS: dict[str, tuple[str, ...]] = {
    "cuda": ("cuda_x86_64", "cuda_aarch64"),
    "cpu": ("cpu_x86_64", "cpu_aarch64"),
    "all": ("cuda_x86_64", "cuda_aarch64", "cpu_x86_64", "cpu_aarch64"),
}


# --- which row fits: a wheel or an interpreter of another machine is refused, naming the row that fits


def check_machine(wheel: Wheel, row: Row) -> None:
    """Refuse a wheel for another architecture, or for no Linux at all, naming the session that takes it."""
    fits = wheel.linux_machines
    if row.machine in fits or "any" in fits:
        return
    if not fits:
        raise no_linux_row(wheel)
    others = [r.name for r in ROWS.values() if r.machine in fits and r.backend.name == row.backend.name]
    hint = f" (use nox -s {others[0]})" if others else ""
    raise WrongPlatform(
        f"wheel {wheel.filename!r} is built for {', '.join(sorted(wheel.machines))}; "
        f"the {row.name} row needs {row.machine}{hint}"
    )


def no_linux_row(wheel: Wheel) -> WrongPlatform:
    """A wheel with no Linux platform tag (macOS, Windows): every row of the gate is a Linux row."""
    platforms = ", ".join(sorted({tag.platform for tag in wheel.tags}))
    machines = ", ".join(sorted({r.machine for r in ROWS.values()}))
    return WrongPlatform(f"wheel {wheel.filename!r} is built for {platforms}, not Linux; the gate's rows gate Linux wheels "
                         f"({machines}; nox -l lists them): pass a manylinux or musllinux executorch wheel")


def check_host(interpreter: Interpreter, row: Row) -> None:
    """Refuse, before anything is built, an interpreter of another machine than the row's."""
    if not interpreter.machine or interpreter.machine == row.machine:
        return
    fitting = [r.name for r in ROWS.values() if r.machine == interpreter.machine and r.backend.name == row.backend.name]
    session = f"nox -s {fitting[0]}" if fitting else "another row"
    raise WrongPlatform(
        f"the {row.name} row needs an {row.machine} interpreter; {interpreter.describe()} runs on {interpreter.machine}: "
        f"use {session} for an {interpreter.machine} wheel, or pass --python with an {row.machine} Python (an emulated one works)"
    )
