"""The child's record: JSON Lines the child writes and the parent follows as it grows.

One message a line (``smoke.protocol``: facts, probe, phase, check, log, ask, end), flushed and synced as it goes,
so that a crash loses nothing already decided; without the end the child did not finish. ``Recorder`` is the child's
side; the parent's is ``smoke.environment.follow``.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path

from smoke import protocol
from smoke.results import CheckResult, Status


class FailFast(Exception):
    pass


class Recorder:
    def __init__(self, path: Path, fail_fast: bool) -> None:
        self.handle = open(path, "a", encoding="utf-8")
        self.fail_fast = fail_fast

    def write(self, message: protocol.Message) -> None:
        self.handle.write(protocol.encode(message) + "\n")
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def check(self, result: CheckResult) -> CheckResult:
        self.write(protocol.Check(result))
        if self.fail_fast and result.status is Status.FAIL:
            raise FailFast
        return result

    @contextmanager
    def phase(self, name: str):
        start = time.monotonic()
        self.write(protocol.Phase(name, "start"))
        try:
            yield
        finally:
            self.write(protocol.Phase(name, "end", round(time.monotonic() - start, 3)))
