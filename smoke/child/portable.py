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
from smoke.stages import PORTABLE, QUANTIZED

PHASE = "portable kernels"
QUANTIZED_PHASE = "quantized kernels"
# The quantized model's per-tensor parameters. The scale is a power of two (2**-4), so x / scale is exact in binary
# floating point and eager's quantize/dequantize and the kernels' round the same values the same way (half to even):
# their answers agree to the float tolerance of the other runs (smoke.tensors), which the Linear after them sets.
QUANT_SCALE, QUANT_ZERO, QUANT_MIN, QUANT_MAX = 0.0625, 3, -128, 127


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
    model, example = portable_model()
    return _export_and_run(PORTABLE.name, model, example, folder)


def _export_and_run(name: str, model, example, folder: Path) -> dict[str, Any]:
    """A model exported with no partitioner into ``folder``, loaded and run: its outputs, or why there are none."""
    try:
        pte = export_portable(model, example, folder)
    except Exception as exc:  # noqa: BLE001
        return {"name": name, "error": f"the export with no delegate raised {one_line(exc)}"}
    try:
        outputs = run_program(pte, None, example)
    except Exception as exc:  # noqa: BLE001 - a runtime that cannot run its own kernels is the finding
        return {"name": name, "error": f"loading or running raised {one_line(exc)}"}
    return {"name": name, "outputs": tensors.encode_all(outputs)}


def quantized_model():
    """An int8 quantize and dequantize of the input (``quantized_decomposed``, torch's own definition of the ops the
    PT2E flow inserts), then a Linear: a program whose first two operators only the quantized kernels run, seeded."""
    import torch
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines torch.ops.quantized_decomposed)

    class Quantized(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(8, 4)

        def forward(self, x):
            ops = torch.ops.quantized_decomposed
            q = ops.quantize_per_tensor.default(x, QUANT_SCALE, QUANT_ZERO, QUANT_MIN, QUANT_MAX, torch.int8)
            return self.linear(ops.dequantize_per_tensor.default(q, QUANT_SCALE, QUANT_ZERO, QUANT_MIN, QUANT_MAX, torch.int8))

    torch.manual_seed(SEED + 1)
    model = Quantized().eval()
    return model, (torch.randn(3, 8) * 4,)  # some values past the int8 range's ends: the clamp is exercised too


def ships_quantized_library(folders: list[str]) -> bool:
    """Whether the package's folders hold the library its ``__init__`` loads (``*quantized_ops_aot_lib.*``)."""
    return any(next(Path(folder).glob("*quantized_ops_aot_lib*"), None) is not None for folder in folders)


def check_quantized(folder: Path) -> dict[str, Any]:
    """The quantized kernels: the program exported with no partitioner once ``executorch.kernels.quantized`` has
    registered their out variants with torch (upstream's way: its ``__init__`` loads ``quantized_ops_aot_lib``, which
    links the runtime's quantized kernels library), loaded and run. Handed over as ``check_portable``'s."""
    import importlib.util

    name = QUANTIZED.name
    spec = importlib.util.find_spec("executorch.kernels.quantized")
    if not ships_quantized_library(list(spec.submodule_search_locations or ()) if spec is not None else []):
        # A build made without them (1.2.0's CUDA build here: EXECUTORCH_BUILD_KERNELS_QUANTIZED_AOT=OFF) ships the
        # package's Python files alone; the parent FAILs this skip where the wheel ships the library.
        return {"name": name, "skipped": "not run: the wheel ships no quantized kernels (no quantized_ops_aot_lib in "
                                         "executorch/kernels/quantized)"}
    try:
        import executorch.kernels.quantized  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return {"name": name, "error": f"import executorch.kernels.quantized raised {one_line(exc)}"}
    try:
        model, example = quantized_model()
    except Exception as exc:  # noqa: BLE001
        return {"name": name, "error": f"the quantized model cannot be built with this torch: {one_line(exc)}"}
    return _export_and_run(name, model, example, folder)
