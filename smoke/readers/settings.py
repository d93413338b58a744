"""The gate's policy for a wheel: what its maintainers ask of it that the wheel file does not say.

Read from ``--policy FILE`` (TOML), else ``[tool.executorch-wheel-gate]`` in the pyproject.toml where the gate runs,
else the defaults (``docs/policy.md``). Keys: ``torch``, ``"declared"`` (a release's default) or ``"user-supplied"``
(a dev, pre-release or local version's: the gate installs the paired torch and nothing fails for it being
undeclared); ``strict = true`` (as ``--strict``); ``[[waive]]`` (``check``, ``match``, ``reason``, ``until``), which
makes a matching FAIL or WARN WAIVED until it expires (``Waivers``).

An unknown key, a wrong value or a file that does not parse is one ``ERROR`` line naming the fix (exit 2).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from smoke.errors import GateError
from smoke.readers.filekind import not_regular
from smoke.readers.wheel import Wheel
from smoke.results import CheckResult, Status

if sys.version_info >= (3, 11):
    import tomllib
else:  # pyproject.toml's dependencies install tomli on Python 3.10
    import tomli as tomllib

TABLE = "executorch-wheel-gate"
# The gate's table named in a TOML file, as a header ([tool.executorch-wheel-gate], [[tool.executorch-wheel-gate.waive]])
# or a dotted key: read from the text where the file does not parse.
_HOLDS_TABLE = re.compile(r"^\s*\[*\s*[\"']?tool[\"']?\s*\.\s*[\"']?executorch-wheel-gate|^\s*tool\s*\.\s*[\"']?executorch-wheel-gate", re.M)
TORCH = ("declared", "user-supplied")
KEYS = {"torch": f"one of {', '.join(map(repr, TORCH))}", "strict": "true or false",
        "waive": "a list of [[waive]] tables: check, reason, and optionally match and until"}
WAIVER_KEYS = ("check", "match", "reason", "until")


class PolicyError(GateError):
    pass


# The most of a policy file the gate reads: docs/examples' policies are under 1 kB; a file of a megabyte is not one.
MAX_POLICY_BYTES = 1 << 20


def _policy_bytes(path: Path, where: str, fix: str) -> bytes:
    """At most ``MAX_POLICY_BYTES`` of a regular file; a FIFO or a device (/dev/zero) is refused before it is read,
    and never opened in a way that waits (issue 48: a FIFO hung the gate, /dev/zero ended in a MemoryError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))  # an OSError is the caller's
    try:
        if (kind := not_regular(os.fstat(fd).st_mode)) is not None:
            raise PolicyError(f"{where} is {kind}, not a TOML file; {fix}")
        data = os.read(fd, MAX_POLICY_BYTES + 1)
        while len(data) <= MAX_POLICY_BYTES and (more := os.read(fd, MAX_POLICY_BYTES + 1 - len(data))):
            data += more
    finally:
        os.close(fd)
    if len(data) > MAX_POLICY_BYTES:
        raise PolicyError(f"{where} is over {MAX_POLICY_BYTES} B, larger than any policy; {fix}")
    return data


def _toml(raw: bytes) -> dict[str, Any]:
    """TOML; nesting deeper than the parser's recursion is refused as not TOML (issue 48: it was a traceback)."""
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except RecursionError:
        raise NotToml("nested too deep") from None


class NotToml(ValueError):
    pass


@dataclass(frozen=True)
class Waiver:
    check: str  # a check's name (a per-model check's name waives both models': "export" waives "export (weighted)")
    reason: str
    match: str | None = None  # text the finding's reason must contain
    until: Version | datetime.date | None = None  # wheels below this version, or through this day

    def names(self, result: CheckResult) -> bool:
        """Whether this waiver is of ``result``'s check."""
        return result.name == self.check or result.name.startswith(f"{self.check} (")

    def covers(self, result: CheckResult, finding: str | None = None) -> bool:
        """Whether this waiver accepts ``finding`` of ``result`` (the whole reason where no finding is named)."""
        return self.names(result) and (self.match is None or self.match in (result.reason if finding is None else finding))

    def expired(self, version: Version, today: datetime.date) -> bool:
        if isinstance(self.until, Version):
            return not version < self.until
        return self.until is not None and today > self.until

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "match": self.match, "reason": self.reason,
                "until": None if self.until is None else str(self.until)}

    def words(self) -> str:
        return f"[[waive]] check = {self.check!r}{f', match = {self.match!r}' if self.match else ''}"


