"""The `one runtime core` file check and the CUDA layouts, on real libraries and file lists.

tests/data/cuda-executorch-1.2.0 holds the dynamic symbol tables of a CUDA build of executorch
1.2.0 made on the H200 with and without the patch that links the AOTI shims against the one
runtime (its README says how); PyPI's 1.2.0 and 1.5.1 wheels are read whole.
"""

from __future__ import annotations

import dataclasses

import pytest
from packaging.version import Version

from smoke import elf, shipped
from smoke.backends import cuda
from smoke.results import Status
from smoke.rows import ROWS
from smoke.wheel import read_wheel
from tests.helpers import DATA

CUDA_BUILD = DATA / "cuda-executorch-1.2.0"
CUDA_ROW = ROWS["cuda_x86_64"]
SHIMS = "executorch/backends/cuda/libaoti_cuda_shims.so"
PORTABLE = "executorch/extension/pybindings/_portable_lib.cpython-312-x86_64-linux-gnu.so"


def cuda_build(variant: str) -> shipped.Libraries:
    items = [elf.read_library(path, (CUDA_BUILD / f"{variant}--{path.replace('/', '--')}").read_bytes())
             for path in (SHIMS, PORTABLE)]
    return shipped.Libraries(tuple(items), ())


def run(libraries: shipped.Libraries):
    return shipped.check_runtime_core(None, CUDA_ROW, libraries)


def test_the_real_libraries_load_together():
    groups = shipped.load_groups(cuda_build("patched"))
    assert list(groups) == [PORTABLE]  # the extension loads the shims (DT_NEEDED)
    assert sorted(lib.path for lib in groups[PORTABLE]) == [SHIMS, PORTABLE]


def test_the_patched_build_has_one_runtime_core():
    result = run(cuda_build("patched"))
    assert result.status is Status.PASS, result.reason
    assert result.measured["owners"]["AOTI shim layer"] == [SHIMS]
    assert result.measured["owners"]["logging"] == [PORTABLE]


def test_the_unpatched_build_carries_the_aoti_shims_twice():
    result = run(cuda_build("unpatched"))
    assert result.status is Status.FAIL
    assert ("two copies of the runtime's state in one process: libaoti_cuda_shims.so and "
            "_portable_lib.cpython-312-x86_64-linux-gnu.so each define the AOTI shim layer "
            "(loaded together through _portable_lib.cpython-312-x86_64-linux-gnu.so)") == result.reason


def test_a_library_that_no_longer_loads_the_other_is_judged_alone():
    """The rule is per load group: without the DT_NEEDED edge the two copies never meet."""
    shims, portable = cuda_build("unpatched").items
    apart = dataclasses.replace(portable, needed=tuple(n for n in portable.needed if n != "libaoti_cuda_shims.so"))
    assert run(shipped.Libraries((shims, apart), ())).status is Status.PASS


def test_pypi_1_2_0_carries_the_core_in_libraries_that_load_together(wheel_1_2_0):
    wheel = read_wheel(wheel_1_2_0)
    result = shipped.check_runtime_core(wheel, ROWS["cpu_x86_64"], shipped.read_libraries(wheel))
    assert result.status is Status.FAIL
    assert ("libqnn_executorch_backend.so and libcustom_ops_aot_lib.so each define the logging, platform layer, "
            "backend registry (loaded together through libcustom_ops_aot_lib.so)") in result.reason


def test_pypi_1_5_1_has_its_core_in_libexecutorch_alone(wheel_x86_64):
    wheel = read_wheel(wheel_x86_64)
    result = shipped.check_runtime_core(wheel, ROWS["cpu_x86_64"], shipped.read_libraries(wheel))
    assert result.status is Status.PASS, result.reason
    assert all(paths == ["executorch/lib/libexecutorch.so"] for c, paths in result.measured["owners"].items() if paths)


def test_mangled_prefix_of_a_nested_name():
    assert elf.mangled_prefix("executorch::runtime::register_backend") == "_ZN10executorch7runtime16register_backendE"


# --- the CUDA layouts, on the real CUDA build's file list ------------------------------------

def real_cuda_files() -> list[str]:
    return (CUDA_BUILD / "files-patched.txt").read_text().split()


@pytest.fixture(scope="module")
def as_cuda_build(wheel_x86_64):
    base = read_wheel(wheel_x86_64)
    return lambda version, files: dataclasses.replace(base, version=Version(version), files=tuple(files))


def test_the_real_1_2_build_ships_the_1_2_layout(as_cuda_build):
    result = cuda.check_cuda_libraries(as_cuda_build("1.2.0+cu130", real_cuda_files()), CUDA_ROW, None)
    assert result.status is Status.PASS and result.reason == f"the 1.2 layout's 1 ship: {SHIMS}"


def test_the_real_1_2_build_without_its_shims_fails(as_cuda_build):
    files = [f for f in real_cuda_files() if f != SHIMS]
    result = cuda.check_cuda_libraries(as_cuda_build("1.2.0+cu130", files), CUDA_ROW, None)
    assert result.status is Status.FAIL and f"{SHIMS} missing" in result.reason


def test_the_1_2_file_list_is_not_a_1_4_or_1_5_build(as_cuda_build):
    as_1_4 = cuda.check_cuda_libraries(as_cuda_build("1.4.1+cu130", real_cuda_files()), CUDA_ROW, None)
    assert as_1_4.status is Status.FAIL and "the 1.4 layout" in as_1_4.reason
    assert "executorch/backends/cuda/libextension_cuda.so missing" in as_1_4.reason
    as_1_5 = cuda.check_cuda_libraries(as_cuda_build("1.5.0.dev20261201+cu130", real_cuda_files()), CUDA_ROW, None)
    assert as_1_5.status is Status.FAIL and "executorch/lib/libexecutorch_backend_cuda.so" in as_1_5.reason
