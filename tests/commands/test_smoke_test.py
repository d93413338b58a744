"""smoke.commands.smoke_test: a test-infra build-matrix entry maps to its row, and ``smoke-test`` (the command a build
job's smoke-test-script runs) reads the job's environment, finds its wheel and hands the row run its command line, or
refuses in one ERROR line with exit 2.

The entries below are pytorch/test-infra's own, printed by its tools/scripts/generate_binary_build_matrix.py at commit
61a77570f45416dc425c17d4a648376541a84732 (--package-type wheel --channel nightly --python-versions '["3.12"]', each
operating system, every kind of build enabled), keys the mapping does not read left out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smoke.commands.smoke_test import build_job, row_for_build
from smoke.errors import WrongPlatform
from smoke.readers.systems import LINUX
from tests.helpers import REPO

LINUX_CPU = {"python_version": "3.12", "gpu_arch_type": "cpu", "gpu_arch_version": "", "desired_cuda": "cpu",
             "container_image": "pytorch/manylinux2_28-builder:cpu", "package_type": "manywheel",
             "build_name": "manywheel-py3_12-cpu", "validation_runner": "linux.2xlarge"}
LINUX_CUDA_12_6 = {"python_version": "3.12", "gpu_arch_type": "cuda", "gpu_arch_version": "12.6", "desired_cuda": "cu126",
                   "container_image": "pytorch/manylinux2_28-builder:cuda12.6", "package_type": "manywheel",
                   "build_name": "manywheel-py3_12-cuda12_6", "validation_runner": "linux.g5.4xlarge.nvidia.gpu"}
LINUX_CUDA_13_0 = {"python_version": "3.12", "gpu_arch_type": "cuda", "gpu_arch_version": "13.0", "desired_cuda": "cu130",
                   "container_image": "pytorch/manylinux2_28-builder:cuda13.0", "package_type": "manywheel",
                   "build_name": "manywheel-py3_12-cuda13_0", "validation_runner": "linux.g5.4xlarge.nvidia.gpu"}
AARCH64_CPU = {"python_version": "3.12", "gpu_arch_type": "cpu-aarch64", "gpu_arch_version": "", "desired_cuda": "cpu",
               "container_image": "pytorch/manylinux2_28_aarch64-builder:cpu-aarch64", "package_type": "wheel",
               "build_name": "wheel-py3_12-cpu-aarch64", "validation_runner": "linux.arm64.2xlarge"}
AARCH64_CUDA_13_0 = {"python_version": "3.12", "gpu_arch_type": "cuda-aarch64", "gpu_arch_version": "13.0-aarch64",
                     "desired_cuda": "cu130", "container_image": "pytorch/manylinuxaarch64-builder:cuda13.0",
                     "package_type": "wheel", "build_name": "wheel-py3_12-cuda-aarch6413_0-aarch64",
                     "validation_runner": "linux.arm64.m7g.4xlarge"}
MACOS_CPU = {"python_version": "3.12.12", "gpu_arch_type": "cpu", "gpu_arch_version": "", "desired_cuda": "cpu",
             "container_image": "pytorch/manylinux2_28-builder:cpu", "package_type": "wheel", "build_name": "wheel-py3_12-cpu",
             "validation_runner": "macos-m1-stable"}
WINDOWS_CPU = {"python_version": "3.12", "gpu_arch_type": "cpu", "gpu_arch_version": "", "desired_cuda": "cpu",
               "container_image": "pytorch/manylinux2_28-builder:cpu", "package_type": "wheel", "build_name": "wheel-py3_12-cpu",
               "validation_runner": "windows.4xlarge"}
WINDOWS_CUDA_13_0 = {"python_version": "3.12", "gpu_arch_type": "cuda", "gpu_arch_version": "13.0", "desired_cuda": "cu130",
                     "container_image": "pytorch/manylinux2_28-builder:cuda13.0", "package_type": "wheel",
                     "build_name": "wheel-py3_12-cuda13_0", "validation_runner": "windows.g4dn.xlarge"}
WINDOWS_ARM64_CPU = {"python_version": "3.12", "gpu_arch_type": "cpu", "gpu_arch_version": "", "desired_cuda": "cpu",
                     "container_image": "pytorch/manylinux2_28-builder:cpu", "package_type": "wheel",
                     "build_name": "wheel-py3_12-cpu", "validation_runner": "windows-11-arm64-preview"}
LINUX_ROCM = {"python_version": "3.12", "gpu_arch_type": "rocm", "gpu_arch_version": "7.2", "desired_cuda": "rocm7.2",
              "container_image": "pytorch/manylinux2_28-builder:rocm7.2", "package_type": "manywheel",
              "build_name": "manywheel-py3_12-rocm7_2", "validation_runner": "linux.2xlarge"}
LINUX_XPU = {"python_version": "3.12", "gpu_arch_type": "xpu", "gpu_arch_version": "", "desired_cuda": "xpu",
             "container_image": "pytorch/manylinux2_28-builder:xpu", "package_type": "manywheel",
             "build_name": "manywheel-py3_12-xpu", "validation_runner": "linux.2xlarge"}


@pytest.mark.parametrize("entry, row", [
    (LINUX_CPU, "cpu_x86_64"),
    (LINUX_CUDA_12_6, "cuda_x86_64"),
    (LINUX_CUDA_13_0, "cuda_x86_64"),
    (AARCH64_CPU, "cpu_aarch64"),
    (AARCH64_CUDA_13_0, "cuda_aarch64"),
    (MACOS_CPU, "cpu_macos_arm64"),
    (WINDOWS_CPU, "cpu_windows_x86_64"),
    # The build workflow's architecture input beside the entry (build_wheels_linux.yml's ARCH): the same rows.
    ({**AARCH64_CUDA_13_0, "architecture": "aarch64"}, "cuda_aarch64"),
    ({**LINUX_CPU, "architecture": "x86_64"}, "cpu_x86_64"),
], ids=["cpu", "cuda-12.6", "cuda-13.0", "cpu-aarch64", "cuda-aarch64-13.0", "macos-cpu", "windows-cpu",
        "cuda-aarch64-with-architecture", "cpu-with-architecture"])
def test_an_upstream_build_matrix_entry_maps_to_its_row(entry, row):
    assert row_for_build(entry) == row


@pytest.mark.parametrize("entry, message", [
    (LINUX_ROCM, "test-infra's build (build_name='manywheel-py3_12-rocm7_2', gpu_arch_type='rocm', desired_cuda='rocm7.2') "
                 "is a rocm build: the gate has rows for cpu and cuda builds only (cpu_aarch64, cpu_macos_arm64, "
                 "cpu_windows_x86_64, cpu_x86_64, cuda_aarch64, cuda_x86_64)"),
    (LINUX_XPU, "test-infra's build (build_name='manywheel-py3_12-xpu', gpu_arch_type='xpu', desired_cuda='xpu') is a xpu "
                "build: the gate has rows for cpu and cuda builds only"),
    (WINDOWS_CUDA_13_0, "test-infra's build (build_name='wheel-py3_12-cuda13_0', gpu_arch_type='cuda', desired_cuda='cu130') "
                        "is a CUDA build for Windows amd64: the gate has no row for it"),
    ({"desired_cuda": "rocm7.2", "architecture": "x86_64"},
     "test-infra's build (desired_cuda='rocm7.2', architecture='x86_64') is a rocm7.2 build: the gate has rows for cpu and "
     "cuda builds only"),
    (WINDOWS_ARM64_CPU, "test-infra's build (build_name='wheel-py3_12-cpu', gpu_arch_type='cpu', desired_cuda='cpu') is a "
                        "CPU build for Windows arm64: the gate has no row for it"),
    ({}, "test-infra's build (an empty entry) names no kind of build: give its gpu_arch_type (cpu, cpu-aarch64, cuda, "
         "cuda-aarch64) or desired_cuda (cpu, cu130, ...), or pass --row ROW"),
    ({**AARCH64_CPU, "architecture": "x86_64"},
     "says aarch64 in its gpu_arch_type and x86_64 in its architecture: which machine the wheel is for is unknown; pass --row ROW"),
], ids=["rocm", "xpu", "windows-cuda", "rocm-from-the-job", "windows-arm64", "empty", "two-machines"])
def test_a_build_the_gate_has_no_row_for_is_refused_saying_so(entry, message):
    with pytest.raises(WrongPlatform) as raised:
        row_for_build(entry)
    assert message in str(raised.value)


@pytest.mark.parametrize("environ, row", [
    ({"CU_VERSION": "cu130", "ARCH": "x86_64"}, "cuda_x86_64"),
    ({"CU_VERSION": "cu126", "ARCH": "aarch64"}, "cuda_aarch64"),
    ({"CU_VERSION": "cpu", "ARCH": "aarch64"}, "cpu_aarch64"),
    ({"CU_VERSION": "cpu"}, "cpu_x86_64"),  # build_wheels_linux.yml's architecture defaults to x86_64
])
def test_the_build_jobs_environment_is_its_entry(environ, row):
    job = build_job({"REPOSITORY": "pytorch/executorch", "PYTHON_VERSION": "3.12", **environ}, Path("/w"), None)
    assert row_for_build(job.entry, LINUX) == row
    assert job.dist == Path("/w/pytorch/executorch/dist")


def test_torchs_index_is_the_channels_for_the_cuda_train():
    job = build_job({"REPOSITORY": "pytorch/executorch", "CU_VERSION": "cu130", "CHANNEL": "nightly"}, Path("/w"), None)
    assert job.torch_index == "https://download.pytorch.org/whl/nightly/cu130"
    assert build_job({"REPOSITORY": "pytorch/executorch", "CU_VERSION": "cu130"}, Path("/w"), None).torch_index is None


# --- the command, as the build job's smoke-test-script runs it

JOB_VARIABLES = ("REPOSITORY", "CU_VERSION", "ARCH", "PYTHON_VERSION", "CHANNEL")


def smoke_test(workspace: Path, *args, **environ) -> subprocess.CompletedProcess:
    """``python -m smoke smoke-test ARGS`` in the job's workspace, with only the job variables given."""
    env = {k: v for k, v in os.environ.items() if k not in JOB_VARIABLES}
    env.update(environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "smoke", "smoke-test", *map(str, args)], capture_output=True, text=True,
                          cwd=workspace, env=env, timeout=120)


