"""What the wheel's platform tags promise, and whether its ELF files keep the promise.

A ``manylinux_2_28_x86_64`` wheel says: pip installs it on any x86_64 Linux with glibc 2.28 or
newer, and it loads there with nothing but itself and its declared dependencies. These checks read
the wheel file alone (no install, no GPU), with auditwheel's policy tables (pinned in
requirements-gate.txt; the tables are never retyped here) and auditwheel's ELF readers:

- ``platform tag``: every ELF file needs no symbol version (GLIBC_, GLIBCXX_, CXXABI_, GCC_ ...)
  newer than its tag's policy allows, and no symbol the policy blacklists; a ``linux_*`` tag is
  not publishable at all;
- ``architecture``: every ELF file is of the tag's machine and class (and needs no x86-64 level
  above the baseline the tag promises);
- ``libraries resolve``: every DT_NEEDED of every ELF file is found: in the wheel through its
  ``$ORIGIN`` entries, in the folder of a dependency the wheel declares (checked in the installed
  environment by ``check_dependency_libraries``), or as a system library the policy allows.

A FAIL names the file, what it needs and, for a tag, the tag that would be true.
"""

from __future__ import annotations

import functools
import logging
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from smoke import elf
from smoke.errors import GateError
from smoke.pipeline import ENVIRONMENT, FILE, Check
from smoke.results import CheckResult, failed, passed
from smoke.wheel import Wheel, platform_machine

if TYPE_CHECKING:
    from auditwheel.policy import Policy, WheelPolicies

    from smoke.rows import Row
    from smoke.shipped import Libraries

# The ELF interpreter is named in DT_NEEDED by some files; the kernel maps it, no search happens.
_INTERPRETER = re.compile(r"^(ld-linux[^/]*\.so\.\d+|ld64\.so\.[12]|ld-musl-[^/]+\.so\.1)$")


# auditwheel logs, at debug level, every policy a wheel's symbols do not meet while it looks for the one
# that fits; under nox (whose logging shows debug lines) that is a screenful per wheel.
logging.getLogger("auditwheel").setLevel(logging.WARNING)


class UnknownPolicy(GateError):
    """A platform tag the pinned auditwheel has no policy for: the gate cannot judge it."""


@dataclass(frozen=True)
class TagPolicy:
    tag: str  # the wheel's platform tag, as written: manylinux_2_28_x86_64, manylinux2014_x86_64
    policy: Policy | None  # None for linux_*: no policy makes it publishable
    policies: WheelPolicies  # every policy of the tag's libc and architecture (for the tag that would be true)
    architecture: str  # auditwheel's name: x86_64, aarch64


def linux_tags(wheel: Wheel) -> list[str]:
    return sorted({tag.platform for tag in wheel.tags if tag.platform.startswith(("manylinux", "musllinux", "linux_"))})


@functools.lru_cache(maxsize=None)  # one platform tag's policy table is read once per process
def tag_policy(tag: str) -> TagPolicy:
    """auditwheel's policy for one platform tag (its legacy aliases too: manylinux2014 is manylinux_2_17)."""
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.policy import WheelPolicies

    machine = platform_machine(tag)
    try:
        architecture = Architecture(machine)
    except ValueError:
        raise UnknownPolicy(f"platform tag {tag!r} names architecture {machine!r}, which auditwheel {auditwheel_version()} "
                            "does not know; rebuild the wheel for a manylinux or musllinux platform") from None
    if tag.startswith("musllinux_"):
        libc, musl = Libc.MUSL, "_".join(tag.split("_")[:3])
    else:
        libc, musl = Libc.GLIBC, None
    try:
        policies = WheelPolicies(libc=libc, arch=architecture, musl_policy=musl)
    except (ValueError, AssertionError) as exc:
        raise UnknownPolicy(f"auditwheel {auditwheel_version()} has no policy for platform tag {tag!r} ({exc}); "
                            "upgrade auditwheel (pip install -U auditwheel) or fix the tag") from None
    if tag.startswith("linux_"):
        return TagPolicy(tag, None, policies, architecture.value)
    try:
        policy = policies.get_policy_by_name(tag)
    except LookupError:
        raise UnknownPolicy(f"auditwheel {auditwheel_version()} has no policy named {tag!r}: a tag newer than its tables "
                            "or not a real one; upgrade auditwheel (pip install -U auditwheel) or fix the tag") from None
    return TagPolicy(tag, policy, policies, architecture.value)


def _shipped_names(libraries: Libraries) -> set[str]:
    return {PurePosixPath(lib.path).name for lib in libraries.items}


def _version_key(symbol_version: str) -> tuple:
    """GLIBC_2.38 -> ("GLIBC", Version("2.38")), to name the newest one needed."""
    family, _, number = symbol_version.partition("_")
    try:
        return family, Version(number)
    except InvalidVersion:
        return family, Version("0")


