"""Read ExecuTorch programs (.pte) and their external data files (.ptd).

Both are FlatBuffers with an extended header after the 8-byte prefix. Only the fields the gate judges are read,
through the ``flatbuffers`` ``Table`` accessor, with field slots from executorch ``schema/program.fbs`` (``ET12``)
and ``flat_tensor.fbs`` (``FT01``); checked against files from executorch 1.2.0 and 1.5.1. Needs no executorch:
``python -m smoke artifacts PATH...`` prints what the gate would judge.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from flatbuffers.table import Table

from smoke.backends import for_delegate
from smoke.readers.filekind import not_regular
from smoke.readers.tables import ArtifactError, data_segments, guard, root, slot, string, ubytes, uint, vector

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
_DELEGATE_PROCESSED = 1
_DELEGATE_COMPILE_SPECS = 2
_COMPILE_SPEC_KEY = 0
_COMPILE_SPEC_VALUE = 1
_DATA_REFERENCE_LOCATION = 0  # DataLocation: INLINE = 0, SEGMENT = 1
_DATA_REFERENCE_INDEX = 1
_PROGRAM_BACKEND_DELEGATE_DATA = 3
_INLINE_DATA = 0
_NAMED_DATA_KEY = 0
_NAMED_DATA_SEGMENT = 1
# flat_tensor.fbs field indices.
_FLAT_TENSOR_SEGMENTS = 1
_FLAT_TENSOR_NAMED_DATA = 2


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
    # The devices its delegates were compiled for (their ``target_device`` compile spec, "cuda:0"): where
    # one is named, exir moves tensors across the delegate's boundary with its own copy operators.
    target_devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Program:
    path: str
    size: int
    plans: tuple[Plan, ...]
    named_data_keys: tuple[str, ...]  # data the program carries itself
    # The named data its delegates will ask for at load time, where this reader knows how to tell
    # (see expected_keys); None where it does not.
    expected_keys: tuple[str, ...] | None = None


@dataclass(frozen=True)
class NamedBlob:
    key: str
    size: int
    all_zero: bool
    start: int = 0  # its first byte's offset in the file


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


def _has_pte_header(data: bytes) -> bool:
    return len(data) >= 8 + _PTE_HEADER.size and data[8:12] == _PTE_HEADER_MAGIC


def _pte_header(data: bytes) -> tuple[int, int]:
    """The program size and segment base offset from the eh00 header; without one, as the runtime
    reads it (runtime/executor/program.cpp): the program is the whole file, segments start at 0."""
    if not _has_pte_header(data):
        return len(data), 0
    _magic, _length, program_size, base = _PTE_HEADER.unpack_from(data, 8)
    return program_size, base


def _checkdata_segments(data: bytes, program: Table, path: str) -> None:
    """Every segment the program names (delegate blobs, constants, named data) lies inside the file.

    Without an extended header the runtime places segments from offset 0, inside the program itself, so only empty
    segments (as a partitioner that declined the model leaves) are accepted there.
    """
    segments = data_segments(program, _PROGRAM_SEGMENTS)
    if not segments:
        return
    if not _has_pte_header(data):
        holding = [index for index, (_offset, size) in enumerate(segments) if size]
        if holding:
            raise ArtifactError(f"{path!r} names {len(holding)} segments with data but has no {_PTE_HEADER_MAGIC!r} "
                                "header to place them")
        return
    program_size, base = _pte_header(data)
    if program_size > len(data):
        raise ArtifactError(f"{path!r}: header says the program is {program_size} B, the file is {len(data)} B")
    for index, (offset, size) in enumerate(segments):
        if base + offset + size > len(data):
            raise ArtifactError(f"{path!r}: segment {index} ends at byte {base + offset + size}, the file is {len(data)} B "
                                "(truncated?)")


def _delegate_blob(data: bytes, program: Table, delegate: Table) -> bytes | memoryview:
    offset = delegate.Offset(slot(_DELEGATE_PROCESSED))
    if not offset:
        return b""
    reference = Table(delegate.Bytes, delegate.Indirect(delegate.Pos + offset))
    location, index = uint(reference, _DATA_REFERENCE_LOCATION, "<B"), uint(reference, _DATA_REFERENCE_INDEX, "<I")
    if location == 0:
        return ubytes(vector(program, _PROGRAM_BACKEND_DELEGATE_DATA)[index], _INLINE_DATA)
    offset, size = data_segments(program, _PROGRAM_SEGMENTS)[index]
    start = _pte_header(data)[1] + offset
    return memoryview(data)[start : start + size]  # a view of the mapped file: a large blob is not copied


def _compile_specs(delegate: Table) -> dict[str, bytes]:
    return {string(spec, _COMPILE_SPEC_KEY): ubytes(spec, _COMPILE_SPEC_VALUE) for spec in vector(delegate, _DELEGATE_COMPILE_SPECS)}


def expected_keys(data: bytes, program: Table) -> tuple[str, ...] | None:
    """The named data the program's delegates fetch when it loads, from the program itself: each
    delegate's backend (``smoke.backends``) reads its own keys; a delegate of no known backend: None."""
    keys: list[str] = []
    for plan in vector(program, _PROGRAM_EXECUTION_PLAN):
        for delegate in vector(plan, _PLAN_DELEGATES):
            backend = for_delegate(string(delegate, _DELEGATE_ID))
            if backend is None:
                return None
            keys += backend.expected_keys(string(plan, _PLAN_NAME), _compile_specs(delegate), _delegate_blob(data, program, delegate))
    return tuple(dict.fromkeys(keys))


