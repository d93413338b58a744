"""macOS and Windows wheels judged on any host (issue 27), and files of another platform on every row.

Real wheels: PyPI's executorch 1.5.1 and 1.4.0 for macosx_14_0_arm64, 1.5.1 and 1.0.0 for win_amd64;
mutants of them (an absolute LC_RPATH added, the minimum macOS raised past the tag, a DLL the
extension module imports removed), RECORD rewritten (rewrite_wheel), through ``python -m smoke``.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import pefile
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smoke.checks.foreign import check_foreign_files
from smoke.readers import macho, pe
from smoke.rows import ROWS
from tests.helpers import REPO, SHIMS, WHEEL_CACHE, cuda_parts, declare_torch, make_cuda_wheel, pypi_wheel, rewrite_wheel

RELEASES = REPO / ".gate" / "release-table" / "wheels"


def platform_wheel(platform: str, release: str) -> Path:
    """PyPI's cp311 executorch wheel of this platform tag, downloaded once (the file only)."""
    for folder in (WHEEL_CACHE, RELEASES):
        found = sorted(folder.glob(f"executorch-{release}-cp311-cp311-{platform}.whl"))
        if found:
            return found[-1]
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
                    "3.11", "--implementation", "cp", "--platform", platform, "-d", str(WHEEL_CACHE),
                    f"executorch=={release}"], check=True)
    return sorted(WHEEL_CACHE.glob(f"executorch-{release}-cp311-cp311-{platform}.whl"))[-1]


pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def macos_1_5_1() -> Path:
    return platform_wheel("macosx_14_0_arm64", "1.5.1")


@pytest.fixture(scope="module")
def macos_declared(macos_1_5_1, tmp_path_factory) -> Path:
    """1.5.1 for macOS with the torch requirement it lacks (as on Linux): a wheel whose files pass."""
    return declare_torch(macos_1_5_1, tmp_path_factory.mktemp("declared"))


@pytest.fixture(scope="module")
def windows_1_0_0() -> Path:
    return platform_wheel("win_amd64", "1.0.0")


def smoke(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "smoke", *map(str, args)], capture_output=True, text=True, cwd=REPO, timeout=600)


def lines(proc, prefix: str) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith(prefix)]


def line(proc, prefix: str) -> str:
    found = lines(proc, prefix)
    assert len(found) == 1, proc.stdout + proc.stderr
    return found[0]


# The checks of this issue; other checks (other issues') judge the same wheels and are not asserted here.
OURS = ("wheel tags", "foreign files", "platform tag", "architecture", "library RUNPATH", "libraries resolve", "wheel RECORD")


def failed_ours(proc) -> list[str]:
    return [f.split(":")[0][len("FAIL "):] for f in lines(proc, "FAIL ") if f.split(":")[0][len("FAIL "):] in OURS]


def member(wheel: Path, name: str) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(name)


# --- mutating a Mach-O file: its load commands, as a linker (install_name_tool) would write them

C_EXT = "executorch/extension/pybindings/_C.cpython-311-darwin.so"


def _commands(data: bytes):
    ncmds, sizeofcmds = struct.unpack("<II", data[16:24])
    position = 32
    for _ in range(ncmds):
        command, size = struct.unpack("<II", data[position:position + 8])
        yield position, command, size
        position += size


def add_rpath(data: bytes, entry: str) -> bytes:
    """Append an LC_RPATH in the header's padding (install_name_tool -add_rpath)."""
    ncmds, sizeofcmds = struct.unpack("<II", data[16:24])
    text = entry.encode() + b"\0"
    size = (12 + len(text) + 7) // 8 * 8
    end = 32 + sizeofcmds
    assert data[end:end + size] == b"\0" * size, "no padding left after the load commands"
    command = struct.pack("<III", 0x8000001C, size, 12) + text.ljust(size - 12, b"\0")
    return data[:16] + struct.pack("<II", ncmds + 1, sizeofcmds + size) + data[24:end] + command + data[end + size:]


def set_minimum_macos(data: bytes, major: int, minor: int) -> bytes:
    """LC_BUILD_VERSION's minos (vtool -set-build-version macos MAJOR.MINOR)."""
    for position, command, _size in _commands(data):
        if command == 0x32:
            return data[:position + 12] + struct.pack("<I", major << 16 | minor << 8) + data[position + 16:]
    raise AssertionError("no LC_BUILD_VERSION")


