"""The file checks of a Windows wheel, on its PE files (``smoke.readers.pe``), on any host.

They carry the Linux checks' names, so a Windows row's report has the same shape:

- ``architecture``: every ``.pyd``/``.dll``/``.exe`` is of the tag's machine (``win_amd64``: AMD64);
  a file the reader refuses, or named ``.pyd``/``.dll`` and not PE, fails here;
- ``libraries resolve``: every imported DLL (and delay-loaded one) is found: in the wheel beside the
  file that imports it (Python loads an extension module with its own folder searched; a DLL's
  imports are searched there too); a system DLL (delvewheel's list of what every Windows has, the
  ``api-ms-win-*`` sets, ``pythonXY.dll``) or the Visual C++ runtime (``msvcp140.dll``,
  ``vcruntime140*.dll``: torch needs it installed too); a DLL of torch's ``torch/lib`` when the wheel
  declares torch (torch adds that folder with ``os.add_dll_directory`` when imported). A FAIL names
  the file and the DLL (executorch#14443: "DLL load failed" of ``_portable_lib``).
"""

from __future__ import annotations

import posixpath
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from delvewheel import _dll_list as dll_list
from packaging.utils import canonicalize_name

from smoke.checks import installed, shipped
from smoke.readers import native
from smoke.readers.systems import WINDOWS, of_platform
from smoke.readers.wheel import marker_environment
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
    measured = {"files": len(binaries.pes), "found": sorted({f.machine for f in binaries.pes})}
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
    env = marker_environment("AMD64" if machine == "amd64" else machine.upper(), wheel, WINDOWS)
    return "torch" in wheel.user_supplied or any(
        canonicalize_name(r.name) == "torch" and (r.marker is None or r.marker.evaluate(env)) for r in wheel.requires_dist)


def check_dlls_resolve(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = RESOLVE.name
    binaries = native.read_binaries(wheel)
    machine = (_tag_machines(wheel) or ["amd64"])[0]
    shipped = {posixpath.normpath(f.path).lower() for f in binaries.pes if f.is_dll or f.path.lower().endswith((".pyd", ".dll"))}
    torch = _declares_torch(wheel, machine)
    found, unresolved = {}, []
    for f in binaries.pes:
        folder = posixpath.dirname(f.path)
        for dll in dict.fromkeys((*f.imports, *f.delay_imports)):
            beside = posixpath.normpath(posixpath.join(folder, dll)).lower()
            if beside in shipped:
                how = "in the wheel, beside it"
            elif why := system_dll(dll, machine):
                how = why
            elif dll.lower() in TORCH_DLLS and torch:
                how = "torch (declared), in torch/lib"
            else:
                elsewhere = sorted(p for p in shipped if PurePosixPath(p).name == dll.lower())
                why = (f"the wheel has it in {elsewhere[0]}, not beside it" if elsewhere else
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
    return passed(name, f"{len(found)} imported DLLs of {len(binaries.pes)} PE files found", **measured)


ARCHITECTURE = Check("architecture", FILE, 6, check_architecture)
RESOLVE = Check("libraries resolve", FILE, 21, check_dlls_resolve)
CHECKS = (ARCHITECTURE, RESOLVE)
# The Windows wheel's own checks, as every system's (smoke.checks.linux): its files, its installed environment.
FILE_CHECKS = (*CHECKS, shipped.RECORD)
ENVIRONMENT_CHECKS = installed.CHECKS
