"""The checks on the wheel file, on PyPI's real wheels and on copies changed in one thing.

The "CUDA wheel" here is PyPI's 1.5.1 x86_64 wheel relabelled +cu130, declaring the CUDA 13
runtime, with the delegate's three libraries added: the two in executorch/lib are copies of a
real CPU library (they link no CUDA), the AOTI shim layer is a real nvcc 13.0 library with
device code for the cu130 x86_64 list (tests/data/device-code, built by build.sh there).
Each test then breaks one thing in a copy of it.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import zipfile

import pytest
from packaging.version import Version

from smoke import stages
from smoke.backends import cuda_checks
from smoke.checks import pipeline, shipped
from smoke.errors import InvalidWheel
from smoke.readers import devicecode
from smoke.readers.wheel import read_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import DEVICE_CODE, RUNTIME, SHIMS, cuda_parts, make_cuda_wheel, rewrite_wheel

CUDA_ROW = ROWS["cuda_x86_64"]
CPU_ROW = ROWS["cpu_x86_64"]
@pytest.fixture(scope="module")
def pypi(wheel_x86_64):
    return read_wheel(wheel_x86_64)


@pytest.fixture(scope="module")
def cuobjdump():
    found = devicecode.find_cuobjdump()
    assert found, "the tests need cuobjdump: requirements-test.txt installs nvidia-cuda-cuobjdump"
    return found


def check(fn, wheel, row=CUDA_ROW):
    return fn(wheel, row, shipped.read_libraries(wheel))


# --- the synthetic CUDA wheel passes every check -----------------------------------

def test_cuda_wheel_passes_every_file_check(cuda_wheel, cuobjdump):
    libraries = shipped.read_libraries(cuda_wheel)
    results = [stages.run_check(c, cuda_wheel, CUDA_ROW, libraries) for c in pipeline.for_row(CUDA_ROW, stages.FILE)]
    assert [r.name for r in results] == ["wheel tags", "foreign files", "platform tag", "architecture", "CUDA build", "CUDA libraries",
                                         "CUDA runtime declared",
                                         "library RUNPATH", "libraries resolve", "one runtime core", "no duplicate content",
                                         "imports declared", "device code", "wheel RECORD"]
    # The slim wheel ships no Python module, so `imports declared` has nothing to scan: a SKIP that says so.
    assert all(r.status is Status.PASS for r in results if r.name != "imports declared"), [r.line() for r in results]
    assert next(r for r in results if r.name == "imports declared").line().startswith(
        "SKIP imports declared: the wheel ships none of the public modules")
    device = next(r for r in results if r.name == "device code")
    assert device.measured["libraries"][SHIMS] == {"sm": ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"], "ptx": ["sm_120"]}
    assert all(r.seconds is not None for r in results)


# --- CUDA build and CUDA libraries ------------------------------------------------------

def test_pypi_cpu_build_fails_cuda_build_and_libraries(pypi):
    build = check(cuda_checks.check_cuda_build, pypi)
    assert build.status is Status.FAIL and "is a CPU build: version 1.5.1 has no +cuXXX local label" in build.reason
    libraries = check(cuda_checks.check_cuda_libraries, pypi)
    assert libraries.status is Status.FAIL
    assert ("of the 1.5 layout are not in the wheel: executorch/lib/libexecutorch_backend_cuda.so, "
            "executorch/lib/libexecutorch_extension_cuda.so, executorch/backends/cuda/libaoti_cuda_shims.so missing "
            "(CUDA libraries it has: none)") in libraries.reason


def test_a_cpu_label_is_not_a_cuda_build(slim_x86_64, tmp_path):
    wheel = make_cuda_wheel(slim_x86_64, tmp_path, label="1.5.1+cpu")
    result = check(cuda_checks.check_cuda_build, wheel)
    assert result.status is Status.FAIL and "(it is +cpu)" in result.reason


def test_removing_the_shim_library_fails_cuda_libraries(slim_x86_64, cuda_wheel, tmp_path):
    parts = cuda_parts(slim_x86_64)
    del parts[SHIMS]
    wheel = make_cuda_wheel(slim_x86_64, tmp_path, parts=parts)
    result = check(cuda_checks.check_cuda_libraries, wheel)
    assert result.status is Status.FAIL and "libaoti_cuda_shims.so missing" in result.reason
    assert check(cuda_checks.check_cuda_libraries, cuda_wheel).status is Status.PASS


def _files_of(wheel, files, version):
    return dataclasses.replace(wheel, files=tuple(files), version=Version(version))


@pytest.mark.parametrize(("release", "since"), [("1.2.0", "1.2"), ("1.3.1", "1.2"), ("1.4.1", "1.4"), ("1.5.1", "1.5"),
                                                ("1.6.0.dev20261201", "1.5")])
def test_each_release_expects_its_own_layout(pypi, release, since):
    """A layout from the release that introduced it on; each layout's own files pass, one file fewer fails."""
    layout = CUDA_ROW.backend.layout(Version(release).base_version.rsplit(".", 1)[0])
    assert layout[0] == since
    libraries = shipped.read_libraries(pypi)
    complete = _files_of(pypi, [*pypi.files, *layout[1]], f"{release}+cu130")
    assert cuda_checks.check_cuda_libraries(complete, CUDA_ROW, libraries).status is Status.PASS
    for missing in layout[1]:
        short = _files_of(pypi, [f for f in complete.files if f != missing], f"{release}+cu130")
        result = cuda_checks.check_cuda_libraries(short, CUDA_ROW, libraries)
        assert result.status is Status.FAIL and f"{missing} missing" in result.reason and f"the {since} layout" in result.reason


