"""smoke.backends.cuda_checks: the CUDA delegate's file and environment checks, on real wheels and file lists.

The "CUDA wheel" here is PyPI's 1.5.1 x86_64 wheel relabelled +cu130, declaring the CUDA 13
runtime, with the delegate's three libraries added: the two in executorch/lib are copies of a
real CPU library (they link no CUDA), the AOTI shim layer is a real nvcc 13.0 library with
device code for the cu130 x86_64 list (tests/data/device-code, built by build.sh there).
Each test then breaks one thing in a copy of it. The CUDA layouts are also judged on the file list
of a real CUDA build of 1.2.0 (tests/data/cuda-executorch-1.2.0), and the CUDA libraries are
resolved against a real folder laid out as pip installs the synthetic CUDA wheel and NVIDIA's runtime.
"""

from __future__ import annotations

import dataclasses

import pytest
from packaging.version import Version

from smoke.backends import cuda_checks
from smoke.checks import kinds, pipeline, shipped
from smoke.readers import devicecode
from smoke.readers.wheel import read_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import CUDA_BUILD, DEVICE_CODE, RUNTIME, SHIMS, check, cuda_parts, make_cuda_wheel

CUDA_ROW = ROWS["cuda_x86_64"]


@pytest.fixture(scope="module")
def cuobjdump():
    found = devicecode.find_cuobjdump()
    assert found, "the tests need cuobjdump: requirements-test.txt installs nvidia-cuda-cuobjdump"
    return found


# --- the synthetic CUDA wheel passes every check -----------------------------------

