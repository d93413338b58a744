"""`nox -s compare -- OLD.whl NEW.whl`: PyPI's real 1.4.1 and 1.5.1, the same wheel twice, and mutants of 1.5.1.

The static part (the wheel-file checks side by side and the static drift) runs in seconds and is tested
here; the runtime part builds two environments and runs both rows (tests/integration/test_compare.py).
"""

from __future__ import annotations

import json
import math
import shutil
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smoke import markup
from smoke.commands import compare
from smoke.errors import GateError
from smoke.readers.wheelcopy import rewrite_wheel
from smoke.tensors import ATOL, RTOL
from tests.helpers import (
    DEVICE_CODE,
    REAL_REPORT,
    REPO,
    cuda_parts,
    examples,
    make_cuda_wheel,
    nox,
    release_wheel,
    report_of,
    script_child,
    smoke,
    smoke_compare,
)

RELEASES = REPO / ".gate" / "release-table" / "wheels"
# PyPI's real wheels, downloaded once where .ci/release-table has not (a fresh clone, CI): never skipped.
OLD_141 = release_wheel("1.4.1")
NEW_151 = release_wheel("1.5.1")
AARCH64_151 = release_wheel("1.5.1", "aarch64")
needs_releases = pytest.mark.network


# --- the same wheel twice ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def same_twice(declared_x86_64, tmp_path_factory):
    reports = tmp_path_factory.mktemp("same")
    start = time.monotonic()
    proc = smoke_compare(declared_x86_64, declared_x86_64, "--static-only", "--report-dir", reports)
    return proc, report_of(reports), time.monotonic() - start, reports


@pytest.mark.slow
def test_the_same_wheel_twice_has_no_drift_and_exits_0(same_twice):
    proc, data, seconds, reports = same_twice
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    checks = len(data["checks"])  # the row's wheel-file checks (8 when this was written)
    assert checks >= 7 and f"checks: {checks} of {checks} with the same verdict on OLD and NEW" in out
    assert "drift: none in the files, requirements, RUNPATHs, exported symbols or platform policy" in out
    assert "compare cpu_x86_64: no regression: 0 regression(s), 0 kind(s) of static drift" in out
    assert "REGRESSION" not in out and proc.stderr == ""
    static = data["static"]
    assert static["files"]["added"] == static["files"]["removed"] == static["files"]["resized"] == []
    assert static["requires_dist"]["added"] == static["requires_dist"]["removed"] == static["requires_dist"]["changed"] == []
    assert static["libraries"]["runpath"] == static["libraries"]["symbols_removed"] == []
    assert data["regressions"] == [] and data["exit_code"] == 0 and data["runtime"] is None
    assert all(c["old"] == c["new"] == "pass" for c in data["checks"]), data["checks"]
    assert (reports / "compare-cpu_x86_64.md").read_text().startswith("### compare cpu_x86_64: NO REGRESSION")
    assert seconds < 30, seconds  # two reads of the 19 MB wheel, nothing installed


# --- 1.4.1 against 1.5.1: the real differences, measured with this command first --------------------


@pytest.fixture(scope="module")
def real_pair(tmp_path_factory):
    reports = tmp_path_factory.mktemp("real")
    summary = reports / "step-summary.md"
    proc = smoke_compare(OLD_141, NEW_151, "--static-only", "--report-dir", reports, env={"GITHUB_STEP_SUMMARY": str(summary)})
    return proc, report_of(reports), summary


@pytest.mark.slow
@needs_releases
def test_1_4_1_to_1_5_1_regresses_libraries_resolve_because_torch_left_requires_dist(real_pair):
    proc, data, _ = real_pair
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    # 1.4.1 declared torch>=2.13.0a0; 1.5.1 declares none, while its extension modules still need libtorch.
    assert "drift: Requires-Dist removed: torch>=2.13.0a0" in out
    assert ("REGRESSION check regressed: libraries resolve: PASS on OLD, FAIL on NEW: executorch/extension/llm/custom_ops/"
            "libcustom_ops_aot_lib.so needs libtorch.so, libtorch_cpu.so, libc10.so: its RUNPATH leads into torch/") in out
    # The same missing torch from the Python side: executorch.exir imports it (issue 28's imports declared).
    assert [c["name"] for c in data["checks"] if c["regression"]] == ["libraries resolve", "imports declared"]
    assert len(data["regressions"]) == 2 and data["exit_code"] == 1
    # 1.5's one runtime core passes where 1.4.1's failed: a change, printed, not a regression.
    assert "check one runtime core: FAIL -> PASS: each runtime component has one definer" in out
    same = sum(1 for c in data["checks"] if c["old"] == c["new"])
    assert same <= len(data["checks"]) - 2 and f"checks: {same} of {len(data['checks'])} with the same verdict" in out


