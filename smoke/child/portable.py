"""The portable kernels: a program with no delegate at all, exported, loaded and compared with eager.

The delegate's checks say nothing of the kernels every program falls back to (an operator a partitioner declines
runs on them), so each row also exports a small seeded model with no partitioner, has the parent check that no plan
carries a delegate (``smoke.child.ask``), then loads, runs and compares it. It runs on the CPU on every row.
Imported only inside the gate's environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from smoke.child.models import SEED, compare, run_program
from smoke.child.probe import one_line
from smoke.results import CheckResult, failed
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


# What the parent's program reader says of a program (smoke.engine.row answers "program" so):
# {"bytes": N, "plans": [{"name", "delegate_ids", "operators"}]}, or {"error": why it cannot be read}.
Reader = Callable[[Path], dict[str, Any]]


def judge(pte: Path, model, example, read: Reader) -> CheckResult:
    """The program carries no delegate and leaves operators to the kernels; loaded and run, it gives eager's answer."""
    name = PORTABLE.name
    program = read(pte)
    if "error" in program:
        return failed(name, f"cannot read the program: {program['error']}")
    plans = program["plans"]
    delegated = {plan["name"]: list(plan["delegate_ids"]) for plan in plans if plan["delegate_ids"]}
    operators = sorted({op for plan in plans for op in plan["operators"]})
    measured = {"pte_bytes": program["bytes"], "operators": operators}
    if not plans or delegated or not operators:
        why = (f"plans {delegated} carry delegates" if delegated else
               "no execution plan" if not plans else "no operator is left to the kernels")
        return failed(name, f"{pte.name} does not prove the kernels: {why}", delegates=delegated, **measured)
    try:
        outputs = run_program(pte, None, example)
    except Exception as exc:  # noqa: BLE001 - a runtime that cannot run its own kernels is the finding
        return failed(name, f"{pte.name} ({len(operators)} operators, no delegate): loading or running raised {one_line(exc)}",
                      **measured)
    result = compare(PORTABLE.name, outputs, model(*example).detach(),
                     f"no delegate, {len(operators)} operators on the kernels ({', '.join(operators)})", name=name)
    return dataclasses.replace(result, measured={**result.measured, **measured})


def check_portable(folder: Path, read: Reader) -> CheckResult:
    """Export, then judge (an export that raises is this check's failure); ``read`` reads the program."""
    model, example = portable_model()
    try:
        pte = export_portable(model, example, folder)
    except Exception as exc:  # noqa: BLE001
        return failed(PORTABLE.name, f"the export with no delegate raised {one_line(exc)}")
    return judge(pte, model, example, read)