def external_versions(lib: elf.Library, shipped: set[str]) -> dict[str, set[str]]:
    """The symbol versions a file needs from libraries the wheel does not ship, by soname."""
    needs: dict[str, set[str]] = {}
    for soname, version in lib.versions:
        if soname not in shipped:
            needs.setdefault(soname, set()).add(version)
    return needs


def too_new(needs: dict[str, set[str]], policy: Policy) -> list[str]:
    """The versions a policy does not allow, of the families it governs (GLIBC, GLIBCXX, CXXABI, GCC, ...)."""
    bad = set()
    for versions in needs.values():
        for version in versions:
            family, _, number = version.partition("_")
            if family in policy.symbol_versions and number not in policy.symbol_versions[family]:
                bad.add(version)
    return sorted(bad, key=_version_key)


FAMILIES = ("GLIBC", "GLIBCXX", "CXXABI", "GCC")  # the order a message names them in; others after


def newest_per_family(versions, governed=None) -> list[str]:
    """The newest version of each family: [GLIBC_2.27, GLIBCXX_3.4.22, CXXABI_1.3.11]; with ``governed``,
    of the families a policy governs only (a library's own version names, libcudart.so.13, are not)."""
    newest: dict[str, str] = {}
    for version in versions:
        family = _version_key(version)[0]
        if governed is not None and family not in governed:
            continue
        if family not in newest or _version_key(version) > _version_key(newest[family]):
            newest[family] = version
    return [newest[f] for f in sorted(newest, key=lambda f: (FAMILIES.index(f) if f in FAMILIES else len(FAMILIES), f))]


def true_tag(policies: WheelPolicies, needs: dict[str, set[str]]) -> str:
    """The highest-priority policy whose symbol versions cover ``needs``: the tag that would be true."""
    return policies.versioned_symbols_policy(needs).name


def honest_tag(libraries: Libraries) -> tuple[str | None, list[str]]:
    """The manylinux tag auditwheel's policy gives for what the ELF files need (None if their
    architectures are none or several), and the newest version of each family they need."""
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.policy import WheelPolicies

    shipped = _shipped_names(libraries)
    needs: dict[str, set[str]] = {}
    for lib in libraries.items:
        for soname, versions in external_versions(lib, shipped).items():
            needs.setdefault(soname, set()).update(versions)
    architectures = {lib.architecture for lib in libraries.items}
    if len(architectures) != 1 or None in architectures:
        return None, newest_per_family(v for versions in needs.values() for v in versions)
    policies = WheelPolicies(libc=Libc.GLIBC, arch=Architecture(architectures.pop()))
    newest = newest_per_family((v for versions in needs.values() for v in versions), policies.highest.symbol_versions)
    return true_tag(policies, needs), newest


def check_platform_tag(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """Every ELF file needs no symbol version newer, and no symbol other, than its platform tag's policy allows."""
    name = PLATFORM_TAG.name
    tags = linux_tags(wheel)
    if not tags:
        return failed(name, f"the wheel has no Linux platform tag ({', '.join(sorted({t.platform for t in wheel.tags}))})")
    shipped = _shipped_names(libraries)
    everything: dict[str, set[str]] = {}
    for lib in libraries.items:
        for soname, versions in external_versions(lib, shipped).items():
            everything.setdefault(soname, set()).update(versions)
    problems, measured = [], {"tags": tags, "files": len(libraries.items)}
    for tag in tags:
        judged = tag_policy(tag)
        would_be = true_tag(judged.policies, everything)
        measured.setdefault("true_tags", {})[tag] = would_be
        if judged.policy is None:
            problems.append(f"{tag} is not a publishable platform tag (PyPI refuses it, and pip installs it only where it "
                            f"was built): its libraries allow {would_be}; retag it (auditwheel repair)")
            continue
        for lib in libraries.items:
            needs = external_versions(lib, shipped)
            bad = too_new(needs, judged.policy)
            if bad:
                problems.append(f"{lib.path} needs {', '.join(newest_per_family(bad))}, which {tag} does not allow: "
                                f"the tag would be {true_tag(judged.policies, needs)}")
            for soname, symbols in judged.policy.blacklist.items():
                if soname in lib.needed and (used := sorted(symbols & lib.undefined)):
                    problems.append(f"{lib.path} uses {', '.join(used[:3])} of {soname}, which {tag} does not allow")
    governed = tag_policy(tags[0]).policies.highest.symbol_versions
    measured["newest"] = newest_per_family((v for versions in everything.values() for v in versions), governed)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, **measured)
    newest = ", ".join(measured["newest"]) or "no versioned symbols"
    return passed(name, f"{len(libraries.items)} ELF files within {', '.join(tags)} (newest needed: {newest})", **measured)


