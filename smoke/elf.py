"""What the dynamic loader reads from an ELF file: DT_NEEDED, DT_RPATH, DT_RUNPATH, the symbol
versions it needs, its machine.

Read with pyelftools from the bytes (a wheel member need not be extracted), and the
``$ORIGIN`` entries resolved as the loader would, against the library's own folder. The symbol
versions and the machine are read with auditwheel's own readers (``elf_find_versioned_symbols``,
and the ELF header to architecture mapping of its ``lddtree``), so the gate judges a file as
``auditwheel show`` would.
"""

from __future__ import annotations

import io
import posixpath
import re
import struct
from dataclasses import dataclass

from smoke.errors import MissingTool

ELF_MAGIC = b"\x7fELF"
# The driver comes with the GPU's driver install, never from a wheel, so it is not resolved.
DRIVER_LIBRARIES = ("libcuda.so",)
CUDA_LIBRARY_PREFIXES = ("libcud", "libcublas", "libcufft", "libcurand", "libcusolver", "libcusparse", "libnvrtc",
                         "libnvJitLink", "libnccl", "libnvToolsExt", "libcupti")
# Folder names that only a build tree has.
BUILD_TREE_PARTS = ("cmake-out", "pip-out", "CMakeFiles", "_deps", "build")
# Dynamic symbols kept from each library, what smoke.owners judges: ExecuTorch's own C++ namespaces
# (mangled: the runtime, its extensions and delegates, the kernels), the AOTI shim layer's C functions
# and the entry points of the third-party code the runtime bundles (pthreadpool, cpuinfo, XNNPACK).
# The rest of a large library's table is not needed, so not kept.
CORE_SYMBOL_PREFIXES = ("_ZN10executorch", "_ZN5torch8executor", "aoti_torch_", "pthreadpool_create", "cpuinfo_initialize",
                        "xnn_create_runtime")
# The binding of a definition that is the library's own (STB_GLOBAL). Weak ones are kept apart
# (weak_defined); STB_GNU_UNIQUE is neither: the loader keeps one definition of such a symbol per
# process, across RTLD_LOCAL too, so it is never a second copy.
STRONG_BINDINGS = (1,)


class ElfError(ValueError):
    """Bytes that are not a readable ELF shared library."""


@dataclass(frozen=True)
class Library:
    path: str  # relative to site-packages, POSIX: executorch/lib/libexecutorch.so
    needed: tuple[str, ...]
    search_path: tuple[str, ...]  # RUNPATH entries, or RPATH where there is no RUNPATH (empty entries dropped)
    tag: str  # "RUNPATH", "RPATH" or "" for none
    # The symbols its dynamic symbol table defines with global binding (STRONG_BINDINGS), of the
    # namespaces the gate judges (CORE_SYMBOL_PREFIXES): what it provides to libraries loaded with it.
    # Weak definitions of them are in weak_defined (the last field).
    defined: frozenset[str] = frozenset()
    # The loader's view beyond the search path (read_library fills them; defaults keep hand-made ones short):
    empty_entries: int = 0  # empty entries of the search path ("a::b", "a:"): the loader reads each as the working directory
    kind: str = "ET_DYN"  # e_type: ET_DYN (a library or extension module), ET_EXEC (an executable)
    # (soname, version) for each symbol version it needs from another library: ("libc.so.6", "GLIBC_2.38")
    versions: tuple[tuple[str, str], ...] = ()
    # Its undefined, non-weak dynamic symbols (what a policy's blacklist is judged on)
    undefined: frozenset[str] = frozenset()
    machine: str = ""  # e_machine and class as read: "EM_X86_64, 64-bit, little-endian"
    architecture: str | None = None  # auditwheel's name of its baseline architecture (x86_64, aarch64, ...), None if unknown
    isa_level: str | None = None  # an x86-64 microarchitecture level it declares it needs (x86_64_v3, ...), or None
    # The weak definitions of the symbols ``defined`` keeps (smoke.owners says when one is a copy)
    weak_defined: frozenset[str] = frozenset()

    @property
    def cuda_needed(self) -> tuple[str, ...]:
        """The CUDA libraries it links that a wheel must provide (not the driver)."""
        return tuple(
            name for name in self.needed
            if name.startswith(CUDA_LIBRARY_PREFIXES) and not name.startswith(DRIVER_LIBRARIES)
        )

    def origin_targets(self) -> list[str]:
        """Its sound ``$ORIGIN`` entries, as folders relative to site-packages."""
        return [resolve(self.path, entry) for entry in self.search_path if not entry_problem(self.path, entry)]


