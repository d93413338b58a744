"""The child's two models, how a program is loaded and run, and the comparison with eager PyTorch.

Imported only inside the gate's environment (torch and executorch are imported where used).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from smoke.child.probe import one_line
from smoke.results import CheckResult, failed, passed
from smoke.stages import MODELS, RUN

if TYPE_CHECKING:
    from smoke.child.row import ChildRow

RTOL = 1e-4


ATOL = 1e-5
OUTPUT_VALUES = 256  # recorded per output (the child's models give 32, 8 and 12 values)


SEED = 0


def models():
    import torch

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    torch.manual_seed(SEED)
    weighted = torch.nn.Linear(8, 4).eval()
    built = {
        "weightless": (Add().eval(), (torch.randn(4, 8), torch.randn(4, 8))),
        "weighted": (weighted, (torch.randn(2, 8),)),
    }
    assert tuple(built) == MODELS  # the labels every check and report uses (smoke.stages)
    return built


def weight_matrix_bytes(model) -> int:
    weight = model.weight
    return weight.numel() * weight.element_size()


def registered_backends() -> list[str]:
    from executorch.extension.pybindings import portable_lib

    return list(portable_lib._get_registered_backend_names())


def run_program(pte: Path, ptd: Path | None, example) -> list:
    from executorch.extension.pybindings import portable_lib

    if ptd is not None:
        module = portable_lib._load_for_executorch(str(pte), data_path=str(ptd))
    else:
        module = portable_lib._load_for_executorch(str(pte))
    outputs = module.forward(tuple(example))
    return [out.detach().cpu() if hasattr(out, "detach") else out for out in outputs]


def compare(label: str, outputs: list, expected, loaded_with: str = "its data file", name: str | None = None) -> CheckResult:
    import torch

    name = name or RUN.of(label)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    if len(outputs) != len(expected):
        return failed(name, f"returned {len(outputs)} outputs, eager returns {len(expected)}")
    diffs = [float((a.float() - e.float()).abs().max()) if a.shape == e.shape else float("inf") for a, e in zip(outputs, expected)]
    tolerance = f"rtol {RTOL:g}, atol {ATOL:g}"
    # The outputs themselves (the first OUTPUT_VALUES of each, flattened): `nox -s compare` sets two wheels' side by side.
    measured = {"max_abs_diff": max(diffs), "rtol": RTOL, "atol": ATOL,
                "outputs": [a.detach().float().flatten()[:OUTPUT_VALUES].tolist() for a in outputs]}
    try:
        for a, e in zip(outputs, expected):
            torch.testing.assert_close(a, e, rtol=RTOL, atol=ATOL)
    except AssertionError as exc:
        first = str(exc).strip().splitlines()[0]
        return failed(name, f"loaded with {loaded_with}, output differs from eager: max abs diff {max(diffs):.3g} ({tolerance}): {first}", **measured)
    return passed(name, f"loaded with {loaded_with}, matched eager, max abs diff {max(diffs):.3g} ({tolerance})", **measured)


def check_run(row: "ChildRow", label: str, pte: Path, ptd: Path, model, example, backends: list[str]) -> CheckResult:
    """Load ``pte`` with ``ptd`` (where it exists), run it and compare with eager."""
    name = RUN.of(label)
    data = ptd if ptd.exists() else None
    if row.delegate_id not in backends:
        try:
            run_program(pte, data, example)
            err = "yet it ran"
        except Exception as exc:
            err = f"loading raised {one_line(exc)}"
        return failed(name, f"Backend {row.delegate_id} is not registered in this wheel's runtime "
                            f"(registered: {', '.join(backends)}); {err}", registered_backends=backends)
    try:
        outputs = run_program(pte, data, example)
    except Exception as exc:
        return failed(name, f"loading or running raised {one_line(exc)}", registered_backends=backends)
    loaded_with = ptd.name if data is not None else "no data file (none was written)"
    return compare(label, outputs, model(*example).detach(), loaded_with)
