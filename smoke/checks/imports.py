"""``imports declared``: every third-party module the package imports when it is imported is declared
(issue 28, part 3).

A static scan of the wheel's Python modules with the standard ``ast``, nothing run, nothing installed:
from the public modules (``PUBLIC``: ``import executorch`` and the entry points its documentation has
users import), follow every import that runs at import time (a module's top level, a class body, an
``if``, ``with`` or ``for`` at top level) through the wheel's own modules, and collect the third-party top-level
names reached. One not covered by a ``Requires-Dist`` FAILs, naming the import, the module and line
that runs it and the chain of imports from a public module: ``pip install executorch`` gives a package
that does not import (executorch#22180: torchao and pytorch_tokenizers imported, not declared; #15283
in 1.0.0).

Optional, and fine: an import inside a function (runs when called), under ``if TYPE_CHECKING``, or
inside a ``try`` whose handlers catch ``ImportError``, ``ModuleNotFoundError``, ``Exception`` or
everything (the package copes without it); a requirement under an extra's marker covers its import.
A requirement covers an import when the names match as distribution names do (PEP 503:
``typing_extensions`` is ``typing-extensions``) or the import is one a distribution provides under
another name (``IMPORT_NAMES``: ``yaml`` is PyYAML's).
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, cast

from packaging.utils import canonicalize_name

from smoke.readers.wheel import marker_environment, read_member
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel
    from smoke.rows import Row

# What users import (the package itself, and its documented entry points): the scan starts here. A
# module the wheel does not ship is left out (an older release).
PUBLIC = (
    "executorch",
    "executorch.exir",
    "executorch.runtime",
    "executorch.export",
    "executorch.extension.pybindings.portable_lib",
    "executorch.backends.xnnpack.partition.xnnpack_partitioner",
    "executorch.devtools",
)
# Import names their distribution does not share (the rest match by PEP 503 name): the name a
# Requires-Dist gives for each.
IMPORT_NAMES = {
    "yaml": "pyyaml", "google": "protobuf", "PIL": "pillow", "sklearn": "scikit-learn", "cv2": "opencv-python",
    "attr": "attrs", "hydra": "hydra-core", "ruamel": "ruamel.yaml", "pkg_resources": "setuptools",
    "dateutil": "python-dateutil", "cpuinfo": "py-cpuinfo", "_pytest": "pytest", "serializer": "tosa-tools",
    "tosa": "tosa-tools",
    # the torch distribution ships these top-level packages beside torch/
    "torchgen": "torch", "functorch": "torch",
}
OPTIONAL_HANDLERS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
SOURCE_CAP = 4 * 1024 * 1024  # a Python module larger than this is not read (none of 1.0-1.5.1 is over 200 KiB)


@dataclass(frozen=True)
class Found:
    """A third-party import that runs at import time."""
    top: str  # its top-level name
    module: str  # the wheel's module that runs it
    line: int


def module_names(files: tuple[str, ...] | list[str]) -> dict[str, str]:
    """Dotted module name -> its member, for every ``.py`` file of the wheel (``a/__init__.py`` is ``a``)."""
    found = {}
    for member in files:
        path = PurePosixPath(member)
        if path.suffix != ".py" or ".dist-info" in member or ".data/" in member:
            continue
        parts = path.with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(part.isidentifier() for part in parts):
            found[".".join(parts)] = member
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((isinstance(n, ast.Name) and n.id in OPTIONAL_HANDLERS) or
               (isinstance(n, ast.Attribute) and n.attr in OPTIONAL_HANDLERS) for n in names)


def import_time(body: list[ast.stmt]):
    """The import statements of ``body`` that run when the module is imported, unguarded."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from import_time(node.body)
            yield from import_time(node.orelse)
        elif isinstance(node, ast.Try) or (sys.version_info >= (3, 11) and isinstance(node, getattr(ast, "TryStar", ()))):
            tried = cast(ast.Try, node)  # a TryStar has the same fields
            if not any(_catches_import_error(h) for h in tried.handlers):
                yield from import_time(tried.body)
            yield from import_time(tried.orelse)
            yield from import_time(tried.finalbody)
        elif isinstance(node, (ast.With, ast.For, ast.While, ast.ClassDef)):
            yield from import_time(node.body)
            if isinstance(node, (ast.For, ast.While)):
                yield from import_time(node.orelse)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    """The absolute name of a ``from`` import's module; None where it climbs above the top."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level - 1 > len(base) - 1:
        return None
    base = base[:len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def scan(sources: dict[str, str], read, own: set[str], roots: list[str]) -> tuple[dict[str, Found], dict[str, str], list[str]]:
    """Follow the import-time imports from ``roots`` through the wheel's modules (``sources``: name ->
    member; ``read(member)``: its text). Returns the third-party imports found (first one per top name),
    how each module was reached (module -> the module that imported it) and the modules that do not parse."""
    reached: dict[str, str] = {root: "" for root in roots}
    todo = list(roots)
    third: dict[str, Found] = {}
    broken: list[str] = []

    def reach(name: str, by: str) -> None:
        parts = name.split(".")
        for end in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b and a.b.c
            prefix = ".".join(parts[:end])
            if prefix in sources and prefix not in reached:
                reached[prefix] = by
                todo.append(prefix)

    while todo:
        module = todo.pop(0)
        member = sources[module]
        try:
            tree = ast.parse(read(member), filename=member)
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # not Python (the interpreter refuses it too)
            broken.append(member)
            continue
        is_package = member.endswith("__init__.py")
        for node in import_time(tree.body):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _absolute(node, module, is_package)
                if base is None:
                    continue
                targets = [base] + [f"{base}.{alias.name}" if base else alias.name for alias in node.names if alias.name != "*"]
            for target in targets:
                top = target.split(".")[0]
                if not top or top == "__future__":
                    continue
                if top in own:
                    reach(target, module)
                elif top not in sys.stdlib_module_names and top not in third and getattr(node, "level", 0) == 0:
                    third[top] = Found(top, module, node.lineno)
    return third, reached, broken


def chain(reached: dict[str, str], module: str) -> list[str]:
    """The imports from a public module to ``module``."""
    path = [module]
    while reached.get(path[-1]):
        path.append(reached[path[-1]])
    return path[::-1]


def covering(wheel: Wheel, machine: str) -> set[str]:
    """The canonical names of the distributions the wheel declares for a Linux machine of this kind, an
    extra's included (an import its extra provides is optional)."""
    env = marker_environment(machine, wheel)
    names = set()
    for req in wheel.requires_dist:
        extras = set(re.findall(r"""extra\s*==\s*['"]([^'"]+)['"]""", str(req.marker))) if req.marker else set()
        if req.marker is None or any(req.marker.evaluate({**env, "extra": extra}) for extra in extras | {""}):
            names.add(str(canonicalize_name(req.name)))
    return names | {str(canonicalize_name(name)) for name in wheel.user_supplied}  # the user's, by the gate's policy


