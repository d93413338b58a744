"""End to end, on PyPI's executorch 1.5.1 wheel with the torch requirement it lacks added
(``declared_x86_64``): the rows through nox, and the child's checks on real exports with one defect
each. Slow: each builds or uses a real environment."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from smoke.checks.pipeline import result_names
from smoke.rows import ROWS
from tests.helpers import child_row, nox

CPU_CHECKS = len(result_names(ROWS["cpu_x86_64"]))  # every check the row declares

# The tests here read the declared wheel's one row run of the session (tests/conftest.py, declared_row); those that run
# the gate in its environment again hold it while they do (RowRun.using).
pytestmark = [pytest.mark.slow, pytest.mark.network]


@pytest.fixture
def env_dir(declared_row):
    """The rows' environment: the shared run's (about 6 GB with a CUDA torch), this test's alone while it runs."""
    with declared_row.using() as env:
        yield env


@pytest.fixture(scope="module")
def reports(declared_row):
    return declared_row.report.parent


@pytest.fixture(scope="module")
def cpu_run(declared_row):
    print(declared_row.proc.stdout, declared_row.proc.stderr)
    return declared_row.proc, declared_row.report


def test_cpu_row_passes_on_the_public_wheel(cpu_run):
    proc, report = cpu_run
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "PASS delegate (weighted): model.pte" in out and "runs on XnnpackBackend" in out
    assert "PASS data file (weightless): no model.ptd written" in out
    sizes = re.search(r"PASS weights in the data file: model\.ptd is (\d+) B, (\d+) B over the weightless model's 0 B, "
                      r"≥ the 128 B weight matrix", out)
    assert sizes and sizes.group(1) == sizes.group(2)
    assert re.search(r"PASS run with data file \(weighted\): loaded with model\.ptd, matched eager, max abs diff \S+ "
                     r"\(rtol 0.0001, atol 1e-05\)", out)
    # the controls, judged with their twins (issue 56): where each failed, and how
    assert ("PASS negative control (weighted, no data file): the load without model.ptd ended the process with SIGSEGV at "
            "forward (the method's load or its execute), as expected") in out
    assert ("PASS corrupt data file (weighted): a damaged model.ptd ended each load in a clean error: truncated (cut inside its "
            "table): InvalidExternalData (0x24) at program load; cut (its named data cut short, the header intact): "
            "InvalidExternalData (0x24) at program load\n") in out
    assert "PASS C++ consumer without data file: the load without model.ptd ended the C++ consumer with SIGSEGV at method load" in out
    assert "PASS library RUNPATH: 19 libraries" in out and "PASS wheel RECORD:" in out
    assert "PASS platform tag: 19 ELF files within manylinux_2_28_x86_64 (newest needed: GLIBC_2.27, GLIBCXX_3.4.22" in out
    assert re.search(r"PASS libraries resolve: \d+ needed libraries found: .*declared dependencies", out)
    assert re.search(r"PASS dependency libraries installed: \d+ libraries found in the installed torch", out)
    assert re.search(r"PASS torch agrees: torch 2\.14\.1\S*, paired with executorch 1\.5", out)
    assert re.search(r"PASS delegate registers: XnnpackBackend among \d+ registered", out)
    # OpenVINO model: its runtime is the wheel's openvino extra, not installed by default (smoke.child.openvino)
    assert f"cpu_x86_64: PASSED: {CPU_CHECKS - 1} passed, 0 failed, 1 skipped" in out
    assert "SKIP OpenVINO model: not run: the OpenVINO export stack is not installed" in out
    # On success the temporary artifacts folder is removed, and not announced.
    workdir = Path(re.search(r"running the child in (\S+) ", out).group(1))
    assert not workdir.exists() and "artifacts kept" not in out


