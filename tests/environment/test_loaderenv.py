"""smoke.environment.loaderenv: the caller's loader and Python variables do not reach the processes in the built
environment, and the GPU driver's folders are kept only where the loader finds the driver nowhere else."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smoke.environment import loaderenv
from tests.helpers import REPO

CALLER = {"PATH": "/usr/bin", "HOME": "/home/u", "LD_LIBRARY_PATH": "/opt/copy", "LD_PRELOAD": "/opt/hook.so",
          "LD_AUDIT": "/opt/audit.so", "PYTHONPATH": "/src", "PYTHONHOME": "/py", "PYTHONSTARTUP": "/rc.py"}


def _never_asked(*_args):
    raise AssertionError("the loader was asked although no folder of LD_LIBRARY_PATH holds the driver")


@pytest.mark.parametrize("name", loaderenv.CALLER_VARIABLES)
def test_each_callers_variable_is_removed_and_named(name, monkeypatch):
    monkeypatch.setattr(loaderenv, "finds_driver_alone", _never_asked)
    made = loaderenv.clean({"PATH": "/usr/bin", name: "/somewhere"})
    assert name not in made.env and made.env["PATH"] == "/usr/bin"
    assert made.removed == (name,)
    assert made.line() == f"clean loader environment: removed the caller's {name}"


@pytest.mark.parametrize("name", ["PYTHONWARNINGS", "PYTHONOPTIMIZE", "PYTHONSAFEPATH", "PYTHONDEVMODE", "PYTHON_GIL"])
def test_the_interpreters_other_variables_are_removed_and_named_and_the_harmless_ones_kept(name, monkeypatch):
    """Issue 58: the child ran `python -S` with the caller's PYTHONWARNINGS=error, and a correct wheel FAILed `child
    process` on a DeprecationWarning its users never see."""
    monkeypatch.setattr(loaderenv, "finds_driver_alone", _never_asked)
    made = loaderenv.clean({"PATH": "/usr/bin", name: "error", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
                            "PYTHONSTARTUP": "/x.py"})
    assert name not in made.env and made.env == {"PATH": "/usr/bin", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
    assert made.line() == f"clean loader environment: removed the caller's PYTHONSTARTUP, {name}"


def test_all_of_them_named_in_one_line_and_the_gates_own_setting_kept(monkeypatch):
    monkeypatch.setattr(loaderenv, "finds_driver_alone", _never_asked)
    made = loaderenv.clean(CALLER, PYTHONPATH=str(REPO))
    assert made.env == {"PATH": "/usr/bin", "HOME": "/home/u", "PYTHONPATH": str(REPO)}
    assert made.line() == ("clean loader environment: removed the caller's LD_LIBRARY_PATH, LD_PRELOAD, LD_AUDIT, "
                           "PYTHONPATH, PYTHONHOME, PYTHONSTARTUP")
    assert made.to_json() == {"removed": list(loaderenv.CALLER_VARIABLES), "driver_folders": []}
    # Names only: a value can hold anything (a token in a path, say).
    assert "/opt/copy" not in made.line() + json.dumps(made.to_json())


def test_the_ci_job_s_files_do_not_reach_the_child(monkeypatch, tmp_path):
    """Under GitHub Actions the job's summary, variables, outputs and PATH are files named by these variables; code of
    the wheel's, which runs in the child, wrote "PASSED" and an unclosed comment into the summary (issue 48)."""
    files = {name: str(tmp_path / name.lower()) for name in loaderenv.CI_FILE_VARIABLES}
    for name, value in files.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    made = loaderenv.for_environment(Path(sys.executable), REPO)
    seen = json.loads(subprocess.run([sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
                                     env=made.env, capture_output=True, text=True, check=True).stdout)
    assert not set(files) & set(seen) and seen["GITHUB_ACTIONS"] == "true"
    assert set(files) <= set(made.removed)
    assert ", ".join(loaderenv.CI_FILE_VARIABLES) in made.line()


def test_nothing_set_is_said_so(monkeypatch):
    made = loaderenv.clean({"PATH": "/usr/bin"})
    assert made.removed == () and "the caller set none of LD_LIBRARY_PATH" in made.line()


@pytest.fixture
def library_path(tmp_path):
    """A container's LD_LIBRARY_PATH: one folder with the driver's libraries, one with a copy of a wheel's library."""
    driver, copies = tmp_path / "nvidia" / "lib64", tmp_path / "copies"
    for folder, names in ((driver, ("libcuda.so.1", "libnvidia-ml.so.1")), (copies, ("libexecutorch.so",))):
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_bytes(b"")
    return driver, copies


def test_driver_folder_kept_where_the_loader_finds_the_driver_only_through_it(library_path, monkeypatch):
    driver, copies = library_path
    asked = []
    monkeypatch.setattr(loaderenv, "finds_driver_alone", lambda python, env: asked.append(dict(env)) or False)
    made = loaderenv.clean({"LD_LIBRARY_PATH": f"{copies}{os.pathsep}{driver}{os.pathsep}/no/such/folder"})
    assert made.env["LD_LIBRARY_PATH"] == str(driver)
    assert made.removed == ("LD_LIBRARY_PATH",) and made.driver_folders == (str(driver),)
    assert "LD_LIBRARY_PATH" not in asked[0]  # the loader is asked without the caller's path
    assert made.line() == (f"clean loader environment: removed the caller's LD_LIBRARY_PATH; kept LD_LIBRARY_PATH={driver} "
                           "for the GPU driver (the loader finds libcuda.so.1 only through it)")


def test_driver_folder_dropped_where_the_loader_finds_the_driver_in_its_cache(library_path, monkeypatch):
    # The H200 test machine: LD_LIBRARY_PATH is /usr/local/nvidia/lib64:/usr/local/nvidia/lib, and
    # libcuda.so.1 is also in the loader's cache.
    driver, copies = library_path
    monkeypatch.setattr(loaderenv, "finds_driver_alone", lambda python, env: True)
    made = loaderenv.clean({"LD_LIBRARY_PATH": f"{driver}{os.pathsep}{copies}"})
    assert "LD_LIBRARY_PATH" not in made.env and made.driver_folders == ()
    assert made.line() == "clean loader environment: removed the caller's LD_LIBRARY_PATH"


def test_a_path_without_the_driver_never_asks_the_loader(library_path, monkeypatch):
    _driver, copies = library_path
    monkeypatch.setattr(loaderenv, "finds_driver_alone", _never_asked)
    assert "LD_LIBRARY_PATH" not in loaderenv.clean({"LD_LIBRARY_PATH": str(copies)}).env


def test_the_loader_is_asked_for_real(tmp_path):
    # No GPU driver in this machine's loader paths, nor in an empty folder: not found (a real process).
    # Where a driver is installed, the same call finds it.
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    cache = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout
    has_driver = any(line.split()[:1] == ["libcuda.so.1"] for line in cache.splitlines())
    assert loaderenv.finds_driver_alone(sys.executable, {"PATH": os.environ["PATH"]}) is has_driver


def test_a_real_process_started_with_it_sees_none_of_the_callers_variables(monkeypatch, tmp_path):
    for name, value in CALLER.items():
        if name != "PATH":
            monkeypatch.setenv(name, value)
    made = loaderenv.for_environment(Path(sys.executable), REPO)
    seen = json.loads(subprocess.run([sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
                                     env=made.env, capture_output=True, text=True, check=True).stdout)
    assert not {"LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT", "PYTHONHOME", "PYTHONSTARTUP"} & set(seen)
    assert seen["PYTHONPATH"] == str(REPO) and seen["PATH"].startswith(str(Path(sys.executable).parent))
    assert set(made.removed) == set(loaderenv.CALLER_VARIABLES)


def test_the_report_carries_what_was_removed_and_its_schema_says_so(library_path, monkeypatch):
    import jsonschema

    from smoke.report import Run, to_json
    from tests.helpers import SCHEMA

    driver, copies = library_path
    monkeypatch.setattr(loaderenv, "finds_driver_alone", lambda python, env: False)
    caller = {"LD_LIBRARY_PATH": f"{copies}{os.pathsep}{driver}", "LD_PRELOAD": "x"}
    run = Run("cuda_x86_64", exit_code=0, loader_env=loaderenv.clean(caller).to_json())
    data = to_json(run)
    jsonschema.validate(data, SCHEMA)
    assert data["loader_environment"] == {"removed": ["LD_LIBRARY_PATH", "LD_PRELOAD"], "driver_folders": [str(driver)]}
    data["loader_environment"]["removed"].append("HOME")  # only the variables the gate removes
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)
    jsonschema.validate(to_json(Run("cpu_x86_64", mode="inspect", exit_code=0)), SCHEMA)  # null where no child ran


# --- the folder the processes in the environment import smoke from (gate_code)

_CODE = """import json, os
from smoke.environment import loaderenv
with loaderenv.gate_code() as folder:
    held = sorted(os.listdir(folder))
    ran = os.path.isfile(os.path.join(folder, "smoke", "child", "__main__.py"))
print(json.dumps([str(folder), held, ran, os.path.exists(folder)]))"""


def test_an_installed_gate_hands_the_environment_its_smoke_package_alone_never_its_site_packages(installed_gate):
    """Installed, smoke sits in a site-packages beside nox, packaging, uv and the rest of the gate's interpreter: on the
    child's PYTHONPATH they would come before the environment's own. The child is handed a folder that holds smoke alone,
    removed when the run ends."""
    env = {k: v for k, v in os.environ.items() if k != "GATE_INVOKED_FROM"}
    out = subprocess.run([sys.executable, "-c", _CODE], env={**env, "PYTHONPATH": str(installed_gate)}, cwd=installed_gate.parent,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    folder, held, ran, left = json.loads(out.stdout)
    assert held == ["smoke"] and ran and not left
    assert not Path(folder).is_relative_to(installed_gate)


def test_from_a_checkout_the_environment_imports_smoke_from_the_checkout():
    with loaderenv.gate_code() as folder:
        assert folder == REPO
    assert REPO.is_dir()
