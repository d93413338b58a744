"""What the dynamic loader reads from an ELF file: DT_NEEDED, DT_RPATH, DT_RUNPATH, the symbol
versions it needs, its machine.

Read with pyelftools from the bytes (a wheel member need not be extracted), ``$ORIGIN`` entries resolved against
the library's own folder. The symbol versions and the machine come from auditwheel's own readers, so the gate
judges a file as ``auditwheel show`` would.
"""

from __future__ import annotations

import io
import posixpath
import re
import struct
from dataclasses import dataclass
from typing import Any, Iterator

from smoke.errors import MissingTool

ELF_MAGIC = b"\x7fELF"
# The driver comes with the GPU's driver install, never from a wheel, so it is not resolved.
DRIVER_LIBRARIES = ("libcuda.so",)
CUDA_LIBRARY_PREFIXES = ("libcud", "libcublas", "libcufft", "libcurand", "libcusolver", "libcusparse", "libnvrtc",
                         "libnvJitLink", "libnccl", "libnvToolsExt", "libcupti")
# Folder names that only a build tree has.
BUILD_TREE_PARTS = ("cmake-out", "pip-out", "CMakeFiles", "_deps", "build")
# Dynamic symbols kept from each library, what smoke.checks.owners judges: ExecuTorch's own C++ namespaces
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
    # The weak definitions of the symbols ``defined`` keeps (smoke.checks.owners says when one is a copy)
    weak_defined: frozenset[str] = frozenset()
    soname: str = ""  # its DT_SONAME, or "" for none
    # Every symbol its dynamic symbol table defines, of any binding the loader binds to (global, weak, GNU unique):
    # what smoke.checks.resolve matches the undefined symbols of the libraries loaded with it against
    exported: frozenset[str] = frozenset()

    @property
    def cuda_needed(self) -> tuple[str, ...]:
        """The CUDA libraries it links that a wheel must provide (not the driver)."""
        return tuple(
            name for name in self.needed
            if name.startswith(CUDA_LIBRARY_PREFIXES) and not name.startswith(DRIVER_LIBRARIES)
        )

    def origin_targets(self) -> list[str]:
        """Its sound ``$ORIGIN`` entries, as folders relative to site-packages."""
        return [target for entry in self.search_path
                if not entry_problem(self.path, entry) and (target := resolve(self.path, entry)) is not None]


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
        check_layout(elf, len(data))  # every header, section and segment inside the file, as the tables below assume
        needed, runpath, rpath, soname = [], [], [], ""
        for kind, value in dynamic_strings(elf):
            if kind == "DT_NEEDED":
                needed.append(value)
            elif kind == "DT_SONAME":
                soname = value
            elif kind == "DT_RUNPATH":
                runpath.extend(value.split(":"))
            elif kind == "DT_RPATH":
                rpath.extend(value.split(":"))
        defined, weak_defined = _defined_symbols(elf)
        check_versions(elf)  # bounds auditwheel's walk of the version tables (it follows their counts and links)
        platform = _get_platform(elf)
        try:
            architecture, isa = platform.baseline_architecture.value, platform.extended_architecture
        except ValueError:  # a machine auditwheel does not know: the architecture check names it
            architecture, isa = None, None
        loader = {
            "kind": elf["e_type"],
            "versions": tuple(elf_find_versioned_symbols(elf)),
            "undefined": frozenset(_undefined_symbols(elf)),
            "exported": frozenset(name for name, binding, defined in dynamic_symbols(elf)
                                  if name and defined and binding in EXPORTING_BINDINGS),
            "machine": f"{elf['e_machine']}, {elf.elfclass}-bit, {'little' if elf.little_endian else 'big'}-endian",
            "architecture": architecture,
            "isa_level": isa.value if isa is not None else None,
        }
    # pyelftools reports a malformed file through its own classes, its construct library's and Python's
    # (a bad index, a missing terminator, an offset too large to seek to): each is the same finding, bytes
    # the loader cannot read. So are this module's own checks (ValueError).
    except (ELFError, ConstructError, ValueError, KeyError, IndexError, TypeError, AttributeError, AssertionError,
            ArithmeticError, EOFError, struct.error) as exc:
        raise ElfError(f"{path} is not a readable ELF file ({exc})") from exc
    # The loader ignores DT_RPATH when DT_RUNPATH is present.
    entries, tag = (runpath, "RUNPATH") if runpath else (rpath, "RPATH" if rpath else "")
    return Library(path, tuple(needed), tuple(e for e in entries if e), tag, defined,
                   empty_entries=sum(1 for e in entries if not e), **loader, weak_defined=weak_defined, soname=soname)


