"""A PT2E-quantized model lowered to XNNPACK: the quantizer, the delegate's int8 kernels and the data file (issue 47).

Upstream's own Linux wheel test runs a model through XNNPACK quantized (``.ci/scripts/wheel/test_linux.py``:
``Backend.XnnpackQuantizationDelegation``); the rows' other models reach XNNPACK in float only. Here a small seeded
model is quantized with the release's own quantizer, the flow upstream's example follows in every release checked
(``examples/xnnpack/quantization/utils.py`` at v1.0.0, v1.2.0, v1.4.1 and main: ``XNNPACKQuantizer`` and
``get_symmetric_quantization_config`` from ``executorch.backends.xnnpack.quantizer.xnnpack_quantizer``,
``prepare_pt2e``/``convert_pt2e`` from ``torchao.quantization.pt2e.quantize_pt2e``, static per-tensor), its constants
tagged for a data file (``model.ptd``) as the XNNPACK rows' weighted export does, lowered with ``XnnpackPartitioner``,
written, loaded with its data file where the release wrote one, and run.

The child does it in a process of its own beside its exports: a fork made after its first export (``smoke.child.run.
fork_warm``), or, on a CUDA row, whose exports initialise CUDA's driver, a fresh interpreter started after its imports
(``python -m smoke.child.xnnpack_quantized WORKDIR``). Its outcome is data
(``xnnpack-quantized.json``); the child hands it to the parent, which reads the program (every operator delegated to
XnnpackBackend) and holds the outputs to the quantized model's eager answer, computed apart from the wheel's code with
torchao's copy of the same quantizer (``smoke.child.reference``), within one step of the output's int8 grid.
Imports nothing beyond the standard library at its top: torch, torchao and executorch are imported where used.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from smoke import proc, tensors
from smoke.child import delegates, forks
from smoke.child.models import SEED, run_program
from smoke.child.probe import one_line
from smoke.stages import XNNPACK_QUANTIZED

LABEL = "xnnpack-quantized"  # its folder under the work folder, and its answer's name in the reference's
VERDICT = "xnnpack-quantized.json"
DELEGATE = "XnnpackBackend"
TIMEOUT_S = 600
# The release's own quantizer and the PT2E flow (the import paths upstream's example uses, cited above).
QUANTIZER_MODULE = "executorch.backends.xnnpack.quantizer.xnnpack_quantizer"
PT2E_MODULE = "torchao.quantization.pt2e.quantize_pt2e"
# The same quantizer apart from the wheel: torchao's testing copy (torchao/testing/pt2e/_xnnpack_quantizer.py, whose
# get_symmetric_quantization_config is executorch's line for line in torchao 0.18 and executorch 1.5.1).
REFERENCE_QUANTIZER_MODULE = "torchao.testing.pt2e._xnnpack_quantizer"


def model():
    """Linear, ReLU, Linear: two int8 matrix products with a requantization between them, seeded."""
    import torch

    class Quantizable(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.second(torch.relu(self.first(x)))

    torch.manual_seed(SEED + 2)
    built = Quantizable().eval()
    return built, (torch.randn(3, 8),)


def quantize(built, example, quantizer_module: str):
    """``built`` through PT2E with the XNNPACK quantizer of ``quantizer_module`` (static, per tensor, symmetric: upstream's
    example's default), calibrated on ``example``: the converted module.

    The release's quantizer is configured for ``aten.linear`` (``set_operator_type``, in every release checked): with
    a global configuration it also traces its conv-batch-norm patterns, a dozen exports and seconds of a 2-core
    machine, for a model that has no convolution. torchao's copy traces those only for QAT, so it takes the global
    configuration. On this model (Linear, ReLU, Linear) both annotate the same two patterns, linear_relu and linear."""
    import importlib
    import warnings

    import torch

    quantizers = importlib.import_module(quantizer_module)
    pt2e = importlib.import_module(PT2E_MODULE)
    with warnings.catch_warnings():  # torchao's copy says it is deprecated (in favour of the one the wheel ships)
        warnings.simplefilter("ignore", UserWarning)
        quantizer = quantizers.XNNPACKQuantizer()
    config = quantizers.get_symmetric_quantization_config(is_per_channel=False)
    if quantizer_module == QUANTIZER_MODULE:
        quantizer.set_operator_type(torch.ops.aten.linear.default, config)
    else:
        quantizer.set_global(config)
    prepared = pt2e.prepare_pt2e(torch.export.export(built, example).module(), quantizer)
    prepared(*example)  # calibration
    return pt2e.convert_pt2e(prepared)


def output_step(converted) -> float | None:
    """The step of the output's int8 grid: the scale of the dequantize the converted module's output comes from (None
    where it does not end in one)."""
    output = next((node for node in converted.graph.nodes if node.op == "output"), None)
    if output is None:
        return None
    first = output.args[0][0] if isinstance(output.args[0], (list, tuple)) else output.args[0]
    if getattr(first, "op", "") != "call_function" or "dequantize_per_tensor" not in str(first.target):
        return None
    return float(first.args[1])


def answer() -> tuple[list, list, float]:
    """Eager's quantized answer apart from the wheel (torchao's copy of the quantizer): the outputs, the inputs, the
    output's step. Raises where this environment cannot compute it."""
    built, example = model()
    converted = quantize(built, example, REFERENCE_QUANTIZER_MODULE)
    step = output_step(converted)
    if step is None:
        raise ValueError("the converted model's output does not come from a dequantize: no step to hold the program to")
    import torch

    with torch.no_grad():
        found = converted(*example)
    return list(found) if isinstance(found, (list, tuple)) else [found], list(example), step


