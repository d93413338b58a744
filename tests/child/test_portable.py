"""smoke.child.portable: a program with no delegate, on the wheel's portable kernels (executorch 1.5.1 here).

It passes on a real export, and fails on real material with one defect each: a program that carries a
delegate (it would not prove the kernels), an output that is not eager's, a program that cannot be read.
"""

from __future__ import annotations

import pytest

from smoke.checks.exported import program_facts
from smoke.child import portable
from smoke.results import Status


@pytest.fixture(scope="module")
def exported_portable(tmp_path_factory):
    model, example = portable.portable_model()
    return portable.export_portable(model, example, tmp_path_factory.mktemp("portable")), model, example


@pytest.mark.slow
def test_a_program_with_no_delegate_runs_on_the_kernels_and_matches_eager(tmp_path):
    result = portable.check_portable(tmp_path / "portable", program_facts)
    assert result.status is Status.PASS, result.reason
    assert result.reason.startswith("loaded with no delegate, 6 operators on the kernels (aten::add.out, aten::addmm.out")
    assert "matched eager" in result.reason and result.measured["max_abs_diff"] <= 1e-5


@pytest.mark.slow
def test_a_program_that_carries_a_delegate_does_not_prove_the_kernels(exported):
    # The XNNPACK export of the weighted model: every operator inside the delegate.
    model, example = portable.portable_model()
    result = portable.judge(exported["weighted"] / "model.pte", model, example, program_facts)
    assert result.status is Status.FAIL
    assert result.reason == "model.pte does not prove the kernels: plans {'forward': ['XnnpackBackend']} carry delegates"


@pytest.mark.slow
def test_an_output_that_is_not_eagers_fails(exported_portable):
    import torch

    pte, model, example = exported_portable
    with torch.no_grad():
        model.second.bias += 0.5  # eager now differs from what the program computes
    try:
        result = portable.judge(pte, model, example, program_facts)
    finally:
        with torch.no_grad():
            model.second.bias -= 0.5
    assert result.status is Status.FAIL
    assert "output differs from eager: max abs diff 0.1" in result.reason  # 0.5 through the sigmoid


@pytest.mark.slow
def test_a_damaged_program_fails_saying_so(exported_portable, tmp_path):
    pte, model, example = exported_portable
    damaged = tmp_path / "model.pte"
    damaged.write_bytes(pte.read_bytes()[:200])
    result = portable.judge(damaged, model, example, program_facts)
    assert result.status is Status.FAIL and result.reason.startswith("cannot read the program:")
