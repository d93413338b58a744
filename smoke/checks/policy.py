"""What the wheel's platform tags promise, and whether its ELF files keep the promise.

A ``manylinux_2_28_x86_64`` wheel installs on any x86_64 Linux with glibc 2.28 or newer and loads there with only
itself and its declared dependencies. Judged on the wheel file alone, with auditwheel's policy tables (never retyped
here) and ELF readers:

- ``platform tag``: no ELF file needs a symbol version newer than its tag's policy allows, or a blacklisted symbol;
  a ``linux_*`` tag is not publishable;
- ``architecture``: every ELF file is of the tag's machine and class, and needs no x86-64 level above its baseline.

``libraries resolve`` is ``smoke.checks.resolve``. A FAIL names the file, what it needs and the tag that would be true.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from smoke.checks.kinds import FileCheck
from smoke.errors import GateError
from smoke.readers import elf
from smoke.readers.wheel import Wheel, platform_machine
from smoke.results import CheckResult, failed, passed
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from auditwheel.policy import Policy, WheelPolicies

    from smoke.readers.elf import Libraries
    from smoke.rows import Row

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


# What every Linux system provides and the process has loaded before any wheel's library: a file the
# wheel ships under one of these names is never the one the loader binds.
_SYSTEM_CORE = ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1")


def _shipped_names(libraries: Libraries) -> set[str]:
    """The sonames the wheel ships a library for (their versions are the wheel's own, not the system's)."""
    return {name for lib in libraries.items if (name := PurePosixPath(lib.path).name) not in _SYSTEM_CORE}


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
            elif family == "GLIBC" and policy.name.startswith("musllinux"):
                bad.add(version)  # a musl system has no glibc: its policy lists no versions, so any is too new
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
    others = sorted({t.platform for t in wheel.tags} - set(tags) - {"any"})
    if others and libraries.items:
        # pip would install these Linux ELF files on that platform too
        return failed(name, f"the wheel ships {len(libraries.items)} Linux ELF files but is also tagged {', '.join(others)}",
                      tags=tags)
    shipped = _shipped_names(libraries)
    everything: dict[str, set[str]] = {}
    for lib in libraries.items:
        for soname, versions in external_versions(lib, shipped).items():
            everything.setdefault(soname, set()).update(versions)
    problems: list[str] = []
    measured: dict[str, Any] = {"tags": tags, "files": len(libraries.items)}
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
    if len(wanted) > 1:
        # pip installs the same files on each of these machines: no file can be of both
        problems.append(f"the tags {', '.join(tags)} name {len(wanted)} architectures ({', '.join(sorted(wanted))}) "
                        "for the same files")
    for lib in libraries.items:
        if lib.kind not in ("ET_DYN", "ET_EXEC"):
            problems.append(f"{lib.path} is an ELF {lib.kind} file, which the loader cannot load")
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


def auditwheel_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("auditwheel")
    except PackageNotFoundError:
        return "(not installed)"


PLATFORM_TAG = Check("platform tag", FILE, 5, check_platform_tag)
ARCHITECTURE = Check("architecture", FILE, 6, check_architecture)
CHECKS: tuple[FileCheck, ...] = (PLATFORM_TAG, ARCHITECTURE)
