"""smoke.errors and the one edge (smoke.cli): every ERROR line is printed by smoke.console.error; an error's exit code is its class's."""

from __future__ import annotations

import re
import subprocess
import sys

from smoke import errors
from tests.helpers import REPO


def _gate_errors():
    import smoke.checks.pipeline  # noqa: F401  (every module that declares an error class)
    import smoke.cli  # noqa: F401
    import smoke.commands.compare  # noqa: F401
    import smoke.commands.summary  # noqa: F401

    found, todo = [], [errors.GateError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def test_every_error_of_the_gate_says_its_exit_code():
    classes = _gate_errors()
    assert len(classes) > 10, classes
    assert {cls.return_code for cls in classes} == {errors.EXIT_CANNOT_RUN}


def test_only_the_console_prints_an_error_line():
    printed = []
    for path in sorted((REPO / "smoke").rglob("*.py")):
        if path.relative_to(REPO).as_posix() == "smoke/console.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"""print\(f?["']ERROR""", line):
                printed.append(f"{path.relative_to(REPO)}:{number}")
    assert not printed, printed


def test_both_forms_of_the_artifacts_command_go_through_the_edge(tmp_path):
    for form in (["-m", "smoke", "artifacts"], ["-m", "smoke.artifacts"]):
        proc = subprocess.run([sys.executable, *form, str(tmp_path / "absent.pte"), "--bogus"], capture_output=True,
                              text=True, cwd=REPO, timeout=60)
        assert proc.returncode == 2 and proc.stderr == "ERROR unrecognized arguments: --bogus (see --help)\n", (form, proc.stderr)
        proc = subprocess.run([sys.executable, *form, str(tmp_path / "absent.pte")], capture_output=True, text=True, cwd=REPO,
                              timeout=60)
        assert proc.returncode == 2 and proc.stderr == f"ERROR '{tmp_path / 'absent.pte'}' cannot be read: No such file or directory\n"
