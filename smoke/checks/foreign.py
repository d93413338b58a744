"""``foreign files``: a wheel ships no native file of another platform (every row, Linux included).

A Linux or macOS wheel with a Windows library (a ``.lib`` import library, a ``.dll``), a Windows
wheel with an ELF ``.so``, a ``.dylib`` outside macOS: nothing on the wheel's platform can load
them; they come from a build tree shared between platforms (executorch#22054: Windows import
libraries in non-Windows nightlies). Judged by each file's first bytes (``smoke.readers.native``), and by
the names only Windows or macOS use. A finding names each file and what it is; it is a WARN, not a FAIL:
nothing loads such a file, so it costs the download, not the wheel's working (docs/checks.md: severities).

One Windows file is shipped on purpose beside the CUDA delegate: ``executorch/data/lib/aoti_cuda_shims.lib``,
the import library of the delegate's shim DLL, which the exporter links against when it lowers a model for
Windows from any host (main's setup.py: "Lowering for Windows is a cross compile, so a Linux CUDA build needs
it too", built with ``EXECUTORCH_BUILD_CUDA`` like ``libaoti_cuda_shims.so``; main's
``backends/cuda/cuda_backend.py`` raises when it is missing; executorch#22054 keeps it in CUDA builds only).
So it is expected where that shim library ships and foreign where it does not (1.1 to 1.4 ship it in CPU
wheels too, unconditionally: 1.2.0's setup.py gives it no CMake flag).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from smoke.checks.kinds import FileCheck
from smoke.readers import native, releases
from smoke.readers.systems import SYSTEMS, WINDOWS_LIBRARY
from smoke.results import CheckResult, passed, warned
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel
    from smoke.rows import Row

# A Windows import library shipped on purpose -> the library whose presence makes it so (see above).
# (data, with its upstream source, in smoke/readers/releases.json: shipped_on_purpose)
SHIPPED_WITH = releases.shipped_on_purpose()


def expected(binaries: native.Binaries, files) -> list[str]:
    """The Windows import libraries this wheel ships on purpose: each beside the library it serves."""
    return sorted(name for name, kind in binaries.kinds.items()
                  if kind == WINDOWS_LIBRARY and SHIPPED_WITH.get(name) in files)


def foreign(binaries: native.Binaries, system: str, files=()) -> list[tuple[str, str]]:
    """(member, what it is) for each native file of another platform than ``system``, but for those
    shipped on purpose beside a library among ``files`` (``SHIPPED_WITH``)."""
    found = {}
    facts = SYSTEMS[system]
    on_purpose = set(expected(binaries, set(files))) if WINDOWS_LIBRARY in facts.foreign_kinds else set()
    for name, kind in binaries.kinds.items():
        if name in on_purpose:
            continue
        if kind in facts.foreign_kinds:
            found[name] = facts.foreign_words(kind)
    for name in binaries.named_native:
        suffix = PurePosixPath(name).suffix.lower()
        if name not in found and name not in on_purpose and suffix in facts.foreign_names:
            found[name] = f"named {suffix}, {facts.foreign_names[suffix]}"
    return sorted(found.items())


def check_foreign_files(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = FOREIGN_FILES.name
    binaries = native.read_binaries(wheel)
    files = set(wheel.files)
    facts = SYSTEMS[row.system]
    bad = foreign(binaries, row.system, files)
    platform = facts.words
    kept = [name for name in expected(binaries, files) if WINDOWS_LIBRARY in facts.foreign_kinds]
    measured = {"native": len([k for k in binaries.kinds.values() if k == facts.native]), "foreign": dict(bad),
                "on_purpose": kept}
    also = (f"; {', '.join(kept)}, the Windows import library a CUDA build ships on purpose beside "
            f"{', '.join(sorted({SHIPPED_WITH[k] for k in kept}))} (the exporter links it when lowering for Windows)") if kept else ""
    if bad:
        shown = ", ".join(f"{path} ({what})" for path, what in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        return warned(name, f"{len(bad)} file{'s' if len(bad) > 1 else ''} of another platform than {platform}, which nothing "
                            f"here loads: {shown}; leave them out of the {platform} wheel{also}", **measured)
    return passed(name, f"every native file is {platform}'s ({measured['native']} {facts.native} files){also}", **measured)


FOREIGN_FILES = Check("foreign files", FILE, 3, check_foreign_files)
CHECKS: tuple[FileCheck, ...] = (FOREIGN_FILES,)
