"""The row the child runs, as data: the parent writes it (``row.json`` in the work folder), the child reads it.

The child imports none of the parent's rows, backends, readers or checks (an import-linter ``forbidden``
contract in pyproject.toml): what it needs of its row is these fields, written by ``smoke.rows.child_data``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path


@dataclass(frozen=True)
class ChildRow:
    name: str  # the row's name (cuda_x86_64, cpu_x86_64, ...)
    backend: str  # the delegate's kind: "cuda", "xnnpack" (smoke.child.delegates)
    delegate_id: str  # BackendDelegate.id its programs carry
    data_file: str  # its external data file's name, as the runners pass it
    weightless_writes_data: bool  # does the delegate write a data file for a model with no weights?
    execution_required: bool  # a missing device is a FAIL, not a SKIP

    @classmethod
    def read(cls, path: Path) -> ChildRow:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(**{f.name: data[f.name] for f in fields(cls)})

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))
