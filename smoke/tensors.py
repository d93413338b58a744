"""Outputs as data, and eager's comparison of them, in the standard library alone.

A program's outputs are computed in the child, where the wheel's code runs; eager's answer is computed in a process
where it does not (``smoke.child.reference``); the parent, which imports neither torch nor the wheel, compares the
two (issue 48). Both sides write each output as ``{"shape": [...], "dtype": "torch.float32", "values": [...]}``,
every value in order, a non-finite one as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (JSON has no number
for them; the names ``smoke.report.finite`` writes).

``close`` holds an output to eager's as ``torch.testing.assert_close`` does with the tolerances given (torch's
``_compare_regular_values_close``: ``|actual - expected| <= atol + rtol * |expected|``, NaN equal to nothing, an
infinity equal to itself only), with the shape and the dtype the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MAX_VALUES = 1 << 16  # the values an output carries at most: the gate's models give 32, 8 and 12
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
# How close a program's output must be to eager's: float32 through the same operators in another order (a delegate's
# fused kernels, the portable ones) differs by a few ulps; a changed weight moves it by far more (tests/test_defects.py).
RTOL = 1e-4
ATOL = 1e-5


def _value(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def encode(output: Any) -> dict[str, Any]:
    """One output of a program or of eager (a torch tensor, or what quacks as one), as data; a tensor past
    ``MAX_VALUES`` values keeps its first ones (its shape then says it was cut, and the comparison fails on it)."""
    if not hasattr(output, "detach"):  # a scalar, or what is no number at all (its one value missing: it never matches)
        try:
            return {"shape": [], "dtype": type(output).__name__, "values": [_value(float(output))]}
        except (TypeError, ValueError):
            return {"shape": [], "dtype": type(output).__name__, "values": []}
    tensor = output.detach().cpu()
    values = tensor.flatten()[:MAX_VALUES]
    values = values.double().tolist() if values.is_floating_point() else values.tolist()
    return {"shape": list(tensor.shape), "dtype": str(tensor.dtype), "values": [_value(float(v)) for v in values]}


def encode_all(outputs: Any) -> list[dict[str, Any]]:
    """A program's or a model's outputs (one tensor, or a sequence of them), each as ``encode`` writes it."""
    many = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return [encode(output) for output in many]


@dataclass(frozen=True)
class Output:
    shape: tuple[int, ...]
    dtype: str
    values: tuple[float, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


class NotOutputs(ValueError):
    """What was given as outputs is not a list of ``encode``'s objects."""


def decode(data: Any) -> list[Output]:
    """``encode_all``'s list read back, each field checked; ``NotOutputs`` naming what is wrong where it is not one."""
    if not isinstance(data, list):
        raise NotOutputs(f"outputs are a {type(data).__name__}, not a list")
    found = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise NotOutputs(f"output {i} is a {type(item).__name__}, not an object")
        shape, dtype, values = item.get("shape"), item.get("dtype"), item.get("values")
        if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise NotOutputs(f"output {i}'s shape is not a list of sizes: {str(shape)[:80]}")
        if not isinstance(dtype, str) or not isinstance(values, list) or len(values) > MAX_VALUES:
            raise NotOutputs(f"output {i} has no dtype, or no list of at most {MAX_VALUES} values")
        read = []
        for value in values:
            if isinstance(value, str) and value in _NONFINITE:
                read.append(_NONFINITE[value])
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                read.append(float(value))
            else:
                raise NotOutputs(f"output {i} holds a value that is not a number: {str(value)[:40]}")
        found.append(Output(tuple(shape), dtype, tuple(read)))
    return found


@dataclass(frozen=True)
class Comparison:
    matched: bool
    max_abs_diff: float  # over every output; inf where a shape, a dtype or a count differs
    first: str  # the first difference, in words ("" where they matched)


def _close(actual: float, expected: float, rtol: float, atol: float) -> bool:
    if math.isnan(actual) or math.isnan(expected):
        return False
    if math.isinf(actual) or math.isinf(expected):
        return actual == expected
    return abs(actual - expected) <= atol + rtol * abs(expected)


def close(actual: list[Output], expected: list[Output], rtol: float, atol: float) -> Comparison:
    """Each output against eager's, as ``torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)`` holds
    them (the module's docstring)."""
    if len(actual) != len(expected):
        return Comparison(False, math.inf, f"{len(actual)} outputs, eager gives {len(expected)}")
    worst, first = 0.0, ""
    for i, (a, e) in enumerate(zip(actual, expected)):
        if a.shape != e.shape or a.dtype != e.dtype or len(a.values) != a.numel or len(e.values) != e.numel:
            worst = math.inf
            first = first or (f"output {i} is {a.dtype} of shape {list(a.shape)} ({len(a.values)} values given), "
                              f"eager's {e.dtype} of shape {list(e.shape)}")
            continue
        wrong = 0
        for j, (x, y) in enumerate(zip(a.values, e.values)):
            diff = 0.0 if x == y else math.inf if math.isnan(x) or math.isnan(y) else abs(x - y)
            worst = max(worst, diff)
            if not _close(x, y, rtol, atol):
                wrong += 1
                if wrong == 1 and not first:
                    first = f"output {i}, value {j}: {x!r}, eager {y!r}"
        if wrong and first.startswith(f"output {i}, value"):
            first = f"{first} ({wrong} of {a.numel} values differ)"
    return Comparison(not first, worst, first)


def flat(output: Output, count: int) -> list[float]:
    """The first ``count`` values of an output, as a check's measurements hold them (the report names the non-finite)."""
    return list(output.values[:count])
