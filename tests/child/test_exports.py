"""smoke.child.exports: an export process that dies without its result is a failure (a real process)."""

from __future__ import annotations

import json
import sys

from tests.helpers import child_row


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