def test_releases_before_the_cuda_runtime_fail_cuda_libraries(pypi):
    old = _files_of(pypi, pypi.files, "1.1.0+cu130")
    result = cuda_checks.check_cuda_libraries(old, CUDA_ROW, shipped.read_libraries(pypi))
    assert result.status is Status.FAIL and "executorch 1.1 predates the CUDA delegate's runtime libraries (first shipped in 1.2)" in result.reason


# --- CUDA runtime declared ---------------------------------------------------------------

def test_pypi_declares_no_cuda_runtime(pypi):
    result = check(cuda_checks.check_cuda_runtime_declared, pypi)
    assert result.status is Status.FAIL and "names no nvidia-* CUDA runtime package for Linux x86_64" in result.reason


def test_a_runtime_older_than_the_labels_minor_fails(slim_x86_64, tmp_path):
    # +cu132 needs 13.2 or later: a 13.0 or 13.1 runtime lacks what the build may call.
    wheel = make_cuda_wheel(slim_x86_64, tmp_path, label="1.5.1+cu132", requirement="nvidia-cuda-runtime<14,>=13")
    result = check(cuda_checks.check_cuda_runtime_declared, wheel)
    assert result.status is Status.FAIL
    assert result.reason == ("+cu132 needs CUDA 13.2 or a later 13.x, but nvidia-cuda-runtime<14,>=13 admits 13.1.999: "
                             "bound it as >=13.2,<14")


@pytest.mark.parametrize(
    ("requirement", "status", "reason"),
    [
        (RUNTIME, Status.PASS, "1 CUDA 13 requirements, each within 13.0 to 13.x: nvidia-cuda-runtime==13.0.96"),
        # What upstream's main declares, and CUDA's minor-version compatibility: any later 13.x.
        ("nvidia-cuda-runtime<14,>=13", Status.PASS, "each within 13.0 to 13.x"),
        ("nvidia-cuda-runtime~=13.0", Status.PASS, "each within 13.0 to 13.x"),
        # Unbounded above: CUDA 14's runtime (libcudart.so.14) would satisfy it.
        ("nvidia-cuda-runtime>=13", Status.FAIL, "+cu130 needs CUDA 13.0 or a later 13.x, but nvidia-cuda-runtime>=13 admits 14: "
                                                 "bound it as >=13.0,<14"),
        ("nvidia-cuda-runtime>=13,!=14.0", Status.FAIL, "nvidia-cuda-runtime!=14.0,>=13 admits 14.0.post1"),
        # Pre- and post-release bounds are read, not a traceback; the highest lower bound names the major.
        ("nvidia-cuda-runtime<14.0.0a1,>=13.0", Status.PASS, "each within 13.0 to 13.x"),
        ("nvidia-cuda-runtime<14.0.post1,>=13", Status.FAIL, "admits 14"),
        ("nvidia-cuda-runtime<14,>=12.9,>=13.0", Status.PASS, "each within 13.0 to 13.x"),
        # Below the build's CUDA: a 12.x runtime under a CUDA 13 build.
        ("nvidia-cuda-runtime<14,>=12.9", Status.FAIL, "Requires-Dist has nvidia-cuda-runtime<14,>=12.9 (CUDA 12)"),
        (None, Status.FAIL, "names no nvidia-* CUDA runtime package"),
        ("nvidia-cuda-runtime-cu12==12.8.90", Status.FAIL, "+cu130 is CUDA 13, but Requires-Dist has nvidia-cuda-runtime-cu12==12.8.90 (CUDA 12)"),
        ("nvidia-cuda-runtime", Status.FAIL, "(names no CUDA major)"),
        # A marker for another machine: on the x86_64 row, nothing is declared.
        ('nvidia-cuda-runtime==13.0.96; platform_machine == "aarch64"', Status.FAIL, "names no nvidia-* CUDA runtime package"),
        ('nvidia-cuda-runtime==13.0.96; extra == "cuda"', Status.FAIL, "names no nvidia-* CUDA runtime package"),
    ],
)
def test_cuda_runtime_declaration_table(slim_x86_64, tmp_path, requirement, status, reason):
    wheel = make_cuda_wheel(slim_x86_64, tmp_path, requirement=requirement)
    result = check(cuda_checks.check_cuda_runtime_declared, wheel)
    assert result.status is status and reason in result.reason, result.reason


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


