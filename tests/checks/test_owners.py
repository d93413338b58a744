"""smoke.checks.owners: the `one runtime core` file check, on real libraries and file lists.

tests/data/cuda-executorch-1.2.0 holds the dynamic symbol tables of a CUDA build of executorch
1.2.0 made on the H200 with and without the patch that links the AOTI shims against the one
runtime (its README says how); PyPI's 1.2.0, 1.4.1 and 1.5.1 wheels are read whole. Each rule
fails on real material (a real library, or a real one changed in one way) and passes a real wheel.
"""

from __future__ import annotations

import dataclasses
import zipfile

import pytest
from packaging.version import Version

from smoke.checks import owners, shipped
from smoke.readers import elf
from smoke.readers.wheel import read_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import SHIMS, THREADPOOL, cuda_parts, extract, make_cuda_wheel, member, pypi_wheel, rebound, rewrite_wheel

CUDA_ROW, CPU_ROW = ROWS["cuda_x86_64"], ROWS["cpu_x86_64"]

PORTABLE = "executorch/extension/pybindings/_portable_lib.cpython-312-x86_64-linux-gnu.so"


def cuda_build(variant: str, **changed: bytes) -> shipped.Libraries:
    items = [elf.read_library(path, changed.get(path) or extract(variant, path)) for path in (SHIMS, PORTABLE)]
    return shipped.Libraries(tuple(items), ())


def run(libraries: shipped.Libraries):
    return owners.check_runtime_core(None, CUDA_ROW, libraries)


def needing(library: elf.Library, *names: str) -> elf.Library:
    return dataclasses.replace(library, needed=(*library.needed, *names))


# --- which libraries load together: every file's own closure --------------------------------

def test_every_library_is_judged_with_what_it_loads():
    groups = owners.load_groups(cuda_build("patched"))
    assert sorted(lib.path for lib in groups[PORTABLE]) == [SHIMS, PORTABLE]  # the extension loads the shims (DT_NEEDED)
    assert [lib.path for lib in groups[SHIMS]] == [SHIMS]


def test_the_patched_build_has_one_runtime_core():
    result = run(cuda_build("patched"))
    assert result.status is Status.PASS, result.reason
    assert result.measured["owners"]["AOTI shim layer"] == [SHIMS]
    assert result.measured["owners"]["logging"] == [PORTABLE]
    assert result.measured["layout"] == "before 1.5"


def test_the_unpatched_build_carries_the_aoti_shims_twice():
    result = run(cuda_build("unpatched"))
    assert result.status is Status.FAIL
    assert ("two copies of the runtime's state in one process: libaoti_cuda_shims.so and "
            "_portable_lib.cpython-312-x86_64-linux-gnu.so each define the AOTI shim layer "
            "(loaded together through _portable_lib.cpython-312-x86_64-linux-gnu.so)") == result.reason


def test_a_library_that_no_longer_loads_the_other_is_judged_alone():
    """Before 1.5 the rule is per load scope: without the DT_NEEDED edge the two copies never meet, and are named."""
    shims, portable = cuda_build("unpatched").items
    apart = dataclasses.replace(portable, needed=tuple(n for n in portable.needed if n != "libaoti_cuda_shims.so"))
    result = run(shipped.Libraries((shims, apart), ()))
    assert result.status is Status.PASS, result.reason
    assert result.reason.endswith("AOTI shim layer in libaoti_cuda_shims and _portable_lib")


def test_a_dt_needed_cycle_has_no_root_and_is_judged_all_the_same():
    """The shims made to need the extension back: no library is needed by none, as in a cycle of two."""
    shims, portable = cuda_build("unpatched").items
    cycle = shipped.Libraries((needing(shims, "_portable_lib.cpython-312-x86_64-linux-gnu.so"), portable), ())
    result = run(cycle)
    assert result.status is Status.FAIL
    assert "libaoti_cuda_shims.so and _portable_lib.cpython-312-x86_64-linux-gnu.so each define the AOTI shim layer" in result.reason


