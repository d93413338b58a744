"""The child's two models, and how a program is loaded and run (the parent compares the outputs with eager's).

Imported only inside the gate's environment (torch and executorch are imported where used).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

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


def check_run(row: "ChildRow", label: str, said: dict[str, Any], backends: list[str]) -> dict[str, Any]:
    """What the program of ``label`` did when the runtime's process loaded it with its data file (where one was
    written) and ran it (``said``: ``smoke.child.negative.run_stages``'s end, or how its process ended; issue 58: never
    in this process, where the exporter runs): what the parent is handed (``smoke.child.ask.hand_over``), the outputs
    or why there are none. The parent holds them to eager's answer, computed apart from the wheel's code
    (``smoke.checks.outputs``)."""
    name = RUN.of(label)
    if "outputs" in said and row.delegate_id in backends:
        return {"name": name, "outputs": said["outputs"]}
    if "outputs" in said:
        happened = "yet it ran"
    elif "error" in said:
        happened = f"loading or running raised {said['error']}"
    elif "signal" in said:
        happened = f"the runtime's process loading and running it ended with {said['signal']} at {said.get('stage', 'start')}"
    else:
        happened = str(said.get("failed") or "the runtime's process said nothing")
    if row.delegate_id not in backends:
        return {"name": name, "error": f"Backend {row.delegate_id} is not registered in this wheel's runtime "
                                       f"(registered: {', '.join(backends)}); {happened}",
                "registered_backends": backends}
    return {"name": name, "error": happened, "registered_backends": backends}

