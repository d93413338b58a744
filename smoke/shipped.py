"""What the wheel ships: the checks that read the wheel file itself, with nothing installed.

They need no GPU and no torch, so they run on every machine: first in every row,
before its environment is built (fail-fast then rejects a broken wheel before any
install), and alone in ``nox -s inspect``. Each is a function of the wheel (and
the row) returning one ``CheckResult``.

Which checks a row runs is ``checks_for(row)``; the CUDA ones apply to CUDA rows.
"""

from __future__ import annotations

import base64
import csv
import io
import re
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from smoke import devicecode, elf
from smoke.results import CheckResult, failed, passed, skipped
from smoke.rows import Row
from smoke.wheel import Wheel, hash_member, read_member

_LABEL = re.compile(r"^cu(\d+)$")
_NAME_MAJOR = re.compile(r"-cu(\d+)$")


def cuda_train(wheel: Wheel) -> str | None:
    """'cu130' for a +cu130 wheel, None for a wheel with no CUDA local label."""
    local = wheel.version.local or ""
    return local if _LABEL.match(local) else None


def cuda_major(train: str) -> int:
    """cu130 -> 13, cu126 -> 12, cu118 -> 11."""
    digits = _LABEL.match(train).group(1)
    return int(digits[:-1]) if len(digits) > 1 else int(digits)


def _shared_objects(wheel: Wheel) -> list[str]:
    return sorted(name for name in wheel.files if ".so" in PurePosixPath(name).name and not name.endswith("/"))


@dataclass(frozen=True)
class Libraries:
    """The wheel's ELF shared libraries, read once from the zip."""

    items: tuple[elf.Library, ...]
    unreadable: tuple[str, ...]


def read_libraries(wheel: Wheel) -> Libraries:
    items, unreadable = [], []
    with zipfile.ZipFile(wheel.path) as archive:
        for name in _shared_objects(wheel):
            data = read_member(archive, name, wheel.filename)
            if not elf.is_elf(data):
                continue
            try:
                items.append(elf.read_library(name, data))
            except elf.ElfError as exc:
                unreadable.append(str(exc))
    return Libraries(tuple(items), tuple(unreadable))


# --- the checks -------------------------------------------------------------------


