"""The runs' outputs, judged by the parent (issue 48): ``smoke.tensors`` compares as torch's assert_close does, and
``smoke.checks.outputs`` holds what the child handed over to eager's answer. Each way a run can be wrong FAILs."""

from __future__ import annotations

import json
import math

import pytest

from smoke import report, tensors
from smoke.checks import outputs
from smoke.checks.exported import program_facts
from smoke.results import Status
from smoke.stages import PORTABLE, RUN

WEIGHTED = RUN.of("weighted")


def _out(values, shape=None, dtype="torch.float32"):
    return {"shape": list(shape or [len(values)]), "dtype": dtype, "values": values}


def _eager(values, shape=None):
    return {"weighted": tensors.decode([_out(values, shape)]), "weightless": [], "portable": []}


def test_outputs_within_the_tolerance_pass_and_say_the_difference(tmp_path):
    (tmp_path / "weighted").mkdir()
    (tmp_path / "weighted" / "model.ptd").write_bytes(b"x")
    result = outputs.judge_ran(WEIGHTED, {"name": WEIGHTED, "outputs": [_out([1.0, 2.0 + 1e-6])]}, tmp_path, "model.ptd",
                               _eager([1.0, 2.0]))
    assert result.status is Status.PASS, result.reason
    assert result.reason.startswith("loaded with model.ptd, matched eager, max abs diff 1e-06 (rtol 0.0001, atol 1e-05)")
    assert result.measured["outputs"] == [[1.0, 2.0 + 1e-6]] and result.measured["eager"] == "apart from the wheel's code"


@pytest.mark.parametrize("given, why", [
    (_out([1.0, 2.1]), "output 0, value 1: 2.1, eager 2.0 (1 of 2 values differ)"),
    (_out([1.0, 2.0], shape=[1, 2]), "output 0 is torch.float32 of shape [1, 2] (2 values given), eager's torch.float32 of shape [2]"),
    (_out([1.0, 2.0], dtype="torch.float64"), "output 0 is torch.float64 of shape [2]"),
    (_out([1.0, "NaN"]), "output 0, value 1: nan, eager 2.0"),
    (_out([1.0, "Infinity"]), "output 0, value 1: inf, eager 2.0"),
    (_out([1.0]), "output 0 is torch.float32 of shape [1] (1 values given)"),
    (_out([1.0, 2.0], shape=[3]), "(2 values given)"),
])
def test_an_output_that_is_not_eagers_fails_naming_the_first_difference(tmp_path, given, why):
    result = outputs.judge_ran(WEIGHTED, {"name": WEIGHTED, "outputs": [given]}, tmp_path, "model.ptd", _eager([1.0, 2.0]))
    assert result.status is Status.FAIL
    assert result.reason.startswith("loaded with no data file (none was written), output differs from eager: max abs diff")
    assert why in result.reason
    json.loads(json.dumps(report.finite(result.to_json()), allow_nan=False))  # the report of it is JSON


def test_a_count_of_outputs_that_is_not_eagers_fails(tmp_path):
    result = outputs.judge_ran(WEIGHTED, {"name": WEIGHTED, "outputs": [_out([1.0, 2.0])] * 2}, tmp_path, "model.ptd",
                               _eager([1.0, 2.0]))
    assert result.status is Status.FAIL and "2 outputs, eager gives 1" in result.reason


@pytest.mark.parametrize("given, why", [
    ("zeros", "outputs are a str, not a list"),
    ([{"shape": [2], "dtype": "torch.float32", "values": [1.0, "two"]}], "holds a value that is not a number: two"),
    ([{"shape": [-1], "dtype": "torch.float32", "values": []}], "shape is not a list of sizes"),
    ([{"shape": [2], "values": [1.0, 2.0]}], "has no dtype"),
    ([{"shape": [2], "dtype": "x", "values": [True, 2.0]}], "not a number: True"),
])
def test_outputs_the_gate_cannot_read_fail(tmp_path, given, why):
    result = outputs.judge_ran(WEIGHTED, {"name": WEIGHTED, "outputs": given}, tmp_path, "model.ptd", _eager([1.0, 2.0]))
    assert result.status is Status.FAIL and why in result.reason, result.reason


