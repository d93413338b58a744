"""smoke.checks.windows: Windows wheels judged on any host (issue 27).

Real wheels: PyPI's executorch 1.5.1 and 1.0.0 for win_amd64; mutants of them (a DLL the extension
module imports removed, an arm64 DLL), RECORD rewritten (rewrite_wheel), through ``python -m smoke``.
"""

from __future__ import annotations

import struct

import pefile
import pytest

from tests.helpers import (
    failed_ours,
    line,
    member,
    platform_wheel,
    rewrite_wheel,
    smoke,
)

pytestmark = pytest.mark.network

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
