"""What the Windows loader reads from a PE file (``.pyd``, ``.dll``, ``.exe``): its machine and
the DLLs it imports, read with pefile as delvewheel reads them (the import and delay-import
directories, nothing else parsed). Every refusal is one ``PeError`` naming the file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pefile

# IMAGE_FILE_HEADER.Machine, named as wheel tags name the architecture (win_amd64, win_arm64, win32).
MACHINES = {0x8664: "amd64", 0xAA64: "arm64", 0x14C: "win32", 0x1C4: "arm"}
IMAGE_FILE_DLL = 0x2000
_DIRECTORIES = [pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"], pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"]]


class PeError(ValueError):
    """Bytes that are not a PE file the Windows loader would load."""


@dataclass(frozen=True)
class PeFile:
    path: str  # relative to site-packages, POSIX
    machine: str  # amd64, arm64, win32, or "machine 0xNNNN"
    imports: tuple[str, ...]  # DLL names of the import directory, as written
    delay_imports: tuple[str, ...]  # of the delay-import directory: loaded at first call, still required
    is_dll: bool


def is_pe(head: bytes) -> bool:
    """An MS-DOS header whose e_lfanew leads to the PE signature (needs the first 64 bytes and the
    signature's: ``pe_head_size`` bytes are enough for every file a linker writes)."""
    if len(head) < 64 or head[:2] != b"MZ":
        return False
    offset = struct.unpack("<I", head[60:64])[0]
    return head[offset:offset + 4] == b"PE\0\0"


PE_HEAD_SIZE = 4096  # e_lfanew of every file MSVC and MinGW write is under 512


def _names(entries) -> tuple[str, ...]:
    names = []
    for entry in entries or ():
        raw = entry.dll or b""
        try:
            names.append(raw.decode("ascii"))
        except UnicodeDecodeError:
            raise PeError(f"an imported DLL's name is not ASCII ({raw[:40]!r})") from None
    return tuple(names)


def read_pe(path: str, data: bytes) -> PeFile:
    try:
        image = pefile.PE(data=data, fast_load=True)
        try:
            image.parse_data_directories(directories=_DIRECTORIES)
            warnings = [w for w in image.get_warnings() if "import" in w.lower() and "suspicious" not in w.lower()]
            if warnings and not hasattr(image, "DIRECTORY_ENTRY_IMPORT"):
                raise PeError(f"its import directory cannot be read: {warnings[0]}")
            machine = int(image.FILE_HEADER.Machine)
            return PeFile(path, MACHINES.get(machine, f"machine 0x{machine:04x}"),
                          _names(getattr(image, "DIRECTORY_ENTRY_IMPORT", ())),
                          _names(getattr(image, "DIRECTORY_ENTRY_DELAY_IMPORT", ())),
                          bool(image.FILE_HEADER.Characteristics & IMAGE_FILE_DLL))
        finally:
            image.close()
    except PeError as exc:
        raise PeError(f"{path}: not a PE file the Windows loader would load: {exc}") from None
    except (pefile.PEFormatError, struct.error, ValueError, IndexError, KeyError, TypeError, AttributeError,
            OverflowError, UnicodeError) as exc:  # what pefile raises on odd bytes
        raise PeError(f"{path}: not a PE file the Windows loader would load: {exc}") from None
