"""smoke.child.loads: ``libraries load``, ``libraries load before torch``, ``registered once`` (issue 28).

Real libraries of PyPI's 1.5.1 installed into a bare virtual environment (as tests/child/test_extensions.py
does), with a stand-in ``torch`` package that loads a library by path as torch loads libtorch; mutants
made with patchelf.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from smoke.child import loads
from smoke.environment import loaderenv
from smoke.results import CheckResult, Status
from tests.helpers import REPO, THREADPOOL, patched

DATA_LOADER = "executorch/extension/pybindings/data_loader.cpython-311-x86_64-linux-gnu.so"
LIBRARY = "executorch/lib/libexecutorch.so"

QUANTIZED = "executorch/lib/libexecutorch_kernels_quantized.so"
QUANTIZED_COPY = "executorch/lib/libexecutorch_kernels_quantized_copy.so"




# --- libraries load, before and after torch; registered once ----------------------------------------


def _install(venv: Path, files: dict[str, bytes]) -> Path:
    """A bare virtual environment holding ``files`` as an installed executorch (its RECORD lists them)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    for path, data in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)
    info = site / "executorch-1.5.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: executorch\nVersion: 1.5.1\n")
    listed = [path for path in files if path.startswith("executorch/")]
    (info / "RECORD").write_text("".join(f"{path},,\n" for path in listed) + "executorch-1.5.1.dist-info/RECORD,,\n")
    return venv / "bin" / "python"


# A stand-in for torch: importing it loads a library by path, as importing torch loads libtorch.so; a
# library that needs that soname and cannot find it alone then loads (the loader reuses a loaded soname).
FAKE_TORCH = b"import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libexecutorch.so'))\n"


@pytest.fixture
def real_files(wheel_x86_64):
    if not sys.version.startswith("3.11"):
        pytest.skip("the wheel's extension modules are cp311")
    with zipfile.ZipFile(wheel_x86_64) as archive:
        files = {path: archive.read(path) for path in (DATA_LOADER, LIBRARY, THREADPOOL, QUANTIZED)}
    return {**files, "torch/__init__.py": FAKE_TORCH, "torch/lib/libexecutorch.so": files[LIBRARY]}


# The child's way (smoke.child.run): the loads before torch in a fork made before anything imports torch, those
# after it in a fork made right after `import torch`, both collected and judged together (smoke.child.loads.collect).
FORKED = """
import json, sys
from pathlib import Path
from smoke.child import loads
work = Path(sys.argv[1])
assert loads.forkable(), "torch is in site-packages: the loads are forks"
forked = {"before": loads.fork_part(work, "before")}
import torch
forked["after"] = loads.fork_part(work, "after")
print(json.dumps([result.to_json() for result in loads.collect(None, work, forked)]))
"""


@pytest.fixture(params=["process", "forks"])
def how(request) -> str:
    """Each defect is caught both ways: the loads' process of their own (torch in another environment, or the
    serial variant) and the child's forks (issue 35)."""
    return request.param


