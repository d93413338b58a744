"""The CUDA row's concurrency on a machine without a GPU (slow, issue 45): its file checks run ``cuobjdump`` (the
gate's own ``nvidia-cuda-cuobjdump``) in a thread of the parent while the main thread builds a real environment.

The wheel is PyPI's 1.5.1 made a +cu130 build: the 1.5 layout's CUDA libraries added (``tests.helpers.cuda_parts``;
the shims are a real nvcc 13.0 library, ``tests/data/device-code``) and ``COPIES`` more copies of that library, so that
``device code`` runs ``cuobjdump`` 2 x 101 times. The environment is built as on the GPU machine (``--no-deps``, torch
from an existing environment: this interpreter's), in seconds, so its processes start while ``cuobjdump`` runs.

On 2026-12-06 the row at 7385d04 ended in ``ERROR listing installed distributions failed (exit -15)`` on the GPU machine:
a process one thread had started was the other thread's "orphan". Here, at that commit, 3 of 4 runs went wrong: a
``cuobjdump`` ended (`FAIL device code: ... failed: -9`, or `has no machine code for sm_80, ...`), a wrong verdict of a
wheel whose device code is right. Without a GPU the row cannot execute the CUDA programs, so it FAILs; what this test
asks is that it reaches that verdict, every time, with every process it started left to do its work."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from smoke.readers.wheelcopy import rewrite_wheel
from tests.helpers import DEVICE_CODE, cuda_parts, nox, relabel, with_soname

COPIES = 100
RUNS = 3  # at 7385d04 one run went right in 4: three in a row, about 1 in 64


@pytest.mark.slow
def test_the_cuda_row_s_file_checks_run_beside_a_real_environment_build_and_end_nothing_of_it(wheel_x86_64, tmp_path):
    shims = (DEVICE_CODE / "libcovers_cu130.so").read_bytes()
    parts = cuda_parts(wheel_x86_64)
    parts |= {f"executorch/backends/cuda/libkernels_{n}.so": with_soname(shims, f"libkernels_{n}.so") for n in range(COPIES)}
    name = wheel_x86_64.name.replace("1.5.1", "1.5.1+cu130")
    wheel = rewrite_wheel(wheel_x86_64, tmp_path / "wheel", new_name=name, metadata=relabel("1.5.1+cu130", None), add=parts)
    here = Path(sys.executable).parent.parent  # the tests' environment, which holds the paired torch

    for run in range(RUNS):
        reports = tmp_path / f"reports-{run}"
        ran = nox("-s", "cuda_x86_64", "--", str(wheel), "--env-dir", str(tmp_path / f"env-{run}"), "--report-dir",
                  str(reports), "--no-deps", "--torch-from", str(here))
        out = ran.stdout
        assert ran.returncode == 1, out + ran.stderr  # a verdict on the wheel; 2 would be: the gate could not run
        assert "ERROR" not in out + ran.stderr and "exit -15" not in out
        assert re.search(r"^  \.\.\. building the environment in .*: [\d.]+ s$", out, re.M), out
        device = next((line for line in out.splitlines() if re.match(r"(PASS|FAIL) device code: ", line)), out)
        assert device.startswith(f"PASS device code: {COPIES + 1} libraries carry code for exactly sm_80 sm_86 sm_89 sm_90 "
                                 "sm_100 sm_120: "), f"run {run}: {device[:400]}"
        report = json.loads((reports / "cuda_x86_64.json").read_text())
        assert report["verdict"] == "fail" and report["exit_code"] == 1
        statuses = {check["name"]: check["status"] for check in report["checks"]}
        assert statuses["torch agrees"] == "pass"  # the child ran in the environment the main thread built
        # The PT2E-quantized XNNPACK model needs no GPU: on a CUDA row its process is an interpreter started after the
        # child's imports (a fork made after a CUDA export could not be trusted), and it runs here too.
        assert statuses["XNNPACK quantized"] == "pass", next(c["reason"] for c in report["checks"] if c["name"] == "XNNPACK quantized")
        # Without a GPU nothing CUDA runs, and the row says so: `must execute` names what did not run.
        assert re.search(r"^FAIL must execute: the cuda_x86_64 row must execute, and these of its checks did not run: ",
                         out, re.M)