def test_cuda_row_fails_on_cpu_build_naming_build_and_its_row_in_seconds(cpu_run, declared_x86_64, env_dir):
    # Issue 36: a CPU build on a CUDA row ran the whole child (75 s) before its verdict. `CUDA build` is run first;
    # where it FAILs the row stops after its file checks: nothing built or reused, the installed half skipped, saying why.
    start = time.monotonic()
    proc = nox("-s", "cuda_x86_64", "--", str(declared_x86_64), "--env-dir", str(env_dir), "--reuse-env")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr  # the wheel failed (2 would be: the gate could not run)
    assert "cuda_x86_64: FAILED (exit 1)" in proc.stderr
    assert "FAIL CUDA build: 'executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl' is a CPU build" in out
    assert f"a CPU build is gated by the CPU row: nox -s cpu_x86_64 -- {declared_x86_64}" in out
    assert "FAIL CUDA libraries: the CUDA delegate's libraries of the 1.5 layout are not in the wheel" in out
    assert "FAIL CUDA runtime declared: the wheel's Requires-Dist names no nvidia-* CUDA runtime package" in out
    assert ("the environment is not built: the wheel is a CPU build, which the cuda_x86_64 row cannot run; its row is "
            "cpu_x86_64 (see CUDA build)") in out
    assert "reusing the environment" not in out and "building the environment" not in out and "running the child" not in out
    for check in ("torch agrees", "export (weighted)", "negative control (weighted, no data file)", "registered once"):
        assert f"SKIP {check}: not run: the wheel is a CPU build (see CUDA build)" in out, check
    from smoke.engine.row import installed_half

    # every check of the environment and the child, said skipped, and `device code` (no +cuXXX label)
    skipped = len(installed_half(ROWS["cuda_x86_64"])) + 1
    assert "SKIP device code: not run: the wheel has no +cuXXX label" in out
    assert re.search(rf"\d+ passed, \d+ failed, {skipped} skipped", out), out
    assert time.monotonic() - start < 60  # was 75 s and more


def test_cpu_row_with_no_wheel_gates_the_public_release(tmp_path):
    # The public 1.5.1 declares no torch, which its extension modules need: --fail-fast stops at that, before any install.
    proc = nox("-s", "cpu_x86_64", "--", "--env-dir", str(tmp_path / "env"), "--fail-fast")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "no wheel given: downloading the current executorch release for cp311 x86_64" in proc.stdout
    assert "chose executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl" in proc.stdout
    assert re.search(r"FAIL libraries resolve: executorch/\S+ needs .*libtorch.*: its RUNPATH leads into torch/, the folder of "
                     r"a package the wheel does not declare \(Requires-Dist\), so pip installs none: declare torch", proc.stdout)
    assert "building the environment" not in proc.stdout


# --- the reports of a real run, read back -------------------------------------------------

def test_reports_of_a_real_run_match_the_schema_and_the_printed_lines(cpu_run, declared_x86_64):
    import hashlib
    import xml.etree.ElementTree as ET

    import jsonschema

    from tests.helpers import SCHEMA

    proc, report = cpu_run
    data = json.loads(report.read_text())
    jsonschema.validate(data, SCHEMA)
    assert data["verdict"] == "pass" and data["exit_code"] == 0 and data["mode"] == "row"
    assert data["wheel"] == {"file": declared_x86_64.name, "size": declared_x86_64.stat().st_size,
                             "sha256": hashlib.sha256(declared_x86_64.read_bytes()).hexdigest()}
    assert data["versions"]["executorch"] == "1.5.1" and data["versions"]["torch"].startswith("2.14.1")
    # torch 2.14.1 is no local wheel folder's here or on CI: the index it came from is named, and the line says the same
    assert data["torch_source"].startswith("the package index ") and f"torch from {data['torch_source']}\n" in proc.stdout
    for check in data["checks"]:
        assert f"{check['status'].upper()} {check['name']}: {check['reason']}" in proc.stdout
    assert f"cpu_x86_64: PASSED: {data['counts']['pass']} passed, 0 failed, 1 skipped" in proc.stdout  # OpenVINO model
    phases = [p["name"] for p in data["phases"]]
    assert any(p.startswith("building the environment") for p in phases) and "export (weighted)" in phases
    suite = ET.parse(report.with_suffix(".xml")).getroot().find("testsuite")
    assert [c.get("name") for c in suite.findall("testcase")] == [c["name"] for c in data["checks"]]
    assert suite.get("failures") == "0" and suite.get("skipped") == "1"  # OpenVINO model: no runtime installed


