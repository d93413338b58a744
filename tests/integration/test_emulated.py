"""The aarch64 rows, run for real on an aarch64 CPython under emulation (qemu-user through
binfmt_misc), made by `.ci/make-aarch64-python`. Where there is none, each test says so as a skip
with the command that makes one; CI does not make one (README: "The aarch64 rows, emulated")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from smoke.checks.pipeline import result_names
from smoke.rows import ROWS
from tests.helpers import REPO, declare_torch, pypi_wheel

# One environment (ENV_DIR) for both: under pytest-xdist they run in one worker, one after the other.
pytestmark = [pytest.mark.emulated, pytest.mark.slow, pytest.mark.network, pytest.mark.xdist_group("emulated-env")]
ROOT = Path(os.environ.get("GATE_AARCH64_ROOT", REPO / ".gate" / "aarch64-root"))
PYTHON = ROOT / "usr" / "bin" / "python3.11"
ENV_DIR = REPO / ".gate" / "envs" / "cpu_aarch64"  # the row's own default: an earlier run's environment is reused


@pytest.fixture(scope="module")
def aarch64():
    if not PYTHON.exists() or not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        pytest.skip(f"no emulated aarch64 interpreter at {PYTHON}: run sudo .ci/make-aarch64-python (README)")
    env = {**os.environ, "QEMU_LD_PREFIX": str(ROOT)}
    machine = subprocess.run([str(PYTHON), "-c", "import platform; print(platform.machine())"], env=env,
                             capture_output=True, text=True).stdout.strip()
    assert machine == "aarch64"
    return env


def nox(env, *args):
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=5400)


def test_cpu_aarch64_passes_every_check_under_emulation(aarch64, tmp_path):
    wheel = declare_torch(pypi_wheel("aarch64"), tmp_path)  # PyPI's own declares no torch: libraries resolve fails it
    proc = nox(aarch64, "-s", "cpu_aarch64", "--", wheel, "--python", PYTHON, "--env-dir", ENV_DIR, "--reuse-env",
               "--timeout", "5400")
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert "Python 3.11.2, device none" in out and "executorch 1.5.1, torch 2.13.0" in out
    assert "PASS weights in the data file: model.ptd is 528 B, 528 B over the weightless model's 0 B" in out
    assert "PASS negative control (weighted, no data file)" in out
    assert f"cpu_aarch64: PASSED: {len(result_names(ROWS['cpu_aarch64'])) - 1} passed, 0 failed, 1 skipped" in out  # OpenVINO model


def test_cuda_aarch64_checks_for_real_and_skips_what_needs_a_gpu(aarch64):
    wheel = pypi_wheel("aarch64")
    proc = nox(aarch64, "-s", "cuda_aarch64", "--", wheel, "--python", PYTHON, "--env-dir", ENV_DIR, "--reuse-env")
    out = proc.stdout
    assert proc.returncode == 1, out[-4000:] + proc.stderr[-2000:]  # PyPI's CPU wheel: CUDA build fails
    assert "FAIL CUDA build: 'executorch-1.5.1-cp311-cp311-manylinux_2_28_aarch64.whl' is a CPU build" in out
    # PyPI's torch 2.13.0 for aarch64 is a CUDA 13 build: no label on the wheel to agree with.
    assert "FAIL torch agrees: torch has CUDA 13.0, the wheel has no +cuXXX label to agree with (see CUDA build)" in out
    assert ("SKIP CUDA device: no CUDA device visible (torch.cuda.is_available() is False; torch CUDA 13.0); "
            "export and execution need one") in out
    for check in ("export (weighted)", "export (weightless)", "run with data file (weighted)"):
        assert f"SKIP {check}: not run:" in out
