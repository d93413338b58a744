"""Read a wheel before anything is built: its name, tags, METADATA and file list.

Nothing is extracted. What makes a run impossible raises a ``GateError`` with
the fix in its message; what is a property of the wheel under test (is it a CUDA
build?) is a check result.
"""

from __future__ import annotations

import csv
import email.message
import email.parser
import functools
import hashlib
import io
import platform
import re
import stat
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from zlib import error as zlib_error

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from smoke import proc
from smoke.errors import InvalidWheel, WrongPlatform
from smoke.readers.systems import LINUX, SYSTEMS, WINDOWS, of_platform

PROJECT = "executorch"


@dataclass(frozen=True)
class Wheel:
    path: Path
    version: Version
    tags: frozenset[Tag]
    size: int
    sha256: str
    files: tuple[str, ...]
    requires_dist: tuple[Requirement, ...]
    build: str = ""  # the file name's build tag ("1" in executorch-1.5.1-1-cp311-...), or ""
    wheel_tags: tuple[str, ...] = ()  # WHEEL's Tag lines, as written
    wheel_build: str = ""  # WHEEL's Build line, or ""
    # requirements the user brings, by the gate's policy (smoke.readers.settings: torch = "user-supplied"): counted as
    # declared by the checks that read Requires-Dist, and said as the user's where a line names one
    user_supplied: tuple[str, ...] = ()

    @property
    def filename(self) -> str:
        return self.path.name

    @property
    def machines(self) -> frozenset[str]:
        return frozenset(platform_machine(tag.platform) for tag in self.tags)

    @property
    def linux_machines(self) -> frozenset[str]:
        """The machines of its Linux platform tags (and "any"): what a row of the gate, all Linux, can take."""
        return frozenset(platform_machine(tag.platform) for tag in self.tags if is_linux(tag.platform) or tag.platform == "any")

    @property
    def release(self) -> str:
        """'1.5' for 1.5.1, 1.5.0.dev20260101+cu130 and so on."""
        return f"{self.version.major}.{self.version.minor}"


def platform_machine(platform: str) -> str:
    """The architecture a platform tag names: 'manylinux_2_28_x86_64' -> 'x86_64'."""
    if platform == "any":
        return "any"
    for machine in ("x86_64", "aarch64", "arm64", "amd64", "win32", "i686", "armv7l", "ppc64le", "s390x"):
        if platform.lower().endswith(machine):
            return machine
    return platform.rsplit("_", 1)[-1]


def is_linux(platform: str) -> bool:
    return of_platform(platform) == LINUX


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_wheel(path: Path | str) -> Wheel:
    path = Path(path)
    if not path.exists():
        raise InvalidWheel(f"wheel {str(path)!r} does not exist; pass the path of an executorch .whl file")
    if not path.is_file():
        raise InvalidWheel(f"wheel {str(path)!r} is not a file; pass the path of an executorch .whl file")
    try:
        name, version, build, tags = parse_wheel_filename(path.name)
    except (InvalidWheelFilename, InvalidVersion) as exc:
        raise InvalidWheel(f"{path.name!r} is not a wheel file name ({exc}); pass an executorch .whl file") from exc
    if name != canonicalize_name(PROJECT):
        raise InvalidWheel(f"wheel {path.name!r} is of project {name!r}, not {PROJECT!r}; pass an executorch wheel")
    _refuse_uninstallable_tags(path.name, tags)
    try:
        with zipfile.ZipFile(path) as archive:
            _refuse_unsafe_entries(path.name, archive)
            files = tuple(archive.namelist())
            dist_info = _dist_info(path.name, files)
            wheel_file = _read_text(archive, dist_info, "WHEEL", path.name)
            metadata = _read_text(archive, dist_info, "METADATA", path.name)
            record = _read_text(archive, dist_info, "RECORD", path.name)
    except PermissionError as exc:  # the file is fine; this user may not read it (issue 61)
        raise InvalidWheel(f"wheel {path.name!r} cannot be read: {exc.strerror or exc}; make it readable "
                           f"(chmod a+r {str(path)!r}) or pass a copy you can read") from exc
    except (zipfile.BadZipFile, zlib_error, OSError, EOFError, NotImplementedError, RuntimeError, ValueError) as exc:
        raise InvalidWheel(f"wheel {path.name!r} cannot be read as a wheel archive: {exc}; download or build it again") from exc
    wheel_tags, wheel_build = _read_wheel_file(path.name, wheel_file)
    _read_record(path.name, record)
    requires = _read_metadata(path.name, metadata, version)
    return Wheel(path, version, frozenset(tags), path.stat().st_size, _sha256(path), files, requires,
                 build=f"{build[0]}{build[1]}" if build else "", wheel_tags=wheel_tags, wheel_build=wheel_build)


