"""What the gate knows per executorch release line, read from ``releases.json`` beside this module: each
entry with its upstream source. The torch each line pairs with (``lines``, used by ``smoke.readers.pairing``), and
what a wheel ships by the first release line of each layout: the CUDA delegate's libraries, the release whose
runtime is split into owned shared libraries, and the files of another platform shipped on purpose.

A rule about what a wheel must or must not hold is data here, not a constant in a check.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from packaging.version import Version

RELEASES = Path(__file__).with_name("releases.json")


@functools.cache
def _data() -> dict[str, Any]:
    return dict(json.loads(RELEASES.read_text(encoding="utf-8")))


def lines() -> dict[str, dict[str, str]]:
    """executorch major.minor -> {"torch": major.minor, "source": ...}."""
    return dict(_data()["lines"])


def layout(name: str) -> dict[str, Any]:
    """One layout entry: its ``about``, ``source`` and data."""
    return dict(_data()["layouts"][name])


def cuda_delegate_libraries() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(first release line, the CUDA delegate's libraries a CUDA build of that layout ships), oldest first."""
    found = layout("cuda_delegate_libraries")["from"]
    return tuple((line, tuple(files)) for line, files in sorted(found.items(), key=lambda kv: Version(kv[0])))


def runtime_split() -> Version:
    """The first release line whose runtime ships as shared libraries in executorch/lib, one owner each."""
    return Version(layout("runtime_split")["from"])


def shipped_on_purpose() -> dict[str, str]:
    """A file of another platform shipped on purpose -> the library beside which it is."""
    return dict(layout("shipped_on_purpose")["files"])
