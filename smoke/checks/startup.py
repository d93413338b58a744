"""``start-up code``: what the wheel would run at every start of every interpreter of an environment it is in.

Python's ``site`` module executes each ``import`` line of a ``*.pth`` file in site-packages and imports
``sitecustomize`` and ``usercustomize`` at start-up. Such code of the wheel's (its top-level members and those
directly in ``.data/purelib``, ``.data/platlib`` or the ``data`` scheme's site-packages) runs before every program's own, even the gate's child, whose
record it could write first (issue 37). No executorch release ships any.

- An executed ``.pth`` line, a ``sitecustomize`` or ``usercustomize`` module, or a ``.pth`` folder holding one of the
  wheel's: FAIL, named, the line quoted.
- A ``.pth`` that only adds folders to ``sys.path``: WARN (no code runs, but every program searches them).
- A member that installs over the environment's own files (``pyvenv.cfg``, the interpreter, the activation scripts:
  ``over_environment``), through the ``data`` or ``scripts`` scheme: FAIL, named (issue 58).

The routes are ``site``'s own (CPython's Lib/site.py; line numbers of 3.11.7, the same rules through 3.14):
``main`` (584-611) calls ``addsitedir`` for each site-packages folder, then ``execsitecustomize`` and
``execusercustomize``; ``addsitedir`` (207-229) reads every name ending ``.pth`` in the folder, sorted; ``addpackage``
(160-204) ``exec``s each line that starts with ``"import "`` or ``"import\\t"`` (``executed_lines``) and appends any other
non-comment line to ``sys.path`` as a folder where it exists; ``execsitecustomize`` (544) and ``execusercustomize``
(564) ``import sitecustomize`` / ``usercustomize`` from wherever ``sys.path`` finds it, site-packages or a folder a
``.pth`` added. What of a wheel lands in site-packages is the install schemes' (the wheel spec; pip's
``get_scheme``): its root and ``.data/purelib``, ``.data/platlib``, and ``.data/data`` under the prefix, whose
``lib/pythonX.Y/site-packages`` (``Lib/site-packages`` on Windows) is site-packages itself (``site_path``); the
``scripts`` and ``headers`` schemes land elsewhere and run at no start-up.
"""

from __future__ import annotations

import posixpath
import re
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


def site_path(member: str) -> str | None:
    """Where a wheel member lands relative to site-packages, or None where it lands elsewhere (scripts, headers,
    .dist-info aside). The ``data`` scheme installs into the environment's prefix, so its
    ``lib/pythonX.Y/site-packages/`` (``Lib/site-packages/`` on Windows) is site-packages too (issue 48)."""
    parts = PurePosixPath(member).parts
    if not parts or ".." in parts:
        return None
    if not parts[0].endswith(".data"):
        return member
    if len(parts) > 2 and parts[1] in SCHEMES:
        return "/".join(parts[2:])
    rest = parts[2:] if len(parts) > 2 and parts[1] == "data" else ()
    for head in (("lib", None, "site-packages"), ("lib64", None, "site-packages"), ("Lib", "site-packages")):
        if len(rest) > len(head) and all(want is None or got == want for want, got in zip(head, rest)) \
                and (head[1] is not None or rest[1].startswith("python")):
            return "/".join(rest[len(head):])
    return None


def _entry(path: str) -> str | None:
    """The name ``path`` (relative to a folder on sys.path) is imported or read by from that folder: a file directly in
    it, or a ``sitecustomize``/``usercustomize`` package's ``__init__.py``; None for anything deeper."""
    parts = PurePosixPath(path).parts
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2 and parts[0] in CUSTOMIZE and parts[1] == "__init__.py":
        return parts[0]  # a package named sitecustomize is imported as the module is
    return None


def in_site_packages_root(member: str) -> str | None:
    """The name a wheel member has directly in site-packages (``x.pth``, ``sitecustomize``), or None for a member
    installed below a package folder, into its .dist-info, or elsewhere (scripts, headers, data)."""
    where = site_path(member)
    return None if where is None else _entry(where)


def customize_in(folder: str, installed: set[str]) -> str | None:
    """The ``sitecustomize``/``usercustomize`` the wheel installs directly in ``folder`` (relative to site-packages),
    which ``site`` imports once a ``.pth`` line has put that folder on sys.path; None where there is none. The same
    rule as in site-packages' root (``check_startup_code``)."""
    prefix = f"{folder}/"
    for path in sorted(installed):
        if path.startswith(prefix) and (name := _entry(path[len(prefix):])) is not None and name.split(".")[0] in CUSTOMIZE:
            return path
    return None


# The environment's own files at its prefix, which a wheel's data or scripts scheme could install over (issue 58: uv
# let a wheel's .data/data/pyvenv.cfg replace the environment's, whose include-system-site-packages = true made the
# machine's packages importable in the child): the venv's configuration, which the interpreter reads at every start-up
# (PEP 405), and the interpreter and activation scripts virtualenv and venv write into bin/.
_ENVIRONMENT_FILES = re.compile(r"pyvenv\.cfg|bin/(python[0-9.]*|pythonw?|activate(_this\.py|\.[a-z0-9]+)?|pip[0-9.]*|uv|uvx)")


def over_environment(member: str) -> str | None:
    """Where a wheel member would install over one of the environment's own files (``_ENVIRONMENT_FILES``): its path
    under the prefix; None for every other member. The ``data`` scheme installs at the prefix, ``scripts`` into bin/."""
    parts = PurePosixPath(member).parts
    if len(parts) < 3 or not parts[0].endswith(".data") or ".." in parts:
        return None
    where = "/".join(parts[2:]) if parts[1] == "data" else f"bin/{'/'.join(parts[2:])}" if parts[1] == "scripts" else None
    return where if where is not None and _ENVIRONMENT_FILES.fullmatch(where) else None


def executed_lines(text: str) -> list[str]:
    """The lines of a .pth file that ``site`` executes: those that begin with ``import`` and a space or a tab."""
    return [line.rstrip() for line in text.splitlines() if line.startswith(("import ", "import\t"))]


def check_startup_code(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = STARTUP_CODE.name
    runs: list[str] = []
    paths: list[str] = []
    with zipfile.ZipFile(wheel.path) as archive:
        members = [member for member in archive.namelist() if not member.endswith("/")]
        installed = {where for member in members if (where := site_path(member)) is not None}
        for member in members:
            if (over := over_environment(member)) is not None:
                runs.append(f"{member} installs over the environment's own {over}, which the interpreter or its "
                            f"activation reads at every start-up (a wheel installs only its own files)")
                continue
            if (root := in_site_packages_root(member)) is None:
                continue
            stem = root.split(".")[0]  # sitecustomize.py, sitecustomize.cpython-311-x86_64-linux-gnu.so, the package
            if stem in CUSTOMIZE:
                runs.append(f"{member} is imported by site at every interpreter start-up as {stem}")
            elif root.endswith(".pth"):
                text = read_member(archive, member, wheel.filename).decode("utf-8", "replace")
                if lines := executed_lines(text):
                    more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
                    runs.append(f"{member} runs {redact(lines[0])[:200]!r}{more} at every interpreter start-up")
                else:
                    folders = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
                    # site adds each folder, relative to site-packages, then imports sitecustomize from sys.path
                    found = next(((folder, hit) for folder in folders if not PurePosixPath(folder).is_absolute()
                                  and (hit := customize_in(posixpath.normpath(folder), installed)) is not None), None)
                    if found is not None:
                        runs.append(f"{member} adds {found[0]!r} to sys.path, where the wheel ships {found[1]}, which site "
                                    f"imports at every interpreter start-up")
                    elif folders:
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
