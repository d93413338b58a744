"""Read a wheel before anything is built: its name, tags, METADATA and file list.

Nothing is extracted. What makes a run impossible raises a ``GateError`` with
the fix in its message; what is a property of the wheel under test (is it a CUDA
build?) is a check result.
"""

from __future__ import annotations

import email.parser
import hashlib
import platform
import stat
import sys
import zipfile
from zlib import error as zlib_error
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from smoke import proc
from smoke.errors import InvalidWheel, WrongPlatform

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

    @property
    def filename(self) -> str:
        return self.path.name

    @property
    def machines(self) -> frozenset[str]:
        return frozenset(platform_machine(tag.platform) for tag in self.tags)

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
        name, version, _build, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise InvalidWheel(f"{path.name!r} is not a wheel file name ({exc}); pass an executorch .whl file") from exc
    if name != canonicalize_name(PROJECT):
        raise InvalidWheel(f"wheel {path.name!r} is of project {name!r}, not {PROJECT!r}; pass an executorch wheel")
    try:
        with zipfile.ZipFile(path) as archive:
            _refuse_unsafe_entries(path.name, archive)
            files = tuple(archive.namelist())
            dist_info = f"{PROJECT}-{_dist_info_version(files)}.dist-info"
            metadata = archive.read(f"{dist_info}/METADATA").decode()
    except (zipfile.BadZipFile, OSError, KeyError, UnicodeDecodeError) as exc:
        raise InvalidWheel(f"wheel {path.name!r} cannot be read as a wheel archive: {exc}") from exc
    message = email.parser.Parser().parsestr(metadata, headersonly=True)
    try:
        said = Version(message["Version"]) if message.get("Version") else None
    except InvalidVersion:
        raise InvalidWheel(f"wheel {path.name!r} has METADATA Version {message['Version']!r}, which is not a version; "
                           "rebuild the wheel") from None
    if said is not None and said != version:
        raise InvalidWheel(
            f"wheel {path.name!r} says version {message['Version']} in METADATA, {version} in its name"
        )
    try:
        requires = tuple(Requirement(line) for line in message.get_all("Requires-Dist") or ())
    except InvalidRequirement as exc:
        raise InvalidWheel(f"wheel {path.name!r} has an unreadable Requires-Dist: {exc}") from exc
    return Wheel(path, version, frozenset(tags), path.stat().st_size, _sha256(path), files, requires)


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


def check_interpreter(wheel: Wheel, interpreter: Interpreter) -> None:
    """Refuse a wheel whose Python tag the environment's interpreter cannot install."""
    ours = interpreter.tag
    for tag in wheel.tags:
        if tag.interpreter == ours or tag.interpreter in ("py3", f"py{interpreter.version[0]}"):
            return
        if tag.abi == "abi3" and tag.interpreter.startswith(ours[:3]) and int(tag.interpreter[3:] or 0) <= int(ours[3:]):
            return
    wanted = sorted({tag.interpreter for tag in wheel.tags})
    version = wanted[0][2:]
    dotted = f"{version[0]}.{version[1:]}" if len(version) > 1 else version
    raise WrongPlatform(
        f"wheel {wheel.filename!r} is for {', '.join(wanted)}; this session's interpreter is "
        f"{interpreter.describe()}: run the gate with --python python{dotted} (or the path of a Python {dotted})"
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


def marker_environment(machine: str, wheel: Wheel) -> dict[str, str]:
    """The marker variables of a Linux machine of this kind (a row's) with the wheel's Python."""
    interpreters = sorted(t.interpreter for t in wheel.tags if t.interpreter.startswith("cp") and t.interpreter[2:].isdigit())
    env = dict(default_environment())
    env.update(platform_machine=machine, platform_system="Linux", sys_platform="linux", os_name="posix",
               implementation_name="cpython", platform_python_implementation="CPython", extra="")
    if interpreters:
        digits = interpreters[0][2:]
        env["python_version"] = f"{digits[0]}.{digits[1:]}"
        env["python_full_version"] = f"{digits[0]}.{digits[1:]}.0"
    return env


class Providers:
    """Who provides site-packages/TARGET: "the wheel", a requirement the wheel declares for a Linux
    machine of that kind (by its name), or None. A declared package's folder is its import name (torch/ for torch,
    nvidia/ for the nvidia-* CUDA packages). Made once per wheel and row: the wheel's file list is long."""

    def __init__(self, wheel: Wheel, machine: str) -> None:
        self.tops = {PurePosixPath(f).parts[0] for f in wheel.files}
        env = marker_environment(machine, wheel)
        self.declared = [req for req in wheel.requires_dist if req.marker is None or req.marker.evaluate(env)]

    def __call__(self, target: str) -> str | None:
        top = target.split("/", 1)[0]
        if target == "" or top in self.tops:
            return "the wheel"
        for req in self.declared:
            project = canonicalize_name(req.name)
            if project == canonicalize_name(top) or (top == "nvidia" and project.startswith("nvidia-")):
                return req.name
        return None


def provider(wheel: Wheel, row: Row, target: str) -> str | None:
    return Providers(wheel, row)(target)
