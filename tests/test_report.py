"""The report files and the matrix summary, from runs whose checks passed, failed and skipped."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from smoke import report
from smoke.commands import summary
from smoke.report import Run
from smoke.results import failed, passed, skipped
from smoke.rows import RELEASE_ROWS, ROWS
from smoke.stages import MUST_EXECUTE
from tests.helpers import SCHEMA


def a_run(row: str, *, fail: str | None = None, skip: str | None = None) -> Run:
    names = ["CUDA build", *MUST_EXECUTE]  # data file (weighted) among them
    results = []
    for name in names:
        if name == fail:
            results.append(failed(name, f"{name} broke"))
        elif name == skip:
            results.append(skipped(name, f"{name} not run: no device"))
        else:
            results.append(passed(name, f"{name} fine", data_file_bytes=528) if name.startswith("data file") else passed(name, "fine"))
    machine, build = row.split("_", 1)[1], "+cu130" if row.startswith("cuda") else ""  # each row its own wheel of 1.5.1
    return Run(row, wheel=f"executorch-1.5.1{build}-cp311-cp311-manylinux_2_28_{machine}.whl", wheel_size=1,
               wheel_sha256=f"{sorted(ROWS).index(row):064x}",
               results=[r.with_seconds(0.5) for r in results], seconds=2.0, exit_code=1 if fail else 0)


def test_json_report_follows_the_schema_and_junit_has_one_case_per_check(tmp_path):
    run = a_run("cpu_x86_64", fail="CUDA build", skip="negative control (weighted, no data file)")
    json_path, xml_path = report.write(run, tmp_path)
    data = json.loads(json_path.read_text())
    jsonschema.validate(data, SCHEMA)
    # CUDA build and each MUST_EXECUTE check: one failed, one skipped
    assert data["verdict"] == "fail" and data["counts"] == {"pass": len(MUST_EXECUTE) - 1, "fail": 1, "skip": 1}
    suite = ET.parse(xml_path).getroot().find("testsuite")
    assert suite.get("tests") == str(1 + len(MUST_EXECUTE)) and suite.get("failures") == "1" and suite.get("skipped") == "1"
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert list(cases) == [c["name"] for c in data["checks"]]
    assert cases["CUDA build"].find("failure").get("message") == "CUDA build broke"
    assert cases["negative control (weighted, no data file)"].find("skipped").get("message").endswith("not run: no device")
    assert cases["data file (weighted)"].find("failure") is None and cases["data file (weighted)"].get("time") == "0.500"


def test_a_schema_change_is_caught_by_the_schema(tmp_path):
    data = report.to_json(a_run("cpu_x86_64"))
    data["checks"][0]["status"] = "ok"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)


def test_step_summary_is_appended_where_github_sets_it(tmp_path, monkeypatch):
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    report.append_step_summary(a_run("cpu_x86_64", fail="CUDA build"))
    text = target.read_text()
    assert text.startswith("earlier step\n") and "### cpu_x86_64: FAIL" in text and "| CUDA build | FAIL | CUDA build broke |" in text
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert report.append_step_summary(a_run("cpu_x86_64")) is None


def write_rows(folder, **runs):
    for run in runs.values():
        report.write(run, folder)


def test_summary_passes_when_every_needed_row_passed(tmp_path, capsys):
    write_rows(tmp_path, x=a_run("cpu_x86_64"), a=a_run("cpu_aarch64"))
    assert summary.summary(tmp_path, "cpu") == 0
    out = capsys.readouterr().out
    assert "| check | cpu_x86_64 | cpu_aarch64 |" in out and "| data file (weighted) | PASS 528 B | PASS 528 B |" in out
    assert "summary (cpu release" in out and "PASSED" in out


@pytest.mark.parametrize(
    ("runs", "problem"),
    [
        ([a_run("cpu_x86_64", fail="data file (weighted)"), a_run("cpu_aarch64")], "cpu_x86_64: failed (data file (weighted))"),
        ([a_run("cpu_x86_64")], "cpu_aarch64: no report (the cpu release needs this row)"),
        ([a_run("cpu_x86_64", skip="run with data file (weighted)"), a_run("cpu_aarch64")],
         "cpu_x86_64: 'run with data file (weighted)' is skip, and this row must execute it"),
    ],
    ids=["failed", "missing", "skipped-what-it-must-run"],
)
def test_summary_fails_on_a_failed_missing_or_skipping_row(tmp_path, capsys, runs, problem):
    write_rows(tmp_path, **{str(i): r for i, r in enumerate(runs)})
    assert summary.summary(tmp_path, "cpu", tmp_path / "out" / "summary.md") == 1
    out = capsys.readouterr().out
    assert f"FAIL {problem}" in out and "FAILED" in out
    assert f"- FAIL {problem}" in (tmp_path / "out" / "summary.md").read_text()


def test_a_row_that_need_not_execute_may_skip(tmp_path):
    runs = [a_run(r) for r in RELEASE_ROWS["cuda"] if r != "cuda_aarch64"]
    runs.append(a_run("cuda_aarch64", skip="run with data file (weighted)"))
    write_rows(tmp_path, **{str(i): r for i, r in enumerate(runs)})
    assert summary.summary(tmp_path, "cuda") == 0


def test_inspect_reports_are_not_row_runs(tmp_path):
    inspect_run = a_run("cpu_x86_64")
    inspect_run.mode = "inspect"
    write_rows(tmp_path, a=inspect_run, b=a_run("cpu_aarch64"))
    verdict = summary.judge(summary.load_reports(tmp_path), "cpu")
    assert verdict.problems == ["cpu_x86_64: no report (the cpu release needs this row)"]


def test_summary_of_a_missing_folder_is_an_error(tmp_path):
    with pytest.raises(summary.ReportError, match="does not exist"):
        summary.load_reports(tmp_path / "nope")


def test_the_h200_run_reports_follow_the_schema():
    """The reports the CUDA and CPU rows wrote on the H200 (docs/runs), read back."""
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "docs" / "runs" / "2026-12-02-h200-s3-reports" / "reports"
    paths = sorted(folder.glob("*.json"))
    assert {p.stem for p in paths} >= {"cuda_x86_64", "cpu_x86_64"}
    for path in paths:
        data = json.loads(path.read_text())
        jsonschema.validate(data, SCHEMA)
    cuda = json.loads((folder / "cuda_x86_64.json").read_text())
    assert cuda["device"] == {"name": "NVIDIA H200", "sm": "sm_90"} and cuda["versions"]["torch"] == "2.11.0+cu130"
    by_name = {c["name"]: c for c in cuda["checks"]}
    assert by_name["weights in the data file"]["measured"]["difference_bytes"] == 128
    assert by_name["CUDA build"]["status"] == "fail" and by_name["delegate registers"]["status"] == "fail"