@pytest.mark.slow
@needs_releases
def test_1_4_1_to_1_5_1_static_drift_is_what_the_wheels_hold(real_pair):
    proc, data, _ = real_pair
    out, static = proc.stdout, data["static"]
    files, reqs, libs = static["files"], static["requires_dist"], static["libraries"]
    assert (len(files["added"]), len(files["removed"]), len(files["resized"])) == (570, 90, 109)
    assert files["wheel_bytes"] == {"old": 17569868, "new": 18887977}
    assert files["total_bytes"] == {"old": 59165912, "new": 64169539}
    assert "executorch/backends/apple/mps/__init__.py" in files["removed"]
    assert reqs["added"] == ["py-cpuinfo", "requests"] and reqs["removed"] == ["torch>=2.13.0a0"]
    assert reqs["torch_declared"] == {"old": ["torch>=2.13.0a0"], "new": []}
    assert reqs["torch_paired"] == {"old": "2.13", "new": "2.14"}
    assert {c["project"]: (c["old"], c["new"]) for c in reqs["changed"]}["torchao"] == (["torchao>=0.18.0"], ["torchao<0.19,>=0.18.0"])
    assert len(reqs["changed"]) == 6
    # The runtime moved into executorch/lib: nine ELF files added, the QNN library and _portable_lib gone.
    assert libs["removed"] == ["executorch/backends/qualcomm/libqnn_executorch_backend.so",
                               "executorch/extension/pybindings/_portable_lib.cpython-311-x86_64-linux-gnu.so"]
    assert len(libs["added"]) == 9 and "executorch/lib/libexecutorch.so" in libs["added"]
    assert len(libs["runpath"]) == 9
    runpath = {c["library"]: c for c in libs["runpath"]}["executorch/extension/llm/custom_ops/libcustom_ops_aot_lib.so"]
    assert runpath["old"] == ["$ORIGIN/../../pybindings", "$ORIGIN/../../../../torch/lib", "$ORIGIN/../../../../../.."]
    assert "$ORIGIN/../../../lib" in runpath["new"]
    removed = {s["library"]: s for s in libs["symbols_removed"]}
    training = removed["executorch/extension/training/pybindings/_training_lib.cpython-311-x86_64-linux-gnu.so"]
    assert (training["removed"], training["old_exports"], training["exported_elsewhere"]) == (1027, 1061, 1020)
    assert len(removed) == 7
    assert ("drift: exported symbols removed from executorch/extension/training/pybindings/_training_lib.cpython-311-x86_64-"
            "linux-gnu.so: 1027 of 1061 (1020 of them exported by another file of NEW)") in out
    assert libs["policy"] == {"old": "manylinux_2_27_x86_64", "new": "manylinux_2_27_x86_64",
                              "old_newest": ["GLIBC_2.27", "GLIBCXX_3.4.22", "CXXABI_1.3.11", "GCC_3.4"],
                              "new_newest": ["GLIBC_2.27", "GLIBCXX_3.4.22", "CXXABI_1.3.11", "GCC_4.0.0"]}


@needs_releases
def test_the_markdown_goes_to_the_step_summary_and_the_report_folder(real_pair, tmp_path):
    proc, data, summary = real_pair
    text = summary.read_text()
    assert text.startswith("### compare cpu_x86_64: REGRESSED (executorch-1.4.1-cp311-cp311-manylinux_2_28_x86_64.whl → "
                           "executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl)")
    assert "| libraries resolve | PASS | FAIL **regressed** |" in text
    assert "| one runtime core | FAIL | PASS |" in text
    assert r"\_\_init\_\_.py" in text  # a file name from the wheel, escaped for Markdown
    assert f"step summary: appended to {summary}" in proc.stdout


