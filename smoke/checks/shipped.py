"""What the wheel ships: the checks that read the wheel file itself, with nothing installed.

They need no GPU and no torch, so they run first in every row, before its environment is built (fail-fast then
rejects a broken wheel before any install), and alone in ``nox -s inspect``. The common ones are ``CHECKS``; a
backend's own are in its module (``smoke.backends``); ``smoke.checks.pipeline.for_row`` orders them.
"""

from __future__ import annotations

import base64
import csv
import io
import re
import zipfile
from typing import TYPE_CHECKING

from smoke.checks.kinds import FileCheck
from smoke.checks.owners import NAME as RUNTIME_CORE_NAME  # one owner per runtime component
from smoke.checks.owners import check_runtime_core
from smoke.readers import elf
from smoke.readers.elf import Libraries as Libraries  # the checks name it from here: shipped.Libraries
from smoke.readers.wheel import Wheel, hash_member, read_head, read_member, shared_objects
from smoke.results import CheckResult, failed, passed
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.rows import Row


# A name the loader is given to load: libx.so, libx.so.1.2, _C.cpython-311-x86_64-linux-gnu.so (not notes.sorted.txt).
SHARED_LIBRARY_NAME = re.compile(r"\.so(\.[0-9]+)*$")


def read_libraries(wheel: Wheel) -> Libraries:
    """Every member that starts with the ELF magic, whatever its name (``flatc`` is an executable); a member
    named as a shared library that is not ELF (a Git LFS pointer) or that the ELF reader refuses is kept by name."""
    items, unreadable, not_elf = [], [], []
    named_so = {name for name in shared_objects(wheel) if SHARED_LIBRARY_NAME.search(name)}
    with zipfile.ZipFile(wheel.path) as archive:
        for info in archive.infolist():
            name = info.filename
            if name.endswith("/") or info.file_size < len(elf.ELF_MAGIC):
                if name in named_so:
                    not_elf.append(name)
                continue
            if not elf.is_elf(read_head(archive, name, wheel.filename, len(elf.ELF_MAGIC))):
                if name in named_so:
                    not_elf.append(name)
                continue
            try:
                items.append(elf.read_library(name, read_member(archive, name, wheel.filename)))
            except elf.ElfError as exc:
                unreadable.append(str(exc))
    return Libraries(tuple(items), tuple(unreadable), tuple(not_elf))


# --- the checks -------------------------------------------------------------------


def check_library_runpath(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """No shipped library searches an absolute, build-tree or out-of-environment folder; on a CUDA row,
    every library that links CUDA reaches it through an $ORIGIN entry into a declared package."""
    name = LIBRARY_RUNPATH.name
    problems = list(libraries.unreadable)
    for lib in libraries.items:
        bad = [(entry, why) for entry in lib.search_path if (why := elf.entry_problem(lib.path, entry))]
        # The build-tree entries first: they are the ones that name the builder.
        bad.sort(key=lambda item: item[1] != "a build-tree folder")
        if bad:
            shown = ", ".join(f"{entry!r} ({why})" for entry, why in bad[:2]) + (f" and {len(bad) - 2} more" if len(bad) > 2 else "")
            problems.append(f"{lib.path} {lib.tag} has {len(bad)} entries outside the install: {shown}")
        if lib.empty_entries:
            # "$ORIGIN/../lib:" ends in an empty entry: the loader searches the process's working directory there.
            problems.append(f"{lib.path} {lib.tag} has {lib.empty_entries} empty entr{'y' if lib.empty_entries == 1 else 'ies'} "
                            "(as in '$ORIGIN/../lib:'), which the loader reads as the current directory")
    linking = [lib for lib in libraries.items if lib.cuda_needed]
    backend_problems, backend_note = row.backend.runpath_problems(wheel, row, libraries)
    problems += backend_problems
    measured = {"libraries": len(libraries.items), "linking_cuda": [lib.path for lib in linking],
                "entries": {lib.path: list(lib.search_path) for lib in libraries.items if lib.search_path}}
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, **measured)
    return passed(name, f"{len(libraries.items)} libraries, every entry $ORIGIN-relative inside the environment{backend_note}", **measured)


def _record_digest(digest: bytes) -> str:
    """RECORD's form of a sha256 digest: urlsafe base64, no padding."""
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def check_record(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """Every file's sha256 and size match the wheel's RECORD, and RECORD lists exactly the files."""
    name = RECORD.name
    with zipfile.ZipFile(wheel.path) as archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
        record_name = next((n for n in names if n.endswith(".dist-info/RECORD") and n.count("/") == 1), None)
        if record_name is None:
            return failed(name, "the wheel has no .dist-info/RECORD")
        rows = list(csv.reader(io.StringIO(read_member(archive, record_name, wheel.filename).decode("utf-8", "replace"))))
        listed = {r[0]: r for r in rows if r}
        problems = []
        if record_name not in listed:
            # The wheel spec (binary distribution format, after PEP 376): RECORD lists every file of the wheel, itself
            # too, with an empty hash and size. `installer` (pdm, uv's tests, anyone installing by the spec) asserts
            # that every member is mentioned in RECORD and refuses the wheel: torchvision 0.14.0 shipped one so
            # (pytorch/vision#6869).
            problems.append(f"RECORD does not list itself ({record_name}), as the wheel spec asks (its own line, with an "
                            "empty hash and size): installer refuses such a wheel (pytorch/vision#6869)")
        for member in names:
            if member == record_name or member.endswith((".dist-info/RECORD.jws", ".dist-info/RECORD.p7s")):
                continue
            entry = listed.get(member)
            if entry is None:
                problems.append(f"{member} is not in RECORD")
                continue
            sha256, size = hash_member(archive, member, wheel.filename)
            digest = entry[1] if len(entry) > 1 else ""
            said_size = entry[2] if len(entry) > 2 else ""
            if not digest.startswith("sha256="):
                problems.append(f"{member} has no sha256 in RECORD")
            elif digest != _record_digest(sha256):
                problems.append(f"{member} does not match its RECORD hash")
            elif said_size and not said_size.isdigit():
                problems.append(f"{member} has size {said_size!r} in RECORD, which is not a number of bytes")
            elif said_size and int(said_size) != size:
                problems.append(f"{member} is {size} B, RECORD says {said_size}")
        absent = sorted(set(listed) - set(names) - {record_name})
        problems += [f"{p} is in RECORD but not in the wheel" for p in absent]
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, files=len(names), problems=problems)
    return passed(name, f"{len(names) - 1} files match their sha256 in RECORD", files=len(names))


LIBRARY_RUNPATH = Check("library RUNPATH", FILE, 20, check_library_runpath)
RUNTIME_CORE = Check(RUNTIME_CORE_NAME, FILE, 30, check_runtime_core)
RECORD = Check("wheel RECORD", FILE, 90, check_record)
CHECKS: tuple[FileCheck, ...] = (LIBRARY_RUNPATH, RUNTIME_CORE, RECORD)  # every row's; a backend adds its own (smoke.backends)
