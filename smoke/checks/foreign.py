"""``foreign files``: a wheel ships no native file of another platform (every row, Linux included).

A Windows ``.lib`` or ``.dll`` in a Linux or macOS wheel, an ELF ``.so`` in a Windows one, a ``.dylib`` outside
macOS: nothing on the wheel's platform loads them; they come from a build tree shared between platforms
(executorch#22054). Judged by each file's first bytes (``smoke.readers.native``) and by names; a WARN, as it costs
the download, not the wheel's working.

One is shipped on purpose: ``executorch/data/lib/aoti_cuda_shims.lib``, the import library the exporter links when
lowering for Windows from any host. It is expected beside ``libaoti_cuda_shims.so`` and foreign where that is absent
(1.1 to 1.4 ship it in CPU wheels too).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from smoke.checks.kinds import FileCheck
from smoke.checks.resolve import is_extension_module
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


def other_extensions(binaries: native.Binaries, own: str) -> list[str]:
    """The wheel's extension modules (``resolve.is_extension_module``: ``.cpython-*.so``, ``.abi3.so``; and ``.pyd``)
    whose first bytes are another system's native format than ``own``. Such a module is imported where the tag says,
    and cannot be: not a stray file (a WARN above) but a module that fails to import (issue 48: a Linux build retagged
    for macOS or Windows passed)."""
    return sorted(name for name, kind in binaries.kinds.items()
                  if kind != own and (is_extension_module(name) or name.lower().endswith(".pyd")))


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
