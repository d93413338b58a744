"""smoke.checks.startup: ``start-up code``, on PyPI's real wheels and mutants of them, through ``python -m smoke``."""

from __future__ import annotations

import pytest

from smoke.checks.startup import executed_lines, in_site_packages_root
from tests.helpers import line, pypi_wheel, rewrite_wheel, smoke

pytestmark = pytest.mark.network

WRITES_THE_RECORD = b"import os; open(os.environ.get('RECORD', '/dev/null'), 'a').write('{\"kind\": \"end\"}\\n')\n"


@pytest.mark.slow
def test_pypis_wheels_run_nothing_at_start_up(macos_1_5_1):
    for wheel in (pypi_wheel("x86_64"), macos_1_5_1):
        proc = smoke("inspect", wheel)
        assert line(proc, "PASS start-up code: ") == ("PASS start-up code: nothing runs at interpreter start-up: no .pth "
                                                      "file, sitecustomize or usercustomize in site-packages' root")


@pytest.mark.slow
@pytest.mark.parametrize(("member", "data", "said"), [
    ("executorch_hook.pth", WRITES_THE_RECORD, f"executorch_hook.pth runs {WRITES_THE_RECORD.decode().strip()!r}"),
    ("executorch-1.5.1.data/purelib/hook.pth", b"# a comment\nimport\tsys\n",
     "executorch-1.5.1.data/purelib/hook.pth runs 'import\\tsys'"),
    ("sitecustomize.py", b"print('hello')\n", "sitecustomize.py is imported by site at every interpreter start-up as sitecustomize"),
    ("usercustomize/__init__.py", b"", "usercustomize/__init__.py is imported by site at every interpreter start-up as usercustomize"),
    # the data scheme installs into the environment's prefix: its lib/pythonX.Y/site-packages is site-packages (issue 48)
    ("executorch-1.5.1.data/data/lib/python3.11/site-packages/hook.pth", WRITES_THE_RECORD,
     f"executorch-1.5.1.data/data/lib/python3.11/site-packages/hook.pth runs {WRITES_THE_RECORD.decode().strip()!r}"),
    ("executorch-1.5.1.data/data/lib/python3.11/site-packages/sitecustomize.py", b"print('hello')\n",
     "executorch-1.5.1.data/data/lib/python3.11/site-packages/sitecustomize.py is imported by site at every interpreter "
     "start-up as sitecustomize"),
    # issue 58: uv let the data scheme replace the environment's pyvenv.cfg (the machine's packages then importable)
    ("executorch-1.5.1.data/data/pyvenv.cfg", b"home = /usr/bin\ninclude-system-site-packages = true\n",
     "executorch-1.5.1.data/data/pyvenv.cfg installs over the environment's own pyvenv.cfg"),
    ("executorch-1.5.1.data/scripts/python3", b"#!/bin/sh\n", "executorch-1.5.1.data/scripts/python3 installs over the "
     "environment's own bin/python3"),
])
def test_code_the_wheel_runs_at_start_up_fails_naming_it(tmp_path, member, data, said):
    mutant = rewrite_wheel(pypi_wheel("x86_64"), tmp_path, add={member: data})
    proc = smoke("inspect", mutant, "--row", "cpu_x86_64")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert line(proc, "FAIL start-up code: ").startswith(f"FAIL start-up code: {said}"), proc.stdout


@pytest.mark.slow
def test_a_pth_that_only_adds_a_folder_warns(tmp_path):
    mutant = rewrite_wheel(pypi_wheel("x86_64"), tmp_path, add={"executorch.pth": b"# the runtime's folder\n/opt/somewhere\n"})
    proc = smoke("inspect", mutant, "--row", "cpu_x86_64")
    assert line(proc, "WARN start-up code: ") == ("WARN start-up code: executorch.pth add folders to sys.path at every "
                                                  "interpreter start-up (no code runs; no executorch release ships a .pth file)")


@pytest.mark.slow
def test_a_pth_whose_folder_holds_the_wheel_s_sitecustomize_fails(tmp_path):
    """A path-only .pth puts its folder on sys.path before site imports sitecustomize: the wheel's sitecustomize.py in
    that folder runs at every start-up (issue 48: it was a WARN)."""
    mutant = rewrite_wheel(pypi_wheel("x86_64"), tmp_path, add={"executorch_paths.pth": b"executorch/_hooks\n",
                                                                "executorch/_hooks/sitecustomize.py": b"print('hello')\n"})
    proc = smoke("inspect", mutant, "--row", "cpu_x86_64")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert line(proc, "FAIL start-up code: ").startswith(
        "FAIL start-up code: executorch_paths.pth adds 'executorch/_hooks' to sys.path, where the wheel ships "
        "executorch/_hooks/sitecustomize.py, which site imports at every interpreter start-up"), proc.stdout


def test_only_the_environments_own_files_count_as_installed_over():
    from smoke.checks.startup import over_environment

    assert over_environment("executorch-1.5.1.data/data/pyvenv.cfg") == "pyvenv.cfg"
    assert over_environment("executorch-1.5.1.data/data/bin/activate") == "bin/activate"
    assert over_environment("executorch-1.5.1.data/scripts/pip3.11") == "bin/pip3.11"
    assert over_environment("executorch-1.5.1.data/scripts/flatc") is None  # a script of its own
    assert over_environment("executorch-1.5.1.data/data/share/pyvenv.cfg") is None
    assert over_environment("pyvenv.cfg") is None  # in site-packages' root, not the prefix's
    assert over_environment("executorch-1.5.1.data/headers/pyvenv.cfg") is None


def test_only_what_lands_in_site_packages_root_counts():
    assert in_site_packages_root("executorch-1.5.1.data/data/lib/python3.11/site-packages/x.pth") == "x.pth"
    assert in_site_packages_root("executorch-1.5.1.data/data/Lib/site-packages/sitecustomize.py") == "sitecustomize.py"
    assert in_site_packages_root("executorch-1.5.1.data/data/share/x.pth") is None  # the prefix's share/: not site-packages
    assert in_site_packages_root("executorch-1.5.1.data/headers/x.pth") is None
    assert in_site_packages_root("x.pth") == "x.pth"
    assert in_site_packages_root("executorch/x.pth") is None  # below a package: site never reads it
    assert in_site_packages_root("executorch-1.5.1.data/scripts/x.pth") is None
    assert in_site_packages_root("executorch-1.5.1.data/platlib/x.pth") == "x.pth"
    assert executed_lines("import os\nimportlib\n  import x\nimport\tsys\n") == ["import os", "import\tsys"]