def _loads(python: Path, out: Path, how: str = "process") -> dict[str, object]:
    env = loaderenv.for_environment(python, REPO).env
    if how == "forks":
        ran = subprocess.run([python, "-c", FORKED, out.parent], env=env, cwd=REPO, timeout=300, capture_output=True, text=True)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        said = [CheckResult.from_json(record) for record in json.loads(ran.stdout.splitlines()[-1])]
        return {result.name: result for result in said}
    ran = subprocess.run([python, "-m", "smoke.child.loads", out], env=env, cwd=REPO, timeout=300, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return {result.name: result for result in loads.judge(json.loads(out.read_text()))}


def test_the_real_libraries_load_in_both_orders_and_register_once(real_files, tmp_path, how):
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json", how)
    assert [r.status for r in results.values()] == [Status.PASS] * 3, [r.line() for r in results.values()]
    assert results["libraries load"].reason == "all 4 load with every symbol bound (RTLD_NOW), each in a process of its own after import torch"
    assert results["libraries load"].measured["libraries"] == sorted([DATA_LOADER, LIBRARY, THREADPOOL, QUANTIZED])


def test_a_library_with_an_undefined_symbol_fails_in_both_orders_naming_it(real_files, tmp_path, patchelf, how):
    # executorch#7086: a library shipped without a library it takes symbols from. Its load is lazy by
    # default (no call yet, no error); with every symbol bound now (RTLD_NOW), the loader names the symbol.
    real_files[THREADPOOL] = patched(real_files[THREADPOOL], tmp_path, patchelf, "--remove-needed", "libexecutorch.so")
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json", how)
    line = results["libraries load"].line()
    assert line.startswith("FAIL libraries load: 1 of 4 do not load with every symbol bound (RTLD_NOW), each in a process "
                           f"of its own after import torch: {THREADPOOL}: ")
    assert "libexecutorch_threadpool.so: undefined symbol: _ZN10executorch" in line
    before = results["libraries load before torch"]
    assert before.status is Status.FAIL and before.measured["only_after_torch"] == []
    assert results["registered once"].status is Status.PASS  # one broken library registers nothing


def test_a_library_that_finds_its_need_only_after_import_torch_fails_before_torch_alone(real_files, tmp_path, patchelf, how):
    # executorch#3049: its RUNPATH to the folder of its need removed, it loads only where torch loaded that need first.
    real_files[DATA_LOADER] = patched(real_files[DATA_LOADER], tmp_path, patchelf, "--remove-rpath")
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json", how)
    assert results["libraries load"].status is Status.PASS  # the order the child has always used hides it
    line = results["libraries load before torch"].line()
    assert line == (f"FAIL libraries load before torch: 1 of 4 do not load (RTLD_NOW) in a process that has not imported "
                    f"torch: {DATA_LOADER} loads only after import torch: alone, libexecutorch.so: cannot open shared "
                    f"object file: No such file or directory")
    assert results["libraries load before torch"].measured["only_after_torch"] == [DATA_LOADER]


def test_a_kernel_library_shipped_twice_aborts_on_the_second_registration_and_both_are_named(real_files, tmp_path, how):
    # executorch#21642: quantized kernels in two libraries; the runtime aborts on the second registration.
    real_files[QUANTIZED_COPY] = real_files[QUANTIZED]
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json", how)
    assert results["libraries load"].status is Status.PASS and results["libraries load before torch"].status is Status.PASS
    line = results["registered once"].line()
    assert line.startswith(f"FAIL registered once: loading the 5 libraries into one process (after import torch, in path order): "
                           f"{QUANTIZED_COPY} registers again what {QUANTIZED} registered: ")
    assert "Re-registering quantized_decomposed::" in line and line.endswith("(and the process was ended by SIGABRT)")


def _library(tmp_path: Path, name: str, body: str, when: str = "constructor") -> bytes:
    """A shared library, made with cc, whose ``when`` function (constructor: as it loads; destructor: as the process
    exits) runs ``body``."""
    source = tmp_path / f"{name}.c"
    source.write_text("#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n"
                      f"__attribute__(({when})) static void run(void) {{ {body} }}\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / f"{name}.so"), str(source), "-ldl"], check=True)
    return (tmp_path / f"{name}.so").read_bytes()


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to make a library that aborts as it loads")
def test_a_library_whose_initializer_aborts_is_named_with_the_signal_and_the_others_still_judged(real_files, tmp_path, how):
    real_files["executorch/lib/libaborts.so"] = _library(tmp_path, "libaborts", 'fprintf(stderr, "static init failed\\n"); abort();')
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json", how)
    assert results["libraries load"].line() == (
        "FAIL libraries load: 1 of 5 do not load with every symbol bound (RTLD_NOW), each in a process of its own after "
        "import torch: executorch/lib/libaborts.so: the process was ended by SIGABRT while loading it (crashed or aborted): "
        "static init failed")
    # Left out of the one process, said so: it is not blamed as a second registration of another library's.
    once = results["registered once"]
    assert once.status is Status.PASS and once.measured["left_out"] == ["executorch/lib/libaborts.so"]
    assert once.reason.startswith("the 4 libraries loaded into one process (after import torch) register nothing twice and "
                                  "end nothing (1 left out, which do not load alone or load only as another's need: see libraries load)")


@pytest.mark.slow
def test_a_library_that_loads_only_as_the_need_of_an_extension_module_passes_naming_it(real_files, tmp_path):
    """The CUDA shims of a 1.2.0 CUDA build take the runtime's logging from _portable_lib, an extension module
    that needs them: alone they do not load (undefined symbol), as they are ever loaded they do (H200,
    2026-12-04), and no library can name an extension module as its need. Not a FAIL. The same file loaded
    by a plain library is underlinking (it could name its provider), and with no loader at all it FAILs."""
    (tmp_path / "needsym.c").write_text("extern int provided(void);\nint use(void) { return provided(); }\n")
    (tmp_path / "loader.c").write_text("int provided(void) { return 1; }\nextern int use(void);\nint go(void) { return use(); }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libneedsym.so"), str(tmp_path / "needsym.c")], check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "loader.so"), str(tmp_path / "loader.c"),
                    f"-L{tmp_path}", "-lneedsym", "-Wl,-rpath,$ORIGIN"], check=True)
    needsym, loader = (tmp_path / "libneedsym.so").read_bytes(), (tmp_path / "loader.so").read_bytes()
    module = "executorch/lib/loader.cpython-311-x86_64-linux-gnu.so"
    as_module = {**real_files, "executorch/lib/libneedsym.so": needsym, module: loader}
    results = _loads(_install(tmp_path / "venv", as_module), tmp_path / "loads.json")
    for name in ("libraries load", "libraries load before torch"):
        assert results[name].status is Status.PASS, results[name].line()
        assert results[name].reason.endswith("; 1 not alone but as the need of the extension module that loads them, their "
                                             f"symbols bound in its scope: executorch/lib/libneedsym.so as a need of {module}"), \
            results[name].reason
    assert results["registered once"].status is Status.PASS
    # Loaded by a plain library: underlinking, a FAIL naming it.
    as_library = {**real_files, "executorch/lib/libneedsym.so": needsym, "executorch/lib/libloader.so": loader}
    results = _loads(_install(tmp_path / "venv-library", as_library), tmp_path / "loads-library.json")
    assert results["libraries load"].status is Status.FAIL
    assert "executorch/lib/libneedsym.so: " in results["libraries load"].reason
    assert "undefined symbol: provided" in results["libraries load"].reason
    # Nothing ships that loads it: alone is the only way, and it does not load.
    alone = {**real_files, "executorch/lib/libneedsym.so": needsym}
    results = _loads(_install(tmp_path / "venv-alone", alone), tmp_path / "loads-alone.json")
    assert results["libraries load"].status is Status.FAIL


