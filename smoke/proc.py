"""Every process the gate starts goes through here: what it was for, its time limit, its output's tail.

- ``run``: a command run to its end with its output captured. A command that cannot start or runs
  past its time limit raises the caller's error class (a ``GateError``: one ``ERROR`` line at the
  edge) naming what it was for; with ``check=True`` so does a non-zero exit, with the output's tail.
- ``start``: a process that runs beside the gate (the child, the negative control's process, the
  parallel export), optionally as the leader of a process group of its own so that
  ``end_group`` ends it and everything it started.
- ``tail`` and ``file_tail``: the last lines of an output, the one way the gate quotes one.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import IO, Mapping, Sequence

from smoke.errors import GateError

TAIL_LINES = 3


def tail(text: str, lines: int = TAIL_LINES, joiner: str = " | ") -> str:
    """The last ``lines`` non-empty lines of ``text``, joined on one line (or with ``joiner``)."""
    return joiner.join([line for line in text.strip().splitlines() if line.strip()][-lines:])


def file_tail(path: Path, lines: int = TAIL_LINES) -> str:
    return tail(path.read_text(errors="replace"), lines) if path.exists() else ""


def run(cmd: Sequence[str | os.PathLike], *, what: str, error: type[GateError] = GateError, timeout: float | None = None,
        env: Mapping[str, str] | None = None, cwd: Path | None = None, check: bool = True,
        tail_lines: int = TAIL_LINES, joiner: str = " | ", fix: str = "") -> subprocess.CompletedProcess:
    """Run ``cmd`` to its end, output captured as text. ``what`` says what it was for ("building the
    environment"); ``fix`` (if given) ends each error's message with what to do."""
    argv = [str(part) for part in cmd]
    end = f"; {fix}" if fix else ""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=dict(env) if env is not None else None, cwd=cwd)
    except OSError as exc:
        raise error(f"{what} failed: cannot run {argv[0]!r} ({exc}){end}") from exc
    except subprocess.TimeoutExpired as exc:
        raise error(f"{what} failed: {argv[0]!r} ran past its {timeout:g} s limit and was ended{end}") from exc
    if check and proc.returncode != 0:
        between = "\n" if "\n" in joiner else ": "  # a multi-line tail starts on a line of its own
        raise error(f"{what} failed (exit {proc.returncode}): {' '.join(argv)}"
                    f"{between}{tail(proc.stdout + proc.stderr, tail_lines, joiner)}{end}")
    return proc


def start(cmd: Sequence[str | os.PathLike], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
          stdin: int | None = None, stdout: int | IO | None = None, stderr: int | IO | None = None,
          text: bool = False, own_group: bool = False) -> subprocess.Popen:
    """Start a process beside the gate; ``own_group``: as the leader of a new process group (``end_group``)."""
    return subprocess.Popen([str(part) for part in cmd], env=dict(env) if env is not None else None, cwd=cwd,
                            stdin=stdin, stdout=stdout, stderr=stderr, text=text, start_new_session=own_group)


def end(proc: subprocess.Popen | None) -> None:
    """Kill a process of the gate's own that is still running, and reap it."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def end_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """End a process group started with ``own_group`` (it and every process it started): SIGTERM,
    then SIGKILL after ``grace`` seconds, and SIGKILL to the group in any case once the leader is gone."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