# --- a broken NEW: a library removed from 1.5.1 ----------------------------------------------------


@pytest.mark.slow
def test_a_library_removed_from_new_is_a_regression_naming_it(declared_x86_64, tmp_path):
    broken = rewrite_wheel(declared_x86_64, tmp_path / "broken", drop=("executorch/lib/libexecutorch_threadpool.so",))
    proc = smoke_compare(declared_x86_64, broken, "--static-only", "--report-dir", tmp_path / "reports")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    # the first of the files that need it (_C and libcustom_ops_aot_lib.so search torch/lib too, which ships no such file)
    assert ("REGRESSION check regressed: libraries resolve: PASS on OLD, FAIL on NEW: executorch/extension/llm/custom_ops/"
            "libcustom_ops_aot_lib.so needs libexecutorch_threadpool.so: not in the wheel") in out
    assert "drift: files removed: 1: executorch/lib/libexecutorch_threadpool.so" in out
    assert "drift: ELF files removed: 1: executorch/lib/libexecutorch_threadpool.so" in out
    data = report_of(tmp_path / "reports")
    assert data["static"]["libraries"]["removed"] == ["executorch/lib/libexecutorch_threadpool.so"]
    # and upstream's table requires the thread pool's owner: one runtime core regresses too
    assert data["exit_code"] == 1 and len(data["regressions"]) == 2
    assert ("REGRESSION check regressed: one runtime core: PASS on OLD, FAIL on NEW: a runtime component's owner is not "
            "shipped: the wheel ships no executorch/lib/libexecutorch_threadpool.so, which owns the thread pool, bundled thread "
            "pool (upstream's table requires it: packaging dropped it or the build did not make it)") in out