def test_the_mach_o_mutations_read_back():
    data = member(platform_wheel("macosx_14_0_arm64", "1.5.1"), C_EXT)
    changed = macho.read_macho(C_EXT, set_minimum_macos(add_rpath(data, "/opt/conda/lib"), 15, 0)).slices[0]
    assert changed.rpaths[-1] == "/opt/conda/lib" and str(changed.minimum_macos) == "15.0"


# --- macOS


def test_macos_1_5_1_with_torch_declared_passes_every_file_check(macos_declared):
    proc = smoke("inspect", macos_declared)
    assert proc.returncode in (0, 1) and not failed_ours(proc), proc.stdout + proc.stderr
    assert "rows: cpu_macos_arm64" in proc.stdout
    assert line(proc, "PASS platform tag: ") == ("PASS platform tag: 19 Mach-O files within macosx_14_0_arm64 "
                                                  "(newest minimum macOS: 14.0)")
    assert line(proc, "PASS architecture: ") == "PASS architecture: 19 Mach-O files, each with the tag's arm64"
    assert line(proc, "PASS library RUNPATH: ").startswith("PASS library RUNPATH: 19 Mach-O files, every LC_RPATH entry")
    assert line(proc, "PASS libraries resolve: ").startswith("PASS libraries resolve: ")
    assert line(proc, "PASS foreign files: ") == "PASS foreign files: every native file is macOS's (19 Mach-O files)"
    assert line(proc, "PASS wheel RECORD: ") and line(proc, "PASS wheel tags: ")


def test_macos_1_5_1_as_published_fails_libraries_resolve_naming_libtorch(macos_1_5_1):
    proc = smoke("inspect", macos_1_5_1)
    assert proc.returncode == 1
    fail = line(proc, "FAIL libraries resolve: ")
    assert "needs @rpath/libtorch.dylib (its LC_RPATH leads to torch/lib, the folder of torch, which the wheel does not declare)" in fail
    assert failed_ours(proc) == ["libraries resolve"]


def test_macos_1_4_0_fails_naming_the_ci_conda_and_build_tree_paths():
    """executorch#21743: 1.4.0's libraries searched the CI's conda and build tree (fixed in 1.4.1)."""
    proc = smoke("inspect", platform_wheel("macosx_14_0_arm64", "1.4.0"))
    assert proc.returncode == 1
    fail = line(proc, "FAIL library RUNPATH: ")
    assert fail.startswith("FAIL library RUNPATH: executorch/extension/llm/custom_ops/libcustom_ops_aot_lib.dylib LC_RPATH has 2 "
                           "entries outside the install: '/Users/runner/work/executorch/executorch/pytorch/executorch/pip-out/")
    assert "'/Users/runner/work/_temp/conda_environment_31145339094/lib/python3.11/site-packages/torch/lib' (an absolute path)" in fail
    assert "executorch/data/lib/aoti_cuda_shims.lib (a Windows library archive)" in line(proc, "FAIL foreign files: ")


def test_an_absolute_rpath_added_fails_library_runpath(macos_declared, tmp_path):
    mutant = rewrite_wheel(macos_declared, tmp_path, add={C_EXT: add_rpath(member(macos_declared, C_EXT), "/opt/homebrew/lib")})
    proc = smoke("inspect", mutant)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert line(proc, "FAIL library RUNPATH: ") == (f"FAIL library RUNPATH: {C_EXT} LC_RPATH has 1 entries outside the install: "
                                                    "'/opt/homebrew/lib' (an absolute path)")
    assert failed_ours(proc) == ["library RUNPATH"]


def test_the_minimum_macos_raised_past_the_tag_fails_platform_tag(macos_declared, tmp_path):
    mutant = rewrite_wheel(macos_declared, tmp_path, add={C_EXT: set_minimum_macos(member(macos_declared, C_EXT), 15, 0)})
    proc = smoke("inspect", mutant)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert line(proc, "FAIL platform tag: ") == (f"FAIL platform tag: {C_EXT} (arm64) needs macOS 15.0, newer than "
                                                 "macosx_14_0_arm64 allows (14.0): pip would install it where it does not "
                                                 "load; the tag would be macosx_15_0_arm64")


