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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smoke import tensors
from smoke.checks.exported import program_facts
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import MODELS, PORTABLE, QUANTIZED, RUN

OUTPUT_VALUES = 256  # kept per output in a check's measurements (what ``compare`` sets side by side)
PORTABLE_LABEL = "portable"
QUANTIZED_LABEL = "quantized"
# The checks a child hands over with ``ran``, and the model each one's eager answer is of.
JUDGED = {**{RUN.of(label): label for label in MODELS}, PORTABLE.name: PORTABLE_LABEL, QUANTIZED.name: QUANTIZED_LABEL}
# What the quantized program must leave to the kernels (the out variants the quantized kernels library registers).
QUANTIZED_OPERATORS = ("quantized_decomposed::quantize_per_tensor.out", "quantized_decomposed::dequantize_per_tensor.out")
QUANTIZED_FOLDER = "executorch/kernels/quantized/"  # where a wheel ships them for Python (their AOT library)


def ships_quantized_kernels(files) -> bool:
    return any(f.startswith(QUANTIZED_FOLDER) and "quantized_ops_aot_lib" in f for f in files)


def compare(name: str, given: Any, expected: list[tensors.Output], loaded_with: str, **measured: Any) -> CheckResult:
    """The outputs the child gave, against eager's."""
    try:
        outputs = tensors.decode(given)
    except tensors.NotOutputs as exc:
        return failed(name, f"loaded with {loaded_with}; the child gave no outputs the gate reads: {exc}", **measured)
    found = tensors.close(outputs, expected, tensors.RTOL, tensors.ATOL)
    tolerance = f"rtol {tensors.RTOL:g}, atol {tensors.ATOL:g}"
    measured = {**measured, "max_abs_diff": found.max_abs_diff, "rtol": tensors.RTOL, "atol": tensors.ATOL,
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


def judge_ran(name: str, ran: dict[str, Any], workdir: Path, data_file: str, eager: dict[str, list[tensors.Output]],
              eager_error: str = "", wheel_files=(), unbuilt: dict[str, str] | None = None) -> CheckResult:
    """A check the child handed over (``name``, one of ``JUDGED``): skipped as it says, failed as it says, or its
    outputs held to eager's (``eager``: by model; ``eager_error``: why there is no answer to hold them to; ``unbuilt``:
    an optional model eager could not build, with why; ``wheel_files``: what the wheel ships, which a skip must fit)."""
    label = JUDGED[name]
    if isinstance(ran.get("skipped"), str):
        if label == QUANTIZED_LABEL and ships_quantized_kernels(wheel_files):
            return failed(name, f"the child skipped it ({ran['skipped']}), yet the wheel ships {QUANTIZED_FOLDER}")
        return skipped(name, ran["skipped"])
    given = ran.get("error")
    error = given if isinstance(given, str) and given else "the child gave neither outputs nor an error"
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
    else:
        if "outputs" not in ran:
            return failed(name, error, **measured)
        written = (workdir / label / data_file).exists()
        loaded_with = data_file if written else "no data file (none was written)"
    if eager_error:
        return failed(name, f"loaded with {loaded_with}; its outputs cannot be judged: {eager_error}", **measured)
    if label not in eager:
        why = (unbuilt or {}).get(label, "eager gave no answer for it")
        return skipped(name, f"loaded with {loaded_with}; not judged: {why}", **measured)
    return compare(name, ran["outputs"], eager[label], loaded_with, **measured)