def test_a_cycle_of_two_real_libraries_that_both_carry_the_backend_registry(wheel_1_2_0):
    """PyPI's 1.2.0: the QNN backend library and selective_build each carry logging, platform layer and
    backend registry. Apart they pass; made to need each other (a cycle, no root), they fail."""
    paths = ("executorch/backends/qualcomm/libqnn_executorch_backend.so",
             "executorch/codegen/tools/selective_build.cpython-312-x86_64-linux-gnu.so")
    with zipfile.ZipFile(wheel_1_2_0) as archive:
        qnn, selective = (elf.read_library(p, archive.read(p)) for p in paths)
    assert run(shipped.Libraries((qnn, selective), ())).status is Status.PASS
    cycle = shipped.Libraries((needing(qnn, "selective_build.cpython-312-x86_64-linux-gnu.so"),
                               needing(selective, "libqnn_executorch_backend.so")), ())
    result = run(cycle)
    assert result.status is Status.FAIL
    assert ("libqnn_executorch_backend.so and selective_build.cpython-312-x86_64-linux-gnu.so each define the "
            "logging, platform layer, backend registry") in result.reason


def test_a_weak_second_definer_is_a_second_copy():
    """The unpatched extension with its AOTI shims made weak: the loader binds a weak definition as a global one."""
    weak = rebound(extract("unpatched", PORTABLE), "aoti_torch_", 2)
    result = run(cuda_build("unpatched", **{PORTABLE: weak}))
    assert result.status is Status.FAIL
    assert ("libaoti_cuda_shims.so and _portable_lib.cpython-312-x86_64-linux-gnu.so (weak) each define the "
            "AOTI shim layer") in result.reason
    assert result.measured["weak"] == {"AOTI shim layer": [PORTABLE]}


def test_pypi_1_2_0_defines_its_bundled_thread_pool_weak(wheel_1_2_0):
    wheel = read_wheel(wheel_1_2_0)
    result = owners.check_runtime_core(wheel, CPU_ROW, shipped.read_libraries(wheel))
    assert result.measured["weak"]["bundled thread pool"] == [
        "executorch/extension/pybindings/_portable_lib.cpython-312-x86_64-linux-gnu.so",
        "executorch/extension/training/pybindings/_training_lib.cpython-312-x86_64-linux-gnu.so"]


def test_every_function_the_components_name_is_kept_from_the_symbol_table():
    for component in owners.COMPONENTS:
        for function in component.functions:
            assert owners.symbol_prefix(function).startswith(elf.CORE_SYMBOL_PREFIXES), (component.name, function)


def test_symbol_prefixes():
    assert elf.mangled_prefix("executorch::runtime::register_backend") == "_ZN10executorch7runtime16register_backendE"
    assert owners.symbol_prefix("executorch::etdump::ETDumpGen::ETDumpGen") == "_ZN10executorch6etdump9ETDumpGenC"
    assert owners.symbol_prefix("pthreadpool_create") == "pthreadpool_create"


# --- before 1.5: PyPI's wheels ----------------------------------------------------------------

def test_pypi_1_2_0_carries_the_core_in_libraries_that_load_together(wheel_1_2_0):
    wheel = read_wheel(wheel_1_2_0)
    result = owners.check_runtime_core(wheel, CPU_ROW, shipped.read_libraries(wheel))
    assert result.status is Status.FAIL
    assert ("libqnn_executorch_backend.so and libcustom_ops_aot_lib.so each define the logging, platform layer, "
            "backend registry (loaded together through libcustom_ops_aot_lib.so)") in result.reason


@pytest.fixture(scope="module")
def pypi_1_4_1_aarch64():
    return read_wheel(pypi_wheel("aarch64", "1.4.1"))


def test_pypi_1_4_1_names_the_copies_its_training_module_carries(pypi_1_4_1):
    result = owners.check_runtime_core(pypi_1_4_1, CPU_ROW, shipped.read_libraries(pypi_1_4_1))
    assert result.status is Status.FAIL  # the LLM and quantized-op libraries load the QNN library's core with their own
    assert "thread pool, XNNPACK delegate, XNNPACK runtime in _portable_lib and _training_lib" in result.reason
    training = "executorch/extension/training/pybindings/_training_lib.cpython-311-x86_64-linux-gnu.so"
    assert all(training in result.measured["owners"][c] for c in ("thread pool", "XNNPACK delegate", "XNNPACK runtime"))