@pytest.mark.slow
def test_cuda_wheel_passes_every_file_check(cuda_wheel, cuobjdump):
    libraries = shipped.read_libraries(cuda_wheel)
    results = [kinds.run_file(c, cuda_wheel, CUDA_ROW, libraries) for c in pipeline.file_checks(CUDA_ROW)]
    assert [r.name for r in results] == ["wheel tags", "foreign files", "start-up code", "platform tag", "architecture",
                                         "torch requirement", "CUDA build", "CUDA libraries",
                                         "CUDA runtime declared",
                                         "library RUNPATH", "libraries resolve", "one runtime core", "no duplicate content",
                                         "imports declared", "top-level names", "console scripts", "device code", "wheel RECORD"]
    # The slim wheel ships no Python module but flatc's (tests/conftest.py), so `imports declared` has nothing to scan: a
    # SKIP that says so.
    assert all(r.status is Status.PASS for r in results if r.name != "imports declared"), [r.line() for r in results]
    assert next(r for r in results if r.name == "imports declared").line().startswith(
        "SKIP imports declared: the wheel ships none of the public modules")
    device = next(r for r in results if r.name == "device code")
    assert device.measured["libraries"][SHIMS] == {"sm": ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"], "ptx": ["sm_120"]}
    assert all(r.seconds is not None for r in results)


# --- CUDA build and CUDA libraries ------------------------------------------------------

@pytest.mark.slow
def test_pypi_cpu_build_fails_cuda_build_and_libraries(pypi):
    build = check(cuda_checks.check_cuda_build, pypi)
    assert build.status is Status.FAIL and "is a CPU build: version 1.5.1 has no +cuXXX local label" in build.reason
    libraries = check(cuda_checks.check_cuda_libraries, pypi)
    assert libraries.status is Status.FAIL
    assert ("of the 1.5 layout are not in the wheel: executorch/lib/libexecutorch_backend_cuda.so, "
            "executorch/lib/libexecutorch_extension_cuda.so, executorch/backends/cuda/libaoti_cuda_shims.so missing "
            "(CUDA libraries it has: none)") in libraries.reason


@pytest.mark.slow
def test_a_cpu_label_is_not_a_cuda_build(slim_x86_64, tmp_path):
    wheel = make_cuda_wheel(slim_x86_64, tmp_path, label="1.5.1+cpu")
    result = check(cuda_checks.check_cuda_build, wheel)
    assert result.status is Status.FAIL and "(it is +cpu)" in result.reason


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_runtime_older_than_the_labels_minor_fails(slim_x86_64, tmp_path):
    # +cu132 needs 13.2 or later: a 13.0 or 13.1 runtime lacks what the build may call.
    wheel = make_cuda_wheel(slim_x86_64, tmp_path, label="1.5.1+cu132", requirement="nvidia-cuda-runtime<14,>=13")
    result = check(cuda_checks.check_cuda_runtime_declared, wheel)
    assert result.status is Status.FAIL
    assert result.reason == ("+cu132 needs CUDA 13.2 or a later 13.x, but nvidia-cuda-runtime<14,>=13 admits 13.1.999: "
                             "bound it as >=13.2,<14")


@pytest.mark.slow
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


# --- device code ---------------------------------------------------------------------------

@pytest.mark.slow
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


@pytest.mark.slow
def test_device_code_for_a_train_with_no_list_fails(slim_x86_64, tmp_path, cuobjdump):
    wheel = make_cuda_wheel(slim_x86_64, tmp_path, label="1.5.1+cu999", requirement="nvidia-cuda-runtime==99.0")
    result = check(cuda_checks.check_device_code, wheel)
    assert result.status is Status.FAIL and "has no architecture list for cu999: add one to smoke/backends/cuda.py" in result.reason


@pytest.mark.slow
def test_device_code_without_cuobjdump_fails_with_the_fix(cuda_wheel, monkeypatch):
    monkeypatch.setattr(devicecode, "find_cuobjdump", lambda *a: None)
    result = check(cuda_checks.check_device_code, cuda_wheel)
    assert result.status is Status.FAIL and "cuobjdump not found" in result.reason and "pip install nvidia-cuda-cuobjdump" in result.reason


@pytest.mark.slow
def test_device_code_in_no_library_fails(slim_x86_64, tmp_path, cuobjdump):
    # The shim layer without its fatbin: a CPU library under the right name.
    parts = cuda_parts(slim_x86_64)
    parts[SHIMS] = parts["executorch/lib/libexecutorch_backend_cuda.so"]
    result = check(cuda_checks.check_device_code, make_cuda_wheel(slim_x86_64, tmp_path, parts=parts))
    assert result.status is Status.FAIL and "no shipped library carries GPU code" in result.reason

# --- the CUDA layouts, on the real CUDA build's file list ------------------------------------

def real_cuda_files() -> list[str]:
    return (CUDA_BUILD / "files-patched.txt").read_text().split()


@pytest.fixture(scope="module")
def as_cuda_build(wheel_x86_64):
    base = read_wheel(wheel_x86_64)
    return lambda version, files: dataclasses.replace(base, version=Version(version), files=tuple(files))


def test_the_real_1_2_build_ships_the_1_2_layout(as_cuda_build):
    result = cuda_checks.check_cuda_libraries(as_cuda_build("1.2.0+cu130", real_cuda_files()), CUDA_ROW, None)
    assert result.status is Status.PASS and result.reason == f"the 1.2 layout's 1 ship: {SHIMS}"


def test_the_real_1_2_build_without_its_shims_fails(as_cuda_build):
    files = [f for f in real_cuda_files() if f != SHIMS]
    result = cuda_checks.check_cuda_libraries(as_cuda_build("1.2.0+cu130", files), CUDA_ROW, None)
    assert result.status is Status.FAIL and f"{SHIMS} missing" in result.reason


def test_the_1_2_file_list_is_not_a_1_4_or_1_5_build(as_cuda_build):
    as_1_4 = cuda_checks.check_cuda_libraries(as_cuda_build("1.4.1+cu130", real_cuda_files()), CUDA_ROW, None)
    assert as_1_4.status is Status.FAIL and "the 1.4 layout" in as_1_4.reason
    assert "executorch/backends/cuda/libextension_cuda.so missing" in as_1_4.reason
    as_1_5 = cuda_checks.check_cuda_libraries(as_cuda_build("1.5.0.dev20261201+cu130", real_cuda_files()), CUDA_ROW, None)
    assert as_1_5.status is Status.FAIL and "executorch/lib/libexecutorch_backend_cuda.so" in as_1_5.reason

CUDA = ROWS["cuda_x86_64"]


def _site(tmp_path, with_runtime: bool):
    site = tmp_path / "site-packages"
    (site / "executorch" / "backends" / "cuda").mkdir(parents=True)
    (site / SHIMS).write_bytes(b"")
    if with_runtime:
        (site / "nvidia" / "cu13" / "lib").mkdir(parents=True)
        (site / "nvidia" / "cu13" / "lib" / "libcudart.so.13").write_bytes(b"")
    return site


@pytest.mark.parametrize(("with_runtime", "status"), [(True, Status.PASS), (False, Status.FAIL)])
def test_cuda_libraries_resolve_against_site_packages(cuda_wheel, tmp_path, with_runtime, status):
    site = _site(tmp_path, with_runtime)
    result = cuda_checks.check_cuda_libraries_resolve(cuda_wheel, CUDA, {"purelib": str(site), "platlib": str(site)},
                                                    shipped.read_libraries(cuda_wheel))
    assert result.status is status, result.reason
    if status is Status.FAIL:
        assert f"{SHIMS} needs libcudart.so.13, not in any folder its RUNPATH leads to ({site}/nvidia/cu13/lib)" in result.reason
    else:
        assert result.measured["found"] == {f"{SHIMS}: libcudart.so.13": str(site / "nvidia" / "cu13" / "lib")}
