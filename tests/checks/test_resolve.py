"""smoke.checks.resolve: libraries resolve, dependency libraries installed.

Each check passes on a real wheel (PyPI's 1.5.1 with the torch requirement it lacks) and fails on a
mutant of it with one defect: a library taken out, a need no policy allows, a dependency's library
missing as installed.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from smoke.checks import resolve, shipped
from smoke.readers.wheel import read_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import SHIMS, THREADPOOL, judge, patched_member, rewrite_wheel

CPU_ROW = ROWS["cpu_x86_64"]


# --- libraries resolve ------------------------------------------------------------------------

@pytest.mark.slow
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


@pytest.mark.slow
def test_a_library_taken_out_fails_naming_it_and_who_needs_it(declared_slim, tmp_path):
    result = judge(resolve.LIBRARIES_RESOLVE, rewrite_wheel(declared_slim, tmp_path, drop=(THREADPOOL,)))
    assert result.status is Status.FAIL
    assert re.search(r"executorch/lib/libexecutorch_backend_xnnpack\.so needs libexecutorch_threadpool\.so: not in the wheel "
                     r"where its RUNPATH \$ORIGIN:\S+ leads, not in a declared dependency, and not a system library", result.reason)




def patched(declared_slim, tmp_path, patchelf, *args) -> Path:
    return patched_member(declared_slim, THREADPOOL, tmp_path, patchelf, *args)


@pytest.mark.slow
def test_a_need_no_policy_allows_fails(declared_slim, tmp_path, patchelf):
    wheel = patched(declared_slim, tmp_path, patchelf, "--add-needed", "libssl.so.3")
    result = judge(resolve.LIBRARIES_RESOLVE, wheel)
    assert result.status is Status.FAIL
    assert result.reason.startswith(f"{THREADPOOL} needs libssl.so.3: not in the wheel where its RUNPATH")
    assert "not a system library the tag's policy allows" in result.reason


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


@pytest.mark.slow
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
    # nvidia-cuda-runtime 13.0.96 ships libcudart.so.13 alone (smoke/readers/dependency_files.json): the file check
    # already names torch, not the runtime
    result = resolve.check_libraries_resolve(wheel, CPU_ROW, libraries)
    assert result.status is Status.FAIL
    assert (f"{c} needs libtorch_python.so, libtorch.so, libtorch_cpu.so, libc10.so: its RUNPATH leads into torch/, the "
            "folder of a package the wheel does not declare (Requires-Dist), so pip installs none: declare torch"
            ) in result.measured["problems"]
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


# --- what the paired torch and the declared packages ship (issue 37: a need is placed only where it is) ----------

ETDUMP = "executorch/lib/libexecutorch_etdump.so"


@pytest.mark.slow
def test_a_wheel_without_its_own_library_fails_though_c_searches_torchs_folder(declared_slim, tmp_path):
    """_C needs libexecutorch_etdump.so, which the wheel ships; its RUNPATH also searches torch/lib, and torch is declared.
    That torch 2.14 ships no such file (read from its wheel) is what fails the copy without it: it passed before."""
    result = judge(resolve.LIBRARIES_RESOLVE, rewrite_wheel(declared_slim, tmp_path, drop=(ETDUMP,)))
    assert result.status is Status.FAIL
    assert re.search(rf"{re.escape(C_MODULE)} needs libexecutorch_etdump\.so: not in the wheel where its RUNPATH \S+ leads, "
                     r"not in torch/lib as torch 2\.14 \(torch-2\.14\.1-cp311-cp311-manylinux_2_28_x86_64\.whl\) ships it, "
                     r"and not a system library the tag's policy allows", result.reason), result.reason
    # what stays placed in torch is what its wheel ships
    assert result.measured["found"][f"{C_MODULE}: libtorch.so"] == (
        "torch (declared), in torch/lib, as torch 2.14 (torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl) ships it: "
        "checked once installed")


CU126 = dict(label="1.5.1+cu126", requirement='nvidia-cuda-runtime-cu12==12.6.77; platform_system == "Linux"')


@pytest.mark.slow
def test_a_need_left_to_a_torch_the_gate_has_not_read_is_judged_only_end_to_end(slim_x86_64, tmp_path):
    """A CUDA 12.6 build of 1.5.1: no torch 2.14 cu126 wheel was read (nor nvidia-cuda-runtime-cu12), so its needs of
    torch's libraries are said to be judged end to end, not passed on the assumption that torch/lib holds them."""
    from tests.helpers import make_cuda_wheel

    wheel = make_cuda_wheel(slim_x86_64, tmp_path, **CU126)
    result = judge(resolve.LIBRARIES_RESOLVE, wheel.path, ROWS["cuda_x86_64"])
    assert result.status is Status.SKIP, result.reason
    assert re.match(r"\d+ needs judged only end to end, not here: libtorch\S*, .*needed by \d+ files: the gate has read "
                    r"no torch 2\.14 cu126 wheel for x86_64 \(smoke/readers/dependency_files\.json\), the torch this "
                    r"release pairs with; .*the other \d+ found: ", result.reason), result.reason
    assert result.measured["unjudged"][f"{SHIMS}: libcudart.so.13"].startswith(
        "the gate has read no wheel of nvidia-cuda-runtime-cu12==12.6.77")


