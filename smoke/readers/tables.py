"""Reading FlatBuffers tables: what the program and data-file readers (``smoke.artifacts``) and a
backend's reader of its own delegate blobs (``smoke.backends``) share.

Fields are read through the ``flatbuffers`` runtime's ``Table`` accessor, by their index in the
schema; a malformed file is an ``ArtifactError``, never a traceback.
"""

from __future__ import annotations

import mmap
import struct

from flatbuffers.table import Table


class ArtifactError(ValueError):
    """A file is not a well-formed .pte or .ptd."""


# A table's field N lives at vtable slot 4 + 2 * N.
def slot(index: int) -> int:
    return 4 + 2 * index


# DataSegment (program.fbs and flat_tensor.fbs alike) field indices.
_SEGMENT_OFFSET = 0
_SEGMENT_SIZE = 1


# What each identifier the gate reads names (program.fbs, flat_tensor.fbs, XNNPACK's schema.fbs), and what to do.
_PASS_ONE = "pass a .pte or .ptd that ExecuTorch's exporter wrote"
_IDENTIFIED = {b"ET12": ("an ExecuTorch program (.pte)", _PASS_ONE), b"FT01": ("an ExecuTorch data file (.ptd)", _PASS_ONE),
               b"XN01": ("an XNNPACK graph", "the program's XNNPACK payload is damaged: export it again")}


def root(data: bytes, identifier: bytes, path: str) -> Table:
    if len(data) < 8:
        raise ArtifactError(f"{path!r} is {len(data)} B, too short for a FlatBuffer")
    if data[4:8] != identifier:
        what, fix = _IDENTIFIED.get(identifier, (f"a FlatBuffer of {identifier!r}", "pass one"))
        raise ArtifactError(f"{path!r} has file identifier {bytes(data[4:8])!r}, expected {identifier!r}: it is not {what}; {fix}")
    (root,) = struct.unpack_from("<I", data, 0)
    if root + 4 > len(data):
        raise ArtifactError(f"{path!r}: root table offset {root} points past the end ({len(data)} B)")
    # A mapped file (smoke.artifacts) is read in place: only the pages the fields touch are read.
    return Table(data if isinstance(data, mmap.mmap) else bytearray(data), root)


def string(table: Table, field: int) -> str:
    offset = table.Offset(slot(field))
    return table.String(offset + table.Pos).decode() if offset else ""


def vector(table: Table, field: int) -> list[Table]:
    offset = table.Offset(slot(field))
    if not offset:
        return []
    start, length = table.Vector(offset), table.VectorLen(offset)
    if start + 4 * length > len(table.Bytes):  # a damaged length: refused, not walked over garbage offsets
        raise ArtifactError(f"a vector of {length} entries at byte {start} runs past the end ({len(table.Bytes)} B)")
    items = []
    for i in range(length):
        items.append(Table(table.Bytes, table.Indirect(start + 4 * i)))
    return items


def ubytes(table: Table, field: int) -> bytes:
    """A [ubyte] field's bytes."""
    offset = table.Offset(slot(field))
    if not offset:
        return b""
    start = table.Vector(offset)
    return bytes(table.Bytes[start : start + table.VectorLen(offset)])


def data_segments(table: Table, field: int) -> list[tuple[int, int]]:
    """A [DataSegment] field (program.fbs and flat_tensor.fbs alike) as (offset, size) pairs."""
    return [(uint(s, _SEGMENT_OFFSET, "<Q"), uint(s, _SEGMENT_SIZE, "<Q")) for s in vector(table, field)]


def uint(table: Table, field: int, fmt: str) -> int:
    offset = table.Offset(slot(field))
    if not offset:
        return 0
    return struct.unpack_from(fmt, table.Bytes, table.Pos + offset)[0]


def guard(path: str, read):
    try:
        return read()
    except ArtifactError:
        raise
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path!r} is damaged: an offset points outside the file ({exc})") from exc
