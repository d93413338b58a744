"""Whether every library the wheel ships finds what it needs (DT_NEEDED, and the symbols it can see), as far as the
wheel file tells.

- ``libraries resolve``: every DT_NEEDED is found in the wheel through ``$ORIGIN``, in a declared dependency's
  folder where its wheels the gate read ship the file (``smoke/readers/dependency_files.json``), or as a system
  library every tag's policy allows; one left to an unread dependency is judged end to end. Every undefined symbol
  of ExecuTorch's namespaces is defined by the file or a shipped library it loads.
- ``dependency libraries installed``: each need left to a declared dependency is in its folder as installed.

A FAIL names the file and what it needs.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from smoke.checks.kinds import EnvironmentCheck, FileCheck
from smoke.checks.owners import load_groups
from smoke.checks.policy import linux_tags, tag_policy
from smoke.errors import NoTorchPairing
from smoke.readers import elf, pairing, releases
from smoke.readers.wheel import Providers, Wheel, cuda_train
from smoke.results import CheckResult, failed, passed, skipped
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
    # (file, soname, why): needs left to a dependency whose wheels the gate has not read, judged only end to end
    unjudged: tuple[tuple[str, str, str], ...] = ()
    kinds: dict[str, str] = field(default_factory=dict)  # "file: soname" -> where it was found, as counted (FOUND_IN)


# Where a need was found, as ``libraries resolve`` counts them.
FOUND_IN = {"wheel": "in the wheel", "system": "a system library the policy allows", "driver": "the GPU driver, the machine's",
            "loaded": "already loaded by the shipped files that load it", "declared": "declared dependencies",
            "user-supplied": "user-supplied (the gate's policy)"}


@dataclass(frozen=True)
class Shipped:
    """What the gate knows a dependency ships, for one wheel and row: the wheels of it it has read that stand for it
    (``smoke/readers/dependency_files.json``), and those in words, or why there are none."""

    wheels: tuple[releases.DependencyWheel, ...]
    said: str  # "torch 2.14 (torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl)", or why none was read


class Known:
    """What each declared dependency (or the torch the policy leaves to the user) ships, as far as the gate has read
    its wheels: torch by the line the wheel pairs with, for the row's machine and a +cuXXX wheel's CUDA train (a CPU
    build: every torch build read must ship the need); another package by the versions its requirement admits."""

    def __init__(self, wheel: Wheel, row: Row, providers: Providers) -> None:
        self.wheel, self.machine, self.train = wheel, row.machine, cuda_train(wheel)
        self.declared = providers.declared
        try:
            self.torch_line: str | None = pairing.pair(wheel).torch
            self.pairing_error = ""
        except NoTorchPairing as exc:
            self.torch_line, self.pairing_error = None, str(exc)
        self._seen: dict[str, tuple[Shipped, ...]] = {}

    def of(self, target: str, name: str) -> tuple[Shipped, ...]:
        """What is known of the package(s) that may hold ``target``, provided by the distribution ``name``
        (``Providers.project``): one declared package; every declared nvidia-* package for nvidia/, which they share."""
        top = target.split("/", 1)[0]
        key = f"{top} {name}"
        if key not in self._seen:
            if canonicalize_name(top) == "torch":
                self._seen[key] = (self.torch(),)
            else:
                reqs = [r for r in self.declared if (top == "nvidia" and canonicalize_name(r.name).startswith("nvidia-"))
                        or canonicalize_name(r.name) == canonicalize_name(name)]
                self._seen[key] = tuple(self._package(r) for r in reqs) or (Shipped((), f"{name}: no wheel of it read"),)
        return self._seen[key]

    def torch(self) -> Shipped:
        """What the torch this wheel pairs with ships, for the row's machine (and the wheel's CUDA train)."""
        if self.torch_line is None:
            return Shipped((), f"the gate pairs no torch line with executorch {self.wheel.version} ({self.pairing_error})")
        build = f" {self.train}" if self.train else ""
        wheels = tuple(w for w in releases.dependency_wheels("torch") if w.line == self.torch_line
                       and self.machine in w.machines and (self.train is None or w.variant == self.train))
        if not wheels:
            return Shipped((), f"the gate has read no torch {self.torch_line}{build} wheel for {self.machine} "
                               "(smoke/readers/dependency_files.json), the torch this release pairs with")
        return Shipped(wheels, f"torch {self.torch_line}{build} ({', '.join(w.wheel for w in wheels)})")

    def _package(self, req) -> Shipped:
        name = canonicalize_name(req.name)
        wheels = tuple(w for w in releases.dependency_wheels(name)
                       if self.machine in w.machines and req.specifier.contains(w.version, prereleases=True))
        if not wheels:
            return Shipped((), f"the gate has read no wheel of {req} for {self.machine} (smoke/readers/dependency_files.json)")
        return Shipped(wheels, f"{req.name} ({', '.join(w.wheel for w in wheels)})")


def system_libraries(wheel: Wheel) -> tuple[list, frozenset[str]]:
    """The policies of the wheel's platform tags, and the system libraries every one of them allows."""
    policies = [p.policy for p in map(tag_policy, linux_tags(wheel)) if p.policy is not None]
    return policies, frozenset.intersection(*(p.whitelist for p in policies)) if policies else frozenset()


