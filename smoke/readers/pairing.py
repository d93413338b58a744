"""Which torch each executorch wheel pairs with, and the constraints file that pins it.

The release lines are data with their upstream sources (``releases.json``); a wheel of a known line pairs with its
torch. A newer wheel (a nightly, a build of main) is judged, not refused: it pairs with the newest constrained torch
line its ``Requires-Dist: torch`` admits or, where it declares no torch, the newest known line's. ``Pairing.how``
says which rule made the pairing, in the run's header and in ``torch agrees``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from smoke import paths
from smoke.errors import NoTorchPairing
from smoke.readers import releases
from smoke.readers.wheel import Wheel

CONSTRAINTS_DIR = paths.CONSTRAINTS


def release_lines() -> dict[str, dict[str, str]]:
    """executorch major.minor -> {"torch": major.minor, "source": ...}, from releases.json (smoke.readers.releases)."""
    return releases.lines()


def _key(line: str) -> tuple[int, ...]:
    return tuple(int(part) for part in line.split("."))


def paired_torch(release: str) -> str | None:
    """The torch line a known executorch release line pairs with (None for a line the gate does not know)."""
    entry = release_lines().get(release)
    return entry["torch"] if entry else None


@dataclass(frozen=True)
class Pairing:
    torch: str  # the torch major.minor installed beside the wheel
    how: str  # which rule made it, said in the run's header and in `torch agrees`
    by_rule: bool  # True where the wheel's line is not a known release line


def pair(wheel: Wheel) -> Pairing:
    """The torch line for this wheel: its release line's, or, newer than every known line, by the rule above."""
    lines = release_lines()
    if wheel.release in lines:
        entry = lines[wheel.release]
        return Pairing(entry["torch"], f"executorch {wheel.release} pairs with torch {entry['torch']} ({entry['source']})", False)
    newest = max(lines, key=_key)
    known = ", ".join(f"{e} -> torch {t['torch']}" for e, t in lines.items())
    if _key(wheel.release) < _key(newest):
        raise NoTorchPairing(f"executorch {wheel.version} is of no release line the gate knows (known: {known}), and older than "
                             f"the newest; pass --constraints FILE with a pinned torch line")
    declared = [req for req in wheel.requires_dist if req.name.lower() == "torch"
                and (req.marker is None or req.marker.evaluate({"extra": ""}))]
    candidates = sorted({entry["torch"] for entry in lines.values()}, key=_key, reverse=True)
    pre = wheel.version.is_prerelease or wheel.version.is_devrelease
    newer = f"executorch {wheel.version} is newer than every release line the gate knows (newest: {newest})"
    if not declared:
        torch = lines[newest]["torch"]
        return Pairing(torch, f"{newer} and declares no torch: paired with the newest line's torch {torch} "
                              f"(pass --constraints FILE to choose another)", True)
    for torch in candidates:
        if all(admits_line(req, torch, pre) for req in declared):
            spec = ", ".join(str(req) for req in declared)
            return Pairing(torch, f"{newer}: paired with torch {torch}, the newest line it declares ({spec}) admits "
                                  f"(pass --constraints FILE to choose another)", True)
    spec = ", ".join(str(req) for req in declared)
    raise NoTorchPairing(f"{newer}, and declares {spec}, which no torch line the gate has constraints for admits "
                         f"({', '.join(candidates)}); pass --constraints FILE with a pinned torch line")


def admits_line(req, torch: str, pre: bool) -> bool:
    """Whether the requirement admits some release of a torch line (its .0 or a later patch or pre-release of it)."""
    probes = [Version(f"{torch}.{patch}") for patch in range(0, 10)] + [Version(f"{torch}.0a0"), Version(f"{torch}.0.dev0")]
    return any(req.specifier.contains(v, prereleases=True if v.is_prerelease else pre) for v in probes)


def constraints_for(wheel: Wheel, override: Path | None = None) -> Path:
    """The constraints file for this wheel: the override if given, else the paired one."""
    if override is not None:
        if not override.is_file():
            raise NoTorchPairing(f"constraints file {str(override)!r} does not exist; pass an existing file to --constraints")
        return override
    return CONSTRAINTS_DIR / f"torch-{pair(wheel).torch}.txt"