# What the gate reads whole from the .dist-info folder, bounded: the public wheels' largest are
# 115 B (WHEEL), 5.9 kB (METADATA) and 711 kB (RECORD, 1.2.0 x86_64).
TEXT_CAPS = {"WHEEL": 64 << 10, "METADATA": 1 << 20, "RECORD": 16 << 20}


def _dist_info(filename: str, files: tuple[str, ...]) -> str:
    """The one .dist-info folder at the top of the wheel, which must be executorch's."""
    folders = sorted({parts[0] for n in files if len(parts := PurePosixPath(n).parts) > 1 and parts[0].endswith(".dist-info")})
    if not folders:
        raise InvalidWheel(f"wheel {filename!r} has no .dist-info folder (no WHEEL, METADATA or RECORD): it is not a "
                           "wheel pip would install; build it again (python -m build --wheel)")
    if len(folders) > 1:
        raise InvalidWheel(f"wheel {filename!r} has {len(folders)} .dist-info folders ({', '.join(folders[:4])}); a wheel "
                           "holds exactly one, its own (pip refuses it): build it again from a clean tree")
    project = folders[0][: -len(".dist-info")].split("-", 1)[0]
    if canonicalize_name(project) != canonicalize_name(PROJECT):
        raise InvalidWheel(f"wheel {filename!r} holds {folders[0]!r}, the metadata of project {project!r}, not {PROJECT!r}: "
                           "pass an executorch wheel, or build it again")
    return folders[0]


