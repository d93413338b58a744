"""Folders the gate makes: marked, locked for one run, and the only ones it ever empties.

Such a folder holds a mark file, ``.executorch-wheel-gate``; a folder without it (a user's files, a checkout) is
never emptied or removed, and is refused with one line unless empty. A run holds an exclusive ``flock`` on the mark:
a second run on the folder is refused at once, and the lock dies with its holder (no stale lock). A folder the gate
writes into but does not own (a report folder) is held through a lock file of its own (``lock_file``).
"""

from __future__ import annotations

try:
    import fcntl
except ImportError:  # Windows: msvcrt's byte-range lock instead (the Windows row runs its file checks there)
    fcntl = None  # type: ignore[assignment]
    import msvcrt
import contextlib
import errno
import os
import re
import shutil
import stat
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator

from smoke.errors import GateError, Interrupted

MARK = ".executorch-wheel-gate"


class FolderRefused(GateError):
    """A folder the gate was told to use is not one it may write into."""


@dataclass
class Owned:
    """A marked folder, locked by this run until ``release``."""

    path: Path
    lock: IO[str]
    created: bool = False  # this run made it
    discard: bool = False  # remove it when the run lets go of it (a passed run's temporary artifacts)

    @property
    def unused(self) -> bool:
        """Nothing in it but the mark."""
        return all(child.name == MARK for child in self.path.iterdir())

    def empty(self) -> None:
        """Remove everything in it but the mark (the lock stays held)."""
        for child in self.path.iterdir():
            if child.name == MARK:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    def remove(self) -> None:
        """Remove the folder itself (only ever a marked one, this run's)."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.release()

    def release(self) -> None:
        if not self.lock.closed:
            self.lock.close()


def check_place(path: Path, option: str) -> None:
    """Before any work: refuse a folder the run could not make or write (a file or a dangling link on the
    way, a read-only or full file system), without making it. A real file is made and removed, not
    ``os.access``: root passes access() on a read-only file system's folders too."""
    probe = Path(path)
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    fix = f"pass a writable folder to {option}"
    if not probe.is_dir():
        kind = "a dangling link" if probe.is_symlink() else "not a folder"
        raise FolderRefused(f"{option} {str(path)!r} cannot be made or written ({str(probe)!r} is {kind}); {fix}")
    try:
        handle, name = tempfile.mkstemp(prefix=".gate-probe-", dir=probe)
        os.close(handle)
        os.unlink(name)
    except OSError as exc:
        raise FolderRefused(f"{option} {str(path)!r} cannot be made or written ({str(probe)!r}: {exc.strerror or exc}); "
                            f"{fix}") from None


def _lock(handle: IO[str]) -> None:
    """An exclusive lock on the mark, not waiting: BlockingIOError when another run holds it."""
    if fcntl is not None:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    handle.seek(0)
    try:
        msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
    except OSError as exc:
        raise BlockingIOError(str(exc)) from exc


def _in_use(what: str, path: Path, holder: str, option: str) -> FolderRefused:
    return FolderRefused(f"{what} {str(path)!r} is in use by another gate run ({holder}): wait for it to end, "
                         f"or pass another folder to {option}")


def check_free(path: Path, what: str, option: str) -> None:
    """Before any work: refuse a folder another gate run holds (its mark locked), naming the holder, as ``claim``
    would later. Nothing is held after: the lock is tried and let go of at once, and ``claim`` still takes it when the
    run comes to the folder (a run that takes it in between is refused there, as before)."""
    try:
        handle = open(Path(path) / MARK, "r+", encoding="utf-8")  # no mark (or none readable): no run holds it
    except OSError:
        return
    with handle:
        try:
            _lock(handle)
        except BlockingIOError:
            try:
                holder = handle.read().strip() or "another process"
            except OSError:  # Windows: the locked byte cannot be read
                holder = "another process"
            raise _in_use(what, path, holder, option) from None


def claim(path: Path, what: str, option: str, earlier_marks: tuple[str, ...] = ()) -> Owned:
    """Take ``path`` for this run: make it (marked) if new or empty, accept it if marked, else refuse.

    ``what`` names the folder in messages ("environment folder"), ``option`` the flag that sets it;
    ``earlier_marks`` are files that only the gate writes, which folders made before the mark carry.
    """
    path = Path(path)
    mark = path / MARK
    try:
        if path.is_dir() and not mark.exists() and any((path / name).is_file() for name in earlier_marks):
            mark.touch()
        if path.exists() and not path.is_dir():
            raise FolderRefused(f"{what} {str(path)!r} is a file, not a folder: pass a new or empty folder to {option}")
        if path.is_dir() and not mark.exists() and any(path.iterdir()):
            raise FolderRefused(
                f"{what} {str(path)!r} is not empty and the gate did not make it (no {MARK} in it), so it will not "
                f"touch it: pass a new or empty folder to {option}"
            )
        created = not path.exists()
        path.mkdir(parents=True, exist_ok=True)
        handle = open(mark, "a+", encoding="utf-8")
    except FolderRefused:
        raise
    except OSError as exc:
        raise FolderRefused(f"{what} {str(path)!r} cannot be made or written ({exc.strerror or exc}): "
                            f"pass a writable folder to {option}") from exc
    try:
        _lock(handle)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise _in_use(what, path, holder, option) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    return Owned(path, handle, created)


