"""What a path is, where it is not a regular file: said in the words of the refusal a reader makes before it opens one
(a FIFO's open waits for a writer; a device such as /dev/zero never ends)."""

from __future__ import annotations

import stat

_NOT_FILES = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
              (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def not_regular(mode: int) -> str | None:
    """What a file of ``mode`` (``st_mode``) is where it is not a regular file ("a FIFO"); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _NOT_FILES if test(mode)), "not a regular file")
