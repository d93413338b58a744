"""The parent survives a child that crashes, hangs or prints garbage, and says so (real processes).

The hang and the garbage are rows of the defect catalogue (tests/test_defects.py)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from smoke.child.delegates import check_device
from smoke.environment.follow import judge_child, run_child
from smoke.results import Status
from tests.helpers import CHECK, PHASE, child_row, fake_child


def test_a_finished_child_is_not_judged(tmp_path):
    outcome, verdict, seen = fake_child(tmp_path, f"w({CHECK!r}); w('{{\"kind\": \"end\"}}')")
    assert verdict is None and [r.name for r in seen] == ["export (weightless)"]


def test_a_crashing_child_is_a_failure_naming_the_signal_and_phase(tmp_path):
    body = f"w({CHECK!r}); w({PHASE!r}); print('about to crash'); sys.stdout.flush(); os.kill(os.getpid(), signal.SIGSEGV)"
    outcome, verdict, seen = fake_child(tmp_path, body)
    assert seen and seen[0].status is Status.PASS  # what was decided before the crash is kept
    assert verdict.status is Status.FAIL
    assert "ended by SIGSEGV during 'load and run (weighted)'" in verdict.reason


def test_a_child_that_exits_early_is_a_failure(tmp_path):
    _, verdict, _ = fake_child(tmp_path, "print('ImportError: no module named executorch'); sys.exit(1)")
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
    result = check_device(child_row(row), facts)
    assert result.status is status and text in result.reason


def test_fail_fast_on_an_environment_check_ends_the_child_at_once(tmp_path):
    # The child reports its probe, then would go on for a minute; the parent's callback stops it.
    from smoke.environment.follow import StopChild

    probe = json.dumps({"kind": "probe", "torch": "2.13.0+cpu", "backends": []})

    def stop(_facts):
        raise StopChild

    record, log = tmp_path / "record.jsonl", tmp_path / "child.log"
    script = f"rec = open({str(record)!r}, 'a'); rec.write({probe!r} + '\\n'); rec.flush(); import time; time.sleep(60)"
    start = time.monotonic()
    outcome = run_child([sys.executable, "-c", script], record, log, 30, dict(os.environ), lambda r: None, on_probe=stop)
    assert time.monotonic() - start < 15
    assert outcome.stopped and outcome.returncode is not None and outcome.returncode < 0  # killed
    assert judge_child(outcome, 30, log) is None  # the parent already printed the failure that stopped it


def test_an_export_process_that_dies_without_its_result_is_a_failure(tmp_path):
    import subprocess

    from smoke.child.exports import collect_export
    from smoke.record import Recorder

    helper = subprocess.Popen([sys.executable, "-c", "print('killed by the OOM killer, say'); raise SystemExit(9)"],
                              stdout=open(tmp_path / "export.log", "wb"), stderr=subprocess.STDOUT)
    rec = Recorder(tmp_path / "record.jsonl", fail_fast=False)
    assert collect_export(rec, child_row("cpu_x86_64"), helper, tmp_path, tmp_path) is False
    records = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    check = next(r for r in records if r["kind"] == "check")
    assert check["status"] == "fail" and check["name"] == "export (weightless)"
    assert "the export process exited 9 without its result: killed by the OOM killer, say" in check["reason"]


def test_the_child_imports_no_reader_of_the_gates_own():
    """The child runs inside the wheel's environment, which has torch and executorch but not the gate's
    own tools: importing it (and its backends) must pull in neither packaging nor pyelftools."""
    import subprocess

    code = ("import sys, smoke.child.run, smoke.child.exports, smoke.child.negative; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'packaging', 'elftools', 'torch', 'executorch'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout
    assert out.strip() == "[]"