def check_architecture(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """Every ELF file is of the machine, class and byte order its platform tags name."""
    name = ARCHITECTURE.name
    problems = [f"{path} is named as a shared library but is not an ELF file" for path in libraries.not_elf]
    problems += list(libraries.unreadable)
    tags = linux_tags(wheel)
    wanted = {tag_policy(tag).architecture for tag in tags}
    for lib in libraries.items:
        if lib.architecture is None:
            problems.append(f"{lib.path} is {lib.machine}, an architecture no platform tag names")
        elif lib.architecture not in wanted:
            problems.append(f"{lib.path} is {lib.architecture} ({lib.machine}), the tag {', '.join(tags)} says "
                            f"{', '.join(sorted(wanted))}")
        elif lib.isa_level is not None and lib.isa_level not in wanted:
            problems.append(f"{lib.path} needs an {lib.isa_level} CPU (its GNU property note), the tag "
                            f"{', '.join(tags)} promises any {', '.join(sorted(wanted))}")
    measured = {"architectures": sorted(wanted), "files": len(libraries.items),
                "found": sorted({lib.architecture or lib.machine for lib in libraries.items})}
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, **measured)
    return passed(name, f"{len(libraries.items)} ELF files, each {', '.join(sorted(wanted))}", **measured)


# --- every DT_NEEDED resolves ---------------------------------------------------------------


class Providers:
    """Who provides site-packages/TARGET: "the wheel", a requirement the wheel declares for the row
    (by its name), or None. A declared package's folder is its import name (torch/ for torch,
    nvidia/ for the nvidia-* CUDA packages). Made once per wheel and row: the wheel's file list is long."""

    def __init__(self, wheel: Wheel, row: Row) -> None:
        from smoke.shipped import marker_environment

        self.tops = {PurePosixPath(f).parts[0] for f in wheel.files}
        env = marker_environment(row, wheel)
        self.declared = [req for req in wheel.requires_dist if req.marker is None or req.marker.evaluate(env)]

    def __call__(self, target: str) -> str | None:
        top = target.split("/", 1)[0]
        if target == "" or top in self.tops:
            return "the wheel"
        for req in self.declared:
            project = canonicalize_name(req.name)
            if project == canonicalize_name(top) or (top == "nvidia" and project.startswith("nvidia-")):
                return req.name
        return None


def provider(wheel: Wheel, row: Row, target: str) -> str | None:
    return Providers(wheel, row)(target)


@dataclass(frozen=True)
class Deferred:
    """A DT_NEEDED the wheel leaves to a declared dependency: found once that dependency is installed."""

    library: str  # the needing file, relative to site-packages
    soname: str
    folders: tuple[str, ...]  # its $ORIGIN entries into the dependency's folders, relative to site-packages
    requirement: str


@dataclass(frozen=True)
class Resolution:
    found: dict[str, str]  # "file: soname" -> how
    deferred: tuple[Deferred, ...]
    unresolved: tuple[tuple[str, str, str], ...]  # (file, soname, why not)


def resolve_needed(wheel: Wheel, row: Row, libraries: Libraries, allowed: frozenset[str]) -> Resolution:
    """Where the loader finds each DT_NEEDED of each ELF file, as far as the wheel file tells.

    ``allowed``: the system libraries every platform tag's policy allows. A need that the file's own
    search path does not reach is still met when the file is only ever loaded as a dependency, and
    every shipped file that needs it meets that need first (the loader then finds it already loaded
    by its soname); a file nothing else needs (an extension module, a library opened by path) must
    reach everything itself.
    """
    files = {posixpath.normpath(f) for f in wheel.files}
    providers = Providers(wheel, row)
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
            if _INTERPRETER.match(soname):
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
                    own[lib.path, soname] = ("dependency", (tuple(t for t, _ in into), into[0][1]))

    def met(lib: elf.Library, soname: str, seen: frozenset[str]) -> bool:
        if (lib.path, soname) in own:
            return True
        loaders = needed_by.get(lib.path, [])
        return bool(loaders) and lib.path not in seen and all(met(p, soname, seen | {lib.path}) for p in loaders)

    found, deferred, unresolved = {}, [], []
    for lib in libraries.items:
        for soname in lib.needed:
            if _INTERPRETER.match(soname):
                continue
            how = own.get((lib.path, soname))
            if how is None:
                if met(lib, soname, frozenset()):
                    found[f"{lib.path}: {soname}"] = "already loaded by the shipped files that load it"
                else:
                    unresolved.append((lib.path, soname, _why_not(providers, lib)))
            elif how[0] == "dependency":
                folders, requirement = how[1]
                deferred.append(Deferred(lib.path, soname, folders, requirement))
                found[f"{lib.path}: {soname}"] = f"{requirement} (declared), in {folders[0]}"
            else:
                found[f"{lib.path}: {soname}"] = {"wheel": "in the wheel", "system": "a system library the policy allows",
                                                  "driver": "the GPU driver, the machine's"}[how[0]] + (
                    f": {how[1]}" if how[0] == "wheel" else "")
    return Resolution(found, tuple(deferred), tuple(unresolved))


