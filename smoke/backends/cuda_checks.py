"""The CUDA rows' checks of the wheel file and of the environment, judged by the parent.

Of the wheel file: a ``+cuXXX`` build, the delegate's libraries where the release puts them (``LAYOUTS``), the CUDA
runtime declared in Requires-Dist, every library that links CUDA reaching it through ``$ORIGIN`` (a rule added to
``library RUNPATH``), device code for exactly the row's architectures (``ARCHS``). Of the environment: the CUDA
libraries resolve, and torch is a CUDA build of the wheel's CUDA major (its part of ``torch agrees``).
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol, cast

from smoke.readers import devicecode, releases
from smoke.readers.wheel import CUDA_LABEL, Providers, cuda_train, marker_environment, read_member, shared_objects
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import ENVIRONMENT, FILE, Check

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from smoke.backends.row import RowOf
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel

# The CUDA delegate's shared libraries, as each release's build recipe ships them, keyed by the first
# release of the layout: data, with its upstream source, in smoke/readers/releases.json (cuda_delegate_libraries).
# 1.0 and 1.1 ship no CUDA runtime library. 1.2 and 1.3: the AOTI shim layer alone (the backend is linked into the
# Python extension). 1.4: the CUDA extension library beside it. 1.5 and main: the shared runtime and the delegate
# in executorch/lib.
LAYOUTS = releases.cuda_delegate_libraries()


def _sm(dotted: str) -> tuple[str, ...]:
    return tuple(f"sm_{value.replace('.', '')}" for value in dotted.split())


# The architectures each CUDA train claims, per machine: upstream's .ci/scripts/wheel/cuda_arch_list.sh
# (the lists its wheel build compiles for). A train not listed here is a FAIL of the device-code check.
ARCHS = {
    "x86_64": {"cu126": _sm("8.0 8.6 8.9 9.0"), "cu130": _sm("8.0 8.6 8.9 9.0 10.0 12.0"),
               "cu132": _sm("8.0 8.6 8.9 9.0 10.0 12.0")},
    "aarch64": {"cu126": _sm("8.0 8.7 9.0"), "cu130": _sm("8.0 9.0 10.0 11.0 12.0"),
                "cu132": _sm("8.0 9.0 10.0 11.0 12.0")},
}


class CudaRowBackend(Protocol):
    """What these checks read of a CUDA row's backend (``smoke.backends.cuda.Cuda``, which imports this module)."""

    @property
    def archs(self) -> dict[str, tuple[str, ...]]: ...

    @property
    def layouts(self) -> tuple[tuple[str, tuple[str, ...]], ...]: ...

    def layout(self, release: str) -> tuple[str, tuple[str, ...]] | None: ...


_NAME_MAJOR = re.compile(r"-cu(\d+)$")


def _digits(train: str) -> str:
    """cu130 -> "130"; a train is a cuXXX label (``cuda_train`` gives only those)."""
    match = CUDA_LABEL.match(train)
    if match is None:
        raise ValueError(f"{train!r} is not a CUDA train such as cu130")
    return match.group(1)


def cuda_major(train: str) -> int:
    """cu130 -> 13, cu126 -> 12, cu118 -> 11."""
    digits = _digits(train)
    return int(digits[:-1]) if len(digits) > 1 else int(digits)


def check_cuda_build(wheel: Wheel, row: RowOf, libraries: Libraries) -> CheckResult:
    """A CUDA row needs a CUDA build: a +cuXXX local label."""
    local = wheel.version.local or ""
    if cuda_train(wheel) is None:
        detail = f" (it is +{local})" if local else ""
        return failed(CUDA_BUILD.name, f"{wheel.filename!r} is a CPU build: version {wheel.version} has no +cuXXX local label{detail}; "
                      f"a CPU build is gated by the CPU row: nox -s cpu_{row.machine} -- {wheel.path}",
                      local_version=local)
    return passed(CUDA_BUILD.name, f"+{local}, CUDA {cuda_major(local)}", local_version=local)


def check_cuda_libraries(wheel: Wheel, row: RowOf, libraries: Libraries) -> CheckResult:
    """The delegate's shared libraries, where this release's build puts them, are in the wheel."""

    name = CUDA_LIBRARIES.name
    backend = cast(CudaRowBackend, row.backend)  # a CUDA row's
    layout = backend.layout(wheel.release)
    if layout is None:
        first = min((since for since, _paths in backend.layouts), key=lambda v: tuple(map(int, v.split("."))))
        return failed(name, f"executorch {wheel.release} predates the CUDA delegate's runtime libraries "
                            f"(first shipped in {first}), so no release of it can run CUDA programs", release=wheel.release)
    since, expected = layout
    files = set(wheel.files)
    found = [path for path in expected if path in files]
    missing = [path for path in expected if path not in files]
    measured = {"layout_since": since, "expected": list(expected), "found": found}
    if missing:
        shipped_cuda = sorted(f for f in shared_objects(wheel) if "cuda" in PurePosixPath(f).name)
        return failed(name, f"the CUDA delegate's libraries of the {since} layout are not in the wheel: "
                            f"{', '.join(missing)} missing (CUDA libraries it has: {', '.join(shipped_cuda) or 'none'})",
                      missing=missing, **measured)
    return passed(name, f"the {since} layout's {len(found)} ship: {', '.join(found)}", **measured)


