"""The file checks of a macOS wheel, on its Mach-O files (``smoke.readers.macho``), on any host.

Named as the Linux checks, so reports have one shape:

- ``platform tag``: no slice needs a macOS newer than the tag's (as delocate reads it);
- ``architecture``: every Mach-O file has the slices the tag names;
- ``library RUNPATH``: every LC_RPATH entry is loader- or executable-relative and stays inside the environment
  (executorch#21743);
- ``libraries resolve``: every LC_LOAD_DYLIB is found in the system, the wheel or a declared dependency's folder
  (executorch#14421).

A fat file is judged slice by slice: dyld maps only the process's slice and searches its rpaths. Slices the tag
does not name are not judged; messages name the slice: ``PATH (x86_64 slice)``.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from smoke.checks import foreign, imports, installed, shipped
from smoke.checks.kinds import EnvironmentCheck, FileCheck
from smoke.checks.resolve import is_extension_module
from smoke.readers import elf, native
from smoke.readers.systems import MACHO, MACOS
from smoke.readers.wheel import Providers
from smoke.results import CheckResult, failed, passed
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.readers.macho import MachOFile, Slice
    from smoke.readers.wheel import Wheel
    from smoke.rows import Row

TAG = re.compile(r"macosx_(\d+)_(\d+)_(\w+)$")
# The slices each macOS tag architecture promises (packaging.tags' names).
SLICES = {"arm64": ("arm64",), "x86_64": ("x86_64",), "universal2": ("arm64", "x86_64"), "intel": ("i386", "x86_64"),
          "universal": ("i386", "x86_64"), "i386": ("i386",)}
ARM64_FIRST = Version("11.0")  # the first macOS that runs arm64
SYSTEM_PREFIXES = ("/usr/lib/", "/System/")
# torch/lib of torch 2.13.0's macosx_14_0_arm64 cp311 wheel (its file list, read 2026-12-04): a name
# the wheel leaves to a declared torch must be one of these (any other is found nowhere).
TORCH_DYLIBS = frozenset({"libc10.dylib", "libomp.dylib", "libshm.dylib", "libtorch.dylib", "libtorch_cpu.dylib",
                          "libtorch_global_deps.dylib", "libtorch_python.dylib"})
# site-packages is PREFIX/lib/pythonX.Y/site-packages; the interpreter, @executable_path, is PREFIX/bin.
EXECUTABLE_FOLDER = "../../../bin"


def macos_tags(wheel: Wheel) -> list[tuple[str, Version, str]]:
    """(tag, version, architecture) of each macOS platform tag."""
    found = []
    for tag in sorted({t.platform for t in wheel.tags}):
        if m := TAG.match(tag):
            found.append((tag, Version(f"{m.group(1)}.{m.group(2)}"), m.group(3)))
    return found


def _loadable(wheel: Wheel):
    return native.read_binaries(wheel)


def check_minimum_macos(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = PLATFORM_TAG.name
    tags = macos_tags(wheel)
    if not tags:
        return failed(name, f"the wheel has no macOS platform tag ({', '.join(sorted({t.platform for t in wheel.tags}))})")
    binaries = _loadable(wheel)
    problems, newest = [], None
    for tag, version, _arch in tags:
        for f in binaries.machos:
            for s in f.slices:
                if s.minimum_macos is None:
                    continue
                newest = max(newest or s.minimum_macos, s.minimum_macos)
                allowed = max(version, ARM64_FIRST) if s.architecture == "arm64" else version
                if s.minimum_macos > allowed:
                    problems.append(f"{f.path} ({s.architecture}) needs macOS {s.minimum_macos}, newer than {tag} allows "
                                    f"({allowed}): pip would install it where it does not load; the tag would be "
                                    f"macosx_{s.minimum_macos.major}_{s.minimum_macos.minor}_{_arch}")
    measured: dict[str, Any] = {"tags": [t for t, _v, _a in tags], "files": len(binaries.machos),
                                "newest": str(newest) if newest else None}
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, **measured)
    return passed(name, f"{len(binaries.machos)} Mach-O files within {', '.join(measured['tags'])} "
                        f"(newest minimum macOS: {newest or 'none stated'})", **measured)


def check_architecture(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = ARCHITECTURE.name
    binaries = _loadable(wheel)
    tags = macos_tags(wheel)
    problems = list(binaries.unreadable)
    wanted = sorted({s for _t, _v, arch in tags for s in SLICES.get(arch, (arch,))})
    for f in binaries.machos:
        if missing := [a for a in wanted if a not in f.architectures]:
            problems.append(f"{f.path} is {', '.join(f.architectures)}; the tag {', '.join(t for t, _v, _a in tags)} needs "
                            f"{', '.join(missing)}")
    for member in binaries.named_native:
        if member.lower().endswith((".dylib", ".so")) and binaries.kinds.get(member) != MACHO \
                and not any(member in u for u in binaries.unreadable) and binaries.kinds.get(member) is None:
            problems.append(f"{member} is named as a library but is not Mach-O (a Git LFS pointer?)")
    if others := foreign.other_extensions(binaries, MACHO):
        problems.append(f"{len(others)} extension modules are not Mach-O ({', '.join(others[:2])}"
                        f"{', ...' if len(others) > 2 else ''}: {binaries.kinds[others[0]]}): macOS cannot import them; "
                        f"build the wheel on macOS for this tag")
    measured = {"wanted": wanted, "found": sorted({a for f in binaries.machos for a in f.architectures}), "not_macho": others}
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, **measured)
    return passed(name, f"{len(binaries.machos)} Mach-O files, each with the tag's {', '.join(wanted)}", **measured)


def resolve(path: str, entry: str) -> str | None:
    """An @loader_path/@executable_path entry as a folder relative to site-packages; None if it leaves the environment."""
    for token, base in (("@loader_path", posixpath.dirname(path) or "."), ("@executable_path", EXECUTABLE_FOLDER)):
        if entry == token or entry.startswith(token + "/"):
            normal = posixpath.normpath(base + entry[len(token):])
            parts = normal.split("/")
            climbs = next((i for i, part in enumerate(parts) if part != ".."), len(parts))
            return None if climbs > elf.SITE_DEPTH_IN_PREFIX else ("" if normal == "." else normal)
    return None


def entry_problem(path: str, entry: str) -> str | None:
    if any(part in elf.BUILD_TREE_PARTS for part in entry.split("/")):
        return "a build-tree folder"
    if entry.startswith("/"):
        return "an absolute path"
    if not re.match(r"@(loader|executable)_path(/|$)", entry):
        return "relative to the working directory, not to @loader_path"
    if resolve(path, entry) is None:
        return "outside the environment"
    return None


def judged_slices(wheel: Wheel, f: MachOFile) -> tuple[list[Slice], list[Slice]]:
    """The slices of f that an interpreter this wheel installs for loads (the tag's architectures; every slice
    where the wheel has no macOS tag), and the others: dyld loads one slice, the process's, so each is judged on its own."""
    wanted = {a for _t, _v, arch in macos_tags(wheel) for a in SLICES.get(arch, (arch,))}
    judged = [s for s in f.slices if not wanted or s.architecture in wanted]
    return judged, [s for s in f.slices if s not in judged]


