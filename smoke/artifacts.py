"""Read ExecuTorch programs (.pte) and their external data files (.ptd).

Both are FlatBuffers with an extended header inserted after the 8-byte
root-offset/file-identifier prefix. This module reads only the fields the gate
judges, through the ``flatbuffers`` runtime's ``Table`` accessor, with field
slots taken from the schemas (executorch ``schema/program.fbs``, file identifier
``ET12``, and ``extension/flat_tensor/serialize/flat_tensor.fbs``, ``FT01``).
Checked against programs and data files written by executorch 1.2.0 (CUDA, H200)
and 1.5.1 (XNNPACK, CPU).

It needs no executorch; run ``python -m smoke.artifacts PATH...`` to print what
the gate would judge.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from flatbuffers.table import Table


class ArtifactError(ValueError):
    """A file is not a well-formed .pte or .ptd."""


# A table's field N lives at vtable slot 4 + 2 * N.
def _slot(index: int) -> int:
    return 4 + 2 * index


# program.fbs field indices.
_PROGRAM_EXECUTION_PLAN = 1
_PROGRAM_SEGMENTS = 4
_PROGRAM_NAMED_DATA = 7
_PLAN_NAME = 0
_PLAN_OPERATORS = 6
_PLAN_DELEGATES = 7
_OPERATOR_NAME = 0
_OPERATOR_OVERLOAD = 1
_DELEGATE_ID = 0
_NAMED_DATA_KEY = 0
_NAMED_DATA_SEGMENT = 1
# flat_tensor.fbs field indices.
_FLAT_TENSOR_SEGMENTS = 1
_FLAT_TENSOR_NAMED_DATA = 2
_SEGMENT_OFFSET = 0
_SEGMENT_SIZE = 1

_PTE_IDENTIFIER = b"ET12"
_PTD_IDENTIFIER = b"FT01"
_PTD_HEADER_MAGIC = b"FH01"
# The .pte extended header after the identifier: magic "eh00", u32 length, u64 program size,
# u64 segment base offset (and, from some releases, u64 segment data size); little-endian.
_PTE_HEADER_MAGIC = b"eh00"
_PTE_HEADER = struct.Struct("<4sIQQ")
# FH01 header: magic, u32 length, u64 flatbuffer offset, u64 flatbuffer size,
# u64 segment base offset, u64 segment data size; little-endian.
_PTD_HEADER = struct.Struct("<4sIQQQQ")


@dataclass(frozen=True)
class Plan:
    name: str
    delegate_ids: tuple[str, ...]
    operators: tuple[str, ...]  # left to the portable/optimized kernels


@dataclass(frozen=True)
class Program:
    path: str
    size: int
    plans: tuple[Plan, ...]
    named_data_keys: tuple[str, ...]  # data the program carries itself


@dataclass(frozen=True)
class NamedBlob:
    key: str
    size: int
    all_zero: bool


@dataclass(frozen=True)
class DataFile:
    path: str
    size: int
    header_length: int
    flatbuffer_offset: int
    flatbuffer_size: int
    segment_base_offset: int
    segment_data_size: int
    blobs: tuple[NamedBlob, ...]

    @property
    def payload_bytes(self) -> int:
        return sum(blob.size for blob in self.blobs)


def _root(data: bytes, identifier: bytes, path: str) -> Table:
    if len(data) < 8:
        raise ArtifactError(f"{path!r} is {len(data)} B, too short for a FlatBuffer")
    if data[4:8] != identifier:
        raise ArtifactError(
            f"{path!r} has file identifier {bytes(data[4:8])!r}, expected {identifier!r}"
        )
    (root,) = struct.unpack_from("<I", data, 0)
    if root + 4 > len(data):
        raise ArtifactError(f"{path!r}: root table offset {root} points past the end ({len(data)} B)")
    return Table(bytearray(data), root)


def _string(table: Table, field: int) -> str:
    offset = table.Offset(_slot(field))
    return table.String(offset + table.Pos).decode() if offset else ""


def _vector(table: Table, field: int) -> list[Table]:
    offset = table.Offset(_slot(field))
    if not offset:
        return []
    start = table.Vector(offset)
    items = []
    for i in range(table.VectorLen(offset)):
        items.append(Table(table.Bytes, table.Indirect(start + 4 * i)))
    return items


def _uint(table: Table, field: int, fmt: str) -> int:
    offset = table.Offset(_slot(field))
    if not offset:
        return 0
    return struct.unpack_from(fmt, table.Bytes, table.Pos + offset)[0]


def _guard(path: str, read):
    try:
        return read()
    except ArtifactError:
        raise
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path!r} is damaged: an offset points outside the file ({exc})") from exc


def _check_segments(data: bytes, program: Table, path: str) -> None:
    """Every segment the program names (delegate blobs, constants, named data) lies inside the file."""
    segments = [(_uint(s, _SEGMENT_OFFSET, "<Q"), _uint(s, _SEGMENT_SIZE, "<Q")) for s in _vector(program, _PROGRAM_SEGMENTS)]
    if not segments:
        return
    if len(data) < 8 + _PTE_HEADER.size or data[8:12] != _PTE_HEADER_MAGIC:
        raise ArtifactError(f"{path!r} names {len(segments)} segments but has no {_PTE_HEADER_MAGIC!r} header to place them")
    _magic, _length, program_size, base = _PTE_HEADER.unpack_from(data, 8)
    if program_size > len(data):
        raise ArtifactError(f"{path!r}: header says the program is {program_size} B, the file is {len(data)} B")
    for index, (offset, size) in enumerate(segments):
        if base + offset + size > len(data):
            raise ArtifactError(f"{path!r}: segment {index} ends at byte {base + offset + size}, the file is {len(data)} B "
                                "(truncated?)")


def read_program(path: Path | str) -> Program:
    path = str(path)
    data = Path(path).read_bytes()

    def read() -> Program:
        program = _root(data, _PTE_IDENTIFIER, path)
        plans = []
        for plan in _vector(program, _PROGRAM_EXECUTION_PLAN):
            ops = tuple(
                ".".join(filter(None, (_string(op, _OPERATOR_NAME), _string(op, _OPERATOR_OVERLOAD))))
                for op in _vector(plan, _PLAN_OPERATORS)
            )
            delegates = tuple(_string(d, _DELEGATE_ID) for d in _vector(plan, _PLAN_DELEGATES))
            plans.append(Plan(_string(plan, _PLAN_NAME), delegates, ops))
        keys = tuple(_string(n, _NAMED_DATA_KEY) for n in _vector(program, _PROGRAM_NAMED_DATA))
        _check_segments(data, program, path)
        return Program(path, len(data), tuple(plans), keys)

    return _guard(path, read)


def read_data_file(path: Path | str) -> DataFile:
    path = str(path)
    data = Path(path).read_bytes()

    def read() -> DataFile:
        root = _root(data, _PTD_IDENTIFIER, path)
        if len(data) < 8 + _PTD_HEADER.size:
            raise ArtifactError(f"{path!r} is {len(data)} B, too short for its FH01 header")
        magic, length, fb_offset, fb_size, base, seg_size = _PTD_HEADER.unpack_from(data, 8)
        if magic != _PTD_HEADER_MAGIC:
            raise ArtifactError(f"{path!r} has header magic {magic!r}, expected {_PTD_HEADER_MAGIC!r}")
        if base + seg_size > len(data):
            raise ArtifactError(
                f"{path!r}: header says segments end at byte {base + seg_size}, the file is {len(data)} B"
            )
        segments = [
            (_uint(s, _SEGMENT_OFFSET, "<Q"), _uint(s, _SEGMENT_SIZE, "<Q"))
            for s in _vector(root, _FLAT_TENSOR_SEGMENTS)
        ]
        blobs = []
        for named in _vector(root, _FLAT_TENSOR_NAMED_DATA):
            key = _string(named, _NAMED_DATA_KEY)
            index = _uint(named, _NAMED_DATA_SEGMENT, "<I")
            if index >= len(segments):
                raise ArtifactError(f"{path!r}: key {key!r} names segment {index}, there are {len(segments)}")
            offset, size = segments[index]
            start = base + offset
            if start + size > len(data):
                raise ArtifactError(
                    f"{path!r}: key {key!r} ends at byte {start + size}, the file is {len(data)} B"
                )
            payload = data[start : start + size]
            blobs.append(NamedBlob(key, size, not any(payload)))
        return DataFile(path, len(data), length, fb_offset, fb_size, base, seg_size, tuple(blobs))

    return _guard(path, read)


def read(path: Path | str) -> Program | DataFile:
    """Read a .pte or .ptd, chosen by its file identifier, not its name."""
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head[4:8] == _PTD_IDENTIFIER:
        return read_data_file(path)
    return read_program(path)


def describe(item: Program | DataFile) -> list[str]:
    if isinstance(item, Program):
        lines = [f"{item.path}: program, {item.size} B"]
        for plan in item.plans:
            lines.append(f"  plan {plan.name!r}: delegates {list(plan.delegate_ids)}, operators left {list(plan.operators)}")
        lines.append(f"  named data in the program: {list(item.named_data_keys)}")
        return lines
    lines = [
        f"{item.path}: data file, {item.size} B; header length {item.header_length}, "
        f"flatbuffer offset {item.flatbuffer_offset} size {item.flatbuffer_size}, "
        f"segment base offset {item.segment_base_offset}, segment data size {item.segment_data_size}"
    ]
    for blob in item.blobs:
        note = " (empty)" if not blob.size else " (all zeros)" if blob.all_zero else ""
        lines.append(f"  {blob.key!r}: {blob.size} B{note}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m smoke.artifacts", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="print the same as JSON")
    args = parser.parse_args(argv)
    code = 0
    records = []
    for path in args.paths:
        try:
            item = read(path)
        except (OSError, ArtifactError) as exc:
            print(f"ERROR {exc}", file=sys.stderr)
            code = 1
            continue
        if args.json:
            records.append({"kind": type(item).__name__.lower(), **asdict(item)})
        else:
            print("\n".join(describe(item)))
    if args.json:
        print(json.dumps(records, indent=2))
    return code


if __name__ == "__main__":
    sys.exit(main())
