from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement

from smoke.environment import plan_no_deps

LINUX_312 = {"python_version": "3.12", "platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux"}
REQS = [Requirement(r) for r in ("torch>=2.11.0", "torchao>=0.17.0", "pytest<9.0", 'coremltools==9.0; platform_system == "Darwin"', "kgb")]


@pytest.mark.parametrize(
    ("installed", "available", "todo", "left_out"),
    [
        # The GPU machine: torch and pytest are there already; the wheelhouse lacks kgb.
        ({"torch", "pytest"}, {"torchao": [Path("torchao-0.17.0.whl")]}, ["torchao-0.17.0.whl"], ["kgb"]),
        # No wheelhouse: what is missing is installed by requirement, markers evaluated for Linux.
        ({"torch"}, None, ["torchao>=0.17.0", "pytest<9.0", "kgb"], []),
    ],
)
def test_no_deps_plan(installed, available, todo, left_out):
    assert plan_no_deps(REQS, installed, available, LINUX_312) == (todo, left_out)
