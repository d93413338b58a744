"""smoke.commands.summary: the matrix summary (``nox -s summary``, ``cli.summary_main``), from runs whose checks
passed, failed and skipped, and hostile inputs to it (issue 23, classes 5 and 6).

The hostile reports are written by the gate's own writer (``smoke.report.write``) from runs whose checks are
a real row's (the emulated 1.5.1 aarch64 CPU row in docs/records/runs), then broken one way each. What a user sees
is asserted: the exit code, its one ERROR or FAIL line, and, for the markup, the table as a Markdown
renderer (markdown-it, CommonMark with GitHub's tables) shows it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smoke import cli, markup, report
from smoke.commands import summary
from smoke.errors import GateError
from smoke.report import Run
from smoke.results import Status, warned
from smoke.rows import RELEASE_ROWS
from tests.helpers import HOSTILE, REPO, SCHEMA, WAIVED_RESULT, WHEELS, a_run, a_seed_run, examples, hostile_results, rendered, shown, with_result


def write_rows(folder, **runs):
    for run in runs.values():
        report.write(run, folder)


def test_summary_passes_when_every_needed_row_passed(tmp_path, capsys):
    write_rows(tmp_path, x=a_seed_run("cpu_x86_64"), a=a_seed_run("cpu_aarch64"))
    assert summary.summary(tmp_path, "cpu") == 0
    out = capsys.readouterr().out
    assert "| check | cpu_x86_64 | cpu_aarch64 |" in out and "| data file (weighted) | PASS 528 B | PASS 528 B |" in out
    assert "summary (cpu release" in out and "PASSED" in out


@pytest.mark.parametrize(
    ("runs", "problem"),
    [
        ([a_seed_run("cpu_x86_64", fail="data file (weighted)"), a_seed_run("cpu_aarch64")], "cpu_x86_64: failed (data file (weighted))"),
        ([a_seed_run("cpu_x86_64")], "cpu_aarch64: no report (the cpu release needs this row)"),
        ([a_seed_run("cpu_x86_64", skip="run with data file (weighted)"), a_seed_run("cpu_aarch64")],
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
    runs = [a_seed_run(r) for r in RELEASE_ROWS["cuda"] if r != "cuda_aarch64"]
    runs.append(a_seed_run("cuda_aarch64", skip="run with data file (weighted)"))
    write_rows(tmp_path, **{str(i): r for i, r in enumerate(runs)})
    assert summary.summary(tmp_path, "cuda") == 0


def test_inspect_reports_are_not_row_runs(tmp_path):
    inspect_run = a_seed_run("cpu_x86_64")
    inspect_run.mode = "inspect"
    write_rows(tmp_path, a=inspect_run, b=a_seed_run("cpu_aarch64"))
    verdict = summary.judge(summary.load_reports(tmp_path), "cpu")
    assert verdict.problems == ["cpu_x86_64: no report (the cpu release needs this row)"]


def test_summary_of_a_missing_folder_is_an_error(tmp_path):
    with pytest.raises(summary.ReportError, match="does not exist"):
        summary.load_reports(tmp_path / "nope")


def test_summary_of_a_folder_with_no_row_report_is_one_error_not_a_failed_release(tmp_path, capsys):
    """Issue 56: nothing to judge is no verdict; it said the release FAILED."""
    (tmp_path / "notes.txt").write_text("not a report")
    code, out, err = summarize(tmp_path, capsys, "--release", "cpu")
    assert code == 2 and "FAILED" not in out and "PASSED" not in out, out
    assert len(err) == 1 and err[0].startswith(f"ERROR reports folder {str(tmp_path)!r} holds no row report"), err
    assert "nothing to judge; pass the folder the rows wrote with --report-dir" in err[0]


def matrix(folder: Path, *rows: str, **runs: Run) -> Path:
    for row in rows:
        report.write(a_run(row), folder / row)
    for row, run in runs.items():
        report.write(run, folder / row)
    return folder


def edit(folder: Path, row: str, change) -> Path:
    path = folder / row / f"{row}.json"
    data = json.loads(path.read_text())
    result = change(data)
    path.write_text(json.dumps(data if result is None else result))
    return path


def summarize(folder: Path, capsys, *args: str) -> tuple[int, str, list[str]]:
    code = cli.summary_main([str(folder), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


def test_a_real_cpu_matrix_passes(tmp_path, capsys):
    code, out, err = summarize(matrix(tmp_path, "cpu_x86_64", "cpu_aarch64"), capsys, "--release", "cpu")
    assert (code, err) == (0, []) and out.rstrip().endswith("PASSED")


# --- class 5: a report the summary cannot judge is one ERROR naming the file, exit 2, before any table


def _check(data, **fields):
    data["checks"][0].update(fields)


MALFORMED = {
    "not JSON": (b"{nope", "is not a JSON report"),
    "not UTF-8": (b'{"schema": 2, "row": "\xff"}', "is not a JSON report"),
    "nested too deep": (b"[" * 100_000, "nested too deep"),
    "a list": (lambda d: [d], "holds a list, not a report object"),
    "a string": (lambda d: "a report", "holds a string"),
    "no checks key": (lambda d: d.pop("checks") and None, "has no 'checks'"),
    "checks a string": (lambda d: d.update(checks="x"), "'checks' is a string"),
    "a check a list": (lambda d: d["checks"].__setitem__(0, ["x"]), "check 1 is a list, not an object"),
    "a check without a name": (lambda d: d["checks"][0].pop("name") and None, "check 1 has no 'name'"),
    "a name a number": (lambda d: _check(d, name=7), "check 1 'name' is an integer"),
    "an unknown status": (lambda d: _check(d, status="ok"), "check 1 has status 'ok', not one of pass, fail, skip"),
    "a status a number": (lambda d: _check(d, status=1), "check 1 'status' is an integer"),
    "measured a list": (lambda d: _check(d, measured=[]), "check 1 'measured' is a list"),
    "exit code true": (lambda d: d.update(exit_code=True), "'exit_code' is a boolean"),
    "no sha256": (lambda d: d["wheel"].update(sha256=""), "is not 64 hex digits"),
    "not a wheel name": (lambda d: d["wheel"].update(file="executorch.zip"), "is not a wheel's file name"),
    "another project": (lambda d: d["wheel"].update(file="torch-2.13.0-cp311-cp311-manylinux_2_28_aarch64.whl"), "is not executorch's"),
    "an unknown row": (lambda d: d.update(row="cpu_x86_64<!--"), "is not a row of this gate"),
    "an unknown mode": (lambda d: d.update(mode="matrix"), "mode 'matrix' is not one of row, inspect"),
    "another schema": (lambda d: d.update(schema="2"), "has report schema '2'"),
    "verdict pass over a FAIL": (lambda d: _check(d, status="fail"), "says verdict 'pass' but its checks hold 1 FAIL"),
    "verdict fail over passes": (lambda d: d.update(verdict="fail", exit_code=1), "says verdict 'fail' but none of its checks failed"),
    "exit code 1 for a pass": (lambda d: d.update(exit_code=1), "says exit code 1 for verdict 'pass'"),
    "counts that lie": (lambda d: d["counts"].update(skip=3), "counts 3 skip but its checks hold 0"),
    "one check twice": (lambda d: d["checks"].append(dict(d["checks"][0])), "appears twice"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_a_malformed_report_is_one_error_naming_the_file(tmp_path, capsys, case):
    change, expected = MALFORMED[case]
    folder = matrix(tmp_path, "cpu_x86_64", "cpu_aarch64")
    path = folder / "cpu_aarch64" / "cpu_aarch64.json"
    if isinstance(change, bytes):
        path.write_bytes(change)
    else:
        edit(folder, "cpu_aarch64", change)
    code, out, err = summarize(folder, capsys, "--release", "cpu")
    assert code == 2 and len(err) == 1 and err[0].startswith(f"ERROR {path}") and expected in err[0], err
    assert out == ""  # no table, no verdict: nothing was judged


def _special(kind: str, path: Path) -> None:
    path.unlink()
    if kind == "a folder":
        path.mkdir()
    elif kind == "a dangling link":
        path.symlink_to(path.with_name("gone.json"))
    elif kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "a device":
        path.symlink_to("/dev/zero")
    elif kind == "huge":
        with open(path, "wb") as handle:  # valid JSON, 64 MiB: a reader that reads it whole grows by that
            handle.write(b'{"schema": 2, "pad": "')
            handle.truncate(64 << 20)


@pytest.mark.parametrize(("kind", "expected"), [("a folder", "is a folder, not a report file"),
                                                ("a dangling link", "is a link to"),
                                                ("a FIFO", "is a FIFO, not a report file"),
                                                ("a device", "is a device, not a report file"),
                                                ("huge", f"is over {summary.MAX_REPORT_BYTES} bytes")])
def test_a_report_that_is_not_a_file_or_is_huge_is_one_error_without_a_hang(tmp_path, kind, expected):
    """Through ``python -m smoke summary``, as a process, so that a FIFO that blocked would show as the timeout."""
    folder = matrix(tmp_path, "cpu_x86_64", "cpu_aarch64")
    path = folder / "cpu_aarch64" / "cpu_aarch64.json"
    _special(kind, path)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "smoke", "summary", str(folder), "--release", "cpu"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    err = proc.stderr.splitlines()
    assert proc.returncode == 2 and err == [err[0]] and err[0].startswith(f"ERROR {path}") and expected in err[0], proc.stderr
    assert time.monotonic() - start < 30 and proc.stdout == ""


def test_a_huge_report_is_refused_after_a_bounded_read(tmp_path):
    folder = matrix(tmp_path, "cpu_aarch64")
    path = folder / "cpu_aarch64" / "cpu_aarch64.json"
    _special("huge", path)
    tracemalloc.start()
    try:
        with pytest.raises(summary.ReportError, match="is over"):
            summary.load_reports(folder)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * summary.MAX_REPORT_BYTES  # 64 MiB on disk; the limit and a copy or two of it read


# --- class 5: a matrix that did not judge one release, or a row that judged nothing, is not a PASS


def test_rows_of_different_releases_fail(tmp_path, capsys):
    older = a_run("cpu_aarch64", wheel="executorch-1.4.0-cp311-cp311-manylinux_2_28_aarch64.whl", executorch="1.4.0")
    code, out, _ = summarize(matrix(tmp_path, "cpu_x86_64", cpu_aarch64=older), capsys, "--release", "cpu")
    assert code == 1
    assert ("FAIL the rows judged different executorch releases: 1.4.0 (cpu_aarch64); 1.5.1 (cpu_x86_64); "
            "one summary judges one release") in out.splitlines()


def test_a_child_that_imported_another_executorch_fails(tmp_path, capsys):
    other = a_run("cpu_aarch64", executorch="1.4.0")
    code, out, _ = summarize(matrix(tmp_path, "cpu_x86_64", cpu_aarch64=other), capsys, "--release", "cpu")
    assert code == 1 and ("FAIL cpu_aarch64: its child imported executorch '1.4.0', not the wheel's 1.5.1 "
                          "(executorch-1.5.1-cp311-cp311-manylinux_2_28_aarch64.whl)") in out.splitlines()


def test_a_cpu_and_a_cuda_row_of_one_release_pass_and_of_one_wheel_fail(tmp_path, capsys):
    rows = ("cuda_x86_64", "cuda_aarch64", "cpu_x86_64", "cpu_aarch64")
    code, out, _ = summarize(matrix(tmp_path / "ok", *rows), capsys)
    assert code == 0, out  # 1.5.1+cu130 and 1.5.1: different builds of one release
    one = a_run("cpu_x86_64", wheel=WHEELS["cuda_x86_64"][0], sha256=WHEELS["cuda_x86_64"][1])  # the CPU row gated the CUDA wheel
    code, out, _ = summarize(matrix(tmp_path / "one", *rows[:2], "cpu_aarch64", cpu_x86_64=one), capsys)
    assert code == 1 and any(line.startswith("FAIL cuda_x86_64 and cpu_x86_64 judged one wheel "
                                             "(executorch-1.5.1+cu130-cp311-cp311-manylinux_2_28_x86_64.whl, sha256 cccc")
                             for line in out.splitlines()), out


def test_two_wheels_under_one_name_fail(tmp_path, capsys):
    twin = a_run("cpu_x86_64", wheel=WHEELS["cuda_x86_64"][0], sha256="e" * 64)
    code, out, _ = summarize(matrix(tmp_path, "cuda_x86_64", "cpu_aarch64", cpu_x86_64=twin), capsys, "--release", "cpu")
    assert code == 1 and ("FAIL cpu_x86_64 and cuda_x86_64 judged two different wheels named "
                          "executorch-1.5.1+cu130-cp311-cp311-manylinux_2_28_x86_64.whl (sha256 eeeeeeeeeeee… and cccccccccccc…)"
                          ) in out.splitlines()


def test_a_report_with_no_checks_is_not_a_pass(tmp_path, capsys):
    """cuda_aarch64 need not execute, so before, a report of no checks (verdict pass, as Run gives it) passed."""
    empty = a_run("cuda_aarch64", results=[])
    code, out, _ = summarize(matrix(tmp_path, "cuda_x86_64", cuda_aarch64=empty), capsys, "--release", "cuda")
    assert code == 1 and "FAIL cuda_aarch64: its report holds no checks, so nothing was judged" in out.splitlines()
    assert "| **verdict** | PASS | NO CHECKS |" in out


# --- --output: checked before any report is read; never replaces what the summary did not write


@pytest.mark.parametrize("kind", ["a folder", "someone's file", "a dangling link"])
def test_an_output_the_summary_did_not_write_is_refused_before_reading(tmp_path, capsys, kind):
    folder = matrix(tmp_path / "reports", "cpu_x86_64", "cpu_aarch64")
    output = tmp_path / "summary.md"
    if kind == "a folder":
        output.mkdir()
    elif kind == "someone's file":
        output.write_text("notes\n")
    else:
        output.symlink_to(tmp_path / "gone")
    code, out, err = summarize(folder, capsys, "--release", "cpu", "--output", str(output))
    assert code == 2 and len(err) == 1 and err[0].startswith(f"ERROR --output {str(output)!r}") and out == ""
    assert output.is_dir() if kind == "a folder" else output.is_symlink() if kind == "a dangling link" else output.read_text() == "notes\n"
    again = tmp_path / "again.md"
    assert summarize(folder, capsys, "--release", "cpu", "--output", str(again))[0] == 0
    assert summarize(folder, capsys, "--release", "cpu", "--output", str(again))[0] == 0  # its own summary: replaced


def test_the_summary_table_shows_hostile_names_as_written_and_every_row(tmp_path, capsys):
    hostile = a_run("cpu_x86_64", results=[*hostile_results()[:-1], *a_run("cpu_x86_64").results])
    folder = matrix(tmp_path / "reports", "cpu_aarch64", cpu_x86_64=hostile)
    output = tmp_path / "summary.md"
    code, _, err = summarize(folder, capsys, "--release", "cpu", "--output", str(output))
    assert code == 0 and err == []  # cpu_aarch64 does not hold the hostile checks: a dash there
    text = output.read_text(encoding="utf-8")
    cells = rendered(text)
    names = [row[0] for row in cells.rows]
    for i, piece in enumerate(HOSTILE):
        assert shown(f"check {i} {piece}") in names
    assert names[-1] == "verdict" and cells.rows[-1] == ["verdict", "PASS", "PASS"]
    assert not any(part.startswith("<!--") for part in cells.outside)
    assert f"summary (cpu release, {folder}): PASSED" in "".join(cells.outside)


# --- hypothesis: the report reader and the judge on generated and mutated reports


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                    max_leaves=20)
KEYS = ["schema", "mode", "row", "verdict", "exit_code", "wheel", "versions", "counts", "checks", "file", "sha256",
        "executorch", "name", "status", "reason", "measured", "pass", "fail", "skip"]


def _mutate(data, path: list[int], value, delete: bool):
    """Replace (or delete) the value one step list down ``path`` leads to, in a copy of a real report."""
    data = copy.deepcopy(data)
    node = data
    for step in path:
        children = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
        if not children:
            break
        key, child = children[step % len(children)]
        if not isinstance(child, (dict, list)) or step % 3 == 0:
            if delete and isinstance(node, dict):
                del node[key]
            else:
                node[key] = value
            return data
        node = child
    return data


@st.composite
def reports(draw):
    kind = draw(st.sampled_from(["generated", "mutated", "bytes"]))
    real = report.to_json(a_run("cpu_aarch64"))
    if kind == "generated":
        document = draw(st.dictionaries(st.sampled_from(KEYS), JSON, max_size=12))
        document.update(draw(st.fixed_dictionaries({}, optional={k: st.just(real[k]) for k in real})))
        return json.dumps(document).encode()
    if kind == "mutated":
        mutated = _mutate(real, draw(st.lists(st.integers(0, 50), min_size=1, max_size=5)), draw(JSON), draw(st.booleans()))
        return json.dumps(mutated).encode()
    raw = bytearray(json.dumps(real).encode())
    for at, byte in draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255)), max_size=8)):
        raw[at] = byte
    return bytes(raw[: draw(st.integers(0, len(raw)))] if draw(st.booleans()) else raw)


def _judge_once(folder: Path, data: bytes) -> None:
    (folder / "cpu_aarch64.json").write_bytes(data)
    try:
        verdict = summary.judge(summary.load_reports(folder), "cpu")
    except GateError:
        return
    markup.text(verdict.table)  # the table is text, whatever the report held


@pytest.fixture(scope="module")
def hypothesis_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hypothesis-reports")
    report.write(a_run("cpu_x86_64"), folder)
    return folder


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reports())
def test_any_report_is_judged_or_refused_with_the_gates_error(hypothesis_folder, data):
    _judge_once(hypothesis_folder, data)


@pytest.mark.slow
def test_thousands_of_reports_judged_or_refused_in_bounded_memory_and_time(tmp_path):
    report.write(a_run("cpu_x86_64"), tmp_path)
    peaks: list[int] = []
    slowest = [0.0]

    @settings(max_examples=examples(4000), deadline=None, database=None)
    @given(reports())
    def one(data):
        tracemalloc.start()
        start = time.monotonic()
        try:
            _judge_once(tmp_path, data)
        finally:
            slowest[0] = max(slowest[0], time.monotonic() - start)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    one()
    assert len(peaks) >= examples(1000)  # thousands under the thorough profile
    assert max(peaks) < 16 << 20, max(peaks)  # a report is at most MAX_REPORT_BYTES (1 MiB) read; these are ~13 KB
    assert slowest[0] < 5, slowest[0]


# --- warnings, waived findings and strict in the matrix summary (issue 34)


def test_a_waived_finding_and_a_warning_pass_the_summary_and_show_in_its_table(tmp_path, capsys):
    run = with_result(with_result(a_seed_run("cpu_x86_64"), warned("no duplicate content", "a data file twice")), WAIVED_RESULT)
    write_rows(tmp_path, x=run, a=a_seed_run("cpu_aarch64"))
    assert summary.summary(tmp_path, "cpu") == 0
    out = capsys.readouterr().out
    assert "| foreign files | WAIVED | — |" in out and "| no duplicate content | WARN | — |" in out


def test_a_strict_run_fails_on_a_warning_and_the_summary_says_why(tmp_path, capsys):
    run = with_result(a_seed_run("cpu_x86_64"), warned("no duplicate content", "a data file twice"), strict=True)
    assert run.verdict == "fail" and run.exit_code == 1
    write_rows(tmp_path, x=run, a=a_seed_run("cpu_aarch64"))
    assert summary.summary(tmp_path, "cpu") == 1
    assert "FAIL cpu_x86_64: failed (no duplicate content, strict: warnings fail)" in capsys.readouterr().out


def test_a_report_that_passes_a_strict_warning_contradicts_itself(tmp_path):
    run = with_result(a_seed_run("cpu_x86_64"), warned("no duplicate content", "a data file twice"), strict=True)
    json_path, _ = report.write(run, tmp_path)
    data = json.loads(json_path.read_text())
    data["verdict"], data["exit_code"] = "pass", 0
    json_path.write_text(json.dumps(data))
    with pytest.raises(summary.ReportError, match="says verdict 'pass' but its checks hold 1 FAIL"):
        summary.read_report(json_path)


def test_a_waived_check_a_row_must_execute_does_not_complete_a_release(tmp_path, capsys):
    run = a_seed_run("cpu_x86_64", fail="data file (weighted)")
    run.results = [dataclasses.replace(r, status=Status.WAIVED, waiver={"check": "data file", "match": None, "reason": "x",
                                                                         "until": None, "was": "fail"})
                   if r.name == "data file (weighted)" else r for r in run.results]
    run.exit_code = 0
    write_rows(tmp_path, x=run, a=a_seed_run("cpu_aarch64"))
    assert summary.summary(tmp_path, "cpu") == 1
    assert "cpu_x86_64: 'data file (weighted)' is waived, and this row must execute it" in capsys.readouterr().out


def test_a_report_of_schema_2_follows_its_own_schema_and_the_summary_asks_for_a_rerun(tmp_path):
    folder = REPO / "docs" / "records" / "runs" / "2026-12-02-h200-s3-reports" / "reports"
    old = json.loads((folder / "cpu_x86_64.json").read_text())
    jsonschema.validate(old, json.loads((REPO / "docs" / "report-schema-2.json").read_text()))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(old, SCHEMA)
    (tmp_path / "cpu_x86_64.json").write_text(json.dumps(old))
    with pytest.raises(summary.ReportError, match="has report schema 2, this gate reads 3 and 4: rerun that row"):
        summary.read_report(tmp_path / "cpu_x86_64.json")


# --- which wheel, which gate (issue 36): the sha256 and the gate's version in the table and in --json


SUMMARY_SCHEMA = json.loads((REPO / "docs" / "summary-schema.json").read_text())


def test_the_table_and_its_json_name_each_rows_wheel_by_sha256_and_the_gate_that_judged_it(tmp_path, capsys):
    """Two runs of one file name looked the same in the matrix table. The cpu_aarch64 report here is of schema 3 (before
    reports named their gate): read, its gate shown as unknown."""
    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    folder = matrix(tmp_path / "reports", "cpu_x86_64", "cpu_aarch64")

    def schema_3(data):
        data["schema"] = 3
        del data["gate"]
    edit(folder, "cpu_aarch64", schema_3)
    written = tmp_path / "out" / "summary.json"
    code, out, err = summarize(folder, capsys, "--release", "cpu", "--json", str(written))
    assert (code, err) == (0, [])
    x86, arm = WHEELS["cpu_x86_64"][1], WHEELS["cpu_aarch64"][1]
    assert f"| sha256 | {x86} | {arm} |" in out
    assert f"| gate | executorch-wheel-gate {version} | unknown (report schema 3) |" in out
    data = json.loads(written.read_text())
    jsonschema.validate(data, SUMMARY_SCHEMA)
    assert (data["verdict"], data["exit_code"], data["release"], data["problems"]) == ("pass", 0, "cpu", [])
    assert data["gate"] == {"name": "executorch-wheel-gate", "version": version}
    by_row = {r["row"]: r for r in data["rows"]}
    assert by_row["cpu_x86_64"]["wheel"] == {"file": WHEELS["cpu_x86_64"][0], "sha256": x86}
    assert by_row["cpu_x86_64"]["gate"]["version"] == version and by_row["cpu_aarch64"]["gate"]["version"] is None
    assert [c["name"] for c in by_row["cpu_x86_64"]["checks"]] == [c.name for c in a_run("cpu_x86_64").results]
    assert summarize(folder, capsys, "--release", "cpu", "--json", str(written))[0] == 0  # its own file: replaced


def test_the_json_of_a_failed_release_holds_each_fail_line(tmp_path, capsys):
    folder = matrix(tmp_path / "reports", cpu_x86_64=a_seed_run("cpu_x86_64", fail="data file (weighted)"))
    written = tmp_path / "summary.json"
    code, out, _ = summarize(folder, capsys, "--release", "cpu", "--json", str(written))
    data = json.loads(written.read_text())
    jsonschema.validate(data, SUMMARY_SCHEMA)
    assert code == 1 and (data["verdict"], data["exit_code"]) == ("fail", 1)
    assert [f"FAIL {p}" for p in data["problems"]] == [line for line in out.splitlines() if line.startswith("FAIL ")]
    assert {r["row"]: r["verdict"] for r in data["rows"]} == {"cpu_x86_64": "fail", "cpu_aarch64": "missing"}


@pytest.mark.parametrize("where", ["inside the reports folder", "a row's report", "a folder"])
def test_a_json_path_the_summary_must_not_write_is_one_error_before_any_report_is_read(tmp_path, capsys, where):
    folder = matrix(tmp_path / "reports", "cpu_x86_64", "cpu_aarch64")
    target = {"inside the reports folder": folder / "summary.json", "a row's report": folder / "cpu_x86_64" / "cpu_x86_64.json",
              "a folder": tmp_path / "reports"}[where]
    before = target.read_bytes() if target.is_file() else None
    code, out, err = summarize(folder, capsys, "--release", "cpu", "--json", str(target))
    assert code == 2 and out == "" and len(err) == 1 and err[0].startswith(f"ERROR --json {str(target)!r}")
    assert (target.read_bytes() if target.is_file() else None) == before


def test_under_github_actions_each_fail_of_the_summary_is_an_error_annotation(tmp_path, capsys, monkeypatch):
    from tests.helpers import annotations

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    folder = matrix(tmp_path / "reports", cpu_x86_64=a_seed_run("cpu_x86_64", fail="data file (weighted)"))
    code, out, _ = summarize(folder, capsys, "--release", "cpu")
    assert code == 1
    fails = [line[len("FAIL "):] for line in out.splitlines() if line.startswith("FAIL ")]
    assert "cpu_aarch64: no report (the cpu release needs this row)" in fails and len(fails) == 3
    assert annotations(out) == [("error", "cpu release", fail) for fail in fails]
