"""A run as data, and the files made from it: the JSON report, JUnit XML, the Markdown table.

One ``Run`` is what a row (or ``inspect``) decided and measured, and which gate judged it (``paths.version``). The
JSON report is versioned by ``SCHEMA`` (docs/report-schema.json; each earlier schema kept beside it,
docs/report-schema-N.json); its fields are documented in docs/commands.md ("Reports").
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import math
import os
import stat
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Protocol, Sequence

from smoke import markup, paths
from smoke.errors import GateError
from smoke.results import CheckResult, Status, all_passed, counts

SCHEMA = 4  # 3: the statuses warn and waived, a waived check's waiver, strict; 4: the gate that judged (name, version)
MODES = ("row", "inspect")
COMPARE = "compare"  # the mode of compare's own report (docs/compare-schema.json), which is not a row's


class Waiver(Protocol):
    """One waiver of the policy, as a run says it (``smoke.readers.settings.Waiver``)."""

    @property
    def reason(self) -> str: ...

    def words(self) -> str: ...


class Waiving(Protocol):
    """The policy's waivers as a run applies them (``smoke.readers.settings.Waivers``)."""

    def apply(self, result: CheckResult) -> CheckResult: ...

    def unmatched(self) -> Sequence[Waiver]: ...


@dataclass
class Run:
    row: str
    mode: str = "row"
    wheel: str = ""
    wheel_size: int | None = None
    wheel_sha256: str = ""
    results: list[CheckResult] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # from the child: versions, device
    torch_source: str = ""
    phases: list[dict[str, Any]] = field(default_factory=list)  # {"name", "seconds"}
    started: str = field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    seconds: float = 0.0
    exit_code: int | None = None
    policy: dict[str, str] | None = None  # smoke.readers.settings: the policy the run judged by, and why
    loader_env: dict[str, list[str]] | None = None  # smoke.environment.loaderenv: what was removed from the caller's environment
    strict: bool = False  # warnings fail the run (--strict, or the policy's strict)
    waivers: Waiving | None = None  # smoke.readers.settings.Waivers: applied to each result as it is emitted (smoke.console.emit)
    gate_version: str = field(default_factory=paths.version)  # the gate that judged it

    @property
    def verdict(self) -> str:
        return "pass" if all_passed(self.results, self.strict) else "fail"

    def waived(self, result: CheckResult) -> CheckResult:
        """``result`` as the policy judges it (``waivers``): waived where a waiver covers it, else as it is."""
        return self.waivers.apply(result) if self.waivers is not None else result

    @property
    def stem(self) -> str:
        return self.row if self.mode == "row" else f"{self.mode}-{self.row}"


def to_json(run: Run) -> dict[str, Any]:
    tally = counts(run.results)
    device = run.facts.get("device") or {}
    return {
        "schema": SCHEMA,
        "mode": run.mode,
        "row": run.row,
        "verdict": run.verdict,
        "exit_code": run.exit_code,
        "wheel": {"file": run.wheel, "size": run.wheel_size, "sha256": run.wheel_sha256},
        "gate": {"name": paths.DISTRIBUTION, "version": run.gate_version},
        "versions": {"executorch": run.facts.get("executorch"), "torch": run.facts.get("torch"),
                     "python": run.facts.get("python")},
        "device": device.get("device_name") and {"name": device["device_name"], "sm": device.get("sm")},
        "torch_source": run.torch_source or None,
        "loader_environment": run.loader_env,
        "policy": run.policy,
        "strict": run.strict,
        "started": run.started,
        "seconds": round(run.seconds, 3),
        "phases": run.phases,
        "counts": {status.value: tally[status] for status in Status},
        "checks": [result.to_json() for result in run.results],
    }


