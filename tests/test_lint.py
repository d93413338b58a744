"""ruff's rules ([tool.ruff] in pyproject.toml) hold over the gate's code, its tests and its scripts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

CHECKED = ("smoke", "tests", "noxfile.py", ".ci/device_mutants.py", ".ci/device_code_on_torch.py", ".ci/release-shape", ".ci/gate_matrix.py")


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    assert Path(ruff).exists(), "the test needs ruff: requirements-test.txt installs it"
    proc = subprocess.run([ruff, "check", "--output-format", "concise", *CHECKED], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