def is_elf(data: bytes) -> bool:
    return data[:4] == ELF_MAGIC


def read_library(path: str, data: bytes) -> Library:
    try:
        from auditwheel.elfutils import elf_find_versioned_symbols
        from auditwheel.lddtree import _get_platform  # pinned auditwheel (requirements-gate.txt): its one ELF-header reader
        from elftools.common.exceptions import ELFError
        from elftools.construct.core import ConstructError
        from elftools.elf.elffile import ELFFile
    except ImportError as exc:
        import sys

        raise MissingTool("pyelftools or auditwheel is not installed in the interpreter running the gate, so the shipped "
                          f"libraries cannot be read: {sys.executable} -m pip install -r requirements-gate.txt") from exc

    try:
        elf = ELFFile(io.BytesIO(data))
        dynamic = elf.get_section_by_name(".dynamic")
        needed, runpath, rpath = [], [], []
        for tag in dynamic.iter_tags() if dynamic is not None else ():
            kind = tag.entry.d_tag
            if kind == "DT_NEEDED":
                needed.append(tag.needed)
            elif kind == "DT_RUNPATH":
                runpath.extend(tag.runpath.split(":"))
            elif kind == "DT_RPATH":
                rpath.extend(tag.rpath.split(":"))
        defined, weak_defined = _defined_symbols(elf)
        platform = _get_platform(elf)
        try:
            architecture, isa = platform.baseline_architecture.value, platform.extended_architecture
        except ValueError:  # a machine auditwheel does not know: the architecture check names it
            architecture, isa = None, None
        loader = {
            "kind": elf["e_type"],
            "versions": tuple(elf_find_versioned_symbols(elf)),
            "undefined": frozenset(_undefined_symbols(elf)),
            "machine": f"{elf['e_machine']}, {elf.elfclass}-bit, {'little' if elf.little_endian else 'big'}-endian",
            "architecture": architecture,
            "isa_level": isa.value if isa is not None else None,
        }
    # pyelftools reports a malformed file through its own classes, its construct library's and Python's
    # (a bad index, a missing terminator): each is the same finding, bytes the loader cannot read.
    except (ELFError, ConstructError, ValueError, KeyError, IndexError, TypeError, AttributeError, AssertionError,
            struct.error) as exc:
        raise ElfError(f"{path} is not a readable ELF file ({exc})") from exc
    # The loader ignores DT_RPATH when DT_RUNPATH is present.
    entries, tag = (runpath, "RUNPATH") if runpath else (rpath, "RPATH" if rpath else "")
    return Library(path, tuple(needed), tuple(e for e in entries if e), tag, defined,
                   empty_entries=sum(1 for e in entries if not e), **loader, weak_defined=weak_defined)


# The longest symbol name read (mangled C++ names run to a few hundred bytes; executorch's longest is far below this).
MAX_SYMBOL_NAME = 4096
STB_WEAK = 2  # the binding in the high four bits of st_info (ELF gABI)


def dynamic_symbols(elf):
    """(name, binding, defined) of each entry of ``.dynsym``, read straight from the section's bytes.

    The same fields pyelftools' ``iter_symbols`` gives, with ``struct`` over the table (Elf32_Sym /
    Elf64_Sym of the gABI): a large library has tens of thousands of entries, and reading them one
    by one through pyelftools took most of ``nox -s inspect``'s time.
    """
    table = elf.get_section_by_name(".dynsym")
    if table is None:
        return
    names = elf.get_section(table["sh_link"]).data()
    data, order = table.data(), "<" if elf.little_endian else ">"
    # name, info, shndx: Elf64_Sym is name(4) info(1) other(1) shndx(2) value(8) size(8); Elf32_Sym is name(4) value(4) size(4) info(1) other(1) shndx(2).
    layout = struct.Struct(order + ("IBxH16x" if elf.elfclass == 64 else "I8xBxH"))
    size = table["sh_entsize"] or layout.size
    if size != layout.size or len(data) % size or len(data) != table["sh_size"]:
        # Another entry size or a table cut short by the file: the entries would be read as garbage (and a
        # 1-byte entry size over a stretched table took minutes). The loader reads this table too: refuse.
        raise ValueError(f".dynsym has entries of {size} B over {len(data)} of {table['sh_size']} B, not {layout.size} B each")
    for offset in range(0, len(data), size):
        name, info, shndx = layout.unpack_from(data, offset)
        end = names.find(b"\0", name, name + MAX_SYMBOL_NAME)  # bounded: a name without its terminator is garbage
        yield names[name:end if end >= 0 else name].decode("utf-8", "replace"), info >> 4, shndx != 0