def to_junit(run: Run) -> ET.ElementTree:
    """Each check is a test case: a FAIL a <failure> (a WARN too, where the run is strict), a SKIP a <skipped>, a WAIVED
    finding a <skipped> with its "WAIVED" line, a WARN a <system-out> with its "WARN" line. A character XML cannot hold
    (a control character, a lone surrogate) is U+FFFD."""
    tally = counts(run.results)
    if run.strict:
        tally[Status.FAIL] += tally[Status.WARN]
    tally[Status.SKIP] += tally[Status.WAIVED]
    xml = markup.xml
    suite_name = xml(f"executorch-gate.{run.stem}")
    suites = ET.Element("testsuites", name="executorch-gate", tests=str(len(run.results)),
                        failures=str(tally[Status.FAIL]), skipped=str(tally[Status.SKIP]), time=f"{run.seconds:.3f}")
    suite = ET.SubElement(suites, "testsuite", name=suite_name, tests=str(len(run.results)), failures=str(tally[Status.FAIL]),
                          errors="0", skipped=str(tally[Status.SKIP]), time=f"{run.seconds:.3f}", timestamp=xml(run.started))
    properties = ET.SubElement(suite, "properties")
    for key, value in (("wheel", run.wheel), ("wheel_sha256", run.wheel_sha256), ("torch_source", run.torch_source),
                       ("gate_version", run.gate_version)):
        if value:
            ET.SubElement(properties, "property", name=key, value=xml(value))
    for result in run.results:
        case = ET.SubElement(suite, "testcase", classname=suite_name, name=xml(result.name),
                             time=f"{result.seconds or 0:.3f}")
        if result.status is Status.FAIL or (run.strict and result.status is Status.WARN):
            ET.SubElement(case, "failure", message=xml(result.reason)).text = xml(result.reason)
        elif result.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=xml(result.reason))
        elif result.status is Status.WAIVED:
            ET.SubElement(case, "skipped", message=xml(result.line()))
        elif result.status is Status.WARN:
            ET.SubElement(case, "system-out").text = xml(result.line())
        else:
            ET.SubElement(case, "system-out").text = xml(result.reason)
    tree = ET.ElementTree(suites)
    ET.indent(tree)
    return tree


def said_by(run: Run) -> str:
    """Which wheel (by its sha256: two files of one name are told apart) and which gate, in one line."""
    return f"wheel sha256 {run.wheel_sha256 or 'not read'}; judged by {paths.DISTRIBUTION} {run.gate_version}"


def markdown(run: Run) -> str:
    """The run's checks as a Markdown table, under the wheel's sha256 and the gate's version; every text from the wheel
    or a message escaped (``smoke.markup``)."""
    cell = markup.text
    lines = [f"### {cell(run.stem)}: {run.verdict.upper()} ({cell(run.wheel)})", "", cell(said_by(run)), "",
             "| check | status | reason |", "|---|---|---|"]
    for result in run.results:
        lines.append(f"| {cell(result.name)} | {result.status.name} | {cell(result.told)} |")
    return "\n".join(lines) + "\n"


# What a report the gate wrote begins with (``write``): an existing file at a report's path that does
# not is someone else's, and is never overwritten.
_OWN_STARTS = {".json": b'{\n  "schema": ', ".xml": b"<?xml version='1.0' encoding='utf-8'?>\n<testsuites name=\"executorch-gate\""}
NAME_MAX, PATH_MAX = 255, 4096  # Linux's limits, where the file system does not say its own


class ReportNotWritten(GateError):
    """A report the run should write cannot be, or could not be, written; the message names it and says why."""


def targets(folder: Path, stem: str) -> list[Path]:
    return [folder / f"{stem}.json", folder / f"{stem}.xml"]