def resolve_needed(wheel: Wheel, row: Row, libraries: Libraries, allowed: frozenset[str]) -> Resolution:
    """Where the loader finds each DT_NEEDED of each ELF file, as far as the wheel file tells.

    ``allowed``: the system libraries the tags' policies allow. A need the file misses is met if every shipped file
    loading it meets it (not so for extension modules); a dependency holds it only where the gate's read wheels of it
    ship the file.
    """
    # Only a shared library the loader can map satisfies a need: not a folder, not a text file under
    # the name, not an object file (ET_REL) or an executable.
    files = {posixpath.normpath(lib.path) for lib in libraries.items if lib.kind == "ET_DYN"}
    providers = Providers(wheel, row.machine)
    known = Known(wheel, row, providers)
    loaders_of = needed_by(libraries)

    # (file, soname) -> ("wheel"|"system"|"driver"|"dependency"|"unjudged", detail)
    own: dict[tuple[str, str], tuple[str, Any]] = {}
    leads: dict[tuple[str, str], tuple] = {}  # (file, soname) -> its entries into declared packages, for `deferred`
    not_shipped: dict[tuple[str, str], tuple[str, ...]] = {}  # (file, soname) -> "FOLDER of WHAT" read and lacking it
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
                if not into:
                    continue
                others = tuple(t for t in targets if providers(t) is None and _package_folder(t))
                leads[lib.path, soname] = (tuple(t for t, _ in into), into[0][1], others)
                placed, unknown, lacking = [], [], []
                for target, requirement in into:
                    for shipped in known.of(target, providers.project(target) or ""):
                        holding = [w for w in shipped.wheels if posixpath.join(target, soname) in w.files]
                        if not shipped.wheels:
                            unknown.append(shipped.said)
                        elif len(holding) == len(shipped.wheels):
                            placed.append((target, requirement, shipped.said))
                        elif holding:
                            unknown.append(f"{shipped.said}: only {', '.join(w.wheel for w in holding)} ships {target}/{soname}")
                        else:
                            lacking.append(f"{target} as {shipped.said} ships it")
                if placed:
                    own[lib.path, soname] = ("dependency", placed[0])
                elif unknown:
                    own[lib.path, soname] = ("unjudged", "; ".join(dict.fromkeys(unknown)))
                else:
                    not_shipped[lib.path, soname] = tuple(lacking)

    def met(lib: elf.Library, soname: str, seen: frozenset[str]) -> str | None:
        """"met", "unjudged" (met only where a need left to an unread dependency is), or None."""
        if (lib.path, soname) in own:
            return "unjudged" if own[lib.path, soname][0] == "unjudged" else "met"
        if is_extension_module(lib.path):
            return None  # Python loads it by its path, whoever else lists it: it must reach its needs itself
        loaders = loaders_of.get(lib.path, [])
        if not loaders or lib.path in seen:
            return None
        ways = [met(p, soname, seen | {lib.path}) for p in loaders]
        return None if None in ways else "unjudged" if "unjudged" in ways else "met"

    found, deferred, unresolved, unjudged, kinds = {}, [], [], [], {}
    for lib in libraries.items:
        for soname in lib.needed:
            if _INTERPRETER.match(soname):
                continue
            how = own.get((lib.path, soname))
            if (lib.path, soname) in leads:
                folders, requirement, others = leads[lib.path, soname]
                deferred.append(Deferred(lib.path, soname, folders, requirement, others))
            if "/" in soname:
                unresolved.append((lib.path, soname, "a name with a '/' is opened relative to the working directory, "
                                                     "with no search"))
            elif how is None:
                way = met(lib, soname, frozenset())
                if way == "met":
                    found[f"{lib.path}: {soname}"] = FOUND_IN["loaded"]
                    kinds[f"{lib.path}: {soname}"] = "loaded"
                elif way == "unjudged":
                    unjudged.append((lib.path, soname, "left to the shipped files that load it, which leave it to a "
                                                       "dependency the gate has not read"))
                else:
                    unresolved.append((lib.path, soname, _why_not(providers, lib, not_shipped.get((lib.path, soname), ()))))
            elif how[0] == "unjudged":
                unjudged.append((lib.path, soname, how[1]))
            elif how[0] == "dependency":
                target, requirement, said = how[1]
                others = leads[lib.path, soname][2]
                # which package holds it as installed the wheel file does not tell: the installed environment does
                elsewhere = f" or {', '.join(others)} (not declared)" if others else ""
                supplied = requirement.endswith("(user-supplied)")
                declared = "" if supplied else " (declared)"
                found[f"{lib.path}: {soname}"] = (f"{requirement}{declared}, in {target}{elsewhere}, as {said} ships it: "
                                                  "checked once installed")
                kinds[f"{lib.path}: {soname}"] = "user-supplied" if supplied else "declared"
            else:
                found[f"{lib.path}: {soname}"] = FOUND_IN[how[0]] + (f": {how[1]}" if how[0] == "wheel" else "")
                kinds[f"{lib.path}: {soname}"] = how[0]
    return Resolution(found, tuple(deferred), tuple(unresolved), tuple(unjudged), kinds)


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


