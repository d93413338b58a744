"""The file checks of a macOS wheel, on its Mach-O files (``smoke.readers.macho``), on any host.

They carry the Linux checks' names, so a macOS row's report has the same shape:

- ``platform tag``: every slice needs no macOS newer than the tag's (``macosx_14_0_arm64``: 14.0),
  read from LC_BUILD_VERSION or LC_VERSION_MIN_MACOSX as delocate reads it (an arm64 slice: no
  macOS before 11 runs one, so a tag below 11.0 means 11.0 there, as delocate counts it);
- ``architecture``: every Mach-O file has the slices the tag names (arm64, x86_64; universal2 both);
  a file the reader refuses, or named ``.dylib`` and not Mach-O, fails here;
- ``library RUNPATH``: every LC_RPATH entry is ``@loader_path``- or ``@executable_path``-relative
  (the interpreter, PREFIX/bin) and stays inside the installed environment; an absolute entry,
  one into a build tree or one that climbs out fails, naming the file and the entry
  (executorch#21743: 1.4.0 searched the CI's conda and build tree);
- ``libraries resolve``: every LC_LOAD_DYLIB is found: a system library (``/usr/lib``, ``/System``);
  in the wheel through ``@loader_path`` or an ``@rpath`` entry (its own, or, for a library loaded
  by others, theirs: dyld searches the rpaths of every image on the way to it); in the folder of a
  declared dependency (``torch/lib`` for torch). A FAIL names the file and the name (executorch#14421).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from smoke.checks import installed, shipped
from smoke.readers import elf, native
from smoke.readers.systems import MACHO, MACOS
from smoke.readers.wheel import Providers
from smoke.results import CheckResult, failed, passed
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
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
    measured = {"wanted": wanted, "found": sorted({a for f in binaries.machos for a in f.architectures})}
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


def check_rpaths(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = RUNPATH.name
    binaries = _loadable(wheel)
    problems = []
    for f in binaries.machos:
        entries = dict.fromkeys(e for s in f.slices for e in s.rpaths)
        bad = sorted(((e, why) for e in entries if (why := entry_problem(f.path, e))), key=lambda i: i[1] != "a build-tree folder")
        if bad:
            shown = ", ".join(f"{e!r} ({why})" for e, why in bad[:2]) + (f" and {len(bad) - 2} more" if len(bad) > 2 else "")
            problems.append(f"{f.path} LC_RPATH has {len(bad)} entries outside the install: {shown}")
    measured = {"libraries": len(binaries.machos),
                "entries": {f.path: list(dict.fromkeys(e for s in f.slices for e in s.rpaths)) for f in binaries.machos
                            if any(s.rpaths for s in f.slices)}}
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, **measured)
    return passed(name, f"{len(binaries.machos)} Mach-O files, every LC_RPATH entry @loader_path-relative inside the environment",
                  **measured)


def is_extension_module(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".so") and (".cpython-" in name or name.endswith(".abi3.so"))


def check_dylibs_resolve(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = RESOLVE.name
    binaries = _loadable(wheel)
    loadable = {posixpath.normpath(f.path) for f in binaries.machos
                if any(s.filetype in ("dylib", "bundle") for s in f.slices)}
    providers = Providers(wheel, "arm64" if "arm64" in row.machine else "x86_64", MACOS)
    by_name: dict[str, list] = {}
    for f in binaries.machos:
        by_name.setdefault(PurePosixPath(f.path).name, []).append(f)

    def folders(f) -> list[str]:
        return [t for e in dict.fromkeys(e for s in f.slices for e in s.rpaths) if not entry_problem(f.path, e)
                and (t := resolve(f.path, e)) is not None]

    loaders: dict[str, list] = {}  # path -> the files whose @rpath names lead to it by file name
    for f in binaries.machos:
        for s in f.slices:
            for dylib in s.dylibs:
                for target in by_name.get(PurePosixPath(dylib).name, ()):
                    if target is not f:
                        loaders.setdefault(target.path, []).append(f)

    def found_via(f, leaf: str, seen: frozenset[str]) -> str | None:
        """Where @rpath/leaf is found for f: its own rpaths, else (not an extension module) its loaders'."""
        for folder in folders(f):
            if posixpath.normpath(posixpath.join(folder, leaf)) in loadable:
                return "in the wheel"
            if (who := providers(folder)) not in (None, "the wheel") and (folder.split("/", 1)[0] != "torch" or leaf in TORCH_DYLIBS):
                return f"{who} (declared), in {folder}"
        if is_extension_module(f.path) or f.path in seen:
            return None
        via = [found_via(loader, leaf, seen | {f.path}) for loader in loaders.get(f.path, ())]
        return via[0] if via and all(via) else None

    found, unresolved = {}, []
    for f in binaries.machos:
        for s in f.slices:
            for dylib in dict.fromkeys(s.dylibs):
                if dylib == s.install_name:
                    continue
                how = None
                if dylib.startswith(SYSTEM_PREFIXES):
                    how = "the system's"
                elif dylib.startswith("@rpath/"):
                    how = found_via(f, dylib[len("@rpath/"):], frozenset())
                elif dylib.startswith("@loader_path/"):
                    target = resolve(f.path, posixpath.dirname(dylib))
                    if target is not None and posixpath.normpath(posixpath.join(target, PurePosixPath(dylib).name)) in loadable:
                        how = "in the wheel"
                if how is None:
                    undeclared = [t for t in folders(f) if t.split("/", 1)[0] not in ("", "..") and providers(t) is None]
                    why = ("an absolute path outside the system" if dylib.startswith("/") else
                           f"its LC_RPATH leads to {undeclared[0]}, the folder of {undeclared[0].split('/', 1)[0]}, which the "
                           f"wheel does not declare" if undeclared and dylib.startswith("@rpath/") else
                           "no LC_RPATH entry of it, or of what loads it, leads to it in the wheel or a declared dependency")
                    unresolved.append((f.path, dylib, why))
                else:
                    found[f"{f.path}: {dylib}"] = how
    measured = {"found": found, "unresolved": [f"{path}: {dylib}" for path, dylib, _why in unresolved]}
    if unresolved:
        shown = "; ".join(f"{path} needs {dylib} ({why})" for path, dylib, why in unresolved[:3])
        more = f" (and {len(unresolved) - 3} more)" if len(unresolved) > 3 else ""
        return failed(name, shown + more, **measured)
    deferred = sum(1 for how in found.values() if "(declared)" in how)
    return passed(name, f"{len(found)} LC_LOAD_DYLIB names of {len(binaries.machos)} Mach-O files found "
                        f"({deferred} in declared dependencies' folders, checked once installed)", **measured)


PLATFORM_TAG = Check("platform tag", FILE, 5, check_minimum_macos)
ARCHITECTURE = Check("architecture", FILE, 6, check_architecture)
RUNPATH = Check("library RUNPATH", FILE, 20, check_rpaths)
RESOLVE = Check("libraries resolve", FILE, 21, check_dylibs_resolve)
CHECKS = (PLATFORM_TAG, ARCHITECTURE, RUNPATH, RESOLVE)
# The macOS wheel's own checks, as every system's (smoke.checks.linux): its files, its installed environment.
FILE_CHECKS = (*CHECKS, shipped.RECORD)
ENVIRONMENT_CHECKS = installed.CHECKS
