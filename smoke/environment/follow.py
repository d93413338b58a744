"""The parent's side of the child's record (``smoke.record``): start the child in a process group of
its own, follow its record file as it grows, end it on a fail-fast stop, at its time limit or when
the gate is interrupted, and judge a child that crashed, hung or spoke garbage.

The gate stays bounded whatever the child writes: the record is read in ``CHUNK``-byte chunks, a line over
``RECORD_LINE_BYTES`` is dropped unread, and a record past ``RECORD_BYTES`` or a log past ``LOG_BYTES`` ends the
child, judged a FAIL. The caps are thousands of times what a real child writes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from smoke import paths, proc, protocol
from smoke.console import say
from smoke.results import CheckResult, failed
from smoke.stages import CHILD_PROCESS

MIB = 1024 * 1024
CHUNK = 64 * 1024  # read from the record at a time
RECORD_LINE_BYTES = 4 * MIB  # a record line longer than this is not read
RECORD_BYTES = 16 * MIB  # a record past this ends the child
LOG_BYTES = 256 * MIB  # an output past this ends the child
BAD_KEPT = 1  # the bad lines quoted (the rest are counted)
TOKEN_BYTES = 16  # the run's token, given to the child on its stdin
POLL_S = 0.02  # between reads of the record: the child waits this long at most for an answer to its question
PROGRESS_S = 15.0  # a phase of the child's running longer says so this often (``_progress``)


@dataclass
class ChildOutcome:
    facts: dict[str, Any]
    finished: bool
    returncode: int | None
    timed_out: bool
    last_phase: str | None
    bad_lines: list[str]
    probe: dict[str, Any] | None = None
    stopped: bool = False  # the parent ended it (fail-fast on a check it judged)
    bad_count: int = 0  # lines that are not records (``bad_lines`` quotes the first)
    overflow: str | None = None  # what the child wrote past a cap (it was ended)
    token: str = ""  # this run's: given to the child on its stdin; its end record must carry it
    phase_since: float | None = None  # when ``last_phase`` began (the parent's clock), for the progress lines
    progress_said: int = 0  # progress lines printed for it

    def bad(self, text: str) -> None:
        self.bad_count += 1
        if len(self.bad_lines) < BAD_KEPT:
            self.bad_lines.append(text[:200])


class StopChild(Exception):
    """Raised by a handler of ``ChildEvents`` to end the child now (fail-fast)."""


class RefusedRecord(Exception):
    """Raised by ``ChildEvents.check`` for a record the child may not write: counted as a line that is not a check
    record (``child process`` FAILs, quoting why)."""


class ChildEvents:
    """What the parent does with the child's messages (``smoke.protocol``), one object: a check reported, a phase
    ended, the environment probed, a question asked, the child started. Each default does nothing (a question gets an
    error); raising ``StopChild`` in one ends the child."""

    def check(self, result: CheckResult) -> None:
        pass

    def phase(self, name: str, seconds: float | None) -> None:
        pass

    def probe(self, facts: dict[str, Any]) -> None:
        pass

    def ask(self, question: protocol.Ask) -> dict[str, Any]:
        return {"error": f"no answer to {question.question!r}"}

    def started(self) -> None:
        """Once the child has started, before its record is read: the parent's own work that overlaps its start."""


class _ChecksOnly(ChildEvents):
    """A callable given for the checks alone (the tests' children, which report checks and nothing else)."""

    def __init__(self, on_check: Callable[[CheckResult], object]) -> None:
        self.on_check = on_check

    def check(self, result: CheckResult) -> None:
        self.on_check(result)


def _events(events: ChildEvents | Callable[[CheckResult], object]) -> ChildEvents:
    return events if isinstance(events, ChildEvents) else _ChecksOnly(events)


