"""The runs' outputs, judged by the parent against eager's answer computed apart from the wheel's code (issue 48).

The child loads each program and runs it; what it hands the parent (``smoke.child.ask``: ``ran``) is the outputs, or
why there are none. Eager's answer comes from ``smoke.environment.reference``, a process in which nothing of the wheel
ran. So the child's word is never the verdict: code of the wheel that forges a PASS must also forge the outputs.

- ``run with data file (LABEL)``: the outputs, against eager's for that model;
- ``portable kernels``: the program, read here (no plan carries a delegate, operators are left to the kernels), and its
  outputs, against eager's.
- ``quantized kernels``: as ``portable kernels``, and the program must leave ``quantized_decomposed``'s quantize and
  dequantize to the kernels. The child may skip it only where the wheel ships no ``executorch/kernels/quantized``
  (1.2.0's CUDA build is made without them); a skip of a wheel that ships them FAILs.
- ``XNNPACK quantized``: the program, read here (it carries the XnnpackBackend delegate and leaves no operator
  outside it: its quantized ops are delegated), and its outputs, against the quantized model's eager answer (torchao's
  copy of the same quantizer, ``smoke.child.xnnpack_quantized``) within one step of the output's int8 grid plus the
  float atol: the delegate's int8 kernels requantize the int32 accumulator once, eager's reference rounds a float
  product, and a value lying near the middle of two grid points goes to one in one and to its neighbour in the other
  (measured on 1.5.1: 0 or exactly one step). The child may skip it only where the runtime registers no
  XnnpackBackend; a row whose own delegate is XnnpackBackend never skips it.
- ``OpenVINO model``: the weightless model through the OpenVINO delegate (``smoke.child.openvino``): the program, read
  here, carries the OpenvinoBackend delegate, and its outputs match the weightless model's eager answer. The child
  skips it where the runtime registers no OpenvinoBackend or the OpenVINO export stack is not installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smoke import tensors
from smoke.checks import controls
from smoke.checks.exported import program_facts
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import MODELS, OPENVINO_MODEL, PORTABLE, QUANTIZED, RUN, XNNPACK_QUANTIZED

OUTPUT_VALUES = 256  # kept per output in a check's measurements (what ``compare`` sets side by side)
PORTABLE_LABEL = "portable"
QUANTIZED_LABEL = "quantized"
XNNPACK_QUANTIZED_LABEL = "xnnpack-quantized"  # smoke.child.xnnpack_quantized.LABEL
XNNPACK = "XnnpackBackend"
OPENVINO_LABEL = "openvino"  # smoke.child.openvino.LABEL
OPENVINO = "OpenvinoBackend"
# The checks a child hands over with ``ran``, and the folder each one's program is in, which names its eager answer
# (``EAGER_OF`` where another model's: the OpenVINO program is the weightless model's).
JUDGED = {**{RUN.of(label): label for label in MODELS}, PORTABLE.name: PORTABLE_LABEL, QUANTIZED.name: QUANTIZED_LABEL,
          XNNPACK_QUANTIZED.name: XNNPACK_QUANTIZED_LABEL, OPENVINO_MODEL.name: OPENVINO_LABEL}
EAGER_OF = {OPENVINO_LABEL: "weightless"}
# What the quantized program must leave to the kernels (the out variants the quantized kernels library registers).
QUANTIZED_OPERATORS = ("quantized_decomposed::quantize_per_tensor.out", "quantized_decomposed::dequantize_per_tensor.out")
QUANTIZED_FOLDER = "executorch/kernels/quantized/"  # where a wheel ships them for Python (their AOT library)


def ships_quantized_kernels(files) -> bool:
    return any(f.startswith(QUANTIZED_FOLDER) and "quantized_ops_aot_lib" in f for f in files)


def compare(name: str, given: Any, expected: list[tensors.Output], loaded_with: str, rtol: float = tensors.RTOL,
            atol: float = tensors.ATOL, tolerance: str = "", **measured: Any) -> CheckResult:
    """The outputs the child gave, against eager's (within ``rtol`` and ``atol``, said as ``tolerance`` where given)."""
    try:
        outputs = tensors.decode(given)
    except tensors.NotOutputs as exc:
        return failed(name, f"loaded with {loaded_with}; the child gave no outputs the gate reads: {exc}", **measured)
    found = tensors.close(outputs, expected, rtol, atol)
    tolerance = tolerance or f"rtol {rtol:g}, atol {atol:g}"
    measured = {**measured, "max_abs_diff": found.max_abs_diff, "rtol": rtol, "atol": atol,
                "outputs": [tensors.flat(output, OUTPUT_VALUES) for output in outputs], "eager": "apart from the wheel's code"}
    if not found.matched:
        return failed(name, f"loaded with {loaded_with}, output differs from eager: max abs diff {found.max_abs_diff:.3g} "
                            f"({tolerance}): {found.first}", **measured)
    return passed(name, f"loaded with {loaded_with}, matched eager, max abs diff {found.max_abs_diff:.3g} ({tolerance})",
                  **measured)


