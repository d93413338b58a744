"""The parent survives a child that crashes, hangs or prints garbage, and says so (real processes).

The hang and the garbage are rows of the defect catalogue (tests/test_defects.py)."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

from smoke.child import check_device
from smoke.gate import judge_child, run_child
from smoke.results import Status
from smoke.rows import ROWS

CHECK = json.dumps({"kind": "check", "name": "export (weightless)", "status": "pass", "reason": "ok", "measured": {}})
PHASE = json.dumps({"kind": "phase", "name": "load and run (weighted)", "event": "start"})


def _child(tmp_path, body: str, timeout: float = 30):
    record, log = tmp_path / "record.jsonl", tmp_path / "child.log"
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        rec = open({str(record)!r}, "a")
        def w(line): rec.write(line + "\\n"); rec.flush()
    """) + textwrap.dedent(body)
    seen = []
    outcome = run_child([sys.executable, "-c", script], record, log, timeout, dict(os.environ), seen.append)
    return outcome, judge_child(outcome, timeout, log), seen


def test_a_finished_child_is_not_judged(tmp_path):
    outcome, verdict, seen = _child(tmp_path, f"w({CHECK!r}); w('{{\"kind\": \"end\"}}')")
    assert verdict is None and [r.name for r in seen] == ["export (weightless)"]


def test_a_crashing_child_is_a_failure_naming_the_signal_and_phase(tmp_path):
    outcome, verdict, seen = _child(tmp_path, f"w({CHECK!r}); w({PHASE!r}); print('about to crash'); sys.stdout.flush(); os.kill(os.getpid(), signal.SIGSEGV)")
    assert seen and seen[0].status is Status.PASS  # what was decided before the crash is kept
    assert verdict.status is Status.FAIL
    assert "ended by SIGSEGV during 'load and run (weighted)'" in verdict.reason


def test_a_child_that_exits_early_is_a_failure(tmp_path):
    _, verdict, _ = _child(tmp_path, "print('ImportError: no module named executorch'); sys.exit(1)")
    assert verdict.status is Status.FAIL and "exited 1 before finishing" in verdict.reason
    assert "ImportError" in verdict.reason


H200 = {"cuda_available": True, "torch_cuda": "13.0", "device_name": "NVIDIA H200", "sm": "sm_90", "arch_list": ["sm_80", "sm_90"]}


@pytest.mark.parametrize(
    ("row", "facts", "status", "text"),
    [
        ("cuda_x86_64", H200, Status.PASS, "NVIDIA H200 (sm_90), in torch's arch list"),
        ("cuda_x86_64", {**H200, "arch_list": ["sm_80"]}, Status.FAIL, "lacks it"),
        ("cuda_x86_64", {"cuda_available": False, "torch_cuda": None}, Status.FAIL, "the cuda_x86_64 row must execute"),
        ("cuda_aarch64", {"cuda_available": False, "torch_cuda": None}, Status.SKIP, "export and execution need one"),
        ("cuda_aarch64", H200, Status.PASS, "in torch's arch list"),
    ],
)
def test_device_check_per_row(row, facts, status, text):
    result = check_device(ROWS[row], facts)
    assert result.status is status and text in result.reason