def test_summary_of_the_real_report(cpu_run, reports, tmp_path):
    proc = nox("-s", "summary", "--", str(reports), "--release", "cpu", "--output", str(tmp_path / "summary.md"))
    # cpu_aarch64 did not run here, so the cpu release is not complete.
    assert proc.returncode == 1
    assert "FAIL cpu_aarch64: no report (the cpu release needs this row)" in proc.stdout
    assert re.search(r"\| data file \(weighted\) \| PASS \d+ B \| — \|", proc.stdout)


def test_the_weightless_export_in_a_process_of_its_own_gives_the_same_verdict(cpu_run, declared_x86_64, env_dir):
    # What machines with 4 or more cores do by default; asked for here, on 2.
    proc = nox("-s", "cpu_x86_64", "--", str(declared_x86_64), "--env-dir", str(env_dir), "--reuse-env", "--parallel-exports", "yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"PASS export \(weightless\): wrote model\.pte in \S+ s \(in its own process, beside the other export\)", proc.stdout)
    assert f"cpu_x86_64: PASSED: {CPU_CHECKS - 1} passed, 0 failed, 1 skipped" in proc.stdout  # OpenVINO model


def test_a_real_export_failing_in_its_own_process_is_a_failure_naming_the_error(tmp_path):
    # The helper process really exports through XNNPACK, into a "folder" that is a file.
    import subprocess
    import sys

    from smoke.child.exports import PARALLEL_LABEL, collect_export
    from smoke.record import Recorder

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    from smoke.rows import child_data

    row_file = tmp_path / "row.json"
    row_file.write_text(json.dumps(child_data(ROWS["cpu_x86_64"])))
    cmd = [sys.executable, "-m", "smoke.child.exports", str(row_file), PARALLEL_LABEL, str(blocker), str(tmp_path / "export.json")]
    helper = subprocess.Popen(cmd, stdout=open(tmp_path / "export.log", "wb"), stderr=subprocess.STDOUT)
    rec = Recorder(tmp_path / "record.jsonl", fail_fast=False)
    assert collect_export(rec, child_row("cpu_x86_64"), helper, blocker, tmp_path) is False
    check = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines() if '"check"' in line][-1]
    assert check["status"] == "fail"
    assert "export through the XnnpackBackend partitioner raised" in check["reason"] and "(in its own process)" in check["reason"]


def test_a_nightly_is_judged_with_the_torch_its_pairing_rule_chose(declared_x86_64, tmp_path):
    """A wheel newer than every release line the gate knows (here the declared 1.5.1, relabelled as a nightly of 1.6) is
    judged, not refused: paired by rule with the newest torch line its torch requirement admits, said in the run."""
    from tests.helpers import rewrite_wheel

    name = declared_x86_64.name.replace("1.5.1", "1.6.0.dev20261201")
    nightly = rewrite_wheel(declared_x86_64, tmp_path / "wheel", new_name=name,
                            metadata=lambda text: text.replace("Version: 1.5.1", "Version: 1.6.0.dev20261201"))
    proc = nox("-s", "cpu_x86_64", "--", str(nightly), "--env-dir", str(tmp_path / "env"))
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    rule = ("executorch 1.6.0.dev20261201 is newer than every release line the gate knows (newest: 1.5): paired with "
            "torch 2.14, the newest line it declares (torch>=2.13.0a0) admits (pass --constraints FILE to choose another)")
    assert f"torch paired by rule: {rule}" in out and "constraints constraints/torch-2.14.txt" in out
    assert f"PASS torch agrees: torch 2.14.1+cu130, paired by rule: {rule}" in out
    # OpenVINO model: its runtime is the wheel's openvino extra, not installed by default (smoke.child.openvino)
    assert f"cpu_x86_64: PASSED: {CPU_CHECKS - 1} passed, 0 failed, 1 skipped" in out
    assert "SKIP OpenVINO model: not run: the OpenVINO export stack is not installed" in out
