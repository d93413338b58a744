"""One owner for each runtime component: the `one runtime core` file check.

A runtime component with process-wide state (a registry, the platform layer, a thread pool, a delegate) must have
one definer among libraries that reach each other, or the process holds two copies. Definers are read from the
dynamic symbols (weak ones too) of the functions that own the state (upstream's ``test_shared_libraries.py``).

- From 1.5 (the split): one definer in the wheel, the owner in ``executorch/lib`` where that ships or is required;
  a required owner ships.
- Before 1.5 (monolithic): two definers in one load closure FAIL; copies in modules Python loads apart are named.

An export-side library (linking libtorch) may carry its own kernel set.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from packaging.version import Version

from smoke.readers import elf, releases
from smoke.readers.wheel import cuda_train
from smoke.results import CheckResult, failed, passed

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel
    from smoke.rows import Row

NAME = "one runtime core"  # the check's name, in every report and in docs/releases.md
SPLIT = releases.runtime_split()  # the first release whose runtime ships as shared libraries in executorch/lib (releases.json)
LIB = "executorch/lib/"


@dataclass(frozen=True)
class Component:
    name: str
    # The functions that own its state: "a::b::f" a C++ function (by its mangled name; "a::C::C" a
    # constructor), "name" a C function (a prefix where it ends in "_").
    functions: tuple[str, ...]
    owner: str  # the library that owns it from 1.5 on (path in the wheel)
    export_copy: bool = False  # an export-side library may carry its own copy
    # Whether a wheel of the 1.5 layout must ship the owner (upstream's ``required`` flag): True, False,
    # or CUDA (required exactly on a +cuXXX wheel). An owner not required and not shipped leaves the
    # component where the build put it: upstream's table says so of the CPU kernels ("a wheel built
    # without them deliberately links the portable ops into the Python extension instead, which is a
    # supported configuration rather than a duplicate"); one definer, wherever it is, is then right.
    required: bool | str = True


CUDA = "on a CUDA wheel"


# The components and their owners: data, with its upstream source, in smoke/readers/releases.json (runtime_owners).
COMPONENTS = tuple(
    Component(entry["component"], tuple(entry["functions"]), entry["owner"], bool(entry.get("export_copy", False)),
              CUDA if entry.get("required", True) == "cuda" else bool(entry.get("required", True)))
    for entry in releases.layout("runtime_owners")["components"]
)
BY_NAME = {component.name: component for component in COMPONENTS}


def symbol_prefix(function: str) -> str:
    """How the dynamic symbols of a function start: a C++ function's mangled name without its
    parameters (``elf.mangled_prefix``; a constructor ``...C``, then C1/C2), a C name as it is."""
    parts = function.split("::")
    if len(parts) == 1:
        return function
    if parts[-1] == parts[-2]:
        return elf.mangled_prefix("::".join(parts[:-1]))[:-1] + "C"
    return elf.mangled_prefix(function)


def _matcher(functions: tuple[str, ...]):
    """Whether a symbol is one of these functions: C++ ones by prefix (their parameters follow),
    C ones by name (pthreadpool_create, not the pthreadpool_create_private_impl beside it), or by prefix where they end in "_"."""
    prefixes = tuple(symbol_prefix(f) for f in functions if "::" in f or f.endswith("_"))
    names = frozenset(f for f in functions if "::" not in f and not f.endswith("_"))
    return lambda symbol: symbol in names or symbol.startswith(prefixes)


MATCHES = {c.name: _matcher(c.functions) for c in COMPONENTS}


def components_defined(library: elf.Library) -> dict[str, bool]:
    """The components a library defines, each with whether it defines them weakly only."""
    found = {}
    for component, match in MATCHES.items():
        if any(map(match, library.defined)):
            found[component] = False
        elif any(map(match, library.weak_defined)):
            found[component] = True
    return found


def _file(path: str) -> str:
    return PurePosixPath(path).name


def loads_into_a_process(library: elf.Library) -> bool:
    """A shared library or extension module; an executable is a process of its own."""
    return ".so" in _file(library.path)


def export_side(library: elf.Library) -> bool:
    """Registers into torch at export time: links libtorch and is not a Python extension module."""
    return ".cpython-" not in _file(library.path) and any(name.startswith("libtorch") for name in library.needed)


def load_groups(libraries: Libraries) -> dict[str, list[elf.Library]]:
    """Each shipped ELF file with the shipped libraries it loads (DT_NEEDED by file name, followed
    through): one symbol scope. Every file has its own, so libraries in a DT_NEEDED cycle are judged too."""
    by_name: dict[str, list[elf.Library]] = defaultdict(list)
    for lib in libraries.items:
        by_name[_file(lib.path)].append(lib)
    groups = {}
    for start in libraries.items:
        seen, todo = {start.path: start}, [start]
        while todo:
            for name in todo.pop().needed:
                for dep in by_name.get(name, ()):
                    if dep.path not in seen:
                        seen[dep.path] = dep
                        todo.append(dep)
        groups[start.path] = list(seen.values())
    return groups


def split_layout(wheel: Wheel | None, libraries: Libraries) -> bool:
    """The release's version says which layout it ships; without a wheel (extracts), its files do."""
    if wheel is not None:
        return Version(wheel.version.base_version) >= SPLIT
    return any(lib.path == LIB + "libexecutorch.so" for lib in libraries.items)


