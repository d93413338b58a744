"""Each operating system a row is for, said once: its platform tags, its marker names, the native files it loads, its
own names, where a virtual environment keeps its Python, where its rows run, and how the gate words it.

Every module that asks "which system?" reads it here (``of_platform``, ``SYSTEMS[row.system]``); no other module
compares a system's name.
"""

from __future__ import annotations

import platform as _platform
from dataclasses import dataclass, field

# What a native file is, by its first bytes (smoke.readers.native).
ELF, MACHO, PE, WINDOWS_LIBRARY = "ELF", "Mach-O", "PE", "Windows library archive"
# The names each platform's loader or linker takes, by the platform whose they are.
WINDOWS_NAMES = (".dll", ".pyd", ".lib", ".exe")
MACOS_NAMES = (".dylib",)
# The systems of a wheel's platform tags, as rows name them.
LINUX, MACOS, WINDOWS = "linux", "macos", "windows"

_KIND_WORDS = {ELF: "a Linux ELF file", MACHO: "a macOS Mach-O file", PE: "a Windows PE file",
               WINDOWS_LIBRARY: "a Windows library archive"}


@dataclass(frozen=True)
class System:
    name: str  # as rows name it (Row.system)
    words: str  # as the gate's lines name it
    host: str  # platform.system() on it
    tag_prefixes: tuple[str, ...]  # its wheels' platform tags begin so
    markers: dict[str, str]  # its CPython's marker variables (PEP 508) that say the system
    native: str  # the kind of native file its loader takes
    foreign_kinds: tuple[str, ...]  # native files of other systems, which nothing on it loads
    foreign_names: dict[str, str] = field(default_factory=dict)  # suffix -> whose name it is
    venv_python: str = "bin/python"  # a virtual environment's interpreter, inside its folder
    # The platform tags `pip download` is asked for, for a machine of it (the newest first).
    download_platforms: tuple[str, ...] = ()
    runner: str = "runner"  # where the workflow runs its rows (.github/workflows/release-gate.yml)
    installed_half: bool = True  # the environment and the child are built for it
    reads_elf: bool = False  # its wheels' libraries are ELF files, which the backends' own file checks read
    takes_any: bool = False  # a wheel tagged `any` (pure Python) is judged on its rows

    def foreign_words(self, kind: str) -> str:
        return _KIND_WORDS[kind]

    def machine_words(self, machine: str) -> str:
        """How a row of it names its machine: x86_64 on Linux, 'macOS arm64', 'Windows amd64'."""
        return machine if self.name == LINUX else f"{self.words} {machine}"

    def download_tags(self, machine: str) -> list[str]:
        return [tag.format(machine=machine) for tag in self.download_platforms]


SYSTEMS: dict[str, System] = {s.name: s for s in (
    System(LINUX, "Linux", "Linux", ("manylinux", "musllinux", "linux_"),
           {"platform_system": "Linux", "sys_platform": "linux", "os_name": "posix"},
           ELF, (MACHO, PE, WINDOWS_LIBRARY),
           {**dict.fromkeys(WINDOWS_NAMES, "a Windows name"), **dict.fromkeys(MACOS_NAMES, "a macOS name")},
           download_platforms=("manylinux_2_28_{machine}", "manylinux_2_27_{machine}", "manylinux_2_17_{machine}"),
           reads_elf=True, takes_any=True),
    # pip takes every macOS version up to the one named as compatible
    System(MACOS, "macOS", "Darwin", ("macosx_",),
           {"platform_system": "Darwin", "sys_platform": "darwin", "os_name": "posix"},
           MACHO, (ELF, PE, WINDOWS_LIBRARY), dict.fromkeys(WINDOWS_NAMES, "a Windows name"),
           download_platforms=("macosx_15_0_{machine}", "macosx_15_0_universal2"), runner="macos-14"),
    # Nothing of the environment and the child has been made to run on Windows yet.
    System(WINDOWS, "Windows", "Windows", ("win",),
           {"platform_system": "Windows", "sys_platform": "win32", "os_name": "nt"},
           PE, (ELF, MACHO), dict.fromkeys(MACOS_NAMES, "a macOS name"), venv_python="Scripts/python.exe",
           download_platforms=("win_{machine}",), runner="windows-latest", installed_half=False),
)}


def of_platform(platform: str) -> str | None:
    """linux, macos, windows, or None (``any``, or a platform the gate has no rows for)."""
    return next((s.name for s in SYSTEMS.values() if platform.startswith(s.tag_prefixes)), None)


def host() -> System | None:
    """The system this process runs on, or None where the gate knows no such system."""
    return next((s for s in SYSTEMS.values() if s.host == _platform.system()), None)


def host_words() -> str:
    """This host, as a line names it: 'Linux x86_64'."""
    found = host()
    return f"{found.words if found else _platform.system()} {_platform.machine()}"
