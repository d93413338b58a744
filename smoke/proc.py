"""Every process the gate starts goes through here: what it was for, its time limit, its output's tail.

``run`` runs a command to its end, keeping the last ``CAPTURE_BYTES`` of its output; one that cannot start or runs
past its limit raises the caller's ``GateError``. ``start`` starts a process beside the gate, optionally leading a
process group of its own; ``tail`` and ``file_tail`` quote an output.

Any thread may start processes (``_LOCK``). Everything an ``own_group`` process starts ends with it (``end_group``),
even what left its group: the gate is a child subreaper and marks each tree (``TREE_VARIABLE``). If the gate dies,
even by SIGKILL, its warden (``_Warden``), told by a pipe only the gate holds, ends every tree still registered.
"""
from __future__ import annotations

import contextlib
import ctypes
import io
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import IO, Mapping, Protocol, Sequence, cast

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
    """Start a process beside the gate; ``own_group``: as the leader of a new process group, its tree marked so that
    ``end_group`` finds what left the group. ``background``: work off the child's critical path, run at
    ``BACKGROUND_NICE`` (with what it starts) so that it takes the cores the child leaves, not the child's."""
    token = None
    if own_group:
        subreaper()
        token = uuid.uuid4().hex
        env = dict(os.environ if env is None else env)
        env[TREE_VARIABLE] = " ".join(filter(None, (env.get(TREE_VARIABLE, ""), token)))
    with _LOCK:  # the fork and its registration, as one step to every orphan scan (``orphans``)
        if own_group:
            _Warden.tell(f"+T {token}")  # before the fork: the warden ends it by its token if the gate dies now
        before = set(_children(os.getpid())) if own_group else set()
        process = subprocess.Popen([str(part) for part in cmd], env=dict(env) if env is not None else None, cwd=cwd,
                                   stdin=stdin, stdout=stdout, stderr=stderr, text=text, start_new_session=own_group)
        process.gate_tree = token  # type: ignore[attr-defined]
        process.gate_before = before  # type: ignore[attr-defined]  # the gate's children before it: not its orphans
        _STARTED[process.pid] = process
    if own_group:
        _Warden.tell(f"+G {process.pid}")
    if background:  # before it has started anything: an interpreter takes longer than this to start
        background_priority(process.pid)
    return process


def background_priority(pid: int = 0) -> None:
    """Process ``pid`` (0: this one) niced ``BACKGROUND_NICE`` over this process, where the system has niceness (POSIX)."""
    if hasattr(os, "setpriority"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, pid, min(os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICE, 19))


BACKGROUND_NICE = 10  # a background process's niceness over its starter's (``start``): a tenth of the CPU weight

# Every process ``start`` started, by pid: the gate's own children, never taken for an orphan while they have not
# ended (an ended one's pid, once reaped, may be another process's).
_STARTED: "weakref.WeakValueDictionary[int, subprocess.Popen]" = weakref.WeakValueDictionary()


def orphans(proc: subprocess.Popen) -> set[int]:
    """The processes that became the gate's children while ``proc`` ran without being started by it: orphans of
    ``proc``'s tree re-parented to the gate, its subreaper, whatever group, session or environment they took. Not
    an orphan: a process the gate started (from any thread: ``_LOCK``), nor one carrying another live tree's token."""
    before = getattr(proc, "gate_before", None)
    if before is None:
        return set()
    with _LOCK:
        live = [started for started in list(_STARTED.values()) if started.returncode is None]
        ours = {started.pid for started in live}
        others = {getattr(started, "gate_tree", None) for started in live if started is not proc} - {None}
        found = {pid for pid in _children(os.getpid()) if pid not in before and pid not in ours and pid != proc.pid}
    return {pid for pid in found if not others.intersection(_tokens(pid))}


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
    if token:
        _Warden.tell(f"-G {proc.pid}", f"-T {token}", start=False)


_LOCK = threading.Lock()  # held while a process is forked and registered, and while orphans are looked for

# The warden's program: this module, imported from the folder that holds the gate's package (``_warden_main``).
_WARDEN_CODE = "import sys; sys.path.insert(0, sys.argv[1]); from smoke.proc import _warden_main; _warden_main()"


def _warden_main() -> None:
    """The warden's work: signals that end the gate's group are not its; it reads what the gate tells it until the
    pipe's end (the gate has exited, however), then kills every tree still registered, its group and every process
    carrying its token, three times over (a fork under way at the gate's death is a member by then)."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    groups: set[str] = set()
    tokens: set[str] = set()
    for line in sys.stdin.buffer:
        change, kind, value = line[:1], line[1:2], line[3:].decode(errors="replace").strip()
        held = groups if kind == b"G" else tokens
        if change == b"+":
            held.add(value)
        else:
            held.discard(value)
    for _ in range(3):
        for group in groups:
            with contextlib.suppress(OSError, ValueError):
                os.killpg(int(group), signal.SIGKILL)
        for pid in _pids() if tokens else []:
            if tokens.intersection(_tokens(pid)):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        if not groups and not tokens:
            break
        time.sleep(0.1)


class _Warden:
    """The gate's warden: one process (per gate process; a fork of the gate makes its own) that ends every tree the
    gate still holds when the gate dies, by any signal, SIGKILL included, from whichever thread it started them."""

    process: subprocess.Popen | None = None
    lock = threading.Lock()  # one writer on its pipe at a time

    @classmethod
    def tell(cls, *lines: str, start: bool = True) -> None:
        """Tell the warden of a tree begun (``+G pgid``, ``+T token``; ``start``: the warden started now if need be,
        which ``start`` does under ``_LOCK``) or ended (``-G``, ``-T``)."""
        with cls.lock:
            if start and (cls.process is None or cls.process.poll() is not None):
                cls.process = cls._start()
            if cls.process is None or cls.process.stdin is None:
                return
            with contextlib.suppress(OSError, ValueError):
                cls.process.stdin.write("".join(f"{line}\n" for line in lines).encode())
                cls.process.stdin.flush()

    @staticmethod
    def _start() -> subprocess.Popen | None:
        # Under ``_LOCK`` where ``start`` calls this, so its registration is one step to every orphan scan; a session
        # of its own (a terminal's Ctrl-C and a group's SIGTERM are the gate's to handle) in ``/``, holding no folder.
        try:
            warden = subprocess.Popen([sys.executable, "-I", "-S", "-c", _WARDEN_CODE, str(Path(__file__).resolve().parents[1])],
                                      stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/", start_new_session=True)
        except OSError:
            return None
        _STARTED[warden.pid] = warden
        return warden

    @classmethod
    def forget(cls) -> None:
        """In a fork of the gate: the parent's warden is not this process's; its pipe's end is closed here, so that the
        parent's death is still the warden's to see."""
        if cls.process is not None and cls.process.stdin is not None:
            with contextlib.suppress(OSError, ValueError):  # detached first: the file object never closes the fd again
                cast("io.BufferedWriter", cls.process.stdin).detach().close()
        cls.process, cls.lock = None, threading.Lock()


def _after_fork_in_child() -> None:
    global _LOCK
    _LOCK = threading.Lock()  # another thread may have held it at the fork: it would never be released here
    _Warden.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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
