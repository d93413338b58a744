"""smoke.checks.macos: macOS wheels judged on any host (issue 27).

Real wheels: PyPI's executorch 1.5.1 and 1.4.0 for macosx_14_0_arm64; mutants of them (an absolute
LC_RPATH added, the minimum macOS raised past the tag, a dylib removed), RECORD rewritten
(rewrite_wheel), through ``python -m smoke``.
"""

from __future__ import annotations

import zipfile

import pytest
from hypothesis import HealthCheck, given, settings

from smoke.checks import macos
from smoke.readers import macho, native
from smoke.readers.wheel import read_wheel
from smoke.rows import ROWS
from tests.helpers import (
    C_EXT,
    X86_64,
    add_rpath,
    as_architecture,
    drop_rpath,
    every_check_judges,
    examples,
    failed_ours,
    fat,
    fat_hot_ranges,
    fat_seed,
    hot_mutations,
    line,
    member,
    platform_wheel,
    rewrite_wheel,
    set_minimum_macos,
    smoke,
)

pytestmark = pytest.mark.network


@pytest.mark.slow
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


@pytest.mark.slow
def test_macos_1_5_1_as_published_fails_libraries_resolve_naming_libtorch(macos_1_5_1):
    proc = smoke("inspect", macos_1_5_1)
    assert proc.returncode == 1
    fail = line(proc, "FAIL libraries resolve: ")
    assert "needs @rpath/libtorch.dylib (its LC_RPATH leads to torch/lib, the folder of torch, which the wheel does not declare)" in fail
    assert failed_ours(proc) == ["libraries resolve"]


@pytest.mark.slow
def test_macos_1_4_0_fails_naming_the_ci_conda_and_build_tree_paths():
    """executorch#21743: 1.4.0's libraries searched the CI's conda and build tree (fixed in 1.4.1)."""
    proc = smoke("inspect", platform_wheel("macosx_14_0_arm64", "1.4.0"))
    assert proc.returncode == 1
    fail = line(proc, "FAIL library RUNPATH: ")
    assert fail.startswith("FAIL library RUNPATH: executorch/extension/llm/custom_ops/libcustom_ops_aot_lib.dylib LC_RPATH has 2 "
                           "entries outside the install: '/Users/runner/work/executorch/executorch/pytorch/executorch/pip-out/")
    assert "'/Users/runner/work/_temp/conda_environment_31145339094/lib/python3.11/site-packages/torch/lib' (an absolute path)" in fail
    assert "executorch/data/lib/aoti_cuda_shims.lib (a Windows library archive)" in line(proc, "WARN foreign files: ")


@pytest.mark.slow
def test_an_absolute_rpath_added_fails_library_runpath(macos_declared, tmp_path):
    mutant = rewrite_wheel(macos_declared, tmp_path, add={C_EXT: add_rpath(member(macos_declared, C_EXT), "/opt/homebrew/lib")})
    proc = smoke("inspect", mutant)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert line(proc, "FAIL library RUNPATH: ") == (f"FAIL library RUNPATH: {C_EXT} LC_RPATH has 1 entries outside the install: "
                                                    "'/opt/homebrew/lib' (an absolute path)")
    assert failed_ours(proc) == ["library RUNPATH"]


@pytest.mark.slow
def test_the_minimum_macos_raised_past_the_tag_fails_platform_tag(macos_declared, tmp_path):
    mutant = rewrite_wheel(macos_declared, tmp_path, add={C_EXT: set_minimum_macos(member(macos_declared, C_EXT), 15, 0)})
    proc = smoke("inspect", mutant)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert line(proc, "FAIL platform tag: ") == (f"FAIL platform tag: {C_EXT} (arm64) needs macOS 15.0, newer than "
                                                 "macosx_14_0_arm64 allows (14.0): pip would install it where it does not "
                                                 "load; the tag would be macosx_15_0_arm64")


@pytest.mark.slow
def test_a_dylib_removed_fails_libraries_resolve(macos_declared, tmp_path):
    mutant = rewrite_wheel(macos_declared, tmp_path, drop=("executorch/lib/libexecutorch_threadpool.dylib",))
    proc = smoke("inspect", mutant)
    assert proc.returncode == 1
    fail = line(proc, "FAIL libraries resolve: ")
    assert "executorch/extension/llm/custom_ops/libcustom_ops_aot_lib.dylib needs @rpath/libexecutorch_threadpool.dylib" in fail


# A Windows wheel's extension module: the same truncation, on the architecture check's PE side.
PORTABLE = "executorch/extension/pybindings/_portable_lib.cp311-win_amd64.pyd"


