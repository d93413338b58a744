"""The gate installed by pip (issue 36): the wheel built from a copy of the checkout holds the smoke package alone, with
its data files and the constraints, and installs a command, `executorch-wheel-gate`, that gives the nox sessions'
verdicts from any folder. Slow: it builds a wheel, makes a fresh virtual environment and installs the gate's
requirements into it from the package index, then runs a row end to end from the installed gate."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from smoke.checks.pipeline import result_names
from smoke.rows import ROWS
from tests.helpers import REPO

pytestmark = [pytest.mark.slow, pytest.mark.network]


def _clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without what would put the checkout's smoke in reach (nox's and pytest's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "GATE_INVOKED_FROM")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The gate's wheel, built from a copy of the checkout as a clone has it (tracked and new files, nothing ignored),
    so that the build writes nothing into the checkout."""
    clone = tmp_path_factory.mktemp("clone")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    for name in files:
        if (REPO / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, clone / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(clone)],
                   check=True, env=_clean_env(), timeout=600)
    (wheel,) = dist.glob("executorch_wheel_gate-*.whl")
    return wheel


@pytest.fixture(scope="module")
def gate_command(built, tmp_path_factory) -> Path:
    """`executorch-wheel-gate` in a fresh virtual environment: the wheel, its requirements from the package index."""
    env = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", str(built)], check=True, env=_clean_env(),
                   timeout=600)
    return env / "bin" / "executorch-wheel-gate"


def test_the_wheel_holds_the_smoke_package_alone_with_its_data_and_constraints(built):
    """Before: `pip wheel .` failed ("Multiple top-level packages discovered in a flat-layout": smoke, tests, ...)."""
    names = zipfile.ZipFile(built).namelist()
    info = {n for n in names if n.split("/")[0].endswith(".dist-info")}
    assert set(names) - info == {n for n in names if n.startswith("smoke/")}  # nothing but smoke and its metadata
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "smoke", "constraints"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    wanted = {n if n.startswith("smoke/") else f"smoke/{n}" for n in tracked}  # constraints/ ships as smoke/constraints/
    assert wanted == set(names) - info
    assert {"smoke/readers/releases.json", "smoke/readers/dependency_files.json", "smoke/constraints/torch-2.14.txt"} <= wanted
    entry_points = zipfile.ZipFile(built).read(next(n for n in info if n.endswith("entry_points.txt"))).decode()
    assert "executorch-wheel-gate = smoke.cli:script" in entry_points


def _verdict(out: str) -> str:
    """The verdict line, without its time."""
    (line,) = [l for l in out.splitlines() if re.match(r"inspect-\S+: (PASSED|FAILED): ", l)]
    return re.sub(r" in [\d.]+ s$", "", line)


def test_the_installed_command_gives_inspects_verdict_from_any_folder(gate_command, wheel_x86_64, tmp_path):
    anywhere = tmp_path / "anywhere"
    anywhere.mkdir()
    installed = subprocess.run([str(gate_command), "inspect", str(wheel_x86_64)], cwd=anywhere, env=_clean_env(),
                               capture_output=True, text=True, timeout=300)
    checkout = subprocess.run([sys.executable, "-m", "smoke", "inspect", str(wheel_x86_64)], cwd=REPO, capture_output=True,
                              text=True, timeout=300)
    assert installed.returncode == checkout.returncode == 1, installed.stdout + installed.stderr
    assert _verdict(installed.stdout) == _verdict(checkout.stdout) == "inspect-cpu_x86_64: FAILED: 12 passed, 2 failed, 0 skipped"
    assert [l for l in installed.stdout.splitlines() if l.startswith(("PASS", "FAIL", "SKIP", "WARN"))] == \
        [l for l in checkout.stdout.splitlines() if l.startswith(("PASS", "FAIL", "SKIP", "WARN"))]
    helped = subprocess.run([str(gate_command), "--help"], cwd=anywhere, env=_clean_env(), capture_output=True, text=True)
    assert f"Environments and downloads go to .gate in the folder it is run from ({anywhere / '.gate'})" in helped.stdout
    assert list(anywhere.iterdir()) == []  # inspect writes nothing there


def test_the_installed_command_runs_a_row_and_its_report_names_the_installed_gate(gate_command, declared_x86_64, tmp_path):
    """The child imports smoke from a copy of the installed package alone (smoke.environment.loaderenv.gate_code), and
    the constraints are the package's: the row passes PyPI's 1.5.1 with torch declared, as `nox -s cpu_x86_64` does
    (tests/integration/test_row_runs.py), and its report names the installed gate."""
    anywhere, scratch = tmp_path / "anywhere", tmp_path / "tmp"
    anywhere.mkdir()
    scratch.mkdir()
    proc = subprocess.run([str(gate_command), "cpu_x86_64", str(declared_x86_64), "--env-dir", str(tmp_path / "env"),
                           "--report-dir", "reports"], cwd=anywhere, env=_clean_env(TMPDIR=str(scratch)),
                          capture_output=True, text=True, timeout=1200)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert f"cpu_x86_64: PASSED: {len(result_names(ROWS['cpu_x86_64'])) - 1} passed, 0 failed, 1 skipped" in out  # OpenVINO model
    assert "; constraints smoke/constraints/torch-2.14.txt" in out
    report = json.loads((anywhere / "reports" / "cpu_x86_64.json").read_text())
    version = subprocess.run([str(gate_command.parent / "python"), "-c",
                              "from importlib.metadata import version; print(version('executorch-wheel-gate'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert report["gate"] == {"name": "executorch-wheel-gate", "version": version} and report["verdict"] == "pass"
    # the copy of smoke the child ran from, and the work folder, are gone (uv and torch leave caches of their own there)
    assert not [p.name for p in scratch.iterdir() if p.name.startswith(("executorch-wheel-gate-code-", "gate-cpu_x86_64-"))]
