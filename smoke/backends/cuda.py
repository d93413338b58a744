"""The CUDA delegate (``CudaBackend``, AOTInductor): everything a CUDA row asks of a wheel and a machine.

Its programs load the compiled shared object and the weights from ``aoti_cuda_blob.ptd`` under keys named in the
delegate's processed bytes (``expected_keys``). Its file and environment checks are in ``smoke.backends.cuda_checks``;
what runs in the child is ``smoke.child.delegates``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
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
from smoke.stages import CUDA_DEVICE, Check

if TYPE_CHECKING:
    from smoke.backends.row import BackendEnvironmentCheck, BackendFileCheck, RowOf
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel


def expected_keys(plan: str, compile_specs: dict[str, bytes], processed: bytes | memoryview) -> tuple[str, ...]:
    """The named data a CudaBackend delegate fetches when it loads, read as the runtime reads them (``resolve_blob_keys``).

    Processed bytes ``"<so key>\\n<weights key>"`` name them (main: ``<sha256>_so_blob``, ``<sha256>_weights_blob``);
    empty ones (as 1.2.0 writes) mean ``<method>_so_blob`` and ``<method>_weights_blob``, the method from the compile
    spec, else the plan. Non-empty bytes with no newline, which the runtime refuses, raise ``ArtifactError``."""
    if len(processed):
        # here, not at the top: the noxfile loads the rows in nox's own interpreter, which `nox -s tests` gives
        # nothing beyond nox (no flatbuffers, the program reader's runtime)
        from smoke.readers.tables import ArtifactError

        text = bytes(processed).decode("utf-8", errors="replace")
        so_key, newline, weights_key = text.partition("\n")
        if not newline:
            raise ArtifactError(f"CudaBackend's processed bytes ({len(processed)} B) hold no newline between its "
                                    f"two keys ({text[:80]!r}): the runtime refuses such a delegate")
        return (so_key, weights_key)
    method = compile_specs.get("method_name", b"").decode() or plan
    return (f"{method}_so_blob", f"{method}_weights_blob")


@dataclass(frozen=True)
class Cuda:
    """The CUDA backend of one machine's row: its architecture lists per CUDA train, and the layouts."""

    archs: dict[str, tuple[str, ...]]
    layouts: tuple[tuple[str, tuple[str, ...]], ...] = LAYOUTS
    name: str = "cuda"
    delegate_id: str = "CudaBackend"
    data_file: str = "aoti_cuda_blob.ptd"
    weightless_writes_data: bool = True  # the blob holds the compiled code, weights or none
    file_checks: tuple[BackendFileCheck, ...] = (CUDA_BUILD, CUDA_LIBRARIES, CUDA_RUNTIME_DECLARED, DEVICE_CODE)
    environment_checks: tuple[BackendEnvironmentCheck, ...] = (CUDA_LIBRARIES_RESOLVE,)

    @property
    def checks(self) -> tuple[Check[Any], ...]:
        """Its own checks, at their places in each stage: the file and environment checks, and the device (the child's)."""
        return (*self.file_checks, *self.environment_checks, CUDA_DEVICE)

    def layout(self, release: str) -> tuple[str, tuple[str, ...]] | None:
        """(first release of the layout, library paths) for a 'major.minor' release, or None before any."""
        def key(text: str) -> tuple[int, ...]:
            return tuple(int(part) for part in text.split("."))

        fitting = [layout for layout in self.layouts if key(layout[0]) <= key(release)]
        return max(fitting, key=lambda layout: key(layout[0])) if fitting else None

    @staticmethod
    def expected_keys(plan: str, compile_specs: dict[str, bytes], processed: bytes | memoryview) -> tuple[str, ...]:
        return expected_keys(plan, compile_specs, processed)

    def not_its_build(self, wheel: Wheel) -> str | None:
        return None if cuda_train(wheel) else f"a CPU build (version {wheel.version}, no +cuXXX label)"

    def runpath_problems(self, wheel: Wheel, row: RowOf, libraries: Libraries) -> tuple[list[str], str]:
        return runpath_problems(wheel, row, libraries)

    def torch_problems(self, wheel: Wheel, facts: dict[str, Any]) -> tuple[list[str], list[str]]:
        return torch_problems(wheel, facts)

