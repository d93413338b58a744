"""The parent's side of the child's record (``smoke.record``): start the child in a process group of
its own, follow its record file as it grows, end it on a fail-fast stop, at its time limit or when
the gate is interrupted, and judge a child that crashed, hung or spoke garbage.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from smoke import proc
from smoke.console import say
from smoke.results import CheckResult, failed
from smoke.stages import CHILD_PROCESS

REPO = Path(__file__).resolve().parent.parent


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


class StopChild(Exception):
    """Raised by a callback to end the child now (fail-fast)."""


def _parse_line(line: str, outcome: ChildOutcome, on_check: Callable[[CheckResult], None],
                on_phase: Callable[[str, float], None] = lambda name, seconds: None,
                on_probe: Callable[[dict], None] = lambda facts: None) -> None:
    try:
        record = json.loads(line)
        kind = record["kind"]
    except (ValueError, KeyError, TypeError):
        outcome.bad_lines.append(line[:200])
        return
    if kind == "check":
        try:
            result = CheckResult.from_json(record)
        except ValueError as exc:
            outcome.bad_lines.append(str(exc)[:200])
            return
        on_check(result)
    elif kind == "phase":
        if record.get("event") == "start":
            outcome.last_phase = record.get("name")
            say(f"  ... {record.get('name')}")
        else:
            outcome.last_phase = None
            say(f"  ... {record.get('name')}: {record.get('seconds')} s")
            on_phase(str(record.get("name")), record.get("seconds"))
    elif kind == "facts":
        outcome.facts = {k: v for k, v in record.items() if k != "kind"}
    elif kind == "probe":
        outcome.probe = {k: v for k, v in record.items() if k != "kind"}
        on_probe(outcome.probe)
    elif kind == "end":
        outcome.finished = True


def run_child(cmd: list[str], record: Path, log: Path, timeout: float, env: dict[str, str],
              on_check: Callable[[CheckResult], None],
              on_phase: Callable[[str, float], None] = lambda name, seconds: None,
              on_probe: Callable[[dict], None] = lambda facts: None) -> ChildOutcome:
    """Start the child and follow its record file until it exits or its time is up."""
    outcome = ChildOutcome({}, False, None, False, None, [])
    record.touch()
    with log.open("wb") as log_handle, record.open("r", encoding="utf-8") as reader:
        child = proc.start(cmd, stdout=log_handle, stderr=subprocess.STDOUT, env=env, cwd=REPO, own_group=True)
        try:
            _follow(child, reader, outcome, timeout, on_check, on_phase, on_probe)
        except BaseException:  # Ctrl-C, SIGTERM (Interrupted), or an error of ours: the child must not outlive us
            proc.end_group(child)
            raise
        outcome.returncode = child.returncode
    return outcome


def _follow(child, reader, outcome: ChildOutcome, timeout: float, on_check, on_phase, on_probe) -> None:
    """Read the record as it grows until the child exits, is stopped, or runs out of time."""
    deadline = time.monotonic() + timeout
    pending = ""
    while True:
        done = child.poll() is not None
        pending += reader.read()
        *lines, pending = pending.split("\n")
        if done and pending.strip():
            lines.append(pending)
        try:
            for line in lines:
                if line.strip():
                    _parse_line(line, outcome, on_check, on_phase, on_probe)
        except StopChild:
            outcome.stopped = True
            if not done:
                proc.end_group(child, grace=0)
            return
        if done:
            return
        if time.monotonic() > deadline:
            outcome.timed_out = True
            proc.end_group(child, grace=0)
            return
        time.sleep(0.2)


def judge_child(outcome: ChildOutcome, timeout: float, log: Path) -> CheckResult | None:
    """A child that crashed, hung or spoke garbage is a FAIL of its own, with its log's tail."""
    if outcome.stopped:
        return None  # the parent ended it, on a failure it has printed already
    where = f" during {outcome.last_phase!r}" if outcome.last_phase else ""
    tail = proc.file_tail(log)
    if outcome.timed_out:
        return failed(CHILD_PROCESS.name, f"killed after the {timeout:g} s time limit{where} (--timeout to change it)")
    if outcome.bad_lines:
        return failed(CHILD_PROCESS.name, f"wrote {len(outcome.bad_lines)} lines that are not check records, first: {outcome.bad_lines[0]!r}")
    if outcome.returncode and outcome.returncode < 0:
        sig = signal.Signals(-outcome.returncode).name
        return failed(CHILD_PROCESS.name, f"ended by {sig}{where}; last output: {tail}")
    if not outcome.finished:
        return failed(CHILD_PROCESS.name, f"exited {outcome.returncode}{where} before finishing; last output: {tail}")
    return None
