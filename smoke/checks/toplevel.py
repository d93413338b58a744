"""``top-level names``: every name the wheel's ``top_level.txt`` lists is one it installs at site-packages' root.

setuptools writes ``*.dist-info/top_level.txt``; tools read it to tell which distribution an import name belongs to
(``importlib.metadata.packages_distributions``, pip-licenses, pipdeptree). PyPI's 1.4.1 lists nine build-recipe
strings beside ``executorch`` (``@EXECUTORCH_BuiltFile_%CMAKE_CACHE_DIR%/...``, executorch#22267); upstream's own wheel
test now requires it to name the package alone (pytorch/executorch main, ``.ci/scripts/wheel/test_clean_install.py``,
``_check_top_level_names``: "the installed wheel claims the top level names ..., but only 'executorch' is
importable"). A listed name the wheel installs nothing under misleads those tools, and no import finds it: a WARN, as it
costs the metadata's truth, not the wheel's working (docs/checks.md, severities). A wheel without the file (other build
backends write none) has nothing to judge here: a PASS saying so.
"""

from __future__ import annotations

import zipfile
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from smoke.checks.kinds import FileCheck
from smoke.checks.startup import site_path
from smoke.markup import plain
from smoke.readers.wheel import Wheel, read_member
from smoke.results import CheckResult, passed, warned
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


TOP_LEVEL_NAMES = Check("top-level names", FILE, 37, check_top_level_names)
CHECKS: tuple[FileCheck, ...] = (TOP_LEVEL_NAMES,)
