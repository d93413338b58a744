"""smoke.checks.installed: the checks on the installed environment, judged from what smoke.child.probe reads there.

The probe's facts are tabled here as the probe prints them (the CPU row's integration run
and the H200 run produce real ones); a probe that hangs is a failure, not a traceback.
"""

from __future__ import annotations

import os

import pytest

from smoke.checks import installed
from smoke.readers.wheel import read_wheel
from smoke.results import Status
from smoke.rows import ROWS

CUDA, CPU = ROWS["cuda_x86_64"], ROWS["cpu_x86_64"]


@pytest.mark.slow
def test_torch_agrees_says_a_nightly_was_paired_by_rule(wheel_x86_64, tmp_path):
    from tests.helpers import rewrite_wheel

    name = wheel_x86_64.name.replace("1.5.1", "1.6.0.dev20261201")
    nightly = read_wheel(rewrite_wheel(wheel_x86_64, tmp_path, new_name=name,
                                       metadata=lambda t: t.replace("Version: 1.5.1", "Version: 1.6.0.dev20261201")))
    result = installed.check_torch_agrees(nightly, CPU, {"torch": "2.14.1", "torch_cuda": "13.0"})
    assert result.status is Status.PASS and result.measured["paired_by_rule"] is True
    assert result.reason.startswith("torch 2.14.1, paired by rule: executorch 1.6.0.dev20261201 is newer than every release "
                                    "line the gate knows (newest: 1.5) and declares no torch")
    result = installed.check_torch_agrees(nightly, CPU, {"torch": "2.13.0+cpu", "torch_cuda": None})
    assert result.status is Status.FAIL and "executorch 1.6 pairs with torch 2.14, the environment has 2.13.0+cpu" in result.reason


@pytest.mark.parametrize(
    ("row", "facts", "status", "reason"),
    [
        (CPU, {"torch": "2.14.1", "torch_cuda": "13.0"}, Status.PASS, "torch 2.14.1, paired with executorch 1.5"),
        (CPU, {"torch": "2.13.0+cpu", "torch_cuda": None}, Status.FAIL, "executorch 1.5 pairs with torch 2.14, the environment has 2.13.0+cpu"),
        (CUDA, {"torch": "2.14.1+cu130", "torch_cuda": "13.0"}, Status.PASS, "CUDA 13.0 as +cu130"),
        (CUDA, {"torch": "2.14.1+cu126", "torch_cuda": "12.6"}, Status.FAIL, "torch has CUDA 12.6, the wheel is +cu130 (CUDA 13)"),
        (CUDA, {"torch": "2.14.1+cpu", "torch_cuda": None}, Status.FAIL, "is a CPU build (torch.version.cuda is None)"),
        (CUDA, {"torch_error": "ModuleNotFoundError: No module named 'torch'"}, Status.FAIL, "torch does not import"),
        # The H200's torch 2.11 given by --torch-from for a wheel of main (1.5): the pairing was not tested, and says so.
        (CUDA, {"torch": "2.11.0+cu130", "torch_cuda": "13.0", "torch_given": "/opt/torch/.venv"}, Status.SKIP,
         "executorch 1.5 pairs with torch 2.14, and this torch is the one --torch-from gave (/opt/torch/.venv), so the "
         "pairing was not tested"),
        # The caller's torch is still judged for what the wheel needs of it: its CUDA major.
        (CUDA, {"torch": "2.11.0+cu126", "torch_cuda": "12.6", "torch_given": "/opt/torch/.venv"}, Status.FAIL,
         "torch has CUDA 12.6, the wheel is +cu130 (CUDA 13)"),
        (CPU, {"torch": "2.14.1", "torch_cuda": "13.0", "torch_given": "/opt/torch/.venv"}, Status.PASS,
         "torch 2.14.1, paired with executorch 1.5"),
    ],
)
def test_torch_agrees_table(cuda_wheel, pypi_wheel_read, row, facts, status, reason):
    wheel = cuda_wheel if row.backend.name == "cuda" else pypi_wheel_read
    result = installed.check_torch_agrees(wheel, row, facts)
    assert result.status is status and reason in result.reason, result.reason


@pytest.fixture(scope="module")
def pypi_wheel_read(wheel_x86_64):
    return read_wheel(wheel_x86_64)


@pytest.mark.parametrize(
    ("row", "backends", "status"),
    [(CPU, ["QnnBackend", "OpenvinoBackend", "XnnpackBackend"], Status.PASS),  # 1.5.1 here
     (CUDA, ["QnnBackend", "XnnpackBackend"], Status.FAIL)],  # 1.2.0 on the H200
)
def test_delegate_registers(pypi_wheel_read, row, backends, status):
    result = installed.check_delegate_registers(pypi_wheel_read, row, {"backends": backends})
    assert result.status is status
    if status is Status.FAIL:
        assert result.reason == f"{row.backend.delegate_id} is not registered (registered: {', '.join(backends)})"


def test_a_probe_that_hangs_fails_the_environment_checks_instead_of_a_traceback(tmp_path):
    hanging = tmp_path / "python"
    hanging.write_text("#!/bin/sh\nsleep 30\n")
    hanging.chmod(0o755)
    facts = installed.run_probe(hanging, dict(os.environ), tmp_path, timeout=0.5)
    assert "ran past its 0.5 s limit" in facts["probe_error"]


def test_every_backend_whose_library_the_runtime_loads_must_be_registered(wheel_x86_64, pypi_1_4_1):
    """PyPI's 1.5.1: _C loads the XNNPACK, OpenVINO and QNN delegates' libraries, and each registers; one that loads
    and does not register (its registration removed) FAILs, naming the library. 1.4.1 loads the QNN library
    (libqnn_executorch_backend.so), which upstream's test_linux.py requires registered on x86_64 since 1.2.0."""
    from smoke.checks import shipped

    wheel = read_wheel(wheel_x86_64)
    libraries = shipped.read_libraries(wheel)
    row = ROWS["cpu_x86_64"]
    every = {"backends": ["QnnBackend", "OpenvinoBackend", "XnnpackBackend"]}
    good = installed.check_backends_register(wheel, row, every, libraries)
    assert good.status is Status.PASS
    assert good.reason == ("all 3 backends whose libraries the runtime loads are registered: XnnpackBackend "
                           "(libexecutorch_backend_xnnpack.so), OpenvinoBackend (libexecutorch_backend_openvino.so), "
                           "QnnBackend (libexecutorch_backend_qnn.so)")
    lost = installed.check_backends_register(wheel, row, {"backends": ["QnnBackend", "XnnpackBackend"]}, libraries)
    assert lost.status is Status.FAIL
    assert lost.reason == ("1 of 3 backends the runtime loads are not registered: OpenvinoBackend, which "
                           "executorch/lib/libexecutorch_backend_openvino.so registers (registered: QnnBackend, XnnpackBackend)")
    assert installed.check_backends_register(wheel, row, {"backends_error": "ImportError: x"}, libraries).status is Status.FAIL
    old = installed.expected_backends(shipped.read_libraries(pypi_1_4_1))
    assert old == {"QnnBackend": "executorch/backends/qualcomm/libqnn_executorch_backend.so"}
