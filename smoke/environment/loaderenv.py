"""The environment of every process that runs in the gate's environment: the child, the negative
control and the parallel export it starts (they inherit it), and the probe.

A PASS must mean the wheel works with only itself and its declared dependencies, so the caller's loader and Python
variables (``CALLER_VARIABLES``) do not reach those processes: a 1.5.1 wheel missing a library passed the CPU row
when the caller's LD_LIBRARY_PATH held a copy. PYTHONPATH is set to ``gate_code`` alone, so the child can import
``smoke``. The GPU driver is the machine's: where ``libcuda.so.1`` is found only through the caller's
LD_LIBRARY_PATH (``finds_driver_alone``), the folders holding the driver's libraries are kept, and said so.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from smoke import paths, proc
from smoke.errors import GateError

CALLER_VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")
# Every other variable the interpreter reads (Python's "Environment variables": PYTHON*, PYTHON_*) is the caller's too
# and is removed (issue 58: with PYTHONWARNINGS=error a correct wheel FAILed `child process` on a DeprecationWarning
# its users never see; PYTHONOPTIMIZE drops asserts, PYTHONSAFEPATH the gate's own import), except these, which change
# only where output and bytecode go, never what runs: a shell that sets them keeps them.
HARMLESS_PYTHON_VARIABLES = ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHON_COLORS",
                             "PYTHON_HISTORY", "PYTHON_BASIC_REPL")


def _interpreters(name: str) -> bool:
    """A variable of the interpreter's the caller may have set, other than ``CALLER_VARIABLES`` and the harmless ones."""
    return name.startswith("PYTHON") and name not in CALLER_VARIABLES and name not in HARMLESS_PYTHON_VARIABLES
# The CI job's own files (GitHub Actions' workflow commands by file): the gate writes the step summary; code of the
# wheel's, which runs in these processes, must not write the job's summary, variables, outputs or PATH (issue 48).
CI_FILE_VARIABLES = ("GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STATE")
DRIVER = "libcuda.so.1"
DRIVER_FILES = ("libcuda.so", "libnvidia-")  # names the driver's own libraries start with
DRIVER_TIMEOUT_S = 60


@dataclass(frozen=True)
class LoaderEnv:
    """The environment to run with, and what was taken out of the caller's to make it."""

    env: dict[str, str]
    removed: tuple[str, ...] = ()  # names only: their values may be anything
    driver_folders: tuple[str, ...] = ()  # LD_LIBRARY_PATH folders kept for the GPU driver

    def to_json(self) -> dict[str, list[str]]:
        return {"removed": list(self.removed), "driver_folders": list(self.driver_folders)}

    def line(self) -> str:
        """The one line the gate prints about it."""
        if not self.removed:
            said = f"clean loader environment: the caller set none of {', '.join(CALLER_VARIABLES)}"
        else:
            said = f"clean loader environment: removed the caller's {', '.join(self.removed)}"
        if self.driver_folders:
            said += (f"; kept LD_LIBRARY_PATH={os.pathsep.join(self.driver_folders)} for the GPU driver "
                     f"(the loader finds {DRIVER} only through it)")
        return said


def driver_folders(library_path: str) -> list[str]:
    """The folders of a LD_LIBRARY_PATH value that hold the GPU driver's own libraries."""
    found = []
    for folder in library_path.split(os.pathsep):
        try:
            names = os.listdir(folder) if folder else []
        except OSError:
            continue
        if any(name.startswith(DRIVER_FILES) for name in names) and folder not in found:
            found.append(folder)
    return found


def finds_driver_alone(python: str | os.PathLike, env: Mapping[str, str]) -> bool:
    """Whether the loader finds the GPU driver (``libcuda.so.1``) with ``env``, which has no
    LD_LIBRARY_PATH: its cache (``ldconfig``), its default folders. Asked of the loader itself, by
    opening the driver in a process of the environment's interpreter (the machine the wheel runs on)."""
    try:
        ran = proc.run([python, "-I", "-S", "-c", f"import ctypes; ctypes.CDLL({DRIVER!r})"], what=f"looking for {DRIVER}",
                       env=env, timeout=DRIVER_TIMEOUT_S, check=False)
    except GateError:
        return False
    return ran.returncode == 0


def clean(environ: Mapping[str, str], python: str | os.PathLike = sys.executable, **setting: str) -> LoaderEnv:
    """``environ`` without the caller's ``CALLER_VARIABLES``, the interpreter's other variables (``_interpreters``) and the
    CI job's files (``CI_FILE_VARIABLES``), then ``setting`` (the gate's own
    PYTHONPATH, PATH, ...); LD_LIBRARY_PATH keeps only the driver's folders, and only where the loader
    finds the driver nowhere else."""
    env = {k: v for k, v in environ.items() if k not in CALLER_VARIABLES and k not in CI_FILE_VARIABLES and not _interpreters(k)}
    removed = tuple(name for name in (*CALLER_VARIABLES, *sorted(filter(_interpreters, environ)), *CI_FILE_VARIABLES)
                    if name in environ)
    kept: list[str] = []
    holding = driver_folders(environ.get("LD_LIBRARY_PATH", ""))
    if holding and not finds_driver_alone(python, env):
        kept = holding
        env["LD_LIBRARY_PATH"] = os.pathsep.join(kept)
    env.update(setting)
    return LoaderEnv(env, removed, tuple(kept))


@contextmanager
def private_code(prefix: str = "executorch-wheel-gate-reference-") -> Iterator[Path]:
    """A temporary copy of the gate's ``smoke`` package alone, without compiled files: for one process (the eager
    reference, issue 58: made before any of the wheel's code runs, so that code cannot have changed what it imports;
    ``smoke.environment.unchanged`` notes it, and counts a file added to it), or, from an installed gate, for all of
    them (``gate_code``)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        shutil.copytree(paths.PACKAGE, Path(folder) / "smoke", ignore=shutil.ignore_patterns("__pycache__"))
        yield Path(folder)


@contextmanager
def gate_code() -> Iterator[Path]:
    """The folder the processes in the built environment run in and import ``smoke`` from (their cwd and PYTHONPATH):
    the gate's checkout or, where the gate is installed, a temporary copy of its ``smoke`` package alone. Never the
    gate's site-packages: its other packages would come before the environment's own, and a PASS would no longer be
    the wheel's alone."""
    if paths.CHECKOUT is not None:
        yield paths.CHECKOUT
        return
    with private_code("executorch-wheel-gate-code-") as folder:
        yield folder


def for_environment(python: Path, code: Path) -> LoaderEnv:
    """What the gate runs its processes in the built environment with: the caller's environment made
    clean, the folder that holds the gate's ``smoke`` (``gate_code``) on PYTHONPATH, the environment's ``bin``
    first on PATH."""
    caller = {k: v for k, v in os.environ.items() if k != "PIP_TARGET"}  # nox installed with --target, say
    return clean(caller, python, PYTHONPATH=str(code), PATH=f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
                 PYTHONUNBUFFERED="1")
