"""``executorch-wheel-gate smoke-test``: the row run inside a pytorch/test-infra build job, so that a FAIL blocks the
upload.

test-infra's wheel workflows run the caller's ``smoke-test-script`` after the wheel is built and before it is
uploaded; a job after the build could not stop an upload. From that step's environment (``CU_VERSION``, ``ARCH``,
``PYTHON_VERSION``, ``REPOSITORY`` whose ``dist/`` holds the wheel, and ``CHANNEL``) this command picks the row
(``row_for_build``), the wheel and torch's package index, then runs the row as ``executorch-wheel-gate ROW WHEEL``
does; its exit code is the row's.

Read from pytorch/test-infra at commit 61a77570f45416dc425c17d4a648376541a84732: ``build_wheels_linux.yml``
(the macOS and Windows ones alike, ARCH aside), the ``set-channel`` action and ``generate_binary_build_matrix.py``.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from smoke import markup
from smoke.errors import GateError, WrongPlatform
from smoke.readers.systems import LINUX, MACOS, SYSTEMS, WINDOWS
from smoke.readers.wheel import normal_machine
from smoke.rows import ROWS


class NotABuildJob(GateError):
    """What the build job should have left is not there (no wheel, no CU_VERSION): the message names what to pass."""


# generate_binary_build_matrix.py: arch_type() (lines 147-159) gives an entry's gpu_arch_type, one of these for the
# builds the gate has rows for (cpu, cpu-aarch64, cuda, cuda-aarch64); rocm and xpu builds have none.
_ARCH_TYPES: dict[str, tuple[str, str | None]] = {  # gpu_arch_type -> (the row's backend, the machine it says)
    "cpu": ("xnnpack", None),
    "cpu-aarch64": ("xnnpack", "aarch64"),
    "cuda": ("cuda", None),
    "cuda-aarch64": ("cuda", "aarch64"),
}
# validation_runner() (lines 162-183): the runner names the system (a Linux one does not start so), and an arm64
# machine where the type does not (windows-11-arm64-preview: WIN_ARM64_RUNNER, line 130).
_RUNNER_SYSTEMS = (MACOS, WINDOWS)  # each runner's name starts with its system's (macos-14, windows-2022)
# Each system's machine where the entry says none (a Linux build's architecture input defaults to x86_64,
# build_wheels_linux.yml lines 62-66; macOS builds are arm64, Windows ones amd64 unless windows-arm64).
_DEFAULT_MACHINE = {LINUX: "x86_64", MACOS: "arm64", WINDOWS: "amd64"}


def _build_words(entry: Mapping[str, str]) -> str:
    said = [f"{key}={entry[key]!r}" for key in ("build_name", "gpu_arch_type", "desired_cuda", "architecture") if entry.get(key)]
    return f"test-infra's build ({', '.join(said) or 'an empty entry'})"


def row_for_build(entry: Mapping[str, str], system: str | None = None) -> str:
    """The gate's row for one entry of test-infra's build matrix (``generate_binary_build_matrix.py``), or for the
    build job's environment made into one (``build_job``).

    Kind of build: ``gpu_arch_type``, else ``desired_cuda``. Machine: that type's ``-aarch64``, else ``architecture``,
    else an arm64 runner's, else the system's usual one. System: ``system``, else ``validation_runner``'s. A build with
    no row (rocm, xpu, CUDA for Windows) is refused, saying so."""
    arch_type = entry.get("gpu_arch_type") or ""
    desired = entry.get("desired_cuda") or ""
    if arch_type:
        if arch_type not in _ARCH_TYPES:
            raise WrongPlatform(f"{_build_words(entry)} is a {arch_type} build: the gate has rows for cpu and cuda builds "
                                f"only ({', '.join(sorted(ROWS))})")
        backend, said_machine = _ARCH_TYPES[arch_type]
    elif desired == "cpu" or re.fullmatch(r"cu\d{3,}", desired):
        backend, said_machine = ("xnnpack" if desired == "cpu" else "cuda"), None
    elif desired:  # translate_desired_cuda(): rocm7.2, xpu
        raise WrongPlatform(f"{_build_words(entry)} is a {desired} build: the gate has rows for cpu and cuda builds "
                            f"only ({', '.join(sorted(ROWS))})")
    else:
        raise WrongPlatform(f"{_build_words(entry)} names no kind of build: give its gpu_arch_type (cpu, cpu-aarch64, cuda, "
                            "cuda-aarch64) or desired_cuda (cpu, cu130, ...), or pass --row ROW")
    runner = (entry.get("validation_runner") or "").lower()
    system = system or next((name for name in _RUNNER_SYSTEMS if runner.startswith(name)), LINUX)
    architecture = entry.get("architecture") or ""
    if said_machine and architecture and normal_machine(architecture) != normal_machine(said_machine):
        raise WrongPlatform(f"{_build_words(entry)} says {said_machine} in its gpu_arch_type and {architecture} in its "
                            "architecture: which machine the wheel is for is unknown; pass --row ROW")
    machine = said_machine or architecture or ("arm64" if "arm64" in runner else _DEFAULT_MACHINE[system])
    for row in ROWS.values():
        if row.system == system and row.backend.name == backend and normal_machine(row.machine) == normal_machine(machine):
            return row.name
    kind = "CUDA" if backend == "cuda" else "CPU"
    raise WrongPlatform(f"{_build_words(entry)} is a {kind} build for {SYSTEMS[system].machine_words(machine)}: the gate "
                        f"has no row for it ({', '.join(sorted(ROWS))})")


@dataclass(frozen=True)
class BuildJob:
    """What the build job's environment says: where its wheel is, its matrix entry as far as the job carries it, and
    torch's package index for it."""

    dist: Path
    entry: dict[str, str]
    torch_index: str | None  # None: CHANNEL or CU_VERSION not set
    said: str  # the variables read, as the first line shows them


