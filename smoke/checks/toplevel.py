"""``top-level names``: every name the wheel's ``top_level.txt`` lists is one it installs at site-packages' root.

setuptools writes ``*.dist-info/top_level.txt``; tools read it to tell which distribution an import name belongs to
(``importlib.metadata.packages_distributions``, pip-licenses, pipdeptree). PyPI's 1.4.1 lists nine build-recipe
strings beside ``executorch`` (``@EXECUTORCH_BuiltFile_%CMAKE_CACHE_DIR%/...``, executorch#22267); upstream's own wheel
test now requires it to name the package alone (pytorch/executorch main, ``.ci/scripts/wheel/test_clean_install.py``,
``_check_top_level_names``: "the installed wheel claims the top level names ..., but only 'executorch' is
importable"). A listed name the wheel installs nothing under misleads those tools, and no import finds it: a WARN, as it
costs the metadata's truth, not the wheel's working (docs/checks.md, severities). A wheel without the file (other build
backends write none) has nothing to judge here: a PASS saying so.

``console scripts``: each command the wheel's ``entry_points.txt`` declares (``[console_scripts]``, ``[gui_scripts]``)
names a module the wheel ships (``module.py``, ``module/__init__.py`` or an extension module). pip writes a script for
each; where its module is missing every run of the command ends in ModuleNotFoundError (issue 58; executorch#21850 had
that shape). The attribute is not judged from the files: PyPI's 1.2.0 to 1.5.1 declare ``flatc =
executorch.data.bin:flatc``, and ``executorch/data/bin/__init__.py`` makes ``flatc`` at import time, one function per
executable beside it (``globals()``), which no reading of its source finds.
"""

from __future__ import annotations

import configparser
import zipfile
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from smoke.checks.kinds import FileCheck
from smoke.checks.startup import site_path
from smoke.markup import plain
from smoke.readers.wheel import Wheel, read_member
from smoke.results import CheckResult, failed, passed, warned
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.rows import Row

TOP_LEVEL_CAP = 64 << 10  # the most of top_level.txt read: 1.4.1's, the longest seen, is 631 B


def installed_names(files: tuple[str, ...]) -> set[str]:
    """The import names the wheel installs at site-packages' root: a package folder, a module (``x.py``) or an
    extension module (``x.cpython-311-x86_64-linux-gnu.so``, ``x.pyd``), its root and its purelib/platlib schemes."""
    names = set()
    for member in files:
        path = site_path(member)
        if path is None:
            continue
        parts = PurePosixPath(path).parts
        if not parts or parts[0].endswith((".dist-info", ".data")):
            continue
        names.add(parts[0] if len(parts) > 1 else parts[0].split(".")[0])
    return names


def check_top_level_names(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = TOP_LEVEL_NAMES.name
    listed_in = next((f for f in wheel.files if f.endswith(".dist-info/top_level.txt") and f.count("/") == 1), None)
    if listed_in is None:
        return passed(name, "the wheel has no top_level.txt, which nothing requires (setuptools writes one)")
    with zipfile.ZipFile(wheel.path) as archive:
        text = read_member(archive, listed_in, wheel.filename)[:TOP_LEVEL_CAP].decode("utf-8", "replace")
    listed = [line.strip() for line in text.splitlines() if line.strip()]
    shipped = installed_names(wheel.files)
    bogus = [entry for entry in listed if entry not in shipped]
    measured = {"listed": listed[:50], "not_installed": bogus[:50]}
    if bogus:
        shown = ", ".join(repr(plain(entry)[:120]) for entry in bogus[:2]) + (f" (and {len(bogus) - 2} more)" if len(bogus) > 2 else "")
        return warned(name, f"{listed_in} lists {len(bogus)} of its {len(listed)} names that the wheel installs nothing under: "
                            f"{shown}; tools that read it to find a name's distribution are misled (executorch#22267): "
                            f"list only the package's own top-level names", **measured)
    return passed(name, f"{listed_in} lists {', '.join(listed) or 'nothing'}, each installed", **measured)


ENTRY_POINTS_CAP = 64 << 10  # the most of entry_points.txt read: 1.5.1's is 42 B
SCRIPT_GROUPS = ("console_scripts", "gui_scripts")


def declared_scripts(text: str) -> list[tuple[str, str, str]]:
    """(command, module, attribute) of each script entry point in an ``entry_points.txt`` (its INI form, as
    importlib.metadata reads it: ``name = module:attr [extras]``); an entry without an attribute has ""; a file that is
    not INI declares none."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    found = []
    for group in SCRIPT_GROUPS:
        if parser.has_section(group):
            for command, value in parser.items(group):
                target = value.split("[", 1)[0].strip()
                module, _, attribute = target.partition(":")
                found.append((command, module.strip(), attribute.strip()))
    return found


def check_console_scripts(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = CONSOLE_SCRIPTS.name
    declared_in = next((f for f in wheel.files if f.endswith(".dist-info/entry_points.txt") and f.count("/") == 1), None)
    if declared_in is None:
        return passed(name, "the wheel declares no entry points (no entry_points.txt)", commands=[])
    installed = {where for member in wheel.files if (where := site_path(member)) is not None}
    with zipfile.ZipFile(wheel.path) as archive:
        text = read_member(archive, declared_in, wheel.filename)[:ENTRY_POINTS_CAP].decode("utf-8", "replace")
        scripts = declared_scripts(text)
        broken = []
        for command, module, attribute in scripts:
            base = module.replace(".", "/")
            source = f"{base}.py" in installed or f"{base}/__init__.py" in installed
            extension = any(where.startswith(f"{base}.") and where.endswith((".so", ".pyd")) and "/" not in where[len(base):]
                            for where in installed)
            if not module or not (source or extension):
                broken.append(f"{plain(command)[:80]} = {plain(module)[:120]}:{plain(attribute)[:80]}: the wheel ships no module "
                              f"{plain(module)[:120]!r} ({base}.py or {base}/__init__.py)")
    commands = [command for command, _, _ in scripts][:50]
    if broken:
        return failed(name, f"{len(broken)} of the {len(scripts)} commands {declared_in} declares cannot run: "
                            f"{'; '.join(broken[:3])}{f' (and {len(broken) - 3} more)' if len(broken) > 3 else ''}: every "
                            f"run of each ends in ModuleNotFoundError", commands=commands, broken=broken[:50])
    if not scripts:
        return passed(name, f"{declared_in} declares no console or GUI script", commands=[])
    return passed(name, f"{len(scripts)} command{'s' if len(scripts) > 1 else ''} declared, each naming a module the wheel "
                        f"ships: {', '.join(plain(c)[:80] for c in commands[:5])}", commands=commands)


TOP_LEVEL_NAMES = Check("top-level names", FILE, 37, check_top_level_names)
CONSOLE_SCRIPTS = Check("console scripts", FILE, 38, check_console_scripts)
CHECKS: tuple[FileCheck, ...] = (TOP_LEVEL_NAMES, CONSOLE_SCRIPTS)
