"""The README's commands, run as a newcomer would right after the quick start: in a fresh virtual
environment made from requirements-gate.txt alone (no test requirements, no executorch)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import H200, REPO, sh_blocks


@pytest.fixture(scope="module")
def gate_python(tmp_path_factory) -> Path:
    env = tmp_path_factory.mktemp("readme") / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    python = env / "bin" / "python"
    # requirements-gate.txt installs the checkout (-e .), which pip reads as the folder it runs in
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(REPO / "requirements-gate.txt")], check=True, cwd=REPO)
    return python


def run(python: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_artifact_reader_runs_with_the_gate_requirements_alone(gate_python):
    proc = run(gate_python, "-m", "smoke.artifacts", str(H200 / "weighted" / "model.pte"), str(H200 / "weighted" / "aoti_cuda_blob.ptd"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every key it expects is present (2)" in proc.stdout


@pytest.mark.slow
def test_nox_lists_the_rows_without_noise(gate_python):
    proc = run(gate_python, "-m", "nox", "-l")
    assert proc.returncode == 0, proc.stderr
    for row in ("cuda_x86_64", "cuda_aarch64", "cpu_x86_64", "cpu_aarch64", "inspect", "summary", "benchmark", "tests"):
        assert f" {row} -> " in proc.stdout, proc.stdout
    assert "uv binary not found" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_inspect_and_summary_run_with_the_gate_requirements_alone(gate_python, declared_x86_64, tmp_path):
    proc = run(gate_python, "-m", "nox", "-s", "inspect", "--", str(declared_x86_64), "--row", "cpu_x86_64", "--report-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "inspect-cpu_x86_64: PASSED: 14 passed, 0 failed, 0 skipped" in proc.stdout
    assert "uv binary not found" not in proc.stdout + proc.stderr
    reports = REPO / "docs" / "records" / "runs" / "2026-12-05-device-after-redesign"  # the CUDA row's report of schema 3, from the GPU
    proc = run(gate_python, "-m", "nox", "-s", "summary", "--", str(reports), "--release", "cuda")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the aarch64 CUDA row has no report: not complete
    assert "FAIL cuda_aarch64: no report (the cuda release needs this row)" in proc.stdout
    assert "FAIL cuda_x86_64: failed (one runtime core, imports declared)" in proc.stdout
    old = REPO / "docs" / "records" / "runs" / "2026-12-03-h200-cuda-build" / "reports"  # schema 2: read, and a rerun asked for
    proc = run(gate_python, "-m", "nox", "-s", "summary", "--", str(old), "--release", "cuda")
    assert proc.returncode == 2 and "has report schema 2, this gate reads 3 and 4: rerun that row" in proc.stderr, proc.stderr


# What each of the command blocks of the README and docs/ must do when run in order in a fresh clone, after the quick
# start: (exit code, lines its output must hold). Keyed by the block's first words; a block the README
# gains without an entry here fails the test, so none goes untried.
_QUICK_START = "python3 -m venv .venv && .venv/bin/python -m pip install -r requirements-gate.txt"
_EXPECTED = {
    _QUICK_START: (0, ["cpu_x86_64: PASSED: 42 passed, 0 failed, 1 skipped",
                       "SKIP OpenVINO model: not run: the OpenVINO export stack is not installed",
                       "policy: torch is user-supplied (torch = 'user-supplied', --policy '",
                       "/docs/examples/torch-user-supplied.toml')", "installing with uv ("]),
    ".venv/bin/python -m nox -s inspect --": (1, ["inspect-cpu_x86_64: FAILED", "not judged: cuda_x86_64, the wheel is a CPU build",
                                         "FAIL libraries resolve: ", "FAIL imports declared: "]),
    ".venv/bin/python -m nox -s cpu_x86_64 --": (1, ["... reusing the environment in ", "reports: ", "summary (cpu release, ", "/reports): FAILED",
                                            "FAIL cpu_aarch64: no report (the cpu release needs this row)"]),
}
# Not run here, and why: the test command is what runs this test; the emulated aarch64 interpreter needs
# root, binfmt_misc and minutes of downloads (tests/integration/test_emulated.py runs those rows where one exists).
_NOT_RUN = {"python3 -m venv .venv && .venv/bin/python -m pip install nox": "it is the command that runs this test",
            "sudo .ci/make-aarch64-python": "needs root and binfmt_misc (tests/integration/test_emulated.py, where one exists)",
            ".venv/bin/python -m nox -s tests -- --hypothesis-profile=thorough": "the whole suite at every property's own count: "
                                                                                  "the test command, longer (tests/test_profiles.py)"}


@pytest.mark.slow
@pytest.mark.network
def test_every_readme_command_works_in_order_in_a_fresh_clone(tmp_path):
    import os
    import shutil

    clone = tmp_path / "clone"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    for name in files:  # the checkout as a user's clone has it: tracked and new files, nothing ignored
        if (REPO / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, clone / name)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{clone / '.venv' / 'bin'}:{env['PATH']}"  # as an activated .venv (the commands name it themselves)
    ran = []
    for block in sh_blocks():
        key = next((k for k in (*_EXPECTED, *_NOT_RUN) if block.startswith(k)), None)
        assert key is not None, f"a README block this test does not know: {block!r}: add what it must do to _EXPECTED"
        if key in _NOT_RUN:
            continue
        code, lines = _EXPECTED[key]
        proc = subprocess.run(["bash", "-c", block], cwd=clone, env=env, capture_output=True, text=True, timeout=1500)
        out = proc.stdout + proc.stderr
        assert proc.returncode == code, f"{block}\n{out[-4000:]}"
        for line in lines:
            assert line in out, f"{block}: no {line!r} in\n{out[-4000:]}"
        assert "Traceback" not in out
        ran.append(key)
    assert ran == list(_EXPECTED)  # each known block ran, in the README's order
    assert (clone / "summary.md").is_file() and (clone / "reports" / "cpu_x86_64.json").is_file()
