"""The machine's errors in a stage: an OSError (a disk full, a read-only or vanished folder) is the machine's, named with
its folder and what to do, never a traceback or a FAIL of the wheel."""

from __future__ import annotations

import contextlib
import errno
from pathlib import Path
from typing import Iterator

from smoke.errors import MachineError


@contextlib.contextmanager
def machine(what: str, folder: Path | None, option: str | None) -> Iterator[None]:
    """An OSError of the machine in a stage (a disk full, a read-only or vanished folder) is a
    ``MachineError`` naming the folder and what to do, never a traceback or a FAIL of the wheel."""
    try:
        yield
    except OSError as exc:
        where = folder if folder is not None else Path(exc.filename).parent if exc.filename else None
        at = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(where) else ""
        fix = ("free space there" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else
               "make it writable" if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else "see to it")
        raise MachineError(f"{what}: {exc.strerror or exc} in {str(where) if where else 'a folder it writes'!r}{at}; "
                           f"the machine, not the wheel: {fix}{f' (or pass another {option})' if option else ''}, then run again") from None
