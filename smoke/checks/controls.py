"""The controls: checks whose PASS is an expected failure, each judged with its twin (issue 56).

A control loads the weighted program without its data file (``negative control (weighted, no data file)``, ``C++
consumer without data file``) or with it damaged (``corrupt data file (weighted)``), in a process of its own. Its
failure proves the data file is read only where the same program WITH its data file loaded, ran and matched eager in
the same run: its twin (``smoke.stages.CONTROLS``). Where the twin did not PASS, the control is a SKIP naming the
twin's failure, never a PASS: the same error both ways (a missing operator, say) proves nothing about the data file.

What the control's process said (``said``): the stage it reached (``program load``, ``method load``, ``execute``;
``forward`` where the Python binding's one call loads the method and executes it and nothing says which), and how
it ended there: ``error`` (the runtime's message, whose
code ``error_name`` names), ``signal``, or ``outputs``. What failing means is the delegate's rule for the release
(``smoke.stages.MissingData``, from its backend's ``missing_data``): CUDA from executorch#22311 on must fail the load
with NotFound; before it a crash at the first execute is a WARN naming the fix; XNNPACK's runtime crashes at method
load, upstream's known behaviour, said as such. A corrupt data file must end in a clean error on every row.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from smoke import tensors
from smoke.results import CheckResult, Status, failed, passed, skipped, warned
from smoke.stages import CONTROLS, CORRUPT, MissingData

# The runtime's error codes: runtime/core/error.h (pytorch/executorch, enum class Error: identical at v1.2.0, v1.3.0,
# v1.4.1 and main 2026-08-22; AlreadyLoaded is new in 1.2.0), by value.
RUNTIME_ERRORS = {
    0x00: "Ok", 0x01: "Internal", 0x02: "InvalidState", 0x03: "EndOfMethod", 0x04: "AlreadyLoaded",
    0x10: "NotSupported", 0x11: "NotImplemented", 0x12: "InvalidArgument", 0x13: "InvalidType", 0x14: "OperatorMissing",
    0x15: "RegistrationExceedingMaxKernels", 0x16: "RegistrationAlreadyRegistered",
    0x20: "NotFound", 0x21: "MemoryAllocationFailed", 0x22: "AccessFailed", 0x23: "InvalidProgram",
    0x24: "InvalidExternalData", 0x25: "OutOfResources",
    0x30: "DelegateInvalidCompatibility", 0x31: "DelegateMemoryAllocationFailed", 0x32: "DelegateInvalidHandle",
}
# How the bindings and the consumer print one: "error: 0x14", "error 0x14", "error: 0x:24" (1.5's load_program).
_CODE = re.compile(r"\berror:? 0x:?([0-9a-fA-F]{1,8})\b")
# Which library registers an operator left outside the delegates, by its namespace: the kernels' functions.yaml
# (kernels/portable/functions.yaml declares et_copy::_h2d_copy.out and _d2h_copy.out, merged with the aten
# operators into optimized_native_cpu_ops_lib, which the wheel ships as libexecutorch_kernels_optimized.so,
# executorch::kernels_optimized); kernels/quantized/quantized.yaml the quantized_decomposed ones.
OPERATOR_COMPONENTS = {"aten": "kernels_optimized", "et_copy": "kernels_optimized", "dim_order_ops": "kernels_optimized",
                       "quantized_decomposed": "kernels_quantized"}
STAGES = ("program load", "method load", "forward", "execute")
CASES = {"truncated": "cut inside its table", "cut": "its named data cut short, the header intact"}


def error_code(text: str) -> int | None:
    found = _CODE.search(text or "")
    return int(found[1], 16) if found else None


def error_name(text: str) -> str:
    """The runtime's error in ``text``, named: "OperatorMissing (0x14)"; "" where it names no code."""
    code = error_code(text)
    if code is None:
        return ""
    return f"{RUNTIME_ERRORS.get(code, 'an unknown error')} (0x{code:x})"


def named(text: str) -> str:
    """``text`` with the runtime's error named after it, where it holds a code."""
    name = error_name(text)
    return f"{text} [{name}]" if name and name.split(" (")[0] not in text else text


