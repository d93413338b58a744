"""Check results as data: what each check decided, with its measured numbers."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Iterable


class Status(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome. ``measured`` holds only numbers and names read in this run."""

    name: str
    status: Status
    reason: str
    measured: dict[str, Any] = field(default_factory=dict)
    seconds: float | None = None  # how long the check took, where it was timed

    def with_seconds(self, seconds: float) -> "CheckResult":
        return dataclasses.replace(self, seconds=round(seconds, 3))

    def __bool__(self) -> bool:
        return self.status is not Status.FAIL

    def line(self) -> str:
        return f"{self.status.name} {self.name}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status.value, "reason": self.reason, "measured": self.measured,
                "seconds": self.seconds}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> "CheckResult":
        """Rebuild a result from the child's record; a malformed one raises ValueError."""
        try:
            return cls(
                name=str(record["name"]),
                status=Status(record["status"]),
                reason=str(record["reason"]),
                measured=dict(record.get("measured") or {}),
                seconds=None if record.get("seconds") is None else float(record["seconds"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a check record: {record!r} ({exc})") from exc


def passed(name: str, reason: str, **measured: Any) -> CheckResult:
    return CheckResult(name, Status.PASS, reason, measured)


def failed(name: str, reason: str, **measured: Any) -> CheckResult:
    return CheckResult(name, Status.FAIL, reason, measured)


def skipped(name: str, reason: str, **measured: Any) -> CheckResult:
    return CheckResult(name, Status.SKIP, reason, measured)


def counts(results: Iterable[CheckResult]) -> dict[Status, int]:
    tally = {status: 0 for status in Status}
    for result in results:
        tally[result.status] += 1
    return tally


def summary_line(results: Iterable[CheckResult]) -> str:
    tally = counts(results)
    return f"{tally[Status.PASS]} passed, {tally[Status.FAIL]} failed, {tally[Status.SKIP]} skipped"


def all_passed(results: Iterable[CheckResult]) -> bool:
    """The verdict: nothing failed. Skips do not fail a row, but they are printed."""
    return all(results)