def test_no_eager_answer_fails_saying_why_and_never_passes(tmp_path):
    result = outputs.judge_ran(WEIGHTED, {"name": WEIGHTED, "outputs": [_out([1.0, 2.0])]}, tmp_path, "model.ptd", {},
                               "the process computing eager's answer apart from the wheel's code exited 1: boom")
    assert result.status is Status.FAIL
    assert result.reason == ("loaded with no data file (none was written); its outputs cannot be judged: the process "
                             "computing eager's answer apart from the wheel's code exited 1: boom")


def test_the_childs_error_and_skip_are_recorded_as_it_says(tmp_path):
    error = outputs.judge_ran(WEIGHTED, {"name": WEIGHTED, "error": "loading or running raised RuntimeError: x",
                                         "registered_backends": ["XnnpackBackend"]}, tmp_path, "model.ptd", {})
    assert error.status is Status.FAIL and error.reason == "loading or running raised RuntimeError: x"
    assert error.measured["registered_backends"] == ["XnnpackBackend"]
    assert outputs.judge_ran(WEIGHTED, {"name": WEIGHTED}, tmp_path, "m", {}).reason == "the child gave neither outputs nor an error"
    skip = outputs.judge_ran(WEIGHTED, {"name": WEIGHTED, "skipped": "not run: no data file for weighted"}, tmp_path, "m", {})
    assert skip.status is Status.SKIP and skip.reason == "not run: no data file for weighted"


def test_tensors_close_holds_infinities_and_nan_as_assert_close_does():
    same = tensors.decode([_out(["Infinity", "-Infinity", 0.0])])
    assert tensors.close(same, same, 1e-4, 1e-5).matched and tensors.close(same, same, 1e-4, 1e-5).max_abs_diff == 0.0
    nan = tensors.decode([_out(["NaN"])])
    found = tensors.close(nan, nan, 1e-4, 1e-5)
    assert not found.matched and math.isinf(found.max_abs_diff)  # equal_nan=False: NaN equals nothing
    edge = tensors.close(tensors.decode([_out([1.0 + 1.05e-4])]), tensors.decode([_out([1.0])]), 1e-4, 1e-5)
    assert edge.matched  # |a - e| <= atol + rtol * |e|, as torch's _compare_regular_values_close
    assert not tensors.close(tensors.decode([_out([1.0 + 1.2e-4])]), tensors.decode([_out([1.0])]), 1e-4, 1e-5).matched


@pytest.mark.slow
def test_the_portable_program_is_read_by_the_parent_and_a_delegated_one_fails(exported, tmp_path):
    """The child no longer says whether its program carries a delegate: the parent reads it (here the XNNPACK export of
    the weighted model, where every operator is in the delegate), and a damaged one fails saying so."""
    (tmp_path / "portable").mkdir()
    pte = tmp_path / "portable" / "model.pte"
    pte.write_bytes((exported["weighted"] / "model.pte").read_bytes())
    ran = {"name": PORTABLE.name, "outputs": []}
    result = outputs.judge_ran(PORTABLE.name, ran, tmp_path, "model.ptd", {"portable": []})
    assert result.status is Status.FAIL
    assert result.reason == "model.pte does not prove the kernels: plans {'forward': ['XnnpackBackend']} carry delegates"
    assert "error" not in program_facts(pte)
    pte.write_bytes(pte.read_bytes()[:200])
    damaged = outputs.judge_ran(PORTABLE.name, ran, tmp_path, "model.ptd", {"portable": []})
    assert damaged.status is Status.FAIL and damaged.reason.startswith("cannot read the program:")


