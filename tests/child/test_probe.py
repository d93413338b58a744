"""smoke.child.probe: the probe runs in any environment and says what is missing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO


@pytest.mark.slow
def test_the_probe_runs_in_any_environment_and_says_what_is_missing():
    proc = subprocess.run([sys.executable, "-m", "smoke.child.probe"], capture_output=True, text=True, cwd=REPO, timeout=300)
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["purelib"] and ("torch" in facts or "torch_error" in facts)
