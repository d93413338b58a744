"""smoke.report: the report files, from runs whose checks passed, failed and skipped, and every hostile text
in the step summary and the JUnit XML shown as written (issue 23, class 6)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from smoke import markup, report
from smoke.results import CheckResult, Status, warned
from smoke.stages import MUST_EXECUTE, PORTABLE
from tests.helpers import HOSTILE, REPO, SCHEMA, WAIVED_RESULT, a_run, a_seed_run, hostile_results, rendered, shown, with_result


def test_json_report_follows_the_schema_and_junit_has_one_case_per_check(tmp_path):
    run = a_seed_run("cpu_x86_64", fail="CUDA build", skip="negative control (weighted, no data file)")
    json_path, xml_path = report.write(run, tmp_path)
    data = json.loads(json_path.read_text())
    jsonschema.validate(data, SCHEMA)
    # CUDA build and each MUST_EXECUTE check: one failed, one skipped
    assert data["verdict"] == "fail" and data["counts"] == {"pass": len(MUST_EXECUTE) - 1, "fail": 1, "skip": 1, "warn": 0,
                                                                  "waived": 0}
    suite = ET.parse(xml_path).getroot().find("testsuite")
    assert suite.get("tests") == str(1 + len(MUST_EXECUTE)) and suite.get("failures") == "1" and suite.get("skipped") == "1"
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert list(cases) == [c["name"] for c in data["checks"]]
    assert cases["CUDA build"].find("failure").get("message") == "CUDA build broke"
    assert cases["negative control (weighted, no data file)"].find("skipped").get("message").endswith("not run: no device")
    assert cases["data file (weighted)"].find("failure") is None and cases["data file (weighted)"].get("time") == "0.500"


def test_a_schema_change_is_caught_by_the_schema(tmp_path):
    data = report.to_json(a_seed_run("cpu_x86_64"))
    data["checks"][0]["status"] = "ok"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)


def test_step_summary_is_appended_where_github_sets_it(tmp_path, monkeypatch):
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    report.append_step_summary(a_seed_run("cpu_x86_64", fail="CUDA build"))
    text = target.read_text()
    assert text.startswith("earlier step\n") and "### cpu_x86_64: FAIL" in text and "| CUDA build | FAIL | CUDA build broke |" in text
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert report.append_step_summary(a_seed_run("cpu_x86_64")) is None


def test_the_h200_run_reports_follow_the_schema_they_were_written_with():
    """The reports the CUDA and CPU rows wrote on the H200 (docs/records/runs), read back: schema 2, kept in docs/report-schema-2.json."""
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "docs" / "records" / "runs" / "2026-12-02-h200-s3-reports" / "reports"
    paths = sorted(folder.glob("*.json"))
    assert {p.stem for p in paths} >= {"cuda_x86_64", "cpu_x86_64"}
    schema_2 = json.loads((REPO / "docs" / "report-schema-2.json").read_text())
    for path in paths:
        data = json.loads(path.read_text())
        assert data["schema"] == 2
        jsonschema.validate(data, schema_2)
    cuda = json.loads((folder / "cuda_x86_64.json").read_text())
    assert cuda["device"] == {"name": "NVIDIA H200", "sm": "sm_90"} and cuda["versions"]["torch"] == "2.11.0+cu130"
    by_name = {c["name"]: c for c in cuda["checks"]}
    assert by_name["weights in the data file"]["measured"]["difference_bytes"] == 128
    assert by_name["CUDA build"]["status"] == "fail" and by_name["delegate registers"]["status"] == "fail"


def test_the_step_summary_shows_every_hostile_text_as_written_and_every_row(tmp_path, monkeypatch):
    target = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    run = a_run("cpu_x86_64", results=hostile_results(), wheel="executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.<b>|`x.whl")
    report.append_step_summary(run)
    cells = rendered(target.read_text(encoding="utf-8"))
    assert len(cells.rows) == 1 + len(HOSTILE) + 1  # the header, every hostile check, and the one after them
    for row, text in zip(cells.rows[1:], HOSTILE):
        assert row == [shown(f"check {HOSTILE.index(text)} {text}"), "PASS", shown(text)]
    assert cells.rows[-1] == [PORTABLE.name, "PASS", "the last row"]
    assert not any(part.startswith("<!--") for part in cells.outside)  # no comment got through
    assert "(executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.<b>|`x.whl)" in "".join(cells.outside)


def test_the_junit_xml_holds_every_hostile_text_and_parses(tmp_path):
    """Before: a lone surrogate (a file name that is not UTF-8) stopped the write with UnicodeEncodeError, and a
    control character (a child's colour codes) made a file no XML parser reads."""
    results = [CheckResult(f"check {i}", Status.PASS, text) for i, text in enumerate(HOSTILE)]
    json_path, xml_path = report.write(a_run("cpu_x86_64", results=results), tmp_path)
    suite = ET.parse(xml_path).getroot().find("testsuite")
    out = [case.find("system-out").text for case in suite.findall("testcase")]
    assert out == [markup.xml(text).replace("\r\n", "\n") for text in HOSTILE]  # XML reads a CR LF as LF
    assert out[0] == HOSTILE[0] and out[4] == "<script>alert(1)</script>"  # escaped by ElementTree, read back as written
    assert json.loads(json_path.read_text())["checks"][12]["reason"] == HOSTILE[12]  # JSON keeps it exact


# --- warnings, waived findings and strict in the reports and the matrix summary (issue 34)



def test_a_warning_and_a_waived_finding_are_reported_apart_and_pass(tmp_path):
    run = with_result(with_result(a_seed_run("cpu_x86_64"), warned("no duplicate content", "a data file twice")), WAIVED_RESULT)
    json_path, xml_path = report.write(run, tmp_path)
    data = json.loads(json_path.read_text())
    jsonschema.validate(data, SCHEMA)
    assert data["verdict"] == "pass" and data["exit_code"] == 0 and data["counts"]["warn"] == 1 and data["counts"]["waived"] == 1
    cases = {c.get("name"): c for c in ET.parse(xml_path).getroot().iter("testcase")}
    assert cases["foreign files"].find("skipped").get("message") == "WAIVED foreign files: a Windows .lib (waived: harmless)"
    assert cases["no duplicate content"].find("system-out").text == "WARN no duplicate content: a data file twice"
    assert "| foreign files | WAIVED | a Windows .lib (waived: harmless) |" in report.markdown(run)


def test_a_credential_in_what_a_run_reports_is_masked_in_every_file_it_writes(tmp_path, monkeypatch):
    """Issue 37: torch_source names --torch-index as given; the JSON report, the JUnit XML and the step summary mask
    its password."""
    run = a_seed_run("cpu_x86_64", fail="CUDA build")
    run.torch_source = "package index and https://user:SECRET123@example.com/simple, pinned by torch-2.14.txt"
    run.results.append(CheckResult("torch agrees", Status.FAIL, "from https://TOKEN456@example.com/simple"))
    summary_file = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    written = [*report.write(run, tmp_path / "reports"), report.append_step_summary(run)]
    for path in written:
        text = path.read_text()
        assert "SECRET123" not in text and "TOKEN456" not in text, path
    data = json.loads(written[0].read_text())
    assert data["torch_source"] == "package index and https://user:****@example.com/simple, pinned by torch-2.14.txt"


# --- which wheel and which gate (issue 36): the sha256 and the gate's version in every file a run writes


def test_every_file_a_run_writes_names_the_wheels_sha256_and_the_gate_that_judged_it(tmp_path, monkeypatch):
    """Two runs of one file name looked the same in the step summary; a report did not say which gate wrote it."""
    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    step_summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    run = a_seed_run("cpu_x86_64", fail="CUDA build")
    json_path, xml_path = report.write(run, tmp_path / "reports")
    report.append_step_summary(run)
    data = json.loads(json_path.read_text())
    jsonschema.validate(data, SCHEMA)
    assert data["schema"] == 4 and data["gate"] == {"name": "executorch-wheel-gate", "version": version}
    assert data["wheel"]["sha256"] == run.wheel_sha256 and len(run.wheel_sha256) == 64
    properties = {p.get("name"): p.get("value") for p in ET.parse(xml_path).getroot().iter("property")}
    assert properties["wheel_sha256"] == run.wheel_sha256 and properties["gate_version"] == version
    cells = rendered(step_summary.read_text())
    assert f"wheel sha256 {run.wheel_sha256}; judged by executorch-wheel-gate {version}" in "".join(cells.outside)
    del data["gate"]
    with pytest.raises(jsonschema.ValidationError):  # schema 4 requires it
        jsonschema.validate(data, SCHEMA)


def test_a_report_of_schema_3_follows_the_schema_kept_for_it():
    """The CUDA row's report from the device (docs/records/runs), written before reports named their gate: schema 3, kept in
    docs/report-schema-3.json, and not schema 4."""
    old = json.loads((REPO / "docs" / "records" / "runs" / "2026-12-05-device-after-redesign" / "cuda_x86_64.json").read_text())
    assert old["schema"] == 3 and "gate" not in old
    jsonschema.validate(old, json.loads((REPO / "docs" / "report-schema-3.json").read_text()))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(old, SCHEMA)


def test_a_report_of_outputs_that_are_nan_is_json_every_parser_reads(tmp_path):
    """Issue 48: a runtime whose outputs are NaN is rightly FAILed, but its report held bare NaN tokens, which jq and
    strict parsers refuse; those are the reports that matter."""
    from smoke.results import failed

    nan, inf = float("nan"), float("inf")
    run = with_result(a_seed_run("cpu_x86_64"), failed("extension modules import", "outputs NaN", max_abs_diff=nan,
                                                        outputs=[[nan, inf, -inf, 1.5]], nested={"diff": nan}))
    json_path, _xml = report.write(run, tmp_path)

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    data = json.loads(json_path.read_text(), parse_constant=refuse)
    jsonschema.validate(data, SCHEMA)
    measured = next(c for c in data["checks"] if c["name"] == "extension modules import")["measured"]
    assert measured["max_abs_diff"] == "NaN" and measured["outputs"] == [["NaN", "Infinity", "-Infinity", 1.5]]
    assert measured["nested"] == {"diff": "NaN"}


def test_a_report_of_thousands_of_findings_is_written_within_what_the_summary_reads_and_keeps_its_verdict(tmp_path):
    """Issue 58: a wheel with thousands of RECORD mismatches wrote a report over the summary's 1 MiB limit, and its
    release lost its verdict (`ERROR ... is over 1048576 bytes`). The lists are cut where it is written, saying so."""
    from smoke.commands import summary
    from smoke.results import failed

    run = a_seed_run("cpu_x86_64")
    mismatches = [{"file": f"executorch/data/file-{n:06d}.py", "recorded": "a" * 64, "found": "b" * 64} for n in range(20000)]
    big = failed("wheel RECORD", f"{len(mismatches)} files do not match their sha256 in RECORD: " + "x" * 50_000,
                 mismatched=mismatches, count=len(mismatches))
    run = with_result(run, big)
    json_path, _ = report.write(run, tmp_path)
    assert json_path.stat().st_size <= report.MAX_REPORT_BYTES == summary.MAX_REPORT_BYTES
    data = json.loads(json_path.read_text())
    jsonschema.validate(data, SCHEMA)
    assert data["verdict"] == "fail" and data["counts"]["fail"] == 1
    check = next(c for c in data["checks"] if c["name"] == "wheel RECORD")
    assert check["status"] == "fail" and check["measured"]["count"] == 20000
    cut = check["measured"]["cut_for_size"]
    assert len(check["measured"]["mismatched"]) == cut["kept_of_each_list"] < 20000 and cut["left_out"] == 20000 - cut["kept_of_each_list"]
    assert summary.read_report(json_path) is not None  # the summary reads it: the release keeps its verdict
    small = report.write(a_seed_run("cpu_x86_64"), tmp_path / "small")[0]
    assert "cut_for_size" not in small.read_text()  # a report within the limit is written as it is


def test_the_schema_takes_every_name_the_clean_loader_environment_removes():
    """Issue 58: the interpreter's other variables (PYTHONWARNINGS) are removed too; the schema's list held the six
    caller variables alone, and neither them nor the CI job's files (GITHUB_ENV), which are removed as well."""
    from smoke.environment import loaderenv

    made = loaderenv.clean({"PATH": "/usr/bin", "PYTHONWARNINGS": "error", "GITHUB_ENV": "/x", "LD_PRELOAD": "/y.so"},
                           python="/nonexistent-python")
    run = a_seed_run("cpu_x86_64")
    run.loader_env = made.to_json()
    data = report.to_json(run)
    assert data["loader_environment"]["removed"] == ["LD_PRELOAD", "PYTHONWARNINGS", "GITHUB_ENV"]
    jsonschema.validate(data, SCHEMA)
