"""The OpenVINO model (issue 47): the child skips it where the runtime registers no OpenvinoBackend or the export
stack is not installed (upstream's own test says SKIP there), and an import error inside executorch's package is the
wheel's and FAILs; the parent reads the program and holds the outputs to the weightless model's eager answer."""

from __future__ import annotations

import builtins

from smoke import tensors
from smoke.checks import outputs
from smoke.child import openvino
from smoke.results import Status
from smoke.stages import OPENVINO_MODEL

NAME = OPENVINO_MODEL.name


def test_not_registered_is_a_skip_naming_what_is(tmp_path):
    said = openvino.work(tmp_path, ["XnnpackBackend"])
    assert said == {"name": NAME, "skipped": "not run: the runtime registers no OpenvinoBackend (registered: XnnpackBackend)"}


def _import_raising(monkeypatch, exc: ImportError) -> None:
    real = builtins.__import__

    def fake(name, *args, **kwargs):
        if name == openvino.PARTITIONER_MODULE:
            raise exc
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)


def test_a_missing_runtime_is_a_skip_and_a_missing_part_of_executorch_fails(tmp_path, monkeypatch):
    _import_raising(monkeypatch, ModuleNotFoundError("No module named 'openvino'", name="openvino"))
    skip = openvino.work(tmp_path, ["OpenvinoBackend"])
    assert skip["skipped"].startswith("not run: the OpenVINO export stack is not installed (ModuleNotFoundError: No "
                                      "module named 'openvino'): ")
    assert "openvino extra" in skip["skipped"] and "nncf" in skip["skipped"]
    _import_raising(monkeypatch, ModuleNotFoundError("No module named 'executorch.backends.openvino.quantizer'",
                                                     name="executorch.backends.openvino.quantizer"))
    broken = openvino.work(tmp_path, ["OpenvinoBackend"])
    assert broken == {"name": NAME, "error": "import executorch.backends.openvino.partitioner raised ModuleNotFoundError: "
                                             "No module named 'executorch.backends.openvino.quantizer'"}
    assert outputs.judge_ran(NAME, broken, tmp_path, "model.ptd", {}).status is Status.FAIL


def test_the_parent_requires_the_openvino_delegate_and_eagers_answer(tmp_path):
    """The program is a real one: the weightless model exported through OpenvinoPartitioner by this gate's child on
    PyPI's 1.5.1 with openvino 2025.4.1 and nncf 3.1.0 installed beside it (2026-12-06; it PASSed, max abs diff 0).
    Judged with its delegate, then as the XNNPACK program of the same model, which carries no OpenvinoBackend."""
    import torch

    from tests.helpers import CPU

    folder = tmp_path / openvino.LABEL
    folder.mkdir()
    x, y = torch.ones(2, 2), torch.ones(2, 2) * 2
    eager = {"weightless": tensors.decode(tensors.encode_all([x + y]))}
    ran = {"name": NAME, "outputs": tensors.encode_all([x + y])}
    (folder / "model.pte").write_bytes((CPU / "openvino" / "model.pte").read_bytes())
    right = outputs.judge_ran(NAME, ran, tmp_path, "model.ptd", eager)
    assert right.status is Status.PASS and right.reason.startswith("loaded with the OpenvinoBackend delegate, matched eager")
    off = outputs.judge_ran(NAME, {"name": NAME, "outputs": tensors.encode_all([x + y + 1])}, tmp_path, "model.ptd", eager)
    assert off.status is Status.FAIL and "output differs from eager: max abs diff 1 " in off.reason
    (folder / "model.pte").write_bytes((CPU / "weightless" / "model.pte").read_bytes())
    wrong = outputs.judge_ran(NAME, ran, tmp_path, "model.ptd", eager)
    assert wrong.status is Status.FAIL
    assert wrong.reason == "model.pte carries no OpenvinoBackend delegate (delegates: XnnpackBackend)"
