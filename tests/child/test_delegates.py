"""smoke.child.delegates: the device check of each row."""

from __future__ import annotations

import pytest

from smoke.child.delegates import check_device
from smoke.results import Status
from tests.helpers import child_row

H200 = {"cuda_available": True, "torch_cuda": "13.0", "device_name": "NVIDIA H200", "sm": "sm_90", "arch_list": ["sm_80", "sm_90"]}


@pytest.mark.parametrize(
    ("row", "facts", "status", "text"),
    [
        ("cuda_x86_64", H200, Status.PASS, "NVIDIA H200 (sm_90), in torch's arch list"),
        ("cuda_x86_64", {**H200, "arch_list": ["sm_80"]}, Status.FAIL, "lacks it"),
        ("cuda_x86_64", {"cuda_available": False, "torch_cuda": None}, Status.FAIL, "the cuda_x86_64 row must execute"),
        ("cuda_aarch64", {"cuda_available": False, "torch_cuda": None}, Status.SKIP, "export and execution need one"),
        ("cuda_aarch64", H200, Status.PASS, "in torch's arch list"),
    ],
)
def test_device_check_per_row(row, facts, status, text):
    result = check_device(child_row(row), facts)
    assert result.status is status and text in result.reason