class Waivers:
    """The policy's waivers, applied to each result as it is emitted (``smoke.console.emit``); which matched is kept."""

    def __init__(self, waivers: tuple[Waiver, ...], version: Version, today: datetime.date | None = None) -> None:
        self.waivers, self.version = waivers, version
        self.today = today or datetime.date.today()
        self.used: set[int] = set()

    def apply(self, result: CheckResult) -> CheckResult:
        """``result`` waived where every one of its findings is accepted by a waiver in force (its ``problems``, each
        matched apart: a new finding of a waived check is not waived with the old ones, issue 48); else as it is, saying
        which findings no waiver accepts, or that the waiver of one expired."""
        if result.status not in (Status.FAIL, Status.WARN):
            return result
        problems = result.measured.get("problems")
        findings = ([str(p) for p in problems] if isinstance(problems, list) and problems else [result.reason])
        ours = [(index, waiver) for index, waiver in enumerate(self.waivers) if waiver.names(result)]
        in_force: dict[int, Waiver] = {}  # finding -> the first waiver in force that accepts it
        expired: dict[int, Waiver] = {}  # finding -> an expired waiver that accepts it, where none in force does
        for number, finding in enumerate(findings):
            for index, waiver in ours:
                if not waiver.covers(result, finding if len(findings) > 1 else None):
                    continue
                self.used.add(index)
                if not waiver.expired(self.version, self.today):
                    in_force.setdefault(number, waiver)
                else:
                    expired.setdefault(number, waiver)
        if not in_force and not expired:
            return result
        # Each finding recorded as its own item (the JSON report's measured.findings): what it names, and the waiver that
        # accepts it (in force or expired), or none.
        recorded = [{"finding": finding, "waiver": in_force[n].to_json() if n in in_force else None,
                     "expired_waiver": expired[n].to_json() if n in expired and n not in in_force else None}
                    for n, finding in enumerate(findings)]
        measured = {**result.measured, "findings": recorded}
        if len(in_force) == len(findings):
            waiver = in_force[0]
            return dataclasses.replace(result, status=Status.WAIVED, waiver={**waiver.to_json(), "was": result.status.value},
                                       measured=measured)
        said = result.reason
        stale = [waiver for number, waiver in expired.items() if number not in in_force]
        if stale:
            said += (f" (the waiver of it expired: until {stale[0].until}, and this is executorch {self.version} on "
                     f"{self.today})")
        left = [finding for number, finding in enumerate(findings) if number not in in_force and number not in expired]
        if left:
            shown = "; ".join(left[:3]) + (f" (and {len(left) - 3} more)" if len(left) > 3 else "")
            said += (f" (not waived: {len(left)} of its {len(findings)} findings no waiver accepts: {shown})")
        return dataclasses.replace(result, reason=said, measured=measured)

    def unmatched(self) -> list[Waiver]:
        return [w for i, w in enumerate(self.waivers) if i not in self.used]


@dataclass(frozen=True)
class Policy:
    torch: str  # "declared" or "user-supplied"
    why: str  # where it came from: the file and key, or the default and the version that chose it
    strict: bool = False
    waivers: tuple[Waiver, ...] = ()

    @property
    def user_supplied(self) -> tuple[str, ...]:
        """The requirements the user brings, which the wheel need not declare."""
        return ("torch",) if self.torch == "user-supplied" else ()

    def line(self) -> str:
        also = "; strict: warnings fail" if self.strict else ""
        also += f"; {len(self.waivers)} waiver{'s' if len(self.waivers) != 1 else ''}" if self.waivers else ""
        return f"policy: torch is {self.torch} ({self.why}){also}"

    def to_json(self) -> dict[str, Any]:
        return {"torch": self.torch, "why": self.why, "strict": self.strict, "waive": [w.to_json() for w in self.waivers]}

    def unknown_checks(self, names: set[str]) -> None:
        """A waiver of a check the gate does not have is one ERROR line, naming the checks."""
        for waiver in self.waivers:
            if waiver.check not in names:
                raise PolicyError(f"{waiver.words()}: the gate has no check {waiver.check!r}; the checks are "
                                  f"{', '.join(sorted(names))} (docs/checks.md)")