def test_a_portable_export_that_failed_is_the_childs_error(tmp_path):
    result = outputs.judge_ran(PORTABLE.name, {"name": PORTABLE.name, "error": "the export with no delegate raised X"},
                               tmp_path, "model.ptd", {})
    assert result.status is Status.FAIL and result.reason == "the export with no delegate raised X"


@pytest.mark.slow
def test_the_quantized_kernels_skip_must_fit_the_wheel_and_its_program_must_leave_them_the_quantize(tmp_path):
    from smoke.child.portable import export_portable, portable_model
    from smoke.stages import QUANTIZED

    said = {"name": QUANTIZED.name, "skipped": "not run: the wheel ships no quantized kernels"}
    without = outputs.judge_ran(QUANTIZED.name, said, tmp_path, "model.ptd", {}, wheel_files=("executorch/__init__.py",))
    assert without.status is Status.SKIP
    shipped = ("executorch/kernels/quantized/libquantized_ops_aot_lib.so",)
    refused = outputs.judge_ran(QUANTIZED.name, said, tmp_path, "model.ptd", {}, wheel_files=shipped)
    assert refused.status is Status.FAIL
    assert refused.reason == ("the child skipped it (not run: the wheel ships no quantized kernels), yet the wheel ships "
                              "executorch/kernels/quantized/")
    model, example = portable_model()  # no quantize in it: it proves no quantized kernel
    export_portable(model, example, tmp_path / "quantized")
    plain = outputs.judge_ran(QUANTIZED.name, {"name": QUANTIZED.name, "outputs": []}, tmp_path, "model.ptd", {"quantized": []})
    assert plain.status is Status.FAIL
    assert plain.reason == ("model.pte does not prove the kernels: it leaves no quantized_decomposed::quantize_per_tensor.out, "
                            "quantized_decomposed::dequantize_per_tensor.out to them")
    unbuilt = {"quantized": "the quantized model cannot be built with this torch: ImportError: x"}
    (tmp_path / "quantized" / "model.pte").unlink()
    import executorch.kernels.quantized  # noqa: F401

    from smoke.child.portable import quantized_model

    model, example = quantized_model()
    export_portable(model, example, tmp_path / "quantized")
    aside = outputs.judge_ran(QUANTIZED.name, {"name": QUANTIZED.name, "outputs": []}, tmp_path, "model.ptd", {}, unbuilt=unbuilt)
    assert aside.status is Status.SKIP and aside.reason.endswith("not judged: the quantized model cannot be built with this torch: ImportError: x")


@pytest.fixture(scope="module")
def xnnpack_quantized(tmp_path_factory):
    """A real PT2E-quantized program lowered to XNNPACK by 1.5.1 (this interpreter's executorch), its folder laid out
    as the child's, and eager's answer as the reference computes it (torchao's copy of the quantizer)."""
    from smoke.child import xnnpack_quantized as child

    workdir = tmp_path_factory.mktemp("xnnpack-quantized")
    pte, ptd, example = child.export(workdir / child.LABEL)
    answer, _inputs, step = child.answer()
    return workdir, pte, ptd, example, answer, step


def _shifted(outputs, by: float):
    """``outputs`` (tensors) with each value moved by ``by``, as the child hands them over."""
    return tensors.encode_all([output + by for output in outputs])