def _requirement_major(requirement: Requirement) -> int | None:
    """The CUDA major a requirement names: from a -cuNN name (nvidia-cudnn-cu12: 12), else from the
    lowest version an nvidia-cuda-* toolkit package (versioned as the toolkit: nvidia-cuda-runtime
    13.0.96) pins; None where neither tells (nvidia-cufft 12.x ships with CUDA 13: its version is its own)."""
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    match = _NAME_MAJOR.search(canonicalize_name(requirement.name))
    if match:  # nvidia-cuda-runtime-cu12: the suffix is the major itself
        return int(match.group(1))
    if not _versioned_as_toolkit(requirement):
        return None
    # The highest lower bound (">=12.9,>=13.0,<14" is 13), the version a pin names.
    bounds = []
    for spec in requirement.specifier:
        if spec.operator in ("==", "===", "~=", ">="):
            try:
                bounds.append(Version(spec.version.removesuffix(".*")))
            except InvalidVersion:
                continue
    return max(bounds).major if bounds else None


def _versioned_as_toolkit(requirement: Requirement) -> bool:
    """nvidia-cuda-runtime, nvidia-cuda-nvrtc, ...: their version is the CUDA toolkit's (no -cuNN suffix)."""
    from packaging.utils import canonicalize_name

    name = canonicalize_name(requirement.name)
    return name.startswith("nvidia-cuda-") and not _NAME_MAJOR.search(name)


def cuda_minor(train: str) -> int:
    """cu130 -> 0, cu126 -> 6."""
    return int(_digits(train)[-1])


def admitted_outside(requirement: Requirement, major: int, minor: int) -> str | None:
    """A version the requirement admits outside [major.minor, major+1), or None.

    CUDA's minor-version compatibility allows only later runtimes of the build's major: ``>=13`` alone admits CUDA 14's
    (libcudart.so.14, which the libraries do not link). The specifier is probed at each version it names, just past
    them, and at the range's edges.
    """
    from packaging.version import InvalidVersion, Version

    low, high = Version(f"{major}.{minor}"), Version(f"{major + 1}")
    below = f"{major}.{minor - 1}.999" if minor else f"{major - 1}.999"
    tried = {str(low), str(high), f"{major + 1}.0.1", f"{major + 1}.1", f"{major + 2}", below, "0.1", "999"}
    for spec in requirement.specifier:
        try:
            named = Version(spec.version.removesuffix(".*"))
        except InvalidVersion:
            continue
        release = ".".join(map(str, named.release))  # 14.0a1 -> 14.0: probes are plain releases
        tried |= {str(named), f"{release}.1", f"{release}.post1", f"{named.major}.{named.minor + 1}", f"{named.major + 1}",
                  f"{named.major - 1}.999" if named.major else "0"}
    # The edges first (the next major's runtime, the minor below the build's): they name the defect.
    tried |= {f"{major + 1}.post1", f"{major + 1}.0.post1"}
    # sorted by version, then by how it is written: 14.0.post1 and 14.post1 are one version, said the same way every run
    for version in [high, Version(below), *(Version(v) for v in sorted(tried, key=lambda v: (Version(v), v)))]:
        if requirement.specifier.contains(version, prereleases=False) and not low <= version < high:
            return str(version)
    return None


def cuda_requirements(wheel: Wheel, row: RowOf) -> list[Requirement]:
    from packaging.utils import canonicalize_name

    env = marker_environment(row.machine, wheel)
    return [
        req for req in wheel.requires_dist
        if canonicalize_name(req.name).startswith(("nvidia-", "cuda-"))
        and (req.marker is None or req.marker.evaluate(env))
    ]


