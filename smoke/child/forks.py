"""A fork of the child that does one piece of work in a process of its own (issue 35).

The negative control and the extension modules' joint import need a process of their own (a crash or a second
registration must end only it), not a fresh interpreter importing torch and the runtime again: a fork of the child,
made right after its imports and before any export, device or thread pool, costs only the fork. Whatever a fork does
ends with it.

A fork's output goes to its log; its fd 0 is its own pipe (``send``) or /dev/null, never the child's stdin, where the
parent's answers come. ``Forked`` answers ``subprocess.Popen``'s calls, so ``smoke.proc.end`` ends it too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from smoke import proc


class Forked:
    """A fork made by ``fork``: its pid, the pipe to its fd 0, its log."""

    def __init__(self, pid: int, pipe: int | None, log: Path) -> None:
        self.pid, self._pipe, self.log = pid, pipe, log
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"fork {self.pid}", timeout or 0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send(self, text: str) -> None:
        """Write ``text`` to the fork's fd 0 and close it (the fork reads to its end)."""
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.write(self._pipe, text.encode())
            os.close(self._pipe)
            self._pipe = None

    def communicate(self, text: str = "", timeout: float | None = None) -> tuple[str, str]:
        """As ``Popen.communicate``: ``text`` sent, the fork waited for; stdout is its log's tail, stderr too."""
        self.send(text)
        self.wait(timeout)
        said = proc.file_tail(self.log)
        return said, said


class Started:
    """A process of its own doing what a fork would (``smoke.child.extensions.start_together``), its output to ``log``:
    it answers what a ``Forked`` answers where the child reads one (``poll``, ``kill``, ``wait``, ``log``)."""

    def __init__(self, process: subprocess.Popen, log: Path) -> None:
        self.process, self.log = process, log

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def poll(self) -> int | None:
        return self.process.poll()

    def kill(self) -> None:
        self.process.kill()

    def wait(self, timeout: float | None = None) -> int:
        return self.process.wait(timeout)


# What cuDeviceGetCount answers before cuInit (CUDA's driver API, cuda.h: CUDA_ERROR_NOT_INITIALIZED).
CUDA_ERROR_NOT_INITIALIZED = 3


def device_initialised() -> bool:
    """Whether this process has initialised CUDA's driver.

    A fork of a process that has cannot use the device, so its verdict would be the fork's, not the wheel's; the child
    forks only while this is False. Asking initialises nothing: the driver is looked up only if already loaded
    (RTLD_NOLOAD), and ``cuDeviceGetCount`` answers CUDA_ERROR_NOT_INITIALIZED until ``cuInit`` ran."""
    import ctypes

    try:
        driver = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except (OSError, AttributeError):  # not loaded (or no RTLD_NOLOAD on this system: no CUDA row runs there)
        return False
    count = ctypes.c_int()
    return driver.cuDeviceGetCount(ctypes.byref(count)) != CUDA_ERROR_NOT_INITIALIZED


def fork(work: Callable[[], int], log: Path, pipe: bool = False) -> Forked:
    """Run ``work`` in a fork of this process, its output to ``log``; with ``pipe``, its fd 0 a pipe ``send`` writes to
    (else /dev/null). The fork's exit code is what ``work`` returns, 1 where it raised (said in the log)."""
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe() if pipe else (os.open(os.devnull, os.O_RDONLY), None)
    pid = os.fork()
    if pid == 0:  # the fork: never returns
        code = 1
        try:
            if write is not None:
                os.close(write)
            os.dup2(read, 0)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the fork's own fd 0, read by ``work``
            code = work()
        except BaseException as exc:  # noqa: BLE001 - said in the log, then the fork ends
            with contextlib.suppress(OSError):
                os.write(2, f"\n{type(exc).__name__}: {exc}\n".encode())
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    os.close(read)
    return Forked(pid, write, log)
