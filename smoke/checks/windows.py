"""The file checks of a Windows wheel, on its PE files (``smoke.readers.pe``), on any host.

Named as the Linux checks, so reports share a shape:

- ``architecture``: every ``.pyd``/``.dll``/``.exe`` is of the tag's machine (``win_amd64``: AMD64);
- ``libraries resolve``: every imported (or delay-loaded) DLL is found where Python's loader searches (no ``PATH``):
  beside the importing file, in a folder a module adds with ``os.add_dll_directory`` (executorch#14446), as a system
  or Visual C++ runtime DLL, as the tag's interpreter DLL (``cp311``: ``python311.dll`` or ``python3.dll``), or in
  ``torch/lib`` when torch is declared.

A DLL left to ``torch/lib`` or an added folder is found only once that module ran, and whether each loads is
judged only end to end (executorch#14443); the PASS says so.
"""

from __future__ import annotations

import ast
import posixpath
import re
import zipfile
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, cast

from delvewheel import _dll_list as dll_list
from packaging.utils import canonicalize_name

from smoke.checks import foreign, imports, installed, shipped
from smoke.checks.kinds import EnvironmentCheck, FileCheck
from smoke.readers import native
from smoke.readers.systems import PE, WINDOWS, of_platform
from smoke.readers.wheel import read_member, system_environment
from smoke.results import CheckResult, failed, passed
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel
    from smoke.rows import Row

# torch/lib of torch 2.13.0's win_amd64 cp311 wheel (its file list, read 2026-12-04); an import of
# one of these is left to a declared torch.
TORCH_DLLS = frozenset({"c10.dll", "libiomp5md.dll", "libiompstubs5md.dll", "shm.dll", "torch.dll", "torch_cpu.dll",
                        "torch_global_deps.dll", "torch_python.dll", "uv.dll", "c10_cuda.dll", "torch_cuda.dll"})
# The interpreter's DLL, as delvewheel names it (python311.dll, python313t.dll, python3.dll; _d for a debug build).
PYTHON_DLL = re.compile(r"python(\d+)(t?)(_d)?\.dll")
CPYTHON_ABI = re.compile(r"cp(\d)(\d+)(t?)")
SYSTEM_NAMES = {"amd64": dll_list.ignore_names_x64, "arm64": dll_list.ignore_names_arm64, "win32": dll_list.ignore_names_x86}


def _tag_machines(wheel: Wheel) -> list[str]:
    return sorted({t.platform[len("win_"):] if t.platform.startswith("win_") else t.platform
                   for t in wheel.tags if of_platform(t.platform) == WINDOWS})


def check_architecture(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = ARCHITECTURE.name
    binaries = native.read_binaries(wheel)
    machines = _tag_machines(wheel)
    problems = list(binaries.unreadable)
    for f in binaries.pes:
        if f.machine not in machines:
            problems.append(f"{f.path} is {f.machine}; the tag {', '.join(f'win_{m}' for m in machines)} says {', '.join(machines)}")
    for member in binaries.named_native:
        if member.lower().endswith((".pyd", ".dll")) and binaries.kinds.get(member) is None:
            problems.append(f"{member} is named as a DLL but is not PE (a Git LFS pointer?)")
    if others := foreign.other_extensions(binaries, PE):
        problems.append(f"{len(others)} extension modules are not PE ({', '.join(others[:2])}"
                        f"{', ...' if len(others) > 2 else ''}: {binaries.kinds[others[0]]}): Windows cannot import them; "
                        f"build the wheel on Windows for this tag")
    measured = {"files": len(binaries.pes), "found": sorted({f.machine for f in binaries.pes}), "not_pe": others}
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, **measured)
    return passed(name, f"{len(binaries.pes)} PE files, each {', '.join(machines)}", **measured)


def system_dll(name: str, machine: str) -> str | None:
    lower = name.lower()
    if lower in SYSTEM_NAMES.get(machine, dll_list.ignore_names_x64) or any(r.fullmatch(lower) for r in dll_list.ignore_regexes):
        return "a system DLL"
    if dll_list.vc_redist.fullmatch(lower):
        return "the Visual C++ runtime"
    return None


def _declares_torch(wheel: Wheel, machine: str) -> bool:
    env = system_environment(WINDOWS, machine, wheel)
    return "torch" in wheel.user_supplied or any(
        canonicalize_name(r.name) == "torch" and (r.marker is None or r.marker.evaluate(env)) for r in wheel.requires_dist)


