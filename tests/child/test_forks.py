"""The child forks only while CUDA's driver is not initialised (smoke.child.forks.device_initialised): a fork of a
process that initialised it cannot use the device, so the negative control's load would fail for the fork's sake and
pass. Here a stand-in driver (libcuda.so.1 made with cc, answering ``cuDeviceGetCount`` as the real one does before
and after ``cuInit``) is loaded into a fresh interpreter, as torch's runtime loads the real one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smoke.child import forks

REPO = Path(__file__).resolve().parents[2]
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to make a stand-in CUDA driver")

# cuDeviceGetCount as cuda.h declares it (CUresult cuDeviceGetCount(int *count)), answering ANSWER.
DRIVER = "int cuDeviceGetCount(int *count) {{ *count = {count}; return {answer}; }}\n"


def _driver(tmp_path: Path, answer: int) -> Path:
    """A libcuda.so.1 (its file name and soname the real driver's) whose cuDeviceGetCount answers ``answer``."""
    folder = tmp_path / f"driver-{answer}"
    folder.mkdir()
    (folder / "driver.c").write_text(DRIVER.format(count=1 if answer == 0 else 0, answer=answer))
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", folder / "libcuda.so.1", folder / "driver.c"],
                   check=True, capture_output=True)
    return folder / "libcuda.so.1"


ASK = """
import ctypes, sys
for path in sys.argv[1:]:
    ctypes.CDLL(path)  # loaded as torch's CUDA runtime loads the driver
from smoke.child import forks
print(forks.device_initialised())
"""

# The child's step after its imports (smoke.child.run.fork_after_imports), in a fresh interpreter: which forks it made.
AFTER_IMPORTS = """
import ctypes, sys
from pathlib import Path
work = Path(sys.argv[1])
for path in sys.argv[2:]:
    ctypes.CDLL(path)
from smoke import proc
from smoke.child import run
forked = run.Forks()
run.fork_after_imports(work, forked)
print(*sorted({type(c).__name__ for c in forked.controls.values()}), len(forked.controls))
for process in forked.processes():
    proc.end(process)
"""


def _ask(*drivers: Path) -> str:
    ran = subprocess.run([sys.executable, "-c", ASK, *map(str, drivers)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stdout.strip()


def test_a_process_that_never_loaded_the_driver_has_not_initialised_it():
    assert forks.device_initialised() is False  # this machine's test process: no driver loaded
    assert _ask() == "False"


@needs_cc
def test_a_loaded_driver_not_yet_initialised_allows_the_forks(tmp_path):
    assert _ask(_driver(tmp_path, forks.CUDA_ERROR_NOT_INITIALIZED)) == "False"


@needs_cc
@pytest.mark.parametrize("answer", [0, 100], ids=["initialised", "initialised-without-a-device"])
def test_a_driver_that_ran_cuinit_is_initialised(tmp_path, answer):
    """0: CUDA_SUCCESS (cuInit ran); 100, CUDA_ERROR_NO_DEVICE: any answer but not-initialised counts as initialised."""
    assert _ask(_driver(tmp_path, answer)) == "True"


@needs_cc
@pytest.mark.parametrize(("answer", "made"), [(forks.CUDA_ERROR_NOT_INITIALIZED, "Case"), (0, "Popen")],
                         ids=["driver-not-initialised", "driver-initialised"])
def test_the_child_forks_its_negative_control_only_while_the_driver_is_not_initialised(tmp_path, answer, made):
    """Not initialised: the runs and the controls are cases of the runtime's process (smoke.child.runtime), which forks
    one per case. Initialised, no fork is made: each is an interpreter of its own, started at once (it imports torch and
    the runtime while the exports run)."""
    work = tmp_path / "work"
    work.mkdir()
    ran = subprocess.run([sys.executable, "-c", AFTER_IMPORTS, str(work), str(_driver(tmp_path, answer))], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # the two runs (each program with its data file) and the controls (no data file, and two damaged ones)
    assert ran.stdout.strip().splitlines()[-1] == f"{made} 5"