def check_cuda_runtime_declared(wheel: Wheel, row: RowOf, libraries: Libraries) -> CheckResult:
    """Requires-Dist names the CUDA runtime wheels (markers evaluated for the row), of the label's CUDA major."""
    name = CUDA_RUNTIME_DECLARED.name
    declared = cuda_requirements(wheel, row)
    listed = [str(r) for r in declared]
    if not declared:
        return failed(name, f"the wheel's Requires-Dist names no nvidia-* CUDA runtime package for Linux {row.machine}, "
                            "so nothing installs the CUDA libraries its delegate links", declared=listed)
    train = cuda_train(wheel)
    if train is None:
        return failed(name, f"declares {', '.join(listed)}, but the wheel has no +cuXXX label to say which CUDA it is for",
                      declared=listed)
    want = cuda_major(train)
    runtimes = [r for r in declared if _versioned_as_toolkit(r) or _NAME_MAJOR.search(r.name.lower())]
    if not runtimes:
        return failed(name, f"declares {', '.join(listed)}, but no nvidia-cuda-* runtime package (nvidia-cuda-runtime for CUDA 13, "
                            "nvidia-cuda-runtime-cu12 for CUDA 12)", declared=listed, cuda_major=want)
    wrong = [f"{r} (CUDA {m})" for r in runtimes if (m := _requirement_major(r)) is not None and m != want]
    wrong += [f"{r} (names no CUDA major)" for r in runtimes if _requirement_major(r) is None]
    if wrong:
        return failed(name, f"+{train} is CUDA {want}, but Requires-Dist has {', '.join(wrong)}", declared=listed, cuda_major=want)
    minor = cuda_minor(train)
    loose = [f"{r} admits {v}" for r in runtimes if _versioned_as_toolkit(r) and (v := admitted_outside(r, want, minor))]
    if loose:
        return failed(name, f"+{train} needs CUDA {want}.{minor} or a later {want}.x, but {', '.join(loose)}: bound it "
                            f"as >={want}.{minor},<{want + 1}", declared=listed, cuda_major=want)
    return passed(name, f"{len(declared)} CUDA {want} requirements, each within {want}.{minor} to {want}.x: {', '.join(listed)}",
                  declared=listed, cuda_major=want)


def _reaches(wheel: Wheel, providers, target: str, soname: str) -> bool:
    """Can the loader find ``soname`` in site-packages/target, as far as the wheel file tells?

    Bundled: the wheel has the file there. Declared: the folder is under nvidia/, which a
    declared nvidia-* package provides (which file is there is known only once installed).
    """
    if any(f.startswith(f"{target}/{soname}") for f in wheel.files):
        return True
    provider = providers(target)
    return target.startswith("nvidia/") and provider is not None and provider != "the wheel"


def runpath_problems(wheel: Wheel, row: RowOf, libraries: Libraries) -> tuple[list[str], str]:
    """The CUDA rule of ``library RUNPATH``: every library that links a CUDA library reaches it through
    an ``$ORIGIN`` entry, in the wheel or into a CUDA package the wheel declares."""

    providers = Providers(wheel, row.machine)
    linking = [lib for lib in libraries.items if lib.cuda_needed]
    problems = [] if linking else ["no shipped library links a CUDA library, so there is nothing the CUDA row could load"]
    for lib in linking:
        targets = lib.origin_targets()
        for soname in lib.cuda_needed:
            if not any(_reaches(wheel, providers, target, soname) for target in targets):
                problems.append(f"{lib.path} links {soname} but no {lib.tag or 'RUNPATH'} entry leads to it in the wheel "
                                f"or into a CUDA package it declares (entries: {', '.join(lib.search_path) or 'none'})")
    return problems, f"; {len(linking)} link CUDA, each through an $ORIGIN entry into a declared package"


