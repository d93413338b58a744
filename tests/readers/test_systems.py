"""smoke.readers.systems: each operating system's facts, said once, and read from there by every module."""

from __future__ import annotations

import re

import pytest

from smoke.readers import systems
from smoke.readers.systems import LINUX, MACOS, SYSTEMS, WINDOWS, of_platform
from tests.helpers import REPO


@pytest.mark.parametrize(("platform", "system"), [
    ("manylinux_2_28_x86_64", LINUX), ("musllinux_1_2_aarch64", LINUX), ("linux_x86_64", LINUX),
    ("macosx_14_0_arm64", MACOS), ("macosx_11_0_universal2", MACOS), ("win_amd64", WINDOWS), ("win32", WINDOWS),
    ("any", None), ("ios_13_0_arm64_iphoneos", None),
])
def test_a_platform_tag_names_its_system(platform, system):
    assert of_platform(platform) == system


def test_each_system_says_its_facts_once_and_the_download_asks_for_its_tags():
    assert SYSTEMS[LINUX].download_tags("x86_64") == ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64"]
    assert SYSTEMS[MACOS].download_tags("arm64") == ["macosx_15_0_arm64", "macosx_15_0_universal2"]
    assert SYSTEMS[WINDOWS].download_tags("amd64") == ["win_amd64"]
    assert [s.venv_python for s in SYSTEMS.values()] == ["bin/python", "bin/python", "Scripts/python.exe"]
    assert [s.markers["sys_platform"] for s in SYSTEMS.values()] == ["linux", "darwin", "win32"]
    assert {s.native for s in SYSTEMS.values()} == {systems.ELF, systems.MACHO, systems.PE}
    for system in SYSTEMS.values():  # a system's own kind of file is never foreign on it
        assert system.native not in system.foreign_kinds
    assert systems.host() is SYSTEMS[LINUX]  # the machine the tests run on


# The names and words of a system that only smoke/readers/systems.py may hold: any other module that compares
# a system by name, or words one, says a fact a second time.
SAID_ONCE = re.compile(r"""["'](linux|macos|windows|Linux|Darwin|Windows|macOS|darwin|Scripts/python\.exe)["']""")


def test_no_module_but_systems_names_a_system():
    found = []
    for path in sorted((REPO / "smoke").rglob("*.py")):
        if path.name == "systems.py" and path.parent.name == "readers":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if SAID_ONCE.search(line.split("#", 1)[0]):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_check_would_find_a_system_said_twice(tmp_path):
    assert SAID_ONCE.search('    if row.system == "windows":')
