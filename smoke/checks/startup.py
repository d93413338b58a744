"""``start-up code``: what the wheel would run at every start of every interpreter of an environment it is in.

Python's ``site`` module executes each ``import`` line of a ``*.pth`` file in site-packages and imports
``sitecustomize`` and ``usercustomize`` at start-up. Such code of the wheel's (its top-level members and those
directly in ``.data/purelib`` or ``.data/platlib``) runs before every program's own, even the gate's child, whose
record it could write first (issue 37). No executorch release ships any.

- An executed ``.pth`` line, a ``sitecustomize`` or ``usercustomize`` module: FAIL, named, the line quoted.
- A ``.pth`` that only adds folders to ``sys.path``: WARN (no code runs, but every program searches them).
"""

from __future__ import annotations

import zipfile
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from smoke.checks.kinds import FileCheck
from smoke.markup import redact
from smoke.readers.wheel import Wheel, read_member
from smoke.results import CheckResult, failed, passed, warned
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.rows import Row

CUSTOMIZE = ("sitecustomize", "usercustomize")  # imported by site at start-up (a module or a package)
SCHEMES = ("purelib", "platlib")  # the .data folders installed into site-packages itself


def in_site_packages_root(member: str) -> str | None:
    """The name a wheel member has directly in site-packages (``x.pth``, ``sitecustomize``), or None for a member
    installed below a package folder, into its .dist-info, or elsewhere (scripts, headers, data)."""
    parts = PurePosixPath(member).parts
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 3 and parts[0].endswith(".data") and parts[1] in SCHEMES:
        return parts[2]
    if len(parts) == 2 and parts[0] in CUSTOMIZE and parts[1] == "__init__.py":
        return parts[0]  # a package named sitecustomize is imported as the module is
    if len(parts) == 4 and parts[0].endswith(".data") and parts[1] in SCHEMES and parts[2] in CUSTOMIZE and parts[3] == "__init__.py":
        return parts[2]
    return None


def executed_lines(text: str) -> list[str]:
    """The lines of a .pth file that ``site`` executes: those that begin with ``import`` and a space or a tab."""
    return [line.rstrip() for line in text.splitlines() if line.startswith(("import ", "import\t"))]


def check_startup_code(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = STARTUP_CODE.name
    runs: list[str] = []
    paths: list[str] = []
    with zipfile.ZipFile(wheel.path) as archive:
        for member in archive.namelist():
            if member.endswith("/") or (root := in_site_packages_root(member)) is None:
                continue
            stem = root.split(".")[0]  # sitecustomize.py, sitecustomize.cpython-311-x86_64-linux-gnu.so, the package
            if stem in CUSTOMIZE:
                runs.append(f"{member} is imported by site at every interpreter start-up as {stem}")
            elif root.endswith(".pth"):
                text = read_member(archive, member, wheel.filename).decode("utf-8", "replace")
                if lines := executed_lines(text):
                    more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
                    runs.append(f"{member} runs {redact(lines[0])[:200]!r}{more} at every interpreter start-up")
                elif any(line.strip() and not line.startswith("#") for line in text.splitlines()):
                    paths.append(member)
    if runs:
        more = f" (and {len(runs) - 2} more)" if len(runs) > 2 else ""
        return failed(name, f"{'; '.join(runs[:2])}{more}: code of the wheel's runs before every program's own in the "
                            f"environment it is installed into (Python's site module; no executorch release ships any)",
                      runs=runs, paths=paths)
    if paths:
        return warned(name, f"{', '.join(paths)} add folders to sys.path at every interpreter start-up (no code runs; no "
                            f"executorch release ships a .pth file)", runs=runs, paths=paths)
    return passed(name, "nothing runs at interpreter start-up: no .pth file, sitecustomize or usercustomize in "
                        "site-packages' root", runs=runs, paths=paths)


STARTUP_CODE = Check("start-up code", FILE, 4, check_startup_code)
CHECKS: tuple[FileCheck, ...] = (STARTUP_CODE,)
