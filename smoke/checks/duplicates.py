"""``no duplicate content``: the wheel ships nothing twice (issue 28, part 4).

Two members with the same bytes over ``LARGE_BYTES`` (1 MB) cost the download and the disk: a WARN. Two shared
libraries with the same bytes or the same ``DT_SONAME`` may both load into one process (pytorch#65405): a FAIL.
An OpenMP runtime (by name or entry points) that the loader would not take for torch's own is a second runtime in
the process, with its own threads and state: a FAIL (pytorch#149422, pytorch#98836). Where the gate has read no
wheel of the paired torch, that part is judged only end to end (a SKIP where nothing else is found).
"""

from __future__ import annotations

import io
import re
import zipfile
from collections import defaultdict
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from smoke.checks.kinds import FileCheck
from smoke.checks.resolve import Known
from smoke.readers import elf
from smoke.readers.wheel import Providers, hash_member, read_member
from smoke.results import CheckResult, failed, passed, skipped, warned
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel
    from smoke.rows import Row

LARGE_BYTES = 1_000_000  # "over 1 MB": a copy of anything this large is named
# An OpenMP runtime by its file name or SONAME: libgomp.so.1, libgomp-a34b3233.so.1 (auditwheel's renamed copy),
# libiomp5.so, libomp.so; or by the entry points each defines (GNU's GOMP_parallel, LLVM's and Intel's __kmpc_fork_call,
# and the API's omp_get_num_threads: a library that links a runtime statically defines them too).
OPENMP_NAME = re.compile(r"^lib(gomp|iomp5|omp)([-.]|$)")
OPENMP_SYMBOLS = frozenset({"omp_get_num_threads", "GOMP_parallel", "__kmpc_fork_call"})


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


def openmp_runtimes(libraries: Libraries) -> dict[str, str]:
    """The wheel's OpenMP runtimes (a library bundling one statically among them): path -> the name the loader knows it
    by (its SONAME, else its file name)."""
    return {lib.path: lib.soname or PurePosixPath(lib.path).name for lib in libraries.items if lib.kind == "ET_DYN"
            and (OPENMP_NAME.match(PurePosixPath(lib.path).name) or OPENMP_NAME.match(lib.soname) or lib.exported & OPENMP_SYMBOLS)}


def second_openmp(wheel: Wheel, row: Row, libraries: Libraries) -> tuple[list[str], str, dict]:
    """(two OpenMP runtimes in one process, each named; what is judged only end to end; measured)."""
    ours = openmp_runtimes(libraries)
    if not ours:
        return [], "", {}
    problems = []
    if len(set(ours.values())) > 1:
        problems.append(f"{' and '.join(ours)} are {len(set(ours.values()))} OpenMP runtimes, each loaded by its own name "
                        "(pytorch#149422)")
    torch = Known(wheel, row, Providers(wheel, row.machine)).torch()
    theirs = sorted({f for w in torch.wheels for f in w.files if OPENMP_NAME.match(PurePosixPath(f).name)})
    measured = {"openmp_runtimes": ours, "torch_openmp_runtimes": theirs}
    if not torch.wheels:
        return problems, (f"the wheel ships an OpenMP runtime ({', '.join(ours)}); whether the torch it runs with loads "
                          f"another is judged only end to end: {torch.said}"), measured
    for path, known_as in ours.items():
        other = [f for f in theirs if PurePosixPath(f).name != known_as]
        if other:
            problems.append(f"{path} is an OpenMP runtime ({known_as}), and {torch.said} ships its own ({', '.join(other)}): "
                            "two OpenMP runtimes in one process, each with its own threads and state (pytorch#149422); "
                            "link torch's instead of bundling one")
    return problems, "", measured


def check_duplicate_content(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = DUPLICATE_CONTENT.name
    same, alike = duplicates(wheel, libraries)
    problems = [f"{' and '.join(group)} are the same {_size(wheel, group[0])} (one file shipped {len(group)} times)"
                for group in same]
    problems += [f"{' and '.join(group)} are one library under {len(group)} names (each has SONAME {soname_!r})"
                 for soname_, group in alike]
    openmp, unjudged, about_openmp = second_openmp(wheel, row, libraries)
    measured = {"same_bytes": [list(group) for group in same], "same_soname": {s: list(group) for s, group in alike},
                **about_openmp}
    also = f"; {unjudged}" if unjudged else ""
    if openmp:
        found = problems + openmp
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        return failed(name, "; ".join(found[:3]) + more + also, **measured)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        shared = {lib.path for lib in libraries.items if lib.kind == "ET_DYN"}
        loads_twice = alike or any(member in shared for group in same for member in group)
        judge = failed if loads_twice else warned
        return judge(name, "; ".join(problems[:3]) + more + "; ship each once"
                     + ("" if loads_twice else " (no library among them: it costs the download, not the wheel's working)")
                     + also, **measured)
    said = (f"no two members over {LARGE_BYTES // 1_000_000} MB, and no two shared libraries, have the same bytes; "
            "no two libraries share a SONAME")
    if unjudged:
        return skipped(name, f"{unjudged}; {said}", **measured)
    return passed(name, said, **measured)


def _size(wheel: Wheel, member: str) -> str:
    with zipfile.ZipFile(wheel.path) as archive:
        return f"{archive.getinfo(member).file_size} B"


DUPLICATE_CONTENT = Check("no duplicate content", FILE, 35, check_duplicate_content)
CHECKS: tuple[FileCheck, ...] = (DUPLICATE_CONTENT,)
