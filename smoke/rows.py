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


ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        Row(
            name="cuda_x86_64",
            machine="x86_64",
            backend="cuda",
            delegate_id="CudaBackend",
            data_file="aoti_cuda_blob.ptd",
            needs_cuda=True,
            execution_required=True,
            weightless_writes_data=True,
            description="CUDA wheel, x86_64: export, load with aoti_cuda_blob.ptd and run on the GPU (a GPU is required)",
        ),
        Row(
            name="cuda_aarch64",
            machine="aarch64",
            backend="cuda",
            delegate_id="CudaBackend",
            data_file="aoti_cuda_blob.ptd",
            needs_cuda=True,
            execution_required=False,
            weightless_writes_data=True,
            description="CUDA wheel, aarch64: the same checks; export and execution skip, with the reason, where no GPU is visible",
        ),
        Row(
            name="cpu_x86_64",
            machine="x86_64",
            backend="xnnpack",
            delegate_id="XnnpackBackend",
            data_file="model.ptd",
            needs_cuda=False,
            execution_required=True,
            weightless_writes_data=False,
            description="CPU wheel, x86_64: export through XNNPACK with weights in model.ptd, load and run on the CPU",
        ),
        Row(
            name="cpu_aarch64",
            machine="aarch64",
            backend="xnnpack",
            delegate_id="XnnpackBackend",
            data_file="model.ptd",
            needs_cuda=False,
            execution_required=True,
            weightless_writes_data=False,
            description="CPU wheel, aarch64: export through XNNPACK with weights in model.ptd, load and run on the CPU",
        ),
    )
}


def rows_for_machine(machine: str, *, needs_cuda: bool) -> list[Row]:
    return [row for row in ROWS.values() if row.machine == machine and row.needs_cuda == needs_cuda]
