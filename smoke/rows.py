"""The platform rows of the gate, one frozen record each.

A row names the machine a wheel is built for, the delegate its export goes
through, the data file that delegate writes, and whether a missing device is a
failure (execution required) or a printed skip.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
    # CUDA rows: the delegate's shared libraries as each release's build ships them (the first
    # release of each layout, and the paths in the wheel), and the GPU architectures the row claims,
    # per CUDA train.
    cuda_layouts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    cuda_archs: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def archs_for(self, train: str) -> tuple[str, ...] | None:
        """The architectures claimed for a CUDA train ('cu130'), or None if the row has no list for it."""
        return self.cuda_archs.get(train)

    def cuda_layout(self, release: str) -> tuple[str, tuple[str, ...]] | None:
        """(first release of the layout, library paths) for a 'major.minor' release, or None before any."""
        def key(text: str) -> tuple[int, ...]:
            return tuple(int(part) for part in text.split("."))

        fitting = [layout for layout in self.cuda_layouts if key(layout[0]) <= key(release)]
        return max(fitting, key=lambda layout: key(layout[0])) if fitting else None


# The CUDA delegate's shared libraries, as each release's build recipe ships them (setup.py's
# list of libraries to copy, read at v1.1.0, v1.2.0, v1.3.1, v1.4.1 and main), keyed by the first
# release of the layout. 1.0 and 1.1 ship no CUDA runtime library. 1.2 and 1.3: the AOTI shim
# layer alone (the backend is linked into the Python extension); checked on a real CUDA build of
# 1.2.0 (docs/runs/2026-12-03-h200-*). 1.4: the CUDA extension library beside it. 1.5 and main:
# the shared runtime (libexecutorch.so, in PyPI's 1.5.1 wheel too) and the delegate in executorch/lib.
_SHIMS = "executorch/backends/cuda/libaoti_cuda_shims.so"
CUDA_LAYOUTS = (
    ("1.2", (_SHIMS,)),
    ("1.4", (_SHIMS, "executorch/backends/cuda/libextension_cuda.so")),
    ("1.5", ("executorch/lib/libexecutorch.so", "executorch/lib/libexecutorch_backend_cuda.so",
             "executorch/lib/libexecutorch_extension_cuda.so", _SHIMS)),
)


def _sm(dotted: str) -> tuple[str, ...]:
    return tuple(f"sm_{value.replace('.', '')}" for value in dotted.split())


# The architectures each CUDA train claims, per machine: upstream's .ci/scripts/wheel/cuda_arch_list.sh
# (the lists its wheel build compiles for). A train not listed here is a FAIL of the device-code check.
_CUDA_ARCHS = {
    "x86_64": {"cu126": _sm("8.0 8.6 8.9 9.0"), "cu130": _sm("8.0 8.6 8.9 9.0 10.0 12.0"),
               "cu132": _sm("8.0 8.6 8.9 9.0 10.0 12.0")},
    "aarch64": {"cu126": _sm("8.0 8.7 9.0"), "cu130": _sm("8.0 9.0 10.0 11.0 12.0"),
                "cu132": _sm("8.0 9.0 10.0 11.0 12.0")},
}


def _cuda(machine: str, execution_required: bool, description: str) -> Row:
    return Row(f"cuda_{machine}", machine, "cuda", "CudaBackend", "aoti_cuda_blob.ptd", needs_cuda=True,
               execution_required=execution_required, weightless_writes_data=True, description=description,
               cuda_layouts=CUDA_LAYOUTS, cuda_archs=_CUDA_ARCHS[machine])


def _cpu(machine: str) -> Row:
    # XNNPACK writes no data file for a model without weights (executorch 1.2.0 and 1.5.1).
    return Row(f"cpu_{machine}", machine, "xnnpack", "XnnpackBackend", "model.ptd", needs_cuda=False,
               execution_required=True, weightless_writes_data=False,
               description=f"CPU wheel, {machine}: wheel and environment checks, then export through XNNPACK with weights in model.ptd, load and run on the CPU")


ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        _cuda("x86_64", True, "CUDA wheel, x86_64: wheel and environment checks, then export, load with aoti_cuda_blob.ptd and run on the GPU (a GPU is required)"),
        _cuda("aarch64", False, "CUDA wheel, aarch64: the same checks; export and execution skip, with the reason, where no GPU is visible"),
        _cpu("x86_64"),
        _cpu("aarch64"),
    )
}


# What a release needs, in one place: the rows whose reports the matrix summary requires,
# and the checks a row that must execute may not skip (a skip there is work that did not happen).
RELEASE_ROWS: dict[str, tuple[str, ...]] = {
    "cuda": ("cuda_x86_64", "cuda_aarch64"),
    "cpu": ("cpu_x86_64", "cpu_aarch64"),
    "all": ("cuda_x86_64", "cuda_aarch64", "cpu_x86_64", "cpu_aarch64"),
}
MUST_EXECUTE = ("run with data file (weightless)", "run with data file (weighted)", "negative control (weighted, no data file)")
