"""Whether every library the wheel ships finds what it needs (DT_NEEDED), as far as the wheel file tells.

- ``libraries resolve``: every DT_NEEDED of every ELF file is found: in the wheel through its
  ``$ORIGIN`` entries, in the folder of a dependency the wheel declares (checked in the installed
  environment by ``check_dependency_libraries``), or as a system library every platform tag's
  policy allows (``smoke.checks.policy``).
- ``dependency libraries installed``: each need left to a declared dependency is in its folder as installed.

A FAIL names the file and what it needs.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from smoke.checks.policy import linux_tags, tag_policy
from smoke.readers import elf
from smoke.readers.wheel import Providers, Wheel
from smoke.results import CheckResult, failed, passed
from smoke.stages import ENVIRONMENT, FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.rows import Row

# The ELF interpreter is named in DT_NEEDED by some files; the kernel maps it, no search happens.
_INTERPRETER = re.compile(r"^(ld-linux[^/]*\.so\.\d+|ld64\.so\.[12]|ld-musl-[^/]+\.so\.1)$")



@dataclass(frozen=True)
class Deferred:
    """A DT_NEEDED the wheel leaves to a declared dependency: found once that dependency is installed."""

    library: str  # the needing file, relative to site-packages
    soname: str
    folders: tuple[str, ...]  # its $ORIGIN entries into the dependency's folders, relative to site-packages
    requirement: str
    # its other $ORIGIN entries outside the wheel, into packages it does not declare (main's _C: torch/lib, torch
    # being left to the user): where the need may be met instead, which the installed environment tells
    undeclared: tuple[str, ...] = ()


@dataclass(frozen=True)
class Resolution:
    found: dict[str, str]  # "file: soname" -> how
    deferred: tuple[Deferred, ...]
    unresolved: tuple[tuple[str, str, str], ...]  # (file, soname, why not)


def system_libraries(wheel: Wheel) -> tuple[list, frozenset[str]]:
    """The policies of the wheel's platform tags, and the system libraries every one of them allows."""
    policies = [p.policy for p in map(tag_policy, linux_tags(wheel)) if p.policy is not None]
    return policies, frozenset.intersection(*(p.whitelist for p in policies)) if policies else frozenset()


