"""Which torch each executorch release pairs with, and the constraints file that pins it."""

from __future__ import annotations

from pathlib import Path

from smoke import paths
from smoke.errors import NoTorchPairing
from smoke.readers.wheel import Wheel

CONSTRAINTS_DIR = paths.CONSTRAINTS

# executorch major.minor -> torch major.minor, from each release's torch_pin.py.
TORCH_FOR_EXECUTORCH = {"1.2": "2.11", "1.3": "2.12", "1.4": "2.13", "1.5": "2.13"}


def paired_torch(release: str) -> str | None:
    return TORCH_FOR_EXECUTORCH.get(release)


def constraints_for(wheel: Wheel, override: Path | None = None) -> Path:
    """The constraints file for this wheel: the override if given, else the paired one."""
    if override is not None:
        if not override.is_file():
            raise NoTorchPairing(f"constraints file {str(override)!r} does not exist; pass an existing file to --constraints")
        return override
    torch = paired_torch(wheel.release)
    if torch is None:
        known = ", ".join(f"{e} -> torch {t}" for e, t in TORCH_FOR_EXECUTORCH.items())
        raise NoTorchPairing(
            f"executorch {wheel.version} has no known torch pairing (known: {known}); "
            f"pass --constraints FILE with a pinned torch line"
        )
    return CONSTRAINTS_DIR / f"torch-{torch}.txt"