def _parse_line(line: str, outcome: ChildOutcome, events: ChildEvents | Callable[[CheckResult], object]) -> dict | None:
    """Act on one record line; the answer to the child's question, where it asked one (``smoke.child.ask``)."""
    events = _events(events)
    try:
        message = protocol.decode(line)
    except protocol.ProtocolError as exc:
        outcome.bad(line if exc.quote_line else str(exc))
        return None
    if isinstance(message, protocol.Check):
        try:
            events.check(message.result)
        except RefusedRecord as exc:
            outcome.bad(str(exc))
    elif isinstance(message, protocol.Phase):
        if message.event == "start":
            outcome.last_phase = message.name
            outcome.phase_since, outcome.progress_said = time.monotonic(), 0
            say(f"  ... {message.name}")
        else:
            outcome.last_phase = outcome.phase_since = None
            say(f"  ... {message.name}: {message.seconds} s")
            events.phase(message.name, message.seconds)
    elif isinstance(message, protocol.Facts):
        outcome.facts = message.data
    elif isinstance(message, protocol.Probe):
        outcome.probe = message.data
        events.probe(outcome.probe)
    elif isinstance(message, protocol.Ask):
        return events.ask(message)
    elif isinstance(message, protocol.End):
        if outcome.token and message.token == outcome.token:
            outcome.finished = True
        else:  # written by what does not hold this run's token: code the wheel ran at start-up, say
            outcome.bad(f"an end record without this run's token: {line[:200]}")
    return None


def run_child(cmd: list[str], record: Path, log: Path, timeout: float, env: dict[str, str] | None,
              events: ChildEvents | Callable[[CheckResult], object], cwd: Path | None = None) -> ChildOutcome:
    """Start the child and follow its record until it exits or times out, then end what it left running; its messages
    go to ``events``, its questions are answered on stdin.

    Only an end record with this run's token counts (its stdin's first line, read before anything of the environment
    runs: ``smoke.child.__main__``), not one a ``.pth`` file wrote."""
    events = _events(events)
    outcome = ChildOutcome({}, False, None, False, None, [], token=secrets.token_hex(TOKEN_BYTES))
    record.touch()
    with log.open("wb") as log_handle, record.open("rb") as reader:
        child = proc.start(cmd, stdin=subprocess.PIPE, stdout=log_handle, stderr=subprocess.STDOUT, env=env, cwd=cwd or paths.HOME,
                           own_group=True)
        _answer_line(child, outcome.token)
        try:
            try:
                events.started()
            except StopChild:
                outcome.stopped = True
            if not outcome.stopped:
                _follow(child, reader, log_handle, outcome, timeout, events)
        finally:  # Ctrl-C, SIGTERM (Interrupted), an error of ours, or its leftovers: nothing outlives us
            proc.end_group(child, grace=0 if child.returncode is not None or outcome.stopped else 5.0)
            if child.stdin is not None:
                with contextlib.suppress(OSError):
                    child.stdin.close()
        outcome.returncode = child.returncode
    return outcome


class _Lines:
    """The record's complete lines as they come, each at most ``RECORD_LINE_BYTES`` (a longer one is
    reported once, as ``None``, and skipped to its end); memory bounded by a chunk and a line."""

    def __init__(self, reader) -> None:
        self.reader = reader
        self.pending = b""
        self.skipping = False  # inside a line already reported too long
        self.total = 0

    def read(self, last: bool):
        while True:
            chunk = self.reader.read(CHUNK)
            if not chunk:
                break
            self.total += len(chunk)
            yield from self._split(chunk)
            if self.total > RECORD_BYTES:
                return
        if last and self.pending.strip() and not self.skipping:
            yield self.pending.decode(errors="replace")
            self.pending = b""

    def _split(self, chunk: bytes):
        data, start = self.pending + chunk, 0
        self.pending = b""
        while (stop := data.find(b"\n", start)) >= 0:
            line, start = data[start:stop], stop + 1
            if self.skipping:
                self.skipping = False  # the end of the long line
            elif len(line) > RECORD_LINE_BYTES:
                yield None
            else:
                yield line.decode(errors="replace")
        if self.skipping:
            return
        if len(data) - start > RECORD_LINE_BYTES:
            self.skipping = True
            yield None
        else:
            self.pending = data[start:]