def resolve_needed(wheel: Wheel, row: Row, libraries: Libraries, allowed: frozenset[str]) -> Resolution:
    """Where the loader finds each DT_NEEDED of each ELF file, as far as the wheel file tells.

    ``allowed``: the system libraries every platform tag's policy allows. A need that the file's own
    search path does not reach is still met when the file is only ever loaded as a dependency, and
    every shipped file that needs it meets that need first (the loader then finds it already loaded
    by its soname); a file nothing else needs (an extension module, a library opened by path) must
    reach everything itself.
    """
    # Only a shared library the loader can map satisfies a need: not a folder, not a text file under
    # the name, not an object file (ET_REL) or an executable.
    files = {posixpath.normpath(lib.path) for lib in libraries.items if lib.kind == "ET_DYN"}
    providers = Providers(wheel, row.machine)
    by_name: dict[str, list[elf.Library]] = {}
    for lib in libraries.items:
        by_name.setdefault(PurePosixPath(lib.path).name, []).append(lib)
    needed_by: dict[str, list[elf.Library]] = {}
    for lib in libraries.items:
        for soname in lib.needed:
            for dependency in by_name.get(soname, ()):
                if dependency is not lib:
                    needed_by.setdefault(dependency.path, []).append(lib)

    own: dict[tuple[str, str], tuple[str, Any]] = {}  # (file, soname) -> ("wheel"|"system"|"driver"|"dependency", detail)
    for lib in libraries.items:
        targets = lib.origin_targets()
        for soname in lib.needed:
            if _INTERPRETER.match(soname) or "/" in soname:  # a name with a slash is opened as a path: no search
                continue
            inside = next((t for t in targets if posixpath.normpath(posixpath.join(t, soname)) in files), None)
            if inside is not None:
                own[lib.path, soname] = ("wheel", posixpath.normpath(posixpath.join(inside, soname)))
            elif soname in allowed:
                own[lib.path, soname] = ("system", soname)
            elif soname.startswith(elf.DRIVER_LIBRARIES):
                own[lib.path, soname] = ("driver", soname)
            else:
                into = [(t, p) for t in targets if (p := providers(t)) not in (None, "the wheel")]
                if into:
                    others = tuple(t for t in targets if providers(t) is None and _package_folder(t))
                    own[lib.path, soname] = ("dependency", (tuple(t for t, _ in into), into[0][1], others))

    def met(lib: elf.Library, soname: str, seen: frozenset[str]) -> bool:
        if (lib.path, soname) in own:
            return True
        if is_extension_module(lib.path):
            return False  # Python loads it by its path, whoever else lists it: it must reach its needs itself
        loaders = needed_by.get(lib.path, [])
        return bool(loaders) and lib.path not in seen and all(met(p, soname, seen | {lib.path}) for p in loaders)

    found, deferred, unresolved = {}, [], []
    for lib in libraries.items:
        for soname in lib.needed:
            if _INTERPRETER.match(soname):
                continue
            how = own.get((lib.path, soname))
            if "/" in soname:
                unresolved.append((lib.path, soname, "a name with a '/' is opened relative to the working directory, "
                                                     "with no search"))
            elif how is None:
                if met(lib, soname, frozenset()):
                    found[f"{lib.path}: {soname}"] = "already loaded by the shipped files that load it"
                else:
                    unresolved.append((lib.path, soname, _why_not(providers, lib)))
            elif how[0] == "dependency":
                folders, requirement, others = how[1]
                deferred.append(Deferred(lib.path, soname, folders, requirement, others))
                # which package holds it the wheel file does not tell: the installed environment does
                elsewhere = f" or {', '.join(others)} (not declared)" if others else ""
                declared = "" if requirement.endswith("(user-supplied)") else " (declared)"
                found[f"{lib.path}: {soname}"] = f"{requirement}{declared}, in {folders[0]}{elsewhere}: checked once installed"
            else:
                found[f"{lib.path}: {soname}"] = {"wheel": "in the wheel", "system": "a system library the policy allows",
                                                  "driver": "the GPU driver, the machine's"}[how[0]] + (
                    f": {how[1]}" if how[0] == "wheel" else "")
    return Resolution(found, tuple(deferred), tuple(unresolved))


def is_extension_module(path: str) -> bool:
    """A Python extension module (``*.cpython-311-x86_64-linux-gnu.so``, ``*.abi3.so``): imported by its path."""
    name = PurePosixPath(path).name
    return name.endswith(".so") and (".cpython-" in name or name.endswith(".abi3.so"))


# Folders of an installation prefix, not packages: an entry into one names no dependency to declare.
_PREFIX_FOLDERS = ("lib", "lib64", "bin", "include", "share")


def _package_folder(target: str) -> bool:
    """An $ORIGIN target into a package's folder (``torch/lib``), not into an installation prefix's (``lib``)."""
    top = target.split("/", 1)[0]
    return bool(target) and top.isidentifier() and top not in _PREFIX_FOLDERS


def _why_not(providers: Providers, lib: elf.Library) -> str:
    """Why the loader will not find it: an entry into a package the wheel does not declare, or nowhere."""
    undeclared = sorted({t.split("/", 1)[0] for t in lib.origin_targets() if t and providers(t) is None
                         and t.split("/", 1)[0].isidentifier() and t.split("/", 1)[0] not in _PREFIX_FOLDERS})
    if undeclared:
        return (f"its {lib.tag} leads into {', '.join(f'{top}/' for top in undeclared)}, the folder of a package the wheel "
                f"does not declare (Requires-Dist), so pip installs none: declare {', '.join(undeclared)}")
    where = f"where its {lib.tag} {':'.join(lib.search_path)} leads" if lib.search_path else "(it has no RUNPATH)"
    return f"not in the wheel {where}, not in a declared dependency, and not a system library the tag's policy allows"


