"""``imports declared``: every third-party module the package imports when it is imported is declared
(issue 28, part 3; issue 37).

A static ``ast`` scan, nothing installed: from the public modules (``PUBLIC``), follow each import that runs at
import time through the wheel's own modules, collecting third-party names. One no ``Requires-Dist`` covers FAILs,
naming where it runs and its chain (executorch#22180, #15283).

Guarded imports are optional: in a function, under ``TYPE_CHECKING``, in a ``try`` that copes with a missing module,
under ``contextlib.suppress(ImportError)``, or in an ``except``. An ``if`` on the Python version or platform is
judged for the wheel and row; any other ``if`` counts both branches. A requirement covers an import by PEP 503
name, ``IMPORT_NAMES`` or ``REQUIRES``.
"""

from __future__ import annotations

import ast
import codecs
import operator
import re
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from packaging.utils import canonicalize_name

from smoke.checks.kinds import FileCheck
from smoke.readers.native import kind_of
from smoke.readers.pe import PE_HEAD_SIZE
from smoke.readers.systems import ELF, LINUX, MACHO, PE
from smoke.readers.wheel import read_head, read_member, system_environment
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
    # The LLM export command the documentation has users run from the installed package
    # (docs.pytorch.org/executorch/stable/llm/export-llm.html: `python -m executorch.extension.llm.export.export_llm`).
    # Through examples.models.llama.export_llama_lib it imports extension.llm.export.builder, whose line 36 in 1.0.0
    # imports pytorch_tokenizers at module level, undeclared (executorch#15283; 1.0.1 declares pytorch-tokenizers,
    # executorch#15492).
    "executorch.extension.llm.export.export_llm",
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
# What a declared distribution itself requires (its unconditional Requires-Dist), where a release's import relies
# on it: pip installs those too, so the import works although the wheel does not name it. Each read from the
# distribution's METADATA: pytorch-tokenizers 1.5.0 (what `pip install pytorch-tokenizers` gets, the releases
# that declare it pinning no upper bound) requires tiktoken, tokenizers and sentencepiece; tokenizers 0.23.3
# requires huggingface-hub. executorch.examples.models.llama.hf_download imports huggingface_hub at module level
# on the LLM export path of every release 1.0.0 to 1.5.1 without declaring it.
REQUIRES = {
    "pytorch-tokenizers": ("tiktoken", "tokenizers", "sentencepiece"),
    "tokenizers": ("huggingface-hub",),
}
# The exceptions a missing module (ModuleNotFoundError) is caught by.
OPTIONAL_HANDLERS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
SOURCE_CAP = 4 * 1024 * 1024  # a Python module larger than this is not read (none of 1.0-1.5.1 is over 200 KiB)
# Calls that end the interpreter: a handler that makes one does not let the import be missing.
ENDS = {"sys.exit", "os._exit", "os.abort", "exit", "quit"}


@dataclass(frozen=True)
class Found:
    """A third-party import that runs at import time."""
    top: str  # its top-level name
    module: str  # the wheel's module that runs it
    line: int


@dataclass(frozen=True)
class Facts:
    """What an ``if`` may test that is known of the wheel and its row: the Python versions (major, minor) the
    wheel is for (None: not one known set), and the marker variables of the row's machine (``sys_platform``,
    ``os_name``, ``platform_system``, ``platform_machine``)."""
    versions: tuple[tuple[int, int], ...] | None = None
    markers: dict[str, str] = field(default_factory=dict)


class Scanned(NamedTuple):
    third: dict[str, Found]  # the required third-party imports, the first one per top name
    reached: dict[str, str]  # module -> the module that imported it ("" for a public one)
    broken: list[str]  # the members reached that do not parse
    optional: dict[str, Found]  # third-party imports that run only guarded (and are not also required)


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


def _has_code(text: bytes) -> bool:
    """A line that is neither blank nor a comment: the module defines or runs something."""
    return any(line.strip() and not line.strip().startswith(b"#") for line in text.removeprefix(codecs.BOM_UTF8).splitlines())