def _portable_program(pte: Path, required: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    """Why a program with no delegate does not prove the kernels ("" where it does; ``required``: operators it must
    leave to them), and what was read of it."""
    program = program_facts(pte)
    if "error" in program:
        return f"cannot read the program: {program['error']}", {}
    plans = program["plans"]
    delegated = {plan["name"]: list(plan["delegate_ids"]) for plan in plans if plan["delegate_ids"]}
    operators = sorted({op for plan in plans for op in plan["operators"]})
    measured = {"pte_bytes": program["bytes"], "operators": operators}
    if not plans or delegated or not operators:
        why = (f"plans {delegated} carry delegates" if delegated else
               "no execution plan" if not plans else "no operator is left to the kernels")
        return f"{pte.name} does not prove the kernels: {why}", {**measured, "delegates": delegated}
    if missing := [op for op in required if op not in operators]:
        return f"{pte.name} does not prove the kernels: it leaves no {', '.join(missing)} to them", measured
    return "", measured


def _delegated_program(pte: Path, delegate: str, none_outside: bool) -> tuple[str, dict[str, Any]]:
    """Why a program does not prove ``delegate`` ("" where it does: it carries it, and with ``none_outside`` leaves
    no operator outside it), and what was read of it."""
    program = program_facts(pte)
    if "error" in program:
        return f"cannot read the program: {program['error']}", {}
    plans = program["plans"]
    delegates = sorted({found for plan in plans for found in plan["delegate_ids"]})
    operators = sorted({op for plan in plans for op in plan["operators"]})
    measured = {"pte_bytes": program["bytes"], "delegates": delegates, "operators": operators}
    if delegate not in delegates:
        return f"{pte.name} carries no {delegate} delegate (delegates: {', '.join(delegates) or 'none'})", measured
    if none_outside and operators:
        return (f"{pte.name} leaves {len(operators)} operators outside the {delegate} delegate ({', '.join(operators)}): "
                f"its quantized ops are not all delegated"), measured
    return "", measured


def judge_ran(name: str, ran: dict[str, Any], workdir: Path, data_file: str, eager: dict[str, list[tensors.Output]],
              eager_error: str = "", wheel_files=(), unbuilt: dict[str, str] | None = None,
              steps: dict[str, float] | None = None, delegate_id: str = "") -> CheckResult:
    """A check the child handed over (``name``, one of ``JUDGED``): skipped as it says, failed as it says, or its
    outputs held to eager's (``eager``: by model; ``eager_error``: why there is no answer to hold them to; ``unbuilt``:
    an optional model eager could not build, with why; ``steps``: a quantized output's int8 step, by model;
    ``wheel_files``: what the wheel ships, and ``delegate_id``: the row's delegate, which a skip must fit)."""
    label = JUDGED[name]
    if isinstance(ran.get("skipped"), str):
        if label == QUANTIZED_LABEL and ships_quantized_kernels(wheel_files):
            return failed(name, f"the child skipped it ({ran['skipped']}), yet the wheel ships {QUANTIZED_FOLDER}")
        if label == XNNPACK_QUANTIZED_LABEL and delegate_id == XNNPACK:
            return failed(name, f"the child skipped it ({ran['skipped']}), yet this row's own delegate is {XNNPACK}")
        return skipped(name, ran["skipped"])
    given = ran.get("error")
    error = controls.named(given) if isinstance(given, str) and given else "the child gave neither outputs nor an error"
    if controls.error_code(error) == 0x14:  # OperatorMissing: which operators, and what registers them
        program = program_facts(workdir / label / "model.pte")
        error += f": {controls.missing_operators(sorted({op for plan in program.get('plans', []) for op in plan['operators']}))}"
    measured: dict[str, Any] = {}
    if isinstance(ran.get("registered_backends"), list):
        measured["registered_backends"] = [str(b) for b in ran["registered_backends"]][:64]
    if label in (PORTABLE_LABEL, QUANTIZED_LABEL):
        pte = workdir / label / "model.pte"
        if "outputs" not in ran and not pte.exists():  # the export itself failed
            return failed(name, error, **measured)
        wrong, read = _portable_program(pte, QUANTIZED_OPERATORS if label == QUANTIZED_LABEL else ())
        measured.update(read)
        if wrong:
            return failed(name, wrong, **measured)
        operators = measured["operators"]
        if "outputs" not in ran:
            return failed(name, f"{pte.name} ({len(operators)} operators, no delegate): {error}", **measured)
        loaded_with = f"no delegate, {len(operators)} operators on the kernels ({', '.join(operators)})"
    elif label in (XNNPACK_QUANTIZED_LABEL, OPENVINO_LABEL):
        pte = workdir / label / "model.pte"
        if "outputs" not in ran and not pte.exists():  # the import, or the export itself, failed
            return failed(name, error, **measured)
        delegate = XNNPACK if label == XNNPACK_QUANTIZED_LABEL else OPENVINO
        wrong, read = _delegated_program(pte, delegate, none_outside=label == XNNPACK_QUANTIZED_LABEL)
        measured.update(read)
        if wrong:
            return failed(name, wrong, **measured)
        if "outputs" not in ran:
            return failed(name, f"{pte.name} (on the {delegate} delegate): {error}", **measured)
        written = (workdir / label / "model.ptd").exists()
        loaded_with = (f"{'model.ptd' if written else 'no data file (none was written)'}, every operator in the {delegate} delegate"
                       if label == XNNPACK_QUANTIZED_LABEL else f"the {delegate} delegate")
    else:
        if "outputs" not in ran:
            return failed(name, error, **measured)
        written = (workdir / label / data_file).exists()
        loaded_with = data_file if written else "no data file (none was written)"
    if eager_error:
        return failed(name, f"loaded with {loaded_with}; its outputs cannot be judged: {eager_error}", **measured)
    label = EAGER_OF.get(label, label)
    if label not in eager:
        why = (unbuilt or {}).get(label, "eager gave no answer for it")
        return skipped(name, f"loaded with {loaded_with}; not judged: {why}", **measured)
    if label == XNNPACK_QUANTIZED_LABEL:
        step = (steps or {}).get(label)
        if step is None:
            return skipped(name, f"loaded with {loaded_with}; not judged: eager's answer came with no int8 step to hold "
                                 f"it to", **measured)
        atol = step + tensors.ATOL
        return compare(name, ran["outputs"], eager[label], loaded_with, rtol=0.0, atol=atol, step=step,
                       tolerance=f"one step of the output's int8 grid, {step:.3g}, plus atol {tensors.ATOL:g}", **measured)
    return compare(name, ran["outputs"], eager[label], loaded_with, **measured)