# Folders of an installation prefix, not packages: an entry into one names no dependency to declare.
_PREFIX_FOLDERS = ("lib", "lib64", "bin", "include", "share")


def _why_not(providers: Providers, lib: elf.Library) -> str:
    """Why the loader will not find it: an entry into a package the wheel does not declare, or nowhere."""
    undeclared = sorted({t.split("/", 1)[0] for t in lib.origin_targets() if t and providers(t) is None
                         and t.split("/", 1)[0].isidentifier() and t.split("/", 1)[0] not in _PREFIX_FOLDERS})
    if undeclared:
        return (f"its {lib.tag} leads into {', '.join(f'{top}/' for top in undeclared)}, the folder of a package the wheel "
                f"does not declare (Requires-Dist), so pip installs none: declare {', '.join(undeclared)}")
    where = f"where its {lib.tag} {':'.join(lib.search_path)} leads" if lib.search_path else "(it has no RUNPATH)"
    return f"not in the wheel {where}, not in a declared dependency, and not a system library the tag's policy allows"


def auditwheel_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("auditwheel")
    except PackageNotFoundError:
        return "(not installed)"


def check_libraries_resolve(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """Every DT_NEEDED of every ELF file is in the wheel (through $ORIGIN), in a declared dependency's
    folder, or a system library every platform tag's policy allows."""
    name = LIBRARIES_RESOLVE.name
    policies = [tag_policy(tag).policy for tag in linux_tags(wheel)]
    policies = [p for p in policies if p is not None]
    allowed = frozenset.intersection(*(p.whitelist for p in policies)) if policies else frozenset()
    resolution = resolve_needed(wheel, row, libraries, allowed)
    grouped: dict[tuple[str, str], list[str]] = {}
    for path, soname, why in resolution.unresolved:
        grouped.setdefault((path, why), []).append(soname)
    problems = [f"{path} needs {', '.join(sonames)}: {why}" for (path, why), sonames in grouped.items()]
    counts: dict[str, int] = {}
    for how in resolution.found.values():
        key = how.split(":")[0].split(" (declared)")[0]
        key = "declared dependencies" if " (declared)" in how else key
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
    policies = [p.policy for p in map(tag_policy, linux_tags(wheel)) if p.policy is not None]
    allowed = frozenset.intersection(*(p.whitelist for p in policies)) if policies else frozenset()
    deferred = resolve_needed(wheel, row, libraries, allowed).deferred
    sites = [Path(facts[k]) for k in ("purelib", "platlib") if k in facts]
    if not sites:
        return failed(name, f"the environment's site-packages is unknown: {facts.get('probe_error')}")
    # A dependency taken from another environment (--torch-from: a .pth file) is on sys.path, not in
    # site-packages: its folder there stands in for the one pip would have made.
    sites += [Path(p) for p in facts.get("paths", ()) if Path(p) not in sites]
    problems, found = [], {}
    for item in deferred:
        hit = next((site / folder / item.soname for folder in item.folders for site in sites
                    if (site / folder.split("/", 1)[0]).is_dir() and (site / folder / item.soname).exists()), None)
        if hit is None:
            problems.append(f"{item.library} needs {item.soname}, not in {', '.join(item.folders)} of the installed "
                            f"{item.requirement}")
        else:
            found[f"{item.library}: {item.soname}"] = str(hit)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, found=found)
    if not deferred:
        return passed(name, "no shipped file needs a library of a declared dependency", found=found)
    providers = sorted({d.requirement for d in deferred})
    return passed(name, f"{len(found)} libraries found in the installed {', '.join(providers)}", found=found)


PLATFORM_TAG = Check("platform tag", FILE, 5, check_platform_tag)
ARCHITECTURE = Check("architecture", FILE, 6, check_architecture)
LIBRARIES_RESOLVE = Check("libraries resolve", FILE, 21, check_libraries_resolve)
DEPENDENCY_LIBRARIES = Check("dependency libraries installed", ENVIRONMENT, 25, check_dependency_libraries)
FILE_CHECKS = (PLATFORM_TAG, ARCHITECTURE, LIBRARIES_RESOLVE)
ENVIRONMENT_CHECKS = (DEPENDENCY_LIBRARIES,)
