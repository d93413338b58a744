"""The environment's own files, noted before any of the wheel's code runs, and held against what is there later
(issue 58).

Eager's answer is computed from torch and torchao in the environment (``smoke.environment.reference``), and the
wheel's code runs in that same environment: its probe, its extension modules, the child. Code that rewrites or removes
a file of torch's can change or withdraw the answer the outputs are held to. So, once the environment is built or
reused and before the first process that imports the wheel starts, ``note`` records every file of its site-packages
(and of the folder ``--torch-from`` names) but the wheel's own: its inode, size and change time. ``Noted.differs``
names any that is not so any more. A process cannot set a file's change time (``st_ctime``) back: writing to it,
truncating, replacing it (a new inode), ``chmod`` and ``utime`` all set it to the present. A new hard link to it sets
it too, which is why the environment's files are copies of the installer's, never links (``installer``: uv's copy
link mode).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterable, Iterator

MAX_FILES = 2_000_000  # a walk stops past this many (a site-packages holds tens of thousands)
NAMED = 3  # files named in a line, the rest counted

Stat = tuple[int, int, int]  # inode, size, change time (ns)


def _walk(folder: str) -> Iterator[tuple[str, Stat]]:
    """Every file and link under ``folder`` (links not followed), by its path, with its inode, size and change time."""
    pending = [folder]
    seen = 0
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                    continue
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            seen += 1
            if seen > MAX_FILES:
                return
            yield entry.path, (stat.st_ino, stat.st_size, stat.st_ctime_ns)


def _compiled_of(relative: str) -> str | None:
    """The source a ``__pycache__`` file was compiled from (``a/__pycache__/b.cpython-311.pyc`` -> ``a/b.py``)."""
    path = PurePosixPath(relative)
    if path.parent.name != "__pycache__" or path.suffix != ".pyc":
        return None
    return str(path.parent.parent / (path.name.split(".", 1)[0] + ".py"))


@dataclass(frozen=True)
class Noted:
    """The files of ``folders`` as they were when noted (by absolute path), less ``skipped``: the wheel's own files
    (and what was compiled from them), relative to the first folder, the environment's own site-packages."""

    folders: tuple[str, ...]
    files: dict[str, Stat]
    skipped: frozenset[str]
    whole: tuple[str, ...] = ()  # folders (among ``folders``) where a file added since counts too

    def _current(self) -> Iterator[tuple[str, Stat]]:
        for index, folder in enumerate(self.folders):
            for path, stat in _walk(folder):
                if index == 0 and self._wheels(os.path.relpath(path, folder).replace(os.sep, "/")):
                    continue
                yield path, stat

    def _wheels(self, relative: str) -> bool:
        return relative in self.skipped or _compiled_of(relative) in self.skipped

    def differs(self, read_from: Iterable[str] = ()) -> str:
        """Why the files are not as noted ('' where they are): files changed or removed since, or a folder in
        ``read_from`` (the folders a process took its imports from) that none of the noted ones holds."""
        now = dict(self._current())
        changed = sorted(path for path, stat in self.files.items() if now.get(path) != stat)
        added = sorted(path for path in now if path not in self.files and any(_inside(path, folder) for folder in self.whole))
        outside = [folder for folder in read_from
                   if not any(_inside(os.path.realpath(folder), noted) for noted in self.folders)]
        parts = []
        if changed:
            removed = sum(path not in now for path in changed)
            shown = ", ".join(f"{path} ({'removed' if path not in now else 'changed'})" for path in changed[:NAMED])
            more = f" and {len(changed) - NAMED} more" if len(changed) > NAMED else ""
            parts.append(f"{len(changed)} of the environment's files not the wheel's were changed or removed after it was "
                         f"built ({removed} removed): {shown}{more}")
        if added:
            more = f" and {len(added) - NAMED} more" if len(added) > NAMED else ""
            parts.append(f"{len(added)} files were added to the gate's own code it ran from: {', '.join(added[:NAMED])}{more}")
        if outside:
            parts.append(f"it imported from folders the gate had not noted ({', '.join(outside[:NAMED])}), named by a "
                         f".pth file written after the environment was built")
        return "; ".join(parts)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def site_folders(location: Path, torch_from: Path | None = None) -> list[str]:
    """The environment's site-packages (a POSIX or a Windows layout), then the one ``--torch-from`` names."""
    found = [*sorted(location.glob("lib/python3*/site-packages")), *sorted(location.glob("Lib/site-packages"))]
    if torch_from is not None:
        found.append(torch_from)
    folders: list[str] = []
    for folder in found:
        real = os.path.realpath(folder)
        if real not in folders:
            folders.append(real)
    return folders


def note(folders: list[str], wheels_own: frozenset[str], whole: Iterable[str] = ()) -> Noted:
    """The files of ``folders`` and ``whole`` now, less the wheel's own (``wheels_own``: where its files land, relative
    to site-packages; ``smoke.environment.reference.installed_files``); in ``whole``, a file added later counts too."""
    whole = tuple(os.path.realpath(folder) for folder in whole)
    noted = Noted((*folders, *whole), {}, wheels_own, whole)
    return Noted(noted.folders, dict(noted._current()), wheels_own, whole)
