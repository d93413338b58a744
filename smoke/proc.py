"""Every process the gate starts goes through here: what it was for, its time limit, its output's tail.

- ``run``: a command run to its end with its output captured. A command that cannot start or runs
  past its time limit raises the caller's error class (a ``GateError``: one ``ERROR`` line at the
  edge) naming what it was for; with ``check=True`` so does a non-zero exit, with the output's tail.
  Its output goes to temporary files, of which the last ``CAPTURE_BYTES`` are kept: a command that
  prints gigabytes does not grow the gate.
- ``start``: a process that runs beside the gate (the child, the negative control's process, the
  parallel export), optionally as the leader of a process group of its own so that
  ``end_group`` ends it and everything it started.
- ``tail`` and ``file_tail``: the last lines of an output, the one way the gate quotes one; a file's
  tail is read from its last ``TAIL_BYTES`` (by seeking, never the whole file) and a line longer
  than ``LINE_CHARS`` is cut.

Everything a process started with ``own_group`` starts is ended with it, even what left its group
or session (``setsid``, a double-forked daemon): the gate makes itself a child subreaper (Linux's
``PR_SET_CHILD_SUBREAPER``, so that orphans re-parent to it rather than to init), marks the tree
with a token in the environment (``TREE_VARIABLE``; its descendants inherit it) and ``end_group``
ends, besides the group, every descendant of the leader and every process carrying the token
(read from ``/proc``), and every process that re-parented to the gate while it ran (an orphan of the tree,
even one that left the group, the session and the token behind: a double-forked daemon with an empty
environment); then reaps those.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import tempfile
import time
import uuid
import weakref
from pathlib import Path
from typing import IO, Mapping, Protocol, Sequence

from smoke.errors import GateError

TAIL_LINES = 3
TAIL_BYTES = 64 * 1024  # the window a file's tail is read from
LINE_CHARS = 400  # a quoted line longer than this is cut
CAPTURE_BYTES = 16 * 1024 * 1024  # what ``run`` keeps of a command's stdout, and of its stderr: the end
TREE_VARIABLE = "SMOKE_GATE_TREE"  # tokens of the gate's process trees this process belongs to
PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else f"{line[:LINE_CHARS]}... ({len(line)} chars)"


def tail(text: str, lines: int = TAIL_LINES, joiner: str = " | ") -> str:
    """The last ``lines`` non-empty lines of ``text``, joined on one line (or with ``joiner``); a line
    longer than ``LINE_CHARS`` is cut."""
    return joiner.join([_cut(line) for line in text.strip().splitlines() if line.strip()][-lines:])


def read_end(handle: IO[bytes], limit: int) -> tuple[bytes, bool]:
    """The last ``limit`` bytes of an open binary file, read by seeking; and whether that cut anything."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, size - limit))
    return handle.read(limit), size > limit


