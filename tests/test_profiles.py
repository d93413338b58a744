"""Issue 57: the number of hostile examples is a setting of the run (Hypothesis profiles, tests/conftest.py), and the
whole suite CI runs (.ci/run, the README's command) loads the `ci` profile; the tests' session runs on the interpreter
that runs nox, and one too old is a failure naming the fix, never a skip."""

from __future__ import annotations

import functools
import importlib.util
import subprocess
import sys
import textwrap

import pytest
from hypothesis import settings

from tests.conftest import PROFILE_CAPS
from tests.helpers import REPO, examples, sh_blocks


@functools.cache
def _noxfile():
    spec = importlib.util.spec_from_file_location("gate_noxfile", REPO / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ci_runs_the_readmes_test_command_which_loads_the_ci_profile():
    ci = (REPO / ".ci" / "run").read_text()
    command = ".venv/bin/python -m nox -s tests"
    assert ci.rstrip().endswith(command) and any(block.endswith(command) for block in sh_blocks(("README.md",)))
    nox = _noxfile()
    assert nox.pytest_arguments([])[0] == "--hypothesis-profile=ci"  # the whole suite, as CI runs it
    assert nox.pytest_arguments(["-m", "not slow"])[0] == "--hypothesis-profile=quick"  # the fast tier
    assert nox.pytest_arguments(["-m", "not   slow and not network"])[0] == "--hypothesis-profile=quick"
    given = ["--hypothesis-profile=thorough"]
    assert nox.pytest_arguments(given) == ["-n", str(nox.workers()), "--dist", "loadgroup", *given, "--durations=20"]
    assert nox.workers() == len(__import__("os").sched_getaffinity(0)) + 1


def test_a_profile_caps_each_propertys_own_count_and_thorough_keeps_it():
    assert PROFILE_CAPS["quick"] < PROFILE_CAPS["ci"] < 5000 <= PROFILE_CAPS["thorough"]
    loaded = settings().max_examples
    assert examples(5000) == min(5000, loaded) and examples(10) == min(10, loaded)
    for name, cap in PROFILE_CAPS.items():
        code = textwrap.dedent(f"""
            from hypothesis import settings
            import tests.conftest
            from tests.helpers import examples
            settings.load_profile({name!r})
            print(examples(300), examples(5000), examples(3))
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [str(min(300, cap)), str(min(5000, cap)), "3"], (name, out.stdout)


def test_the_cap_loaded():
    """Says the loaded profile's cap (read by the test below, in a pytest run of its own)."""
    print("CAP", settings().max_examples)


@pytest.mark.slow  # three pytest runs in processes of their own (5 s): CI runs it
def test_the_profile_a_run_loads_is_the_one_it_names():
    """pytest --hypothesis-profile=NAME reaches the tests' settings; without it, `quick` (the fast tier's)."""
    for args, cap in (([], PROFILE_CAPS["quick"]), (["--hypothesis-profile=ci"], PROFILE_CAPS["ci"]),
                      (["--hypothesis-profile=thorough"], PROFILE_CAPS["thorough"])):
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:xdist", *args,
                              "tests/test_profiles.py::test_the_cap_loaded"],
                             capture_output=True, text=True, cwd=REPO, timeout=120)
        assert f"CAP {cap}\n" in out.stdout, (args, out.stdout[-2000:], out.stderr[-2000:])


def test_the_tests_session_runs_on_the_interpreter_that_runs_nox(tmp_path):
    """It named python 3.11: a machine without one printed 'Session tests skipped' and exited 0, a green run of no
    tests. Now it takes nox's own interpreter; one older than the project supports is a failure naming the fix."""
    nox = _noxfile()
    assert nox.SUPPORTED_PYTHON == (3, 10)
    listed = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-l", "--json"],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    import json

    tests = [s for s in json.loads(listed.stdout) if s["session"] == "tests"]
    assert len(tests) == 1 and tests[0]["python"] is None, tests


def test_every_integration_test_is_slow_so_the_fast_tier_leaves_the_folder_out():
    """The fast tier does not run tests/integration (noxfile: its run ended "no tests ran"): it holds no fast test."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "-m", "not slow", "tests/integration"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 5, out.stdout[-3000:]  # pytest's "no tests collected"