def missing_operators(operators: list[str], linked: set[str] | None = None) -> str:
    """The operators a program leaves outside its delegates, by the component that registers them, for an
    OperatorMissing: ``linked``, the components the process linked (None where unknown: the Python runtime)."""
    if not operators:
        return "the program leaves no operator outside its delegates"
    by: dict[str, list[str]] = {}
    for op in operators:
        by.setdefault(OPERATOR_COMPONENTS.get(op.split("::", 1)[0], ""), []).append(op)
    parts = []
    for component, ops in by.items():
        if not component:
            parts.append(f"{', '.join(ops)} (no library of the wheel's known to register them)")
            continue
        library = f"libexecutorch_{component}.so"
        state = "" if linked is None else ", linked" if component in linked else ", which the wheel does not ship"
        parts.append(f"{', '.join(ops)} (registered by executorch::{component}, {library}{state})")
    said = f"the program leaves {len(operators)} operators outside its delegates: " + "; ".join(parts)
    if linked is not None and any(component and component not in linked for component in by):
        # The build's finding, not the consumer's: upstream's wheel ships the merged CPU kernels wherever its build
        # makes them (setup.py, EXECUTORCH_BUILD_KERNELS_OPTIMIZED, on in tools/cmake/preset/pybind.cmake), and its
        # own CUDA consumer links them (.ci/scripts/wheel/test_cuda_windows.py: runtime, kernels_optimized, backend_cuda).
        said += ("; the wheel's C++ SDK cannot run a program its own exporter writes: upstream's wheel ships "
                 "executorch::kernels_optimized (setup.py, with the pybind preset's EXECUTORCH_BUILD_KERNELS_OPTIMIZED=ON)")
    return said


def stage_of(said: dict[str, Any]) -> str:
    stage = said.get("stage")
    if stage == "forward":
        return "forward (the method's load or its execute)"
    return stage if stage in STAGES else "an unknown stage"


def twin_failure(name: str, twin: CheckResult | None) -> CheckResult | None:
    """A SKIP of the control ``name`` where its twin did not PASS in this run; None where it did."""
    twin_name = CONTROLS[name]
    if twin is not None and twin.status is Status.PASS:
        return None
    why = (f"{twin_name} was not run" if twin is None else
           f"{twin_name} {'FAILed' if twin.status is Status.FAIL else twin.status.value.upper() + 'ed'}: {twin.reason}")
    return skipped(name, f"not judged: its twin did not pass, so a failure here proves nothing about the data file "
                         f"({why})", twin=twin_name, twin_status=twin.status.value if twin else None)


def _ended(said: dict[str, Any]) -> str:
    """How the process ended, in words: "SIGSEGV at method load", "error ... at program load"."""
    stage = stage_of(said)
    if "signal" in said:
        return f"{said['signal']} at {stage}"
    error = str(said.get("error", ""))
    name = error_name(error)
    return f"{name or 'an error'} at {stage}: {error}"


def judge_missing(name: str, said: dict[str, Any], twin: CheckResult | None, rule: MissingData, data_file: str,
                  eager: list[tensors.Output] | None, who: str = "the process") -> CheckResult:
    """A load WITHOUT the data file (``said``: what the control's process said), with its twin and the release's
    ``rule``; ``eager``: the weighted model's answer, computed apart from the wheel's code."""
    skip = twin_failure(name, twin)
    if skip is not None:
        return skip
    measured: dict[str, Any] = {"stage": stage_of(said), "twin": CONTROLS[name], "rule": rule.source}
    if "outputs" in said:
        return _ran_without(name, said["outputs"], eager, f"without {data_file}", rule, measured)
    if "signal" in said:
        measured["outcome"] = said["signal"]
        crash = f"the load without {data_file} ended {who} with {_ended(said)}"
        if rule.crash == "pass":
            return passed(name, f"{crash}, as expected ({rule.source})", **measured)
        if rule.crash == "warn":
            return warned(name, f"{crash}: it failed, so the weights come from the data file, but by a crash, not an "
                                f"error ({rule.source})", **measured)
        return failed(name, f"{crash}, where this release must fail the load with "
                            f"{rule.load_error or 'an error'} ({rule.source})", **measured)
    if "error" in said:
        error = str(said["error"])
        measured.update(outcome="error", error=error, error_name=error_name(error))
        found = error_name(error).split(" (")[0]
        if rule.load_error and said.get("stage") == "execute":
            return failed(name, f"loaded without {data_file}, then failed at execute ({_ended(said)}): this release must "
                                f"fail the load with {rule.load_error} ({rule.source})", **measured)
        if rule.load_error and found != rule.load_error:
            return warned(name, f"the load without {data_file} failed with {_ended(said)}, where {rule.load_error} was "
                                f"expected ({rule.source})", **measured)
        return passed(name, f"the load without {data_file} failed with {_ended(said)}, as expected", **measured)
    return failed(name, f"{who} without {data_file} said nothing the gate reads: {said.get('failed', said)}")


