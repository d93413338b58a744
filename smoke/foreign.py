"""``foreign files``: a wheel ships no native file of another platform (every row, Linux included).

A Linux or macOS wheel with a Windows library (a ``.lib`` import library, a ``.dll``), a Windows
wheel with an ELF ``.so``, a ``.dylib`` outside macOS: nothing on the wheel's platform can load
them; they come from a build tree shared between platforms (executorch#22054: Windows import
libraries in non-Windows nightlies). Judged by each file's first bytes (``smoke.native``), and by
the names only Windows or macOS use. A FAIL names each file and what it is.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from smoke import native
from smoke.results import CheckResult, failed, passed
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.elf import Libraries
    from smoke.rows import Row
    from smoke.wheel import Wheel

NATIVE = {native.LINUX: native.ELF, native.MACOS: native.MACHO, native.WINDOWS: native.PE}
NAMES = {native.LINUX: "Linux", native.MACOS: "macOS", native.WINDOWS: "Windows"}
FOREIGN_KINDS = {
    native.LINUX: {native.MACHO: "a macOS Mach-O file", native.PE: "a Windows PE file", native.WINDOWS_LIBRARY: "a Windows library archive"},
    native.MACOS: {native.ELF: "a Linux ELF file", native.PE: "a Windows PE file", native.WINDOWS_LIBRARY: "a Windows library archive"},
    native.WINDOWS: {native.ELF: "a Linux ELF file", native.MACHO: "a macOS Mach-O file"},
}
FOREIGN_NAMES = {
    native.LINUX: {**dict.fromkeys(native.WINDOWS_NAMES, "a Windows name"), **dict.fromkeys(native.MACOS_NAMES, "a macOS name")},
    native.MACOS: dict.fromkeys(native.WINDOWS_NAMES, "a Windows name"),
    native.WINDOWS: dict.fromkeys(native.MACOS_NAMES, "a macOS name"),
}


def foreign(binaries: native.Binaries, system: str) -> list[tuple[str, str]]:
    """(member, what it is) for each native file of another platform than ``system``."""
    found = {}
    for name, kind in binaries.kinds.items():
        if kind in FOREIGN_KINDS[system]:
            found[name] = FOREIGN_KINDS[system][kind]
    for name in binaries.named_native:
        suffix = PurePosixPath(name).suffix.lower()
        if name not in found and suffix in FOREIGN_NAMES[system]:
            found[name] = f"named {suffix}, {FOREIGN_NAMES[system][suffix]}"
    return sorted(found.items())


def check_foreign_files(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = FOREIGN_FILES.name
    binaries = native.read_binaries(wheel)
    bad = foreign(binaries, row.system)
    platform = NAMES[row.system]
    measured = {"native": len([k for k in binaries.kinds.values() if k == NATIVE[row.system]]), "foreign": dict(bad)}
    if bad:
        shown = ", ".join(f"{path} ({what})" for path, what in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        return failed(name, f"{len(bad)} file{'s' if len(bad) > 1 else ''} of another platform than {platform}, which nothing "
                            f"here loads: {shown}; leave them out of the {platform} wheel", **measured)
    return passed(name, f"every native file is {platform}'s ({measured['native']} {NATIVE[row.system]} files)", **measured)


FOREIGN_FILES = Check("foreign files", FILE, 3, check_foreign_files)
CHECKS = (FOREIGN_FILES,)
