"""smoke.child.portable: a program with no delegate, on the wheel's portable kernels (executorch 1.5.1 here).

The child exports, loads and runs it and hands the parent its outputs; the parent reads the program and holds the
outputs to eager's answer (``smoke.checks.outputs``, tests/checks/test_outputs.py for the program's failures). It
passes on a real export, and fails where the output is not eager's.
"""

from __future__ import annotations

import pytest

from smoke.child import portable
from smoke.results import Status
from smoke.stages import PORTABLE
from tests.helpers import eager_judged


@pytest.mark.slow
def test_a_program_with_no_delegate_runs_on_the_kernels_and_matches_eager(tmp_path):
    ran = portable.check_portable(tmp_path / "portable")
    result = eager_judged(PORTABLE.name, ran, tmp_path)
    assert result.status is Status.PASS, result.reason
    assert result.reason.startswith("loaded with no delegate, 6 operators on the kernels (aten::add.out, aten::addmm.out")
    assert "matched eager" in result.reason and result.measured["max_abs_diff"] <= 1e-5


@pytest.mark.slow
def test_an_output_that_is_not_eagers_fails(tmp_path, monkeypatch):
    """The program is exported from a model whose bias was moved by 0.5: eager's answer (the model as the gate builds it)
    differs from what the program computes."""
    import torch

    made = portable.portable_model

    def moved():
        model, example = made()
        with torch.no_grad():
            model.second.bias += 0.5
        return model, example

    monkeypatch.setattr(portable, "portable_model", moved)
    ran = portable.check_portable(tmp_path / "portable")
    monkeypatch.setattr(portable, "portable_model", made)
    result = eager_judged(PORTABLE.name, ran, tmp_path)
    assert result.status is Status.FAIL
    assert "output differs from eager: max abs diff 0.1" in result.reason  # 0.5 through the sigmoid


def test_the_quantized_kernels_are_skipped_only_where_the_package_holds_no_library(tmp_path):
    """1.2.0's CUDA build ships executorch/kernels/quantized's Python files alone: a skip. On the H100 (a generator
    taken for a found file) it was run and FAILed `Missing out variants`, a wrong verdict of a build made without them."""
    from smoke.child.portable import ships_quantized_library

    bare, full = tmp_path / "bare", tmp_path / "full"
    for folder in (bare, full):
        folder.mkdir()
        (folder / "__init__.py").write_text("")
    (full / "libquantized_ops_aot_lib.so").write_bytes(b"")
    assert not ships_quantized_library([str(bare)])
    assert ships_quantized_library([str(bare), str(full)])
    assert not ships_quantized_library([])