def own_packages(sizes: dict[str, int], read: Callable[[str], bytes], kind: Callable[[str], str | None]) -> set[str]:
    """The top-level names the wheel really ships, so that importing them needs no other distribution.

    A name counts for a Python module with code, or a native extension module (``.so``/``.pyd`` that ``kind`` reads as
    ELF, Mach-O or PE). Placeholder files under ``torch/`` make no torch (issue 37): such a name stays third-party and
    must be declared."""
    own: set[str] = set()
    for member, size in sorted(sizes.items()):
        path = PurePosixPath(member)
        if not path.parts or member.endswith("/") or ".dist-info/" in member or ".data/" in member or size == 0:
            continue
        top = path.parts[0] if len(path.parts) > 1 else path.name.split(".")[0]
        if top in own or not top.isidentifier():
            continue
        if path.suffix == ".py" and size <= SOURCE_CAP and _has_code(read(member)):
            own.add(top)
        elif path.suffix in (".so", ".pyd") and kind(member) in (ELF, MACHO, PE):
            own.add(top)
    return own


# --- the guards ---------------------------------------------------------------------------------------------


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a module's own scope: its top level and the blocks in it, not a function's or class's."""
    for node in body:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for block in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(node, block, None) or [])
        for handler in getattr(node, "handlers", None) or []:
            yield from _statements(handler.body)
        for case in getattr(node, "cases", None) or []:
            yield from _statements(case.body)


