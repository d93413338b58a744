"""The C++ SDK's checks (issue 49), each shown to FAIL: ``smoke.checks.cppsdk`` judges what the consumer said, and
``smoke.environment.consumer`` tells a wheel with no SDK (1.4.1's layout) from one whose SDK is judged."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

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
    assert refused.status is Status.FAIL and refused.reason.endswith("Module::load() returned error 0x23 [InvalidProgram (0x23)]")


def test_the_consumer_without_its_data_file_is_a_control_judged_with_its_twin():
    from smoke.backends import Xnnpack
    from smoke.results import failed, passed

    rule = Xnnpack.missing_data(None)
    twin = passed("C++ consumer with data file", "matched eager")
    crash = cppsdk.judge_without({"signal": "SIGSEGV", "stage": "method load"}, "model.ptd", EAGER, twin, rule)
    assert crash.status is Status.PASS and crash.reason.startswith(
        "the load without model.ptd ended the C++ consumer with SIGSEGV at method load, as expected")
    error = cppsdk.judge_without({"stage": "program load", "error": "Module::load() returned error 0x23"}, "model.ptd",
                                 EAGER, twin, rule)
    assert error.status is Status.PASS and "InvalidProgram (0x23) at program load" in error.reason
    assert cppsdk.judge_without(_said([0.0, 0.0]), "model.ptd", EAGER, twin, rule).status is Status.PASS
    matched = cppsdk.judge_without(_said([1.0, 2.0]), "model.ptd", EAGER, twin, rule)
    assert matched.status is Status.FAIL and "the weights are not coming from the data file" in matched.reason
    silent = cppsdk.judge_without({"failed": "exited 3 without a result: x"}, "model.ptd", EAGER, twin, rule)
    assert silent.status is Status.FAIL
    # the same error both ways (main's CUDA build on the H100: OperatorMissing with and without): proves nothing
    same = "Module::load_method(forward) returned error 0x14"
    broken = cppsdk.judge_with({"stage": "method load", "error": same}, "model.ptd", EAGER, "built")
    assert broken.status is Status.FAIL and "OperatorMissing (0x14)" in broken.reason
    control = cppsdk.judge_without({"stage": "method load", "error": same}, "model.ptd", EAGER, broken, rule)
    assert control.status is Status.SKIP, control.line()
    assert control.reason.startswith("not judged: its twin did not pass, so a failure here proves nothing about the "
                                     "data file (C++ consumer with data file FAILed: the C++ consumer")
    unrun = cppsdk.judge_without({"signal": "SIGSEGV"}, "model.ptd", EAGER, None, rule)
    assert unrun.status is Status.SKIP and "C++ consumer with data file was not run" in unrun.reason
    assert cppsdk.judge_without(_said([1.0, 2.0]), "model.ptd", EAGER, failed("C++ consumer with data file", "x"),
                                rule).status is Status.SKIP


def test_a_wheel_without_a_cpp_runtime_is_told_apart(pypi_1_4_1, wheel_x86_64):
    """1.4.1 ships share/cmake/executorch-config.cmake and headers, no executorch/lib (its setup.py); 1.5.1 ships the SDK."""
    old = consumer.nothing_to_judge(pypi_1_4_1)
    assert old is not None and old.startswith("the wheel ships a CMake config and headers but no C++ runtime (executorch/lib/libexecutorch.so)")
    new = read_wheel(wheel_x86_64)
    assert consumer.nothing_to_judge(new) is None and consumer.missing_delegate(new, "xnnpack") is None
    assert consumer.components(new, "xnnpack") == ["runtime", "kernels_optimized", "kernels_quantized", "backend_xnnpack"]
    bare = dataclasses.replace(new, files=tuple(f for f in new.files if not f.startswith("executorch/share/cmake/")))
    # A C++ runtime without its package config is judged, and FAILs (issue 58: it was "ships no C++ SDK", a SKIP)
    assert consumer.nothing_to_judge(bare) is None and consumer.missing_config(new) is None
    assert str(consumer.missing_config(bare)).startswith("the wheel ships a C++ runtime (executorch/lib/libexecutorch.so) but "
                                                         "no CMake package config")
    sdk_less = dataclasses.replace(bare, files=tuple(f for f in bare.files if not f.startswith("executorch/lib/")))
    assert consumer.nothing_to_judge(sdk_less) == "the wheel ships no C++ SDK (no executorch/share/cmake/executorch-config.cmake)"
    no_delegate = dataclasses.replace(new, files=tuple(f for f in new.files if f != consumer.library_of("backend_xnnpack")))
    assert "has no executorch::backend_xnnpack" in str(consumer.missing_delegate(no_delegate, "xnnpack"))


def test_headers_that_do_not_compile_alone_fail_and_a_missing_system_header_is_said_not_judged():
    good = cppsdk.judge_headers(117, (), ())
    assert good.status is Status.PASS and good.reason.startswith("117 headers under executorch/include compile alone")
    broken = cppsdk.judge_headers(117, ("executorch/runtime/core/evalue.h: fatal error: executorch/runtime/core/tag.h: "
                                        "No such file or directory",), ())
    assert broken.status is Status.FAIL
    assert broken.reason.startswith("1 of 117 headers do not compile alone: executorch/runtime/core/evalue.h: fatal error")
    aside = cppsdk.judge_headers(125, (), (("executorch/extension/cuda/caller_stream.h", "cuda_runtime.h"),))
    assert aside.status is Status.PASS and aside.reason.startswith("124 headers under executorch/include compile alone")
    assert aside.reason.endswith("1 not judged here: they include cuda_runtime.h, which the wheel does not ship and this machine lacks")
    nothing = cppsdk.judge_headers(1, (), (("a.h", "cuda.h"),))
    assert nothing.status is Status.SKIP


class _Lib:
    def __init__(self, *defined):
        self.defined, self.weak_defined = frozenset(defined), frozenset()


REGISTER = "_ZN10executorch7runtime16register_backendERKNS0_7BackendE"
POOL = "_ZN10executorch9extension10threadpool14get_threadpoolEv"


def test_one_runtime_core_in_the_cpp_process_fails_a_second_registry_among_the_loaded_objects():
    libs = {"/env/executorch/lib/libexecutorch.so": _Lib(REGISTER), "/env/executorch/lib/libexecutorch_threadpool.so": _Lib(POOL),
            "/lib/libc.so.6": _Lib()}
    one = cppsdk.judge_core(["linux-vdso.so.1", *libs], libs.__getitem__)
    assert one.status is Status.PASS
    assert one.reason == ("one definer of each component among the 4 objects the C++ consumer loaded: the backend registry, "
                          "thread pool in libexecutorch.so, libexecutorch_threadpool.so")
    libs["/env/executorch/lib/libsecond.so"] = _Lib(REGISTER)
    two = cppsdk.judge_core(list(libs), libs.__getitem__)
    assert two.status is Status.FAIL
    assert two.reason.startswith("the C++ consumer's process holds two copies of the runtime's state: the backend registry: "
                                 "libexecutorch.so and libsecond.so")
    assert cppsdk.judge_core("not a list").status is Status.FAIL
    unread = cppsdk.judge_core(["/nowhere/libgone.so"])
    assert unread.status is Status.PASS and unread.reason.endswith("1 not read: /nowhere/libgone.so: No such file or directory")


@pytest.mark.parametrize("what", ["fifo", "device", "folder"])
def test_an_object_the_consumer_loaded_that_is_not_a_regular_file_is_said_not_read_never_waited_on(tmp_path, what):
    """Issue 58: the parent opened each loaded object with open(): a FIFO there (no writer) blocked the gate for good."""
    import os
    import threading

    path = tmp_path / "libodd.so"
    if what == "fifo":
        os.mkfifo(path)
    elif what == "folder":
        path.mkdir()
    else:
        path = Path("/dev/zero")
    found: list = []
    worker = threading.Thread(target=lambda: found.append(cppsdk.judge_core([str(path)])), daemon=True)
    worker.start()
    worker.join(10)
    assert found, "judge_core waited on the path"
    kind = {"fifo": "a FIFO", "device": "a character device", "folder": "a directory"}[what]
    assert found[0].status is Status.PASS and found[0].reason.endswith(f"1 not read: {path}: {kind}, not a regular file")


def test_the_bounded_reader_reads_a_regular_file_whole_and_refuses_one_over_its_limit_and_a_link_where_told(tmp_path):
    from smoke.readers import filekind

    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert filekind.read_regular(path, 100) == b"x" * 100
    with pytest.raises(filekind.Unreadable, match=r"over 99 B \(100 B\)"):
        filekind.read_regular(path, 99)
    (tmp_path / "link").symlink_to(path)
    assert filekind.read_regular(tmp_path / "link", 100) == b"x" * 100
    with pytest.raises(filekind.Unreadable):
        filekind.read_regular(tmp_path / "link", 100, follow=False)
    with pytest.raises(filekind.Unreadable, match="No such file"):
        filekind.read_regular(tmp_path / "none", 100)
