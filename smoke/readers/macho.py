"""What dyld reads from a Mach-O file: its architectures, install name, LC_RPATH entries,
LC_LOAD_DYLIB names and minimum macOS version.

The structures are macholib's; the walk over the load commands is here, bounded by the file's own sizes, because
macholib's ``MachOHeader`` reads every section's data (a hostile file's sections may each claim the whole file).
Every refusal is one ``MachOError``. The minimum macOS version is judged as delocate judges it: LC_BUILD_VERSION's
``minos``, else LC_VERSION_MIN_MACOSX's ``version``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from macholib import mach_o
from macholib.ptypes import sizeof
from packaging.version import Version

# Thin headers in either byte order; fat (universal) headers, 32- and 64-bit offsets.
THIN_MAGICS = {mach_o.MH_MAGIC: (">", False), mach_o.MH_CIGAM: ("<", False),
               mach_o.MH_MAGIC_64: (">", True), mach_o.MH_CIGAM_64: ("<", True)}
FAT_MAGICS = (mach_o.FAT_MAGIC, mach_o.FAT_MAGIC_64)
# A fat header shares 0xcafebabe with a Java class file, whose next word (its version, 45 and up)
# would be the slice count: a Mach-O universal file has a few slices (file(1) draws the line at 30).
MAX_SLICES = 30
# The load commands of one slice: the public executorch dylibs' largest are under 8 KiB.
MAX_COMMANDS_BYTES = 4 << 20
# The dylib kinds dyld must find; LC_LOAD_WEAK_DYLIB may be missing at run time, so it is not judged.
REQUIRED_DYLIB_COMMANDS = (mach_o.LC_LOAD_DYLIB, mach_o.LC_REEXPORT_DYLIB, mach_o.LC_LOAD_UPWARD_DYLIB)
# macholib names ARM64 and x86_64 as Apple's headers do; wheel tags spell the first "arm64".
CPU_NAMES = {**{cpu: name.lower() for cpu, name in mach_o.CPU_TYPE_NAMES.items()}, 0x0100000C: "arm64", 0x01000007: "x86_64"}
PLATFORM_MACOS = 1  # LC_BUILD_VERSION's platform for macOS


class MachOError(ValueError):
    """Bytes that are not a Mach-O file dyld would load."""


@dataclass(frozen=True)
class Slice:
    architecture: str  # arm64, x86_64, or cputype N for one with no name here
    filetype: str  # dylib, bundle (an extension module may be either), execute, object ...
    install_name: str  # LC_ID_DYLIB, "" for none
    rpaths: tuple[str, ...]  # LC_RPATH, in order
    dylibs: tuple[str, ...]  # LC_LOAD_DYLIB (and re-exported, upward) names, in order
    weak_dylibs: tuple[str, ...]  # LC_LOAD_WEAK_DYLIB names: allowed to be missing
    minimum_macos: Version | None  # LC_BUILD_VERSION minos (macOS) or LC_VERSION_MIN_MACOSX, None if neither
    platform: int | None = None  # LC_BUILD_VERSION's platform (1 is macOS), None without one


@dataclass(frozen=True)
class MachOFile:
    path: str  # relative to site-packages, POSIX
    slices: tuple[Slice, ...]

    @property
    def architectures(self) -> tuple[str, ...]:
        return tuple(s.architecture for s in self.slices)


def is_macho(head: bytes) -> bool:
    """The first 8 bytes are a thin Mach-O header, or a fat one with a plausible number of slices."""
    if len(head) < 8:
        return False
    magic = struct.unpack(">I", head[:4])[0]
    if magic in THIN_MAGICS:
        return True
    return magic in FAT_MAGICS and 0 < struct.unpack(">I", head[4:8])[0] <= MAX_SLICES


def _version(packed: int) -> Version:
    """Mach-O's xxxx.yy.zz nibble version: 0x000e0000 is 14.0."""
    return Version(f"{packed >> 16}.{(packed >> 8) & 0xFF}" + (f".{packed & 0xFF}" if packed & 0xFF else ""))


def _string(data: bytes, offset: int, what: str) -> str:
    """A load command's string (lc_str: an offset into the command, NUL-terminated inside it)."""
    if not 0 < offset < len(data):
        raise MachOError(f"its {what} names a string at offset {offset}, outside its {len(data)}-byte command")
    text = data[offset:].split(b"\0", 1)[0]
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        raise MachOError(f"its {what} is not UTF-8 ({text[:40]!r})") from None