# The names a report writes for the floats JSON has no number for (``finite``), and the floats a reader takes them for.
NOT_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def finite(value: Any) -> Any:
    """``value`` with every float that JSON has no number for (NaN, an infinity: a runtime's outputs can hold them)
    written as its name in a string ("NaN", "Infinity", "-Infinity"), so that the report is JSON every parser reads
    (issue 48: 55 bare NaN tokens in the report of a runtime that computed NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")  # NOT_FINITE's names
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


MAX_REPORT_BYTES = 1 << 20  # the most of one report the summary reads (smoke.commands.summary): written within it
_KEEPS = (1000, 100, 10, 0)  # the most items of each list in a check's measured, tried in turn while over the limit


def _cut(value: Any, keep: int) -> tuple[Any, int]:
    """``value`` with every list in it cut to ``keep`` items, and how many items were left out."""
    if isinstance(value, dict):
        kept, out = {}, 0
        for key, item in value.items():
            kept[key], left = _cut(item, keep)
            out += left
        return kept, out
    if isinstance(value, (list, tuple)):
        items = [_cut(item, keep) for item in value[:keep]]
        return [item for item, _ in items], len(value) - min(len(value), keep) + sum(left for _, left in items)
    return value, 0


def encoded(document: dict[str, Any], limit: int = MAX_REPORT_BYTES) -> bytes:
    """The report's JSON, within ``limit`` bytes (issue 58: a wheel with thousands of RECORD mismatches wrote a report
    the summary refused, and its release lost its verdict). Where it is over, each check's measured lists are cut,
    to fewer items each time, each cut check saying how many it left out (``measured.cut_for_size``), and then each
    reason to its first 2000 characters; the verdict, the counts and every check's status are never cut."""
    def dumped(doc: dict[str, Any]) -> str:
        return json.dumps(finite(doc), indent=2, default=str, allow_nan=False) + "\n"

    data = dumped(document)
    for keep in _KEEPS:
        if len(data.encode()) <= limit - (limit >> 4):  # room for what redacting adds (a short token masked as ****)
            break
        checks = []
        for check in document["checks"]:
            measured, left = _cut(check.get("measured") or {}, keep)
            if left:
                measured = {**measured, "cut_for_size": {"kept_of_each_list": keep, "left_out": left}}
            reason = check["reason"] if keep else check["reason"][:2000]
            checks.append({**check, "measured": measured, "reason": reason})
        data = dumped({**document, "checks": checks})
    return markup.redact(data).encode()


def write(run: Run, folder: Path) -> list[Path]:
    """The JSON report and the JUnit XML, as DIR/ROW.json and DIR/ROW.xml, each whole or not at all:
    written beside its place and renamed onto it (a rename replaces a link, never writes through it),
    and only where ``check_target`` finds nothing that is not an earlier report of the gate's."""
    json_path, xml_path = targets(folder, run.stem)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportNotWritten(f"report folder {str(folder)!r} cannot be made ({exc.strerror or exc})") from None
    _replace(json_path, encoded(to_json(run)))
    junit = io.BytesIO()
    to_junit(run).write(junit, encoding="utf-8", xml_declaration=True)
    _replace(xml_path, markup.redact(junit.getvalue().decode("utf-8")).encode("utf-8"))
    return [json_path, xml_path]