def _why_not(providers: Providers, lib: elf.Library, lacking: tuple[str, ...] = ()) -> str:
    """Why the loader will not find it: an entry into a package the wheel does not declare, or nowhere (``lacking``:
    the declared packages' folders it leads into, whose wheels the gate has read without the file)."""
    undeclared = sorted({t.split("/", 1)[0] for t in lib.origin_targets() if t and providers(t) is None
                         and t.split("/", 1)[0].isidentifier() and t.split("/", 1)[0] not in _PREFIX_FOLDERS})
    if undeclared:
        return (f"its {lib.tag} leads into {', '.join(f'{top}/' for top in undeclared)}, the folder of a package the wheel "
                f"does not declare (Requires-Dist), so pip installs none: declare {', '.join(undeclared)}")
    where = f"where its {lib.tag} {':'.join(lib.search_path)} leads" if lib.search_path else "(it has no RUNPATH)"
    dependency = f"not in {'; '.join(dict.fromkeys(lacking))}" if lacking else "not in a declared dependency"
    return f"not in the wheel {where}, {dependency}, and not a system library the tag's policy allows"


# ExecuTorch's own C++ namespaces, mangled: executorch:: and its older torch::executor:: (functions, const member
# functions, vtables and typeinfo). Their only definers are ExecuTorch's libraries, so an undefined one is judged
# here: no system library defines one, and no torch library does (measured on the torch wheels dependency_files.json
# names, 2.13.0+cpu, and 2.13.0 and 2.14.1 for x86_64 and aarch64: none of their torch/lib libraries defines one).
# Every other undefined symbol may be defined by a library the gate does not read (libc, libstdc++, torch's):
# those are judged end to end, where the loader binds them (upstream's test_shared_libraries.py runs `ldd -r`).
OWN_SYMBOL = re.compile(r"^_Z(?:T[VIS])?N[rVKO]*(?:10executorch|5torch8executor)")


def unmet_symbols(libraries: Libraries, skip: frozenset[str] = frozenset()) -> tuple[dict[str, list[str]], int, int]:
    """Each file's undefined symbols of ExecuTorch's namespaces that the loader cannot bind from the shipped libraries.

    Its own scope (it and what it loads) must define them or, for a library only others load, every loading scope must
    (1.2.0's AOTI shims bind from ``_portable_lib``). Also counts symbols judged and left to unread libraries; files in
    ``skip`` are not judged."""
    groups = load_groups(libraries)
    loaders = needed_by(libraries)
    defined: dict[str, set[str]] = {}

    def scope(lib: elf.Library) -> set[str]:
        if lib.path not in defined:
            defined[lib.path] = set().union(*(member.exported for member in groups[lib.path]))
        return defined[lib.path]

    def roots(start: elf.Library) -> list[elf.Library]:
        """The files that load it, directly or through others, and are loaded by name: nothing loads them, or Python
        imports them by their path. None for a file loaded by name itself."""
        if is_extension_module(start.path):
            return []
        seen, todo, found = {start.path}, list(loaders.get(start.path, ())), []
        while todo:
            lib = todo.pop()
            if lib.path in seen:
                continue
            seen.add(lib.path)
            above = loaders.get(lib.path, [])
            todo.extend(above)
            if not above or is_extension_module(lib.path):
                found.append(lib)
        return found

    unmet: dict[str, list[str]] = {}
    judged = left = 0
    for start in libraries.items:
        ours = {symbol for symbol in start.undefined if OWN_SYMBOL.match(symbol)}
        judged, left = judged + len(ours), left + len(start.undefined) - len(ours)
        if not ours or start.path in skip:
            continue
        missing = ours - scope(start)
        if missing and (loading := roots(start)):
            missing = set().union(*(missing - scope(root) for root in loading))
        if missing:
            unmet[start.path] = sorted(missing)
    return unmet, judged, left