def _slice(data: bytes, offset: int, size: int) -> Slice:
    if offset < 0 or size < 4 or offset + size > len(data):
        raise MachOError(f"a slice at {offset} of {size} B lies outside the {len(data)}-byte file")
    magic = struct.unpack(">I", data[offset:offset + 4])[0]
    if magic not in THIN_MAGICS:
        raise MachOError(f"the slice at {offset} has magic 0x{magic:08x}, not a Mach-O header")
    endian, wide = THIN_MAGICS[magic]
    header_type = mach_o.mach_header_64 if wide else mach_o.mach_header
    header_size = sizeof(header_type)
    if size < header_size:
        raise MachOError(f"the slice at {offset} is {size} B, shorter than its {header_size}-byte header")
    header = header_type.from_str(data[offset:offset + header_size], _endian_=endian)
    start, commands_size = offset + header_size, int(header.sizeofcmds)
    if commands_size > MAX_COMMANDS_BYTES or header_size + commands_size > size:
        raise MachOError(f"its header declares {commands_size} B of load commands ({int(header.ncmds)} commands), "
                         f"more than its {size}-byte slice holds")
    rpaths: list[str] = []
    dylibs: list[str] = []
    weak: list[str] = []
    minimum, platform, install_name = None, None, ""
    position, end = start, start + commands_size
    for index in range(int(header.ncmds)):
        if position + 8 > end:
            raise MachOError(f"load command {index} of {int(header.ncmds)} starts past the {commands_size} B the header declares")
        command, command_size = struct.unpack(endian + "II", data[position:position + 8])
        if command_size < 8 or position + command_size > end:
            raise MachOError(f"load command {index} (0x{command:x}) declares {command_size} B, outside the load commands")
        body = data[position:position + command_size]
        if command == mach_o.LC_RPATH:
            rpaths.append(_string(body, struct.unpack(endian + "I", body[8:12])[0] if command_size >= 12 else 0, "LC_RPATH"))
        elif command in REQUIRED_DYLIB_COMMANDS or command in (mach_o.LC_LOAD_WEAK_DYLIB, mach_o.LC_ID_DYLIB):
            name = _string(body, struct.unpack(endian + "I", body[8:12])[0] if command_size >= 12 else 0, "dylib command")
            if command == mach_o.LC_ID_DYLIB:
                install_name = name
            else:
                (weak if command == mach_o.LC_LOAD_WEAK_DYLIB else dylibs).append(name)
        elif command == mach_o.LC_BUILD_VERSION and command_size >= 16:
            platform, minos = struct.unpack(endian + "II", body[8:16])
            if platform == PLATFORM_MACOS:
                minimum = _version(minos)
        elif command == mach_o.LC_VERSION_MIN_MACOSX and command_size >= 12 and minimum is None:
            minimum = _version(struct.unpack(endian + "I", body[8:12])[0])
        position += command_size
    cpu = int(header.cputype)
    filetype = mach_o.MH_FILETYPE_SHORTNAMES.get(int(header.filetype), f"filetype {int(header.filetype)}")
    return Slice(CPU_NAMES.get(cpu, f"cputype {cpu}"), filetype, install_name, tuple(rpaths), tuple(dylibs), tuple(weak),
                 minimum, platform)


def read_macho(path: str, data: bytes) -> MachOFile:
    """Every slice of a thin or fat Mach-O file; a file that is not one dyld would load is a ``MachOError`` naming ``path``."""
    try:
        if len(data) < 8:
            raise MachOError(f"{len(data)} B, shorter than a Mach-O header")
        magic, count = struct.unpack(">II", data[:8])
        if magic in FAT_MAGICS:
            if not 0 < count <= MAX_SLICES:
                raise MachOError(f"its fat header declares {count} slices")
            wide = magic == mach_o.FAT_MAGIC_64
            entry = mach_o.fat_arch64 if wide else mach_o.fat_arch
            step = sizeof(entry)
            if 8 + count * step > len(data):
                raise MachOError(f"its fat header's {count} slices run past the end of the file")
            archs = [entry.from_str(data[8 + i * step:8 + (i + 1) * step], _endian_=">") for i in range(count)]
            slices = tuple(_slice(data, int(a.offset), int(a.size)) for a in archs)
        elif magic in THIN_MAGICS:
            slices = (_slice(data, 0, len(data)),)
        else:
            raise MachOError(f"magic 0x{magic:08x} is not a Mach-O header")
    except MachOError as exc:
        raise MachOError(f"{path}: not a Mach-O file dyld would load: {exc}") from None
    except (struct.error, ValueError, OverflowError) as exc:  # macholib's structures on short or odd bytes
        raise MachOError(f"{path}: not a Mach-O file dyld would load: {exc}") from None
    return MachOFile(path, slices)
