"""A changed copy of a wheel with a RECORD that matches it, as a build tool would write it.

For the tests and the device scripts in ``.ci/``: they make defective wheels from real ones,
one change at a time (a file dropped, added or replaced, METADATA edited, a new name).
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _retagged(wheel_file: str, new_name: str) -> str:
    """WHEEL with the Tag (and Build) lines of a wheel of this file name, as a build tool writes them."""
    try:
        _name, _version, build, tags = parse_wheel_filename(new_name)
    except (InvalidWheelFilename, InvalidVersion):
        return wheel_file  # not a wheel's name: a test of the name itself
    kept = [line for line in wheel_file.splitlines() if not line.startswith(("Tag:", "Build:"))]
    while kept and not kept[-1]:
        kept.pop()
    extra = [f"Build: {build[0]}{build[1]}"] if build else []
    return "\n".join([*kept, *extra, *(f"Tag: {t}" for t in sorted(map(str, tags)))]) + "\n\n"


def rewrite_wheel(source: Path, target_dir: Path, *, new_name: str | None = None, drop=(), add=None, metadata=None,
                  update_record: bool = True, keep=None) -> Path:
    """A copy of a real wheel with one thing changed: its name, files removed, added or replaced, or METADATA
    edited. RECORD is rewritten to match (as a build tool would) unless ``update_record`` is False."""
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / (new_name or source.name)
    add = dict(add or {})
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as dst:
        record_item, lines = None, []
        for item in src.infolist():
            if any(item.filename.startswith(prefix) for prefix in drop) or item.filename in add:
                continue
            if keep is not None and not keep(item.filename):
                continue
            if item.filename.endswith(".dist-info/RECORD"):
                record_item = item
                continue
            data = src.read(item.filename)
            if metadata and item.filename.endswith(".dist-info/METADATA"):
                data = metadata(data.decode()).encode()
            if new_name and item.filename.endswith(".dist-info/WHEEL"):
                data = _retagged(data.decode(), new_name).encode()  # the builder writes the name's tags here
            dst.writestr(item, data)
            if not item.is_dir():
                lines.append(_record_line(item.filename, data))
        for name, data in add.items():
            dst.writestr(name, data)
            lines.append(_record_line(name, data))
        if record_item is not None:
            if update_record:
                record = "\n".join([*lines, f"{record_item.filename},,"]) + "\n"
            else:
                record = src.read(record_item.filename).decode()
            dst.writestr(record_item, record)
    return target
