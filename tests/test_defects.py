"""The catalogue of defects the gate exists for: one row per defect, the check that must catch it.

Every row builds a broken variant of a real thing (a copy of PyPI's wheel, a real exported
program or data file, a real child process) and runs the gate's own check function on it;
the verdict must be FAIL, from that check, with that reason. A new check comes with its row.
Rows marked slow export or run through executorch (CI runs them all).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from smoke.backends import cuda_checks
from smoke.checks import shipped
from smoke.checks.exported import check_data_file, check_delegated, check_weights_in_data_file
from smoke.readers.wheel import read_wheel
from smoke.results import Status, passed
from smoke.rows import ROWS
from smoke.stages import CHILD_PROCESS, NEGATIVE, RUN
from tests.helpers import (
    CHECK,
    CPU,
    DATA,
    DEVICE_CODE,
    H200,
    H200_MAIN,
    PHASE,
    SHIMS,
    child_row,
    cuda_parts,
    fake_child,
    make_cuda_wheel,
    pypi_wheel,
    rewrite_wheel,
)

CUDA, CPU_ROW = ROWS["cuda_x86_64"], ROWS["cpu_x86_64"]
slow = pytest.mark.slow


# --- the wheel --------------------------------------------------------------------------

def _file_check(fn, wheel, row=CUDA):
    return fn(wheel, row, shipped.read_libraries(wheel))


def with_cuda_build_libraries(ctx, variant: str):
    """The CUDA wheel with the real 1.2.0 CUDA build's extension and shims (their symbol tables) in it,
    labelled 1.2.0 (smoke.checks.owners judges a release by its layout, and these are the 1.2 layout's libraries)."""
    folder = DATA / "cuda-executorch-1.2.0"
    pybind = "executorch/extension/pybindings/_portable_lib.cpython-312-x86_64-linux-gnu.so"
    parts = {**cuda_parts(ctx.slim), **{path: (folder / f"{variant}--{path.replace('/', '--')}").read_bytes()
                                        for path in (SHIMS, pybind)}}
    return make_cuda_wheel(ctx.slim, ctx.tmp / variant, parts=parts, label="1.2.0+cu130")


def aoti_shims_linked_twice(ctx):
    return _file_check(shipped.check_runtime_core, with_cuda_build_libraries(ctx, "unpatched"))


def cpu_build_on_a_cuda_row(ctx):
    return _file_check(cuda_checks.check_cuda_build, read_wheel(ctx.wheel_x86_64))


def cuda_library_removed(ctx):
    parts = cuda_parts(ctx.slim)
    del parts["executorch/lib/libexecutorch_backend_cuda.so"]
    return _file_check(cuda_checks.check_cuda_libraries, make_cuda_wheel(ctx.slim, ctx.tmp, parts=parts))


def cuda_runtime_requirement_removed(ctx):
    return _file_check(cuda_checks.check_cuda_runtime_declared, make_cuda_wheel(ctx.slim, ctx.tmp, requirement=None))


def record_hash_stale(ctx):
    wheel = make_cuda_wheel(ctx.slim, ctx.tmp / "good")
    changed = rewrite_wheel(wheel.path, ctx.tmp / "bad", add={SHIMS: (DEVICE_CODE / "libsm90_only.so").read_bytes()},
                            update_record=False)
    return _file_check(shipped.check_record, read_wheel(changed))


def toolkit_runpath(ctx):
    parts = cuda_parts(ctx.slim, shims=(DEVICE_CODE / "libabsolute_rpath.so").read_bytes())
    return _file_check(shipped.check_library_runpath, make_cuda_wheel(ctx.slim, ctx.tmp, parts=parts))


def device_code_for_one_gpu(ctx):
    parts = cuda_parts(ctx.slim, shims=(DEVICE_CODE / "libsm90_only.so").read_bytes())
    return _file_check(cuda_checks.check_device_code, make_cuda_wheel(ctx.slim, ctx.tmp, parts=parts))


# --- the data file, on the H200's real CUDA artifacts --------------------------------------

def _h200_copy(ctx, label="weighted"):
    return ctx.copy_artifacts(H200 / label)


def data_file_missing(ctx):
    folder = _h200_copy(ctx)
    (folder / CUDA.backend.data_file).unlink()
    return check_data_file("weighted", folder, CUDA.backend.data_file, required=True)


def data_file_renamed(ctx):
    folder = _h200_copy(ctx)
    (folder / CUDA.backend.data_file).rename(folder / "model.ptd")
    return check_data_file("weighted", folder, CUDA.backend.data_file, required=True)


def data_file_empty(ctx):
    folder = _h200_copy(ctx)
    (folder / CUDA.backend.data_file).write_bytes(b"")
    return check_data_file("weighted", folder, CUDA.backend.data_file, required=True)


def data_file_truncated(ctx):
    folder = _h200_copy(ctx)
    path = folder / CUDA.backend.data_file
    path.write_bytes(path.read_bytes()[:300])
    return check_data_file("weighted", folder, CUDA.backend.data_file, required=True)


def data_file_of_another_program(ctx):
    # The XNNPACK program's folder with the CUDA program's data file under its name: it reads,
    # but does not hold the keys the program's delegate will ask for.
    folder = ctx.copy_artifacts(CPU / "weighted")
    (folder / CPU_ROW.backend.data_file).write_bytes((H200 / "weighted" / CUDA.backend.data_file).read_bytes())
    return check_data_file("weighted", folder, CPU_ROW.backend.data_file, required=True)


def weights_not_in_the_data_file(ctx):
    # The weighted program's data file replaced by the weightless one: it reads, it is not the weights.
    sizes = {label: (H200 / label / CUDA.backend.data_file).stat().st_size for label in ("weightless", "weighted")}
    return check_weights_in_data_file(CUDA.backend.data_file, sizes["weightless"], sizes["weightless"], 128)


# --- main's layout (content-hashed keys in the delegate's processed bytes, et_copy around it) ----------

MAIN_WEIGHTS_KEY = b"2fde66a9f2012fda28059b58e6b15d99c8e0829e2113e99d2e25d5bad3d852b3_weights_blob"
MAIN_SO_KEY = b"b7dda8b2db45e08af0da7fc3f91ed897b3fab5e3a72c7fd0673f62b9000a2da9_so_blob"


def _main_edit(ctx, name: str, old: bytes, new: bytes):
    """A copy of main's weighted artifacts with one run of bytes, found once in the file, changed (same length)."""
    assert len(old) == len(new)
    folder = ctx.copy_artifacts(H200_MAIN / "weighted")
    raw = (folder / name).read_bytes()
    assert raw.count(old) == 1, old
    (folder / name).write_bytes(raw.replace(old, new))
    return folder


def main_data_file_under_another_key(ctx):
    # The weights blob stored under a key the program does not ask for.
    folder = _main_edit(ctx, CUDA.backend.data_file, MAIN_WEIGHTS_KEY, b"0" * 64 + b"_weights_blob")
    return check_data_file("weighted", folder, CUDA.backend.data_file, required=True)


def main_program_asks_for_another_key(ctx):
    # The delegate's processed bytes name other weights than the data file holds.
    folder = _main_edit(ctx, "model.pte", MAIN_WEIGHTS_KEY, b"f" * 64 + b"_weights_blob")
    return check_data_file("weighted", folder, CUDA.backend.data_file, required=True)


def main_data_file_without_the_weights(ctx):
    # A real FlatTensor file with no weights blob of this program (1.2.0's weightless one) as main's data file.
    folder = ctx.copy_artifacts(H200_MAIN / "weighted")
    (folder / CUDA.backend.data_file).write_bytes((H200 / "weightless" / CUDA.backend.data_file).read_bytes())
    return check_data_file("weighted", folder, CUDA.backend.data_file, required=True)


def main_keys_in_a_shape_the_runtime_refuses(ctx):
    # resolve_blob_keys (aoti_delegate_handle.h) returns Error::Internal for processed bytes with no newline.
    folder = _main_edit(ctx, "model.pte", MAIN_SO_KEY + b"\n", MAIN_SO_KEY + b"_")
    return check_delegated("weighted", folder / "model.pte", CUDA.backend.delegate_id)


def main_copies_around_a_delegate_with_no_device(ctx):
    # Without the target_device compile spec nothing puts host/device copies there: they are compute left outside.
    folder = _main_edit(ctx, "model.pte", b"target_device", b"target_devicX")
    return check_delegated("weighted", folder / "model.pte", CUDA.backend.delegate_id)


def main_compute_left_outside_the_delegate(ctx):
    # The D2H copy's kernel replaced by a real portable operator (same name length): compute beside the copies.
    folder = _main_edit(ctx, "model.pte", b"et_copy::_d2h_copy", b"aten::permute_copy")
    return check_delegated("weighted", folder / "model.pte", CUDA.backend.delegate_id)


# --- the program --------------------------------------------------------------------------

def xnnpack_program_on_the_cuda_row(ctx):
    return check_delegated("weighted", CPU / "weighted" / "model.pte", CUDA.backend.delegate_id)


def program_with_no_delegate(ctx):
    import torch
    from executorch.exir import to_edge_transform_and_lower

    from smoke.child.models import models

    model, example = models()["weighted"]
    program = to_edge_transform_and_lower(torch.export.export(model, example)).to_executorch()
    (ctx.tmp / "model.pte").write_bytes(program.buffer)
    return check_delegated("weighted", ctx.tmp / "model.pte", CPU_ROW.backend.delegate_id)


def program_partly_delegated(ctx):
    import torch

    from smoke.child.delegates import export_xnnpack

    class LinearThenCumsum(torch.nn.Module):  # XNNPACK takes the linear, not the cumsum
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.linear = torch.nn.Linear(8, 4)

        def forward(self, x):
            return torch.cumsum(self.linear(x), dim=1)

    export_xnnpack(LinearThenCumsum().eval(), (torch.randn(2, 8),), ctx.tmp)
    return check_delegated("weighted", ctx.tmp / "model.pte", CPU_ROW.backend.delegate_id)


# --- loading and running, on a real XNNPACK export -------------------------------------------

def _run_with(ctx, ptd: Path):
    """The child's run of the real export with ``ptd`` (in a process of its own that imported the runtime alone, as the
    child has it where it cannot fork: ``smoke.child.negative``), judged as the parent judges it (``smoke.checks.outputs``)."""
    import tempfile

    from smoke.child import negative
    from smoke.child.models import check_run, registered_backends
    from smoke.stages import RUN
    from tests.helpers import eager_judged

    where = Path(tempfile.mkdtemp(dir=ctx.tmp, prefix="run-"))
    process = negative.start_control(where, "weighted")
    assert negative.send(process, ctx.exported["weighted"] / "model.pte", ptd)
    ran = check_run(child_row(CPU_ROW.name), "weighted", negative.collect(process, where, "weighted"), registered_backends())
    return eager_judged(RUN.of("weighted"), ran, ptd.parent.parent, ptd.name)


def _payload_edit(ctx, edit):
    from smoke.artifacts import read_data_file

    source = ctx.exported["weighted"] / CPU_ROW.backend.data_file
    base = read_data_file(source).segment_base_offset
    raw = bytearray(source.read_bytes())
    edit(raw, base)
    (ctx.tmp / CPU_ROW.backend.data_file).write_bytes(raw)
    return _run_with(ctx, ctx.tmp / CPU_ROW.backend.data_file)


def payload_zeroed(ctx):
    return _payload_edit(ctx, lambda raw, base: raw.__setitem__(slice(base, None), bytes(len(raw) - base)))


def one_weight_changed(ctx):
    # One float32 of the payload set to 1.0: the output differs from eager, nothing else does.
    return _payload_edit(ctx, lambda raw, base: raw.__setitem__(slice(base, base + 4), struct.pack("<f", 1.0)))


def another_models_weights(ctx):
    import torch

    from smoke.child.delegates import export_xnnpack

    torch.manual_seed(1)
    other = torch.nn.Linear(8, 4).eval()
    export_xnnpack(other, (torch.randn(2, 8),), ctx.tmp)
    return _run_with(ctx, ctx.tmp / CPU_ROW.backend.data_file)


def control_of(program: Path, workdir: Path, how: str = "started", damaged: dict[str, str] | None = None):
    """A control as the child runs it (``smoke.child.negative``: a process of its own, ``forked`` from the runtime's
    process, ``smoke.child.runtime``, or ``started`` as an interpreter, sent the program) and the parent judges it
    (``smoke.checks.controls``), its twin
    passed and eager's answer computed here: the negative control, or with ``damaged`` (by case, a damaged copy of the
    data file) the corrupt data file's."""
    from smoke import proc, tensors
    from smoke.checks import controls
    from smoke.child import negative, runtime
    from smoke.child.models import models
    from smoke.readers.wheel import read_wheel

    said = {}
    loader = runtime.start(workdir) if how == "forked" else None
    try:
        for case, ptd in (damaged or {negative.MISSING: None}).items():
            process = negative.Case(loader, case, workdir) if loader is not None else negative.start_control(workdir, case)
            assert negative.send(process, program, Path(ptd) if ptd else None)
            said[case] = negative.collect(process, workdir, case)
    finally:
        proc.end(loader)
    model, example = models()["weighted"]
    eager = tensors.decode(tensors.encode_all([model(*example).detach()]))
    rule = CPU_ROW.backend.missing_data(read_wheel(pypi_wheel("x86_64")).version)  # 1.5.1
    twin = passed(RUN.of("weighted"), "matched eager")
    if damaged:
        return controls.judge_corrupt(said, twin, rule, CPU_ROW.backend.data_file, eager)
    return controls.judge_missing(NEGATIVE.name, said[negative.MISSING], twin, rule, CPU_ROW.backend.data_file, eager)


def weights_baked_into_the_program(ctx):
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from smoke.child.models import models

    model, example = models()["weighted"]
    program = to_edge_transform_and_lower(torch.export.export(model, example), partitioner=[XnnpackPartitioner()]).to_executorch()
    (ctx.tmp / "model.pte").write_bytes(program.buffer)
    ctx.monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    return control_of(ctx.tmp / "model.pte", ctx.tmp)


def weights_baked_into_the_program_in_the_childs_fork(ctx):
    """The child's way (issue 35): the control's process a fork of one that imported torch and the exporter."""
    import executorch.exir  # noqa: F401 - as the child has, when it forks
    import torch  # noqa: F401

    weights_baked_into_the_program(ctx)  # writes the program
    return control_of(ctx.tmp / "model.pte", ctx.tmp, "forked")


# --- the child process -------------------------------------------------------------------------

def child_crashes(ctx):
    _outcome, verdict, _seen = fake_child(ctx.tmp, f"w({CHECK!r}); w({PHASE!r}); os.kill(os.getpid(), signal.SIGSEGV)")
    return verdict


def child_hangs(ctx):
    _outcome, verdict, _seen = fake_child(ctx.tmp, f"w({PHASE!r}); time.sleep(60)", timeout=2)
    return verdict


def child_prints_garbage(ctx):
    _outcome, verdict, _seen = fake_child(ctx.tmp, "w('this is not json'); w('{\"kind\": \"end\"}')")
    return verdict


# One row per defect: (defect, the check that must catch it, what its reason must say).
DEFECTS = [
    (cpu_build_on_a_cuda_row, "CUDA build", "is a CPU build: version 1.5.1 has no +cuXXX local label"),
    (cuda_library_removed, "CUDA libraries", "libexecutorch_backend_cuda.so missing"),
    (aoti_shims_linked_twice, "one runtime core",
     "libaoti_cuda_shims.so and _portable_lib.cpython-312-x86_64-linux-gnu.so each define the AOTI shim layer"),
    (cuda_runtime_requirement_removed, "CUDA runtime declared", "names no nvidia-* CUDA runtime package"),
    (record_hash_stale, "wheel RECORD", f"{SHIMS} does not match its RECORD hash"),
    (toolkit_runpath, "library RUNPATH", "'/usr/local/cuda-13.0/lib64' (an absolute path)"),
    (device_code_for_one_gpu, "device code", "has no machine code for sm_80, sm_86, sm_89, sm_100, sm_120"),
    (data_file_missing, "data file (weighted)", "aoti_cuda_blob.ptd is missing"),
    (data_file_renamed, "data file (weighted)", "aoti_cuda_blob.ptd is missing"),
    (data_file_empty, "data file (weighted)", "is not a readable data file"),
    (data_file_truncated, "data file (weighted)", "the file is 300 B"),
    (data_file_of_another_program, "data file (weighted)", "lacks the named data its program expects: 7bd13362"),
    (weights_not_in_the_data_file, "weights in the data file", "the weights are not in the data file"),
    (main_data_file_under_another_key, "data file (weighted)",
     f"lacks the named data its program expects: {MAIN_WEIGHTS_KEY.decode()}"),
    (main_program_asks_for_another_key, "data file (weighted)", f"lacks the named data its program expects: {'f' * 64}_weights_blob"),
    (main_data_file_without_the_weights, "data file (weighted)", f"lacks the named data its program expects: {MAIN_WEIGHTS_KEY.decode()}"),
    (main_keys_in_a_shape_the_runtime_refuses, "delegate (weighted)", "hold no newline between its two keys"),
    (main_copies_around_a_delegate_with_no_device, "delegate (weighted)",
     "leaves 2 operators outside the delegate: et_copy::_h2d_copy.out, et_copy::_d2h_copy.out"),
    (main_compute_left_outside_the_delegate, "delegate (weighted)", "leaves 1 operators outside the delegate: aten::permute_copy.out"),
    (xnnpack_program_on_the_cuda_row, "delegate (weighted)", "has delegates ['XnnpackBackend'], not CudaBackend"),
    pytest.param(program_with_no_delegate, "delegate (weighted)", "has delegates [], not XnnpackBackend", marks=slow),
    pytest.param(program_partly_delegated, "delegate (weighted)", "leaves 1 operators outside the delegate: aten::cumsum.out", marks=slow),
    pytest.param(payload_zeroed, "run with data file (weighted)", "output differs from eager", marks=slow),
    pytest.param(one_weight_changed, "run with data file (weighted)", "output differs from eager", marks=slow),
    pytest.param(another_models_weights, "run with data file (weighted)", "loading or running raised", marks=slow),
    pytest.param(weights_baked_into_the_program, "negative control (weighted, no data file)",
                 "the weights are not coming from the data file", marks=slow),
    pytest.param(weights_baked_into_the_program_in_the_childs_fork, "negative control (weighted, no data file)",
                 "the weights are not coming from the data file", marks=slow),
    (child_crashes, CHILD_PROCESS.name, "ended by SIGSEGV during 'load and run (weighted)'"),
    (child_hangs, CHILD_PROCESS.name, "killed after the 2 s time limit"),
    (child_prints_garbage, CHILD_PROCESS.name, "lines that are not check records"),
]


class Context:
    def __init__(self, request, tmp_path, monkeypatch):
        self.request, self.tmp, self.monkeypatch = request, tmp_path, monkeypatch

    def __getattr__(self, fixture: str):
        return self.request.getfixturevalue({"slim": "slim_x86_64"}.get(fixture, fixture))


@pytest.mark.slow
@pytest.mark.parametrize(("make", "check", "reason"), DEFECTS, ids=lambda v: v.__name__ if callable(v) else None)
def test_every_defect_is_caught_by_its_check(make, check, reason, request, tmp_path, monkeypatch):
    result = make(Context(request, tmp_path, monkeypatch))
    print(f"{make.__name__}: {result.line()}")
    assert result.status is Status.FAIL, result.line()
    assert result.name == check
    assert reason in result.reason, result.reason


@pytest.mark.slow
def test_the_real_things_pass_the_same_checks(request, tmp_path, monkeypatch):
    """The controls: without the defect, the same checks pass (so each row above fails for its defect)."""
    ctx = Context(request, tmp_path, monkeypatch)
    wheel = make_cuda_wheel(ctx.slim, tmp_path)
    for fn in (cuda_checks.check_cuda_build, cuda_checks.check_cuda_libraries, cuda_checks.check_cuda_runtime_declared,
               shipped.check_record, shipped.check_library_runpath, cuda_checks.check_device_code):
        assert _file_check(fn, wheel).status is Status.PASS, fn.__name__
    assert _file_check(shipped.check_runtime_core, with_cuda_build_libraries(ctx, "patched")).status is Status.PASS
    assert check_data_file("weighted", H200 / "weighted", CUDA.backend.data_file, required=True).status is Status.PASS
    assert check_delegated("weighted", H200 / "weighted" / "model.pte", CUDA.backend.delegate_id).status is Status.PASS
    # main's layout: its keys read from the delegate's processed bytes, its copies around the delegate accepted
    assert check_data_file("weighted", H200_MAIN / "weighted", CUDA.backend.data_file, required=True).status is Status.PASS
    assert check_delegated("weighted", H200_MAIN / "weighted" / "model.pte", CUDA.backend.delegate_id).status is Status.PASS


@pytest.mark.slow
def test_the_real_export_passes_the_run_and_the_controls(request, tmp_path, monkeypatch):
    ctx = Context(request, tmp_path, monkeypatch)
    assert _run_with(ctx, ctx.exported["weighted"] / CPU_ROW.backend.data_file).status is Status.PASS
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    pte = ctx.exported["weighted"] / "model.pte"
    # both ways the child runs it: an interpreter of its own, and a fork of this one, which imported torch and the
    # exporter (issue 35); 1.5.1's XNNPACK runtime crashes at method load without its data file (smoke.backends.xnnpack)
    for how in ("started", "forked"):
        (tmp_path / how).mkdir()
        control = control_of(pte, tmp_path / how, how)
        assert control.status is Status.PASS, control.line()
        assert control.reason.startswith("the load without model.ptd ended the process with SIGSEGV at forward (the method's "
                                         "load or its execute), as expected"), control.line()
    # the damaged copies end in a clean error at program load: 1.5.1's FlatTensorDataMap refuses them
    from smoke.checks.controls import write_damaged

    damaged = write_damaged(ctx.exported["weighted"] / "model.ptd", tmp_path / "damaged")
    assert sorted(damaged) == ["cut", "truncated"]
    found = control_of(pte, tmp_path, damaged=damaged)
    assert found.status is Status.PASS, found.line()
    assert found.reason == ("a damaged model.ptd ended each load in a clean error: truncated (cut inside its table): "
                            "InvalidExternalData (0x24) at program load; cut (its named data cut short, the header intact): "
                            "InvalidExternalData (0x24) at program load"), found.line()
