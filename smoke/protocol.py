"""The parent-child protocol: each line the child writes to its record, and each answer the parent writes on its stdin.

The child writes one JSON object a line (``smoke.record.Recorder``); the parent follows the file
(``smoke.environment.follow``) and answers each ``Ask`` with one JSON line. Every message is a frozen dataclass here,
encoded by ``encode`` and read back by ``decode``; both sides use nothing else. Stdlib only: the child imports it
inside the wheel's environment. Each line carries ``"v": VERSION``: another version is refused (``ProtocolError``),
so a child of another gate is not read as this one's; a line without ``"v"`` is read as this version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from smoke.results import CheckResult

VERSION = 1


class ProtocolError(ValueError):
    """A line that is not a message of this protocol (not JSON, not an object, no known kind, another version).
    ``quote_line``: the line itself says best what is wrong; else the error's text (a record of a known kind whose
    fields cannot be read)."""

    def __init__(self, text: str, quote_line: bool = True) -> None:
        super().__init__(text)
        self.quote_line = quote_line


@dataclass(frozen=True)
class Facts:
    """The versions of executorch, torch and Python, and the device."""
    data: dict[str, Any]


@dataclass(frozen=True)
class Probe:
    """``smoke.child.probe.probe()``, for the parent's environment checks."""
    data: dict[str, Any]


@dataclass(frozen=True)
class Phase:
    name: str
    event: Literal["start", "end"]
    seconds: float | None = None  # an end's


@dataclass(frozen=True)
class Check:
    result: CheckResult


@dataclass(frozen=True)
class Log:
    """A traceback, for the log only."""
    text: str


@dataclass(frozen=True)
class Ask:
    """A question only the parent's readers can answer (``smoke.child.ask``); the answer is one line on stdin."""
    question: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class End:
    """The last line: the child finished. ``token`` is this run's, given on its stdin."""
    token: str


Message = Union[Facts, Probe, Phase, Check, Log, Ask, End]
_KINDS: dict[type, str] = {Facts: "facts", Probe: "probe", Phase: "phase", Check: "check", Log: "log", Ask: "ask",
                           End: "end"}


def encode(message: Message) -> str:
    """The message as one JSON line (no newline), tagged with its kind and this protocol's version."""
    head: dict[str, Any] = {"kind": _KINDS[type(message)], "v": VERSION}
    if isinstance(message, (Facts, Probe)):
        body = message.data
    elif isinstance(message, Phase):
        body = {"name": message.name, "event": message.event}
        if message.seconds is not None:
            body["seconds"] = message.seconds
    elif isinstance(message, Check):
        body = message.result.to_json()
    elif isinstance(message, Log):
        body = {"text": message.text}
    elif isinstance(message, Ask):
        body = {"question": message.question, **message.data}
    else:
        body = {"token": message.token}
    return json.dumps({**body, **head}, default=str)


def decode(line: str) -> Message:
    """The message a line holds; ``ProtocolError`` naming what is wrong where it holds none."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise ProtocolError(f"not an object but {type(record).__name__}")
    version = record.pop("v", VERSION)
    if version != VERSION:
        raise ProtocolError(f"protocol version {version!r}, where this gate reads {VERSION}")
    kind = record.pop("kind", None)
    try:
        if kind in ("facts", "probe"):
            return (Facts if kind == "facts" else Probe)(record)
        if kind == "phase":
            event = record.get("event")
            seconds = record.get("seconds")
            return Phase(str(record.get("name")), "start" if event == "start" else "end",
                         float(seconds) if isinstance(seconds, (int, float)) else None)
        if kind == "check":
            return Check(CheckResult.from_json(record))
        if kind == "log":
            return Log(str(record.get("text", "")))
        if kind == "ask":
            return Ask(str(record.pop("question", None)), record)
        if kind == "end":
            return End(str(record.get("token", "")))
    except (ValueError, OverflowError, TypeError, KeyError) as exc:  # a check's fields wrong, a number past float
        raise ProtocolError(str(exc), quote_line=False) from None
    raise ProtocolError(f"no such kind: {kind!r}")


def encode_answer(answer: dict[str, Any]) -> str:
    """The parent's answer to an ``Ask``, one JSON line (no newline)."""
    return json.dumps(answer, default=str)


def decode_answer(line: str) -> dict[str, Any]:
    try:
        answer = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"the answer is not JSON: {exc}") from None
    if not isinstance(answer, dict):
        raise ProtocolError("the answer is not an object")
    return answer
