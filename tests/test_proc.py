"""smoke.proc: every process the gate starts fails as the gate's own one-line error, never a traceback."""

from __future__ import annotations

import os
import sys

import pytest

from smoke import proc
from smoke.checks import installed
from smoke.errors import EnvironmentBuildError, GateError


def test_a_command_that_fails_names_what_it_was_for_and_its_output_tail():
    with pytest.raises(EnvironmentBuildError) as info:
        proc.run([sys.executable, "-c", "print('one'); print('two'); raise SystemExit(3)"], what="building the environment",
                 error=EnvironmentBuildError)
    message = str(info.value)
    assert message.startswith("building the environment failed (exit 3): ")
    assert message.endswith(": one | two")


def test_a_command_past_its_limit_is_ended_and_named():
    with pytest.raises(GateError, match=r"^waiting failed: .* ran past its 0.5 s limit and was ended; give it more time$"):
        proc.run([sys.executable, "-c", "import time; time.sleep(30)"], what="waiting", timeout=0.5, fix="give it more time")


def test_a_command_that_cannot_start_is_one_line():
    with pytest.raises(GateError, match=r"^probing failed: cannot run '/nonexistent/python'"):
        proc.run(["/nonexistent/python"], what="probing")


def test_a_probe_that_hangs_fails_the_environment_checks_instead_of_a_traceback(tmp_path):
    hanging = tmp_path / "python"
    hanging.write_text("#!/bin/sh\nsleep 30\n")
    hanging.chmod(0o755)
    facts = installed.run_probe(hanging, dict(os.environ), tmp_path, timeout=0.5)
    assert "ran past its 0.5 s limit" in facts["probe_error"]


def test_tail_keeps_the_last_lines_that_say_something():
    assert proc.tail("a\n\nb\nc\n\n") == "a | b | c"
    assert proc.tail("a\nb\nc\nd", 2) == "c | d"