def _replace(path: Path, data: bytes) -> None:
    check_target(path)
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with open(partial, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise ReportNotWritten(f"report {str(path)!r} could not be written ({exc.strerror or exc})") from None


def check_target(path: Path) -> None:
    """Refuse a report's path where something the gate did not write is: a folder, a link (dangling
    or not), a device or FIFO, or a file that is not one of its reports."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ReportNotWritten(f"report {str(path)!r} cannot be written ({exc.strerror or exc})") from None
    if stat.S_ISLNK(info.st_mode):
        what = "a link" if path.exists() else "a dangling link"
    elif stat.S_ISDIR(info.st_mode):
        what = "a folder"
    elif not stat.S_ISREG(info.st_mode):
        what = "not a regular file"
    else:
        try:
            with open(path, "rb") as handle:
                start = handle.read(len(_OWN_STARTS.get(path.suffix, b"")))
        except OSError as exc:
            raise ReportNotWritten(f"report {str(path)!r} cannot be read to see whose it is ({exc.strerror or exc})") from None
        if start == _OWN_STARTS.get(path.suffix):
            return  # an earlier report of the gate's: replaced
        what = "a file the gate did not write"
    raise ReportNotWritten(f"report {str(path)!r} is {what}, which the gate will not replace: remove it, "
                           f"or pass another --report-dir")


def check_length(path: Path, what: str, fix: str) -> None:
    """Refuse a path the file system cannot hold (a name over NAME_MAX bytes, the whole over PATH_MAX)."""
    path = Path(os.path.abspath(path))
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    try:
        name_max, path_max = os.pathconf(probe, "PC_NAME_MAX"), os.pathconf(probe, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = NAME_MAX, PATH_MAX
    longest = max(path.parts, key=lambda part: len(os.fsencode(part)))
    if len(os.fsencode(longest)) > name_max:
        raise GateError(f"{what} {_short(path)} has a name of {len(os.fsencode(longest))} bytes ({_short(Path(longest))}); "
                        f"the file system holds at most {name_max}: {fix}")
    if len(os.fsencode(str(path))) >= path_max:
        raise GateError(f"{what} {_short(path)} is {len(os.fsencode(str(path)))} bytes long; the file system holds paths "
                        f"under {path_max}: {fix}")


def _short(path: Path) -> str:
    text = str(path)
    return repr(text) if len(text) <= 120 else repr(text[:60] + "…" + text[-40:])


def append_to_step_summary(text: str) -> Path | None:
    """Where GitHub Actions sets GITHUB_STEP_SUMMARY, append ``text`` to it."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(markup.redact(text))
    return Path(target)


def append_step_summary(run: Run) -> Path | None:
    """Append the run's table to the GitHub step summary, where there is one."""
    return append_to_step_summary(markdown(run) + "\n")


def check_step_summary() -> None:
    """Refuse, before any work, a GITHUB_STEP_SUMMARY that cannot be appended to: a folder, a FIFO (an open
    for appending would wait for a reader for ever), a socket, a path too long, a folder that is not there."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    fix = "point it at a writable file, or unset it"
    check_length(Path(target), "GITHUB_STEP_SUMMARY", fix)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise GateError(f"GITHUB_STEP_SUMMARY {target!r} cannot be written ({exc.strerror or exc}): {fix}") from None
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
        kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        raise GateError(f"GITHUB_STEP_SUMMARY {target!r} is {kind}, not a file it can append to: {fix}")
    try:
        with open(target, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise GateError(f"GITHUB_STEP_SUMMARY {target!r} cannot be written ({exc.strerror or exc}): {fix}") from None


def check_writable(folder: Path, stems: Iterable[str] = ()) -> None:
    """Refuse, before any work, a report folder that cannot be written, and a report's path (``stems``: the
    reports this run writes) where something the gate did not write is (``check_target``)."""
    fix = "pass --report-dir with a folder you can write"
    check_length(folder, "report folder", "pass a shorter --report-dir")
    for stem in stems:
        for path in targets(folder, stem):
            check_length(path, "report", "pass a shorter --report-dir")
    probe = Path(folder)
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    if probe.is_symlink() and not probe.exists():
        raise GateError(f"report folder {str(folder)!r} cannot be made: {str(probe)!r} is a dangling link; {fix}")
    if not probe.is_dir():
        raise GateError(f"report folder {str(folder)!r} cannot be written ({str(probe)!r} is not a writable directory); {fix}")
    try:  # a real file, not os.access: root passes access() on a read-only file system's folders too
        handle, name = tempfile.mkstemp(prefix=".gate-probe-", dir=probe)
        os.close(handle)
        os.unlink(name)
    except OSError as exc:
        raise GateError(f"report folder {str(folder)!r} cannot be written ({str(probe)!r}: {exc.strerror or exc}); {fix}") from None
    if probe == Path(folder):
        for stem in stems:
            for path in targets(folder, stem):
                check_target(path)