def check_cuda_build(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """A CUDA row needs a CUDA build: a +cuXXX local label."""
    local = wheel.version.local or ""
    if cuda_train(wheel) is None:
        detail = f" (it is +{local})" if local else ""
        return failed("CUDA build", f"{wheel.filename!r} is a CPU build: version {wheel.version} has no +cuXXX local label{detail}",
                      local_version=local)
    return passed("CUDA build", f"+{local}, CUDA {cuda_major(local)}", local_version=local)


def check_cuda_libraries(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """The delegate's shared libraries, where this release's build puts them, are in the wheel."""
    name = "CUDA libraries"
    layout = row.cuda_layout(wheel.release)
    if layout is None:
        first = min((since for since, _paths in row.cuda_layouts), key=lambda v: tuple(map(int, v.split("."))))
        return failed(name, f"executorch {wheel.release} predates the CUDA delegate's runtime libraries "
                            f"(first shipped in {first}), so no release of it can run CUDA programs", release=wheel.release)
    since, expected = layout
    files = set(wheel.files)
    found = [path for path in expected if path in files]
    missing = [path for path in expected if path not in files]
    measured = {"layout_since": since, "expected": list(expected), "found": found}
    if missing:
        shipped_cuda = sorted(f for f in _shared_objects(wheel) if "cuda" in PurePosixPath(f).name)
        return failed(name, f"the CUDA delegate's libraries of the {since} layout are not in the wheel: "
                            f"{', '.join(missing)} missing (CUDA libraries it has: {', '.join(shipped_cuda) or 'none'})",
                      missing=missing, **measured)
    return passed(name, f"the {since} layout's {len(found)} ship: {', '.join(found)}", **measured)


# The runtime's components that hold process-wide state, each named by the functions that define
# it ("a::b::f": a C++ function, matched on its mangled name; "prefix_": C functions). Two
# definers of one component among libraries that load together are two copies of that state in
# one process, and the loader binds each caller to one or the other. Measured on a CUDA build of
# 1.2.0 without the shim patch (docs/runs/2026-12-03-h200-*): _portable_lib and
# libaoti_cuda_shims.so both defined 21 aoti_torch_* shims (the CUDA stream and guard state).
RUNTIME_COMPONENTS: dict[str, tuple[str, ...]] = {
    "logging": ("executorch::runtime::internal::vlogf", "executorch::runtime::internal::get_log_timestamp"),
    "platform layer": ("executorch::runtime::register_pal", "executorch::runtime::get_pal_impl",
                       "executorch::runtime::runtime_abort"),
    "backend registry": ("executorch::runtime::register_backend", "executorch::runtime::get_backend_class",
                         "executorch::runtime::get_num_registered_backends"),
    "kernel registry": ("executorch::runtime::register_kernels", "executorch::runtime::get_registered_kernels",
                        "executorch::runtime::registry_has_op_function"),
    "AOTI shim layer": ("aoti_torch_",),
}
_COMPONENT_PREFIXES = {component: tuple(elf.mangled_prefix(f) if "::" in f else f for f in functions)
                       for component, functions in RUNTIME_COMPONENTS.items()}


def components_defined(library: elf.Library) -> list[str]:
    """The runtime components a library's dynamic symbol table defines."""
    return [component for component, prefixes in _COMPONENT_PREFIXES.items()
            if any(symbol.startswith(prefixes) for symbol in library.defined)]


def load_groups(libraries: Libraries) -> dict[str, list[elf.Library]]:
    """Each library that no other shipped library needs, with the shipped libraries it loads (DT_NEEDED, by file name)."""
    by_name: dict[str, list[elf.Library]] = {}
    for lib in libraries.items:
        by_name.setdefault(PurePosixPath(lib.path).name, []).append(lib)
    needed_by_others = {dep.path for lib in libraries.items for name in lib.needed for dep in by_name.get(name, ()) if dep is not lib}
    groups = {}
    for root in (lib for lib in libraries.items if lib.path not in needed_by_others):
        seen, todo = {root.path: root}, [root]
        while todo:
            for name in todo.pop().needed:
                for dep in by_name.get(name, ()):
                    if dep.path not in seen:
                        seen[dep.path] = dep
                        todo.append(dep)
        groups[root.path] = list(seen.values())
    return groups


def core_problems(libraries: Libraries, defines: dict[str, list[str]]) -> list[str]:
    """Each set of libraries that load together and define the same components, with those components.
    ``defines``: each library's path and the components it defines (``components_defined``)."""
    problems: dict[tuple[str, ...], tuple[list[str], str]] = {}
    for root, group in load_groups(libraries).items():
        for component in RUNTIME_COMPONENTS:
            definers = tuple(sorted(lib.path for lib in group if component in defines[lib.path]))
            if len(definers) > 1:
                components, _root = problems.setdefault(definers, ([], root))
                if component not in components:
                    components.append(component)
    return [f"{' and '.join(PurePosixPath(d).name for d in definers)} each define the {', '.join(components)} "
            f"(loaded together through {PurePosixPath(root).name})" for definers, (components, root) in problems.items()]


def check_runtime_core(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """Among the shipped libraries that load together, each component of the runtime that holds
    process-wide state (logging, platform layer, backend and kernel registries, AOTI shims) has one definer."""
    name = "one runtime core"
    defines = {lib.path: components_defined(lib) for lib in libraries.items}  # read each symbol table once
    owners = {component: sorted(path for path, components in defines.items() if component in components)
              for component in RUNTIME_COMPONENTS}
    measured = {"owners": owners, "libraries": len(libraries.items)}
    problems = core_problems(libraries, defines)
    if problems:
        more = f" (and {len(problems) - 2} more)" if len(problems) > 2 else ""
        return failed(name, "two copies of the runtime's state in one process: " + "; ".join(problems[:2]) + more,
                      problems=problems, **measured)
    listed = "; ".join(f"{c}: {', '.join(sorted({PurePosixPath(p).name for p in paths}))}"
                       for c, paths in owners.items() if paths) or "no library exports them"
    return passed(name, f"each runtime component has one definer among the libraries that load together ({listed})", **measured)


def marker_environment(row: Row, wheel: Wheel) -> dict[str, str]:
    """The marker variables of a Linux machine of the row's kind with the wheel's Python."""
    interpreters = sorted(t.interpreter for t in wheel.tags if t.interpreter.startswith("cp") and t.interpreter[2:].isdigit())
    env = dict(default_environment())
    env.update(platform_machine=row.machine, platform_system="Linux", sys_platform="linux", os_name="posix",
               implementation_name="cpython", platform_python_implementation="CPython", extra="")
    if interpreters:
        digits = interpreters[0][2:]
        env["python_version"] = f"{digits[0]}.{digits[1:]}"
        env["python_full_version"] = f"{digits[0]}.{digits[1:]}.0"
    return env


def _requirement_major(requirement: Requirement) -> int | None:
    """The CUDA major a requirement pins: from a -cuNN name, else from its lowest pinned version."""
    match = _NAME_MAJOR.search(canonicalize_name(requirement.name))
    if match:  # nvidia-cuda-runtime-cu12: the suffix is the major itself
        return int(match.group(1))
    for spec in requirement.specifier:
        if spec.operator in ("==", "===", "~=", ">="):
            try:
                return Version(spec.version.removesuffix(".*")).major
            except InvalidVersion:
                continue
    return None


def cuda_requirements(wheel: Wheel, row: Row) -> list[Requirement]:
    env = marker_environment(row, wheel)
    return [
        req for req in wheel.requires_dist
        if canonicalize_name(req.name).startswith(("nvidia-", "cuda-"))
        and (req.marker is None or req.marker.evaluate(env))
    ]


def check_cuda_runtime_declared(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """Requires-Dist names the CUDA runtime wheels (markers evaluated for the row), of the label's CUDA major."""
    name = "CUDA runtime declared"
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
    wrong = [f"{r} (CUDA {m})" if m is not None else f"{r} (names no CUDA major)"
             for r in declared if (m := _requirement_major(r)) != want]
    if wrong:
        return failed(name, f"+{train} is CUDA {want}, but Requires-Dist has {', '.join(wrong)}", declared=listed, cuda_major=want)
    return passed(name, f"{len(declared)} CUDA {want} requirements: {', '.join(listed)}", declared=listed, cuda_major=want)


def _top_levels(wheel: Wheel) -> set[str]:
    return {PurePosixPath(f).parts[0] for f in wheel.files}


def _provider(wheel: Wheel, row: Row, target: str) -> str | None:
    """Who provides site-packages/target: the wheel itself, or a package it declares for the row."""
    top = target.split("/", 1)[0]
    if target == "" or top in _top_levels(wheel):
        return "the wheel"
    env = marker_environment(row, wheel)
    for req in wheel.requires_dist:
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        project = canonicalize_name(req.name)
        if project == canonicalize_name(top) or (top == "nvidia" and project.startswith("nvidia-")):
            return f"{req.name} (declared)"
    return None


def _reaches(wheel: Wheel, row: Row, target: str, soname: str) -> bool:
    """Can the loader find ``soname`` in site-packages/target, as far as the wheel file tells?

    Bundled: the wheel has the file there. Declared: the folder is under nvidia/, which a
    declared nvidia-* package provides (which file is there is known only once installed).
    """
    if any(f.startswith(f"{target}/{soname}") for f in wheel.files):
        return True
    provider = _provider(wheel, row, target)
    return target.startswith("nvidia/") and provider is not None and provider != "the wheel"


def check_library_runpath(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """No shipped library searches an absolute, build-tree or out-of-environment folder; on a CUDA row,
    every library that links CUDA reaches it through an $ORIGIN entry into a declared package."""
    name = "library RUNPATH"
    problems = list(libraries.unreadable)
    for lib in libraries.items:
        bad = [(entry, why) for entry in lib.search_path if (why := elf.entry_problem(lib.path, entry))]
        # The build-tree entries first: they are the ones that name the builder.
        bad.sort(key=lambda item: item[1] != "a build-tree folder")
        if bad:
            shown = ", ".join(f"{entry!r} ({why})" for entry, why in bad[:2]) + (f" and {len(bad) - 2} more" if len(bad) > 2 else "")
            problems.append(f"{lib.path} {lib.tag} has {len(bad)} entries outside the install: {shown}")
    linking = [lib for lib in libraries.items if lib.cuda_needed]
    if row.needs_cuda:
        if not linking:
            problems.append("no shipped library links a CUDA library, so there is nothing the CUDA row could load")
        for lib in linking:
            targets = lib.origin_targets()
            for soname in lib.cuda_needed:
                if not any(_reaches(wheel, row, target, soname) for target in targets):
                    problems.append(f"{lib.path} links {soname} but no {lib.tag or 'RUNPATH'} entry leads to it in the wheel "
                                    f"or into a CUDA package it declares (entries: {', '.join(lib.search_path) or 'none'})")
    measured = {"libraries": len(libraries.items), "linking_cuda": [lib.path for lib in linking],
                "entries": {lib.path: list(lib.search_path) for lib in libraries.items if lib.search_path}}
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return failed(name, "; ".join(problems[:3]) + more, problems=problems, **measured)
    cuda = f"; {len(linking)} link CUDA, each through an $ORIGIN entry into a declared package" if row.needs_cuda else ""
    return passed(name, f"{len(libraries.items)} libraries, every entry $ORIGIN-relative inside the environment{cuda}", **measured)


def check_device_code(wheel: Wheel, row: Row, libraries: Libraries, cuobjdump: str | None = None) -> CheckResult:
    """Each library with GPU code has machine code for exactly the row's architectures, and PTX for the newest."""
    name = "device code"
    train = cuda_train(wheel)
    if train is None:
        # Not a defect of the device code: which list applies is unknown. CUDA build fails the row.
        return skipped(name, "not run: the wheel has no +cuXXX label, so no architecture list applies (see CUDA build)")
    claimed = row.archs_for(train)
    if claimed is None:
        return failed(name, f"the {row.name} row has no architecture list for {train}: add one to smoke/rows.py "
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


def _record_digest(digest: bytes) -> str:
    """RECORD's form of a sha256 digest: urlsafe base64, no padding."""
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def check_record(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    """Every file's sha256 and size match the wheel's RECORD, and RECORD lists exactly the files."""
    name = "wheel RECORD"
    with zipfile.ZipFile(wheel.path) as archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
        record_name = next((n for n in names if n.endswith(".dist-info/RECORD") and n.count("/") == 1), None)
        if record_name is None:
            return failed(name, "the wheel has no .dist-info/RECORD")
        rows = list(csv.reader(io.StringIO(read_member(archive, record_name, wheel.filename).decode("utf-8", "replace"))))
        listed = {r[0]: r for r in rows if r}
        problems = []
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


Check = Callable[[Wheel, Row, Libraries], CheckResult]
CUDA_CHECKS: tuple[Check, ...] = (check_cuda_build, check_cuda_libraries, check_cuda_runtime_declared)


def checks_for(row: Row) -> tuple[Check, ...]:
    if row.needs_cuda:
        return (*CUDA_CHECKS, check_library_runpath, check_runtime_core, check_device_code, check_record)
    return (check_library_runpath, check_runtime_core, check_record)


def run(wheel: Wheel, row: Row, libraries: Libraries | None = None) -> Iterator[CheckResult]:
    """The row's checks on the wheel file, in order; the caller decides whether to stop at a FAIL."""
    libraries = libraries if libraries is not None else read_libraries(wheel)
    for check in checks_for(row):
        yield timed(check, wheel, row, libraries)


def timed(check: Callable[..., CheckResult], *args) -> CheckResult:
    start = time.monotonic()
    result = check(*args)
    return result.with_seconds(time.monotonic() - start)
