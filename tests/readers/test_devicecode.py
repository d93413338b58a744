"""smoke.readers.devicecode: the GPU architectures a library's device code is read as."""

from __future__ import annotations

import pytest

from smoke.readers import devicecode


@pytest.mark.parametrize(("arch", "base"), [("sm_90a", "sm_90"), ("sm_100f", "sm_100"), ("sm_120", "sm_120")])
def test_an_arch_specific_variant_counts_as_its_base(arch, base):
    # torch 2.11.0+cu130's libtorch_cuda.so carries sm_90a, sm_100a, sm_120a beside sm_90 ... (H200 run).
    assert devicecode.base(arch) == base
