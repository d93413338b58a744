"""The C++ SDK's checks (issue 49), each shown to FAIL: ``smoke.checks.cppsdk`` judges what the consumer said, and
``smoke.environment.consumer`` tells a wheel with no SDK (1.4.1's layout) from one whose SDK is judged."""

from __future__ import annotations

import dataclasses

from smoke import tensors
from smoke.checks import cppsdk
from smoke.environment import consumer
from smoke.readers.wheel import read_wheel
from smoke.results import Status

EAGER = tensors.decode([{"shape": [2], "dtype": "torch.float32", "values": [1.0, 2.0]}])


def _said(values):
    return {"outputs": [{"shape": [len(values)], "dtype": "torch.float32", "values": values}]}


def test_the_consumer_with_its_data_file_passes_eagers_answer_and_fails_another():
    good = cppsdk.judge_with(_said([1.0, 2.0]), "model.ptd", EAGER, "built")
    assert good.status is Status.PASS
    assert good.reason.startswith("loaded with model.ptd by a C++ consumer (Module(model.pte, model.ptd)), matched eager")
    wrong = cppsdk.judge_with(_said([1.0, 2.5]), "model.ptd", EAGER, "built")
    assert wrong.status is Status.FAIL and "output differs from eager" in wrong.reason
    crashed = cppsdk.judge_with({"signal": "SIGSEGV"}, "model.ptd", EAGER, "built")
    assert crashed.status is Status.FAIL and crashed.reason.endswith("was ended by SIGSEGV")
    refused = cppsdk.judge_with({"error": "Module::load() returned error 0x23"}, "model.ptd", EAGER, "built")
    assert refused.status is Status.FAIL and refused.reason.endswith("Module::load() returned error 0x23")


def test_the_consumer_without_its_data_file_must_not_give_eagers_answer():
    assert cppsdk.judge_without({"signal": "SIGSEGV"}, "model.ptd", EAGER).status is Status.PASS
    assert cppsdk.judge_without({"error": "Module::load() returned error 0x23"}, "model.ptd", EAGER).status is Status.PASS
    assert cppsdk.judge_without(_said([0.0, 0.0]), "model.ptd", EAGER).status is Status.PASS
    matched = cppsdk.judge_without(_said([1.0, 2.0]), "model.ptd", EAGER)
    assert matched.status is Status.FAIL and matched.reason.endswith("the weights are not coming from the data file")
    silent = cppsdk.judge_without({"failed": "exited 3 without a result: x"}, "model.ptd", EAGER)
    assert silent.status is Status.FAIL


def test_a_wheel_without_a_cpp_runtime_is_told_apart(pypi_1_4_1, wheel_x86_64):
    """1.4.1 ships share/cmake/executorch-config.cmake and headers, no executorch/lib (its setup.py); 1.5.1 ships the SDK."""
    old = consumer.nothing_to_judge(pypi_1_4_1)
    assert old is not None and old.startswith("the wheel ships a CMake config and headers but no C++ runtime (executorch/lib/libexecutorch.so)")
    new = read_wheel(wheel_x86_64)
    assert consumer.nothing_to_judge(new) is None and consumer.missing_delegate(new, "xnnpack") is None
    assert consumer.components(new, "xnnpack") == ["runtime", "kernels_optimized", "backend_xnnpack"]
    bare = dataclasses.replace(new, files=tuple(f for f in new.files if not f.startswith("executorch/share/cmake/")))
    assert consumer.nothing_to_judge(bare) == "the wheel ships no C++ SDK (no executorch/share/cmake/executorch-config.cmake)"
    no_delegate = dataclasses.replace(new, files=tuple(f for f in new.files if f != consumer.library_of("backend_xnnpack")))
    assert "has no executorch::backend_xnnpack" in str(consumer.missing_delegate(no_delegate, "xnnpack"))
