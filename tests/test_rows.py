"""smoke.rows: a wheel is refused on a row of another machine or system, naming the row that gates it."""

from __future__ import annotations

from pathlib import Path

import pytest

from smoke.errors import WrongPlatform
from smoke.readers.wheel import read_wheel
from smoke.rows import ROWS, check_machine
from tests.helpers import nox, rewrite_wheel, smoke


def test_architecture_is_refused_naming_the_right_session(wheel_x86_64, wheel_aarch64):
    with pytest.raises(WrongPlatform, match=r"built for x86_64; the cuda_aarch64 row needs aarch64 \(use nox -s cuda_x86_64\)"):
        check_machine(read_wheel(wheel_x86_64), ROWS["cuda_aarch64"])
    with pytest.raises(WrongPlatform, match=r"use nox -s cuda_aarch64"):
        check_machine(read_wheel(wheel_aarch64), ROWS["cuda_x86_64"])
    check_machine(read_wheel(wheel_aarch64), ROWS["cuda_aarch64"])


@pytest.mark.network
def test_a_linux_row_given_a_macos_wheel_names_the_macos_row(macos_1_5_1, tmp_path):
    proc = smoke("cpu_x86_64", macos_1_5_1, "--env-dir", tmp_path / "env")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (f"ERROR wheel {macos_1_5_1.name!r} is built for macosx_14_0_arm64; the "
                                                    "cpu_x86_64 row needs x86_64 (use nox -s cpu_macos_arm64)")


def renamed(wheel_path: Path, folder: Path, platform: str, **changes) -> Path:
    return rewrite_wheel(wheel_path, folder, new_name=wheel_path.name.replace("manylinux_2_28_x86_64", platform), **changes)


@pytest.mark.slow
def test_a_wheel_for_a_machine_no_row_has_is_one_error_line(declared_slim, tmp_path):
    proc = nox("-s", "inspect", "--", str(renamed(declared_slim, tmp_path, "manylinux_2_28_riscv64")))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
    assert errors == ["ERROR wheel 'executorch-1.5.1-cp311-cp311-manylinux_2_28_riscv64.whl' is built for riscv64; the gate has "
                      "rows for aarch64, x86_64 (Linux), macOS arm64, Windows amd64 only (nox -l lists them)"]
    assert "Traceback" not in proc.stdout + proc.stderr