def check_libraries_resolve(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """Every DT_NEEDED of every ELF file is in the wheel (through $ORIGIN), in a declared dependency's
    folder, or a system library every platform tag's policy allows."""
    name = LIBRARIES_RESOLVE.name
    policies, allowed = system_libraries(wheel)
    resolution = resolve_needed(wheel, row, libraries, allowed)
    grouped: dict[tuple[str, str], list[str]] = {}
    for path, soname, why in resolution.unresolved:
        grouped.setdefault((path, why), []).append(soname)
    problems = [f"{path} needs {', '.join(sonames)}: {why}" for (path, why), sonames in grouped.items()]
    counts: dict[str, int] = {}
    for how in resolution.found.values():
        key = how.split(":")[0].split(" (declared)")[0]
        key = "declared dependencies" if " (declared)" in how else "user-supplied (the gate's policy)" if "(user-supplied)" in how else key
        counts[key] = counts.get(key, 0) + 1
    measured = {"needed": len(resolution.found) + len(resolution.unresolved), "found": resolution.found,
                "deferred": [d.__dict__ for d in resolution.deferred], "system_allowed_by": [p.name for p in policies]}
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, **measured)
    said = ", ".join(f"{n} {key}" for key, n in counts.items())
    checked = "; the declared dependencies' ones are checked once installed" if resolution.deferred else ""
    return passed(name, f"{len(resolution.found)} needed libraries found: {said}{checked}", **measured)


def check_dependency_libraries(wheel: Wheel, row: Row, facts: dict[str, Any], libraries: Libraries) -> CheckResult:
    """Each DT_NEEDED the wheel leaves to a declared dependency is in that dependency's folder as installed."""
    name = DEPENDENCY_LIBRARIES.name
    _policies, allowed = system_libraries(wheel)
    deferred = resolve_needed(wheel, row, libraries, allowed).deferred
    sites = [Path(facts[k]) for k in ("purelib", "platlib") if k in facts]
    if not sites:
        return failed(name, f"the environment's site-packages is unknown: {facts.get('probe_error')}")
    # A dependency taken from another environment (--torch-from: a .pth file) is on sys.path, not in
    # site-packages: its folder there stands in for the one pip would have made.
    sites += [Path(p) for p in facts.get("paths", ()) if Path(p) not in sites]
    problems, found = [], {}

    def where(folders: tuple[str, ...], soname: str) -> Path | None:
        return next((site / folder / soname for folder in folders for site in sites
                     if (site / folder.split("/", 1)[0]).is_dir() and (site / folder / soname).exists()), None)

    for item in deferred:
        hit = where(item.folders, item.soname)
        if hit is None and (other := where(item.undeclared, item.soname)) is not None:
            # there, but in a package the wheel does not declare: a pip install brings none (the caller's, here)
            top = other.relative_to(next(s for s in sites if other.is_relative_to(s))).parts[0]
            problems.append(f"{item.library} needs {item.soname}, found only in {top}/ ({other.parent}), a package the wheel "
                            f"does not declare (Requires-Dist): declare {top}")
        elif hit is None:
            problems.append(f"{item.library} needs {item.soname}, not in {', '.join(item.folders + item.undeclared)} of the "
                            f"installed {item.requirement}")
        else:
            found[f"{item.library}: {item.soname}"] = str(hit)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, found=found)
    if not deferred:
        return passed(name, "no shipped file needs a library of a declared dependency", found=found)
    providers = sorted({d.requirement for d in deferred})
    return passed(name, f"{len(found)} libraries found in the installed {', '.join(providers)}", found=found)


LIBRARIES_RESOLVE = Check("libraries resolve", FILE, 21, check_libraries_resolve)
DEPENDENCY_LIBRARIES = Check("dependency libraries installed", ENVIRONMENT, 25, check_dependency_libraries)
FILE_CHECKS = (LIBRARIES_RESOLVE,)
ENVIRONMENT_CHECKS = (DEPENDENCY_LIBRARIES,)