def needed_by(libraries: Libraries) -> dict[str, list[elf.Library]]:
    """Each shipped file's loaders: the shipped files that list it among their DT_NEEDED (by file name), itself left out."""
    by_name: dict[str, list[elf.Library]] = {}
    for lib in libraries.items:
        by_name.setdefault(PurePosixPath(lib.path).name, []).append(lib)
    loaders: dict[str, list[elf.Library]] = {}
    for lib in libraries.items:
        for soname in lib.needed:
            for dependency in by_name.get(soname, ()):
                if dependency is not lib:
                    loaders.setdefault(dependency.path, []).append(lib)
    return loaders


def check_libraries_resolve(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """Every DT_NEEDED of every ELF file is in the wheel (through $ORIGIN), in a declared dependency's
    folder where that dependency's wheels ship it, or a system library every platform tag's policy allows; every
    undefined symbol of ExecuTorch's namespaces is defined by a shipped library loaded with it."""
    name = LIBRARIES_RESOLVE.name
    policies, allowed = system_libraries(wheel)
    resolution = resolve_needed(wheel, row, libraries, allowed)
    grouped: dict[tuple[str, str], list[str]] = {}
    for path, soname, why in resolution.unresolved:
        grouped.setdefault((path, why), []).append(soname)
    problems = [f"{path} needs {', '.join(sonames)}: {why}" for (path, why), sonames in grouped.items()]
    unmet, judged, left = unmet_symbols(libraries, frozenset(path for path, _soname, _why in resolution.unresolved))
    problems += [f"{path} needs {len(symbols)} symbol{'s' if len(symbols) > 1 else ''} of ExecuTorch's that neither it nor "
                 f"a shipped library loaded with it defines ({', '.join(symbols[:2])}{' ...' if len(symbols) > 2 else ''}): the "
                 f"load fails on {'them' if len(symbols) > 1 else 'it'} (undefined symbol)" for path, symbols in unmet.items()]
    counts: dict[str, int] = {}
    for kind in resolution.kinds.values():
        counts[FOUND_IN[kind]] = counts.get(FOUND_IN[kind], 0) + 1
    measured = {"needed": len(resolution.found) + len(resolution.unresolved) + len(resolution.unjudged),
                "found": resolution.found, "deferred": [d.__dict__ for d in resolution.deferred],
                "unjudged": {f"{path}: {soname}": why for path, soname, why in resolution.unjudged},
                "symbols_judged": judged, "symbols_unmet": unmet, "symbols_left_to_the_loader": left,
                "system_allowed_by": [p.name for p in policies]}
    unjudged: dict[str, tuple[dict[str, None], set[str]]] = {}  # why -> (sonames, the files that need them)
    for path, soname, why in resolution.unjudged:
        sonames, needing = unjudged.setdefault(why, ({}, set()))
        sonames[soname] = None
        needing.add(path)
    judged_later = "; ".join(f"{', '.join(list(sonames)[:4])}{f' and {len(sonames) - 4} more' if len(sonames) > 4 else ''}, "
                             f"needed by {len(needing)} file{'s' if len(needing) > 1 else ''}: {why}"
                             for why, (sonames, needing) in unjudged.items())
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        also = f"; {len(resolution.unjudged)} more needs judged only end to end" if resolution.unjudged else ""
        return failed(name, "; ".join(problems[:3]) + more + also, problems=problems, **measured)
    said = ", ".join(f"{n} {key}" for key, n in counts.items())
    checked = "; the declared dependencies' ones are checked once installed" if resolution.deferred else ""
    symbols = (f"; {judged} undefined symbols of ExecuTorch's namespaces, each defined by a shipped library loaded with them "
               f"(the other {left} are the loader's to bind, judged end to end)")
    if resolution.unjudged:
        return skipped(name, f"{len(resolution.unjudged)} needs judged only end to end, not here: {judged_later}; the other "
                             f"{len(resolution.found)} found: {said}{symbols}", **measured)
    return passed(name, f"{len(resolution.found)} needed libraries found: {said}{checked}{symbols}", **measured)


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
FILE_CHECKS: tuple[FileCheck, ...] = (LIBRARIES_RESOLVE,)
ENVIRONMENT_CHECKS: tuple[EnvironmentCheck, ...] = (DEPENDENCY_LIBRARIES,)
