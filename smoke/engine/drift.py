"""What changed between two wheels, read from the files alone (``nox -s compare``'s static drift).

Each wheel is read with the gate's own readers; nothing is installed. Side by side: the files added, removed or
resized past both ``SIZE_RATIO`` and ``SIZE_BYTES`` (the ``.dist-info`` compared by role); ``Requires-Dist`` by
project, and the paired torch; each library's RUNPATH; the dynamic symbols a library no longer exports; the platform
tag the ELF files need; on a CUDA row, each library's device code (added by ``smoke.commands.compare``).

Drift is information: ``compare``'s exit is decided by regressed checks and drifted outputs.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name

from smoke.checks import policy, shipped
from smoke.readers import elf, pairing
from smoke.readers.elf import Libraries
from smoke.readers.wheel import Wheel, read_member

# A file's size change is drift when it is past both: a tenth of its old size, and 4 KiB.
SIZE_RATIO = 0.10
SIZE_BYTES = 4096
# The binding of a defined symbol another library can bind to: STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE.
EXPORTED_BINDINGS = (1, 2, 10)
SHOWN = 5  # names shown in a line; the JSON report holds every one


@dataclass(frozen=True)
class Side:
    """What the static drift reads from one wheel."""

    wheel: Wheel
    sizes: dict[str, int]  # member (the .dist-info folder as "*.dist-info") -> bytes
    libraries: Libraries
    exported: dict[str, frozenset[str]]  # library -> the dynamic symbols it exports
    tag: str | None  # the platform tag its ELF files need (auditwheel's policy), None if not one architecture
    newest: tuple[str, ...]  # the newest symbol version of each family they need (GLIBC_2.28, ...)


def _role(name: str) -> str:
    """``executorch-1.5.1.dist-info/METADATA`` -> ``*.dist-info/METADATA``: the same file in both releases."""
    head, sep, rest = name.partition("/")
    if head.endswith(".dist-info") and sep:
        return f"*.dist-info/{rest}"
    if head.endswith(".data") and sep:
        return f"*.data/{rest}"
    return name


def exported_symbols(data: bytes) -> frozenset[str]:
    from elftools.elf.elffile import ELFFile

    return frozenset(name for name, binding, defined in elf.dynamic_symbols(ELFFile(io.BytesIO(data)))
                     if name and defined and binding in EXPORTED_BINDINGS)


def read_side(wheel: Wheel, libraries: Libraries | None = None) -> Side:
    """One wheel's files, libraries and exports. The ELF files were checked readable by ``shipped.read_libraries``;
    one that is not is named there (``architecture``) and has no exports here."""
    libraries = libraries if libraries is not None else shipped.read_libraries(wheel)
    exported: dict[str, frozenset[str]] = {}
    with zipfile.ZipFile(wheel.path) as archive:
        sizes = {_role(info.filename): info.file_size for info in archive.infolist() if not info.filename.endswith("/")}
        for lib in libraries.items:
            try:
                exported[lib.path] = exported_symbols(read_member(archive, lib.path, wheel.filename))
            except Exception:  # noqa: BLE001 - read once already; a second reader's refusal is no export list
                exported[lib.path] = frozenset()
    tag, newest = policy.honest_tag(libraries)
    return Side(wheel, sizes, libraries, exported, tag, tuple(newest))


def _files(old: Side, new: Side) -> dict[str, Any]:
    added = sorted(set(new.sizes) - set(old.sizes))
    removed = sorted(set(old.sizes) - set(new.sizes))
    resized = []
    for name in sorted(set(old.sizes) & set(new.sizes)):
        before, after = old.sizes[name], new.sizes[name]
        change = after - before
        if abs(change) > SIZE_BYTES and abs(change) > SIZE_RATIO * before:
            resized.append({"file": name, "old": before, "new": after, "ratio": round(after / before, 3) if before else None})
    return {"added": added, "removed": removed, "resized": resized,
            "total_bytes": {"old": sum(old.sizes.values()), "new": sum(new.sizes.values())},
            "wheel_bytes": {"old": old.wheel.size, "new": new.wheel.size}}


def _requirements(old: Side, new: Side) -> dict[str, Any]:
    def by_project(side: Side) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for req in side.wheel.requires_dist:
            found.setdefault(canonicalize_name(req.name), []).append(str(req))
        return {name: sorted(texts) for name, texts in found.items()}

    before, after = by_project(old), by_project(new)
    return {
        "added": sorted(t for name in sorted(set(after) - set(before)) for t in after[name]),
        "removed": sorted(t for name in sorted(set(before) - set(after)) for t in before[name]),
        "changed": [{"project": name, "old": before[name], "new": after[name]}
                    for name in sorted(set(before) & set(after)) if before[name] != after[name]],
        "torch_declared": {"old": before.get("torch", []), "new": after.get("torch", [])},
        "torch_paired": {"old": pairing.paired_torch(old.wheel.release), "new": pairing.paired_torch(new.wheel.release)},
    }


def _libraries(old: Side, new: Side) -> dict[str, Any]:
    before = {lib.path: lib for lib in old.libraries.items}
    after = {lib.path: lib for lib in new.libraries.items}
    both = sorted(set(before) & set(after))
    runpath = [{"library": path, "old": list(before[path].search_path), "new": list(after[path].search_path)}
               for path in both if before[path].search_path != after[path].search_path]
    everywhere = frozenset().union(*new.exported.values()) if new.exported else frozenset()
    symbols = []
    for path in both:
        gone = old.exported.get(path, frozenset()) - new.exported.get(path, frozenset())
        if gone:
            symbols.append({"library": path, "removed": len(gone), "exported_elsewhere": len(gone & everywhere),
                            "old_exports": len(old.exported.get(path, ())), "new_exports": len(new.exported.get(path, ())),
                            "names": sorted(gone)})
    return {"added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
            "runpath": runpath, "symbols_removed": symbols,
            "policy": {"old": old.tag, "new": new.tag, "old_newest": list(old.newest), "new_newest": list(new.newest)}}


def static_drift(old: Side, new: Side) -> dict[str, Any]:
    """The static drift, as the JSON report holds it (``docs/compare-schema.json``, ``static``)."""
    return {"files": _files(old, new), "requires_dist": _requirements(old, new), "libraries": _libraries(old, new),
            "thresholds": {"size_ratio": SIZE_RATIO, "size_bytes": SIZE_BYTES}}


def _shown(names: list[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def lines(drift: dict[str, Any]) -> list[str]:
    """The static drift in a line per kind; an empty list when nothing drifted."""
    out = []
    files, reqs, libs = drift["files"], drift["requires_dist"], drift["libraries"]
    if files["added"]:
        out.append(f"files added: {len(files['added'])}: {_shown(files['added'])}")
    if files["removed"]:
        out.append(f"files removed: {len(files['removed'])}: {_shown(files['removed'])}")
    if files["resized"]:
        shown = [f"{r['file']} {r['old']} -> {r['new']} B" for r in files["resized"]]
        out.append(f"files resized past {drift['thresholds']['size_ratio']:.0%} and {drift['thresholds']['size_bytes']} B: "
                   f"{len(shown)}: {_shown(shown)}")
    if files["wheel_bytes"]["old"] != files["wheel_bytes"]["new"]:
        w, t = files["wheel_bytes"], files["total_bytes"]
        out.append(f"size: wheel {w['old']} -> {w['new']} B, unpacked {t['old']} -> {t['new']} B")
    for key in ("added", "removed"):
        if reqs[key]:
            out.append(f"Requires-Dist {key}: {', '.join(reqs[key])}")
    for change in reqs["changed"]:
        out.append(f"Requires-Dist changed: {', '.join(change['old'])} -> {', '.join(change['new'])}")
    paired = reqs["torch_paired"]
    if paired["old"] != paired["new"]:
        out.append(f"paired torch: {paired['old']} -> {paired['new']}")
    for key in ("added", "removed"):
        if libs[key]:
            out.append(f"ELF files {key}: {len(libs[key])}: {_shown(libs[key])}")
    for change in libs["runpath"]:
        out.append(f"RUNPATH of {change['library']}: {':'.join(change['old']) or '(none)'} -> {':'.join(change['new']) or '(none)'}")
    for gone in libs["symbols_removed"]:
        out.append(f"exported symbols removed from {gone['library']}: {gone['removed']} of {gone['old_exports']} "
                   f"({gone['exported_elsewhere']} of them exported by another file of NEW): {_shown(gone['names'])}")
    code = drift.get("device_code") or {}
    for key in ("added", "removed"):
        if code.get(key):
            out.append(f"libraries with CUDA device code {key}: {_shown(code[key])}")
    for change in code.get("changed", []):
        old, new = change["old"], change["new"]
        out.append(f"CUDA device code of {change['library']}: {' '.join(old['sm']) or 'no sm'}, PTX {' '.join(old['ptx']) or 'none'} -> "
                   f"{' '.join(new['sm']) or 'no sm'}, PTX {' '.join(new['ptx']) or 'none'}")
    pol = libs["policy"]
    if (pol["old"], pol["old_newest"]) != (pol["new"], pol["new_newest"]):
        out.append(f"platform policy needed: {pol['old']} ({', '.join(pol['old_newest'])}) -> "
                   f"{pol['new']} ({', '.join(pol['new_newest'])})")
    return out
