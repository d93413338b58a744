"""A changed copy of a wheel with a RECORD that matches it, as a build tool would write it.

For the tests and the device scripts in ``.ci/``: they make defective wheels from real ones,
one change at a time (a file dropped, added or replaced, METADATA edited, a new name).
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


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