def export(folder: Path) -> tuple[Path, Path | None, tuple]:
    """The model quantized with the release's quantizer, its constants tagged for ``model.ptd``, lowered to XNNPACK and
    written into ``folder``: the program, its data file (None where the release wrote none) and the inputs."""
    built, example = model()
    folder.mkdir(parents=True, exist_ok=True)
    delegates.lower_xnnpack(quantize(built, example, QUANTIZER_MODULE), example, folder)
    ptd = folder / "model.ptd"
    return folder / "model.pte", (ptd if ptd.exists() else None), example


def work(folder: Path, backends: list[str]) -> dict[str, Any]:
    """Quantize, lower, write, load and run: what the child hands the parent (its outputs, or why there are none)."""
    name = XNNPACK_QUANTIZED.name
    if DELEGATE not in backends:
        return {"name": name, "skipped": f"not run: the runtime registers no {DELEGATE} (registered: "
                                         f"{', '.join(backends) or 'none'}), so no program can be lowered to it"}
    for module in (QUANTIZER_MODULE, PT2E_MODULE):
        try:
            __import__(module)
        except Exception as exc:  # noqa: BLE001 - the release's quantizer cannot be reached: the finding
            return {"name": name, "error": f"the release's XNNPACK quantizer cannot be imported: import {module} "
                                           f"raised {one_line(exc)}"}
    try:
        pte, ptd, example = export(folder)
    except Exception as exc:  # noqa: BLE001
        return {"name": name, "error": f"quantizing and lowering to XNNPACK raised {one_line(exc)}"}
    try:
        outputs = run_program(pte, ptd, example)
    except Exception as exc:  # noqa: BLE001 - a runtime that cannot run the delegate's int8 kernels is the finding
        return {"name": name, "error": f"loading or running raised {one_line(exc)}"}
    return {"name": name, "outputs": tensors.encode_all(outputs)}


def main(workdir: Path) -> int:
    """The work (in a process of its own, ``alone``, or in the child with ``--no-overlap``): its outcome into
    ``workdir/VERDICT``."""
    from smoke.child.models import registered_backends

    try:
        backends = registered_backends()
    except Exception as exc:  # noqa: BLE001
        outcome = {"name": XNNPACK_QUANTIZED.name, "error": f"the runtime's registered backends cannot be read: {one_line(exc)}"}
    else:
        outcome = work(workdir / LABEL, backends)
    (workdir / VERDICT).write_text(json.dumps(outcome))
    return 0


def alone(workdir: Path) -> int:
    """``main`` in a process of its own: on one thread, one core's work beside the child's, and no OpenMP team of the
    child's that a fork would inherit half of; niced as the gate's other work beside the child (``proc.BACKGROUND_NICE``)."""
    import torch

    torch.set_num_threads(1)
    proc.background_priority()
    return main(workdir)


def fork_work(workdir: Path) -> forks.Forked:
    """A fork of the child, made after its first export: it starts now, beside the other exports and the runs."""
    return forks.fork(lambda: alone(workdir), workdir / "xnnpack-quantized.log")


def start_process(workdir: Path) -> forks.Started:
    """A fresh interpreter doing the same, where a fork could not be made (the imports initialised CUDA's driver)."""
    log = workdir / "xnnpack-quantized.log"
    with open(log, "wb") as out:
        started = proc.start([sys.executable, "-m", "smoke.child.xnnpack_quantized", str(workdir)], stdin=subprocess.DEVNULL,
                             stdout=out, stderr=subprocess.STDOUT)
    return forks.Started(started, log)


def collect(started: forks.Forked | forks.Started | None, workdir: Path) -> dict[str, Any]:
    """The outcome to hand over: the process's (waited for), or, where none was started (``--no-overlap``), the work
    done now in this process (``main``)."""
    name = XNNPACK_QUANTIZED.name
    if started is None:
        main(workdir)
    else:
        try:
            started.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.end(started)
            return {"name": name, "error": f"quantizing, lowering and running did not end within {TIMEOUT_S} s"}
    try:
        outcome = json.loads((workdir / VERDICT).read_text())
    except (OSError, ValueError):
        code = started.returncode if started is not None else "in the child"
        return {"name": name, "error": f"the process quantizing to XNNPACK ended ({code}) without its outcome: "
                                       f"{proc.file_tail(workdir / 'xnnpack-quantized.log')}"}
    return outcome if isinstance(outcome, dict) else {"name": name, "error": "its outcome is not an object"}


if __name__ == "__main__":
    sys.exit(alone(Path(sys.argv[1])))