@contextmanager
def held(folder: Owned, interrupted: Callable[[Owned], None] = lambda folder: None) -> Iterator[Owned]:
    """Hold a claimed folder for the rest of the run. However the run ends the lock is released; a
    folder marked ``discard`` is removed, and so is one this run made and left unused (nothing but
    the mark); every other one is kept. On an interruption ``interrupted(folder)`` is called first (to say where
    what was kept is)."""
    try:
        yield folder
    except (KeyboardInterrupt, Interrupted):
        interrupted(folder)
        raise
    finally:
        if folder.path.is_dir() and (folder.discard or (folder.created and folder.unused)):
            folder.remove()
        else:
            folder.release()


# What a lock file holds: the holder's pid, which a second run names when it is refused.
_HOLDER = re.compile(r"(pid \d+\n)?")


def _open_lock(lock: Path, what: str, option: str) -> IO[str]:
    """The lock file opened (made where it is not there), never through a link, and locked; refused when another
    run holds it. A lock file is removed by its holder as it lets go: one opened before that and locked after is
    no longer the file at that path, and is let go of for the one there now."""
    folder = lock.parent
    for _ in range(100):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0), 0o644)
        except OSError as exc:
            why = f"{lock.name!r} there is a link" if exc.errno == errno.ELOOP else f"{exc.strerror or exc}"
            raise FolderRefused(f"{what} {str(folder)!r} cannot be locked for this run ({why}): pass another folder to "
                                f"{option}") from None
        handle = os.fdopen(fd, "r+", encoding="utf-8", newline="")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            handle.close()
            raise FolderRefused(f"{what} {str(folder)!r} holds {lock.name!r}, which is not a regular file, so it cannot be "
                                f"locked for this run: pass another folder to {option}")
        try:
            _lock(handle)
        except BlockingIOError:
            try:
                handle.seek(0)
                holder = handle.read(64).strip() or "another process"
            except OSError:  # Windows: the locked byte cannot be read
                holder = "another process"
            handle.close()
            raise FolderRefused(f"{what} {str(folder)!r} is in use by another gate run ({holder}) that writes the same "
                                f"reports: wait for it to end, or pass another folder to {option}") from None
        try:
            there = os.stat(lock, follow_symlinks=False)
        except FileNotFoundError:
            there = None
        if there is not None and os.path.samestat(os.fstat(fd), there):
            return handle
        handle.close()  # removed (and maybe made anew) by the run that held it, between the open and the lock
    raise FolderRefused(f"{what} {str(folder)!r}: its lock {lock.name!r} kept changing hands; pass another folder to {option}")


@contextmanager
def lock_file(lock: Path, what: str, option: str) -> Iterator[None]:
    """Hold ``lock``, the gate's file in a folder it writes into but does not own, for one run: a second run is refused
    at once, naming the holder's pid. The lock dies with its holder; release removes the file (and a folder this run
    made, if empty). A link, or a file the gate did not write, is refused."""
    folder = lock.parent
    made = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FolderRefused(f"{what} {str(folder)!r} cannot be made ({exc.strerror or exc}): pass a writable folder to "
                            f"{option}") from None
    handle = _open_lock(lock, what, option)
    handle.seek(0)
    if not _HOLDER.fullmatch(handle.read(64)):
        handle.close()
        raise FolderRefused(f"{what} {str(folder)!r} holds {lock.name!r}, a file the gate did not write, which it will not "
                            f"replace: remove it, or pass another folder to {option}")
    handle.seek(0)
    handle.truncate()
    with contextlib.suppress(OSError):  # a full disk holds the lock without its holder's pid (named "another process")
        os.write(handle.fileno(), f"pid {os.getpid()}\n".encode())
    try:
        yield
    finally:
        try:
            lock.unlink()  # while still held: a run that opened it meanwhile finds it gone (_open_lock)
            removed = True
        except OSError:
            removed = False  # Windows: an open file cannot be removed
        handle.close()
        if not removed:
            with contextlib.suppress(OSError):
                lock.unlink()
        if made:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only an empty one