def python_dlls(tag) -> frozenset[str]:
    """The interpreter DLLs an interpreter that installs this tag has: a CPython ABI's pythonXY.dll and python3.dll
    (every CPython 3 on Windows ships it, forwarding to its own), abi3's python3.dll alone (PEP 384)."""
    if tag.abi in ("abi3", "abi3t"):
        return frozenset({f"python3{tag.abi[4:]}.dll"})
    found = CPYTHON_ABI.fullmatch(tag.abi) or (tag.abi == "none" and CPYTHON_ABI.fullmatch(tag.interpreter))
    if found:
        major, minor, threading = found.groups()
        return frozenset({f"python{major}{minor}{threading}.dll", f"python{major}{threading}.dll"})
    return frozenset({"python3.dll"})


def python_dll_problem(dll: str, tags) -> str | None:
    """None when every tag's interpreter has this DLL; else why it does not (the first tag that does not)."""
    found = PYTHON_DLL.fullmatch(dll.lower())
    if not found:
        return None
    digits, threading, debug = found.groups()
    what = ("the stable ABI's DLL" if digits == "3" else f"CPython {digits[0]}.{digits[1:]}'s DLL") + (
        " (free-threaded)" if threading else "") + (" (a debug build's)" if debug else "")
    for tag in sorted(tags, key=str):
        if dll.lower() not in (allowed := python_dlls(tag)):
            return (f"{what}, and the tag {tag.interpreter}-{tag.abi} installs it into an interpreter whose DLL is "
                    f"{' or '.join(sorted(allowed, reverse=True))}")
    return None


# --- folders the wheel's modules add with os.add_dll_directory, read from their source

PATH_CALLS = {"abspath", "realpath", "normpath"}


def _folder(node: ast.expr, module: str, names: dict[str, ast.expr], depth: int = 0) -> str | None:
    """A path expression of a module as a path relative to site-packages, where the file alone says it
    (``__file__``, ``os.path.dirname``/``abspath``/``realpath``/``normpath``/``join`` of constants, a name bound
    once to such); None where it does not."""
    if depth > 20:
        return None
    if isinstance(node, ast.Name):
        if node.id == "__file__":
            return module
        bound = names.get(node.id)
        return None if bound is None else _folder(bound, module, names, depth + 1)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return None  # a bare string is a folder relative to the working directory, or absolute: not the wheel's
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else function.id if isinstance(function, ast.Name) else ""
    if name == "dirname" and len(node.args) == 1:
        inner = _folder(node.args[0], module, names, depth + 1)
        return None if inner is None else posixpath.dirname(inner)
    if name in PATH_CALLS and len(node.args) == 1:
        return _folder(node.args[0], module, names, depth + 1)
    if name == "join" and node.args and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args[1:]):
        inner = _folder(node.args[0], module, names, depth + 1)
        parts = [str(cast(ast.Constant, a).value).replace("\\", "/") for a in node.args[1:]]
        if inner is None or any(p.startswith("/") or ":" in p for p in parts):
            return None
        joined = posixpath.normpath(posixpath.join(inner, *parts))
        return None if joined == ".." or joined.startswith("../") else joined
    return None


def added_folders(member: str, source: bytes) -> tuple[dict[str, str], list[str]]:
    """{folder: "MEMBER line N"} of one module's os.add_dll_directory calls whose folder its source says, and its calls
    whose folder it does not ("MEMBER line N"). A module that does not parse adds nothing (``imports declared`` reads
    the modules as Python does)."""
    known: dict[str, str] = {}
    unknown: list[str] = []
    if b"add_dll_directory" not in source:
        return known, unknown
    try:
        tree = ast.parse(source, filename=member)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return known, unknown
    names: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value  # a name bound twice is read as its last binding
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (isinstance(node.func, ast.Attribute) and node.func.attr == "add_dll_directory"
                                           or isinstance(node.func, ast.Name) and node.func.id == "add_dll_directory"):
            where = f"{member} line {node.lineno}"
            folder = _folder(node.args[0], member, names) if len(node.args) == 1 and not node.keywords else None
            if folder is None:
                unknown.append(where)
            else:
                known.setdefault(folder, where)
    return known, unknown