def slice_label(f: MachOFile, s: Slice) -> str:
    """The file, and in a fat (universal) file the slice: a need one slice lacks is that slice's alone."""
    return f.path if len(f.slices) == 1 else f"{f.path} ({s.architecture} slice)"


def not_judged(count: int) -> str:
    return (f"; {count} slices of architectures the tag does not name not judged (no interpreter pip installs this wheel "
            "for loads them)") if count else ""


def check_rpaths(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = RUNPATH.name
    binaries = _loadable(wheel)
    problems, entries, skipped = [], {}, 0
    for f in binaries.machos:
        judged, others = judged_slices(wheel, f)
        skipped += len(others)
        for s in judged:
            label = slice_label(f, s)
            if s.rpaths:
                entries[label] = list(dict.fromkeys(s.rpaths))
            bad = sorted(((e, why) for e in dict.fromkeys(s.rpaths) if (why := entry_problem(f.path, e))),
                         key=lambda i: i[1] != "a build-tree folder")
            if bad:
                shown = ", ".join(f"{e!r} ({why})" for e, why in bad[:2]) + (f" and {len(bad) - 2} more" if len(bad) > 2 else "")
                problems.append(f"{label} LC_RPATH has {len(bad)} entries outside the install: {shown}")
    measured = {"libraries": len(binaries.machos), "entries": entries, "slices_not_judged": skipped}
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, **measured)
    return passed(name, f"{len(binaries.machos)} Mach-O files, every LC_RPATH entry @loader_path-relative inside the environment"
                        + not_judged(skipped), **measured)


