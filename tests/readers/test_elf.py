"""smoke.readers.elf: malformed ELF files inside a wheel, and the reader fed hostile bytes.

Mutants of a real library of PyPI's 1.5.1 put back into a copy of the wheel: each is the wheel's
defect, a FAIL naming the file (never a traceback, never a PASS), and a row stops at the file checks
without building an environment. Then the ELF reader under hypothesis: mutated real library bytes
through ``smoke.readers.elf.read_library`` and through ``shipped.read_libraries`` and the file checks
on a one-file wheel, with no exception but ``ElfError`` and bounded memory and time. Weak definitions
are read apart.
"""

from __future__ import annotations

import hashlib
import io
import struct
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from smoke.checks import kinds, pipeline, shipped
from smoke.readers import elf
from smoke.readers.wheel import read_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import (
    LFS_POINTER,
    REPO,
    THREADPOOL,
    examples,
    extract,
    rebound,
    rewrite_wheel,
)

SMALL = "executorch/lib/libexecutorch_backend_openvino.so"  # 27 KB: a mutation lands in its tables more often
CPU_ROW = ROWS["cpu_x86_64"]


@pytest.fixture(scope="module")
def real(slim_x86_64) -> bytes:
    with zipfile.ZipFile(slim_x86_64) as archive:
        return archive.read(THREADPOOL)


# --- the mutants: offsets read from the real library with pyelftools, then one field changed ----------

class Layout:
    """Where the fields of a 64-bit little-endian library are (ELF gABI): its header, section headers, tables."""

    def __init__(self, data: bytes):
        from elftools.elf.elffile import ELFFile

        self.data = data
        self.elf = ELFFile(io.BytesIO(data))
        self.shoff = self.elf["e_shoff"]
        self.sections = {s.name: (i, s) for i, s in enumerate(self.elf.iter_sections())}

    def put(self, offset: int, fmt: str, value: int) -> bytes:
        out = bytearray(self.data)
        struct.pack_into(fmt, out, offset, value)
        return bytes(out)

    def section_field(self, name: str, field: int, fmt: str, value: int) -> bytes:
        index, _ = self.sections[name]
        return self.put(self.shoff + 64 * index + field, fmt, value)

    def dynamic_value(self, tag: str, value: int) -> bytes:
        _, dynamic = self.sections[".dynamic"]
        k = next(k for k, t in enumerate(dynamic.iter_tags()) if t.entry.d_tag == tag)
        return self.put(dynamic["sh_offset"] + 16 * k + 8, "<Q", value)

    def symbol_name(self, value: int) -> bytes:
        _, dynsym = self.sections[".dynsym"]
        return self.put(dynsym["sh_offset"] + 24 * 1, "<I", value)  # entry 0 is the null symbol

    def end(self, name: str) -> int:
        _, section = self.sections[name]
        return section["sh_offset"] + section["sh_size"]


