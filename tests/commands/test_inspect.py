"""`nox -s inspect -- WHEEL`: PyPI's real wheels, both architectures, with nothing installed."""

from __future__ import annotations

import json
import time

import jsonschema
import pytest

from tests.helpers import SCHEMA, nox


@pytest.mark.slow
def test_inspect_of_the_x86_64_cpu_wheel_on_both_rows_fails_the_cuda_row(wheel_x86_64, tmp_path):
    start = time.monotonic()
    proc = nox("-s", "inspect", "--", str(wheel_x86_64), "--row", "cuda_x86_64", "--row", "cpu_x86_64", "--report-dir", str(tmp_path))
    seconds = time.monotonic() - start
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "FAIL CUDA build: 'executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl' is a CPU build" in out
    assert "FAIL CUDA libraries: the CUDA delegate's libraries of the 1.5 layout are not in the wheel" in out
    assert "PASS one runtime core: each runtime component has one definer" in out
    assert "SKIP device code: not run: the wheel has no +cuXXX label" in out
    assert "FAIL CUDA runtime declared: the wheel's Requires-Dist names no nvidia-* CUDA runtime package" in out
    # PyPI's 1.5.1 needs libtorch but declares no torch (pip install executorch==1.5.1 installs none).
    assert ("FAIL libraries resolve: executorch/extension/llm/custom_ops/libcustom_ops_aot_lib.so needs libtorch.so, "
            "libtorch_cpu.so, libc10.so: its RUNPATH leads into torch/, the folder of a package the wheel does not declare "
            "(Requires-Dist), so pip installs none: declare torch") in out
    assert "PASS platform tag: 19 ELF files within manylinux_2_28_x86_64" in out and "PASS architecture: 19 ELF files, each x86_64" in out
    # The same missing torch, seen from the Python side: executorch.exir imports it at import time.
    assert "FAIL imports declared: 1 third-party module imported when the package is imported, not in Requires-Dist: torch " in out
    assert "inspect-cuda_x86_64: FAILED: 11 passed, 6 failed, 1 skipped" in out
    assert "inspect-cpu_x86_64: FAILED: 12 passed, 2 failed, 0 skipped" in out
    assert seconds < 15, seconds  # nothing is installed: reading and checking the 19 MB wheel only
    for row in ("cuda_x86_64", "cpu_x86_64"):
        report = json.loads((tmp_path / f"inspect-{row}.json").read_text())
        jsonschema.validate(report, SCHEMA)
        assert report["mode"] == "inspect" and report["wheel"]["file"] == wheel_x86_64.name
        for check in report["checks"]:
            assert f"{check['status'].upper()} {check['name']}: {check['reason']}" in out


@pytest.mark.slow
def test_inspect_with_no_row_judges_the_rows_of_the_wheels_architecture_and_build(declared_aarch64):
    proc = nox("-s", "inspect", "--", str(declared_aarch64))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "; rows: cpu_aarch64\n" in proc.stdout
    assert ("not judged: cuda_aarch64, the wheel is a CPU build (version 1.5.1, no +cuXXX label) "
            "(--row cuda_aarch64 judges it there anyway)") in proc.stdout
    assert "inspect-cpu_aarch64: PASSED" in proc.stdout and "inspect-cuda_aarch64" not in proc.stdout


@pytest.mark.slow
def test_inspect_with_no_row_judges_a_cuda_build_on_the_cuda_row(cuda_wheel):
    proc = nox("-s", "inspect", "--", str(cuda_wheel.path))
    assert "; rows: cuda_x86_64\n" in proc.stdout, proc.stdout + proc.stderr
    assert "not judged: cpu_x86_64, the wheel is a CUDA build (+cu130), which the CUDA rows gate" in proc.stdout
    assert "inspect-cpu_x86_64" not in proc.stdout


@pytest.mark.slow
def test_inspect_with_a_row_judges_that_row_only(declared_x86_64):
    proc = nox("-s", "inspect", "--", str(declared_x86_64), "--row", "cpu_x86_64")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "inspect-cuda_x86_64" not in proc.stdout


@pytest.mark.slow
def test_inspect_runs_on_any_interpreter_whatever_the_python_tag(declared_x86_64, tmp_path):
    # The cp311 wheel renamed cp312: a row would refuse it on Python 3.11; inspect reads it.
    from tests.helpers import rewrite_wheel

    other = rewrite_wheel(declared_x86_64, tmp_path, new_name=declared_x86_64.name.replace("cp311-cp311", "cp312-cp312"))
    proc = nox("-s", "inspect", "--", str(other), "--row", "cpu_x86_64")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [([], "the following arguments are required: wheel"), (["{tmp}/missing.whl"], "does not exist"),
     (["{wheel}", "--row", "cuda_aarch64"], "the cuda_aarch64 row needs aarch64")],
)
def test_inspect_bad_input_is_one_line_and_exit_2(wheel_x86_64, tmp_path, args, message):
    proc = nox("-s", "inspect", "--", *[a.format(tmp=tmp_path, wheel=wheel_x86_64) for a in args])
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_under_github_actions_each_fail_of_the_real_wheel_is_an_error_annotation_after_its_line(wheel_x86_64, monkeypatch):
    """PyPI's 1.5.1 fails the CPU row's `libraries resolve` and `imports declared`: on a GitHub runner each is also an
    `::error` naming the check, right after its FAIL line, and nothing else is annotated."""
    import os
    import subprocess
    import sys

    from tests.helpers import REPO, annotations

    proc = subprocess.run([sys.executable, "-m", "smoke", "inspect", str(wheel_x86_64), "--row", "cpu_x86_64"], cwd=REPO,
                          env={**os.environ, "GITHUB_ACTIONS": "true"}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    fails = [(i, line) for i, line in enumerate(lines) if line.startswith("FAIL ")]
    assert [line.split(":", 1)[0] for _, line in fails] == ["FAIL libraries resolve", "FAIL imports declared"]
    for i, line in fails:
        name, reason = line[len("FAIL "):].split(": ", 1)
        assert annotations(lines[i + 1]) == [("error", name, reason)]
    assert len(annotations(proc.stdout)) == len(fails)
    assert "inspect-cpu_x86_64: FAILED: 12 passed, 2 failed, 0 skipped" in proc.stdout