def refused(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "", proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR "), proc.stderr
    return lines[0]


JOB = {"REPOSITORY": "pytorch/executorch", "CU_VERSION": "cu130", "ARCH": "x86_64", "PYTHON_VERSION": "3.11", "CHANNEL": "nightly"}


def test_no_wheel_in_the_builds_dist_folder_is_one_error_line(tmp_path):
    dist = tmp_path / "pytorch" / "executorch" / "dist"
    dist.mkdir(parents=True)
    assert refused(smoke_test(tmp_path, **JOB)) == (
        f"ERROR no wheel to gate: {str(dist)!r} holds no .whl file (test-infra's build job leaves its wheel there before "
        "the smoke test: run smoke-test as its smoke-test-script), or pass --dist DIR")


def test_no_dist_folder_is_one_error_line(tmp_path):
    assert refused(smoke_test(tmp_path, "--dist", "built", **JOB)) == (
        f"ERROR no wheel to gate: {str(tmp_path / 'built')!r} is not a folder (test-infra's build job leaves its wheel in "
        "$REPOSITORY/dist: run smoke-test as its smoke-test-script, after the build), or pass --dist DIR")


def test_a_repository_name_too_long_for_a_path_is_one_error_line(tmp_path):
    """Issue 48: a 300-byte REPOSITORY made a path the kernel refuses (ENAMETOOLONG): a traceback, exit 1."""
    line = refused(smoke_test(tmp_path, **{**JOB, "REPOSITORY": "r" * 300}))
    assert line.startswith(f"ERROR no wheel to gate: the wheel folder '{tmp_path}/rrrr") and line.endswith(
        "cannot be read (File name too long): set REPOSITORY to the build's repository folder, or pass --dist DIR"), line


def test_two_wheels_are_refused_naming_both(tmp_path):
    dist = tmp_path / "dist"
    dist.mkdir()
    for name in ("executorch-1.6.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl",
                 "executorch-1.6.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl"):
        (dist / name).write_bytes(b"")
    assert refused(smoke_test(tmp_path, "--dist", dist, **JOB)) == (
        f"ERROR 2 wheels in {str(dist)!r} (executorch-1.6.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl, "
        "executorch-1.6.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl), where a build job leaves one: gate each with "
        "executorch-wheel-gate ROW WHEEL")


@pytest.mark.parametrize("environ, line", [
    ({}, "ERROR REPOSITORY is not set, so the build's dist/ folder is unknown: run smoke-test as test-infra's "
         "smoke-test-script (its build job sets REPOSITORY), or pass --dist DIR"),
    ({"REPOSITORY": "pytorch/executorch"},
     "ERROR CU_VERSION is not set, so the build's row is unknown: run smoke-test as test-infra's smoke-test-script (its "
     "build job sets CU_VERSION from the matrix's desired_cuda), or pass --row ROW"),
    ({**JOB, "CU_VERSION": "rocm7.2"},
     "ERROR test-infra's build (desired_cuda='rocm7.2', architecture='x86_64') is a rocm7.2 build: the "
     "gate has rows for cpu and cuda builds only (cpu_aarch64, cpu_macos_arm64, cpu_windows_x86_64, cpu_x86_64, "
     "cuda_aarch64, cuda_x86_64)"),
], ids=["outside-a-build-job", "no-cu-version", "rocm"])
def test_outside_a_build_job_or_for_a_build_without_a_row_it_is_one_error_line(tmp_path, environ, line):
    assert refused(smoke_test(tmp_path, **environ)) == line


def test_an_unknown_row_is_a_usage_error(tmp_path):
    assert refused(smoke_test(tmp_path, "--row", "cuda_riscv64", **JOB)).startswith(
        "ERROR argument --row: invalid choice: 'cuda_riscv64' (choose from ")


def test_it_hands_the_row_the_builds_wheel_and_torchs_index_and_its_exit_code_is_the_rows(wheel_x86_64, tmp_path):
    """A CPU aarch64 build's job given an x86_64 wheel: the cpu_aarch64 row runs and refuses it (its own ERROR line, its
    exit 2), the other options passed through to it (--env-dir: nothing built there)."""
    dist = tmp_path / "pytorch" / "executorch" / "dist"
    dist.mkdir(parents=True)
    shutil.copy(wheel_x86_64, dist / wheel_x86_64.name)
    proc = smoke_test(tmp_path, "--env-dir", tmp_path / "env", **{**JOB, "CU_VERSION": "cpu", "ARCH": "aarch64", "CHANNEL": "test"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == (
        "smoke-test: REPOSITORY=pytorch/executorch CU_VERSION=cpu ARCH=aarch64 PYTHON_VERSION=3.11 CHANNEL=test: row "
        f"cpu_aarch64, wheel {wheel_x86_64.name}, torch's index https://download.pytorch.org/whl/test/cpu (CHANNEL and CU_VERSION)")
    assert proc.stderr.splitlines()[-1] == (f"ERROR wheel {wheel_x86_64.name!r} is built for x86_64; the cpu_aarch64 row "
                                            "needs aarch64 (use nox -s cpu_x86_64)")
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "env").exists()


def test_its_help_says_where_each_thing_comes_from(tmp_path):
    proc = subprocess.run([sys.executable, "-c", "from smoke.cli import script; raise SystemExit(script())", "smoke-test", "--help"],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert said.startswith("usage: executorch-wheel-gate smoke-test [-h] [--dist DIR]")
    assert ("the row from the job's CU_VERSION and ARCH, the wheel from $REPOSITORY/dist, torch's package index from CHANNEL "
            "and CU_VERSION") in said