def test_the_verdict_is_judged_as_data():
    verdict = {"libraries": ["a.so", "b.so"], "before": {"a.so": {"error": None}, "b.so": {"error": "x: undefined symbol: y"}},
               "after": {"a.so": {"error": None}, "b.so": {"error": "x: undefined symbol: y"}}, "together": None,
               "torch_error": "ModuleNotFoundError: No module named 'torch'", "seconds": 1.0}
    results = loads.judge(verdict)
    assert results[0].line() == ("FAIL libraries load: import torch failed in the environment, so no library could be loaded "
                                 "after it: ModuleNotFoundError: No module named 'torch'")
    assert results[1].reason.endswith("b.so: x: undefined symbol: y") and "only after" not in results[1].reason
    assert results[2].status is Status.SKIP
    assert [r.status for r in loads.judge({**verdict, "libraries": []})] == [Status.SKIP] * 3


@pytest.mark.parametrize(("incident", "said"), [
    ({"library": "b.so", "after": "a.so", "also": ["c.so"], "seen": "Re-registering x"},
     "b.so registers again what a.so registered (loading c.so before it does the same): Re-registering x"),
    ({"library": "b.so", "after": None, "also": [], "alone": True, "seen": "the process was ended by SIGABRT: boom"},
     "b.so ends the process when loaded alone after import torch: the process was ended by SIGABRT: boom"),
    ({"library": "b.so", "after": None, "also": [], "alone": True, "seen": "Re-registering x"},
     "b.so registers something twice when loaded alone into a process beside nothing else of the wheel's: "
     "Re-registering x"),
    ({"library": "b.so", "after": None, "also": [], "seen": "Re-registering x"},
     "b.so registers again what the libraries loaded before it registered (no one of them loaded alone before it does): "
     "Re-registering x"),
])
def test_registered_once_names_who_registered_first_as_far_as_it_was_found(incident, said):
    ok = {"error": None}
    verdict = {"libraries": ["a.so", "b.so", "c.so"], "before": dict.fromkeys(["a.so", "b.so", "c.so"], ok),
               "after": dict.fromkeys(["a.so", "b.so", "c.so"], ok), "torch_error": None, "seconds": 1.0,
               "together": {"loaded": 3, "errors": {}, "left_out": [], "incident": incident, "seconds": 0.1}}
    once = loads.judge(verdict)[2]
    assert once.line() == f"FAIL registered once: loading the 3 libraries into one process (after import torch, in path order): {said}"


