"""What a path is, where it is not a regular file: said in the words of the refusal a reader makes before it opens one
(a FIFO's open waits for a writer; a device such as /dev/zero never ends)."""

from __future__ import annotations

import os
import stat

_NOT_FILES = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
              (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def not_regular(mode: int) -> str | None:
    """What a file of ``mode`` (``st_mode``) is where it is not a regular file ("a FIFO"); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _NOT_FILES if test(mode)), "not a regular file")


class Unreadable(Exception):
    """Why ``read_regular`` read nothing: the path is not a regular file, is over the limit, or cannot be opened."""


def read_regular(path: str | os.PathLike, limit: int, follow: bool = True) -> bytes:
    """At most ``limit`` bytes of a regular file, whole: the one bounded read of a file the gate did not write, or that
    something else could have replaced. It is opened without waiting (``O_NONBLOCK``: a FIFO's open returns at once)
    and its kind is judged on what was opened (``fstat``), so a FIFO or a device put in its place since any earlier
    look is refused, never read (issue 58: a FIFO among the C++ consumer's loaded objects hung the gate). ``follow``
    False refuses a link. A file over ``limit`` is refused, not cut."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from None
    try:
        status = os.fstat(fd)
        if (kind := not_regular(status.st_mode)) is not None:
            raise Unreadable(f"{kind}, not a regular file")
        if status.st_size > limit:
            raise Unreadable(f"over {limit} B ({status.st_size} B)")
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew since the fstat
                raise Unreadable(f"over {limit} B")
        return b"".join(chunks)
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