# build_wheels_linux.yml lines 153-161: the build job's env, from the matrix entry and the workflow's inputs.
_JOB_VARIABLES = {"CU_VERSION": "desired_cuda", "ARCH": "architecture", "PYTHON_VERSION": "python_version"}


def build_job(environ: Mapping[str, str], workspace: Path, dist: Path | None) -> BuildJob:
    """The build job's wheel folder (``dist``, else ``$REPOSITORY/dist`` in the workspace, as the Smoke Test step
    lists it: build_wheels_linux.yml line 317) and its entry; torch's index from CHANNEL and CU_VERSION, as that
    step installs from for Python 3.15 (line 325) and pkg-helpers' PIP_INSTALL_TORCH does for every build
    (tools/pkg-helpers/pytorch_pkg_helpers/wheel.py line 29)."""
    if dist is None:
        repository = environ.get("REPOSITORY", "")
        if not repository:
            raise NotABuildJob("REPOSITORY is not set, so the build's dist/ folder is unknown: run smoke-test as test-infra's "
                               "smoke-test-script (its build job sets REPOSITORY), or pass --dist DIR")
        dist = workspace / repository / "dist"
    entry = {key: environ[name] for name, key in _JOB_VARIABLES.items() if environ.get(name)}
    channel, train = environ.get("CHANNEL", ""), environ.get("CU_VERSION", "")
    index = f"https://download.pytorch.org/whl/{channel}/{train}" if channel and train else None
    said = " ".join(f"{name}={environ[name]}" for name in ("REPOSITORY", *_JOB_VARIABLES, "CHANNEL") if environ.get(name))
    return BuildJob(dist, entry, index, said or "no build job variables")


def the_wheel(dist: Path) -> Path:
    """The one wheel the build left in ``dist`` (test-infra's Smoke Test step installs ``$(ls dist/)``: one file)."""
    try:
        os.stat(dist)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):  # too long a name (REPOSITORY of 300 bytes), unreadable
            raise NotABuildJob(f"no wheel to gate: the wheel folder {markup.plain(str(dist))[:200]!r} cannot be read "
                               f"({exc.strerror or exc}): set REPOSITORY to the build's repository folder, or pass --dist DIR") from None
    if not dist.is_dir():
        raise NotABuildJob(f"no wheel to gate: {str(dist)!r} is not a folder (test-infra's build job leaves its wheel in "
                           "$REPOSITORY/dist: run smoke-test as its smoke-test-script, after the build), or pass --dist DIR")
    wheels = sorted(p for p in dist.iterdir() if p.name.endswith(".whl") and p.is_file())
    if not wheels:
        raise NotABuildJob(f"no wheel to gate: {str(dist)!r} holds no .whl file (test-infra's build job leaves its wheel "
                           "there before the smoke test: run smoke-test as its smoke-test-script), or pass --dist DIR")
    if len(wheels) > 1:
        raise NotABuildJob(f"{len(wheels)} wheels in {str(dist)!r} ({', '.join(p.name for p in wheels)}), where a build job "
                           "leaves one: gate each with executorch-wheel-gate ROW WHEEL")
    return wheels[0]


def row_run(job: BuildJob, row: str | None, system: str | None, rest: list[str]) -> tuple[str, list[str], str]:
    """The row, the row's command line (the wheel, torch's index unless ``rest`` gives one, then ``rest``), and the
    line that says where each came from."""
    if row is None:
        if "desired_cuda" not in job.entry:
            raise NotABuildJob("CU_VERSION is not set, so the build's row is unknown: run smoke-test as test-infra's "
                               "smoke-test-script (its build job sets CU_VERSION from the matrix's desired_cuda), or pass --row ROW")
        row = row_for_build(job.entry, system)
    wheel = the_wheel(job.dist)
    given_index = any(word == "--torch-index" or word.startswith("--torch-index=") for word in rest)
    index = [] if given_index or job.torch_index is None else ["--torch-index", job.torch_index]
    where = ("torch's index as given" if given_index else
             f"torch's index {job.torch_index} (CHANNEL and CU_VERSION)" if job.torch_index else
             "torch's index as pip is configured (no CHANNEL and CU_VERSION)")
    return row, [str(wheel), *index, *rest], f"smoke-test: {job.said}: row {row}, wheel {wheel.name}, {where}"
