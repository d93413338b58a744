"""The platform rows of the gate, one frozen record each.

A row names the machine a wheel is built for, its backend (``smoke.backends``), and whether a missing device is a
failure (execution required) or a printed skip. A wheel or an interpreter of another machine than the row's is
refused here, naming the row that fits (``check_machine``, ``check_host``).
"""

from __future__ import annotations

from dataclasses import dataclass

from smoke.backends import CUDA_ARCHS, Backend, Cuda, Xnnpack
from smoke.errors import WrongPlatform
from smoke.readers.systems import LINUX, MACOS, SYSTEMS, WINDOWS, of_platform
from smoke.readers.wheel import Interpreter, Wheel, normal_machine, platform_machine


@dataclass(frozen=True)
class Row:
    name: str
    machine: str  # the wheel's platform-tag architecture: x86_64, aarch64
    backend: Backend
    execution_required: bool  # a missing device is a FAIL, not a SKIP
    description: str
    # The operating system the wheel is for (smoke.readers.systems): which file checks judge it
    # (smoke.checks.pipeline), and where the row can install and run it; on another host it runs its file
    # checks and names the rest as skipped (smoke.engine.row).
    system: str = LINUX


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
        Row("cpu_macos_arm64", "arm64", Xnnpack(), True,
            "CPU wheel, macOS arm64: Mach-O file checks on any host; on macOS, the environment and XNNPACK's export, load and run with model.ptd",
            system=MACOS),
        Row("cpu_windows_x86_64", "amd64", Xnnpack(), False,
            "CPU wheel, Windows x86_64: PE file checks on any host; the installed half (environment, export, load, run) is not built yet and skips, saying so",  # noqa: E501 (nox -l prints it whole)
            system=WINDOWS),
    )
}

def child_data(row: Row) -> dict[str, object]:
    """What the child is given of its row (``smoke.child.row.ChildRow``'s fields), as data it reads from a file."""
    return {"name": row.name, "backend": row.backend.name, "delegate_id": row.backend.delegate_id,
            "data_file": row.backend.data_file, "weightless_writes_data": row.backend.weightless_writes_data,
            "execution_required": row.execution_required}


# What a release needs: the rows whose reports the matrix summary requires (the checks a row
# that must execute may not skip are smoke.stages.MUST_EXECUTE).
RELEASE_ROWS: dict[str, tuple[str, ...]] = {
    "cuda": ("cuda_x86_64", "cuda_aarch64"),
    "cpu": ("cpu_x86_64", "cpu_aarch64"),
    "all": ("cuda_x86_64", "cuda_aarch64", "cpu_x86_64", "cpu_aarch64"),
}


# --- which row fits: a wheel or an interpreter of another machine is refused, naming the row that fits


def fits(platform: str, row: Row) -> bool:
    """A wheel of this platform tag is for the row's system and machine ("any" fits every Linux row; a macOS
    universal2 wheel fits both macOS machines)."""
    if platform == "any":
        return SYSTEMS[row.system].takes_any
    if of_platform(platform) != row.system:
        return False
    machine = platform_machine(platform)
    return machine == row.machine or (machine == "universal2" and row.machine in ("arm64", "x86_64"))


def rows_fitting(wheel: Wheel) -> list[Row]:
    return [row for row in ROWS.values() if any(fits(tag.platform, row) for tag in wheel.tags)]


def check_machine(wheel: Wheel, row: Row) -> None:
    """Refuse a wheel for another platform, naming the session that takes it, or saying no row does."""
    if any(fits(tag.platform, row) for tag in wheel.tags):
        return
    fitting = rows_fitting(wheel)
    if not fitting:
        raise no_row(wheel)
    others = [r.name for r in fitting if r.backend.name == row.backend.name] or [r.name for r in fitting]
    raise WrongPlatform(
        f"wheel {wheel.filename!r} is built for {_built_for(wheel)}; "
        f"the {row.name} row needs {_platform_words(row)} (use nox -s {others[0]})"
    )


def _built_for(wheel: Wheel) -> str:
    """Its Linux machines (x86_64), or its platform tags where any is not Linux (macosx_14_0_arm64)."""
    if all(of_platform(t.platform) == LINUX for t in wheel.tags):
        return ", ".join(sorted(wheel.machines))
    return ", ".join(sorted({t.platform for t in wheel.tags}))


def _platform_words(row: Row) -> str:
    return SYSTEMS[row.system].machine_words(row.machine)


def no_row(wheel: Wheel) -> WrongPlatform:
    """A wheel no row of the gate takes (a macOS x86_64 wheel, a RISC-V one, a win32 one)."""
    kinds = ", ".join(sorted({r.machine for r in ROWS.values() if r.system == LINUX}))
    others = ", ".join(_platform_words(r) for r in ROWS.values() if r.system != LINUX)
    return WrongPlatform(f"wheel {wheel.filename!r} is built for {_built_for(wheel)}; the gate has rows for {kinds} "
                         f"(Linux), {others} only (nox -l lists them)")


no_linux_row = no_row  # the name inspect used before the macOS and Windows rows


def check_host(interpreter: Interpreter, row: Row) -> None:
    """Refuse, before anything is built, an interpreter of another machine than the row's."""
    if not interpreter.machine or interpreter.machine == normal_machine(row.machine):
        return
    fitting = [r.name for r in ROWS.values() if normal_machine(r.machine) == interpreter.machine and r.system == row.system
               and r.backend.name == row.backend.name]
    session = f"nox -s {fitting[0]}" if fitting else "another row"
    raise WrongPlatform(
        f"the {row.name} row needs an {row.machine} interpreter; {interpreter.describe()} runs on {interpreter.machine}: "
        f"use {session} for an {interpreter.machine} wheel, or pass --python with an {row.machine} Python (an emulated one works)"
    )
