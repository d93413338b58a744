"""The CUDA delegate (``CudaBackend``, AOTInductor): everything a CUDA row asks of a wheel and a machine.

- Its programs carry ``CudaBackend`` delegates and load their weights (and the compiled
  shared object) from ``aoti_cuda_blob.ptd`` and the program: keys ``<method>_so_blob`` and
  ``<method>_weights_blob`` up to 1.4, ``<sha256>_so_blob`` and ``<sha256>_weights_blob`` on main,
  named in the delegate's processed bytes (``expected_keys``).
- Its checks of the wheel file and the environment, judged by the parent, are in
  ``smoke.backends.cuda_checks``; here, the object a row names and what runs in the child: the
  export through the delegate and the device check (a visible GPU that torch was built for).

The child imports this module inside the gate's environment, so it imports nothing beyond the
standard library at its top: torch and executorch are imported where used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smoke.backends.cuda_checks import (
    CUDA_BUILD,
    CUDA_LIBRARIES,
    CUDA_LIBRARIES_RESOLVE,
    CUDA_RUNTIME_DECLARED,
    DEVICE_CODE,
    LAYOUTS,
    cuda_train,
    runpath_problems,
    torch_problems,
)
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import CHILD, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel
    from smoke.rows import Row


def device_facts() -> dict[str, Any]:
    import torch

    facts: dict[str, Any] = {"cuda_available": torch.cuda.is_available(), "torch_cuda": torch.version.cuda}
    if facts["cuda_available"]:
        major, minor = torch.cuda.get_device_capability(0)
        facts.update(device_name=torch.cuda.get_device_name(0), sm=f"sm_{major}{minor}", arch_list=torch.cuda.get_arch_list())
    return facts


def check_device(row: Row, facts: dict[str, Any]) -> CheckResult:
    name = CUDA_DEVICE.name
    if facts["cuda_available"]:
        if facts["sm"] not in facts["arch_list"]:
            return failed(name, f"{facts['device_name']} is {facts['sm']}, torch's arch list {facts['arch_list']} lacks it", **facts)
        return passed(name, f"{facts['device_name']} ({facts['sm']}), in torch's arch list", **facts)
    why = f"no CUDA device visible (torch.cuda.is_available() is False; torch CUDA {facts['torch_cuda'] or 'none: a CPU build'})"
    if row.execution_required:
        return failed(name, f"{why}; the {row.name} row must execute", **facts)
    return skipped(name, f"{why}; export and execution need one", **facts)


def export_cuda(model, example, folder: Path) -> None:
    import torch
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
    from executorch.exir import to_edge_transform_and_lower

    # The method-name compile spec works on every release; 1.2 and 1.3 reject an
    # empty list ("Could not find method name in compile specs").
    partitioner = CudaPartitioner([CudaBackend.generate_method_name_compile_spec("forward")])
    program = to_edge_transform_and_lower(torch.export.export(model, example), partitioner=[partitioner]).to_executorch()
    (folder / "model.pte").write_bytes(program.buffer)
    program.write_tensor_data_to_file(str(folder))


def expected_keys(plan: str, compile_specs: dict[str, bytes], processed: bytes | memoryview) -> tuple[str, ...]:
    """The named data a CudaBackend delegate fetches when it loads, read as the runtime reads them
    (``resolve_blob_keys`` in main's ``backends/aoti/aoti_delegate_handle.h``): processed bytes
    ``"<so key>\\n<weights key>"`` name them (main keys each blob by its content's sha256,
    ``backends/aoti/aoti_backend.py``: ``<sha256>_so_blob``, ``<sha256>_weights_blob``); empty processed
    bytes, as 1.2.0 writes them, mean the method-name keys ``<method>_so_blob``, ``<method>_weights_blob``,
    the method from the compile spec. Non-empty bytes with no newline the runtime refuses (Error::Internal)."""
    if len(processed):
        from smoke.readers.tables import ArtifactError  # here: the child imports this module, and has no flatbuffers

        text = bytes(processed).decode("utf-8", errors="replace")
        so_key, newline, weights_key = text.partition("\n")
        if not newline:
            raise ArtifactError(f"CudaBackend's processed bytes ({len(processed)} B) hold no newline between its "
                                    f"two keys ({text[:80]!r}): the runtime refuses such a delegate")
        return (so_key, weights_key)
    method = compile_specs.get("method_name", b"").decode() or plan
    return (f"{method}_so_blob", f"{method}_weights_blob")


CUDA_DEVICE = Check("CUDA device", CHILD, 10)


@dataclass(frozen=True)
class Cuda:
    """The CUDA backend of one machine's row: its architecture lists per CUDA train, and the layouts."""

    archs: dict[str, tuple[str, ...]]
    layouts: tuple[tuple[str, tuple[str, ...]], ...] = LAYOUTS
    name: str = "cuda"
    delegate_id: str = "CudaBackend"
    data_file: str = "aoti_cuda_blob.ptd"
    weightless_writes_data: bool = True  # the blob holds the compiled code, weights or none
    checks: tuple[Check, ...] = (CUDA_BUILD, CUDA_LIBRARIES, CUDA_RUNTIME_DECLARED, DEVICE_CODE, CUDA_LIBRARIES_RESOLVE, CUDA_DEVICE)

    def layout(self, release: str) -> tuple[str, tuple[str, ...]] | None:
        """(first release of the layout, library paths) for a 'major.minor' release, or None before any."""
        def key(text: str) -> tuple[int, ...]:
            return tuple(int(part) for part in text.split("."))

        fitting = [layout for layout in self.layouts if key(layout[0]) <= key(release)]
        return max(fitting, key=lambda layout: key(layout[0])) if fitting else None

    def export(self, model, example, folder: Path) -> None:
        export_cuda(model, example, folder)

    @staticmethod
    def expected_keys(plan: str, compile_specs: dict[str, bytes], processed: bytes | memoryview) -> tuple[str, ...]:
        return expected_keys(plan, compile_specs, processed)

    def not_its_build(self, wheel: Wheel) -> str | None:
        return None if cuda_train(wheel) else f"a CPU build (version {wheel.version}, no +cuXXX label)"

    def runpath_problems(self, wheel: Wheel, row: Row, libraries: Libraries) -> tuple[list[str], str]:
        return runpath_problems(wheel, row, libraries)

    def torch_problems(self, wheel: Wheel, facts: dict[str, Any]) -> tuple[list[str], list[str]]:
        return torch_problems(wheel, facts)

    def device_facts(self) -> dict[str, Any]:
        return device_facts()

    def check_device(self, row: Row, facts: dict[str, Any]) -> CheckResult | None:
        return check_device(row, facts)