@pytest.mark.network
def test_pypi_1_4_1_aarch64_passes_its_modules_apart(pypi_1_4_1_aarch64):
    """Copies in modules Python loads apart are not failed before 1.5 (docs/releases.md: measured on 1.4.1)."""
    result = owners.check_runtime_core(pypi_1_4_1_aarch64, ROWS["cpu_aarch64"], shipped.read_libraries(pypi_1_4_1_aarch64))
    assert result.status is Status.PASS, result.reason
    assert result.reason.startswith("each runtime component has one definer among the libraries that load together")
    assert "thread pool, XNNPACK delegate, XNNPACK runtime in _portable_lib and _training_lib" in result.reason


# --- from 1.5 on: one owner in the whole wheel ----------------------------------------------------

def test_pypi_1_5_1_has_each_component_in_its_owner(wheel_x86_64):
    wheel = read_wheel(wheel_x86_64)
    result = owners.check_runtime_core(wheel, CPU_ROW, shipped.read_libraries(wheel))
    assert result.status is Status.PASS, result.reason
    assert result.measured["layout"] == "1.5"
    for component, paths in result.measured["owners"].items():
        assert paths == [owners.BY_NAME[component].owner], component
    assert result.measured["owners"]["thread pool"] == [THREADPOOL]
    # The export-side quantized library carries the kernels it registers into torch (upstream's one exception).
    assert result.measured["export_copies"] == {"quantized kernels": ["executorch/kernels/quantized/libquantized_ops_aot_lib.so"]}


def with_files(slim, tmp_path, *, add, drop=()):
    return read_wheel(rewrite_wheel(slim, tmp_path, add=add, drop=drop))


@pytest.mark.slow
def test_a_private_copy_that_nothing_loads_fails_from_1_5(slim_x86_64, tmp_path):
    """1.5.1 with its thread pool library copied beside the extension (no library needs the copy):
    the 1.5 layout fails it; judged as a release before 1.5, the same files pass and name it."""
    private = "executorch/extension/pybindings/libprivate_threadpool.so"
    wheel = with_files(slim_x86_64, tmp_path, add={private: member(slim_x86_64, THREADPOOL)})
    result = owners.check_runtime_core(wheel, CPU_ROW, shipped.read_libraries(wheel))
    assert result.status is Status.FAIL
    assert ("two copies of the runtime's state in one process: libprivate_threadpool.so and libexecutorch_threadpool.so "
            "each define the thread pool, bundled thread pool (one owner in the 1.5 layout: libexecutorch_threadpool.so)"
            ) == result.reason
    as_1_4 = dataclasses.replace(wheel, version=Version("1.4.1"))
    before = owners.check_runtime_core(as_1_4, CPU_ROW, shipped.read_libraries(wheel))
    assert before.status is Status.PASS and "in libprivate_threadpool and libexecutorch_threadpool" in before.reason


@pytest.mark.slow
def test_a_component_outside_its_owner_fails_from_1_5(slim_x86_64, tmp_path):
    """1.5.1 with the thread pool library moved out of executorch/lib: one definer, not the owner."""
    moved = "executorch/extension/pybindings/libthreadpool.so"
    wheel = with_files(slim_x86_64, tmp_path, add={moved: member(slim_x86_64, THREADPOOL)}, drop=(THREADPOOL,))
    result = owners.check_runtime_core(wheel, CPU_ROW, shipped.read_libraries(wheel))
    assert result.status is Status.FAIL
    assert result.reason == ("a runtime component outside its owner: libthreadpool.so defines the thread pool, "
                             f"bundled thread pool, which the 1.5 layout puts in {THREADPOOL}")


@pytest.mark.slow
def test_only_an_export_side_library_may_carry_its_own_kernels(slim_x86_64, tmp_path):
    """A copy of the runtime's quantized kernels in a library that does not link torch is a second registration."""
    copy = "executorch/extension/pybindings/libquantized_copy.so"
    wheel = with_files(slim_x86_64, tmp_path, add={copy: member(slim_x86_64, "executorch/lib/libexecutorch_kernels_quantized.so")})
    result = owners.check_runtime_core(wheel, CPU_ROW, shipped.read_libraries(wheel))
    assert result.status is Status.FAIL
    assert "libquantized_copy.so and libexecutorch_kernels_quantized.so each define the quantized kernels" in result.reason


# --- upstream's `required` flags (_OWNED_COMPONENTS in .ci/scripts/wheel/test_shared_libraries.py, main) ----