SH_TYPE, SH_OFFSET, SH_SIZE, SH_INFO = 4, 24, 32, 44  # Elf64_Shdr
MUTANTS = {
    # a .dynamic section that is not SHT_DYNAMIC
    "dynamic is SHT_PROGBITS": (lambda l: l.section_field(".dynamic", SH_TYPE, "<I", 1), "its .dynamic section is of type SHT_PROGBITS, not SHT_DYNAMIC"),
    "dynamic is SHT_NOBITS": (lambda l: l.section_field(".dynamic", SH_TYPE, "<I", 8), "its .dynamic section is of type SHT_NOBITS, not SHT_DYNAMIC"),
    # string offsets past the table or past the end of the file
    "DT_NEEDED past .dynstr": (lambda l: l.dynamic_value("DT_NEEDED", l.sections[".dynstr"][1]["sh_size"] + 1000), "DT_NEEDED names byte 8643 of a 7643-byte string table"),
    "DT_NEEDED past EOF": (lambda l: l.dynamic_value("DT_NEEDED", 2**40), "DT_NEEDED names byte 1099511627776"),
    "DT_RUNPATH past .dynstr": (lambda l: l.dynamic_value("DT_RUNPATH", l.sections[".dynstr"][1]["sh_size"] + 5), "DT_RUNPATH names byte 7648"),
    "symbol name past .dynstr": (lambda l: l.symbol_name(0xFFFFFFF0), "symbol 1 names byte 4294967280 of a 7643-byte string table"),
    ".dynstr sh_offset past EOF": (lambda l: l.section_field(".dynstr", SH_OFFSET, "<Q", len(l.data) + 4096), "section 4 (SHT_STRTAB) ends at byte 205883, past the end of the file (194144 B)"),
    ".dynstr sh_offset 2**63": (lambda l: l.section_field(".dynstr", SH_OFFSET, "<Q", 2**63 + 5), "past the end of the file"),  # was OverflowError, a traceback
    ".dynsym sh_size huge": (lambda l: l.section_field(".dynsym", SH_SIZE, "<Q", 24 * 2**36), "section 3 (SHT_DYNSYM) ends at byte"),
    "version needs count 2**32-1": (lambda l: l.section_field(".gnu.version_r", SH_INFO, "<I", 2**32 - 1), "its version-needs table says 4294967295 entries"),
    # truncated: in the header, in the program headers, in the section headers, in the middle of .dynstr
    "cut in the ELF header": (lambda l: l.data[:40], "not a readable ELF file"),
    "cut in the program headers": (lambda l: l.data[:64 + 56 + 10], "its program headers (10 of 56 B at byte 64) end at byte 624, past the end of the file (130 B)"),
    "cut in the section headers": (lambda l: l.data[:l.shoff + 64 * 3 + 7], "its section headers (29 of 64 B at byte 192288) end at byte 194144"),
    "cut in .dynstr": (lambda l: l.data[:l.end(".dynstr") - 3000], "end at byte"),
    # e_shnum / e_shoff / e_phnum nonsense
    "e_shnum 0xffff": (lambda l: l.put(0x3C, "<H", 0xFFFF), "its section headers (65535 of 64 B"),
    "e_shnum 0 (headers stripped)": (lambda l: l.put(0x3C, "<H", 0), "its PT_DYNAMIC segment (what the loader reads) has no SHT_DYNAMIC section"),
    "e_shoff 0": (lambda l: l.put(0x28, "<Q", 0), "not a readable ELF file"),
    "e_shoff past EOF": (lambda l: l.put(0x28, "<Q", len(l.data) + 10), "past the end of the file"),
    "e_shoff 2**64-1": (lambda l: l.put(0x28, "<Q", 2**64 - 1), "its section headers (29 of 64 B at byte 18446744073709551615)"),
    "e_phoff 2**64-1": (lambda l: l.put(0x20, "<Q", 2**64 - 1), "its program headers (10 of 56 B at byte 18446744073709551615)"),
    "e_phnum 0xffff": (lambda l: l.put(0x38, "<H", 0xFFFF), "its program headers (65535 of 56 B at byte 64)"),
    "e_shstrndx 0xffff": (lambda l: l.put(0x3E, "<H", 0xFFFF), "not a readable ELF file"),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_each_malformed_library_is_an_elf_error_naming_it(real, mutant):
    make, said = MUTANTS[mutant]
    with pytest.raises(elf.ElfError, match=r"^executorch/lib/libexecutorch_threadpool\.so is not a readable ELF file \(") as caught:
        elf.read_library(THREADPOOL, make(Layout(real)))
    assert said in str(caught.value)


def inspect(wheel: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "smoke", "inspect", str(wheel), "--row", "cpu_x86_64"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_the_unmutated_wheel_passes_inspect(declared_slim):
    proc = inspect(declared_slim)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS architecture: 18 ELF files, each x86_64" in proc.stdout


# These passed `nox -s inspect` (no section headers: no needs read at all) or ended in a traceback (an
# offset too large to seek to) or failed `libraries resolve` with "needs :" (a name read from past its table).
@pytest.mark.slow
@pytest.mark.parametrize("mutant", [".dynstr sh_offset 2**63", "e_shnum 0 (headers stripped)", "e_shoff 0",
                                    "DT_NEEDED past .dynstr", "dynamic is SHT_PROGBITS", "cut in .dynstr",
                                    "version needs count 2**32-1"])
def test_inspect_fails_a_wheel_with_a_malformed_library_naming_it(declared_slim, real, tmp_path, mutant):
    make, said = MUTANTS[mutant]
    wheel = rewrite_wheel(declared_slim, tmp_path, add={THREADPOOL: make(Layout(real))})
    before = digest(wheel)
    proc = inspect(wheel)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr
    fails = [line for line in proc.stdout.splitlines() if line.startswith("FAIL architecture")]
    assert len(fails) == 1 and fails[0].startswith(f"FAIL architecture: {THREADPOOL} is not a readable ELF file (")
    assert said in fails[0]
    assert "needs :" not in proc.stdout  # no name read from past its table
    assert digest(wheel) == before


@pytest.mark.slow
def test_a_git_lfs_pointer_named_as_the_library_fails_inspect_naming_it(declared_slim, tmp_path):
    wheel = rewrite_wheel(declared_slim, tmp_path, add={THREADPOOL: LFS_POINTER})
    proc = inspect(wheel)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"FAIL architecture: {THREADPOOL} is named as a shared library but is not an ELF file" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("mutant", ["lfs pointer", "e_shnum 0 (headers stripped)"])
def test_a_row_stops_at_the_file_checks_and_builds_nothing(declared_slim, real, tmp_path, mutant):
    data = LFS_POINTER if mutant == "lfs pointer" else MUTANTS[mutant][0](Layout(real))
    wheel = rewrite_wheel(declared_slim, tmp_path / "wheel", add={THREADPOOL: data})
    env = tmp_path / "env"
    proc = subprocess.run([sys.executable, "-m", "smoke", "cpu_x86_64", str(wheel), "--env-dir", str(env)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert any(line.startswith(f"FAIL architecture: {THREADPOOL} ") for line in proc.stdout.splitlines())
    assert "the environment is not built: the wheel ships libraries the gate cannot read (see architecture)" in proc.stdout
    assert "building the environment" not in proc.stdout + proc.stderr
    assert not env.exists()
    assert proc.stdout.rstrip().splitlines()[-1].startswith("cpu_x86_64: FAILED: ")


# --- hypothesis: mutated real library bytes through every ELF entry point ---------------------------------

def _fields(data: bytes) -> list[tuple[int, int]]:
    """(offset, width) of every header field the reader follows: the ELF header's, each program and section
    header's, each dynamic entry's value."""
    layout = Layout(data)
    e = layout.elf
    fields = [(0x10, 2), (0x12, 2), (0x20, 8), (0x28, 8), (0x36, 2), (0x38, 2), (0x3A, 2), (0x3C, 2), (0x3E, 2), (4, 1), (5, 1)]
    for i in range(e["e_phnum"]):
        base = e["e_phoff"] + 56 * i
        fields += [(base, 4), (base + 8, 8), (base + 32, 8)]  # p_type, p_offset, p_filesz
    for i in range(e["e_shnum"]):
        base = e["e_shoff"] + 64 * i
        fields += [(base + 4, 4), (base + 24, 8), (base + 32, 8), (base + 40, 4), (base + 44, 4), (base + 56, 8)]
    _, dynamic = layout.sections[".dynamic"]
    fields += [(dynamic["sh_offset"] + 16 * k + off, 8) for k in range(dynamic["sh_size"] // 16) for off in (0, 8)]
    return fields


def _regions(data: bytes) -> list[tuple[int, int]]:
    """The byte ranges the reader parses: the headers and the tables of the dynamic loader."""
    layout = Layout(data)
    e = layout.elf
    regions = [(0, 64), (e["e_phoff"], e["e_phoff"] + 56 * e["e_phnum"]), (e["e_shoff"], e["e_shoff"] + 64 * e["e_shnum"])]
    for name in (".dynamic", ".dynsym", ".dynstr", ".gnu.version_r", ".note.gnu.property", ".shstrtab"):
        if name in layout.sections:
            section = layout.sections[name][1]
            regions.append((section["sh_offset"], section["sh_offset"] + section["sh_size"]))
    return [(start, end) for start, end in regions if end > start]


def _mutations(data: bytes):
    from hypothesis import strategies as st

    fields, regions = _fields(data), _regions(data)
    size = len(data)

    def value(width):
        top = 2 ** (8 * width) - 1
        return st.one_of(st.sampled_from([0, 1, 2, 0x7F, top, top - 15, size, size + 1, size // 2, 2 ** (8 * width - 1)]),
                         st.integers(0, top))

    field = st.sampled_from(fields).flatmap(lambda f: st.tuples(st.just(f[0]), st.just(f[1]), value(f[1])))
    flip = st.sampled_from(regions).flatmap(lambda r: st.tuples(st.integers(r[0], r[1] - 1), st.just(1), st.integers(0, 255)))
    anywhere = st.tuples(st.integers(0, size - 1), st.just(1), st.integers(0, 255))
    return st.tuples(st.lists(st.one_of(field, flip, anywhere), min_size=1, max_size=12),
                     st.one_of(st.none(), st.integers(0, size)))


def _apply(data: bytes, mutation) -> bytes:
    changes, cut = mutation
    out = bytearray(data)
    for offset, width, number in changes:
        out[offset:offset + width] = (number % 2 ** (8 * width)).to_bytes(width, "little")
    return bytes(out[:cut] if cut is not None else out)


# Every example reads a file of at most 194 KB: memory stays far under this, whatever its headers claim.
PEAK_BYTES = 64 * 1024 * 1024
EXAMPLE_SECONDS = 5.0


def _read_mutants(data: bytes, path: str, count: int) -> None:
    from hypothesis import HealthCheck, given, settings

    slowest = [0.0]

    @settings(max_examples=examples(count), deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(_mutations(data))
    def read(mutation):
        mutated = _apply(data, mutation)
        start = time.monotonic()
        try:
            lib = elf.read_library(path, mutated)
        except elf.ElfError as exc:
            assert str(exc).startswith(f"{path} is not a readable ELF file (")
        else:
            assert isinstance(lib, elf.Library) and all(isinstance(n, str) for n in lib.needed)
        slowest[0] = max(slowest[0], time.monotonic() - start)

    tracemalloc.start()
    try:
        read()
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES, f"peak {peak} B"
    assert slowest[0] < EXAMPLE_SECONDS, f"slowest example {slowest[0]:.2f} s"


@pytest.mark.slow
@pytest.mark.parametrize("member", [SMALL, THREADPOOL])
def test_mutated_libraries_are_read_or_refused_as_elf_error(slim_x86_64, member):
    with zipfile.ZipFile(slim_x86_64) as archive:
        _read_mutants(archive.read(member), member, 150)


@pytest.mark.slow
@pytest.mark.parametrize("member", [SMALL, THREADPOOL])
def test_thousands_of_mutated_libraries_are_read_or_refused_as_elf_error(slim_x86_64, member):
    with zipfile.ZipFile(slim_x86_64) as archive:
        _read_mutants(archive.read(member), member, 2500)


def _judge_one_file_wheels(slim_x86_64, tmp_path, count: int) -> None:
    """The wheel's entry point: the mutant as the only library of a wheel, through ``shipped.read_libraries``
    and every file check of the CPU row."""
    from hypothesis import HealthCheck, given, settings

    with zipfile.ZipFile(slim_x86_64) as archive:
        data = archive.read(SMALL)
    checks = pipeline.file_checks(CPU_ROW)
    counter = iter(range(10**9))

    @settings(max_examples=examples(count), deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(_mutations(data))
    def judge(mutation):
        folder = tmp_path / str(next(counter))
        wheel = read_wheel(rewrite_wheel(slim_x86_64, folder, keep=lambda n: ".dist-info/" in n,
                                         add={SMALL: _apply(data, mutation)}))
        libraries = shipped.read_libraries(wheel)
        assert len(libraries.items) + len(libraries.unreadable) + len(libraries.not_elf) == 1
        results = {c.name: kinds.run_file(c, wheel, CPU_ROW, libraries) for c in checks}
        if libraries.unreadable or libraries.not_elf:
            assert results["architecture"].status is Status.FAIL and SMALL in results["architecture"].reason
        for child in folder.iterdir():
            child.unlink()
        folder.rmdir()

    tracemalloc.start()
    try:
        judge()
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES, f"peak {peak} B"


@pytest.mark.slow
def test_mutated_libraries_in_a_wheel_are_judged_never_a_traceback(slim_x86_64, tmp_path):
    _judge_one_file_wheels(slim_x86_64, tmp_path, 100)


@pytest.mark.slow
def test_thousands_of_mutated_libraries_in_a_wheel_are_judged_never_a_traceback(slim_x86_64, tmp_path):
    _judge_one_file_wheels(slim_x86_64, tmp_path, 1500)


# --- the ELF reader fed hostile bytes ------------------------------------------------------------

def test_a_real_library_with_any_bytes_changed_is_read_or_refused_as_elf_error_never_another_exception(slim_x86_64):
    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    from smoke.readers import elf

    with zipfile.ZipFile(slim_x86_64) as archive:
        real = archive.read(THREADPOOL)

    # The changes land where the headers, the dynamic section and the symbol tables are (the first 8 KB of
    # this library): elsewhere is code, which the reader does not parse.
    @settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.tuples(st.integers(0, 8000), st.integers(0, 255)), min_size=1, max_size=40),
           st.integers(0, len(real)))
    @example([(639, 96)], len(real))  # found here: pyelftools' construct raised ArrayError ('missing terminator')
    def read(changes, length):
        data = bytearray(real)
        for offset, value in changes:
            data[offset] = value
        try:
            elf.read_library(THREADPOOL, bytes(data[:length]))
        except elf.ElfError:
            pass  # the architecture check names it: "... is not a readable ELF file (...)"

    read()


def test_a_symbol_table_with_a_false_entry_size_is_refused_at_once(declared_slim):
    import struct
    import time

    from elftools.elf.elffile import ELFFile

    from smoke.readers import elf

    with zipfile.ZipFile(declared_slim) as archive:
        data = bytearray(archive.read(THREADPOOL))
    parsed = ELFFile(io.BytesIO(bytes(data)))
    index = [s.name for s in parsed.iter_sections()].index(".dynsym")
    struct.pack_into("<Q", data, parsed["e_shoff"] + index * parsed["e_shentsize"] + 56, 1)  # sh_entsize = 1
    start = time.monotonic()
    with pytest.raises(elf.ElfError, match=r"\.dynsym has entries of 1 B"):
        elf.read_library(THREADPOOL, bytes(data))
    assert time.monotonic() - start < 2

PORTABLE = "executorch/extension/pybindings/_portable_lib.cpython-312-x86_64-linux-gnu.so"


# --- weak definitions -----------------------------------------------------------------------

def test_a_weak_definition_is_read_apart_and_unique_ones_not_at_all():
    data = extract("unpatched", PORTABLE)
    strong = elf.read_library(PORTABLE, data)
    weak = elf.read_library(PORTABLE, rebound(data, "aoti_torch_", 2))  # STB_WEAK
    unique = elf.read_library(PORTABLE, rebound(data, "aoti_torch_", 10))  # STB_GNU_UNIQUE: one per process
    def shims_of(names):
        return {n for n in names if n.startswith("aoti_torch_")}

    assert shims_of(strong.defined) and not shims_of(strong.weak_defined)
    assert shims_of(weak.weak_defined) == shims_of(strong.defined) and not shims_of(weak.defined)
    assert not shims_of(unique.defined) and not shims_of(unique.weak_defined)