def check_device_code(wheel: Wheel, row: RowOf, libraries: Libraries, cuobjdump: str | None = None) -> CheckResult:
    """Each library with GPU code has machine code for exactly the row's architectures, and PTX for the newest."""

    name = DEVICE_CODE.name
    train = cuda_train(wheel)
    if train is None:
        # Not a defect of the device code: which list applies is unknown. CUDA build fails the row.
        return skipped(name, "not run: the wheel has no +cuXXX label, so no architecture list applies (see CUDA build)")
    claimed = cast(CudaRowBackend, row.backend).archs.get(train)  # a CUDA row's
    if claimed is None:
        return failed(name, f"the {row.name} row has no architecture list for {train}: add one to smoke/backends/cuda.py "
                            "(upstream's .ci/scripts/wheel/cuda_arch_list.sh has the lists)")
    cuobjdump = cuobjdump or devicecode.find_cuobjdump()
    if cuobjdump is None:
        return failed(name, "cuobjdump not found, so the device code cannot be read: pip install nvidia-cuda-cuobjdump, "
                            "put the CUDA toolkit's bin on PATH, or set CUOBJDUMP", claimed=list(claimed))
    newest = max(claimed, key=devicecode.sm_number)
    found: dict[str, dict[str, list[str]]] = {}
    problems = []
    with tempfile.TemporaryDirectory(prefix="gate-devicecode-") as tmp, zipfile.ZipFile(wheel.path) as archive:
        for index, lib in enumerate(libraries.items):
            # Never the member's own path: a flat name in our own folder.
            target = Path(tmp) / f"{index}.so"
            target.write_bytes(read_member(archive, lib.path, wheel.filename))
            try:
                code = devicecode.device_code(cuobjdump, target)
            except devicecode.CuobjdumpError as exc:
                problems.append(f"{lib.path}: {exc}")
                continue
            target.unlink()
            if not code.any:
                continue
            found[lib.path] = {"sm": sorted(code.cubins, key=devicecode.sm_number), "ptx": sorted(code.ptx, key=devicecode.sm_number)}
            # An arch-specific variant (sm_90a) of a claimed architecture is not an extra one.
            bases = {devicecode.base(arch) for arch in code.cubins}
            missing = [a for a in claimed if a not in bases]
            extra = sorted((a for a in code.cubins if devicecode.base(a) not in claimed), key=devicecode.sm_number)
            if missing:
                problems.append(f"{lib.path} has no machine code for {', '.join(missing)}")
            if extra:
                problems.append(f"{lib.path} has machine code for {', '.join(extra)}, which the row does not claim")
            if newest not in code.ptx:
                problems.append(f"{lib.path} has no PTX for {newest}, so a GPU newer than {newest} gets no code")
    measured = {"claimed": list(claimed), "libraries": found, "cuobjdump": cuobjdump}
    if not found and not problems:
        problems.append(f"no shipped library carries GPU code, while the row claims {', '.join(claimed)}")
    if problems:
        return failed(name, f"{'; '.join(problems[:3])} (the row claims {' '.join(claimed)} for {train})", problems=problems, **measured)
    listed = ", ".join(f"{PurePosixPath(p).name} ({' '.join(v['sm'])} + PTX {' '.join(v['ptx'])})" for p, v in found.items())
    return passed(name, f"{len(found)} libraries carry code for exactly {' '.join(claimed)}: {listed}", **measured)


def check_cuda_libraries_resolve(wheel: Wheel, row: RowOf, facts: dict[str, Any], libraries: Libraries) -> CheckResult:
    """Each installed library that links CUDA finds every CUDA library it needs through its own
    $ORIGIN entries, resolved against site-packages as installed."""
    name = CUDA_LIBRARIES_RESOLVE.name
    sites = [Path(facts[k]) for k in ("purelib", "platlib") if k in facts]
    if not sites:
        return failed(name, f"the environment's site-packages is unknown: {facts.get('probe_error')}")
    linking = [lib for lib in libraries.items if lib.cuda_needed]
    if not linking:
        return failed(name, "no shipped library links a CUDA library, so there is nothing to resolve")
    problems, found = [], {}
    for lib in linking:
        targets = lib.origin_targets()
        for soname in lib.cuda_needed:
            hit = next((site / t for site in sites for t in targets if (site / t / soname).exists()), None)
            if hit is None:
                tried = ", ".join(str(site / t) for site in sites[:1] for t in targets) or "no $ORIGIN entries"
                problems.append(f"{lib.path} needs {soname}, not in any folder its {lib.tag or 'RUNPATH'} leads to ({tried})")
            else:
                found[f"{lib.path}: {soname}"] = str(hit)
    if problems:
        return failed(name, "; ".join(problems[:3]), problems=problems, found=found)
    return passed(name, f"{len(found)} CUDA libraries found through $ORIGIN entries in site-packages", found=found)


def torch_problems(wheel: Wheel, facts: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The CUDA part of ``torch agrees``: torch is a CUDA build of the wheel's CUDA major."""
    version, torch_cuda, train = facts["torch"], facts.get("torch_cuda"), cuda_train(wheel)
    if torch_cuda is None:
        return [f"torch {version} is a CPU build (torch.version.cuda is None)"], []
    if train is None:
        return [f"torch has CUDA {torch_cuda}, the wheel has no +cuXXX label to agree with (see CUDA build)"], []
    if int(str(torch_cuda).split(".")[0]) != cuda_major(train):
        return [f"torch has CUDA {torch_cuda}, the wheel is +{train} (CUDA {cuda_major(train)})"], []
    return [], [f"CUDA {torch_cuda} as +{train}"]


CUDA_BUILD = Check("CUDA build", FILE, 10, check_cuda_build)
CUDA_LIBRARIES = Check("CUDA libraries", FILE, 11, check_cuda_libraries)
CUDA_RUNTIME_DECLARED = Check("CUDA runtime declared", FILE, 12, check_cuda_runtime_declared)
DEVICE_CODE = Check("device code", FILE, 40, check_device_code)
CUDA_LIBRARIES_RESOLVE = Check("CUDA libraries resolve", ENVIRONMENT, 30, check_cuda_libraries_resolve)