@pytest.mark.slow
def test_the_xnnpack_quantized_program_is_held_to_eager_within_one_int8_step(xnnpack_quantized):
    from smoke.child.models import run_program
    from smoke.stages import XNNPACK_QUANTIZED

    workdir, pte, ptd, example, answer, step = xnnpack_quantized
    assert ptd is not None and ptd.name == "model.ptd"  # 1.5.1 writes its int8 weights to the data file
    name, label = XNNPACK_QUANTIZED.name, outputs.XNNPACK_QUANTIZED_LABEL
    ran = run_program(pte, ptd, example)
    eager = {label: tensors.decode(tensors.encode_all(answer))}

    def judged(given, steps={label: step}):  # noqa: B006 - read only
        return outputs.judge_ran(name, {"name": name, "outputs": given}, workdir, "model.ptd", eager, steps=steps,
                                 delegate_id="XnnpackBackend")

    result = judged(tensors.encode_all(ran))
    assert result.status is Status.PASS, result.reason
    assert result.reason.startswith("loaded with model.ptd, every operator in the XnnpackBackend delegate, matched eager, "
                                    "max abs diff ")
    assert result.reason.endswith(f"(one step of the output's int8 grid, {step:.3g}, plus atol 1e-05)")
    assert result.measured["delegates"] == ["XnnpackBackend"] and result.measured["operators"] == []
    assert judged(_shifted(ran, 0.9 * step)).status is Status.PASS  # a neighbouring grid point's rounding
    off = judged(_shifted(ran, 2 * step))  # two steps: not a rounding of the same value
    assert off.status is Status.FAIL and "output differs from eager: max abs diff" in off.reason, off.reason
    unstepped = judged(tensors.encode_all(ran), steps={})
    assert unstepped.status is Status.SKIP
    assert unstepped.reason.endswith("not judged: eager's answer came with no int8 step to hold it to")


@pytest.mark.slow
def test_an_xnnpack_quantized_program_that_leaves_its_ops_outside_the_delegate_fails(xnnpack_quantized, tmp_path, monkeypatch):
    import executorch.kernels.quantized  # noqa: F401  (registers the out variants the export with no delegate needs)

    from smoke.child.portable import export_portable, quantized_model
    from smoke.stages import XNNPACK_QUANTIZED

    name, label = XNNPACK_QUANTIZED.name, outputs.XNNPACK_QUANTIZED_LABEL
    model, example = quantized_model()  # its quantize and dequantize on the kernels, no delegate at all
    export_portable(model, example, tmp_path / label)
    said = {"name": name, "outputs": []}
    plain = outputs.judge_ran(name, said, tmp_path, "model.ptd", {label: []}, steps={label: 0.1})
    assert plain.status is Status.FAIL and plain.reason == "model.pte carries no XnnpackBackend delegate (delegates: none)"
    # A program whose delegate took the matrix products and left a quantize to the kernels.
    monkeypatch.setattr(outputs, "program_facts", lambda pte: {"bytes": 1, "plans": [
        {"name": "forward", "delegate_ids": ["XnnpackBackend"], "operators": ["quantized_decomposed::quantize_per_tensor.out"]}]})
    partial = outputs.judge_ran(name, said, tmp_path, "model.ptd", {label: []}, steps={label: 0.1})
    assert partial.status is Status.FAIL
    assert partial.reason == ("model.pte leaves 1 operators outside the XnnpackBackend delegate "
                              "(quantized_decomposed::quantize_per_tensor.out): its quantized ops are not all delegated")


def test_the_xnnpack_quantized_skip_must_fit_the_row_and_a_failed_quantizer_is_the_childs_error(tmp_path):
    from smoke.stages import XNNPACK_QUANTIZED

    name = XNNPACK_QUANTIZED.name
    said = {"name": name, "skipped": "not run: the runtime registers no XnnpackBackend (registered: CudaBackend), so ..."}
    assert outputs.judge_ran(name, said, tmp_path, "aoti_cuda_blob.ptd", {}, delegate_id="CudaBackend").status is Status.SKIP
    refused = outputs.judge_ran(name, said, tmp_path, "model.ptd", {}, delegate_id="XnnpackBackend")
    assert refused.status is Status.FAIL
    assert refused.reason.endswith("yet this row's own delegate is XnnpackBackend")
    error = ("the release's XNNPACK quantizer cannot be imported: import executorch.backends.xnnpack.quantizer."
             "xnnpack_quantizer raised ImportError: no")
    failed = outputs.judge_ran(name, {"name": name, "error": error}, tmp_path, "model.ptd", {}, delegate_id="XnnpackBackend")
    assert failed.status is Status.FAIL and failed.reason == error