def _read_text(archive: zipfile.ZipFile, dist_info: str, member: str, filename: str) -> str:
    """One metadata file of the .dist-info folder as text, read up to its cap (never whole if bigger)."""
    name = f"{dist_info}/{member}"
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise InvalidWheel(f"wheel {filename!r} has no {name} (every wheel has one; pip refuses it without): "
                           "build it again (python -m build --wheel)") from None
    cap = TEXT_CAPS[member]
    if info.file_size > cap or len(data := read_head(archive, name, filename, cap + 1)) > cap:
        raise InvalidWheel(f"wheel {filename!r} is refused: {name} is over the gate's {cap} B limit for it "
                           f"(the largest in any public executorch wheel is {'711 kB' if member == 'RECORD' else '6 kB'})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidWheel(f"wheel {filename!r} has a {member} that is not UTF-8 text ({exc}); build it again") from None


def _headers(text: str) -> email.message.Message:
    return email.parser.Parser().parsestr(text, headersonly=True)


def _read_wheel_file(filename: str, text: str) -> tuple[tuple[str, ...], str]:
    """WHEEL: a format this gate (and pip) reads, a Root-Is-Purelib of true or false; its Tag and Build lines."""
    headers = _headers(text)
    said = (headers.get("Wheel-Version") or "").strip()
    major, dot, minor = said.partition(".")
    if not (major.isdigit() and dot and minor.isdigit()):
        raise InvalidWheel(f"wheel {filename!r} has Wheel-Version {said or 'missing'!r} in WHEEL, not a version such as "
                           "'1.0'; build it again (python -m build --wheel)")
    if int(major) != 1:
        raise InvalidWheel(f"wheel {filename!r} is in wheel format {said} (WHEEL); pip and this gate read format 1.x only: "
                           "build it with a current wheel builder (Wheel-Version: 1.0)")
    purelib = (headers.get("Root-Is-Purelib") or "").strip()
    if purelib.lower() not in ("true", "false"):
        raise InvalidWheel(f"wheel {filename!r} has Root-Is-Purelib {purelib or 'missing'!r} in WHEEL, not true or false "
                           "(executorch ships libraries: false); build it again")
    tags = tuple(str(t).strip() for t in headers.get_all("Tag") or ())
    return tags, str(headers.get("Build") or "").strip()


def _read_record(filename: str, text: str) -> None:
    """RECORD must be CSV that Python's csv module reads whole (what each line says is the wheel RECORD check's)."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        for _row in reader:
            pass
    except csv.Error as exc:
        raise InvalidWheel(f"wheel {filename!r} has a RECORD that is not CSV (line {reader.line_num}: {exc}); no file "
                           "list of a wheel needs it: build it again") from None


def _read_metadata(filename: str, text: str, version: Version) -> tuple[Requirement, ...]:
    """METADATA names executorch at the file name's version; its Requires-Dist lines, read."""
    message = _headers(text)
    said_name = str(message.get("Name") or "").strip()
    if not said_name:
        raise InvalidWheel(f"wheel {filename!r} has no Name in METADATA (it is not core metadata); build it again")
    if canonicalize_name(said_name) != canonicalize_name(PROJECT):
        raise InvalidWheel(f"wheel {filename!r} says Name {said_name!r} in METADATA, not {PROJECT!r}: pip would install "
                           f"another project; pass an executorch wheel, or build it again")
    said_version = str(message.get("Version") or "").strip()
    if not said_version:
        raise InvalidWheel(f"wheel {filename!r} has no Version in METADATA; build it again")
    try:
        said = Version(said_version)
    except InvalidVersion:
        raise InvalidWheel(f"wheel {filename!r} has METADATA Version {said_version!r}, which is not a version; "
                           "rebuild the wheel") from None
    if said != version:
        raise InvalidWheel(f"wheel {filename!r} says version {said_version} in METADATA, {version} in its name; rename the "
                           "file or build it again")
    try:
        return tuple(Requirement(str(line)) for line in message.get_all("Requires-Dist") or ())
    except InvalidRequirement as exc:
        raise InvalidWheel(f"wheel {filename!r} has an unreadable Requires-Dist: {exc}") from exc


# Bounds on what the gate will read from an untrusted archive. Measured on the 18 public cp311
# Linux wheels of 1.0.0 to 1.5.1 and the CUDA build of 1.2.0: at most 67 MiB unpacked in all, and
# 11 MiB for the largest member. The caps leave room for CUDA builds with device code for many GPUs.
MEMBER_CAP = 256 << 20
TOTAL_CAP = 1 << 30


def _refuse_unsafe_entries(filename: str, archive: zipfile.ZipFile) -> None:
    """A wheel is untrusted: no entry may name a place outside the folder it is unpacked into,
    be a link, or declare sizes the gate would have to hold in memory to read."""
    total = 0
    for info in archive.infolist():
        name = info.filename
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
            raise InvalidWheel(f"wheel {filename!r} is refused: entry {name!r} is an absolute path")
        if ".." in parts:
            raise InvalidWheel(f"wheel {filename!r} is refused: entry {name!r} climbs out of the tree with '..'")
        if stat.S_ISLNK(info.external_attr >> 16):
            # Judging each link by its own text misses chains (a -> .., b -> a/..); the wheel format
            # has no links and no executorch release ships one, so none is accepted.
            target = archive.read(info)[:200].decode(errors="replace") if info.file_size < 4096 else "..."
            raise InvalidWheel(f"wheel {filename!r} is refused: entry {name!r} is a link to {target!r}; a wheel holds "
                               "no links (pip would not make one), and a chain of them can lead outside the tree")
        if info.file_size > MEMBER_CAP:
            raise InvalidWheel(f"wheel {filename!r} is refused: entry {name!r} declares {info.file_size} B unpacked, over "
                               f"the gate's {MEMBER_CAP} B limit for one file (the largest in any public executorch wheel is 11 MiB)")
        total += info.file_size
        if total > TOTAL_CAP:
            raise InvalidWheel(f"wheel {filename!r} is refused: its entries declare over {TOTAL_CAP} B unpacked, "
                               "the gate's limit (the largest public executorch wheel holds 67 MiB)")


def _dist_info_version(files: tuple[str, ...]) -> str:
    for name in files:
        top = PurePosixPath(name).parts[0]
        if top.endswith(".dist-info") and top.lower().startswith(f"{PROJECT}-"):
            return top[len(PROJECT) + 1 : -len(".dist-info")]
    raise KeyError("no executorch-*.dist-info folder")


@dataclass(frozen=True)
class Interpreter:
    path: str
    implementation: str  # sys.implementation.name
    version: tuple[int, int]
    machine: str = ""  # platform.machine(), normalized as wheel tags name it: x86_64, aarch64

    @property
    def tag(self) -> str:
        prefix = {"cpython": "cp", "pypy": "pp"}.get(self.implementation, self.implementation)
        return f"{prefix}{self.version[0]}{self.version[1]}"

    def describe(self) -> str:
        return f"{self.implementation} {self.version[0]}.{self.version[1]} ({self.path})"


_MACHINE_NAMES = {"amd64": "x86_64", "arm64": "aarch64"}


def _machine(name: str) -> str:
    return _MACHINE_NAMES.get(name.lower(), name.lower())


def normal_machine(name: str) -> str:
    """A machine as platform.machine() is normalized here (amd64 -> x86_64, arm64 -> aarch64)."""
    return _machine(name)


def probe_interpreter(path: str | None) -> Interpreter:
    """The interpreter the environment will be built from; ``None`` is this one."""
    if path is None:
        return Interpreter(sys.executable, sys.implementation.name, sys.version_info[:2], _machine(platform.machine()))
    fix = f"pass --python with a working Python (this gate runs on {sys.executable})"
    ran = proc.run([path, "-c", "import sys, platform; print('gate-probe', sys.implementation.name, *sys.version_info[:2], platform.machine())"],
                   what=f"asking interpreter {path!r} what it is", error=WrongPlatform, timeout=60, check=False, fix=fix)
    out = ran.stdout.split()
    if ran.returncode != 0 or len(out) != 5 or out[0] != "gate-probe" or not (out[2].isdigit() and out[3].isdigit()):
        raise WrongPlatform(f"{path!r} is not a Python interpreter (it answered {ran.stdout.strip()[:80]!r}, exit {ran.returncode}); {fix}")
    return Interpreter(path, out[1], (int(out[2]), int(out[3])), _machine(out[4]))


_NO_PLATFORM = ["-"]  # tags are compared without their platform (the rows judge that)
# CPython's ABI flags: d (debug), t (free-threaded, 3.13 on), m (pymalloc, before 3.8).
_ABI_FLAGS = ("", "d", "t", "td", "m", "dm")


def _pairs(tags) -> frozenset[tuple[str, str]]:
    return frozenset((t.interpreter, t.abi) for t in tags)


@functools.lru_cache(maxsize=None)
def cpython_pairs(version: tuple[int, int], flags: tuple[str, ...] = ("",)) -> frozenset[tuple[str, str]]:
    """(interpreter, abi) pairs a CPython of this version installs, as pip's tag list orders them (packaging.tags)."""
    nodot = f"{version[0]}{version[1]}"
    return _pairs([*cpython_tags(version, abis=[f"cp{nodot}{f}" for f in flags], platforms=_NO_PLATFORM),
                   *compatible_tags(version, f"cp{nodot}", platforms=_NO_PLATFORM)])


@functools.lru_cache(maxsize=1)
def _any_python3() -> frozenset[tuple[str, str]]:
    return frozenset().union(*(cpython_pairs((3, minor), _ABI_FLAGS) for minor in range(100)))


_PYPY = re.compile(r"pp3\d{1,2}")


def installable(tag: Tag) -> bool:
    """Some CPython 3 (or a PyPy 3, by its tag's form) would install a wheel of this tag, platform aside."""
    return (tag.interpreter, tag.abi) in _any_python3() or bool(_PYPY.fullmatch(tag.interpreter))


def _refuse_uninstallable_tags(filename: str, tags: frozenset[Tag]) -> None:
    if not any(installable(tag) for tag in tags):
        named = ", ".join(sorted({f"{t.interpreter}-{t.abi}" for t in tags}))
        raise InvalidWheel(f"wheel {filename!r} has Python tags {named}, which no Python 3 installs (a CPython 3.11 build "
                           "is cp311-cp311); rename the file with the tags its WHEEL file names, or build it again")


def _python_for(tag: Tag) -> tuple[str, str] | None:
    """The --python that installs a wheel of this tag, and in words: ('python3.12', 'a Python 3.12')."""
    found = re.fullmatch(r"(cp|py|pp)3(\d{1,2})", tag.interpreter)
    if not found or not installable(tag):
        return None
    kind, dotted = found.group(1), f"3.{found.group(2)}"
    if kind == "pp":
        return f"pypy{dotted}", f"a PyPy {dotted}"
    flags = tag.abi[len(tag.interpreter):] if tag.abi.startswith(tag.interpreter) else ""
    if "t" in flags:
        return f"python{dotted}t", f"a free-threaded Python {dotted}"
    if "d" in flags:
        return f"python{dotted}d", f"a debug build of Python {dotted}"
    return f"python{dotted}", f"a Python {dotted}"


def check_interpreter(wheel: Wheel, interpreter: Interpreter) -> None:
    """Refuse a wheel whose Python tag the environment's interpreter cannot install (pip's tags, from packaging)."""
    if interpreter.implementation == "cpython":
        ours = cpython_pairs(interpreter.version)
        if any((tag.interpreter, tag.abi) in ours for tag in wheel.tags):
            return
    elif any(tag.interpreter in (interpreter.tag, "py3", f"py{interpreter.version[0]}{interpreter.version[1]}") for tag in wheel.tags):
        return
    wanted = sorted({tag.interpreter for tag in wheel.tags})
    fits = sorted({p for p in map(_python_for, wheel.tags) if p is not None})
    command, words = fits[0] if fits else ("python3", "a Python 3")
    raise WrongPlatform(
        f"wheel {wheel.filename!r} is for {', '.join(wanted)}; this session's interpreter is "
        f"{interpreter.describe()}: run the gate with --python {command} (or the path of {words})"
    )


def read_member(archive: zipfile.ZipFile, name: str, filename: str) -> bytes:
    """One member, whole (its size is bounded by MEMBER_CAP at read_wheel); a damaged one is InvalidWheel."""
    try:
        return archive.read(name)
    except (zipfile.BadZipFile, zlib_error, OSError, EOFError) as exc:
        raise InvalidWheel(f"wheel {filename!r} is damaged: {name!r} cannot be read ({exc}); download or build it again") from exc


def read_head(archive: zipfile.ZipFile, name: str, filename: str, size: int) -> bytes:
    """The first ``size`` bytes of one member (only what is needed is decompressed)."""
    try:
        with archive.open(name) as handle:
            return handle.read(size)
    except (zipfile.BadZipFile, zlib_error, OSError, EOFError) as exc:
        raise InvalidWheel(f"wheel {filename!r} is damaged: {name!r} cannot be read ({exc}); download or build it again") from exc


def hash_member(archive: zipfile.ZipFile, name: str, filename: str) -> tuple[bytes, int]:
    """sha256 digest and size of one member, read in chunks (memory stays small whatever its size)."""
    digest, size = hashlib.sha256(), 0
    try:
        with archive.open(name) as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
    except (zipfile.BadZipFile, zlib_error, OSError, EOFError) as exc:
        raise InvalidWheel(f"wheel {filename!r} is damaged: {name!r} cannot be read ({exc}); download or build it again") from exc
    return digest.digest(), size


def shared_objects(wheel: Wheel) -> list[str]:
    return sorted(name for name in wheel.files if ".so" in PurePosixPath(name).name and not name.endswith("/"))


def marker_environment(machine: str, wheel: Wheel, system: str = LINUX) -> dict[str, str]:
    """The marker variables of a machine of this kind (a row's: Linux unless ``system`` says) with the wheel's Python."""
    interpreters = sorted(t.interpreter for t in wheel.tags if t.interpreter.startswith("cp") and t.interpreter[2:].isdigit())
    env: dict[str, str] = {key: str(value) for key, value in default_environment().items()}
    env.update(platform_machine=machine, **SYSTEMS[system].markers,
               implementation_name="cpython", platform_python_implementation="CPython", extra="")
    if interpreters:
        digits = interpreters[0][2:]
        env["python_version"] = f"{digits[0]}.{digits[1:]}"
        env["python_full_version"] = f"{digits[0]}.{digits[1:]}.0"
    return env


def system_environment(system: str, machine: str, wheel: Wheel) -> dict[str, str]:
    """``marker_environment`` of a row's system and machine, ``platform_machine`` spelled as that system's CPython
    spells it (``platform.machine()``: AMD64 on Windows, where the tag says amd64)."""
    if system == WINDOWS:
        machine = "AMD64" if machine == "amd64" else machine.upper()
    return marker_environment(machine, wheel, system)


class Providers:
    """Who provides site-packages/TARGET: "the wheel", a requirement the wheel declares for a Linux
    machine of that kind (by its name), or None. A declared package's folder is its import name (torch/ for torch,
    nvidia/ for the nvidia-* CUDA packages). Made once per wheel and row: the wheel's file list is long."""

    def __init__(self, wheel: Wheel, machine: str, system: str = LINUX) -> None:
        self.tops = {PurePosixPath(f).parts[0] for f in wheel.files}
        env = marker_environment(machine, wheel, system)
        self.declared = [req for req in wheel.requires_dist if req.marker is None or req.marker.evaluate(env)]
        self.user_supplied = wheel.user_supplied

    def __call__(self, target: str) -> str | None:
        top = target.split("/", 1)[0]
        if target == "" or top in self.tops:
            return "the wheel"
        project = self.project(target)
        if project is None:
            return None
        return project if any(req.name == project for req in self.declared) else f"{project} (user-supplied)"

    def project(self, target: str) -> str | None:
        """The distribution's name behind a provider of ``target`` other than the wheel (a requirement's, or a
        user-supplied package's), as data; None where there is none."""
        top = target.split("/", 1)[0]
        for req in self.declared:
            project = canonicalize_name(req.name)
            if project == canonicalize_name(top) or (top == "nvidia" and project.startswith("nvidia-")):
                return req.name
        for name in self.user_supplied:
            if canonicalize_name(name) == canonicalize_name(top):
                return name
        return None



CUDA_LABEL = re.compile(r"^cu(\d+)$")  # a CUDA build's local version label: +cu130


def cuda_train(wheel: Wheel) -> str | None:
    """'cu130' for a +cu130 wheel, None for a wheel with no CUDA local label (what every row and check reads the same)."""
    local = wheel.version.local or ""
    return local if CUDA_LABEL.match(local) else None
