"""The platform rows of the gate, one frozen record each.

A row names the machine a wheel is built for, its backend (``smoke.backends``: the delegate
its export goes through, the data file it writes, its own checks), and whether a missing
device is a failure (execution required) or a printed skip.
"""

from __future__ import annotations

from dataclasses import dataclass

from smoke.backends import CUDA_ARCHS, Backend, Cuda, Xnnpack


@dataclass(frozen=True)
class Row:
    name: str
    machine: str  # the wheel's platform-tag architecture: x86_64, aarch64
    backend: Backend
    execution_required: bool  # a missing device is a FAIL, not a SKIP
    description: str


ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        Row("cuda_x86_64", "x86_64", Cuda(archs=CUDA_ARCHS["x86_64"]), True,
            "CUDA wheel, x86_64: wheel and environment checks, then export, load with aoti_cuda_blob.ptd and run on the GPU (a GPU is required)"),
        Row("cuda_aarch64", "aarch64", Cuda(archs=CUDA_ARCHS["aarch64"]), False,
            "CUDA wheel, aarch64: the same checks; export and execution skip, with the reason, where no GPU is visible"),
        Row("cpu_x86_64", "x86_64", Xnnpack(), True,
            "CPU wheel, x86_64: wheel and environment checks, then export through XNNPACK with weights in model.ptd, load and run on the CPU"),
        Row("cpu_aarch64", "aarch64", Xnnpack(), True,
            "CPU wheel, aarch64: wheel and environment checks, then export through XNNPACK with weights in model.ptd, load and run on the CPU"),
    )
}


# What a release needs: the rows whose reports the matrix summary requires (the checks a row
# that must execute may not skip are smoke.pipeline.MUST_EXECUTE).
RELEASE_ROWS: dict[str, tuple[str, ...]] = {
    "cuda": ("cuda_x86_64", "cuda_aarch64"),
    "cpu": ("cpu_x86_64", "cpu_aarch64"),
    "all": ("cuda_x86_64", "cuda_aarch64", "cpu_x86_64", "cpu_aarch64"),
}