@pytest.mark.slow
def test_a_library_added_back_is_no_regression(declared_x86_64, tmp_path):
    """The other way round (OLD broken, NEW whole): FAIL -> PASS is printed, and the exit is 0."""
    broken = rewrite_wheel(declared_x86_64, tmp_path / "broken", drop=("executorch/lib/libexecutorch_threadpool.so",))
    proc = smoke_compare(broken, declared_x86_64, "--static-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check libraries resolve: FAIL -> PASS:" in proc.stdout
    assert "drift: files added: 1: executorch/lib/libexecutorch_threadpool.so" in proc.stdout


@pytest.mark.slow
def test_a_cuda_library_that_lost_device_code_is_a_regression_and_its_sm_list_drift(slim_x86_64, tmp_path):
    """A CUDA build whose shims carry code for sm_90 only (tests/data/device-code) after one that covered cu130's list."""
    old = make_cuda_wheel(slim_x86_64, tmp_path / "old")
    new = make_cuda_wheel(slim_x86_64, tmp_path / "new",
                          parts=cuda_parts(slim_x86_64, shims=(DEVICE_CODE / "libsm90_only.so").read_bytes()))
    proc = smoke_compare(old.path, new.path, "--static-only", "--report-dir", tmp_path / "reports")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "row: cuda_x86_64;" in out
    assert ("REGRESSION check regressed: device code: PASS on OLD, FAIL on NEW: executorch/backends/cuda/libaoti_cuda_shims.so "
            "has no machine code for sm_80, sm_86, sm_89, sm_100, sm_120") in out
    assert ("drift: CUDA device code of executorch/backends/cuda/libaoti_cuda_shims.so: sm_80 sm_86 sm_89 sm_90 sm_100 sm_120, "
            "PTX sm_120 -> sm_90, PTX none") in out
    data = report_of(tmp_path / "reports", "cuda_x86_64")
    assert data["static"]["device_code"] == {"added": [], "removed": [], "changed": [{
        "library": "executorch/backends/cuda/libaoti_cuda_shims.so",
        "old": {"sm": ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"], "ptx": ["sm_120"]},
        "new": {"sm": ["sm_90"], "ptx": []}}]}


@pytest.mark.slow
def test_a_cpu_row_has_no_device_code_drift(same_twice):
    assert same_twice[1]["static"]["device_code"] is None


@pytest.mark.slow
def test_the_nox_session_runs_compare(declared_x86_64):
    proc = nox("-s", "compare", "--", str(declared_x86_64), str(declared_x86_64), "--static-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "compare cpu_x86_64: no regression" in proc.stdout + proc.stderr


# --- bad input: one ERROR line, exit 2 --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("case, message", [
    ("missing", "OLD: wheel '"),
    ("not_a_wheel", "NEW: "),
    ("machines", "compare two wheels of one machine"),
    ("unknown_option", "unrecognized arguments: --frobnicate (see --help)"),
    ("no_new", "the following arguments are required: new (see --help)"),
])
def test_bad_input_is_one_error_line_and_exit_2(declared_x86_64, tmp_path, case, message):
    junk = tmp_path / "executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    junk.write_bytes(b"not a zip")
    args = {"missing": [tmp_path / "nothing.whl", declared_x86_64, "--static-only"],
            "not_a_wheel": [declared_x86_64, junk, "--static-only"],
            "machines": [AARCH64_151, declared_x86_64, "--static-only"],
            "unknown_option": [declared_x86_64, declared_x86_64, "--frobnicate"],
            "no_new": [declared_x86_64]}[case]
    if case == "machines" and not AARCH64_151.is_file():
        pytest.skip(f"{AARCH64_151} is not cached")
    proc = smoke_compare(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR ") and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_report_folder_that_is_a_file_is_refused_before_any_work(declared_x86_64, tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("mine")
    proc = smoke_compare(declared_x86_64, declared_x86_64, "--static-only", "--report-dir", taken)
    assert proc.returncode == 2 and proc.stderr.startswith("ERROR ") and proc.stdout == "", proc.stdout + proc.stderr
    assert taken.read_text() == "mine"


@pytest.mark.slow
def test_a_row_that_could_not_judge_is_an_error_naming_it_and_its_log(declared_x86_64, tmp_path):
    """A row run that exits 2 (here an interpreter that does not exist) is compare's ERROR, not a verdict."""
    proc = smoke_compare(declared_x86_64, declared_x86_64, "--python", tmp_path / "no-python", "--env-dir", tmp_path / "envs")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("ERROR the cpu_x86_64 row could not judge OLD 'executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl' "
                           "(exit 2): ") and "(its log: " in line and "\n" not in line, line
    assert "no-python" in line
    kept = Path(line.rsplit("(its log: ", 1)[1].rstrip(")")).parent
    assert kept.name.startswith("gate-compare-cpu_x86_64-")
    shutil.rmtree(kept)  # the logs the error named, kept for the user; not for a test run


# --- the runtime comparison, on reports shaped as a row writes them ---------------------------------


def row_report(weighted=(0.5, -0.25), sizes=(1600, 1744, 0, 528, 3664), export=2.0, status="pass") -> dict:
    def check(name, **measured):
        return {"name": name, "status": status, "reason": "r", "measured": measured, "seconds": 0.1}

    return {"versions": {"executorch": "1.5.1", "torch": "2.13.0+cpu", "python": "3.11.7"},
            "phases": [{"name": "export (weighted)", "seconds": export}, {"name": "export (weightless)", "seconds": 10.0}],
            "checks": [check("delegate (weightless)", pte_bytes=sizes[0]), check("delegate (weighted)", pte_bytes=sizes[1]),
                       check("data file (weightless)", data_file_bytes=sizes[2]), check("data file (weighted)", data_file_bytes=sizes[3]),
                       check("run with data file (weightless)", max_abs_diff=0.0, outputs=[[1.0, 2.0]]),
                       check("run with data file (weighted)", max_abs_diff=1e-7, outputs=[list(weighted)]),
                       check("portable kernels", max_abs_diff=0.0, outputs=[[0.0]], pte_bytes=sizes[4])]}


def test_outputs_within_tolerance_are_information_past_it_a_regression_naming_the_check():
    same = compare.runtime_drift(row_report(), row_report())
    assert compare.regressions([], same) == []
    assert all(e["max_abs_diff"] == 0.0 and e["within_tolerance"] for e in same["outputs"])
    # 0.5 moved by atol + rtol * 0.5 is at the tolerance (assert_close's bound); twice that is past it.
    edge = 0.5 + (ATOL + RTOL * 0.5) * 0.99
    assert compare.regressions([], compare.runtime_drift(row_report(), row_report(weighted=(edge, -0.25)))) == []
    past = compare.runtime_drift(row_report(), row_report(weighted=(0.5 + 2 * (ATOL + RTOL * 0.5), -0.25)))
    found = compare.regressions([], past)
    assert found == [f"outputs drift: run with data file (weighted): NEW differs from OLD past rtol 0.0001, atol 1e-05: "
                     f"max abs diff {2 * (ATOL + RTOL * 0.5):.3g}"]


def test_outputs_of_another_shape_and_missing_outputs():
    shape = compare.runtime_drift(row_report(), row_report(weighted=(0.5,)))
    entry = shape["outputs"][1]
    assert entry["within_tolerance"] is False and entry["not_compared"] == "the outputs' shapes differ: OLD [2] values, NEW [1]"
    assert compare.regressions([], shape)[0].endswith("the outputs' shapes differ: OLD [2] values, NEW [1]")
    failed = row_report(status="fail")
    for check in failed["checks"]:
        check["measured"].pop("outputs", None)
    missing = compare.runtime_drift(row_report(), failed)
    assert missing["outputs"][0]["not_compared"] == "no outputs recorded on NEW (the check is fail)"
    assert compare.regressions([], missing) == []  # the check's own PASS -> FAIL names it


def test_sizes_and_times_are_ratios_new_over_old():
    drift = compare.runtime_drift(row_report(), row_report(sizes=(1600, 3488, 0, 528, 3664), export=3.0))
    sizes = {e["artifact"]: e for e in drift["sizes"]}
    assert sizes["weighted .pte"] == {"artifact": "weighted .pte", "old": 1744, "new": 3488, "ratio": 2.0}
    assert sizes["weightless .ptd"]["ratio"] is None  # 0 B written on both: no ratio
    times = {e["phase"]: e for e in drift["times"]}
    assert times["export (weighted)"]["ratio"] == 1.5 and times["load and run (weighted)"]["old"] is None


def test_a_check_pass_on_old_and_fail_skip_or_gone_on_new_is_a_regression():
    old = [{"name": n, "status": s, "reason": "o"} for n, s in (("a", "pass"), ("b", "pass"), ("c", "fail"), ("d", "skip"), ("e", "pass"),
                                                                 ("g", "pass"), ("h", "pass"))]
    new = [{"name": n, "status": s, "reason": "n"} for n, s in (("a", "pass"), ("b", "fail"), ("c", "pass"), ("d", "fail"), ("f", "fail"),
                                                                 ("g", "skip"), ("h", "warn"))]
    rows = {r["name"]: r for r in compare.side_by_side(old, new)}
    assert sorted(n for n, r in rows.items() if r["regression"]) == ["b", "e", "g"]
    assert (rows["e"]["new"], rows["f"]["old"]) == (None, None)
    assert compare.regressions(list(rows.values()), None) == [
        "check regressed: b: PASS on OLD, FAIL on NEW: n", "check not run on NEW: g: PASS on OLD, SKIP on NEW: n",
        "checks not reported on NEW: 1, each PASS on OLD: e"]


@pytest.mark.parametrize(("name", "old", "new", "regressed"), [
    ("child process", None, "fail", True),  # NEW's child crashed, hung or did not reach its end; OLD's ended well
    ("child process", "fail", "fail", True),  # OLD's crashed too: still nothing after that point was judged on NEW
    ("child process", "fail", None, False),
    ("must execute", None, "fail", True),  # reported only when it fails: not there on OLD is not failed
    ("must execute", "fail", "fail", False),
    ("torch agrees", "pass", "skip", True),
    ("torch agrees", "pass", None, True),
    ("torch agrees", "pass", "warn", False),
    ("torch agrees", "skip", "fail", False),
    ("torch agrees", None, "fail", False),
])
def test_what_is_a_regression_of_one_check(name, old, new, regressed):
    assert compare.regressed(name, old, new) is regressed


@pytest.fixture(scope="module")
def crashed_new(declared_x86_64, tmp_path_factory):
    """A real row report of a NEW whose child died: the cpu_x86_64 row run by the gate on the declared 1.5.1, its
    environment's interpreter a script that ends itself with SIGSEGV where the child would import torch."""
    from smoke import cli

    folder = tmp_path_factory.mktemp("crashed")
    with pytest.MonkeyPatch.context() as monkeypatch:
        script_child(monkeypatch, folder / "env", 'echo "importing torch" >&2; kill -SEGV $$')
        code = cli.main(["cpu_x86_64", str(declared_x86_64), "--env-dir", str(folder / "env-dir"), "--workdir",
                         str(folder / "work"), "--report-dir", str(folder / "reports")])
    assert code == 1
    return json.loads((folder / "reports" / "cpu_x86_64.json").read_text())


@pytest.mark.slow
def test_a_new_whose_child_crashed_is_a_regression_naming_it(declared_x86_64, crashed_new, tmp_path, monkeypatch, capsys):
    """OLD: a real row that passed every check (the emulated 1.5.1 CPU row in docs/records/runs); NEW: the crashed run above.
    The two row runs are those reports; the rest of compare is real (the static part reads the wheel twice)."""
    runs = {"old": REAL_REPORT, "new": crashed_new}
    monkeypatch.setattr(compare, "run_row", lambda row, which, *args: runs[which])
    code = compare.compare(declared_x86_64, declared_x86_64, None, False, tmp_path / "reports", tmp_path / "envs", [])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "REGRESSION NEW's child did not reach its end: child process: FAIL on NEW: ended by SIGSEGV; last output: " \
           "importing torch" in out
    # what the crash left unjudged on NEW, each PASS on OLD: the environment checks skipped, the child's not reported
    assert "REGRESSION check not run on NEW: torch agrees: PASS on OLD, SKIP on NEW: not run: the child ended before it " \
           "reported torch and the runtime (see child process)" in out
    assert "REGRESSION checks not reported on NEW: 10, each PASS on OLD: export (weightless), export (weighted), " in out
    assert "REGRESSION check regressed: must execute: FAIL on NEW, not on OLD: the cpu_x86_64 row must execute" in out
    assert "check export (weighted): PASS -> NOT REPORTED" in out
    assert "compare cpu_x86_64: REGRESSED: " in out and "no regression" not in out
    data = report_of(tmp_path / "reports")
    assert data["exit_code"] == 1 and data["regressions"][0].startswith("NEW's child did not reach its end: child process")
    assert {c["name"] for c in data["checks"] if c["regression"]} >= {"child process", "must execute", "torch agrees",
                                                                      "export (weighted)", "negative control (weighted, no data file)"}


# A row run standing in for `python -m smoke ROW WHEEL`: it says its phases as a row does, and after the first waits for
# compare to have said it (a file compare's line makes), so that a compare saying the phases only at the row's end fails.
STUB_ROW = """
import json, os, sys, time
from pathlib import Path
reports, seen = Path(sys.argv[1]), Path(sys.argv[2])
print("  ... import torch and executorch", flush=True)
print("PASS torch agrees: torch 2.14.1", flush=True)
deadline = time.monotonic() + 10
while not seen.exists():
    if time.monotonic() > deadline:
        print("ERROR compare said nothing while the row ran", flush=True)
        sys.exit(2)
    time.sleep(0.05)
print("  ... import torch and executorch: 0.4 s", flush=True)
reports.mkdir(parents=True)
(reports / "cpu_x86_64.json").write_text(json.dumps({"checks": []}))
print("cpu_x86_64: PASSED: 1 passed, 0 failed, 0 skipped in 0.5 s", flush=True)
"""


def test_each_rows_phases_are_said_while_it_runs(tmp_path, monkeypatch, capsys):
    """A row takes about a minute per wheel: compare says when each starts, its phases as they come (not its checks),
    and its verdict line with the seconds it took."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from smoke.rows import ROWS

    real_popen, real_say, seen = subprocess.Popen, compare.say, tmp_path / "seen"
    monkeypatch.setattr(compare.subprocess, "Popen", lambda cmd, **kw: real_popen(
        [sys.executable, "-c", STUB_ROW, cmd[cmd.index("--report-dir") + 1], str(seen)], **kw))
    monkeypatch.setattr(compare, "say", lambda text: (real_say(text), "import torch" in text and seen.touch()))
    wheel = SimpleNamespace(path=tmp_path / "executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl",
                            filename="executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert compare.run_row(ROWS["cpu_x86_64"], "old", wheel, tmp_path / "envs", tmp_path, []) == {"checks": []}
    said = capsys.readouterr().out.splitlines()
    assert said[0] == f"running cpu_x86_64 on OLD executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl (log: {tmp_path / 'old.log'})"
    assert said[1:3] == ["  OLD ... import torch and executorch", "  OLD ... import torch and executorch: 0.4 s"]
    assert said[3].startswith("  OLD: cpu_x86_64: PASSED: 1 passed, 0 failed, 0 skipped in 0.5 s (") and said[3].endswith(" s)")
    assert len(said) == 4  # the row's check lines stay in its log


def test_the_markdown_escapes_what_came_from_a_wheel():
    data = {"row": "cpu_x86_64", "regressions": ["check regressed: x | y"],
            "old": {"file": "a|b.whl"}, "new": {"file": "<c>.whl"},
            "checks": [{"name": "n|m", "old": "pass", "new": "fail", "regression": True, "new_reason": "a | b <img>"}],
            "static": {"files": {"added": ["x|<y>"], "removed": [], "resized": [], "wheel_bytes": {"old": 1, "new": 1},
                                 "total_bytes": {"old": 1, "new": 1}},
                       "requires_dist": {"added": [], "removed": [], "changed": [], "torch_paired": {"old": None, "new": None}},
                       "libraries": {"added": [], "removed": [], "runpath": [], "symbols_removed": [],
                                     "policy": {"old": None, "new": None, "old_newest": [], "new_newest": []}},
                       "thresholds": {"size_ratio": 0.1, "size_bytes": 4096}},
            "runtime": None}
    text = compare.markdown(data)
    assert markup.text("a | b <img>") in text and "a | b <img>" not in text
    assert markup.text("files added: 1: x|<y>") in text and "<y>" not in text
    assert markup.text("a|b.whl") in text


# --- properties: whatever a report holds, only numbers come out, within bounds ------------------------


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
                           max_leaves=20)
outputs = st.lists(st.lists(st.integers() | st.floats(), max_size=8), max_size=3)


def measured_report(draw_measured: dict) -> dict:
    return {"checks": [{"name": name, "status": "pass", "measured": value} for name, value in draw_measured.items()],
            "phases": draw_measured.get("phases")}


check_names = st.sampled_from([*compare.OUTPUT_CHECKS, "delegate (weighted)", "data file (weighted)", "phases"])
reports = st.dictionaries(check_names, st.dictionaries(st.sampled_from(["outputs", "max_abs_diff", "pte_bytes", "data_file_bytes"]),
                                                        json_values | outputs, max_size=4) | json_values, max_size=6)


def _judge_any(old, new):
    drift = compare.runtime_drift(measured_report(old), measured_report(new))
    found = compare.regressions([], drift)
    json.dumps(drift, allow_nan=False)  # a report always JSON: no NaN or infinity written
    return drift, found


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old=reports, new=reports)
def test_any_report_content_gives_a_runtime_drift_and_never_raises(old, new):
    _judge_any(old, new)


def test_a_phase_whose_name_is_not_text_is_left_out_not_a_traceback():
    """Found by the thousands below under xdist (2026-12-06): a phase named by a list raised TypeError (unhashable)."""
    drift, _found = _judge_any({}, {"run with data file (weighted)": {}, "phases": [{"name": []}, {"name": "export (weighted)", "seconds": 1.5}]})
    assert [t for t in drift["times"] if t["new"] is not None] == [{"phase": "export (weighted)", "old": None, "new": 1.5, "ratio": None}]


@settings(max_examples=examples(300), deadline=None)
@given(values=outputs)
def test_outputs_against_themselves_never_drift(values):
    worst, close = compare.output_drift(values, [list(v) for v in values])
    assert close and worst == 0.0


@pytest.mark.slow
@settings(max_examples=examples(3000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old=reports, new=reports, a=outputs, b=outputs)
def test_many_reports_only_numbers_come_out_within_memory_and_time(old, new, a, b):
    tracemalloc.start()
    start = time.monotonic()
    try:
        _judge_any(old, new)
        worst, close = compare.output_drift(a, b)
        assert worst is None or worst >= 0 or math.isnan(worst) is False
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, peak
    assert time.monotonic() - start < 2


def test_a_compare_error_is_a_gate_error():
    assert issubclass(compare.CompareError, GateError)


def test_a_report_the_gate_did_not_write_is_left_alone_before_any_work(declared_x86_64, tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    mine = reports / "compare-cpu_x86_64.md"
    mine.write_text("my notes\n")
    proc = smoke_compare(declared_x86_64, declared_x86_64, "--static-only", "--report-dir", reports)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == (f"ERROR report {str(mine)!r} is a file the gate did not write, which the gate will not replace: "
                           f"remove it, or pass another --report-dir\n")
    assert "checks:" not in proc.stdout and mine.read_text() == "my notes\n"
    assert sorted(p.name for p in reports.iterdir()) == ["compare-cpu_x86_64.md"]


@pytest.mark.slow
def test_its_own_earlier_reports_are_replaced(same_twice, declared_x86_64):
    reports = same_twice[3]
    proc = smoke_compare(declared_x86_64, declared_x86_64, "--static-only", "--report-dir", reports)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in reports.iterdir()) == ["compare-cpu_x86_64.json", "compare-cpu_x86_64.md"]
    report_of(reports)


def test_a_second_compare_into_a_report_folder_in_use_is_refused_and_the_firsts_reports_stay(same_twice, declared_x86_64):
    """A compare of the row holds its reports from before any work until they are written: a second one into the same
    folder meanwhile (here, while this test holds them as a running compare does) is one ERROR line, exit 2."""
    import os

    reports = same_twice[3]
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in reports.iterdir()}
    assert sorted(before) == ["compare-cpu_x86_64.json", "compare-cpu_x86_64.md"]
    with compare.hold_reports(reports, "cpu_x86_64"):
        proc = smoke_compare(declared_x86_64, declared_x86_64, "--static-only", "--report-dir", reports)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr == (f"ERROR report folder {str(reports)!r} is in use by another gate run (pid {os.getpid()}) that "
                               f"writes the same reports: wait for it to end, or pass another folder to --report-dir\n")
        assert "checks:" not in proc.stdout
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in reports.iterdir()} == before


def test_outputs_a_report_wrote_by_name_are_compared_as_the_floats_they_were():
    """A report writes NaN and the infinities by name, so that it is JSON (smoke.report.finite, issue 48): compare
    reads them back as those floats, not as outputs missing."""
    old = measured_report({"run with data file (weighted)": {"outputs": [[1.0, "Infinity"]], "max_abs_diff": "NaN"}})
    new = measured_report({"run with data file (weighted)": {"outputs": [[1.0, 2.0]], "max_abs_diff": 0.0}})
    entry = next(e for e in compare.runtime_drift(old, new)["outputs"] if e["check"] == "run with data file (weighted)")
    assert entry["not_compared"] is None and entry["within_tolerance"] is False
    assert entry["old_vs_eager"] is None and entry["new_vs_eager"] == 0.0


@pytest.mark.parametrize(("old", "new"), [([[math.inf]], [[2.0]]), ([[2.0]], [[math.inf]]), ([[-math.inf]], [[math.inf]])])
def test_an_infinity_is_close_only_to_itself(old, new):
    """OLD's infinity made the tolerance (atol + rtol * |old|) infinite, so any NEW was judged close (found with issue 48's
    NaN reports)."""
    assert compare.output_drift(old, new) == (math.inf, False)
    assert compare.output_drift(old, [list(v) for v in old]) == (0.0, True)


@pytest.mark.slow
def test_summary_of_a_folder_holding_compare_and_inspect_reports_leaves_them_out(same_twice, declared_x86_64):
    """Issue 48: inspect and compare --report-dir into one folder, then summary of it: compare's report is not a
    row's and is left out, as inspect's is (it was one ERROR, 'has report schema 1 ... rerun that row', exit 2). With
    no row's report left, there is nothing to judge: one ERROR saying so (issue 56; it said the release FAILED)."""
    reports = same_twice[3]
    inspected = smoke("inspect", declared_x86_64, "--report-dir", reports)
    assert inspected.returncode == 0 and (reports / "inspect-cpu_x86_64.json").is_file(), inspected.stdout + inspected.stderr
    proc = smoke("summary", reports, "--release", "cpu")
    assert proc.returncode == 2 and "report schema" not in proc.stderr, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"ERROR reports folder {str(reports)!r} holds no row report (2 other JSON files): nothing "
                                  "to judge"), proc.stderr
