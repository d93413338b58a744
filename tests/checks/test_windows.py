"""smoke.checks.windows: Windows wheels judged on any host (issue 27).

Real wheels: PyPI's executorch 1.5.1 and 1.0.0 for win_amd64; mutants of them (a DLL the extension
module imports removed, an arm64 DLL), RECORD rewritten (rewrite_wheel), through ``python -m smoke``.
"""

from __future__ import annotations

import re
import struct

import pefile
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smoke.checks import windows
from smoke.readers import native, pe
from smoke.readers.wheel import read_wheel
from smoke.rows import ROWS
from tests.helpers import (
    every_check_judges,
    examples,
    failed_ours,
    hot_mutations,
    judge,
    line,
    member,
    pe_import_ranges,
    platform_wheel,
    rewrite_wheel,
    smoke,
)

pytestmark = pytest.mark.network

PORTABLE = "executorch/extension/pybindings/_portable_lib.cp311-win_amd64.pyd"
C_PYD = "executorch/extension/pybindings/_C.cp311-win_amd64.pyd"  # 1.5.1's


def rename_import(data: bytes, old: str, new: str) -> bytes:
    """The name of one imported DLL, rewritten in its import descriptor's string (the same length)."""
    assert len(old) == len(new)
    image = pefile.PE(data=data)
    entry = next(e for e in image.DIRECTORY_ENTRY_IMPORT if e.dll.decode() == old)
    offset = image.get_offset_from_rva(entry.struct.Name)
    image.close()
    assert data[offset:offset + len(old)] == old.encode()
    return data[:offset] + new.encode() + data[offset + len(old):]


@pytest.mark.slow
def test_windows_1_0_0_passes_its_file_checks(windows_1_0_0):
    proc = smoke("inspect", windows_1_0_0)
    assert proc.returncode in (0, 1) and not failed_ours(proc), proc.stdout + proc.stderr
    assert "rows: cpu_windows_x86_64" in proc.stdout
    assert line(proc, "PASS architecture: ") == "PASS architecture: 5 PE files, each amd64"
    assert line(proc, "PASS libraries resolve: ") == ("PASS libraries resolve: 43 imported DLLs of 5 PE files found (7 in torch's "
                                                      "torch/lib, found once torch is imported first); whether they load is "
                                                      "judged only end to end (executorch#14443)")


@pytest.mark.slow
def test_a_dll_the_extension_module_imports_removed_fails_libraries_resolve(windows_1_0_0, tmp_path):
    """_portable_lib made to import a DLL shipped beside it passes; the same wheel without that DLL fails."""
    shipped = member(windows_1_0_0, "executorch/kernels/quantized/quantized_ops_aot_lib.dll")
    dll = "etorch_core.dllx"  # 16 characters, as torch_python.dll
    portable = rename_import(member(windows_1_0_0, PORTABLE), "torch_python.dll", dll)
    beside = f"executorch/extension/pybindings/{dll}"
    whole = rewrite_wheel(windows_1_0_0, tmp_path / "whole", add={PORTABLE: portable, beside: shipped})
    removed = rewrite_wheel(whole, tmp_path / "removed", drop=(beside,))
    assert line(smoke("inspect", whole), "PASS libraries resolve: ").startswith(
        "PASS libraries resolve: 53 imported DLLs of 6 PE files found (")
    proc = smoke("inspect", removed)
    assert proc.returncode == 1
    assert line(proc, "FAIL libraries resolve: ") == (f"FAIL libraries resolve: {PORTABLE} imports {dll} (not in the wheel, "
                                                      "not a system DLL, not a declared dependency's)")


@pytest.mark.slow
def test_windows_1_5_1_fails_libraries_resolve_naming_the_undeclared_torch():
    proc = smoke("inspect", platform_wheel("win_amd64", "1.5.1"))
    assert proc.returncode == 1
    assert "imports c10.dll (a torch DLL, and the wheel declares no torch)" in line(proc, "FAIL libraries resolve: ")


@pytest.mark.slow
def test_an_arm64_dll_in_an_amd64_wheel_fails_architecture(windows_1_0_0, tmp_path):
    data = bytearray(member(windows_1_0_0, PORTABLE))
    offset = struct.unpack("<I", data[60:64])[0] + 4
    data[offset:offset + 2] = struct.pack("<H", 0xAA64)
    proc = smoke("inspect", rewrite_wheel(windows_1_0_0, tmp_path, add={PORTABLE: bytes(data)}))
    assert proc.returncode == 1
    assert line(proc, "FAIL architecture: ") == f"FAIL architecture: {PORTABLE} is arm64; the tag win_amd64 says amd64"


# --- the interpreter's DLL: the one the wheel's tag names (issue 37)


@pytest.mark.slow
def test_a_cp311_extension_importing_python312_dll_fails_libraries_resolve(windows_1_0_0, tmp_path):
    """PyPI's cp311 .pyd files import python311.dll and keep it placed; the same name made python312.dll fails."""
    published = judge(windows.RESOLVE, platform_wheel("win_amd64", "1.5.1"), ROWS["cpu_windows_x86_64"])
    assert published.measured["found"][f"{C_PYD}: python311.dll"] == "a system DLL"
    assert not [u for u in published.measured["unresolved"] if re.fullmatch(r"python\d+\.dll", u.split(": ")[1].lower())]
    mutant = rename_import(member(windows_1_0_0, PORTABLE), "python311.dll", "python312.dll")
    proc = smoke("inspect", rewrite_wheel(windows_1_0_0, tmp_path, add={PORTABLE: mutant}))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert line(proc, "FAIL libraries resolve: ") == (
        f"FAIL libraries resolve: {PORTABLE} imports python312.dll (CPython 3.12's DLL, and the tag cp311-cp311 installs it "
        "into an interpreter whose DLL is python311.dll or python3.dll)")
    assert failed_ours(proc) == ["libraries resolve"]