def missing_keys(program: Program, data_files: list["DataFile"]) -> list[str] | None:
    """Keys the program expects that neither it nor the given data files hold (None: unknown)."""
    if program.expected_keys is None:
        return None
    held = set(program.named_data_keys) | {blob.key for d in data_files for blob in d.blobs}
    return [key for key in program.expected_keys if key not in held]


# Compared a chunk at a time when a blob is checked for zeros (whatever the blob's size).
_ZERO_CHUNK = bytes(1 << 20)


def _not_a_file(path: str, mode: int) -> ArtifactError | None:
    """What is not a regular file, refused before it is opened (``smoke.readers.filekind``)."""
    kind = not_regular(mode)
    return ArtifactError(f"{path!r} is {kind}, not a .pte or .ptd file") if kind else None


def _mapped(path: str) -> mmap.mmap | bytes:
    """The file's bytes, mapped: what the readers touch (the headers, the flatbuffer, the ranges they name)
    is read, never the whole of a large file. Only a regular file is opened, without blocking."""
    try:
        refused = _not_a_file(path, os.stat(path).st_mode)
        if refused:
            raise refused
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            status = os.fstat(fd)  # what was opened, if the path changed since the stat
            refused = _not_a_file(path, status.st_mode)
            if refused:
                raise refused
            if not status.st_size:
                return b""
            try:
                return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            except OSError as exc:
                if exc.errno == errno.ENOMEM:  # the address space is limited (ulimit -v), not the memory
                    raise ArtifactError(f"{path!r} ({status.st_size} B) cannot be mapped within this process's "
                                        "address-space limit (ulimit -v): raise it to read this file") from exc
                raise
        finally:
            os.close(fd)
    except OSError as exc:
        raise ArtifactError(f"{path!r} cannot be read: {exc.strerror or exc}") from exc


def _all_zero(data, start: int, size: int) -> bool:
    for at in range(start, start + size, len(_ZERO_CHUNK)):
        end = min(at + len(_ZERO_CHUNK), start + size)
        if data[at:end] != _ZERO_CHUNK[: end - at]:
            return False
    return True


def read_program(path: Path | str) -> Program:
    path = str(path)
    return _read_program(path, _mapped(path))


def _read_program(path: str, data) -> Program:
    def read() -> Program:
        program = root(data, _PTE_IDENTIFIER, path)
        if _has_pte_header(data) and _pte_header(data)[0] > len(data):  # cut short: say so before reading its tables
            raise ArtifactError(f"{path!r}: header says the program is {_pte_header(data)[0]} B, the file is {len(data)} B "
                                "(truncated?)")
        plans = []
        for plan in vector(program, _PROGRAM_EXECUTION_PLAN):
            ops = tuple(
                ".".join(filter(None, (string(op, _OPERATOR_NAME), string(op, _OPERATOR_OVERLOAD))))
                for op in vector(plan, _PLAN_OPERATORS)
            )
            delegates = tuple(string(d, _DELEGATE_ID) for d in vector(plan, _PLAN_DELEGATES))
            devices = tuple(dict.fromkeys(device.decode("utf-8", errors="replace") for d in vector(plan, _PLAN_DELEGATES)
                                          if (device := _compile_specs(d).get("target_device"))))
            plans.append(Plan(string(plan, _PLAN_NAME), delegates, ops, devices))
        keys = tuple(string(n, _NAMED_DATA_KEY) for n in vector(program, _PROGRAM_NAMED_DATA))
        _checkdata_segments(data, program, path)
        return Program(path, len(data), tuple(plans), keys, expected_keys(data, program))

    return _guarded(path, read)