@pytest.mark.slow
def test_a_truncated_mach_o_or_pe_file_fails_architecture_naming_it(macos_declared, windows_1_0_0, tmp_path):
    cut = rewrite_wheel(macos_declared, tmp_path / "macos", add={C_EXT: member(macos_declared, C_EXT)[:200]})
    proc = smoke("inspect", cut)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert line(proc, "FAIL architecture: ").startswith(f"FAIL architecture: {C_EXT}: not a Mach-O file dyld would load: ")
    cut = rewrite_wheel(windows_1_0_0, tmp_path / "windows", add={PORTABLE: member(windows_1_0_0, PORTABLE)[:1024]})
    proc = smoke("inspect", cut)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert line(proc, "FAIL architecture: ").startswith(f"FAIL architecture: {PORTABLE}: not a PE file the Windows loader would load: ")


# --- a fat (universal) file: each slice judged by its own LC_RPATH (issue 37)

LIB = "@loader_path/../../lib"  # _C's entry that leads to executorch/lib, where its @rpath/libexecutorch*.dylib are


@pytest.mark.slow
def test_a_fat_file_whose_arm64_slice_lacks_its_rpath_fails_though_another_slice_has_it(macos_declared, tmp_path):
    """The x86_64 slice keeps the entry; dyld loads the arm64 slice alone and searches only its LC_RPATH."""
    thin = member(macos_declared, C_EXT)
    universal = fat(drop_rpath(thin, LIB), as_architecture(thin, X86_64))
    proc = smoke("inspect", rewrite_wheel(macos_declared, tmp_path, add={C_EXT: universal}))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert line(proc, "FAIL libraries resolve: ").startswith(
        f"FAIL libraries resolve: {C_EXT} (arm64 slice) needs @rpath/libexecutorch.dylib (")
    assert failed_ours(proc) == ["libraries resolve"]


@pytest.mark.slow
def test_a_fat_file_of_an_arm64_wheel_leaves_its_x86_64_slice_unjudged_saying_so(macos_declared, tmp_path):
    """arm64 whole and an x86_64 slice without the entry: no interpreter pip installs an arm64 wheel for loads x86_64."""
    thin = member(macos_declared, C_EXT)
    universal = fat(thin, drop_rpath(as_architecture(thin, X86_64), LIB))
    proc = smoke("inspect", rewrite_wheel(macos_declared, tmp_path, add={C_EXT: universal}))
    assert failed_ours(proc) == [], proc.stdout + proc.stderr
    assert line(proc, "PASS libraries resolve: ").endswith(
        "; 1 slices of architectures the tag does not name not judged (no interpreter pip installs this wheel for loads them)")


@pytest.mark.slow
def test_a_universal2_wheel_fails_naming_the_x86_64_slice_that_lacks_its_rpath(macos_declared, tmp_path):
    """executorch/lib's libraries made fat too (arm64 and x86_64), so that only _C's x86_64 slice lacks what it needs."""
    thin = member(macos_declared, C_EXT)
    universal = fat(thin, drop_rpath(as_architecture(thin, X86_64), LIB))
    with zipfile.ZipFile(macos_declared) as archive:
        libs = {name: fat(data, as_architecture(data, X86_64)) for name in archive.namelist()
                if name.startswith("executorch/lib/") and name.endswith(".dylib") and (data := archive.read(name))}
    both = rewrite_wheel(macos_declared, tmp_path, add={**libs, C_EXT: universal},
                         keep=lambda name: name.startswith(("executorch/lib/", C_EXT)) or ".dist-info/" in name,
                         new_name=macos_declared.name.replace("arm64", "universal2"))
    proc = smoke("inspect", both)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fail = line(proc, "FAIL libraries resolve: ")
    assert fail.startswith(f"FAIL libraries resolve: {C_EXT} (x86_64 slice) needs @rpath/libexecutorch.dylib ("), fail
    assert f"{C_EXT} (arm64 slice)" not in fail and failed_ours(proc) == ["libraries resolve"]


@pytest.mark.slow
def test_hostile_fat_slices_are_judged_or_refused_never_a_traceback(macos_declared):
    """Bytes of a fat _C overwritten in its fat header or a slice's load commands: the reader refuses them, or every
    macOS file check judges the slices it reads (an odd architecture, a string rpath, a slice count) with a result."""
    wheel = read_wheel(macos_declared)
    real = native.read_binaries(wheel)
    row = ROWS["cpu_macos_arm64"]
    universal = fat_seed(member(macos_declared, C_EXT), LIB)

    @settings(max_examples=examples(60), deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(hot_mutations(universal, fat_hot_ranges(universal)))
    def check(data):
        try:
            mutant = macho.read_macho(C_EXT, data)
        except macho.MachOError:
            return
        every_check_judges(wheel, row, real, "machos", C_EXT, mutant, macos.CHECKS)

    check()
