"""smoke.checks.foreign: files of another platform on every row (issue 27), on PyPI's real Linux, macOS and
Windows wheels and mutants of them, through ``python -m smoke`` and the check function."""

from __future__ import annotations

import pytest

from smoke.checks.foreign import check_foreign_files
from smoke.rows import ROWS
from tests.helpers import SHIMS, cuda_parts, line, make_cuda_wheel, member, pypi_wheel, rewrite_wheel, smoke

pytestmark = pytest.mark.network

# The Windows wheel's extension module.
PORTABLE = "executorch/extension/pybindings/_portable_lib.cp311-win_amd64.pyd"


# --- files of another platform, every row


@pytest.mark.slow
def test_the_windows_import_library_in_a_linux_wheel_warns_and_fails_only_when_strict():
    """executorch#22054's kind: PyPI's 1.4.1 for Linux aarch64 ships aoti_cuda_shims.lib, an MSVC import library. Nothing
    on Linux loads it: a warning, which fails the row only under --strict (docs/checks.md: severities)."""
    strict = smoke("inspect", pypi_wheel("aarch64", "1.4.1"), "--strict")
    assert strict.returncode == 1 and "(strict: warnings fail)" in strict.stdout, strict.stdout + strict.stderr
    proc = smoke("inspect", pypi_wheel("aarch64", "1.4.1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "inspect-cpu_aarch64: PASSED: 12 passed, 0 failed, 0 skipped, 2 warned in " in proc.stdout
    assert line(proc, "WARN foreign files: ") == (
        "WARN foreign files: 1 file of another platform than Linux, which nothing here loads: "
        "executorch/data/lib/aoti_cuda_shims.lib (a Windows library archive); leave them out of the Linux wheel")


@pytest.mark.slow
def test_a_dylib_or_dll_in_a_linux_wheel_and_an_elf_so_in_a_windows_wheel_warn(windows_1_0_0, macos_1_5_1, tmp_path):
    linux = pypi_wheel("x86_64")
    dylib = member(macos_1_5_1, "executorch/lib/libexecutorch.dylib")
    elf = member(linux, "executorch/extension/pybindings/_C.cpython-311-x86_64-linux-gnu.so")
    mixed = rewrite_wheel(linux, tmp_path / "linux", add={"executorch/lib/libexecutorch.dylib": dylib,
                                                          "executorch/lib/helper.dll": member(windows_1_0_0, PORTABLE)})
    proc = smoke("inspect", mixed, "--row", "cpu_x86_64")
    assert line(proc, "WARN foreign files: ") == (
        "WARN foreign files: 2 files of another platform than Linux, which nothing here loads: executorch/lib/helper.dll "
        "(a Windows PE file), executorch/lib/libexecutorch.dylib (a macOS Mach-O file); leave them out of the Linux wheel")
    windows = rewrite_wheel(windows_1_0_0, tmp_path / "windows", add={"executorch/extension/pybindings/_C.so": elf})
    proc = smoke("inspect", windows)
    # 1.0.0's one FAIL is its own (imports declared: executorch#15283, as on Linux); the stray ELF file only warns
    assert proc.returncode == 1 and "inspect-cpu_windows_x86_64: FAILED: 8 passed, 1 failed, 0 skipped, 2 warned" in proc.stdout
    assert [fail.split(":")[0] for fail in proc.stdout.splitlines() if fail.startswith("FAIL ")] == ["FAIL imports declared"]
    assert line(proc, "WARN foreign files: ") == (
        "WARN foreign files: 1 file of another platform than Windows, which nothing here loads: "
        "executorch/extension/pybindings/_C.so (a Linux ELF file); leave them out of the Windows wheel")


@pytest.mark.slow
def test_no_public_linux_wheel_of_1_5_fails_foreign_files():
    for machine in ("x86_64", "aarch64"):
        proc = smoke("inspect", pypi_wheel(machine, "1.5.1"), "--row", f"cpu_{machine}")
        assert line(proc, "PASS foreign files: ").startswith("PASS foreign files: every native file is Linux's")


IMPORT_LIBRARY = "executorch/data/lib/aoti_cuda_shims.lib"


@pytest.mark.slow
def test_the_windows_import_library_beside_the_cuda_delegate_is_shipped_on_purpose(slim_x86_64, tmp_path):
    """main's setup.py ships aoti_cuda_shims.lib with the CUDA shims ("Lowering for Windows is a cross compile,
    so a Linux CUDA build needs it too"): the real one, from PyPI's 1.4.1, in a CUDA wheel passes and is named;
    the same wheel without the shim library it serves warns of it."""
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
    assert result.status.value == "warn" and f"{IMPORT_LIBRARY} (a Windows library archive)" in result.reason


@pytest.mark.slow
@pytest.mark.parametrize(("platform", "row", "own"), [("win_amd64", "cpu_windows_x86_64", "PE"),
                                                     ("macosx_14_0_arm64", "cpu_macos_arm64", "Mach-O")])
def test_a_linux_build_retagged_for_macos_or_windows_fails_architecture(declared_slim, tmp_path, platform, row, own):
    """Issue 48: PyPI's 1.5.1 retagged cp311-cp311-win_amd64 PASSed cpu_windows_x86_64, and retagged for macOS PASSed
    inspect: foreign files is a WARN (a stray file costs the download), and architecture counted '0 PE files'. Its
    extension modules are Linux ELF files the tag's system imports, and cannot: a FAIL naming them."""
    wheel = rewrite_wheel(declared_slim, tmp_path, new_name=declared_slim.name.replace("manylinux_2_28_x86_64", platform))
    proc = smoke("inspect", wheel)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failing = [line for line in proc.stdout.splitlines() if line.startswith("FAIL architecture: ")]
    assert len(failing) == 1 and f"extension modules are not {own} (executorch/" in failing[0], proc.stdout
    assert f": ELF): {'Windows' if own == 'PE' else 'macOS'} cannot import them; build the wheel on " in failing[0]
    assert f"inspect-{row}: FAILED" in proc.stdout