# --- a process counts as done only when it says it reached its end (issue 37) ------------------------

@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to make a library that ends the process")
def test_a_library_whose_initializer_exits_0_fails_and_does_not_hide_a_second_registration(real_files, tmp_path, how):
    # Its initializer calls _exit(0): before, each of its loads "loaded" (the process exited 0), and, loaded first
    # into the one process, it ended that process before the kernels shipped twice were loaded (registered once PASSed).
    real_files["executorch/lib/libaaa_exits.so"] = _library(tmp_path, "libaaa_exits", 'fputs("bye\\n", stderr); _exit(0);')
    real_files[QUANTIZED_COPY] = real_files[QUANTIZED]
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json", how)
    for name in ("libraries load", "libraries load before torch"):
        assert results[name].status is Status.FAIL
        assert ("executorch/lib/libaaa_exits.so: the process ended (exit 0) while loading it, before the load returned: "
                "its initializer ends the process: bye") in results[name].reason
    line = results["registered once"].line()
    assert line.startswith("FAIL registered once: loading the 5 libraries into one process (after import torch, in path order): "
                           f"{QUANTIZED_COPY} registers again what {QUANTIZED} registered: "), line


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to make a library that ends the process")
def test_a_library_that_ends_the_one_process_with_exit_1_fails_registered_once(real_files, tmp_path, how):
    # Alone it loads; loaded after the quantized kernels (as in the one process, in path order) it exits 1.
    real_files["executorch/lib/libzzz_exits.so"] = _library(
        tmp_path, "libzzz_exits", 'if (dlopen("libexecutorch_kernels_quantized.so", RTLD_NOW | RTLD_NOLOAD)) _exit(1);')
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json", how)
    assert results["libraries load"].status is Status.PASS, results["libraries load"].line()
    assert results["registered once"].line() == (
        "FAIL registered once: loading the 5 libraries into one process (after import torch, in path order): "
        f"executorch/lib/libzzz_exits.so ends the process when loaded after {QUANTIZED}: the process ended (exit 1) "
        "during this load, before the loads after it: it printed nothing")


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to make a library whose destructor aborts")
def test_a_library_whose_destructor_aborts_at_exit_is_named_as_such(real_files, tmp_path, how):
    """Issue 48 (executorch#22653): a shipped library whose destructor calls abort() was caught only end to end, as
    'child process ended by SIGABRT', with no line naming it: the loads' forks ended with os._exit, which skips the
    destructors. Loaded before torch, its fork now exits through exit(): the library is named, and why."""
    real_files["executorch/lib/libdies.so"] = _library(tmp_path, "libdies", 'fprintf(stderr, "teardown failed\\n"); abort();',
                                                      when="destructor")
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json", how)
    assert results["libraries load"].status is Status.PASS  # it loads: the defect is at exit
    before = results["libraries load before torch"]
    assert before.line() == (
        "FAIL libraries load before torch: 1 of 5 do not load (RTLD_NOW), or end the process as it exits, in a process that "
        "has not imported torch: executorch/lib/libdies.so: it loaded, then the process was ended by SIGABRT as it exited "
        "(its destructors run): a destructor of it, or of a library it loaded, ends the process (executorch#22653): "
        "teardown failed")
    assert before.measured["at_exit"] == ["executorch/lib/libdies.so"] and before.measured["only_after_torch"] == []


def test_a_child_that_dies_as_it_exits_after_its_end_record_is_named_so():
    from smoke.environment.follow import ChildOutcome, judge_child

    outcome = ChildOutcome({}, True, -6, False, None, [])
    result = judge_child(outcome, 600, Path("/nonexistent/child.log"))
    assert result is not None and result.line().startswith(
        "FAIL child process: ended by SIGABRT as it exited, after its work was done and recorded (the checks above stand): "
        "a destructor of a library it loaded ends the process (executorch#22653; see libraries load before torch)")