def test_a_dylib_removed_fails_libraries_resolve(macos_declared, tmp_path):
    mutant = rewrite_wheel(macos_declared, tmp_path, drop=("executorch/lib/libexecutorch_threadpool.dylib",))
    proc = smoke("inspect", mutant)
    assert proc.returncode == 1
    fail = line(proc, "FAIL libraries resolve: ")
    assert "executorch/extension/llm/custom_ops/libcustom_ops_aot_lib.dylib needs @rpath/libexecutorch_threadpool.dylib" in fail


def test_the_macos_row_on_a_linux_host_runs_its_file_checks_and_says_why_the_rest_skipped(macos_declared, tmp_path):
    proc = smoke("cpu_macos_arm64", macos_declared, "--env-dir", tmp_path / "env", "--report-dir", tmp_path / "reports")
    assert proc.returncode in (0, 1) and not failed_ours(proc) and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "PASS platform tag: " in proc.stdout and "PASS wheel RECORD: " in proc.stdout
    assert line(proc, "the cpu_macos_arm64 row installs and runs the wheel on macOS only, and this host is Linux ").endswith(
        "its file checks judged the wheel here; run the row on macOS (the workflow's macos-14) for the rest")
    skips = lines(proc, "SKIP ")
    why = "not run: the cpu_macos_arm64 row installs and runs the wheel on macOS only (this host: Linux "
    assert len(skips) >= 15 and all(why in skip for skip in skips), skips
    assert any(s.startswith("SKIP run with data file (weighted): not run: ") for s in skips)
    assert not (tmp_path / "env").exists()


def test_the_windows_row_runs_its_file_checks_and_skips_its_installed_half_saying_it_is_not_built(windows_1_0_0, tmp_path):
    """No Windows host runs the installed half yet: the row says so and records each skip, on any host."""
    proc = smoke("cpu_windows_x86_64", windows_1_0_0, "--env-dir", tmp_path / "env")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert line(proc, "the cpu_windows_x86_64 row's installed half (environment, export, load and run on Windows) is not built yet")
    skips = lines(proc, "SKIP ")
    assert len(skips) >= 15 and all("not run: the Windows row's installed half is not built yet" in s for s in skips), skips
    assert not (tmp_path / "env").exists()


def test_a_linux_row_given_a_macos_wheel_names_the_macos_row(macos_1_5_1, tmp_path):
    proc = smoke("cpu_x86_64", macos_1_5_1, "--env-dir", tmp_path / "env")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (f"ERROR wheel {macos_1_5_1.name!r} is built for macosx_14_0_arm64; the "
                                                    "cpu_x86_64 row needs x86_64 (use nox -s cpu_macos_arm64)")


# --- Windows

PORTABLE = "executorch/extension/pybindings/_portable_lib.cp311-win_amd64.pyd"


def rename_import(data: bytes, old: str, new: str) -> bytes:
    """The name of one imported DLL, rewritten in its import descriptor's string (the same length)."""
    assert len(old) == len(new)
    image = pefile.PE(data=data)
    entry = next(e for e in image.DIRECTORY_ENTRY_IMPORT if e.dll.decode() == old)
    offset = image.get_offset_from_rva(entry.struct.Name)
    image.close()
    assert data[offset:offset + len(old)] == old.encode()
    return data[:offset] + new.encode() + data[offset + len(old):]


def test_windows_1_0_0_passes_its_file_checks(windows_1_0_0):
    proc = smoke("inspect", windows_1_0_0)
    assert proc.returncode in (0, 1) and not failed_ours(proc), proc.stdout + proc.stderr
    assert "rows: cpu_windows_x86_64" in proc.stdout
    assert line(proc, "PASS architecture: ") == "PASS architecture: 5 PE files, each amd64"
    assert line(proc, "PASS libraries resolve: ") == "PASS libraries resolve: 43 imported DLLs of 5 PE files found"


