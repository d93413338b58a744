"""What a user sees from `nox -s ROW -- ...`: the lines, the exit code, and nothing built on refusal."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.conftest import REPO


def nox(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *args],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


def test_nox_lists_every_row_with_a_description():
    out = nox("-l").stdout
    for row in ("cuda_x86_64", "cuda_aarch64", "cpu_x86_64", "cpu_aarch64", "inspect", "summary", "tests"):
        assert f"{row} -> " in out


def test_cpu_build_on_cuda_row_with_fail_fast_ends_before_any_environment(wheel_x86_64, tmp_path):
    start = time.monotonic()
    proc = nox("-s", "cuda_x86_64", "--", str(wheel_x86_64), "--fail-fast", "--env-dir", str(tmp_path / "env"))
    seconds = time.monotonic() - start
    assert proc.returncode == 1  # the wheel failed the gate
    assert "FAIL CUDA build: 'executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl' is a CPU build" in proc.stdout
    assert "0 passed, 1 failed, 0 skipped" in proc.stdout
    assert not (tmp_path / "env").exists()
    assert seconds < 20


def test_wrong_architecture_is_refused_with_the_right_session(wheel_x86_64, tmp_path):
    proc = nox("-s", "cuda_aarch64", "--", str(wheel_x86_64), "--env-dir", str(tmp_path / "env"))
    assert proc.returncode == 2  # the gate could not run
    assert "cuda_aarch64 could not run (exit 2)" in proc.stderr
    assert "ERROR wheel 'executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl' is built for x86_64; " \
           "the cuda_aarch64 row needs aarch64 (use nox -s cuda_x86_64)" in proc.stderr
    assert not (tmp_path / "env").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--wheel-index", "file:///nonexistent/index"], "no wheel given and none could be downloaded"),
        (["/nonexistent/executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl"], "does not exist"),
        (["{tmp}"], "is not a file"),
        (["{wheel}", "--no-such-option"], "ERROR unrecognized arguments: --no-such-option"),
        (["{wheel}", "--constraints", "{tmp}/missing.txt"], "constraints file"),
        (["{wheel}", "--wheelhouse", "{tmp}/missing"], "is not a directory"),
        (["{wheel}", "--report-dir", "{wheel}/reports"], "/reports' cannot be written"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_from_the_command_line(wheel_x86_64, tmp_path, args, message):
    args = [a.format(tmp=tmp_path, wheel=wheel_x86_64) for a in args]
    proc = subprocess.run([sys.executable, "-m", "smoke", "cuda_x86_64", *args, "--env-dir", str(tmp_path / "env")],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "env").exists()
