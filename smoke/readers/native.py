"""Every native file of a wheel, whatever platform it is for: ELF, Mach-O, PE, a Windows library
archive; the Mach-O and PE files read (``smoke.readers.macho``, ``smoke.readers.pe``), from the zip, once per wheel.

What a file is comes from its first bytes; a name that promises a native file (``.dylib``, ``.dll``, ``.pyd``,
``.lib``, ``.exe``) is kept beside it, so that a file that is neither (a Git LFS pointer named ``.dylib``) is named too.
"""

from __future__ import annotations

import functools
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from smoke.readers import macho, pe
from smoke.readers.systems import ELF, MACHO, MACOS_NAMES, PE, WINDOWS_LIBRARY, WINDOWS_NAMES
from smoke.readers.wheel import Wheel, read_head, read_member

AR_MAGIC = b"!<arch>\n"


def kind_of(name: str, head: bytes) -> str | None:
    """What a member is, by its first bytes (``pe.PE_HEAD_SIZE`` of them): ELF, Mach-O, PE, a Windows
    library archive (an ``ar`` archive named ``.lib``: import libraries and static libraries of MSVC), or None."""
    if head[:4] == b"\x7fELF":
        return ELF
    if macho.is_macho(head[:8]):
        return MACHO
    if pe.is_pe(head):
        return PE
    if head[:8] == AR_MAGIC and name.lower().endswith(".lib"):
        return WINDOWS_LIBRARY
    return None


@dataclass(frozen=True)
class Binaries:
    kinds: dict[str, str]  # member -> ELF, Mach-O, PE, Windows library archive
    machos: tuple[macho.MachOFile, ...]
    pes: tuple[pe.PeFile, ...]
    unreadable: tuple[str, ...]  # "PATH: why", for Mach-O and PE files the readers refuse
    named_native: tuple[str, ...]  # members named .dylib/.dll/.pyd/.lib/.exe/.so (whatever they hold)

    def files_of(self, kind: str) -> list[str]:
        return sorted(name for name, k in self.kinds.items() if k == kind)


@functools.lru_cache(maxsize=4)
def _read(path: Path, sha256: str) -> Binaries:
    kinds, machos, pes, unreadable, named = {}, [], [], [], []
    filename = path.name
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name = info.filename
            if name.endswith("/"):
                continue
            lower = PurePosixPath(name).name.lower()
            if lower.endswith((*WINDOWS_NAMES, *MACOS_NAMES, ".so")):
                named.append(name)
            kind = kind_of(name, read_head(archive, name, filename, pe.PE_HEAD_SIZE))
            if kind is None:
                continue
            kinds[name] = kind
            try:
                if kind == MACHO:
                    machos.append(macho.read_macho(name, read_member(archive, name, filename)))
                elif kind == PE:
                    pes.append(pe.read_pe(name, read_member(archive, name, filename)))
            except (macho.MachOError, pe.PeError) as exc:
                unreadable.append(str(exc))
    return Binaries(kinds, tuple(machos), tuple(pes), tuple(unreadable), tuple(named))


def read_binaries(wheel: Wheel) -> Binaries:
    """Once per wheel file (keyed by its sha256): every row of ``inspect`` judges the same files."""
    return _read(wheel.path, wheel.sha256)