@pytest.mark.slow
def test_the_stable_abi_dll_passes_under_cp311_and_a_version_dll_fails_under_abi3(windows_1_0_0, tmp_path):
    """python3.dll (PEP 384) is in every CPython 3; an abi3 wheel is installed by 3.12 too, which has no python311.dll."""
    stable = rename_import(member(windows_1_0_0, PORTABLE), "python311.dll", "python3.dll\0\0")
    proc = smoke("inspect", rewrite_wheel(windows_1_0_0, tmp_path / "stable", add={PORTABLE: stable}))
    assert failed_ours(proc) == [], proc.stdout + proc.stderr
    abi3 = rewrite_wheel(windows_1_0_0, tmp_path / "abi3", new_name=windows_1_0_0.name.replace("cp311-cp311", "cp311-abi3"))
    fail = line(smoke("inspect", abi3), "FAIL libraries resolve: ")
    assert f"{PORTABLE} imports python311.dll (CPython 3.11's DLL, and the tag cp311-abi3 installs it into an interpreter " \
           "whose DLL is python3.dll)" in fail, fail


# --- the folders the wheel's own modules add to the DLL search (executorch#14443, #14446)

BINDINGS = "executorch/extension/pybindings/portable_lib.py"


@pytest.mark.slow
def test_a_dll_in_a_folder_a_module_adds_is_placed_and_one_it_cannot_name_is_said(windows_1_0_0, tmp_path):
    """_portable_lib made to import a DLL in executorch/extension/dlls: found once portable_lib.py adds that folder
    as upstream adds its own (os.add_dll_directory of a path built from __file__); a folder read from the environment
    cannot be named from the file, and the FAIL says which call it could not read."""
    dll = "etorch_core.dllx"  # 16 characters, as torch_python.dll
    portable = rename_import(member(windows_1_0_0, PORTABLE), "torch_python.dll", dll)
    parts = {PORTABLE: portable, f"executorch/extension/dlls/{dll}": member(windows_1_0_0, "executorch/kernels/quantized/quantized_ops_aot_lib.dll")}
    source = member(windows_1_0_0, BINDINGS).decode()
    adds = source + ('\n_dlls = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dlls")\n'
                     "os.add_dll_directory(_dlls)\n")
    proc = smoke("inspect", rewrite_wheel(windows_1_0_0, tmp_path / "adds", add={**parts, BINDINGS: adds.encode()}))
    assert failed_ours(proc) == [], proc.stdout + proc.stderr
    assert line(proc, "PASS libraries resolve: ") == (
        "PASS libraries resolve: 53 imported DLLs of 6 PE files found (8 in torch's torch/lib, found once torch is imported "
        "first; 1 in folders a module adds with os.add_dll_directory, found once it ran); whether they load is judged only "
        "end to end (executorch#14443)")
    unnamed = source + '\nos.add_dll_directory(os.environ["ET_DLLS"])\n'
    proc = smoke("inspect", rewrite_wheel(windows_1_0_0, tmp_path / "unnamed", add={**parts, BINDINGS: unnamed.encode()}))
    assert proc.returncode == 1
    assert line(proc, "FAIL libraries resolve: ") == (
        f"FAIL libraries resolve: {PORTABLE} imports {dll} (the wheel has it in executorch/extension/dlls/{dll}, not beside it, "
        f"and no os.add_dll_directory call adds its folder (calls this check cannot read the folder of: {BINDINGS} line "
        f"{source.count(chr(10)) + 2}))")


@pytest.mark.slow
def test_hostile_pe_imports_and_module_sources_are_judged_never_a_traceback(windows_1_0_0):
    """A .pyd's import directory and DLL names overwritten: the reader refuses it, or both Windows file checks judge
    the names it reads (a python DLL of any digits among them); any module source: its os.add_dll_directory folders
    are read, or said unread, or it adds none."""
    wheel = read_wheel(windows_1_0_0)
    real = native.read_binaries(wheel)
    row = ROWS["cpu_windows_x86_64"]
    small = "executorch/codegen/tools/selective_build.cp311-win_amd64.pyd"  # imports python311.dll; pefile reads it fast
    pyd = member(windows_1_0_0, small)
    source = member(windows_1_0_0, BINDINGS)

    @settings(max_examples=examples(40), deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(hot_mutations(pyd, pe_import_ranges(pyd)))
    def imports(data):
        try:
            mutant = pe.read_pe(small, data)
        except pe.PeError:
            return
        every_check_judges(wheel, row, real, "pes", small, mutant, windows.CHECKS)

    @settings(max_examples=examples(200), deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(hot_mutations(source, [(source.index(b"if sys.platform"), source.index(b"# Let users"))]),
                     st.text(max_size=200).map(lambda t: ("os.add_dll_directory(" + t).encode("utf-8", "surrogatepass"))))
    def sources(text):
        known, unknown = windows.added_folders(BINDINGS, text)
        assert all(not folder.startswith("/") and not folder.startswith("../") for folder in known), known
        assert all(where.startswith(f"{BINDINGS} line ") for where in [*known.values(), *unknown])

    imports()
    sources()
