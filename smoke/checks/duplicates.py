"""``no duplicate content``: the wheel ships nothing twice (issue 28, part 4).

Two members with the same bytes over ``LARGE_BYTES`` (1 MB) are one file shipped twice: the download and
the install pay for it twice, and where it is a library, the process may load two copies (pytorch#65405:
the same library shipped under two names). A library is judged at any size: two ELF shared libraries with
the same bytes, or with the same ``DT_SONAME`` (one library under two names, or two builds of it), FAIL,
naming both. Two copies of a file that is no library cost the download and the disk, not the wheel's working:
where those are all it finds, it is a WARN (docs/checks.md: severities). Only members whose size another
member shares are hashed (sha256, in 1 MiB chunks).
"""

from __future__ import annotations

import io
import zipfile
from collections import defaultdict
from typing import TYPE_CHECKING

from smoke.readers import elf
from smoke.readers.wheel import hash_member, read_member
from smoke.results import CheckResult, failed, passed, warned
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel
    from smoke.rows import Row

LARGE_BYTES = 1_000_000  # "over 1 MB": a copy of anything this large is named


def soname(data: bytes) -> str | None:
    """A library's DT_SONAME, or None (none, or not readable: ``architecture`` names an unreadable file)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        found = [value for tag, value in elf.dynamic_strings(ELFFile(io.BytesIO(data))) if tag == "DT_SONAME"]
    except (ELFError, ValueError, OSError, OverflowError, elf.ElfError):
        return None
    return found[0] if found else None


def duplicates(wheel: Wheel, libraries: Libraries) -> tuple[list[tuple[str, ...]], list[tuple[str, tuple[str, ...]]]]:
    """(groups of members with the same bytes, each large or a library; (soname, libraries) named alike)."""
    shared = {lib.path for lib in libraries.items if lib.kind == "ET_DYN"}
    by_size: dict[int, list[str]] = defaultdict(list)
    names: dict[str, list[str]] = defaultdict(list)
    with zipfile.ZipFile(wheel.path) as archive:
        for info in archive.infolist():
            if not info.is_dir() and (info.file_size > LARGE_BYTES or info.filename in shared):
                by_size[info.file_size].append(info.filename)
        by_digest: dict[bytes, list[str]] = defaultdict(list)
        for members in by_size.values():
            if len(members) > 1:
                for member in members:
                    by_digest[hash_member(archive, member, wheel.filename)[0]].append(member)
        for member in sorted(shared):
            name = soname(read_member(archive, member, wheel.filename))
            if name is not None:
                names[name].append(member)
    same = sorted(tuple(sorted(group)) for group in by_digest.values() if len(group) > 1)
    alike = sorted((name, tuple(group)) for name, group in names.items() if len(group) > 1)
    # A copy with the same bytes has the same SONAME too: said once, as a copy.
    copies = {frozenset(group) for group in same}
    alike = [(name, group) for name, group in alike if frozenset(group) not in copies]
    return same, alike


def check_duplicate_content(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = DUPLICATE_CONTENT.name
    same, alike = duplicates(wheel, libraries)
    problems = [f"{' and '.join(group)} are the same {_size(wheel, group[0])} (one file shipped {len(group)} times)"
                for group in same]
    problems += [f"{' and '.join(group)} are one library under {len(group)} names (each has SONAME {soname_!r})"
                 for soname_, group in alike]
    measured = {"same_bytes": [list(group) for group in same], "same_soname": {s: list(group) for s, group in alike}}
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        shared = {lib.path for lib in libraries.items if lib.kind == "ET_DYN"}
        loads_twice = alike or any(member in shared for group in same for member in group)
        judge = failed if loads_twice else warned
        return judge(name, "; ".join(problems[:3]) + more + "; ship each once"
                     + ("" if loads_twice else " (no library among them: it costs the download, not the wheel's working)"),
                     **measured)
    return passed(name, f"no two members over {LARGE_BYTES // 1_000_000} MB, and no two shared libraries, have the same bytes; "
                        f"no two libraries share a SONAME", **measured)


def _size(wheel: Wheel, member: str) -> str:
    with zipfile.ZipFile(wheel.path) as archive:
        return f"{archive.getinfo(member).file_size} B"


DUPLICATE_CONTENT = Check("no duplicate content", FILE, 35, check_duplicate_content)
CHECKS = (DUPLICATE_CONTENT,)