def _answer(child, answer: dict) -> None:
    """One JSON line on the child's stdin; a child that has gone hears nothing (its end is judged as ever)."""
    _answer_line(child, protocol.encode_answer(answer))


def _answer_line(child, text: str) -> None:
    if child.stdin is None:
        return
    try:
        child.stdin.write((text + "\n").encode())
        child.stdin.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _follow(child, reader, log_handle, outcome: ChildOutcome, timeout: float, events: ChildEvents) -> None:
    """Read the record as it grows until the child exits, is stopped, runs out of time, or writes
    past a cap."""
    deadline = time.monotonic() + timeout
    lines = _Lines(reader)
    while True:
        done = child.poll() is not None
        try:
            for line in lines.read(last=done):
                if line is None:
                    outcome.bad(f"a record line longer than {RECORD_LINE_BYTES // MIB} MiB (not read)")
                elif line.strip() and (answer := _parse_line(line, outcome, events)) is not None:
                    _answer(child, answer)
        except StopChild:
            outcome.stopped = True
            if not done:
                proc.end_group(child, grace=0)
            return
        outcome.overflow = _overflow(lines.total, log_handle)
        if outcome.overflow:  # whether or not it has exited meanwhile: the same verdict every time
            if not done:
                proc.end_group(child, grace=0)
            return
        if done:
            return
        _progress(outcome)
        if time.monotonic() > deadline:
            outcome.timed_out = True
            proc.end_group(child, grace=0)
            return
        time.sleep(POLL_S)


def _progress(outcome: ChildOutcome) -> None:
    """A line every ``PROGRESS_S`` seconds while one of the child's phases runs long (a first export through AOTInductor,
    the import of torch with its CUDA libraries): the run is alive, and where it is."""
    if outcome.last_phase is None or outcome.phase_since is None:
        return
    running = time.monotonic() - outcome.phase_since
    if running >= PROGRESS_S * (outcome.progress_said + 1):
        outcome.progress_said += 1
        say(f"  ... {outcome.last_phase}: still running ({running:.0f} s)")


def _overflow(record_bytes: int, log_handle) -> str | None:
    if record_bytes > RECORD_BYTES:
        return f"its record passed {RECORD_BYTES // MIB} MiB (a real run's is a few kB)"
    if os.fstat(log_handle.fileno()).st_size > LOG_BYTES:
        return f"its output passed {LOG_BYTES // MIB} MiB (a real run's is a few kB)"
    return None


def judge_child(outcome: ChildOutcome, timeout: float, log: Path) -> CheckResult | None:
    """A child that crashed, hung or spoke garbage is a FAIL of its own, with its log's tail."""
    if outcome.stopped:
        return None  # the parent ended it, on a failure it has printed already
    where = f" during {outcome.last_phase!r}" if outcome.last_phase else ""
    tail = proc.file_tail(log)
    if outcome.overflow:
        return failed(CHILD_PROCESS.name, f"ended{where}: {outcome.overflow}; last output: {tail}")
    if outcome.timed_out:
        return failed(CHILD_PROCESS.name, f"killed after the {timeout:g} s time limit{where} (--timeout to change it)")
    if outcome.bad_count:
        return failed(CHILD_PROCESS.name, f"wrote {outcome.bad_count} lines that are not check records, first: {outcome.bad_lines[0]!r}")
    if outcome.returncode and outcome.returncode < 0:
        sig = signal.Signals(-outcome.returncode).name
        if outcome.finished:  # its end record written: the work was done, the process died as it exited
            return failed(CHILD_PROCESS.name, f"ended by {sig} as it exited, after its work was done and recorded (the "
                                              f"checks above stand): a destructor of a library it loaded ends the process "
                                              f"(executorch#22653; see libraries load before torch); last output: {tail}")
        return failed(CHILD_PROCESS.name, f"ended by {sig}{where}; last output: {tail}")
    if not outcome.finished:
        return failed(CHILD_PROCESS.name, f"exited {outcome.returncode}{where} before finishing; last output: {tail}")
    return None
