"""smoke.paths: where the gate's code, constraints and folders are, run from its checkout or installed by pip, and the
version its reports name."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import tomllib

from smoke import paths
from tests.helpers import REPO

_SAID = ("import json; from smoke import paths; "
         "print(json.dumps([str(paths.CHECKOUT), str(paths.CONSTRAINTS), str(paths.GATE), paths.version()]))")


def where(site, cwd) -> list[str]:
    """What smoke.paths says in a process that imports smoke from ``site``, run in ``cwd``."""
    env = {k: v for k, v in os.environ.items() if k != paths.INVOKED_FROM}
    ran = subprocess.run([sys.executable, "-c", _SAID], cwd=cwd, env={**env, "PYTHONPATH": str(site)}, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def test_run_from_its_checkout_the_gate_uses_the_checkouts_constraints_gate_folder_and_version():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert where(REPO, REPO.parent) == [str(REPO), str(REPO / "constraints"), str(REPO / ".gate"), version]
    assert paths.version() == version


def test_installed_the_gate_reads_its_packaged_constraints_and_writes_gate_where_it_is_run(installed_gate, tmp_path):
    """pip installs smoke into site-packages with no checkout around it: its constraints are the package data the build
    copied into smoke/constraints, .gate is in the caller's folder, the version is the installed distribution's."""
    caller = tmp_path / "caller"
    caller.mkdir()
    checkout, constraints, gate, version = where(installed_gate, caller)
    assert checkout == "None" and constraints == str(installed_gate / "smoke" / "constraints")
    assert (installed_gate / "smoke" / "constraints" / "torch-2.14.txt").is_file()
    assert gate == str(caller / ".gate") and version == "9.9.9.dev0"
