""".ci/device_mutants.py, the seed's mutants the GPU machine runs on each CUDA build, run here on the CPU row's
real XNNPACK exports (the same script, the same checks): each mutant FAILs by its own check, the control PASSes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.slow


def test_every_mutant_fails_by_its_own_check_and_the_control_passes(tmp_path):
    from smoke.child import delegates
    from smoke.child.models import models
    from tests.helpers import child_row

    work = tmp_path / "work"
    for label, (model, example) in models().items():
        (work / label).mkdir(parents=True)
        delegates.export(child_row("cpu_x86_64"), model, example, work / label)
    proc = subprocess.run([sys.executable, str(REPO / ".ci" / "device_mutants.py"), "cpu_x86_64", "1.5.1", str(work),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("CONTROL", "MUTANT", "SKIP"))]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [line.split(": ", 2)[1] for line in lines if line.startswith(("CONTROL", "MUTANT"))] == ["as expected"] * 12, lines
    expected = {
        "weights left in the program": "FAIL data file (weighted): model.ptd is missing",
        "declined partition": "FAIL delegate (weighted): plan 'forward' has delegates [], not XnnpackBackend",
        "wrong key (data file)": "FAIL data file (weighted): model.ptd (",
        "wrong key (run)": "FAIL run with data file (weighted): loading or running raised",
        "weights left in the program (negative control)":
            "FAIL negative control (weighted, no data file): ran without model.ptd and matched eager",
        "outputs off by 0.01": "FAIL run with data file (weighted): loaded with model.ptd, output differs from eager: max abs diff 0.01",
    }
    for name, start in expected.items():
        line = next(line for line in lines if line.startswith(f"MUTANT 1.5.1 {name}: "))
        assert line.split(": ", 2)[2].startswith(start), line
    assert "SKIP 1.5.1 weights missing: the weightless model wrote no model.ptd to stand in" in lines
    assert proc.stdout.rstrip().endswith("1.5.1: every mutant FAILed by its own check, the control PASSed")