@pytest.mark.slow
def test_an_aarch64_wheels_torch_needs_are_placed_by_the_aarch64_torch_read(declared_aarch64):
    result = judge(resolve.LIBRARIES_RESOLVE, declared_aarch64, ROWS["cpu_aarch64"])
    assert result.status is Status.PASS, result.reason
    assert result.measured["found"][f"{C_MODULE.replace('x86_64', 'aarch64')}: libtorch.so"] == (
        "torch (declared), in torch/lib, as torch 2.14 (torch-2.14.1-cp311-cp311-manylinux_2_28_aarch64.whl) ships it: "
        "checked once installed")


@pytest.mark.slow
def test_a_need_left_to_a_version_of_a_declared_package_the_gate_has_not_read_is_judged_only_end_to_end(slim_x86_64, tmp_path):
    """The CUDA shims need libcudart.so.13 from nvidia/cu13/lib: placed where the declared nvidia-cuda-runtime is a version
    whose wheel was read (13.0.96), judged only end to end where it is one that was not."""
    from tests.helpers import make_cuda_wheel

    known = make_cuda_wheel(slim_x86_64, tmp_path / "known")
    found = judge(resolve.LIBRARIES_RESOLVE, known.path, ROWS["cuda_x86_64"]).measured["found"]
    assert found[f"{SHIMS}: libcudart.so.13"].startswith(
        "nvidia-cuda-runtime (declared), in nvidia/cu13/lib, as nvidia-cuda-runtime "
        "(nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl) ships it")
    unread = make_cuda_wheel(slim_x86_64, tmp_path / "unread", requirement='nvidia-cuda-runtime==13.2.51; platform_system == "Linux"')
    result = judge(resolve.LIBRARIES_RESOLVE, unread.path, ROWS["cuda_x86_64"])
    assert result.status is Status.SKIP, result.reason
    assert ("libcudart.so.13, needed by 1 file: the gate has read no wheel of nvidia-cuda-runtime==13.2.51; "
            'platform_system == "Linux" for x86_64 (smoke/readers/dependency_files.json)') in result.reason


# --- undefined symbols it can see -----------------------------------------------------------------------

@pytest.mark.slow
def test_a_symbol_a_shipped_library_no_longer_defines_fails(declared_slim, tmp_path):
    """libexecutorch_etdump.so built without ETDumpGen::get_etdump_data, which _C calls: every library is there, and
    `import executorch` fails with "undefined symbol". It passed before (symbols were judged only end to end)."""
    from tests.helpers import member, without_symbol

    symbol = "_ZN10executorch6etdump9ETDumpGen15get_etdump_dataEv"
    wheel = rewrite_wheel(declared_slim, tmp_path, add={ETDUMP: without_symbol(member(declared_slim, ETDUMP), symbol)})
    result = judge(resolve.LIBRARIES_RESOLVE, wheel)
    assert result.status is Status.FAIL
    assert (f"{C_MODULE} needs 1 symbol of ExecuTorch's that neither it nor a shipped library loaded with it defines ({symbol}): "
            "the load fails on it (undefined symbol)") in result.measured["problems"]
    assert result.measured["symbols_unmet"] == {C_MODULE: [symbol]}  # the one file that calls it (measured: the loader
    # refuses _C so, "undefined symbol: _ZN10executorch6etdump9ETDumpGen15get_etdump_dataEv", with torch 2.14.1 beside it)