def test_a_dll_the_extension_module_imports_removed_fails_libraries_resolve(windows_1_0_0, tmp_path):
    """_portable_lib made to import a DLL shipped beside it passes; the same wheel without that DLL fails."""
    shipped = member(windows_1_0_0, "executorch/kernels/quantized/quantized_ops_aot_lib.dll")
    dll = "etorch_core.dllx"  # 16 characters, as torch_python.dll
    portable = rename_import(member(windows_1_0_0, PORTABLE), "torch_python.dll", dll)
    beside = f"executorch/extension/pybindings/{dll}"
    whole = rewrite_wheel(windows_1_0_0, tmp_path / "whole", add={PORTABLE: portable, beside: shipped})
    removed = rewrite_wheel(whole, tmp_path / "removed", drop=(beside,))
    assert line(smoke("inspect", whole), "PASS libraries resolve: ") == "PASS libraries resolve: 53 imported DLLs of 6 PE files found"
    proc = smoke("inspect", removed)
    assert proc.returncode == 1
    assert line(proc, "FAIL libraries resolve: ") == (f"FAIL libraries resolve: {PORTABLE} imports {dll} (not in the wheel, "
                                                      "not a system DLL, not a declared dependency's)")


def test_windows_1_5_1_fails_libraries_resolve_naming_the_undeclared_torch():
    proc = smoke("inspect", platform_wheel("win_amd64", "1.5.1"))
    assert proc.returncode == 1
    assert "imports c10.dll (a torch DLL, and the wheel declares no torch)" in line(proc, "FAIL libraries resolve: ")


def test_an_arm64_dll_in_an_amd64_wheel_fails_architecture(windows_1_0_0, tmp_path):
    data = bytearray(member(windows_1_0_0, PORTABLE))
    offset = struct.unpack("<I", data[60:64])[0] + 4
    data[offset:offset + 2] = struct.pack("<H", 0xAA64)
    proc = smoke("inspect", rewrite_wheel(windows_1_0_0, tmp_path, add={PORTABLE: bytes(data)}))
    assert proc.returncode == 1
    assert line(proc, "FAIL architecture: ") == f"FAIL architecture: {PORTABLE} is arm64; the tag win_amd64 says amd64"


# --- files of another platform, every row


def test_the_windows_import_library_in_a_linux_wheel_fails_foreign_files():
    """executorch#22054's kind: PyPI's 1.4.1 for Linux aarch64 ships aoti_cuda_shims.lib, an MSVC import library."""
    proc = smoke("inspect", pypi_wheel("aarch64", "1.4.1"))
    assert proc.returncode == 1
    assert line(proc, "FAIL foreign files: ") == (
        "FAIL foreign files: 1 file of another platform than Linux, which nothing here loads: "
        "executorch/data/lib/aoti_cuda_shims.lib (a Windows library archive); leave them out of the Linux wheel")


def test_a_dylib_or_dll_in_a_linux_wheel_and_an_elf_so_in_a_windows_wheel_fail(windows_1_0_0, macos_1_5_1, tmp_path):
    linux = pypi_wheel("x86_64")
    dylib = member(macos_1_5_1, "executorch/lib/libexecutorch.dylib")
    elf = member(linux, "executorch/extension/pybindings/_C.cpython-311-x86_64-linux-gnu.so")
    mixed = rewrite_wheel(linux, tmp_path / "linux", add={"executorch/lib/libexecutorch.dylib": dylib,
                                                          "executorch/lib/helper.dll": member(windows_1_0_0, PORTABLE)})
    proc = smoke("inspect", mixed, "--row", "cpu_x86_64")
    assert line(proc, "FAIL foreign files: ") == (
        "FAIL foreign files: 2 files of another platform than Linux, which nothing here loads: executorch/lib/helper.dll "
        "(a Windows PE file), executorch/lib/libexecutorch.dylib (a macOS Mach-O file); leave them out of the Linux wheel")
    windows = rewrite_wheel(windows_1_0_0, tmp_path / "windows", add={"executorch/extension/pybindings/_C.so": elf})
    proc = smoke("inspect", windows)
    assert proc.returncode == 1
    assert line(proc, "FAIL foreign files: ") == (
        "FAIL foreign files: 1 file of another platform than Windows, which nothing here loads: "
        "executorch/extension/pybindings/_C.so (a Linux ELF file); leave them out of the Windows wheel")


def test_no_public_linux_wheel_of_1_5_fails_foreign_files():
    for machine in ("x86_64", "aarch64"):
        proc = smoke("inspect", pypi_wheel(machine, "1.5.1"), "--row", f"cpu_{machine}")
        assert line(proc, "PASS foreign files: ").startswith("PASS foreign files: every native file is Linux's")