def file_tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last lines of a log the gate wrote, read from its last ``TAIL_BYTES`` only."""
    try:
        with path.open("rb") as handle:
            data, cut = read_end(handle, TAIL_BYTES)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"(cannot read {path.name}: {exc.strerror or exc})"
    return tail(("..." if cut else "") + data.decode(errors="replace"), lines)


def run(cmd: Sequence[str | os.PathLike], *, what: str, error: type[Exception] = GateError, timeout: float | None = None,
        env: Mapping[str, str] | None = None, cwd: Path | None = None, check: bool = True,
        tail_lines: int = TAIL_LINES, joiner: str = " | ", fix: str = "") -> subprocess.CompletedProcess:
    """Run ``cmd`` to its end, output captured as text (its last ``CAPTURE_BYTES`` of each stream).
    ``what`` says what it was for ("building the environment"); ``fix`` (if given) ends each
    error's message with what to do. At its time limit, on an interrupt, and when it exits, what it
    started and left running is ended with it."""
    argv = [str(part) for part in cmd]
    end = f"; {fix}" if fix else ""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = start(argv, env=env, cwd=cwd, stdout=out, stderr=err, own_group=True)
        except OSError as exc:
            raise error(f"{what} failed: cannot run {argv[0]!r} ({exc}){end}") from exc
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise error(f"{what} failed: {argv[0]!r} ran past its {timeout:g} s limit and was ended{end}") from exc
        finally:
            end_group(process, grace=0)  # an interrupt, or what it left running
        stdout, stderr = (_captured(handle) for handle in (out, err))
    ran = subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)
    if check and ran.returncode != 0:
        between = "\n" if "\n" in joiner else ": "  # a multi-line tail starts on a line of its own
        raise error(f"{what} failed (exit {ran.returncode}): {' '.join(argv)}"
                    f"{between}{tail(ran.stdout + ran.stderr, tail_lines, joiner)}{end}")
    return ran


def _captured(handle: IO[bytes]) -> str:
    data, cut = read_end(handle, CAPTURE_BYTES)
    return ("..." if cut else "") + data.decode(errors="replace")


def start(cmd: Sequence[str | os.PathLike], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
          stdin: int | None = None, stdout: int | IO | None = None, stderr: int | IO | None = None,
          text: bool = False, own_group: bool = False, background: bool = False) -> subprocess.Popen:
    """Start a process beside the gate; ``own_group``: as the leader of a new process group (``end_group``),
    its tree marked so that ``end_group`` finds what left the group. ``background``: work beside the row's own
    critical path (the child's imports and exports), run at ``BACKGROUND_NICE`` (it and what it starts) so that it takes
    the cores the child leaves, not the child's: the same work, done in the time the child does not use."""
    token = None
    if own_group:
        subreaper()
        token = uuid.uuid4().hex
        env = dict(os.environ if env is None else env)
        env[TREE_VARIABLE] = " ".join(filter(None, (env.get(TREE_VARIABLE, ""), token)))
    before = set(_children(os.getpid())) if own_group else set()
    process = subprocess.Popen([str(part) for part in cmd], env=dict(env) if env is not None else None, cwd=cwd,
                               stdin=stdin, stdout=stdout, stderr=stderr, text=text, start_new_session=own_group,
                               preexec_fn=_dies_with_the_gate() if own_group else None)
    if background and hasattr(os, "setpriority"):  # POSIX
        with contextlib.suppress(OSError):  # before it has started anything: an interpreter takes longer than this to start
            os.setpriority(os.PRIO_PROCESS, process.pid, min(os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICE, 19))
    process.gate_tree = token  # type: ignore[attr-defined]
    process.gate_before = before  # type: ignore[attr-defined]  # the gate's children before it: not its orphans
    _STARTED[process.pid] = process
    return process


BACKGROUND_NICE = 10  # a background process's niceness over its starter's (``start``): a tenth of the CPU weight

# Every process ``start`` started, by pid: the gate's own children, never taken for an orphan while they have not
# ended (an ended one's pid, once reaped, may be another process's).
_STARTED: "weakref.WeakValueDictionary[int, subprocess.Popen]" = weakref.WeakValueDictionary()


def orphans(proc: subprocess.Popen) -> set[int]:
    """The processes that became the gate's children while ``proc`` ran without being started by it: orphans of
    ``proc``'s tree re-parented to the gate, its subreaper, whatever group, session or environment they took."""
    before = getattr(proc, "gate_before", None)
    if before is None:
        return set()
    ours = {pid for pid, started in list(_STARTED.items()) if started.returncode is None}
    return {pid for pid in _children(os.getpid()) if pid not in before and pid not in ours and pid != proc.pid}


class Endable(Protocol):
    """A process ``end`` can end: a ``subprocess.Popen``, or a fork that answers the same calls (``smoke.child.forks``)."""

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def end(proc: "Endable | None") -> None:
    """Kill a process of the gate's own that is still running, and reap it."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def end_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """End a process started with ``own_group`` and everything it started (its group, its
    descendants, whatever carries its tree's token, setsid or not): SIGTERM, then SIGKILL after
    ``grace`` seconds, and SIGKILL to all of them in any case once the leader is gone; then reap."""
    token = getattr(proc, "gate_tree", None)
    seen = _signal_tree(proc, token, signal.SIGTERM, set())
    if proc.poll() is None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    deadline = time.monotonic() + 5
    while True:  # again until none is left: one may have forked while we signalled
        alive = _signal_tree(proc, token, signal.SIGKILL, seen)
        seen |= alive
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    proc.wait()
    _reap(seen - {proc.pid})


PR_SET_PDEATHSIG = 1


def _dies_with_the_gate():
    """For a process in a group of its own: SIGKILL when the gate dies, even by SIGKILL (which no
    handler of the gate's sees), so a killed run leaves no pip or child writing into its folders
    after their lock is gone. Linux; elsewhere nothing. (The gate has no threads: preexec_fn is safe.)"""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    gate = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != gate:  # the gate died before the line above took hold
            os._exit(128 + signal.SIGKILL)
    return preexec


def subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux): an orphan re-parents to it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _signal_tree(proc: subprocess.Popen, token: str | None, signum: int, seen: set[int]) -> set[int]:
    """Send ``signum`` to the group and every live member of the tree; the members signalled. The
    tree is read first: a member the group's signal ends re-parents its children out of it; ``seen``,
    the members signalled before, stay members (one that left the tree when its parent died)."""
    members = tree((seen - {proc.pid}) | ({proc.pid} if proc.returncode is None else set()) | orphans(proc), token)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)
    return members


def tree(roots: set[int], token: str | None) -> set[int]:
    """The live (not zombie) processes of a tree: ``roots`` and their descendants, every process whose
    environment carries ``token`` and its descendants (empty where there is no ``/proc``)."""
    roots = set(roots)
    if token:
        roots |= {pid for pid in _pids() if token in _tokens(pid)}
    found: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in found or pid == os.getpid():
            continue
        found.add(pid)
        todo.extend(_children(pid))
    return {pid for pid in found if _state(pid) not in ("Z", "X", None)}


def _pids() -> list[int]:
    try:
        return [int(entry.name) for entry in os.scandir(_PROC) if entry.name.isdigit()]
    except OSError:
        return []


def _tokens(pid: int) -> list[str]:
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return []
    prefix = TREE_VARIABLE.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix):].decode(errors="replace").split()
    return []


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = list(os.scandir(_PROC / str(pid) / "task"))
    except OSError:
        return found
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            found += [int(part) for part in (Path(task.path) / "children").read_text().split()]
    return found


def _stat(pid: int) -> list[str] | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()  # after "pid (comm)": state, ppid, ...


def _state(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[0] if fields else None


def _reap(pids: set[int]) -> None:
    """Reap the members that re-parented to us (we are their subreaper), waiting briefly for each."""
    deadline = time.monotonic() + 2
    for pid in pids:
        fields = _stat(pid)
        if not fields or int(fields[1]) != os.getpid():
            continue  # gone already, or not ours to reap
        while True:
            try:
                done, _status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.01)