def _bindings(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it stands for, from the module's absolute imports in its own scope
    (``import sys as s``: s -> sys; ``from contextlib import suppress``: suppress -> contextlib.suppress)."""
    names: dict[str, str] = {}
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(expr: ast.expr, names: dict[str, str]) -> str | None:
    """``sys.version_info`` for ``sys.version_info`` (or ``version_info`` after ``from sys import version_info``)."""
    if isinstance(expr, ast.Name):
        return names.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _dotted(expr.value, names)
        return f"{base}.{expr.attr}" if base else None
    return None


UNKNOWN = object()  # an operand whose value the scan does not know
MICROS = (0, 99)  # a wheel's tag names no micro version: an answer that holds for both ends holds for all
COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)  # monotone in the micro version, unlike == and in


def _constant(expr: ast.expr) -> Any:
    if isinstance(expr, (ast.Constant, ast.Tuple, ast.List, ast.Set)):
        try:
            return ast.literal_eval(expr)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return UNKNOWN
    return UNKNOWN


def _values(expr: ast.expr, names: dict[str, str], facts: Facts, version: tuple[int, int] | None) -> tuple[list[Any], bool]:
    """The values an operand can have on this wheel's Python ``version`` and row: (values, exact), exact False where
    they stand for a range (the micro version); ([UNKNOWN], True) where the scan cannot tell."""
    constant = _constant(expr)
    if constant is not UNKNOWN:
        return [constant], True
    call = isinstance(expr, ast.Call)
    if isinstance(expr, ast.Call):  # platform.system(), platform.machine()
        dotted = _dotted(expr.func, names) if not expr.args and not expr.keywords else None
        marker = {"platform.system": "platform_system", "platform.machine": "platform_machine"}.get(dotted or "")
    else:  # sys.platform, os.name
        dotted = _dotted(expr, names)
        marker = {"sys.platform": "sys_platform", "os.name": "os_name"}.get(dotted or "")
    if marker and marker in facts.markers:
        return [facts.markers[marker]], True
    if version is None:
        return [UNKNOWN], True
    infos = [(*version, micro, "final", 0) for micro in MICROS]
    if dotted == "sys.version_info" and not call:
        return infos, False
    if isinstance(expr, ast.Attribute) and _dotted(expr.value, names) == "sys.version_info":
        index = {"major": 0, "minor": 1, "micro": 2}.get(expr.attr)
        if index is not None:
            return [info[index] for info in infos], index < 2
    if isinstance(expr, ast.Subscript) and _dotted(expr.value, names) == "sys.version_info":
        at = expr.slice
        if isinstance(at, ast.Constant) and type(at.value) is int and -5 <= at.value < 5:
            index = at.value % 5
            return [info[index] for info in infos], index not in (2,)
        if isinstance(at, ast.Slice) and at.step is None and (at.lower is None or _constant(at.lower) == 0) \
                and isinstance(at.upper, ast.Constant) and type(at.upper.value) is int and 0 <= at.upper.value <= 5:
            return [info[:at.upper.value] for info in infos], at.upper.value <= 2
    return [UNKNOWN], True


def truth(test: ast.expr, names: dict[str, str], facts: Facts) -> bool | None:
    """Whether an ``if``'s test holds on every Python the wheel is for and the row's machine (True), on none
    (False), or either, or not known (None). ``TYPE_CHECKING`` is False when the module runs."""
    if isinstance(test, ast.BoolOp):
        parts = [truth(value, names, facts) for value in test.values]
        if isinstance(test.op, ast.And):
            return False if False in parts else (True if all(p is True for p in parts) else None)
        return True if True in parts else (False if all(p is False for p in parts) else None)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = truth(test.operand, names, facts)
        return None if inner is None else not inner
    if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
            (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
        return False
    if isinstance(test, ast.Constant):
        return bool(test.value)
    answers: set[bool] = set()
    for version in facts.versions or [None]:
        answer = _truth_on(test, names, facts, version)
        if answer is None:
            return None
        answers.add(answer)
    return answers.pop() if len(answers) == 1 else None


def _truth_on(test: ast.expr, names: dict[str, str], facts: Facts, version: tuple[int, int] | None) -> bool | None:
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr in ("startswith", "endswith") \
            and len(test.args) == 1 and not test.keywords:
        subjects, _ = _values(test.func.value, names, facts, version)
        subject, prefix = subjects[0], _constant(test.args[0])
        prefixes = prefix if isinstance(prefix, tuple) else (prefix,)
        if len(subjects) == 1 and isinstance(subject, str) and all(isinstance(p, str) for p in prefixes):
            return getattr(subject, test.func.attr)(prefix)
        return None  # str.startswith(1) raises: the module does not import, neither branch runs
    if not isinstance(test, ast.Compare):
        return None
    operands = [_values(expr, names, facts, version) for expr in (test.left, *test.comparators)]
    if any(UNKNOWN in values for values, _ in operands):
        return None
    answers: set[bool] = set()
    for (left, left_exact), op, (right, right_exact) in zip(operands, test.ops, operands[1:]):
        if not (left_exact and right_exact) and not isinstance(op, ORDERING):
            return None  # the micro version decides an equality: not known from the tag
        if type(op) not in COMPARE:
            return None
        try:
            results = {COMPARE[type(op)](a, b) for a in left for b in right} if left_exact or right_exact else \
                {COMPARE[type(op)](a, b) for a, b in zip(left, right)}
        except TypeError:
            return None
        if len(results) != 1:
            return None
        answers.add(results.pop())
    return False if False in answers else True


def _catches_missing_module(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((isinstance(n, ast.Name) and n.id in OPTIONAL_HANDLERS) or
               (isinstance(n, ast.Attribute) and n.attr in OPTIONAL_HANDLERS) for n in names)


def _always_raises(body: list[ast.stmt], names: dict[str, str]) -> bool:
    """Whether a block cannot complete: a ``raise`` (bare or not) or a call that ends the interpreter in it, or an
    ``if`` whose branches both cannot (a handler that logs, then raises, still raises)."""
    for node in body:
        if isinstance(node, ast.Raise):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                (_dotted(node.value.func, names) in ENDS or (isinstance(node.value.func, ast.Name) and node.value.func.id in ENDS)):
            return True
        if isinstance(node, ast.If) and node.orelse and _always_raises(node.body, names) and _always_raises(node.orelse, names):
            return True
    return False


def _suppresses_missing_module(item: ast.withitem, names: dict[str, str]) -> bool:
    """``contextlib.suppress(ImportError)`` (any spelling of the name that the module imports, any exception of
    OPTIONAL_HANDLERS among its arguments)."""
    call = item.context_expr
    if not (isinstance(call, ast.Call) and _dotted(call.func, names) == "contextlib.suppress"):
        return False
    return any((isinstance(a, ast.Name) and a.id in OPTIONAL_HANDLERS) or
               (isinstance(a, ast.Attribute) and a.attr in OPTIONAL_HANDLERS) for a in call.args)


def import_time(body: list[ast.stmt], names: dict[str, str] | None = None, facts: Facts | None = None,
                required: bool = True) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """The import statements of ``body`` that run when the module is imported on the wheel's Python and the row's
    machine, each with whether it is required (False: guarded, the module imports without it). An import in a
    function, or in a branch that does not run there, is not yielded."""
    names = {} if names is None else names
    facts = facts or Facts()
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, required
        elif isinstance(node, ast.If):
            runs = truth(node.test, names, facts)
            if runs is not False:
                yield from import_time(node.body, names, facts, required)
            if runs is not True:
                yield from import_time(node.orelse, names, facts, required)
        elif isinstance(node, ast.Try) or (sys.version_info >= (3, 11) and isinstance(node, getattr(ast, "TryStar", ()))):
            tried = cast(ast.Try, node)  # a TryStar has the same fields
            # A missing module raises ModuleNotFoundError; the first handler that catches it is the one that runs.
            handler = next((h for h in tried.handlers if _catches_missing_module(h)), None)
            copes = handler is not None and not _always_raises(handler.body, names)
            yield from import_time(tried.body, names, facts, required and not copes)
            for each in tried.handlers:  # runs only when something in the body failed
                yield from import_time(each.body, names, facts, False)
            yield from import_time(tried.orelse, names, facts, required)
            yield from import_time(tried.finalbody, names, facts, required)
        elif isinstance(node, ast.With):
            suppressed = any(_suppresses_missing_module(item, names) for item in node.items)
            yield from import_time(node.body, names, facts, required and not suppressed)
        elif isinstance(node, (ast.For, ast.While)):
            yield from import_time(node.body, names, facts, required)
            yield from import_time(node.orelse, names, facts, required)
        elif isinstance(node, ast.ClassDef):
            yield from import_time(node.body, names, facts, required)
        elif isinstance(node, ast.Match):
            for case in node.cases:  # a case's body runs at import as an if's branch does
                yield from import_time(case.body, names, facts, required)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    """The absolute name of a ``from`` import's module; None where it climbs above the top."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level - 1 > len(base) - 1:
        return None
    base = base[:len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def scan(sources: dict[str, str], read, own: set[str], roots: list[str], facts: Facts | None = None) -> Scanned:
    """Follow the import-time imports from ``roots`` through the wheel's modules (``sources``: name -> member), judging
    each guard by ``facts``. Returns the third-party imports, required and only guarded (first per top name), how each
    module was reached, and the modules that do not parse. A guarded import of the wheel's own module is not followed."""
    reached: dict[str, str] = {root: "" for root in roots}
    todo = list(roots)
    third: dict[str, Found] = {}
    optional: dict[str, Found] = {}
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
            found = list(import_time(tree.body, _bindings(tree), facts))
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # not Python (the interpreter refuses it too)
            broken.append(member)
            continue
        is_package = member.endswith("__init__.py")
        for node, required in found:
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
                    if required:
                        reach(target, module)
                elif top not in sys.stdlib_module_names and getattr(node, "level", 0) == 0:
                    (third if required else optional).setdefault(top, Found(top, module, node.lineno))
    return Scanned(third, reached, broken, {top: f for top, f in optional.items() if top not in third})


def chain(reached: dict[str, str], module: str) -> list[str]:
    """The imports from a public module to ``module``."""
    path = [module]
    while reached.get(path[-1]):
        path.append(reached[path[-1]])
    return path[::-1]


def covering(wheel: Wheel, machine: str, system: str = LINUX) -> set[str]:
    """The canonical names of the distributions the wheel declares for a machine of this kind and system, an
    extra's included (an import its extra provides is optional)."""
    env = system_environment(system, machine, wheel)
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


def through(declared: set[str]) -> dict[str, str]:
    """The distributions a declared one is known to require (``REQUIRES``), each with the way it comes:
    ``huggingface-hub`` -> ``pytorch-tokenizers -> tokenizers -> huggingface-hub``."""
    ways = {name: name for name in declared}
    todo = sorted(declared)
    while todo:
        name = todo.pop(0)
        for needed in REQUIRES.get(name, ()):
            if needed not in ways:
                ways[needed] = f"{ways[name]} -> {needed}"
                todo.append(needed)
    return {name: way for name, way in ways.items() if name not in declared}


def pythons(wheel: Wheel) -> tuple[tuple[int, int], ...] | None:
    """The CPython versions a version-specific wheel is for (``cp311-cp311``: 3.11); None where a tag admits more than
    the one its name gives (``abi3``, ``py3``, ``none``): a version guard is then not judged."""
    versions = set()
    for tag in wheel.tags:
        digits = tag.interpreter[2:]
        if not (tag.interpreter.startswith("cp") and digits.isdigit() and len(digits) >= 2 and tag.abi.startswith(tag.interpreter)):
            return None
        versions.add((int(digits[0]), int(digits[1:])))
    return tuple(sorted(versions)) or None


def check_imports_declared(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = IMPORTS_DECLARED.name
    sources = module_names(wheel.files)
    roots = [m for m in PUBLIC if m in sources]
    if not roots:
        return skipped(name, f"the wheel ships none of the public modules ({', '.join(PUBLIC)})")
    facts = Facts(pythons(wheel), system_environment(row.system, row.machine, wheel))
    with zipfile.ZipFile(wheel.path) as archive:
        sizes = {info.filename: info.file_size for info in archive.infolist()}

        def read(member: str) -> bytes:
            if sizes.get(member, 0) > SOURCE_CAP:
                raise ValueError(f"over {SOURCE_CAP} B")  # listed as not scanned, never read whole
            return read_member(archive, member, wheel.filename)

        own = own_packages(sizes, read, lambda member: kind_of(member, read_head(archive, member, wheel.filename, PE_HEAD_SIZE)))
        third, reached, broken, optional = scan(sources, read, own, roots, facts)
    declared = covering(wheel, row.machine, row.system)
    ways = through(declared)
    indirect = {f.top: ways[distribution(f.top)] for f in third.values()
                if not covered(f.top, declared) and distribution(f.top) in ways}
    undeclared = [f for f in third.values() if not covered(f.top, declared) and f.top not in indirect]
    per_distribution: dict[str, Found] = {}  # one per distribution that would cover it: torchgen is torch's
    for found in sorted(undeclared, key=lambda f: f.top):
        per_distribution.setdefault(distribution(found.top), found)
    missing = list(per_distribution.values())
    measured = {"public": roots, "modules_reached": len(reached), "third_party": sorted(third),
                "undeclared": {f.top: f"{f.module} line {f.line}" for f in undeclared},
                "through_dependency": indirect, "optional": sorted(optional), "unparsed": broken}
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
    # Covered only by what a declared distribution requires: said, as the wheel does not declare it itself.
    indirectly = f" ({'; '.join(f'{top} only through a declared dependency: {way}' for top, way in sorted(indirect.items()))})" \
        if indirect else ""
    # A module this interpreter cannot parse (or over the cap) was not scanned: said, so that a PASS claims no more than was read.
    unread = f"; {len(broken)} reached modules not scanned (not Python to this interpreter, or over {SOURCE_CAP} B): " \
             f"{', '.join(broken[:3])}{' ...' if len(broken) > 3 else ''}" if broken else ""
    return passed(name, f"{len(third)} third-party modules imported at import time of {len(reached)} modules reached from "
                        f"{', '.join(roots)}, each declared: {', '.join(sorted(third))}{indirectly}{unread}", **measured)


IMPORTS_DECLARED = Check("imports declared", FILE, 36, check_imports_declared)
CHECKS: tuple[FileCheck, ...] = (IMPORTS_DECLARED,)