def test_the_real_wheels_undefined_symbols_of_executorch_are_each_defined_where_they_load(declared_slim):
    result = judge(resolve.LIBRARIES_RESOLVE, declared_slim)
    assert result.status is Status.PASS, result.reason
    assert result.measured["symbols_judged"] > 0 and result.measured["symbols_unmet"] == {}
    assert re.search(r"; \d+ undefined symbols of ExecuTorch's namespaces, each defined by a shipped library loaded with "
                     r"them \(the other \d+ are the loader's to bind, judged end to end\)$", result.reason), result.reason


# --- a library loaded only as another's need binds its symbols in that one's scope (issue 45, on the GPU) --------------

PYBIND_1_2 = "executorch/extension/pybindings/_portable_lib.cpython-312-x86_64-linux-gnu.so"
RUNTIME_ABORT = "_ZN10executorch7runtime13runtime_abortEv"


def _patched_1_2_0(slim, folder, pybind: bytes | None = None) -> Path:
    """The slim wheel with the real symbol tables of 1.2.0's patched CUDA build: shims that define none of the runtime
    (they take it from ``_portable_lib``, which needs them) and the module that loads them."""
    from tests.helpers import cuda_parts, extract, make_cuda_wheel

    parts = {**cuda_parts(slim), SHIMS: extract("patched", SHIMS), PYBIND_1_2: pybind or extract("patched", PYBIND_1_2)}
    return make_cuda_wheel(slim, folder, parts=parts, label="1.2.0+cu130").path


@pytest.mark.slow
def test_a_library_loaded_as_a_need_takes_the_runtime_s_symbols_from_the_module_that_loads_it(declared_slim, tmp_path):
    """On the H100, 2026-12-06, this build loaded, ran and matched eager (its `libraries load` PASSed, the shims loaded
    as `_portable_lib`'s need), while `libraries resolve` FAILed it: "libaoti_cuda_shims.so needs 3 symbols of
    ExecuTorch's that neither it nor a shipped library it loads defines"."""
    result = judge(resolve.LIBRARIES_RESOLVE, _patched_1_2_0(declared_slim, tmp_path))
    assert SHIMS not in result.measured["symbols_unmet"], result.reason
    assert "libaoti_cuda_shims.so needs" not in result.reason


@pytest.mark.slow
def test_a_symbol_the_loading_module_does_not_define_either_fails_naming_the_library_that_needs_it(declared_slim, tmp_path):
    from tests.helpers import extract, without_symbol

    pybind = without_symbol(extract("patched", PYBIND_1_2), RUNTIME_ABORT)
    result = judge(resolve.LIBRARIES_RESOLVE, _patched_1_2_0(declared_slim, tmp_path, pybind))
    assert result.status is Status.FAIL
    assert result.measured["symbols_unmet"][SHIMS] == [RUNTIME_ABORT]
    assert (f"{SHIMS} needs 1 symbol of ExecuTorch's that neither it nor a shipped library loaded with it defines "
            f"({RUNTIME_ABORT}): the load fails on it (undefined symbol)") in result.measured["problems"]


# Every library of PyPI's 1.5.1 that lists `_C` among its needs.
LOADERS_OF_C = ("executorch/extension/llm/runner/_llm_runner.cpython-311-x86_64-linux-gnu.so",
                "executorch/extension/llm/custom_ops/libcustom_ops_aot_lib.so",
                "executorch/kernels/quantized/libquantized_ops_aot_lib.so")


@pytest.mark.slow
def test_an_extension_module_other_libraries_load_still_binds_its_symbols_in_its_own_scope(declared_slim, tmp_path):
    """Python imports an extension module by its path, whoever else lists it: `_C` without its DT_NEEDED on the profiler
    cannot bind the profiler's symbols, though every library that loads `_C` is given that need."""
    from tests.helpers import patchelf_path

    patchelf = patchelf_path()
    wheel = patched_member(declared_slim, C_MODULE, _folder(tmp_path / "c"), patchelf, "--remove-needed", "libexecutorch_etdump.so")
    for n, loader in enumerate(LOADERS_OF_C):
        wheel = patched_member(wheel, loader, _folder(tmp_path / f"loader-{n}"), patchelf, "--add-needed", "libexecutorch_etdump.so")
    result = judge(resolve.LIBRARIES_RESOLVE, wheel)
    assert result.status is Status.FAIL
    assert C_MODULE in result.measured["symbols_unmet"], result.reason
    assert all("6etdump" in symbol for symbol in result.measured["symbols_unmet"][C_MODULE]), result.measured["symbols_unmet"]


def _folder(path: Path) -> Path:
    path.mkdir()
    return path