# --- hostile bytes: only the readers' own error, bounded


def _mutations(seed: bytes):
    return st.tuples(st.integers(0, len(seed) - 1), st.binary(min_size=1, max_size=8)).map(
        lambda cut: seed[:cut[0]] + cut[1] + seed[cut[0] + len(cut[1]):])


def _seed() -> tuple[bytes, bytes]:
    macos = platform_wheel("macosx_14_0_arm64", "1.5.1")
    windows = platform_wheel("win_amd64", "1.0.0")
    # The head of each (the load commands; the headers and import directory) keeps examples fast.
    return member(macos, "executorch/lib/libexecutorch_etdump.dylib"), member(windows, "executorch/data/bin/flatc.exe")


def _judge(data: bytes, head: bytes) -> None:
    for reader, error in ((macho.read_macho, macho.MachOError), (pe.read_pe, pe.PeError)):
        try:
            reader("mutant", data)
        except error:
            pass
    macho.is_macho(head[:8]), pe.is_pe(head)


def _property(examples: int):
    dylib, exe = _seed()
    sources = st.one_of(_mutations(dylib[:65536]), _mutations(exe[:65536]), st.binary(max_size=512),
                        st.binary(max_size=64).map(lambda b: b"\xcf\xfa\xed\xfe" + b), st.binary(max_size=256).map(lambda b: b"MZ" + b))

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(sources)
    def check(data):
        tracemalloc.start()
        start = time.monotonic()
        try:
            _judge(data, data[:pe.PE_HEAD_SIZE])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 32 << 20, peak
        assert time.monotonic() - start < 5

    check()


def test_hostile_mach_o_and_pe_bytes_are_the_readers_errors_only():
    _property(300)


@pytest.mark.slow
def test_hostile_mach_o_and_pe_bytes_are_the_readers_errors_only_thousands():
    _property(1000)  # 3000 took 563 s here; a thousand keeps CI inside its time


def test_a_truncated_mach_o_or_pe_file_fails_architecture_naming_it(macos_declared, windows_1_0_0, tmp_path):
    cut = rewrite_wheel(macos_declared, tmp_path / "macos", add={C_EXT: member(macos_declared, C_EXT)[:200]})
    proc = smoke("inspect", cut)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert line(proc, "FAIL architecture: ").startswith(f"FAIL architecture: {C_EXT}: not a Mach-O file dyld would load: ")
    cut = rewrite_wheel(windows_1_0_0, tmp_path / "windows", add={PORTABLE: member(windows_1_0_0, PORTABLE)[:1024]})
    proc = smoke("inspect", cut)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert line(proc, "FAIL architecture: ").startswith(f"FAIL architecture: {PORTABLE}: not a PE file the Windows loader would load: ")


IMPORT_LIBRARY = "executorch/data/lib/aoti_cuda_shims.lib"


def test_the_windows_import_library_beside_the_cuda_delegate_is_shipped_on_purpose(slim_x86_64, tmp_path):
    """main's setup.py ships aoti_cuda_shims.lib with the CUDA shims ("Lowering for Windows is a cross compile,
    so a Linux CUDA build needs it too"): the real one, from PyPI's 1.4.1, in a CUDA wheel passes and is named;
    the same wheel without the shim library it serves fails it."""
    lib = member(pypi_wheel("aarch64", "1.4.1"), IMPORT_LIBRARY)
    cuda = make_cuda_wheel(slim_x86_64, tmp_path / "cuda", parts={**cuda_parts(slim_x86_64), IMPORT_LIBRARY: lib})
    result = check_foreign_files(cuda, ROWS["cuda_x86_64"], None)
    assert result.status.value == "pass", result.reason
    assert result.reason.endswith(f"; {IMPORT_LIBRARY}, the Windows import library a CUDA build ships on purpose beside "
                                  f"{SHIMS} (the exporter links it when lowering for Windows)")
    parts = {**cuda_parts(slim_x86_64), IMPORT_LIBRARY: lib}
    del parts[SHIMS]
    alone = make_cuda_wheel(slim_x86_64, tmp_path / "alone", parts=parts)
    result = check_foreign_files(alone, ROWS["cuda_x86_64"], None)
    assert result.status.value == "fail" and f"{IMPORT_LIBRARY} (a Windows library archive)" in result.reason
