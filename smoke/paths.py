"""Where the gate lives and where it writes: its code, its constraints, and ``.gate``, said once; and its version.

From a checkout (nox, ``python -m smoke``), the constraints are the checkout's ``constraints/`` and its folders are
under the checkout's ``.gate``; installed (``pip install``), the constraints are the package data
``smoke/constraints`` and ``.gate`` is in the folder the gate is run from. Every folder the gate makes by default is
under ``.gate``; nothing else computes these paths.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The folder the user ran the gate from (nox runs its sessions in the noxfile's folder, the checkout; the noxfile
# says where nox was invoked from in this variable): its pyproject.toml may hold the gate's policy (smoke.readers.settings).
INVOKED_FROM = "GATE_INVOKED_FROM"


def invoked_from() -> Path:
    given = os.environ.get(INVOKED_FROM)
    if given:
        return Path(given)
    try:
        return Path(os.getcwd())
    except FileNotFoundError:  # the folder was removed; the command's edge (smoke.cli) refuses to run there, saying so
        return Path(os.environ.get("PWD") or os.sep)


def checkout_of(package: Path) -> Path | None:
    """The gate's checkout that holds ``package`` (the ``smoke`` folder), or None where it is installed: a checkout
    holds the noxfile and ``constraints/`` beside it, a site-packages folder neither."""
    root = package.parent
    return root if (root / "noxfile.py").is_file() and (root / "constraints").is_dir() else None


PACKAGE = Path(__file__).resolve().parent  # the `smoke` package that runs, checked out or installed
CHECKOUT = checkout_of(PACKAGE)  # the gate's checkout; None where the gate is installed
# The folder `python -m smoke` runs in, for the rows compare and the benchmark start: it imports this gate's smoke.
HOME = CHECKOUT or PACKAGE.parent
# The pinned torch of each release line (smoke.readers.pairing)
CONSTRAINTS = CHECKOUT / "constraints" if CHECKOUT is not None else PACKAGE / "constraints"
GATE = (CHECKOUT or invoked_from()) / ".gate"  # the only place where the gate's folders may be, unless told another
ENVS = GATE / "envs"  # a row's environment: ENVS / ROW (compare's: ENVS / "compare")
BENCH = GATE / "bench"  # the benchmark's environments: BENCH / ROW
WHEELS = GATE / "wheels"  # the default download's cache

DISTRIBUTION = "executorch-wheel-gate"


def version() -> str:
    """The gate's version, as its reports name it: the checkout's pyproject.toml where the gate runs from a checkout
    (an installed copy of another version may sit beside it), else the installed distribution's."""
    if CHECKOUT is not None:
        if sys.version_info >= (3, 11):  # imported here: the child, which imports this module, has no tomli
            import tomllib
        else:  # pyproject.toml's dependencies install tomli on Python 3.10
            import tomli as tomllib
        try:
            return str(tomllib.loads((CHECKOUT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
        except (OSError, ValueError, KeyError, TypeError):
            return "unknown"
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"