def _ran_without(name: str, given: Any, eager: list[tensors.Output] | None, how: str, rule: MissingData,
                 measured: dict[str, Any]) -> CheckResult:
    """It ran to the end: eager's answer means the data file is not read; any answer, where the release must fail
    the load, is its defect."""
    if eager is None:
        return failed(name, f"ran {how} and its outputs cannot be judged: no eager answer")
    try:
        found = tensors.close(tensors.decode(given), eager, tensors.RTOL, tensors.ATOL)
    except tensors.NotOutputs as exc:
        return failed(name, f"ran {how} and gave no outputs the gate reads: {exc}", **measured)
    measured.update(max_abs_diff=found.max_abs_diff)
    if found.matched:
        return failed(name, f"ran {how} and matched eager (max abs diff {found.max_abs_diff:.3g}): the weights are not "
                            f"coming from the data file", outcome="matched", **measured)
    if rule.load_error:
        return failed(name, f"loaded and ran {how} (max abs diff {found.max_abs_diff:.3g} from eager), where this release "
                            f"must fail the load with {rule.load_error} ({rule.source})", outcome="mismatch", **measured)
    return passed(name, f"ran {how} and did not match eager (max abs diff {found.max_abs_diff:.3g}), as expected",
                  outcome="mismatch", **measured)


def judge_corrupt(said: dict[str, Any], twin: CheckResult | None, rule: MissingData, data_file: str,
                  eager: list[tensors.Output] | None) -> CheckResult:
    """The weighted program with its data file damaged two ways (``said``: by case, what each process said): each
    must end in a clean error. Eager's answer or any answer is a FAIL; a crash is a FAIL, or a WARN on a release
    whose rule calls it a bug fixed later."""
    name = CORRUPT.name
    skip = twin_failure(name, twin)
    if skip is not None:
        return skip
    if not isinstance(said, dict) or "skipped" in said:
        return failed(name, f"not run: {said.get('skipped') if isinstance(said, dict) else said}")
    ends: list[str] = []
    wrong: list[str] = []
    warn: list[str] = []
    measured: dict[str, Any] = {"twin": CONTROLS[name], "cases": {}}
    for case, words in CASES.items():
        one = said.get(case)
        if not isinstance(one, dict):
            wrong.append(f"{case} ({words}): not run")
            continue
        measured["cases"][case] = {"stage": stage_of(one), **{k: one[k] for k in ("signal", "error") if k in one}}
        label = f"{case} ({words})"
        if "error" in one:
            ends.append(f"{label}: {error_name(str(one['error'])) or 'an error'} at {stage_of(one)}")
            measured["cases"][case]["error"] = str(one["error"])
        elif "signal" in one:
            (warn if rule.crash == "warn" else wrong).append(f"{label}: crashed, {_ended(one)}")
        elif "outputs" in one:
            try:
                found = tensors.close(tensors.decode(one["outputs"]), eager or [], tensors.RTOL, tensors.ATOL)
                answer = "eager's answer" if found.matched else f"an answer {found.max_abs_diff:.3g} from eager's"
            except tensors.NotOutputs:
                answer = "outputs"
            wrong.append(f"{label}: loaded and ran, giving {answer}")
        else:
            wrong.append(f"{label}: said nothing the gate reads ({one.get('failed', one)})")
    if wrong:
        return failed(name, f"a damaged {data_file} did not end in a clean error: {'; '.join(wrong + warn)}", **measured)
    if warn:
        return warned(name, f"a damaged {data_file} crashed the runtime: {'; '.join(warn)}"
                            f"{'; ' + '; '.join(ends) if ends else ''} ({rule.source})", **measured)
    return passed(name, f"a damaged {data_file} ended each load in a clean error: {'; '.join(ends)}", **measured)


def damage(data: bytes, flatbuffer_offset: int, flatbuffer_size: int, first_blob: tuple[int, int] | None) -> dict[str, bytes]:
    """The data file's two damaged copies, from its FlatTensor header's fields (``smoke.artifacts.read_data_file``):
    ``truncated``, cut inside its table; ``cut``, the header and table whole and its first named data (``first_blob``:
    its start in the file and its size) cut to half."""
    made = {"truncated": data[: flatbuffer_offset + max(1, flatbuffer_size // 2)]}
    if first_blob is not None and first_blob[1] > 1:
        start, size = first_blob
        made["cut"] = data[: start + size // 2]
    return made


def write_damaged(ptd: Path, folder: Path) -> dict[str, str]:
    """Write ``ptd``'s damaged copies into ``folder`` (one sub-folder per case, the data file's own name): their paths,
    by case; empty where the gate's reader cannot read ``ptd`` (its own check, ``data file``, says why)."""
    from smoke.artifacts import read_data_file
    from smoke.readers.tables import ArtifactError

    try:
        read = read_data_file(ptd)
        data = ptd.read_bytes()
    except (OSError, ArtifactError):
        return {}
    blob = max(read.blobs, key=lambda b: b.size, default=None)  # the weight matrix's, the largest
    made = {}
    for case, damaged in damage(data, read.flatbuffer_offset, read.flatbuffer_size,
                                (blob.start, blob.size) if blob else None).items():
        target = folder / case / ptd.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(damaged)
        made[case] = str(target)
    return made
