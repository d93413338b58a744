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
from smoke.stages import CUDA_DEVICE, Check, MissingData

# executorch#22311 ("Report NotFound when a CUDA delegate's weights blob is missing", merged 2026-08-29): before it, a
# weighted program loaded without its blob loaded (backends/cuda/runtime/cuda_backend.cpp, load_constants_legacy: an
# Info log "weights_blob '%s' not found or update fn is null", then Error::Ok, at v1.1.0 to v1.4.1 and main 2026-08-22)
# and its first execute died in a generated kernel (illegal memory access); after it, the load fails with the data
# map's status: NotFound for a missing blob, the damaged file's own error for a corrupt one
# (backends/cuda/tests/test_missing_weights_blob.py: "Failed to load method forward, error: 0x:?20").
FIX_22311 = "executorch#22311"
FIX_22311_RELEASE = (1, 6)  # the first release known to carry it (1.5.x's branch cut was 2026-09-03: not verified there)
FIX_22311_NIGHTLY = 20260830  # a nightly of this date or later (X.Y.Z.devYYYYMMDD) was built after its merge


def has_fix_22311(version: Any) -> bool:
    """Whether a wheel of this version (packaging's Version) carries executorch#22311: a release from 1.6 on, or a
    nightly built after its merge. A local build (1.5.0a0+git...) or 1.5.x is not known to: its crash is a WARN."""
    if version.dev is not None and version.dev >= 19_000_000:  # a dated nightly
        return version.dev >= FIX_22311_NIGHTLY
    return version.release[:2] >= FIX_22311_RELEASE and version.dev is None and version.pre is None

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

    @staticmethod
    def missing_data(version: Any) -> MissingData:
        """A release with executorch#22311 fails the load with NotFound, and a crash is its defect; an older one
        crashed at the first execute, a bug upstream fixed: a WARN naming the fix."""
        if has_fix_22311(version):
            return MissingData("NotFound", "fail", f"{FIX_22311}: this release fails the load of a program whose "
                                                   f"weights blob is missing with NotFound")
        return MissingData(None, "warn", f"{FIX_22311} (merged 2026-08-29, first release 1.6) made a missing or damaged "
                                         f"blob fail the load with an error; executorch {version} is not known to carry it")