# The longest string read from a string table (mangled C++ names run to a few hundred bytes; executorch's
# longest is far below this): a longer one is cut here, so that many entries naming one long run stay cheap.
MAX_SYMBOL_NAME = 4096
STB_WEAK = 2  # the binding in the high four bits of st_info (ELF gABI)
# The bindings of a definition another library's undefined symbol binds to: STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE (10).
EXPORTING_BINDINGS = (1, STB_WEAK, 10)
# Elf32_Verneed and Elf32_Vernaux, and their Elf64 forms, are 16 bytes each (gABI, GNU symbol versioning).
VERSION_ENTRY = 16
# The string-valued tags of the dynamic section that the gate reads or the loader opens.
STRING_TAGS = ("DT_NEEDED", "DT_RUNPATH", "DT_RPATH", "DT_SONAME")


def check_layout(elf, size: int) -> None:
    """Every table the headers name lies inside the file, or ValueError saying which does not.

    A file cut short, or a header pointing past its end, cannot load as its headers say, and pyelftools would read its
    tables from wherever the offset lands.
    """
    for table, offset, count, entry in (("program", "e_phoff", "e_phnum", "e_phentsize"),
                                        ("section", "e_shoff", "e_shnum", "e_shentsize")):
        end = elf[offset] + elf[count] * elf[entry]
        if elf[count] and end > size:
            raise ValueError(f"its {table} headers ({elf[count]} of {elf[entry]} B at byte {elf[offset]}) end at byte {end}, "
                             f"past the end of the file ({size} B): truncated?")
    named = elf.get_section_by_name(".dynamic")
    if named is not None and named["sh_type"] != "SHT_DYNAMIC":
        raise ValueError(f"its .dynamic section is of type {named['sh_type']}, not SHT_DYNAMIC")
    for index in range(elf.num_segments()):
        segment = elf.get_segment(index)
        end = segment["p_offset"] + segment["p_filesz"]
        if segment["p_filesz"] and end > size:
            raise ValueError(f"segment {index} ({segment['p_type']}) ends at byte {end}, past the end of the file "
                             f"({size} B): truncated?")
    count = elf.num_sections()
    for index in range(count):
        section = elf.get_section(index)
        end = section["sh_offset"] + section["sh_size"]
        if section["sh_type"] not in ("SHT_NOBITS", "SHT_NULL") and end > size:
            raise ValueError(f"section {index} ({section['sh_type']}) ends at byte {end}, past the end of the file "
                             f"({size} B): truncated?")
    if count and not 0 < elf.get_shstrndx() < count:
        raise ValueError(f"e_shstrndx {elf.get_shstrndx()} names no section of the {count}")
    if elf["e_type"] in ("ET_DYN", "ET_EXEC"):
        segments = [elf.get_segment(i)["p_type"] for i in range(elf.num_segments())]
        if "PT_LOAD" not in segments:
            raise ValueError(f"it is {elf['e_type']} with no PT_LOAD segment: the loader has nothing to map")
        if "PT_DYNAMIC" in segments and not any(s["sh_type"] == "SHT_DYNAMIC" for s in elf.iter_sections()):
            raise ValueError("its PT_DYNAMIC segment (what the loader reads) has no SHT_DYNAMIC section: its section "
                             "headers are stripped or damaged, so its needs and search path cannot be read")


def _linked_strings(elf, section) -> bytes:
    """The string table a section's sh_link names (a .dynamic's, a .dynsym's, a version table's)."""
    link, count = section["sh_link"], elf.num_sections()
    if not 0 < link < count:
        raise ValueError(f"its {section['sh_type']} section links string table {link}, of {count} sections")
    strings = elf.get_section(link)
    if strings["sh_type"] != "SHT_STRTAB":
        raise ValueError(f"its {section['sh_type']} section links section {link} of type {strings['sh_type']}, "
                         "not a string table")
    return strings.data()