def test_runpath_into_an_undeclared_cuda_package_fails(slim_x86_64, tmp_path):
    wheel = make_cuda_wheel(slim_x86_64, tmp_path, requirement=None)
    result = check(shipped.check_library_runpath, wheel)
    assert result.status is Status.FAIL
    assert f"{SHIMS} links libcudart.so.13 but no RUNPATH entry leads to it" in result.reason


# --- device code ---------------------------------------------------------------------------

def test_device_code_single_architecture_library_fails(slim_x86_64, tmp_path, cuobjdump):
    parts = cuda_parts(slim_x86_64, shims=(DEVICE_CODE / "libsm90_only.so").read_bytes())
    result = check(cuda_checks.check_device_code, make_cuda_wheel(slim_x86_64, tmp_path, parts=parts))
    assert result.status is Status.FAIL
    assert f"{SHIMS} has no machine code for sm_80, sm_86, sm_89, sm_100, sm_120" in result.reason
    assert "has no PTX for sm_120" in " ".join(result.measured["problems"])


def test_device_code_for_an_architecture_the_row_does_not_claim_fails(cuda_wheel, cuobjdump):
    narrow = dataclasses.replace(CUDA_ROW, backend=dataclasses.replace(CUDA_ROW.backend, archs={"cu130": ("sm_90", "sm_120")}))
    result = check(cuda_checks.check_device_code, cuda_wheel, narrow)
    assert result.status is Status.FAIL
    assert "has machine code for sm_80, sm_86, sm_89, sm_100, which the row does not claim" in result.reason


def test_device_code_for_a_train_with_no_list_fails(slim_x86_64, tmp_path, cuobjdump):
    wheel = make_cuda_wheel(slim_x86_64, tmp_path, label="1.5.1+cu999", requirement="nvidia-cuda-runtime==99.0")
    result = check(cuda_checks.check_device_code, wheel)
    assert result.status is Status.FAIL and "has no architecture list for cu999: add one to smoke/backends/cuda.py" in result.reason


def test_device_code_without_cuobjdump_fails_with_the_fix(cuda_wheel, monkeypatch):
    monkeypatch.setattr(devicecode, "find_cuobjdump", lambda *a: None)
    result = check(cuda_checks.check_device_code, cuda_wheel)
    assert result.status is Status.FAIL and "cuobjdump not found" in result.reason and "pip install nvidia-cuda-cuobjdump" in result.reason


def test_device_code_in_no_library_fails(slim_x86_64, tmp_path, cuobjdump):
    # The shim layer without its fatbin: a CPU library under the right name.
    parts = cuda_parts(slim_x86_64)
    parts[SHIMS] = parts["executorch/lib/libexecutorch_backend_cuda.so"]
    result = check(cuda_checks.check_device_code, make_cuda_wheel(slim_x86_64, tmp_path, parts=parts))
    assert result.status is Status.FAIL and "no shipped library carries GPU code" in result.reason