def distribution(top: str) -> str:
    """The distribution an import name is provided by, as a Requires-Dist would name it (canonical)."""
    return canonicalize_name(IMPORT_NAMES.get(top, top))


def covered(top: str, declared: set[str]) -> bool:
    return canonicalize_name(top) in declared or distribution(top) in declared


def check_imports_declared(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = IMPORTS_DECLARED.name
    sources = module_names(wheel.files)
    own = {PurePosixPath(f).parts[0] for f in wheel.files if PurePosixPath(f).parts}
    own |= {m.split(".")[0] for m in sources}
    roots = [m for m in PUBLIC if m in sources]
    if not roots:
        return skipped(name, f"the wheel ships none of the public modules ({', '.join(PUBLIC)})")
    with zipfile.ZipFile(wheel.path) as archive:
        sizes = {info.filename: info.file_size for info in archive.infolist()}

        def read(member: str) -> bytes:
            if sizes.get(member, 0) > SOURCE_CAP:
                raise ValueError(f"over {SOURCE_CAP} B")  # listed as not scanned, never read whole
            return read_member(archive, member, wheel.filename)

        third, reached, broken = scan(sources, read, own, roots)
    declared = covering(wheel, row.machine)
    per_distribution: dict[str, Found] = {}  # one per distribution that would cover it: torchgen is torch's
    for found in sorted((f for f in third.values() if not covered(f.top, declared)), key=lambda f: f.top):
        per_distribution.setdefault(distribution(found.top), found)
    missing = list(per_distribution.values())
    measured = {"public": roots, "modules_reached": len(reached), "third_party": sorted(third),
                "undeclared": {f.top: f"{f.module} line {f.line}" for f in third.values() if not covered(f.top, declared)},
                "unparsed": broken}
    if missing:
        def found_at(f: Found) -> str:
            of = "" if distribution(f.top) == canonicalize_name(f.top) else f" (of {distribution(f.top)})"
            return (f"{f.top}{of} (imported by {sources[f.module]} line {f.line}, reached by import "
                    f"{' -> '.join(chain(reached, f.module))})")

        said = "; ".join(found_at(f) for f in missing[:3])
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        return failed(name, f"{len(missing)} third-party module{'s' if len(missing) > 1 else ''} imported when the package is "
                            f"imported, not in Requires-Dist: {said}{more}; declare each, or import it where it is used "
                            f"or under try/except ImportError", **measured)
    # A module this interpreter cannot parse (or over the cap) was not scanned: said, so that a PASS claims no more than was read.
    unread = f"; {len(broken)} reached modules not scanned (not Python to this interpreter, or over {SOURCE_CAP} B): " \
             f"{', '.join(broken[:3])}{' ...' if len(broken) > 3 else ''}" if broken else ""
    return passed(name, f"{len(third)} third-party modules imported at import time of {len(reached)} modules reached from "
                        f"{', '.join(roots)}, each declared: {', '.join(sorted(third))}{unread}", **measured)


IMPORTS_DECLARED = Check("imports declared", FILE, 36, check_imports_declared)
CHECKS = (IMPORTS_DECLARED,)
