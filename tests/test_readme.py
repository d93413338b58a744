"""The README's test command is the one CI runs, and its quick start uses a virtual environment
(tests/integration/test_readme.py runs its commands)."""

from __future__ import annotations

from tests.helpers import REPO, sh_blocks

README = (REPO / "README.md").read_text()


def test_ci_runs_the_readme_test_command_exactly():
    test_command = sh_blocks()[1]
    assert test_command.endswith("-m nox -s tests")
    assert (REPO / ".ci" / "run").read_text().strip().splitlines()[-1] == test_command


def test_the_quick_start_uses_a_virtual_environment():
    for command in sh_blocks()[:2]:
        assert command.startswith("python3 -m venv .venv && .venv/bin/python -m pip install ")


def test_every_other_command_names_the_quick_starts_interpreter():
    """After the quick start, python3 is the system's, which has neither nox nor the gate: each command a user is
    shown runs .venv's interpreter by its path, and works as typed."""
    for block in sh_blocks()[2:]:
        for line in block.splitlines():
            assert not line.startswith(("python3 -m nox", "python3 -m smoke", "python -m nox", "python -m smoke")), line


def test_the_quick_starts_requirements_are_the_gate_itself_with_pyprojects_one_list():
    """pyproject.toml's [project] dependencies are the one list of the gate's requirements: requirements-gate.txt, which
    the quick start installs, installs the checkout with them and lists none of its own."""
    lines = [line.strip() for line in (REPO / "requirements-gate.txt").read_text().splitlines()]
    assert [line for line in lines if line and not line.startswith("#")] == ["-e ."]