# --- wheel RECORD ---------------------------------------------------------------------------

def test_record_passes_on_pypi(pypi):
    result = check(shipped.check_record, pypi, CPU_ROW)
    assert result.status is Status.PASS and result.measured["files"] == len([f for f in pypi.files if not f.endswith("/")])


def test_a_changed_file_fails_record(slim_x86_64, tmp_path):
    changed = rewrite_wheel(slim_x86_64, tmp_path, add={"executorch/lib/libexecutorch.so": b"\x7fELF not the real one"},
                            update_record=False)
    result = check(shipped.check_record, read_wheel(changed), CPU_ROW)
    assert result.status is Status.FAIL and "executorch/lib/libexecutorch.so does not match its RECORD hash" in result.reason


def test_an_unlisted_file_fails_record(slim_x86_64, tmp_path):
    extra = rewrite_wheel(slim_x86_64, tmp_path, add={"executorch/extra.py": b"print('hi')\n"}, update_record=False)
    result = check(shipped.check_record, read_wheel(extra), CPU_ROW)
    assert result.status is Status.FAIL and "executorch/extra.py is not in RECORD" in result.reason


# --- an untrusted wheel is refused by name ----------------------------------------------------

@pytest.mark.parametrize(
    ("entry", "message"),
    [("../escape.txt", "climbs out of the tree with '..'"), ("/etc/passwd-copy", "is an absolute path")],
)
def test_unsafe_entries_are_refused(slim_x86_64, tmp_path, entry, message):
    bad = rewrite_wheel(slim_x86_64, tmp_path, add={entry: b"x"})
    with pytest.raises(InvalidWheel, match=message):
        read_wheel(bad)


def test_a_link_out_of_the_tree_is_refused(slim_x86_64, tmp_path):
    bad = tmp_path / slim_x86_64.name
    rewrite_wheel(slim_x86_64, tmp_path)
    with zipfile.ZipFile(bad, "a") as archive:
        link = zipfile.ZipInfo("executorch/lib/evil.so")
        link.external_attr = (0o120777 << 16)
        archive.writestr(link, "../../../../usr/lib/libc.so.6")
    with pytest.raises(InvalidWheel, match=r"'executorch/lib/evil.so' is a link to '../../../../usr/lib/libc.so.6'; a wheel holds no links"):
        read_wheel(bad)


@pytest.mark.parametrize(("arch", "base"), [("sm_90a", "sm_90"), ("sm_100f", "sm_100"), ("sm_120", "sm_120")])
def test_an_arch_specific_variant_counts_as_its_base(arch, base):
    # torch 2.11.0+cu130's libtorch_cuda.so carries sm_90a, sm_100a, sm_120a beside sm_90 ... (H200 run).
    assert devicecode.base(arch) == base


def test_without_pyelftools_the_gate_says_how_to_install_it(pypi, monkeypatch):
    from smoke.errors import MissingTool

    for name in ("elftools", "elftools.elf", "elftools.elf.elffile", "elftools.common", "elftools.common.exceptions"):
        monkeypatch.setitem(sys.modules, name, None)
    fix = re.escape(sys.executable) + r" -m pip install -r requirements-gate.txt"
    with pytest.raises(MissingTool, match=r"pyelftools or auditwheel is not installed .*: " + fix):
        shipped.read_libraries(pypi)


# --- RUNPATH entries of public releases, read from their wheels --------------------------------

CUSTOM_OPS = "executorch/extension/llm/custom_ops/libcustom_ops_aot_lib.so"


@pytest.fixture(scope="module")
def pypi_1_4_1():
    from tests.helpers import pypi_wheel

    return read_wheel(pypi_wheel("x86_64", "1.4.1"))


def test_an_entry_into_the_environments_own_lib_passes(pypi_1_4_1):
    """PyPI's 1.4.1: custom_ops' $ORIGIN/../../../../../.. is PREFIX/lib once installed."""
    result = check(shipped.check_library_runpath, pypi_1_4_1, CPU_ROW)
    climbing = [e for e in result.measured["entries"][CUSTOM_OPS] if e.endswith("/../../../../../..")]
    assert climbing, result.measured["entries"][CUSTOM_OPS]
    assert result.status is Status.PASS, result.reason


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