def _undefined_symbols(elf) -> list[str]:
    """The undefined, non-weak symbols of the dynamic symbol table (as auditwheel's ``get_undefined_symbols``)."""
    return [name for name, binding, defined in dynamic_symbols(elf) if name and not defined and binding != STB_WEAK]


def _defined_symbols(elf) -> tuple[frozenset[str], frozenset[str]]:
    """The defined symbols of the dynamic symbol table whose names start with CORE_SYMBOL_PREFIXES:
    (those of STRONG_BINDINGS, the weak ones)."""
    strong, weak = set(), set()
    for name, binding, defined in dynamic_symbols(elf):
        if defined and name.startswith(CORE_SYMBOL_PREFIXES):
            if binding in STRONG_BINDINGS:
                strong.add(name)
            elif binding == STB_WEAK:
                weak.add(name)
    return frozenset(strong), frozenset(weak)


def mangled_prefix(qualified: str) -> str:
    """The start of every Itanium-mangled name of a function in nested namespaces.

    ``executorch::runtime::register_backend`` -> ``_ZN10executorch7runtime16register_backendE``:
    ``_ZN``, each part as its length and its text, then ``E`` (the parameter types follow).
    """
    return "_ZN" + "".join(f"{len(part)}{part}" for part in qualified.split("::")) + "E"


# site-packages is PREFIX/lib/pythonX.Y/site-packages on Linux: an entry may climb this many
# folders above it and still be inside the installed environment (PREFIX/lib, say).
SITE_DEPTH_IN_PREFIX = 3


def resolve(library: str, entry: str) -> str | None:
    """An ``$ORIGIN`` entry as a path relative to site-packages, or None if it leaves the environment.

    ``executorch/lib/libx.so`` with ``$ORIGIN/../../torch/lib`` gives ``torch/lib``;
    ``executorch/extension/llm/custom_ops/liby.so`` with ``$ORIGIN/../../../../../..`` gives
    ``../..``, the environment's own ``lib`` (PyPI's 1.4.1 ships that entry).
    """
    origin = posixpath.dirname(library)
    relative = entry.replace("${ORIGIN}", "$ORIGIN").replace("$ORIGIN", origin or ".", 1)
    normal = posixpath.normpath(relative)
    if posixpath.isabs(normal):
        return None
    parts = normal.split("/")
    climbs = next((i for i, part in enumerate(parts) if part != ".."), len(parts))
    if climbs > SITE_DEPTH_IN_PREFIX:
        return None
    return "" if normal == "." else normal


def entry_problem(library: str, entry: str) -> str | None:
    """Why the loader would search somewhere no user has, or None if the entry is sound."""
    parts = entry.split("/")
    if any(part in BUILD_TREE_PARTS for part in parts):
        return "a build-tree folder"
    if entry.startswith("/"):
        return "an absolute path"
    if not re.match(r"(\$ORIGIN|\$\{ORIGIN\})(/|$)", entry):
        # glibc expands $ORIGIN only when no name character follows it ("$ORIGINX/lib" is a folder named so)
        return "relative to the working directory, not to $ORIGIN"
    if resolve(library, entry) is None:
        return "outside the environment"
    return None


@dataclass(frozen=True)
class Libraries:
    """The wheel's ELF files (libraries, extension modules, executables), read once from the zip."""

    items: tuple[Library, ...]
    unreadable: tuple[str, ...]
    # Files named as shared libraries (``*.so``, ``*.so.N``) that are not ELF at all (a Git LFS
    # pointer committed in place of the library, say): the loader cannot load them.
    not_elf: tuple[str, ...] = ()