# (path, weakly only) for each definer, in path order: one key per set of definers.
Definers = tuple[tuple[str, bool], ...]


def _definers(paths, defines: dict[str, dict[str, bool]], component: str) -> Definers:
    return tuple(sorted((path, defines[path][component]) for path in paths if component in defines[path]))


def _names(definers: Definers, name=_file) -> str:
    return " and ".join(f"{name(path)}{' (weak)' if weak else ''}" for path, weak in definers)


def _group(found: dict[str, Definers]) -> dict[Definers, list[str]]:
    """Components by the libraries that define them."""
    grouped: dict[Definers, list[str]] = defaultdict(list)
    for component, definers in found.items():
        grouped[definers].append(component)
    return grouped


def _excused(library: elf.Library, component: str) -> bool:
    """An export-side library's own copy of a component that allows one (a kernel set)."""
    return BY_NAME[component].export_copy and export_side(library)


def scope_problems(groups: dict[str, list[elf.Library]], defines: dict[str, dict[str, bool]]) -> list[str]:
    """Each set of libraries that load together (``load_groups``) and define the same components, with those components."""
    problems: dict[Definers, tuple[list[str], str]] = {}
    for start, group in sorted(groups.items()):
        for component in BY_NAME:
            definers = _definers((lib.path for lib in group if not _excused(lib, component)), defines, component)
            if len(definers) > 1:
                components, _start = problems.setdefault(definers, ([], start))
                if component not in components:
                    components.append(component)
    return [f"{_names(definers)} each define the {', '.join(components)} (loaded together through {_file(start)})"
            for definers, (components, start) in problems.items()]


def required(component: Component, wheel: Wheel | None) -> bool:
    """Upstream's ``required`` flag resolved for this wheel (``_resolve_required``); no wheel (extracts): False."""
    if wheel is None:
        return False
    if component.required == CUDA:
        return cuda_train(wheel) is not None  # a +cuXXX label: the wheel says it is a CUDA wheel
    return bool(component.required)


def split_problems(found: dict[str, Definers], shipped: set[str], wheel: Wheel | None = None) -> list[str]:
    """From 1.5 on: one definer per component in the whole wheel, and it is the component's owner where
    that ships or is required; a required owner ships."""
    problems = []
    for definers, components in _group(found).items():
        owners = sorted({_file(BY_NAME[c].owner) for c in components})
        if len(definers) > 1:
            problems.append(f"{_names(definers)} each define the {', '.join(components)} "
                            f"(one owner in the {SPLIT} layout: {', '.join(owners)})")
        elif wrong := [c for c in components if BY_NAME[c].owner != definers[0][0] and not _left_where_built(c, shipped, wheel)]:
            problems.append(f"{_names(definers)} defines the {', '.join(wrong)}, which the {SPLIT} layout puts in "
                            f"{', '.join(sorted({BY_NAME[c].owner for c in wrong}))}")
    missing: dict[tuple[str, str], list[str]] = defaultdict(list)  # (owner, when required) -> its components
    for component in COMPONENTS:
        if component.name not in found and component.owner not in shipped and required(component, wheel):
            when = f" {component.required}" if isinstance(component.required, str) else ""
            missing[component.owner, when].append(component.name)
    for (owner, when), components in missing.items():
        problems.append(f"the wheel ships no {owner}, which owns the {', '.join(components)} (upstream's table "
                        f"requires it{when}: packaging dropped it or the build did not make it)")
    # A required owner that ships but defines none of its component's functions (issue 47: PyPI's 1.5.1 with
    # libexecutorch_kernels_quantized.so emptied, its SONAME kept, PASSed every row: the file was counted, not read).
    empty: dict[str, list[str]] = defaultdict(list)
    for component in COMPONENTS:
        if component.name not in found and component.owner in shipped and required(component, wheel):
            empty[component.owner].append(component.name)
    for owner, components in empty.items():
        functions = [f for c in components for f in BY_NAME[c].functions]
        problems.append(f"{owner} ships but defines none of the {', '.join(components)}' functions ({', '.join(functions[:3])}"
                        f"{', ...' if len(functions) > 3 else ''}): upstream's table names it their owner")
    return problems


