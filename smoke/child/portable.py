"""The portable kernels: a program with no delegate at all, exported, loaded and run.

The delegate's checks say nothing of the kernels every program falls back to (an operator a partitioner declines
runs on them), so each row also exports a small seeded model with no partitioner, loads and runs it; the parent
checks that no plan carries a delegate and compares the outputs with eager's. It runs on the CPU on every row.
Imported only inside the gate's environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smoke import tensors
from smoke.child.models import SEED, run_program
from smoke.child.probe import one_line
from smoke.stages import PORTABLE

PHASE = "portable kernels"


def portable_model():
    """Linear, ReLU, Linear, then a sigmoid and an add: several kernels (addmm, relu, sigmoid, add), seeded."""
    import torch

    class Kernels(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

        def forward(self, x):
            hidden = torch.relu(self.first(x))
            return torch.sigmoid(self.second(hidden)) + x[:, :4]

    torch.manual_seed(SEED)
    model = Kernels().eval()
    return model, (torch.randn(3, 8),)


def export_portable(model, example, folder: Path) -> Path:
    """No partitioner: every operator is left to the kernels; the weights stay in the program."""
    import torch
    from executorch.exir import to_edge

    folder.mkdir(parents=True, exist_ok=True)
    program = to_edge(torch.export.export(model, example)).to_executorch()
    pte = folder / "model.pte"
    pte.write_bytes(program.buffer)
    return pte


def check_portable(folder: Path) -> dict[str, Any]:
    """Export, load and run: what the parent is handed (``smoke.child.ask.hand_over``), the outputs or why there are
    none. The parent reads the program itself (no plan may carry a delegate) and holds the outputs to eager's answer,
    computed apart from the wheel's code (``smoke.checks.outputs``)."""
    name = PORTABLE.name
    model, example = portable_model()
    try:
        pte = export_portable(model, example, folder)
    except Exception as exc:  # noqa: BLE001
        return {"name": name, "error": f"the export with no delegate raised {one_line(exc)}"}
    try:
        outputs = run_program(pte, None, example)
    except Exception as exc:  # noqa: BLE001 - a runtime that cannot run its own kernels is the finding
        return {"name": name, "error": f"loading or running raised {one_line(exc)}"}
    return {"name": name, "outputs": tensors.encode_all(outputs)}