OPTIMIZED = "executorch/lib/libexecutorch_kernels_optimized.so"
IN_THE_EXTENSION = "executorch/extension/pybindings/libkernels_in_the_extension.so"


def test_cpu_kernels_outside_an_owner_that_is_not_required_and_not_shipped_pass(slim_x86_64, tmp_path):
    """A build without the optimized kernels links the portable ones into the extension (main's CUDA build on
    the H200: _C defines them): upstream's table marks that owner not required, "a supported configuration"."""
    wheel = with_files(slim_x86_64, tmp_path, add={IN_THE_EXTENSION: member(slim_x86_64, OPTIMIZED)}, drop=(OPTIMIZED,))
    result = owners.check_runtime_core(wheel, CPU_ROW, shipped.read_libraries(wheel))
    assert result.status is Status.PASS, result.reason
    assert ("the CPU kernels in libkernels_in_the_extension.so, its owner not shipped and not required by upstream's "
            "table (the build left it out: a supported configuration)") in result.reason


@pytest.mark.slow
def test_cpu_kernels_outside_their_owner_fail_where_the_owner_ships(slim_x86_64, tmp_path):
    """The same copy with the owner still shipped: two definers, one process."""
    wheel = with_files(slim_x86_64, tmp_path, add={IN_THE_EXTENSION: member(slim_x86_64, OPTIMIZED)})
    result = owners.check_runtime_core(wheel, CPU_ROW, shipped.read_libraries(wheel))
    assert result.status is Status.FAIL
    assert "libkernels_in_the_extension.so and libexecutorch_kernels_optimized.so each define the CPU kernels" in result.reason


def test_a_required_owner_that_does_not_ship_fails(slim_x86_64, tmp_path):
    """The XNNPACK delegate's library dropped, and its code with it: upstream's table requires that owner."""
    xnnpack = "executorch/lib/libexecutorch_backend_xnnpack.so"
    wheel = with_files(slim_x86_64, tmp_path, add={}, drop=(xnnpack,))
    result = owners.check_runtime_core(wheel, CPU_ROW, shipped.read_libraries(wheel))
    assert result.status is Status.FAIL
    assert (f"the wheel ships no {xnnpack}, which owns the XNNPACK delegate, XNNPACK runtime (upstream's table requires it: packaging "
            "dropped it or the build did not make it)") in result.reason


@pytest.mark.slow
def test_the_cuda_owners_are_required_on_a_cuda_wheel_only(slim_x86_64, tmp_path):
    """The CUDA delegate's library dropped from a +cu130 wheel fails; a CPU wheel ships none and passes."""
    parts = cuda_parts(slim_x86_64)
    del parts["executorch/lib/libexecutorch_backend_cuda.so"]
    wheel = make_cuda_wheel(slim_x86_64, tmp_path / "cuda", parts=parts)
    result = owners.check_runtime_core(wheel, CUDA_ROW, shipped.read_libraries(wheel))
    assert result.status is Status.FAIL
    assert ("the wheel ships no executorch/lib/libexecutorch_backend_cuda.so, which owns the CUDA delegate (upstream's "
            "table requires it on a CUDA wheel") in result.reason
    cpu = read_wheel(slim_x86_64)
    assert owners.check_runtime_core(cpu, CPU_ROW, shipped.read_libraries(cpu)).status is Status.PASS


def test_a_required_owner_that_ships_and_defines_none_of_its_component_fails(slim_x86_64, tmp_path):
    """Issue 47: 1.5.1 with its quantized kernels library emptied (the same SONAME, no symbol) PASSed every row."""
    from tests.helpers import empty_library

    quantized = "executorch/lib/libexecutorch_kernels_quantized.so"
    wheel = with_files(slim_x86_64, tmp_path, add={quantized: empty_library("libexecutorch_kernels_quantized.so", tmp_path / "cc")})
    result = owners.check_runtime_core(wheel, CPU_ROW, shipped.read_libraries(wheel))
    assert result.status is Status.FAIL
    assert result.reason.startswith("a runtime component's owner defines none of it: ")
    assert result.reason.endswith(f"{quantized} ships but defines none of the quantized kernels' functions "
                                  "(torch::executor::native::quantize_per_tensor_out, torch::executor::native::dequantize_per_tensor_out): "
                                  "upstream's table names it their owner")