def dll_directories(wheel: Wheel) -> tuple[dict[str, str], list[str]]:
    """``added_folders`` of every module of the wheel."""
    known: dict[str, str] = {}
    unknown: list[str] = []
    with zipfile.ZipFile(wheel.path) as archive:
        for member in wheel.files:
            if member.endswith(".py") and ".dist-info/" not in member:
                found, unread = added_folders(member, read_member(archive, member, wheel.filename))
                known = {**found, **known}
                unknown += unread
    return known, unknown


def check_dlls_resolve(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = RESOLVE.name
    binaries = native.read_binaries(wheel)
    machine = (_tag_machines(wheel) or ["amd64"])[0]
    # lower-cased path -> path: the loader matches names without case
    shipped = {posixpath.normpath(f.path).lower(): posixpath.normpath(f.path) for f in binaries.pes
               if f.is_dll or f.path.lower().endswith((".pyd", ".dll"))}
    torch = _declares_torch(wheel, machine)
    tags = [t for t in wheel.tags if of_platform(t.platform) == WINDOWS]
    added: tuple[dict[str, str], list[str]] | None = None  # read only when a DLL is in the wheel but not beside its importer
    found, unresolved = {}, []
    for f in binaries.pes:
        folder = posixpath.dirname(f.path)
        for dll in dict.fromkeys((*f.imports, *f.delay_imports)):
            beside = posixpath.normpath(posixpath.join(folder, dll)).lower()
            elsewhere = sorted(p for p in shipped if PurePosixPath(p).name == dll.lower() and p != beside)
            if beside in shipped:
                how = "in the wheel, beside it"
            elif f.is_dll and (why := python_dll_problem(dll, tags)):
                unresolved.append((f.path, dll, why))
                continue
            elif why := system_dll(dll, machine):
                how = why
            elif dll.lower() in TORCH_DLLS and torch:
                how = "torch (declared), in torch/lib"
            else:
                if elsewhere and added is None:
                    added = dll_directories(wheel)
                known, unknown = added or ({}, [])
                adder = next((f"in {posixpath.dirname(shipped[p])}, which {where} adds with os.add_dll_directory"
                              for p in elsewhere for folder, where in known.items() if folder.lower() == posixpath.dirname(p)), None)
                if adder:
                    found[f"{f.path}: {dll}"] = adder
                    continue
                why = (f"the wheel has it in {shipped[elsewhere[0]]}, not beside it" + (
                           f", and no os.add_dll_directory call adds its folder (calls this check cannot read the folder of: "
                           f"{', '.join(unknown)})" if unknown else "") if elsewhere else
                       "a torch DLL, and the wheel declares no torch" if dll.lower() in TORCH_DLLS else
                       "not in the wheel, not a system DLL, not a declared dependency's")
                unresolved.append((f.path, dll, why))
                continue
            found[f"{f.path}: {dll}"] = how
    measured = {"found": found, "unresolved": [f"{path}: {dll}" for path, dll, _why in unresolved]}
    if unresolved:
        shown = "; ".join(f"{path} imports {dll} ({why})" for path, dll, why in unresolved[:3])
        more = f" (and {len(unresolved) - 3} more)" if len(unresolved) > 3 else ""
        return failed(name, shown + more, **measured)
    torch_first = sum(1 for how in found.values() if how.startswith("torch (declared)"))
    module_first = sum(1 for how in found.values() if "os.add_dll_directory" in how)
    order = [part for count, part in ((torch_first, f"{torch_first} in torch's torch/lib, found once torch is imported first"),
                                      (module_first, f"{module_first} in folders a module adds with os.add_dll_directory, "
                                                     "found once it ran")) if count]
    return passed(name, f"{len(found)} imported DLLs of {len(binaries.pes)} PE files found"
                        + (f" ({'; '.join(order)})" if order else "")
                        + "; whether they load is judged only end to end (executorch#14443)", **measured)


ARCHITECTURE = Check("architecture", FILE, 6, check_architecture)
RESOLVE = Check("libraries resolve", FILE, 21, check_dlls_resolve)
CHECKS: tuple[FileCheck, ...] = (ARCHITECTURE, RESOLVE)
# The Windows wheel's own checks, as every system's (smoke.checks.linux): its files, its installed environment.
FILE_CHECKS: tuple[FileCheck, ...] = (*CHECKS, *imports.CHECKS, shipped.RECORD)
ENVIRONMENT_CHECKS: tuple[EnvironmentCheck, ...] = installed.CHECKS
