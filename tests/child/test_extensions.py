"""smoke.child.extensions: every extension module the installed wheel ships imports, each in a process of its
own, in the clean loader environment; a failure names the module and the loader's message.

The real-process tests install real files of PyPI's 1.5.1 wheel (``data_loader``, which needs
``libexecutorch.so`` through its RUNPATH) into a bare virtual environment, in seconds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from smoke.child import extensions
from smoke.environment import loaderenv
from smoke.results import CheckResult, Status
from tests.helpers import REPO

DATA_LOADER = "executorch/extension/pybindings/data_loader.cpython-311-x86_64-linux-gnu.so"
LIBRARY = "executorch/lib/libexecutorch.so"


@pytest.mark.parametrize(("path", "name"), [
    ("executorch/extension/pybindings/_portable_lib.cpython-311-x86_64-linux-gnu.so", "executorch.extension.pybindings._portable_lib"),
    ("executorch/backends/qualcomm/python/PyQnnManagerAdaptor.cpython-311-x86_64-linux-gnu.so",
     "executorch.backends.qualcomm.python.PyQnnManagerAdaptor"),
    ("executorch/kernels/_ops.abi3.so", "executorch.kernels._ops"),
    ("executorch/lib/libexecutorch.so", None),  # a library, not a module
    ("executorch/__pycache__/version.cpython-311.pyc", None),
    ("../../bin/flatc.cpython-311-x86_64-linux-gnu.so", None),  # outside site-packages
    ("executorch/lib/not-a-name.cpython-311-x86_64-linux-gnu.so", None),
])
def test_module_name_from_its_path(path, name):
    assert extensions.module_name(path) == name


def test_a_failure_names_each_module_and_its_error():
    outcomes = [{"module": "a.ok", "error": None, "seconds": 0.1},
                {"module": "a.qnn", "error": "ImportError: Please install the cpuinfo with pip install py-cpuinfo.", "seconds": 1.2}]
    result = extensions.judge(outcomes, 1.3)
    assert result.status is Status.FAIL
    assert result.reason == ("1 of 2 do not import in a clean environment: "
                             "a.qnn: ImportError: Please install the cpuinfo with pip install py-cpuinfo.")
    assert result.measured["imported"] == 1 and result.measured["modules"] == ["a.ok", "a.qnn"]
    passed = extensions.judge(outcomes[:1], 0.1)
    assert passed.status is Status.PASS and passed.reason.startswith("all 1 import, each in a process of its own")
    assert extensions.judge([], 0.0).status is Status.SKIP


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
    (info / "RECORD").write_text("".join(f"{path},,\n" for path in files) + "executorch-1.5.1.dist-info/RECORD,,\n")
    return venv / "bin" / "python"


@pytest.fixture
def real_files(wheel_x86_64):
    if not sys.version.startswith("3.11"):
        pytest.skip("the wheel's extension modules are cp311")
    with zipfile.ZipFile(wheel_x86_64) as archive:
        return {path: archive.read(path) for path in (DATA_LOADER, LIBRARY)}


def _import_all(python: Path, env: dict[str, str], out: Path) -> dict:
    subprocess.run([python, "-m", "smoke.child.extensions", out], env=env, cwd=REPO, check=True, timeout=120)
    return json.loads(out.read_text())


def test_the_real_module_imports_with_its_library(real_files, tmp_path):
    python = _install(tmp_path / "venv", real_files)
    verdict = _import_all(python, loaderenv.for_environment(python, REPO).env, tmp_path / "out.json")
    assert [(o["module"], o["error"]) for o in verdict["outcomes"]] == [("executorch.extension.pybindings.data_loader", None)]


def test_a_library_taken_out_fails_even_with_a_copy_on_the_callers_library_path(real_files, tmp_path, monkeypatch):
    # The hole: the wheel lacks libexecutorch.so; the shell running the gate points LD_LIBRARY_PATH at a copy.
    copies = tmp_path / "copies"
    copies.mkdir()
    (copies / "libexecutorch.so").write_bytes(real_files.pop(LIBRARY))
    python = _install(tmp_path / "venv", real_files)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(copies))
    # The control: with the caller's LD_LIBRARY_PATH, the broken wheel's module imports (the hole is real).
    leaky = {**os.environ, "PYTHONPATH": str(REPO)}
    assert _import_all(python, leaky, tmp_path / "leaky.json")["outcomes"][0]["error"] is None
    clean = loaderenv.for_environment(python, REPO)
    assert clean.removed == ("LD_LIBRARY_PATH",)
    verdict = _import_all(python, clean.env, tmp_path / "clean.json")
    result = extensions.judge(verdict["outcomes"], verdict["seconds"])
    assert result.status is Status.FAIL
    assert ("executorch.extension.pybindings.data_loader: ImportError: libexecutorch.so: cannot open shared object file: "
            "No such file or directory") in result.reason


def test_a_crash_while_importing_one_module_is_named_and_the_others_still_judged(real_files, tmp_path):
    # The module's package dies with SIGSEGV as it is imported (its file is never reached).
    crashing = {"executorch/crashes/__init__.py": b"import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
                "executorch/crashes/mod.cpython-311-x86_64-linux-gnu.so": b""}
    python = _install(tmp_path / "venv", {**real_files, **crashing})
    verdict = _import_all(python, loaderenv.for_environment(python, REPO).env, tmp_path / "out.json")
    result = extensions.judge(verdict["outcomes"], verdict["seconds"])
    assert result.status is Status.FAIL and result.measured["imported"] == 1
    assert "executorch.crashes.mod: the process was ended by SIGSEGV" in result.reason
    assert "data_loader" not in result.reason


def test_an_exception_says_where_it_was_raised(real_files, tmp_path):
    # 1.4.1's PyQnnManagerAdaptor, in small: its package imports a module the wheel does not declare.
    undeclared = {"executorch/qnn/__init__.py": b"\n\nimport cpuinfo_not_declared\n",
                  "executorch/qnn/PyQnnManagerAdaptor.cpython-311-x86_64-linux-gnu.so": b""}
    # A package that turns the loader's error into its own, as 1.4.1's LLM runner does: both are said.
    hiding = {"executorch/runner/__init__.py": b"try:\n    from executorch.runner import _llm_runner\n"
                                               b"except ImportError:\n    raise RuntimeError('LLM runner is not installed')\n",
              "executorch/runner/_llm_runner.cpython-311-x86_64-linux-gnu.so": b"not an ELF file"}
    python = _install(tmp_path / "venv", {**real_files, **undeclared, **hiding})
    verdict = _import_all(python, loaderenv.for_environment(python, REPO).env, tmp_path / "out.json")
    errors = {o["module"]: o["error"] for o in verdict["outcomes"]}
    assert errors["executorch.qnn.PyQnnManagerAdaptor"] == ("ModuleNotFoundError: No module named 'cpuinfo_not_declared' "
                                                          "(raised in executorch/qnn/__init__.py line 3)")
    assert errors["executorch.runner._llm_runner"].startswith("RuntimeError: LLM runner is not installed (from ImportError: ")
    assert "_llm_runner.cpython-311-x86_64-linux-gnu.so: file too short" in errors["executorch.runner._llm_runner"]


def test_torch_from_another_environment_stands_in_for_site_packages_and_says_so(tmp_path):
    # --torch-from: a .pth leads to another environment's torch, which $ORIGIN/../../../torch/lib cannot reach.
    import subprocess
    import sys

    from smoke.child import extensions
    from tests.helpers import REPO

    other = tmp_path / "other-env"
    (other / "torch").mkdir(parents=True)
    (other / "torch" / "__init__.py").write_text("")
    code = "import sys; sys.path.insert(0, sys.argv[1]); from smoke.child.extensions import torch_outside; print(torch_outside())"
    ran = subprocess.run([sys.executable, "-c", code, str(other)], capture_output=True, text=True, cwd=REPO)
    assert ran.stdout.strip() == str(other / "torch" / "lib"), ran.stderr
    # Here torch is pip-installed beside the rest: nothing stands in.
    ran = subprocess.run([sys.executable, "-c", "from smoke.child.extensions import torch_outside; print(torch_outside())"],
                         capture_output=True, text=True, cwd=REPO)
    assert ran.stdout.strip() == "None", ran.stderr
    result = extensions.judge([{"module": "executorch.extension.pybindings._portable_lib", "error": None, "seconds": 1.0}], 1.0,
                              "/opt/torch/.venv/lib/python3.12/site-packages/torch/lib")
    assert ("; torch is outside site-packages, so /opt/torch/.venv/lib/python3.12/site-packages/torch/lib stood in for "
            "site-packages/torch/lib: executorch.extension.pybindings._portable_lib") in result.reason


# --- a process counts as done only when it says it reached its end; imported together (issue 37) --------

def _module(tmp_path: Path, name: str, body: str) -> bytes:
    """An extension module compiled here: its PyInit runs ``body`` first, then makes an empty module."""
    import sysconfig

    source = tmp_path / f"{name}.c"
    source.write_text("#include <Python.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n"
                      f"static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, \"{name}\", NULL, -1, NULL}};\n"
                      f"PyMODINIT_FUNC PyInit_{name}(void) {{ {body} return PyModule_Create(&def); }}\n")
    built = tmp_path / f"{name}.so"
    subprocess.run(["cc", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", "-o", str(built), str(source)],
                   check=True)
    return built.read_bytes()


needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to make an extension module")


@needs_cc
def test_a_module_whose_init_exits_0_does_not_import(real_files, tmp_path):
    exits = {"executorch/exits.cpython-311-x86_64-linux-gnu.so": _module(tmp_path, "exits", "_exit(0);")}
    python = _install(tmp_path / "venv", {**real_files, **exits})
    verdict = _import_all(python, loaderenv.for_environment(python, REPO).env, tmp_path / "out.json")
    result = extensions.judge(verdict["outcomes"], verdict["seconds"], None, verdict["together"])
    assert result.status is Status.FAIL and result.measured["imported"] == 1
    assert ("executorch.exits: the process exited 0 while importing it, before the import returned (code run by the "
            "import ends the process): it printed nothing") in result.reason


def _registering_one_kernel(tmp_path: Path) -> dict[str, bytes]:
    """Two extension modules that each register a kernel in a process-wide registry (an environment variable stands in
    for it); the second registration prints the runtime's words and aborts, as ExecuTorch's kernel registry does
    (executorch#21642)."""
    register = ('if (getenv("SMOKE_TEST_KERNEL")) { fputs("Re-registering aten::add.out\\n", stderr); abort(); } '
                'setenv("SMOKE_TEST_KERNEL", "1", 1);')
    return {f"executorch/{name}.cpython-311-x86_64-linux-gnu.so": _module(tmp_path, name, register)
            for name in ("kernels_a", "kernels_b")}


def _in_the_childs_fork(python: Path, tmp_path: Path) -> CheckResult:
    """``extension modules import`` judged the child's way (``FORKED``) in the environment of ``python``."""
    work = tmp_path / "work"
    work.mkdir()
    ran = subprocess.run([python, "-c", FORKED, work], env=loaderenv.for_environment(python, REPO).env, cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return CheckResult.from_json(json.loads(ran.stdout.splitlines()[-1]))


@needs_cc
def test_two_modules_that_register_one_thing_each_import_alone_and_fail_together(real_files, tmp_path):
    twice = _registering_one_kernel(tmp_path)
    python = _install(tmp_path / "venv", {**real_files, **twice})
    verdict = _import_all(python, loaderenv.for_environment(python, REPO).env, tmp_path / "out.json")
    assert [o["error"] for o in verdict["outcomes"]] == [None, None, None]  # each alone imports
    result = extensions.judge(verdict["outcomes"], verdict["seconds"], None, verdict["together"])
    assert result.line() == ("FAIL extension modules import: each imports alone, but imported together into one process "
                             "(in name order) executorch.kernels_b registers again what was registered after "
                             "executorch.kernels_a: Re-registering aten::add.out")


# The child's way (smoke.child.run): each module alone in a process of the imports' own, and all of them into one
# process that is a fork of the child made after its imports (here: a process that imported nothing of the wheel's).
FORKED = """
import json, sys
from pathlib import Path
from smoke.child import extensions
work = Path(sys.argv[1])
together = extensions.fork_together(work)
result = extensions.collect(extensions.start_extensions_process(work, alone_only=True), work, together)
print(json.dumps(result.to_json()))
"""


@needs_cc
def test_two_modules_that_register_one_thing_fail_together_in_the_childs_fork(real_files, tmp_path):
    twice = _registering_one_kernel(tmp_path)
    python = _install(tmp_path / "venv", {**real_files, **twice})
    result = _in_the_childs_fork(python, tmp_path)
    assert result.line() == ("FAIL extension modules import: each imports alone, but imported together into one process "
                             "(in name order, after torch and executorch.exir) executorch.kernels_b registers again what was "
                             "registered after executorch.kernels_a: Re-registering aten::add.out")


@needs_cc
def test_the_real_module_and_another_import_together_in_the_childs_fork_and_say_so(real_files, tmp_path):
    real_files["executorch/plain.cpython-311-x86_64-linux-gnu.so"] = _module(tmp_path, "plain", "")
    python = _install(tmp_path / "venv", real_files)
    result = _in_the_childs_fork(python, tmp_path)
    assert result.status is Status.PASS, result.line()
    assert result.reason.startswith("all 2 import, each in a process of its own with a clean loader environment, and "
                                    "together into one process that had imported torch and executorch.exir (")


@needs_cc
def test_the_real_module_and_another_import_together_and_say_so(real_files, tmp_path):
    real_files["executorch/plain.cpython-311-x86_64-linux-gnu.so"] = _module(tmp_path, "plain", "")
    python = _install(tmp_path / "venv", real_files)
    verdict = _import_all(python, loaderenv.for_environment(python, REPO).env, tmp_path / "out.json")
    result = extensions.judge(verdict["outcomes"], verdict["seconds"], None, verdict["together"])
    assert result.status is Status.PASS, result.line()
    assert result.reason.startswith("all 2 import, each in a process of its own with a clean loader environment, and "
                                    "together into one process (")


# The child's way where CUDA's driver was initialised by its imports (smoke.child.run.fork_after_imports): no fork, and
# the modules' import into one process a fresh interpreter started at once, beside the exports. A stand-in driver that
# answers as an initialised one (tests/child/test_forks.py) makes the child take that way; the process is waited for
# to its end before the child collects anything, as the exports would be.
STARTED_EARLY = """
import ctypes, json, sys
from pathlib import Path
ctypes.CDLL(sys.argv[2])
from smoke import proc
from smoke.child import extensions, run
work = Path(sys.argv[1])
imports = extensions.start_extensions_process(work, alone_only=True)
forked = run.Forks()
run.fork_after_imports(work, forked)
for control in forked.controls.values():
    proc.end(control)
modules, together = forked.together
together.wait(120)
ended = together.poll() is not None and together.log.stat().st_size > 0
result = extensions.collect(imports, work, forked.together)
print(type(together).__name__, ended)
print(json.dumps(result.to_json()))
"""


def _started_early(python: Path, tmp_path: Path) -> tuple[str, CheckResult]:
    from tests.child.test_forks import _driver

    work = tmp_path / "work"
    work.mkdir()
    driver = _driver(tmp_path, 0)  # CUDA_SUCCESS: cuInit ran
    ran = subprocess.run([python, "-c", STARTED_EARLY, work, driver], env=loaderenv.for_environment(python, REPO).env,
                         cwd=REPO, capture_output=True, text=True, timeout=180)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    said, verdict = ran.stdout.splitlines()[-2:]
    return said, CheckResult.from_json(json.loads(verdict))


@pytest.mark.slow
@needs_cc
def test_with_the_driver_initialised_the_imports_together_run_beside_the_exports_and_still_fail(real_files, tmp_path):
    twice = _registering_one_kernel(tmp_path)
    python = _install(tmp_path / "venv", {**real_files, **twice})
    said, result = _started_early(python, tmp_path)
    assert said == "Started True"  # a process of its own, at its end before the child collected anything
    assert result.line() == ("FAIL extension modules import: each imports alone, but imported together into one process "
                             "(in name order) executorch.kernels_b registers again what was registered after "
                             "executorch.kernels_a: Re-registering aten::add.out")


@needs_cc
def test_with_the_driver_initialised_the_imports_together_pass_and_say_so(real_files, tmp_path):
    real_files["executorch/plain.cpython-311-x86_64-linux-gnu.so"] = _module(tmp_path, "plain", "")
    python = _install(tmp_path / "venv", real_files)
    said, result = _started_early(python, tmp_path)
    assert said == "Started True"
    assert result.status is Status.PASS, result.line()
    assert result.reason.startswith("all 2 import, each in a process of its own with a clean loader environment, and "
                                    "together into one process (")


def _registering_one_type(tmp_path: Path) -> dict[str, bytes]:
    """Two extension modules whose PyInit each registers one type in a process-wide registry (an environment variable
    stands in for pybind11's); the second raises pybind11's ImportError (issue 48: the row PASSed this, 30/0/0)."""
    register = ('if (getenv("SMOKE_TEST_TYPE")) { PyErr_SetString(PyExc_ImportError, "generic_type: type '
                '\\"ExecuTorchModule\\" is already registered!"); return NULL; } setenv("SMOKE_TEST_TYPE", "1", 1);')
    return {f"executorch/{name}.cpython-311-x86_64-linux-gnu.so": _module(tmp_path, name, register)
            for name in ("types_a", "types_b")}


RAISED = ('raises when imported after executorch.types_a: ImportError: generic_type: type "ExecuTorchModule" is already '
          'registered!')


@pytest.mark.slow
@needs_cc
def test_a_module_that_raises_only_after_another_fails_together_every_way(real_files, tmp_path):
    python = _install(tmp_path / "venv", {**real_files, **_registering_one_type(tmp_path)})
    verdict = _import_all(python, loaderenv.for_environment(python, REPO).env, tmp_path / "out.json")
    assert [o["error"] for o in verdict["outcomes"]] == [None, None, None]  # each alone imports
    fresh = extensions.judge(verdict["outcomes"], verdict["seconds"], None, verdict["together"])
    assert fresh.line() == ("FAIL extension modules import: each imports alone, but imported together into one process "
                            f"(in name order) executorch.types_b {RAISED}")
    (tmp_path / "fork").mkdir()
    (tmp_path / "early").mkdir()
    forked = _in_the_childs_fork(python, tmp_path / "fork")
    assert forked.line() == ("FAIL extension modules import: each imports alone, but imported together into one process "
                             f"(in name order, after torch and executorch.exir) executorch.types_b {RAISED}")
    _said, early = _started_early(python, tmp_path / "early")
    assert early.line() == fresh.line()
