"""What the gate knows per executorch release line, read from ``releases.json`` beside this module: each
entry with its upstream source.

The torch each line pairs with (``lines``, for ``smoke.readers.pairing``), and what a wheel ships by the first release
of each layout: the CUDA delegate's libraries, the release whose runtime is split into owned shared libraries, and the
files of another platform shipped on purpose. ``dependency_files.json`` holds what the torch and nvidia-* wheels the
gate has read ship (``dependency_wheels``). A rule about what a wheel holds is data here, not a constant in a check.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
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


# What the dependency wheels the gate has read ship (their shared libraries), each with its file name and sha256: data
# written by .ci/read-dependency-wheels from the wheels' zip listings, beside this module.
DEPENDENCY_FILES = RELEASES.with_name("dependency_files.json")


@dataclass(frozen=True)
class DependencyWheel:
    """One wheel of a dependency as read: what it ships where an executorch library's $ORIGIN entry may lead."""

    project: str  # canonical name: torch, nvidia-cuda-runtime
    wheel: str  # its file name
    sha256: str
    version: Version
    machines: tuple[str, ...]  # of its platform tags: x86_64, aarch64
    files: frozenset[str]  # its shared libraries, by their paths in site-packages: torch/lib/libc10.so
    variant: str | None = None  # torch's build: cpu, cu130 (its local label, else the CUDA its Requires-Dist pins)

    @property
    def line(self) -> str:
        """2.14 for torch 2.14.1 and 2.14.0+cpu."""
        return f"{self.version.major}.{self.version.minor}"


@functools.cache
def dependency_wheels(project: str) -> tuple[DependencyWheel, ...]:
    """Every wheel of this project (a canonical name) the gate has read, in file-name order; () where none was read."""
    data = json.loads(DEPENDENCY_FILES.read_text(encoding="utf-8"))["packages"]
    entries: list[dict[str, Any]] = next((found for name, found in data.items() if canonicalize_name(name) == canonicalize_name(project)), [])
    return tuple(DependencyWheel(canonicalize_name(project), e["wheel"], e["sha256"], Version(e["version"]),
                                 tuple(e["machines"]), frozenset(e["files"]), e.get("variant")) for e in entries)
