"""`nox -s compare -- OLD.whl NEW.whl` run whole: two environments built, both rows run (slow).

PyPI's real 1.4.1 and 1.5.1, and the same wheel twice; a SIGTERM during a row's run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, release_wheel, report_of, smoke_compare

# PyPI's real wheels, downloaded once where .ci/release-table has not (a fresh clone, CI): never skipped.
OLD_141 = release_wheel("1.4.1")
NEW_151 = release_wheel("1.5.1")

needs_releases = pytest.mark.network


# --- the runtime part, end to end (two environments, two row runs) ----------------------------------


# The tests' own interpreter holds the torch 1.5 pairs with: the environments of the runs that compare one release with
# itself take it (--no-deps --torch-from, as the GPU machine's runs do), built in seconds; 1.4.1 to 1.5.1 below builds
# both environments whole, each with its own paired torch.
HERE = Path(sys.executable).parent.parent


@pytest.mark.slow
def test_the_same_wheel_twice_run_whole_gives_identical_outputs_and_exit_0(declared_x86_64, tmp_path):
    proc = smoke_compare(declared_x86_64, declared_x86_64, "--report-dir", tmp_path, "--env-dir", tmp_path / "envs",
                         "--no-deps", "--torch-from", HERE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = report_of(tmp_path)
    runtime = data["runtime"]
    assert [(e["max_abs_diff"], e["within_tolerance"]) for e in runtime["outputs"]] == [(0.0, True)] * 3
    assert all(e["old"] == e["new"] for e in runtime["sizes"]), runtime["sizes"]
    assert data["regressions"] == [] and all(c["old"] == c["new"] for c in data["checks"])
    assert "outputs run with data file (weighted): NEW vs OLD max abs diff 0 (within rtol 0.0001, atol 1e-05)" in proc.stdout
    assert "kept in" not in proc.stdout  # no regression: the rows' folders, made by this run, are removed


@pytest.mark.slow
@needs_releases
def test_1_4_1_to_1_5_1_run_whole_same_outputs_and_sizes_and_the_regression_named(tmp_path):
    """Measured first (two runs here, x86_64, torch 2.13.0+cpu): both releases' three programs give the same
    outputs to the bit and the same .pte/.ptd sizes; 1.5.1's extension modules import where 1.4.1's failed
    (py-cpuinfo is declared now); libraries resolve regresses (torch left Requires-Dist)."""
    proc = smoke_compare(OLD_141, NEW_151, "--report-dir", tmp_path, "--env-dir", tmp_path / "envs")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    data = report_of(tmp_path)
    runtime = data["runtime"]
    assert runtime["versions"]["old"]["executorch"] == "1.4.1" and runtime["versions"]["new"]["executorch"] == "1.5.1"
    assert [(e["check"], e["max_abs_diff"], e["within_tolerance"]) for e in runtime["outputs"]] == [
        ("run with data file (weightless)", 0.0, True), ("run with data file (weighted)", 0.0, True), ("portable kernels", 0.0, True)]
    assert {e["artifact"]: (e["old"], e["new"]) for e in runtime["sizes"]} == {
        "weightless .pte": (1600, 1600), "weighted .pte": (1744, 1744), "weightless .ptd": (0, 0), "weighted .ptd": (528, 528),
        "portable .pte": (3664, 3664)}
    assert all(e["ratio"] is not None for e in runtime["times"]), runtime["times"]
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["libraries resolve"]["regression"]
    assert (checks["extension modules import"]["old"], checks["extension modules import"]["new"]) == ("fail", "pass")
    assert "check extension modules import: FAIL -> PASS: all 8 import" in out
    assert any(r.startswith("check regressed: libraries resolve: PASS on OLD, FAIL on NEW") for r in data["regressions"])
    assert not any(r.startswith("outputs drift") for r in data["regressions"])
    # A regression keeps what the rows wrote, in one folder this run made: each row's log, report and artifacts.
    kept = Path(out.split("the rows' logs, reports and artifacts are kept in ", 1)[1].splitlines()[0])
    assert {p.name for p in kept.iterdir()} == {"old.log", "new.log", "old-reports", "new-reports", "old-work", "new-work"}
    assert (kept / "new-work" / "weighted" / "model.pte").stat().st_size == 1744
    shutil.rmtree(kept)


@pytest.mark.slow
def test_sigterm_during_a_row_run_ends_the_row_and_what_it_started(declared_x86_64, tmp_path):
    envs = tmp_path / "envs"
    environ = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    process = subprocess.Popen([sys.executable, "-m", "smoke", "compare", str(declared_x86_64), str(declared_x86_64),
                                "--env-dir", str(envs), "--no-deps", "--torch-from", str(HERE)], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ)
    deadline = time.monotonic() + 600
    # Until the row's child runs in the built environment (its python is envs/old-cpu_x86_64/bin/python).
    while time.monotonic() < deadline and not any(c.startswith(str(envs / "old-cpu_x86_64" / "bin")) for c in _command_lines()):
        time.sleep(0.5)
    assert process.poll() is None, process.communicate()
    process.terminate()
    out, err = process.communicate(timeout=120)
    assert process.returncode == 143, out + err
    assert err.strip().endswith("INTERRUPTED by SIGTERM: the run was stopped, every process it started was ended; no verdict")
    time.sleep(1)
    assert not [c for c in _command_lines() if str(envs) in c or str(declared_x86_64) in c]
    # The row was told (SIGTERM, not SIGKILL): it ended its own run as an interrupted run does, and said so in its log.
    kept = Path(out.split("the rows' logs, reports and artifacts are kept in ", 1)[1].splitlines()[0])
    row_log = (kept / "old.log").read_text()
    assert "INTERRUPTED by SIGTERM" in row_log, row_log[-2000:]
    shutil.rmtree(kept)


def _command_lines() -> list[str]:
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass
    return lines