def read_data_file(path: Path | str) -> DataFile:
    path = str(path)
    return _read_data_file(path, _mapped(path))


def _read_data_file(path: str, data) -> DataFile:
    def read() -> DataFile:
        table = root(data, _PTD_IDENTIFIER, path)
        if len(data) < 8 + _PTD_HEADER.size:
            raise ArtifactError(f"{path!r} is {len(data)} B, too short for its FH01 header")
        magic, length, fb_offset, fb_size, base, seg_size = _PTD_HEADER.unpack_from(data, 8)
        if magic != _PTD_HEADER_MAGIC:
            raise ArtifactError(f"{path!r} has header magic {magic!r}, expected {_PTD_HEADER_MAGIC!r}")
        if length > len(data) or fb_offset + fb_size > len(data):
            raise ArtifactError(f"{path!r}: header says the flatbuffer is {fb_size} B at byte {fb_offset} "
                                f"(header {length} B), the file is {len(data)} B")
        if base + seg_size > len(data):
            raise ArtifactError(
                f"{path!r}: header says segments end at byte {base + seg_size}, the file is {len(data)} B"
            )
        segments = data_segments(table, _FLAT_TENSOR_SEGMENTS)
        blobs = []
        for named in vector(table, _FLAT_TENSOR_NAMED_DATA):
            key = string(named, _NAMED_DATA_KEY)
            index = uint(named, _NAMED_DATA_SEGMENT, "<I")
            if index >= len(segments):
                raise ArtifactError(f"{path!r}: key {key!r} names segment {index}, there are {len(segments)}")
            offset, size = segments[index]
            start = base + offset
            if start + size > len(data):
                raise ArtifactError(
                    f"{path!r}: key {key!r} ends at byte {start + size}, the file is {len(data)} B"
                )
            blobs.append(NamedBlob(key, size, _all_zero(data, start, size), start))
        return DataFile(path, len(data), length, fb_offset, fb_size, base, seg_size, tuple(blobs))

    return _guarded(path, read)


def _guarded(path: str, read):
    """``tables.guard``, and what else a damaged file makes the flatbuffers runtime raise: one ArtifactError."""
    try:
        return guard(path, read)
    except ArtifactError as exc:
        if str(exc).startswith(repr(path)):
            raise
        raise ArtifactError(f"{path!r}: {exc}") from exc  # a backend's reader of its blob names no file: name it
    except (ValueError, TypeError, OverflowError, BufferError) as exc:
        raise ArtifactError(f"{path!r} is damaged: {exc}") from exc


def read(path: Path | str) -> Program | DataFile:
    """Read a .pte or .ptd, chosen by its file identifier, not its name. Whatever is wrong with the path or
    its bytes (not a regular file, unreadable, damaged, another kind of file) is an ``ArtifactError``."""
    path = str(path)
    data = _mapped(path)
    head = data[:8]
    if head[4:8] == _PTD_IDENTIFIER or (head[4:8] != _PTE_IDENTIFIER and path.endswith(".ptd")):
        return _read_data_file(path, data)  # a .ptd with a damaged identifier is told the data file's, not a program's
    return _read_program(path, data)


def describe(item: Program | DataFile) -> list[str]:
    if isinstance(item, Program):
        lines = [f"{item.path}: program, {item.size} B"]
        for plan in item.plans:
            devices = f" (target device {', '.join(plan.target_devices)})" if plan.target_devices else ""
            lines.append(f"  plan {plan.name!r}: delegates {list(plan.delegate_ids)}{devices}, operators left {list(plan.operators)}")
        lines.append(f"  named data in the program: {list(item.named_data_keys)}")
        expected = "unknown for these delegates" if item.expected_keys is None else list(item.expected_keys)
        lines.append(f"  named data its delegates expect: {expected}")
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