def _left_where_built(component: str, shipped: set[str], wheel: Wheel | None) -> bool:
    """The owner is not required and not shipped: the component's one definer may be anywhere."""
    c = BY_NAME[component]
    return c.owner not in shipped and not required(c, wheel) and wheel is not None


def where_built_note(found: dict[str, Definers], shipped: set[str], wheel: Wheel | None) -> str:
    """The components whose one definer is not their owner, upstream's table not requiring it."""
    parts = [f"the {c} in {_names(d)}" for c, d in found.items()
             if len(d) == 1 and d[0][0] != BY_NAME[c].owner and _left_where_built(c, shipped, wheel)]
    if not parts:
        return ""
    return (f"; {', '.join(parts)}, its owner not shipped and not required by upstream's table (the build left "
            f"it out: a supported configuration)")


def _module(path: str) -> str:
    """A library's name up to its first dot: _portable_lib, libqnn_executorch_backend."""
    return _file(path).split(".", 1)[0]


def apart_note(found: dict[str, Definers], groups: dict[str, list[elf.Library]]) -> str:
    """Before 1.5: the components with definers that never load together, and where they are."""
    scopes = [{lib.path for lib in group} for group in groups.values()]
    apart = {c: d for c, d in found.items() if len(d) > 1 and not any({path for path, _weak in d} <= s for s in scopes)}
    parts = []
    for definers, components in _group(apart).items():
        where = _names(definers, _module) if len(definers) <= 3 else f"{len(definers)} libraries"
        parts.append(f"{', '.join(components)} in {where}")
    return "; ".join(parts)


def check_runtime_core(wheel: Wheel | None, row: Row, libraries: Libraries) -> CheckResult:
    """Each component of the runtime that holds process-wide state has one definer where copies would
    meet: in the whole wheel from 1.5 on (its owner in executorch/lib), among the libraries that load
    together before 1.5."""
    defines = {lib.path: components_defined(lib) for lib in libraries.items}  # read each symbol table once
    loadable = [lib for lib in libraries.items if loads_into_a_process(lib)]
    found = {c: d for c in BY_NAME if (d := _definers((lib.path for lib in loadable if not _excused(lib, c)), defines, c))}
    split = split_layout(wheel, libraries)
    layout = f"the {SPLIT} layout" if split else f"the layout before {SPLIT}"
    measured = {
        "layout": str(SPLIT) if split else f"before {SPLIT}",
        "owners": {c: [path for path, _weak in d] for c, d in found.items()},
        "weak": {c: [path for path, weak in d if weak] for c, d in found.items() if any(weak for _path, weak in d)},
        "export_copies": {c: paths for c in BY_NAME
                          if (paths := sorted(lib.path for lib in loadable if _excused(lib, c) and c in defines[lib.path]))},
        "libraries": len(libraries.items),
    }
    groups = load_groups(libraries)
    shipped = {lib.path for lib in libraries.items}
    problems = split_problems(found, shipped, wheel) if split else scope_problems(groups, defines)
    note = "" if split else apart_note(found, groups)
    built = where_built_note(found, shipped, wheel) if split else ""
    apart = f"; copies apart, in modules Python loads each in a scope of its own (not a defect of {layout}): {note}" if note else ""
    if problems:
        more = f" (and {len(problems) - 2} more)" if len(problems) > 2 else ""
        copies = any(" each define the " in p for p in problems)
        outside = any(" layout puts in " in p for p in problems)
        empty = any(" ships but defines none of the " in p for p in problems)
        lead = ("two copies of the runtime's state in one process: " if copies else
                "a runtime component outside its owner: " if outside else
                "a runtime component's owner defines none of it: " if empty and not any("the wheel ships no " in p for p in problems)
                else "a runtime component's owner is not shipped: ")
        return failed(NAME, lead + "; ".join(problems[:2]) + more + apart, problems=problems, **measured)
    if not found:
        return passed(NAME, f"no shipped library defines a runtime component ({layout})", **measured)
    if split:
        listed = "; ".join(f"{', '.join(components)}: {_names(definers)}" for definers, components in _group(found).items())
        return passed(NAME, f"each runtime component has one definer, its owner in {layout} ({listed}){built}", **measured)
    return passed(NAME, f"each runtime component has one definer among the libraries that load together "
                        f"({len(groups)} load scopes: each file with the shipped libraries it loads){apart}", **measured)