def read(policy_file: Path | None, folder: Path) -> tuple[dict[str, Any], str | None]:
    """The policy's table and where it was read (None: no policy given, the defaults hold)."""
    if policy_file is not None:
        try:
            data = _toml(_policy_bytes(policy_file, f"--policy {str(policy_file)!r}", "pass the policy's TOML file"))
        except OSError as exc:
            raise PolicyError(f"--policy {str(policy_file)!r}: {exc.strerror or exc}; pass an existing TOML file") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, NotToml) as exc:
            raise PolicyError(f"--policy {str(policy_file)!r} is not TOML ({exc}); fix the file") from None
        where = f"--policy {str(policy_file)!r}"
        table = data.get("tool", {}).get(TABLE, data) if isinstance(data.get("tool"), dict) else data
    else:
        pyproject = folder / "pyproject.toml"
        try:
            raw = _policy_bytes(pyproject, str(pyproject), "the gate reads its policy there: make it the project's TOML "
                                                           "file, or run the gate from another folder")
        except OSError:
            return {}, None
        try:
            data = _toml(raw)
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, NotToml) as exc:
            # Somebody else's file is not the gate's to judge, unless it holds the gate's table: a policy that cannot
            # be read is one ERROR, never the defaults in silence (issue 48).
            if _HOLDS_TABLE.search(raw.decode("utf-8", "replace")) is None:
                return {}, None
            raise PolicyError(f"{pyproject} holds [tool.{TABLE}] but is not TOML ({exc}): the policy there cannot be read; "
                              f"fix the file") from None
        tool = data.get("tool")
        if not isinstance(tool, dict) or TABLE not in tool:
            return {}, None
        table, where = tool[TABLE], f"[tool.{TABLE}] in {pyproject}"
    if not isinstance(table, dict):
        raise PolicyError(f"{where}: the policy must be a table of keys ({', '.join(KEYS)}); fix it")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise PolicyError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                          f"the keys are {', '.join(f'{k} ({v})' for k, v in KEYS.items())} (docs/policy.md)")
    return table, where


def _until(value: object, where: str, index: int) -> Version | datetime.date | None:
    if value is None or isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value
    if isinstance(value, str):
        # A date is written whole (YYYY-MM-DD); a version never holds a "-": PEP 440 reads "2026-11" as 2026.post11, a
        # version no executorch 1.x reaches, so that waiver would never expire (issue 58).
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
                return datetime.date.fromisoformat(value)
            if "-" not in value:
                return Version(value)
        except (ValueError, InvalidVersion):
            pass
    raise PolicyError(f"{where}: [[waive]] {index + 1}: until = {value!r} is neither a version (1.6.0) nor a date "
                      f"(2027-01-31); fix it")


def waivers(table: dict[str, Any], where: str | None) -> tuple[Waiver, ...]:
    entries = table.get("waive", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise PolicyError(f"{where}: waive must be {KEYS['waive']} (docs/policy.md); fix it")
    made = []
    for index, entry in enumerate(entries):
        at = f"{where}: [[waive]] {index + 1}"
        unknown = sorted(set(entry) - set(WAIVER_KEYS))
        if unknown:
            raise PolicyError(f"{at}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                              f"a waiver's keys are {', '.join(WAIVER_KEYS)} (docs/policy.md)")
        for key in ("check", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise PolicyError(f"{at} has no {key}: every waiver names its check and says why it is accepted "
                                  f"(reason = \"...\"); add it")
        if "match" in entry and (not isinstance(entry["match"], str) or not entry["match"]):
            raise PolicyError(f"{at}: match = {entry['match']!r} must be text the finding contains; fix it")
        made.append(Waiver(entry["check"], entry["reason"].strip(), entry.get("match"), _until(entry.get("until"), where or "", index)))
    return tuple(made)


def for_wheel(wheel: Wheel, policy_file: Path | None, folder: Path) -> Policy:
    table, where = read(policy_file, folder)
    strict = table.get("strict", False)
    if not isinstance(strict, bool):
        raise PolicyError(f"{where}: strict = {strict!r}; it must be {KEYS['strict']}")
    waived = waivers(table, where)
    if "torch" in table:
        value = table["torch"]
        if value not in TORCH:
            raise PolicyError(f"{where}: torch = {value!r}; it must be {KEYS['torch']}")
        return Policy(value, f"torch = {value!r}, {where}", strict, waived)
    version = wheel.version
    kind = ("a dev version" if version.is_devrelease else "a pre-release" if version.is_prerelease else
            "a local version" if version.local else None)
    if kind is None:
        return Policy("declared", f"the default for a release version, {version}", strict, waived)
    return Policy("user-supplied", f"the default for {kind}, {version}: main leaves torch to its consumers (setup.py)", strict, waived)