def _string(strings: bytes, offset: int, what: str) -> str:
    """The string at ``offset`` of a string table; one that starts or runs past the table is an error."""
    if offset >= len(strings):
        raise ValueError(f"{what} names byte {offset} of a {len(strings)}-byte string table")
    end = strings.find(b"\0", offset, offset + MAX_SYMBOL_NAME)
    if end < 0:
        if offset + MAX_SYMBOL_NAME >= len(strings):
            raise ValueError(f"{what} at byte {offset} runs past the end of its string table")
        end = offset + MAX_SYMBOL_NAME
    return strings[offset:end].decode("utf-8", "replace")


def _section_of_type(elf, kind: str):
    found = [section for section in elf.iter_sections() if section["sh_type"] == kind]
    if len(found) > 1:
        raise ValueError(f"it has {len(found)} {kind} sections; the loader and the gate read one")
    return found[0] if found else None


def dynamic_strings(elf):
    """(tag, string) of each DT_NEEDED, DT_RUNPATH, DT_RPATH and DT_SONAME of the dynamic section,
    each string read inside the section's own string table (pyelftools reads on past its end)."""
    dynamic = _section_of_type(elf, "SHT_DYNAMIC")
    if dynamic is None:
        return
    strings = _linked_strings(elf, dynamic)
    for tag in dynamic.iter_tags():
        kind = tag.entry.d_tag
        if kind in STRING_TAGS:
            yield kind, _string(strings, tag.entry.d_val, kind)


def check_versions(elf) -> None:
    """The GNU version-needs table is a chain its own counts and links walk: each entry and each name
    inside the section and its string table, and no more entries than the section holds (pyelftools
    follows the counts as given: a count of 2**32 over a zero link reads one entry four billion times)."""
    table = _section_of_type(elf, "SHT_GNU_verneed")
    if table is None:
        return
    strings, data = _linked_strings(elf, table), table.data()
    order = "<" if elf.little_endian else ">"
    need, aux_entry = struct.Struct(order + "HHIII"), struct.Struct(order + "IHHII")
    room, offset = len(data) // VERSION_ENTRY, 0
    if table["sh_info"] > room:
        raise ValueError(f"its version-needs table says {table['sh_info']} entries, its {len(data)} B hold {room} at most")
    for _ in range(table["sh_info"]):
        if not 0 <= offset <= len(data) - VERSION_ENTRY:
            raise ValueError(f"a version-needs entry at byte {offset} lies outside its {len(data)}-byte table")
        _version, count, file, aux, step = need.unpack_from(data, offset)
        _string(strings, file, "a version-needs entry")
        room -= count
        if room < 0:
            raise ValueError(f"its version-needs table names more entries than its {len(data)} B hold")
        at = offset + aux
        for _ in range(count):
            if not 0 <= at <= len(data) - VERSION_ENTRY:
                raise ValueError(f"a version entry at byte {at} lies outside its {len(data)}-byte table")
            _hash, _flags, _other, name, next_aux = aux_entry.unpack_from(data, at)
            _string(strings, name, "a needed version")
            at += next_aux
        offset += step


def dynamic_symbols(elf: Any) -> Iterator[tuple[str, int, bool]]:
    """(name, binding, defined) of each entry of ``.dynsym``, read straight from the section's bytes.

    The same fields pyelftools' ``iter_symbols`` gives, with ``struct`` over the table (Elf32_Sym /
    Elf64_Sym of the gABI): a large library has tens of thousands of entries, and reading them one
    by one through pyelftools took most of ``nox -s inspect``'s time.
    """
    table = _section_of_type(elf, "SHT_DYNSYM")
    if table is None:
        return
    names = _linked_strings(elf, table)
    data, order = table.data(), "<" if elf.little_endian else ">"
    # name, info, shndx: Elf64_Sym is name(4) info(1) other(1) shndx(2) value(8) size(8);
    # Elf32_Sym is name(4) value(4) size(4) info(1) other(1) shndx(2).
    layout = struct.Struct(order + ("IBxH16x" if elf.elfclass == 64 else "I8xBxH"))
    size = table["sh_entsize"] or layout.size
    if size != layout.size or len(data) % size or len(data) != table["sh_size"]:
        # Another entry size or a table cut short by the file: the entries would be read as garbage (and a
        # 1-byte entry size over a stretched table took minutes). The loader reads this table too: refuse.
        raise ValueError(f".dynsym has entries of {size} B over {len(data)} of {table['sh_size']} B, not {layout.size} B each")
    for offset in range(0, len(data), size):
        name, info, shndx = layout.unpack_from(data, offset)
        yield _string(names, name, f"symbol {offset // size}") if name else "", info >> 4, shndx != 0


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
