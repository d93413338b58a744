"""ruff's rules ([tool.ruff] in pyproject.toml) hold over the gate's code, its tests and its scripts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

CHECKED = ("smoke", "tests", "noxfile.py", ".ci/device_mutants.py", ".ci/device_code_on_torch.py", ".ci/release-shape", ".ci/gate_matrix.py")


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    assert Path(ruff).exists(), "the test needs ruff: requirements-test.txt installs it"
    proc = subprocess.run([ruff, "check", "--output-format", "concise", *CHECKED], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_mypy_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_third_party_import_of_the_tests_is_declared():
    """requirements-test.txt (or the gate's own dependencies, which it installs) names the distribution of every
    module the tests import: a fresh clone's `nox -s tests` needs nothing else."""
    import ast
    import importlib.metadata

    import tomllib
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lines = (REPO / "requirements-test.txt").read_text().splitlines()
    declared = {canonicalize_name(Requirement(line).name) for line in lines if line.strip() and not line.startswith(("#", "-"))}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    declared |= {canonicalize_name(Requirement(text).name) for text in project}
    imported: set[str] = set()
    for path in (REPO / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    distributions = importlib.metadata.packages_distributions()
    third_party = imported - set(sys.stdlib_module_names) - {"smoke", "tests"}
    undeclared = {module: distributions.get(module) for module in third_party
                  if not {canonicalize_name(d) for d in distributions.get(module, [])} & declared}
    assert undeclared == {}


# A file check whose function does not take the stage's arguments (the wheel, the row, the libraries), and an untyped
# function in the engine: each must fail mypy, as the gate's own configuration runs it.
WRONG_STAGE = """
from smoke.checks.kinds import FileCheck
from smoke.results import CheckResult, passed
from smoke.stages import FILE, Check


def check_two(wheel: object, row: object) -> CheckResult:
    return passed("x", "y")


CHECKS: tuple[FileCheck, ...] = (Check("x", FILE, 1, check_two),)
"""
UNTYPED_ENGINE = """
def untyped(run, options):
    return run
"""


@pytest.mark.slow
def test_mypy_holds_a_check_to_its_stage_s_signature_and_the_engine_to_strict_typing():
    checks = REPO / "smoke" / "checks" / "_wrong_stage_for_test.py"
    engine = REPO / "smoke" / "engine" / "_untyped_for_test.py"
    try:
        checks.write_text(WRONG_STAGE)
        engine.write_text(UNTYPED_ENGINE)
        proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", str(checks), str(engine)], cwd=REPO,
                              capture_output=True, text=True, timeout=600)
    finally:
        checks.unlink(missing_ok=True)
        engine.unlink(missing_ok=True)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said
    assert ('smoke/checks/_wrong_stage_for_test.py:11: error: Argument 4 to "Check" has incompatible type '
            '"Callable[[object, object], CheckResult]"') in said, said
    assert "smoke/engine/_untyped_for_test.py:2: error: Function is missing a type annotation" in said, said
