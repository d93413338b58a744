"""The XNNPACK delegate (``XnnpackBackend``): the CPU rows' backend.

Its constants are tagged for an external data file named after the tag (``model`` -> ``model.ptd``); a delegate's
keys are the named constants of its graph, read from XNNPACK's flatbuffer (``XN01``) behind its ``XH00`` header.
It adds no checks of its own: the common ones (``smoke.checks.pipeline``) are the CPU rows' whole list.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from smoke.stages import Check, MissingData

# Upstream's XNNPACK runtime reads the named data map without a null check (backends/xnnpack/runtime/XNNCompiler.cpp,
# named_data_map->get_data, v1.4.1 to main 2026-08-22; no upstream issue or fix): a program whose constants are all in
# its data file, loaded without it, crashes at method load. Measured on 1.5.1: SIGSEGV in load_method. A damaged data
# file is refused before any delegate reads it (extension/flat_tensor/flat_tensor_data_map.cpp: InvalidExternalData
# for a file shorter than its header says, v1.2.0 to main).
MISSING_DATA = MissingData(None, "pass", "upstream's XNNPACK runtime reads the missing data map without a null check, "
                                         "backends/xnnpack/runtime/XNNCompiler.cpp, with no fix upstream")

if TYPE_CHECKING:
    from smoke.backends.row import BackendEnvironmentCheck, BackendFileCheck, RowOf
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel

# The header XNNPACK puts before its flatbuffer (backends/xnnpack/serialization): magic, header
# length, flatbuffer offset and size, constant data offset and size.
# backends/xnnpack/serialization: the blob starts with an XH00 header (magic at 4, u16 length,
# u32 flatbuffer offset, u32 flatbuffer size, u32 constant data offset, u64 constant data size)
# before an XNNGraph flatbuffer, whose field 8 is constant_data [ConstantDataOffset{offset, size, named_key}].
_XNN_HEADER = struct.Struct("<4sHIIIQ")
_XNN_MAGIC = b"XH00"
_XNN_GRAPH_CONSTANT_DATA = 8
_XNN_CONSTANT_NAMED_KEY = 2


XNNPACK_DATA_TAG = "model"  # the tag of its constants, which names its data file (smoke.child.delegates exports so)


def expected_keys(plan: str, compile_specs: dict[str, bytes], processed: bytes | memoryview) -> tuple[str, ...]:
    """The named keys of the delegate's graph's constant data (its own schema)."""
    # Imported here, not at the top: the noxfile loads the rows in nox's own interpreter, and
    # `nox -s tests` asks no more of it than nox (flatbuffers is what the program reader needs).
    from smoke.readers.tables import ArtifactError, root, string, vector

    blob = processed
    if len(blob) < _XNN_HEADER.size or blob[4:8] != _XNN_MAGIC:
        raise ArtifactError(f"an XnnpackBackend blob without its {_XNN_MAGIC!r} header")
    _magic, _length, fb_offset, fb_size, _const_offset, _const_size = _XNN_HEADER.unpack_from(blob, 4)
    graph = root(bytes(blob[fb_offset : fb_offset + fb_size]), b"XN01", "the XNNPACK graph")
    return tuple(key for c in vector(graph, _XNN_GRAPH_CONSTANT_DATA) if (key := string(c, _XNN_CONSTANT_NAMED_KEY)))


@dataclass(frozen=True)
class Xnnpack:
    name: str = "xnnpack"
    delegate_id: str = "XnnpackBackend"
    data_file: str = f"{XNNPACK_DATA_TAG}.ptd"
    weightless_writes_data: bool = False  # none for a model without weights (executorch 1.2.0 and 1.5.1)
    checks: tuple[Check[Any], ...] = ()
    file_checks: tuple[BackendFileCheck, ...] = ()
    environment_checks: tuple[BackendEnvironmentCheck, ...] = ()

    @staticmethod
    def expected_keys(plan: str, compile_specs: dict[str, bytes], processed: bytes | memoryview) -> tuple[str, ...]:
        return expected_keys(plan, compile_specs, processed)

    def not_its_build(self, wheel: Wheel) -> str | None:
        local = wheel.version.local or ""
        return f"a CUDA build (+{local}), which the CUDA rows gate" if local.startswith("cu") else None

    def runpath_problems(self, wheel: Wheel, row: RowOf, libraries: Libraries) -> tuple[list[str], str]:
        return [], ""

    def torch_problems(self, wheel: Wheel, facts: dict[str, Any]) -> tuple[list[str], list[str]]:
        return [], []

    @staticmethod
    def missing_data(version: Any) -> MissingData:
        return MISSING_DATA

