"""smoke.checks.shipped: library RUNPATH, wheel RECORD and the libraries read from the wheel, on PyPI's
real wheels and on copies changed in one thing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from smoke.checks import shipped
from smoke.readers.wheel import read_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import (
    DEVICE_CODE,
    LFS_POINTER,
    REPO,
    SHIMS,
    SLIM_DIST_INFO,
    THREADPOOL,
    check,
    cuda_parts,
    declare_torch,
    dist_info_text,
    judge,
    line,
    make_cuda_wheel,
    patched_member,
    rewrite_wheel,
    smoke,
    with_dist_info,
)

CPU_ROW = ROWS["cpu_x86_64"]


# --- library RUNPATH ------------------------------------------------------------------------

def test_runpath_reads_the_real_torch_lib_entries_of_pypi(pypi):
    result = check(shipped.check_library_runpath, pypi, CPU_ROW)
    assert result.status is Status.PASS, result.reason
    entries = result.measured["entries"]
    assert "$ORIGIN/../../../torch/lib" in entries["executorch/extension/pybindings/_C.cpython-311-x86_64-linux-gnu.so"]
    assert result.measured["libraries"] == 19  # 18 libraries and the flatc executable


def test_runpath_fails_on_pypi_1_2_0_whose_libraries_search_its_build_machine(wheel_1_2_0):
    # A real defect in a published wheel: 1.2.0's pybindings search the CI runner's cmake-out
    # and conda torch, by absolute path (1.5.1 no longer does).
    wheel = read_wheel(wheel_1_2_0)
    result = check(shipped.check_library_runpath, wheel, CPU_ROW)
    assert result.status is Status.FAIL
    assert "executorch/extension/llm/custom_ops/libcustom_ops_aot_lib.so RUNPATH has 6 entries outside the install: " \
           "'/__w/executorch/executorch/pytorch/executorch/pip-out/temp.linux-x86_64-cpython-312/cmake-out' (a build-tree folder)" \
        in result.reason
    # five libraries search outside; four of them also have an empty entry (the working directory)
    assert len(result.measured["problems"]) == 9
    assert ("executorch/extension/pybindings/_portable_lib.cpython-312-x86_64-linux-gnu.so RUNPATH has 1 empty entry "
            "(as in '$ORIGIN/../lib:'), which the loader reads as the current directory") in result.measured["problems"]


def test_runpath_on_a_cuda_row_fails_on_a_wheel_linking_no_cuda(pypi):
    result = check(shipped.check_library_runpath, pypi)
    assert result.status is Status.FAIL and "no shipped library links a CUDA library" in result.reason


@pytest.mark.slow
@pytest.mark.parametrize(
    ("library", "where", "reason"),
    [
        ("libabsolute_rpath.so", SHIMS, "RUNPATH has 1 entries outside the install: '/usr/local/cuda-13.0/lib64' (an absolute path)"),
        # The right library one folder too shallow: its entry stays in the environment but misses nvidia/.
        ("libcovers_cu130.so", "executorch/lib/libaoti_cuda_shims.so",
         "links libcudart.so.13 but no RUNPATH entry leads to it in the wheel or into a CUDA package it declares "
         "(entries: $ORIGIN/../../../nvidia/cu13/lib)"),
    ],
)
def test_runpath_defects_fail_naming_library_and_entry(slim_x86_64, tmp_path, library, where, reason):
    parts = cuda_parts(slim_x86_64)
    del parts[SHIMS]
    parts[where] = (DEVICE_CODE / library).read_bytes()
    wheel = make_cuda_wheel(slim_x86_64, tmp_path, parts=parts)
    result = check(shipped.check_library_runpath, wheel)
    assert result.status is Status.FAIL and where in result.reason and reason in result.reason, result.reason


@pytest.mark.slow
def test_runpath_into_an_undeclared_cuda_package_fails(slim_x86_64, tmp_path):
    wheel = make_cuda_wheel(slim_x86_64, tmp_path, requirement=None)
    result = check(shipped.check_library_runpath, wheel)
    assert result.status is Status.FAIL
    assert f"{SHIMS} links libcudart.so.13 but no RUNPATH entry leads to it" in result.reason


# --- wheel RECORD ---------------------------------------------------------------------------

def test_record_passes_on_pypi(pypi):
    result = check(shipped.check_record, pypi, CPU_ROW)
    assert result.status is Status.PASS and result.measured["files"] == len([f for f in pypi.files if not f.endswith("/")])


@pytest.mark.slow
def test_a_changed_file_fails_record(slim_x86_64, tmp_path):
    changed = rewrite_wheel(slim_x86_64, tmp_path, add={"executorch/lib/libexecutorch.so": b"\x7fELF not the real one"},
                            update_record=False)
    result = check(shipped.check_record, read_wheel(changed), CPU_ROW)
    assert result.status is Status.FAIL and "executorch/lib/libexecutorch.so does not match its RECORD hash" in result.reason


@pytest.mark.slow
def test_an_unlisted_file_fails_record(slim_x86_64, tmp_path):
    extra = rewrite_wheel(slim_x86_64, tmp_path, add={"executorch/extra.py": b"print('hi')\n"}, update_record=False)
    result = check(shipped.check_record, read_wheel(extra), CPU_ROW)
    assert result.status is Status.FAIL and "executorch/extra.py is not in RECORD" in result.reason


def test_without_pyelftools_the_gate_says_how_to_install_it(pypi, monkeypatch):
    from smoke.errors import MissingTool

    for name in ("elftools", "elftools.elf", "elftools.elf.elffile", "elftools.common", "elftools.common.exceptions"):
        monkeypatch.setitem(sys.modules, name, None)
    fix = re.escape(sys.executable) + r" -m pip install -r requirements-gate.txt"
    with pytest.raises(MissingTool, match=r"pyelftools or auditwheel is not installed .*: " + fix):
        shipped.read_libraries(pypi)


# --- RUNPATH entries of public releases, read from their wheels --------------------------------

CUSTOM_OPS = "executorch/extension/llm/custom_ops/libcustom_ops_aot_lib.so"


def test_an_entry_into_the_environments_own_lib_passes(pypi_1_4_1):
    """PyPI's 1.4.1: custom_ops' $ORIGIN/../../../../../.. is PREFIX/lib once installed."""
    result = check(shipped.check_library_runpath, pypi_1_4_1, CPU_ROW)
    climbing = [e for e in result.measured["entries"][CUSTOM_OPS] if e.endswith("/../../../../../..")]
    assert climbing, result.measured["entries"][CUSTOM_OPS]
    assert result.status is Status.PASS, result.reason


@pytest.mark.slow
def test_the_same_entry_two_folders_higher_leaves_the_environment(pypi_1_4_1, tmp_path):
    with zipfile.ZipFile(pypi_1_4_1.path) as archive:
        library = archive.read(CUSTOM_OPS)
    moved = "executorch/extension/libcustom_ops_aot_lib.so"  # one higher is PREFIX itself, still inside
    def keep(name: str) -> bool:
        return ".dist-info/" in name or (".so" in name.rsplit("/", 1)[-1] and name != CUSTOM_OPS)

    wheel = read_wheel(rewrite_wheel(pypi_1_4_1.path, tmp_path, keep=keep, add={moved: library}))
    result = check(shipped.check_library_runpath, wheel, CPU_ROW)
    assert result.status is Status.FAIL
    assert f"{moved} RUNPATH has 1 entries outside the install: '$ORIGIN/../../../../../..' (outside the environment)" in result.reason


PUBLIC_RELEASES = ["1.0.0", "1.0.1", "1.1.0", "1.2.0", "1.3.1", "1.4.0", "1.4.1", "1.5.0", "1.5.1"]


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("release", PUBLIC_RELEASES)
def test_every_public_release_runpath_fails_only_for_the_build_machine(release):
    """Each release's real entries: what fails names the build machine (absolute, build tree); no
    entry fails for leaving the environment; from 1.4.1 on, nothing fails (docs/releases.md)."""
    from tests.helpers import pypi_wheel

    wheel = read_wheel(pypi_wheel("x86_64", release))
    result = check(shipped.check_library_runpath, wheel, CPU_ROW)
    problems = result.measured.get("problems", [])
    # (1.1.0 to 1.3.1 also end an entry list with ':', an empty entry: the working directory)
    assert all("(an absolute path)" in p or "(a build-tree folder)" in p or "empty entr" in p for p in problems), problems
    assert not any("outside the environment" in p for p in problems)
    assert (result.status is Status.PASS) == (Version(release) >= Version("1.4.1")), result.reason


# --- library RUNPATH, on a real library changed by patchelf ---------------------------------------



def patched(declared_slim, tmp_path, patchelf, *args) -> Path:
    return patched_member(declared_slim, THREADPOOL, tmp_path, patchelf, *args)


@pytest.mark.slow
def test_an_empty_runpath_entry_fails_library_runpath(declared_slim, tmp_path, patchelf):
    wheel = patched(declared_slim, tmp_path, patchelf, "--set-rpath", "$ORIGIN:")
    result = judge(shipped.LIBRARY_RUNPATH, wheel)
    assert result.status is Status.FAIL
    assert (f"{THREADPOOL} RUNPATH has 1 empty entry (as in '$ORIGIN/../lib:'), which the loader reads as the current "
            "directory") in result.reason


@pytest.mark.slow
def test_origin_followed_by_a_name_character_is_not_origin(declared_slim, tmp_path, patchelf):
    wheel = patched(declared_slim, tmp_path, patchelf, "--set-rpath", "$ORIGINX/../lib")
    result = judge(shipped.LIBRARY_RUNPATH, wheel)
    assert result.status is Status.FAIL
    assert "'$ORIGINX/../lib' (relative to the working directory, not to $ORIGIN)" in result.reason


# --- the libraries read from the wheel, and a RECORD through the row ------------------------------

@pytest.mark.slow
def test_a_file_whose_name_only_contains_so_is_not_taken_for_a_library(declared_slim, tmp_path):
    # "notes.sorted.txt" has ".so" in its name; it is no library, and was failed as "not an ELF file".
    wheel = rewrite_wheel(declared_slim, tmp_path, add={"executorch/notes.sorted.txt": b"a text file\n",
                                                        "executorch/lib/libx.so.1": LFS_POINTER})
    libraries = shipped.read_libraries(read_wheel(wheel))
    assert libraries.not_elf == ("executorch/lib/libx.so.1",)


def gate(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "smoke", *map(str, args)], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, timeout=timeout)


@pytest.mark.slow
def test_a_record_size_that_is_not_a_number_fails_the_record_check(slim_x86_64, tmp_path):
    with zipfile.ZipFile(slim_x86_64) as archive:
        record_name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        record = archive.read(record_name).decode()
    first = record.splitlines()[0]
    broken = record.replace(first, first.rsplit(",", 1)[0] + ",twelve", 1)
    declared = declare_torch(slim_x86_64, tmp_path / "declared")  # so that only RECORD is wrong
    fixed = rewrite_wheel(declared, tmp_path / "out", update_record=False, add={record_name: broken.encode()})
    proc = gate("cpu_x86_64", fixed, "--fail-fast", "--env-dir", tmp_path / "env")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the wheel is defective: a FAIL, not a crash
    assert f"FAIL wheel RECORD: {first.split(',')[0]} has size 'twelve' in RECORD, which is not a number of bytes" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr and not (tmp_path / "env").exists()


@pytest.mark.slow
def test_a_record_that_does_not_list_itself_fails(declared_slim, tmp_path):
    """torchvision 0.14.0 (pytorch/vision#6869): every file matched its RECORD line but RECORD had none of its own, and
    `installer` refused the wheel ("... RECORD is not mentioned in RECORD")."""
    record = dist_info_text(declared_slim, "RECORD")
    own = f"{SLIM_DIST_INFO}/RECORD,,"
    assert own in record.splitlines()
    wheel = with_dist_info(declared_slim, tmp_path, "RECORD", "".join(
        line + "\n" for line in record.splitlines() if line != own))
    proc = smoke("inspect", wheel)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (f"FAIL wheel RECORD: RECORD does not list itself ({SLIM_DIST_INFO}/RECORD), as the wheel spec asks (its own "
            "line, with an empty hash and size): installer refuses such a wheel (pytorch/vision#6869)") in proc.stdout
    assert line(proc, "PASS libraries resolve")  # the one defect is RECORD's
