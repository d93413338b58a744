"""The platform rows of the gate, one frozen record each.

A row names the machine a wheel is built for, the delegate its export goes
through, the data file that delegate writes, and whether a missing device is a
failure (execution required) or a printed skip.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    name: str
    machine: str  # the wheel's platform-tag architecture: x86_64, aarch64
    backend: str  # key into smoke.child's exporters
    delegate_id: str  # BackendDelegate.id the program must carry
    data_file: str  # the data file's name, as the runners pass it
    needs_cuda: bool  # the wheel must be a CUDA build and the export needs a GPU
    execution_required: bool  # a missing device is a FAIL, not a SKIP
    weightless_writes_data: bool  # does the delegate write a data file for a model with no weights?
    description: str


def _cuda(machine: str, execution_required: bool, description: str) -> Row:
    return Row(f"cuda_{machine}", machine, "cuda", "CudaBackend", "aoti_cuda_blob.ptd", needs_cuda=True,
               execution_required=execution_required, weightless_writes_data=True, description=description)


def _cpu(machine: str) -> Row:
    # XNNPACK writes no data file for a model without weights (executorch 1.2.0 and 1.5.1).
    return Row(f"cpu_{machine}", machine, "xnnpack", "XnnpackBackend", "model.ptd", needs_cuda=False,
               execution_required=True, weightless_writes_data=False,
               description=f"CPU wheel, {machine}: export through XNNPACK with weights in model.ptd, load and run on the CPU")


ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        _cuda("x86_64", True, "CUDA wheel, x86_64: export, load with aoti_cuda_blob.ptd and run on the GPU (a GPU is required)"),
        _cuda("aarch64", False, "CUDA wheel, aarch64: the same checks; export and execution skip, with the reason, where no GPU is visible"),
        _cpu("x86_64"),
        _cpu("aarch64"),
    )
}
