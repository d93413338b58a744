"""The child's record: JSON Lines the child writes and the parent follows as it grows.

One object a line, flushed and synced as it goes, so that a crash loses nothing already decided:

- ``{"kind": "facts", ...}``: versions of executorch, torch, Python; the device.
- ``{"kind": "probe", ...}``: ``smoke.child.probe.probe()``, for the parent's environment checks.
- ``{"kind": "phase", "name": ..., "event": "start"|"end", "seconds": ...}``
- ``{"kind": "check", "name", "status": "pass"|"fail"|"skip", "reason", "measured"}``
- ``{"kind": "log", "text": ...}``: a traceback, for the log only.
- ``{"kind": "end"}``: the last line; without it the child did not finish.

``Recorder`` is the child's side; the parent's (start the child, follow the record, judge a child
that crashed, hung or spoke garbage) is ``smoke.environment.follow``.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from smoke.results import CheckResult, Status


class FailFast(Exception):
    pass


class Recorder:
    def __init__(self, path: Path, fail_fast: bool) -> None:
        self.handle = open(path, "a", encoding="utf-8")
        self.fail_fast = fail_fast

    def write(self, **record: Any) -> None:
        self.handle.write(json.dumps(record, default=str) + "\n")
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def check(self, result: CheckResult) -> CheckResult:
        self.write(kind="check", **result.to_json())
        if self.fail_fast and result.status is Status.FAIL:
            raise FailFast
        return result

    @contextmanager
    def phase(self, name: str):
        start = time.monotonic()
        self.write(kind="phase", name=name, event="start")
        try:
            yield
        finally:
            self.write(kind="phase", name=name, event="end", seconds=round(time.monotonic() - start, 3))