def check_dylibs_resolve(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """Each slice on its own: dyld loads the process's slice of every image, and searches that slice's LC_RPATH (and
    its loaders' slices' of the same architecture), never another slice's."""
    name = RESOLVE.name
    binaries = _loadable(wheel)
    loadable: dict[str, set[str]] = {}  # path -> the architectures of its dylib and bundle slices
    for f in binaries.machos:
        for s in f.slices:
            if s.filetype in ("dylib", "bundle"):
                loadable.setdefault(posixpath.normpath(f.path), set()).add(s.architecture)
    providers = Providers(wheel, "arm64" if "arm64" in row.machine else "x86_64", MACOS)
    by_name: dict[str, list[MachOFile]] = {}
    for f in binaries.machos:
        by_name.setdefault(PurePosixPath(f.path).name, []).append(f)

    def folders(f: MachOFile, s: Slice) -> list[str]:
        return [t for e in dict.fromkeys(s.rpaths) if not entry_problem(f.path, e) and (t := resolve(f.path, e)) is not None]

    def in_wheel(folder: str, leaf: str, architecture: str) -> bool:
        return architecture in loadable.get(posixpath.normpath(posixpath.join(folder, leaf)), ())

    # (path, architecture) -> the slices of that architecture whose @rpath names lead to it by file name
    loaders: dict[tuple[str, str], list[tuple[MachOFile, Slice]]] = {}
    for f in binaries.machos:
        for s in f.slices:
            for dylib in s.dylibs:
                for target in by_name.get(PurePosixPath(dylib).name, ()):
                    if target is not f:
                        loaders.setdefault((target.path, s.architecture), []).append((f, s))

    def found_via(f: MachOFile, s: Slice, leaf: str, seen: frozenset[str]) -> str | None:
        """Where @rpath/leaf is found for slice s of f: its own rpaths, else (not an extension module) its loaders'."""
        for folder in folders(f, s):
            if in_wheel(folder, leaf, s.architecture):
                return "in the wheel"
            if (who := providers(folder)) not in (None, "the wheel") and (folder.split("/", 1)[0] != "torch" or leaf in TORCH_DYLIBS):
                return f"{who} (declared), in {folder}"
        if is_extension_module(f.path) or f.path in seen:
            return None
        via = [found_via(lf, ls, leaf, seen | {f.path}) for lf, ls in loaders.get((f.path, s.architecture), ())]
        return via[0] if via and all(via) else None

    found, unresolved, skipped = {}, [], 0
    for f in binaries.machos:
        judged, others = judged_slices(wheel, f)
        skipped += len(others)
        for s in judged:
            label = slice_label(f, s)
            for dylib in dict.fromkeys(s.dylibs):
                if dylib == s.install_name:
                    continue
                how = None
                if dylib.startswith(SYSTEM_PREFIXES):
                    how = "the system's"
                elif dylib.startswith("@rpath/"):
                    how = found_via(f, s, dylib[len("@rpath/"):], frozenset())
                elif dylib.startswith("@loader_path/"):
                    beside = resolve(f.path, posixpath.dirname(dylib))
                    if beside is not None and in_wheel(beside, PurePosixPath(dylib).name, s.architecture):
                        how = "in the wheel"
                if how is None:
                    undeclared = [t for t in folders(f, s) if t.split("/", 1)[0] not in ("", "..") and providers(t) is None]
                    why = ("an absolute path outside the system" if dylib.startswith("/") else
                           f"its LC_RPATH leads to {undeclared[0]}, the folder of {undeclared[0].split('/', 1)[0]}, which the "
                           f"wheel does not declare" if undeclared and dylib.startswith("@rpath/") else
                           "no LC_RPATH entry of it, or of what loads it, leads to it in the wheel or a declared dependency")
                    unresolved.append((label, dylib, why))
                else:
                    found[f"{label}: {dylib}"] = how
    measured = {"found": found, "unresolved": [f"{path}: {dylib}" for path, dylib, _why in unresolved], "slices_not_judged": skipped}
    if unresolved:
        shown = "; ".join(f"{path} needs {dylib} ({why})" for path, dylib, why in unresolved[:3])
        more = f" (and {len(unresolved) - 3} more)" if len(unresolved) > 3 else ""
        return failed(name, shown + more, **measured)
    deferred = sum(1 for how in found.values() if "(declared)" in how)
    return passed(name, f"{len(found)} LC_LOAD_DYLIB names of {len(binaries.machos)} Mach-O files found "
                        f"({deferred} in declared dependencies' folders, checked once installed)" + not_judged(skipped), **measured)


PLATFORM_TAG = Check("platform tag", FILE, 5, check_minimum_macos)
ARCHITECTURE = Check("architecture", FILE, 6, check_architecture)
RUNPATH = Check("library RUNPATH", FILE, 20, check_rpaths)
RESOLVE = Check("libraries resolve", FILE, 21, check_dylibs_resolve)
CHECKS: tuple[FileCheck, ...] = (PLATFORM_TAG, ARCHITECTURE, RUNPATH, RESOLVE)
# The macOS wheel's own checks, as every system's (smoke.checks.linux): its files, its installed environment.
FILE_CHECKS: tuple[FileCheck, ...] = (*CHECKS, *imports.CHECKS, shipped.RECORD)
ENVIRONMENT_CHECKS: tuple[EnvironmentCheck, ...] = installed.CHECKS
