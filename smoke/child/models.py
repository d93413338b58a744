"""The child's two models, and how a program is loaded and run (the parent compares the outputs with eager's).

Imported only inside the gate's environment (torch and executorch are imported where used).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from smoke import tensors
from smoke.child.probe import one_line
from smoke.stages import MODELS, RUN

if TYPE_CHECKING:
    from smoke.child.row import ChildRow

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


def check_run(row: "ChildRow", label: str, pte: Path, ptd: Path, example, backends: list[str]) -> dict[str, Any]:
    """Load ``pte`` with ``ptd`` (where it exists) and run it: what the parent is handed (``smoke.child.ask.hand_over``),
    the outputs or why there are none. The parent holds them to eager's answer, computed apart from the wheel's code
    (``smoke.checks.outputs``)."""
    name = RUN.of(label)
    data = ptd if ptd.exists() else None
    if row.delegate_id not in backends:
        try:
            run_program(pte, data, example)
            err = "yet it ran"
        except Exception as exc:
            err = f"loading raised {one_line(exc)}"
        return {"name": name, "error": f"Backend {row.delegate_id} is not registered in this wheel's runtime "
                                       f"(registered: {', '.join(backends)}); {err}", "registered_backends": backends}
    try:
        outputs = run_program(pte, data, example)
    except Exception as exc:
        return {"name": name, "error": f"loading or running raised {one_line(exc)}", "registered_backends": backends}
    return {"name": name, "outputs": tensors.encode_all(outputs)}

