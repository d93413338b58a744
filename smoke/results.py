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
    WARN = "warn"  # a finding that does not stop the wheel working where its tags say (docs/checks.md: severities)
    WAIVED = "waived"  # a FAIL or WARN a maintainer accepted, with a reason (the policy's [[waive]], docs/policy.md)


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome. ``measured`` holds only numbers and names read in this run."""

    name: str
    status: Status
    reason: str
    measured: dict[str, Any] = field(default_factory=dict)
    seconds: float | None = None  # how long the check took, where it was timed
    waiver: dict[str, Any] | None = None  # the waiver that made it WAIVED: check, match, reason, until, and what it was

    def with_seconds(self, seconds: float) -> "CheckResult":
        return dataclasses.replace(self, seconds=round(seconds, 3))

    def __bool__(self) -> bool:
        return self.status is not Status.FAIL

    @property
    def told(self) -> str:
        """The reason, and the waiver's where one waived it."""
        return self.reason if self.waiver is None else f"{self.reason} (waived: {self.waiver.get('reason')})"

    def line(self) -> str:
        return f"{self.status.name} {self.name}: {self.told}"

    def to_json(self) -> dict[str, Any]:
        record = {"name": self.name, "status": self.status.value, "reason": self.reason, "measured": self.measured,
                  "seconds": self.seconds}
        if self.waiver is not None:
            record["waiver"] = self.waiver
        return record

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
                waiver=None if record.get("waiver") is None else dict(record["waiver"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a check record: {record!r} ({exc})") from exc


def passed(name: str, reason: str, **measured: Any) -> CheckResult:
    return CheckResult(name, Status.PASS, reason, measured)


def failed(name: str, reason: str, **measured: Any) -> CheckResult:
    return CheckResult(name, Status.FAIL, reason, measured)


def skipped(name: str, reason: str, **measured: Any) -> CheckResult:
    return CheckResult(name, Status.SKIP, reason, measured)


def warned(name: str, reason: str, **measured: Any) -> CheckResult:
    return CheckResult(name, Status.WARN, reason, measured)


def counts(results: Iterable[CheckResult]) -> dict[Status, int]:
    tally = {status: 0 for status in Status}
    for result in results:
        tally[result.status] += 1
    return tally


def summary_line(results: Iterable[CheckResult]) -> str:
    """'30 passed, 3 failed, 1 skipped', and the warnings and waived findings where there are any."""
    tally = counts(results)
    also = "".join(f", {tally[status]} {word}" for status, word in ((Status.WARN, "warned"), (Status.WAIVED, "waived"))
                   if tally[status])
    return f"{tally[Status.PASS]} passed, {tally[Status.FAIL]} failed, {tally[Status.SKIP]} skipped{also}"


def all_passed(results: Iterable[CheckResult], strict: bool = False) -> bool:
    """The verdict: nothing failed (and, strict, nothing warned). Skips, warnings and waived findings do not fail a
    row, but they are printed."""
    return all(r.status is not Status.FAIL and not (strict and r.status is Status.WARN) for r in results)
