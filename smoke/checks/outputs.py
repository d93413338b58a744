"""The runs' outputs, judged by the parent against eager's answer computed apart from the wheel's code (issue 48).

The child loads each program and runs it; what it hands the parent (``smoke.child.ask``: ``ran``) is the outputs, or
why there are none. Eager's answer comes from ``smoke.environment.reference``, a process in which nothing of the wheel
ran. So the child's word is never the verdict: code of the wheel that forges a PASS must also forge the outputs.

- ``run with data file (LABEL)``: the outputs, against eager's for that model;
- ``portable kernels``: the program, read here (no plan carries a delegate, operators are left to the kernels), and its
  outputs, against eager's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smoke import tensors
from smoke.checks.exported import program_facts
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import MODELS, PORTABLE, RUN

OUTPUT_VALUES = 256  # kept per output in a check's measurements (what ``compare`` sets side by side)
PORTABLE_LABEL = "portable"
# The checks a child hands over with ``ran``, and the model each one's eager answer is of.
JUDGED = {**{RUN.of(label): label for label in MODELS}, PORTABLE.name: PORTABLE_LABEL}


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


def _portable_program(pte: Path) -> tuple[str, dict[str, Any]]:
    """Why the portable program does not prove the kernels ("" where it does), and what was read of it."""
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
    return "", measured


def judge_ran(name: str, ran: dict[str, Any], workdir: Path, data_file: str, eager: dict[str, list[tensors.Output]],
              eager_error: str = "") -> CheckResult:
    """A check the child handed over (``name``, one of ``JUDGED``): skipped as it says, failed as it says, or its
    outputs held to eager's (``eager``: by model; ``eager_error``: why there is no answer to hold them to)."""
    label = JUDGED[name]
    if isinstance(ran.get("skipped"), str):
        return skipped(name, ran["skipped"])
    given = ran.get("error")
    error = given if isinstance(given, str) and given else "the child gave neither outputs nor an error"
    measured: dict[str, Any] = {}
    if isinstance(ran.get("registered_backends"), list):
        measured["registered_backends"] = [str(b) for b in ran["registered_backends"]][:64]
    if label == PORTABLE_LABEL:
        pte = workdir / PORTABLE_LABEL / "model.pte"
        if "outputs" not in ran and not pte.exists():  # the export itself failed
            return failed(name, error, **measured)
        wrong, read = _portable_program(pte)
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
    return compare(name, ran["outputs"], eager[label], loaded_with, **measured)
