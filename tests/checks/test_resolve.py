"""smoke.checks.resolve: libraries resolve, dependency libraries installed.

Each check passes on a real wheel (PyPI's 1.5.1 with the torch requirement it lacks) and fails on a
mutant of it with one defect: a library taken out, a need no policy allows, a dependency's library
missing as installed.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from smoke.checks import resolve, shipped
from smoke.readers.wheel import read_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import THREADPOOL, judge, patched_member, rewrite_wheel

CPU_ROW = ROWS["cpu_x86_64"]


# --- libraries resolve ------------------------------------------------------------------------

def test_every_need_of_the_real_wheel_is_found(declared_slim):
    result = judge(resolve.LIBRARIES_RESOLVE, declared_slim)
    assert result.status is Status.PASS, result.reason
    found = result.measured["found"]
    assert found["executorch/lib/libexecutorch_backend_xnnpack.so: libexecutorch_threadpool.so"] == f"in the wheel: {THREADPOOL}"
    assert found["executorch/lib/libexecutorch.so: libstdc++.so.6"] == "a system library the policy allows"
    assert found["executorch/extension/pybindings/_C.cpython-311-x86_64-linux-gnu.so: libtorch.so"].startswith(
        "torch (declared), in torch/lib")


def test_pypi_1_5_1_needs_libtorch_and_declares_no_torch(slim_x86_64):
    result = judge(resolve.LIBRARIES_RESOLVE, slim_x86_64)
    assert result.status is Status.FAIL
    assert ("executorch/extension/pybindings/_C.cpython-311-x86_64-linux-gnu.so needs libtorch_python.so, libtorch.so, "
            "libtorch_cpu.so, libc10.so: its RUNPATH leads into torch/, the folder of a package the wheel does not declare "
            "(Requires-Dist), so pip installs none: declare torch") in result.measured["problems"]


def test_a_library_taken_out_fails_naming_it_and_who_needs_it(declared_slim, tmp_path):
    result = judge(resolve.LIBRARIES_RESOLVE, rewrite_wheel(declared_slim, tmp_path, drop=(THREADPOOL,)))
    assert result.status is Status.FAIL
    assert re.search(r"executorch/lib/libexecutorch_backend_xnnpack\.so needs libexecutorch_threadpool\.so: not in the wheel "
                     r"where its RUNPATH \$ORIGIN:\S+ leads, not in a declared dependency, and not a system library", result.reason)




def patched(declared_slim, tmp_path, patchelf, *args) -> Path:
    return patched_member(declared_slim, THREADPOOL, tmp_path, patchelf, *args)


def test_a_need_no_policy_allows_fails(declared_slim, tmp_path, patchelf):
    wheel = patched(declared_slim, tmp_path, patchelf, "--add-needed", "libssl.so.3")
    result = judge(resolve.LIBRARIES_RESOLVE, wheel)
    assert result.status is Status.FAIL
    assert result.reason.startswith(f"{THREADPOOL} needs libssl.so.3: not in the wheel where its RUNPATH")
    assert "not a system library the tag's policy allows" in result.reason


# --- dependency libraries installed -----------------------------------------------------------

def test_the_dependencys_libraries_are_found_as_installed_and_missing_ones_fail(declared_slim, tmp_path):
    import sysconfig

    wheel = read_wheel(declared_slim)
    libraries = shipped.read_libraries(wheel)
    site = sysconfig.get_paths()["purelib"]  # the test environment: torch 2.14.1 is installed there
    result = resolve.check_dependency_libraries(wheel, CPU_ROW, {"purelib": site, "platlib": site}, libraries)
    assert result.status is Status.PASS, result.reason
    assert re.fullmatch(r"\d+ libraries found in the installed torch", result.reason)
    # A torch whose lib folder lacks libtorch_python.so (an incomplete install): named, with who needs it.
    fake = tmp_path / "site"
    (fake / "torch" / "lib").mkdir(parents=True)
    for name in ("libtorch.so", "libtorch_cpu.so", "libc10.so"):
        (fake / "torch" / "lib" / name).write_bytes(b"")
    result = resolve.check_dependency_libraries(wheel, CPU_ROW, {"purelib": str(fake), "platlib": str(fake)}, libraries)
    assert result.status is Status.FAIL
    assert ("executorch/extension/pybindings/_C.cpython-311-x86_64-linux-gnu.so needs libtorch_python.so, not in torch/lib "
            "of the installed torch") in result.reason


def test_a_need_met_only_in_an_undeclared_packages_folder_names_that_package(slim_x86_64, tmp_path):
    """Main's CUDA build (H200, 2026-12-05): _C's RUNPATH leads into torch/lib and nvidia/cu13/lib, and the wheel
    declares nvidia-cuda-runtime but no torch. libtorch.so is torch's, not the CUDA runtime's: the FAIL names
    torch, the package the wheel does not declare, not the runtime it does."""
    from smoke.readers import elf
    from tests.helpers import RUNTIME, with_runpath_entry

    c = "executorch/extension/pybindings/_C.cpython-311-x86_64-linux-gnu.so"
    with zipfile.ZipFile(slim_x86_64) as archive:
        data = archive.read(c)
    assert "$ORIGIN/../../../torch/lib" in elf.read_library(c, data).search_path  # PyPI's 1.5.1: torch's folder, undeclared
    data = with_runpath_entry(data, "$ORIGIN/../../../nvidia/cu13/lib")

    def edit(text: str) -> str:
        return text.replace("Requires-Dist: expecttest", f"Requires-Dist: {RUNTIME}\nRequires-Dist: expecttest", 1)

    wheel = read_wheel(rewrite_wheel(slim_x86_64, tmp_path / "wheel", metadata=edit, add={c: data}))
    libraries = shipped.read_libraries(wheel)
    found = resolve.check_libraries_resolve(wheel, CPU_ROW, libraries).measured["found"]
    assert found[f"{c}: libtorch.so"] == ("nvidia-cuda-runtime (declared), in nvidia/cu13/lib or torch/lib (not declared): "
                                          "checked once installed")
    site = tmp_path / "site"
    (site / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    facts = {"purelib": str(site), "platlib": str(site)}
    result = resolve.check_dependency_libraries(wheel, CPU_ROW, facts, libraries)
    assert result.status is Status.FAIL
    assert f"{c} needs libtorch.so, not in nvidia/cu13/lib, torch/lib of the installed nvidia-cuda-runtime" in result.reason
    (site / "torch" / "lib").mkdir(parents=True)
    for name in ("libtorch.so", "libtorch_cpu.so", "libtorch_python.so", "libc10.so"):
        (site / "torch" / "lib" / name).write_bytes(b"")
    result = resolve.check_dependency_libraries(wheel, CPU_ROW, facts, libraries)
    assert result.status is Status.FAIL
    assert (f"{c} needs libtorch_python.so, found only in torch/ ({site / 'torch' / 'lib'}), a package the wheel does not "
            "declare (Requires-Dist): declare torch") in result.reason
    assert "nvidia-cuda-runtime" not in result.reason


# --- a hostile user's mutants (each passed, crashed or hung before) ------------------------------------

C_MODULE = "executorch/extension/pybindings/_C.cpython-311-x86_64-linux-gnu.so"


def test_an_extension_module_must_reach_its_needs_itself_whoever_else_needs_it(declared_slim, tmp_path, patchelf):
    # libcustom_ops_aot_lib.so lists _C among its needs and reaches libexecutorch.so itself; Python still imports _C by path.
    wheel = patched_member(declared_slim, C_MODULE, tmp_path, patchelf, "--remove-rpath")
    result = judge(resolve.LIBRARIES_RESOLVE, wheel)
    assert result.status is Status.FAIL
    assert f"{C_MODULE} needs libexecutorch.so" in result.reason


def test_a_needed_name_with_a_slash_is_opened_from_the_working_directory(declared_slim, tmp_path, patchelf):
    wheel = patched(declared_slim, tmp_path, patchelf, "--add-needed", "../lib/libexecutorch.so")
    result = judge(resolve.LIBRARIES_RESOLVE, wheel)
    assert result.status is Status.FAIL
    assert (f"{THREADPOOL} needs ../lib/libexecutorch.so: a name with a '/' is opened relative to the working directory, "
            "with no search") in result.reason
