"""``nox -s summary -- REPORTS_DIR [--release cuda|cpu|all] [--output FILE] [--json FILE]``: the matrix verdict.

Merges the rows' JSON reports into one Markdown table (check x row; JSON with ``--json``:
docs/summary-schema.json) and decides the release: it fails if a row failed, if a row the release needs
(``smoke.rows.RELEASE_ROWS``) has no report or no checks, if a row that must execute skipped a check in
``smoke.stages.MUST_EXECUTE``, or if the rows did not judge one release (one executorch version, imported as such,
each wheel judged once under its own name).

A report is read whole or not at all (``read_report``): one the gate did not write, or that contradicts itself, is
one ``ERROR`` naming the file, exit 2: it proves neither answer.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from smoke import markup, paths, stages
from smoke.checks import pipeline
from smoke.console import error, fail
from smoke.errors import EXIT_FAILED, GateError
from smoke.report import COMPARE, MAX_REPORT_BYTES, MODES, SCHEMA, append_to_step_summary
from smoke.results import Status
from smoke.rows import RELEASE_ROWS, ROWS
from smoke.stages import MUST_EXECUTE

# The measured number shown beside a status, per declared check.
_SHOWN = {stages.DATA_FILE: ("data_file_bytes", "{} B"), stages.DELEGATE: ("pte_bytes", "{} B"),
          stages.WEIGHTS: ("difference_bytes", "+{} B over weightless"),
          stages.RUN: ("max_abs_diff", "max abs diff {}")}

# The most of a file the summary reads: the largest report the gate has written here is 23,154 B
# (docs/records/runs, a CUDA row of 27 checks), so a report 45 times that is not one of the gate's.
_SHA256 = re.compile(r"[0-9a-f]{64}")
_FIX = "it is not a report this gate wrote: rerun that row, or remove the file"
# The report schemas it reads: 3 named no gate (its rows' gate is shown as unknown), 4 names it (smoke.report.SCHEMA).
READS = (3, SCHEMA)
JSON_SCHEMA = 1  # of the summary's own JSON (--json; docs/summary-schema.json)


class ReportError(GateError):
    pass


@dataclass(frozen=True)
class Report:
    """One row's report, read and checked against itself."""

    path: Path
    mode: str
    row: str
    wheel: str
    sha256: str
    release: Version  # the wheel file's version
    executorch: str | None  # what the row's child imported; None where no child ran
    checks: tuple[dict[str, Any], ...]  # each with a str name, a known status and a dict measured
    strict: bool = False  # its warnings fail it
    gate: str | None = None  # the version of the gate that judged it; None in a report of schema 3, which did not say

    @property
    def failing(self) -> list[str]:
        """The checks that fail the row: each FAIL, and each WARN where the run was strict."""
        bad = {Status.FAIL.value, Status.WARN.value} if self.strict else {Status.FAIL.value}
        return [c["name"] for c in self.checks if c["status"] in bad]

    @property
    def verdict(self) -> str:
        """Recomputed from the checks: a FAIL fails the row, a WARN too where it was strict (a report with no checks is
        caught by ``judge``)."""
        return Status.FAIL.value if self.failing else Status.PASS.value


# --- reading one report: every way a file can fail to be one is an ERROR naming it


def _describe(value: object) -> str:
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)
    shown = repr(value)
    return f"{kind} ({shown[:40]}{'…' if len(shown) > 40 else ''})" if not isinstance(value, (dict, list)) else kind


def _get(path: Path, obj: dict[str, Any], key: str, where: str, kinds: tuple[type, ...], what: str) -> Any:
    if key not in obj:
        raise ReportError(f"{path}: {where.strip()} has no {key!r}; {_FIX}")
    value = obj[key]
    if type(value) not in kinds:  # exactly: true is not the integer 1 here
        raise ReportError(f"{path}: {where}{key!r} is {_describe(value)}, not {what}; {_FIX}")
    return value


def read_bytes(path: Path, limit: int = MAX_REPORT_BYTES) -> bytes:
    """At most ``limit`` bytes of a regular file; anything else (a folder, a link to nothing, a FIFO,
    a device, a file over the limit) is a ReportError naming it. A FIFO or a device is never opened."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            raise ReportError(f"{path} is a link to {os.readlink(path)!r}, which does not exist; remove the link, "
                              "or put the report there") from None
        raise ReportError(f"{path} went away while the summary read the folder; rerun the summary") from None
    except OSError as exc:
        raise ReportError(f"{path} cannot be read ({exc.strerror or exc}); make it readable, or remove it") from None
    if not stat.S_ISREG(info.st_mode):
        kind = ("a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode)
                else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "not a regular file")
        raise ReportError(f"{path} is {kind}, not a report file; {_FIX}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # replaced by a FIFO since the stat: opens at once, refused below
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ReportError(f"{path} is not a regular file, not a report file; {_FIX}")
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ReportError(f"{path} cannot be read ({exc.strerror or exc}); make it readable, or remove it") from None
    if len(data) > limit:
        raise ReportError(f"{path} is over {limit} bytes, larger than any report the gate writes; {_FIX}")
    return data


def read_report(path: Path) -> Report | None:
    """One report file, read and checked: a ReportError naming the file and why, never another exception. None for
    compare's own report (``--report-dir`` of compare may be the rows' folder): it judges no row and is left out."""
    data = read_bytes(path)
    try:
        document = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; RecursionError: nested too deep
        reason = str(exc) if isinstance(exc, ValueError) else "nested too deep"
        raise ReportError(f"{path} is not a JSON report ({markup.plain(reason)[:200]}); {_FIX}") from None
    if type(document) is not dict:
        raise ReportError(f"{path} holds {_describe(document)}, not a report object; {_FIX}")
    if document.get("mode") == COMPARE:
        return None
    schema = document.get("schema")
    if type(schema) is not int or schema not in READS:
        raise ReportError(f"{path} has report schema {markup.plain(repr(schema))[:40]}, this gate reads "
                          f"{' and '.join(map(str, READS))}: rerun that row")
    mode = _get(path, document, "mode", "the report ", (str,), f"one of {', '.join(MODES)}")
    if mode not in MODES:
        raise ReportError(f"{path}: mode {markup.plain(repr(mode))[:60]} is not one of {', '.join(MODES)}; {_FIX}")
    row = _get(path, document, "row", "the report ", (str,), "a row's name")
    if row not in ROWS:
        raise ReportError(f"{path}: row {markup.plain(repr(row))[:60]} is not a row of this gate ({', '.join(sorted(ROWS))}); {_FIX}")
    wheel = _get(path, document, "wheel", "the report ", (dict,), "an object")
    file = _get(path, wheel, "file", "'wheel' ", (str,), "a wheel's file name")
    sha256 = _get(path, wheel, "sha256", "'wheel' ", (str,), "a sha256")
    if not _SHA256.fullmatch(sha256):
        raise ReportError(f"{path}: the wheel's sha256 {markup.plain(repr(sha256))[:80]} is not 64 hex digits, so which wheel "
                          f"the row judged is unknown; {_FIX}")
    try:
        name, version, _build, _tags = parse_wheel_filename(file)
    except (InvalidWheelFilename, InvalidVersion) as exc:
        raise ReportError(f"{path}: the wheel {markup.plain(repr(file))[:120]} is not a wheel's file name "
                          f"({markup.plain(exc)[:120]}); {_FIX}") from None
    if name != "executorch":
        raise ReportError(f"{path}: the wheel {markup.plain(repr(file))[:120]} is not executorch's; {_FIX}")
    versions = _get(path, document, "versions", "the report ", (dict,), "an object")
    executorch = _get(path, versions, "executorch", "'versions' ", (str, type(None)), "a version or null")
    checks = tuple(_check(path, i, c) for i, c in enumerate(_get(path, document, "checks", "the report ", (list,), "a list")))
    strict = _get(path, document, "strict", "the report ", (bool,), "true or false")
    gate = None
    if schema >= 4:
        gate = _get(path, _get(path, document, "gate", "the report ", (dict,), "an object"), "version", "'gate' ", (str,),
                    "a version")
    report = Report(path, mode, row, file, sha256, version, executorch, checks, strict, gate)
    _agrees_with_itself(report, document)
    return report


def _check(path: Path, index: int, check: object) -> dict[str, Any]:
    where = f"check {index + 1} "
    if type(check) is not dict:
        raise ReportError(f"{path}: {where}is {_describe(check)}, not an object; {_FIX}")
    _get(path, check, "name", where, (str,), "a check's name")
    status = _get(path, check, "status", where, (str,), "a status")
    if status not in {s.value for s in Status}:
        raise ReportError(f"{path}: {where}has status {markup.plain(repr(status))[:40]}, not one of "
                          f"{', '.join(s.value for s in Status)}; {_FIX}")
    _get(path, check, "reason", where, (str,), "a reason")
    _get(path, check, "measured", where, (dict,), "an object")
    return check


def _agrees_with_itself(report: Report, document: dict[str, Any]) -> None:
    path, verdict = report.path, report.verdict
    names = [c["name"] for c in report.checks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ReportError(f"{path}: the check {markup.plain(repr(twice[0]))[:80]} appears twice, so its status is ambiguous; {_FIX}")
    said = _get(path, document, "verdict", "the report ", (str,), "pass or fail")
    if said != verdict:
        failing = report.failing
        because = f"its checks hold {len(failing)} FAIL ({markup.plain(failing[0])[:80]}…)" if failing else "none of its checks failed"
        raise ReportError(f"{path} says verdict {markup.plain(repr(said))[:40]} but {because}: a report that contradicts "
                          f"itself is no evidence either way; rerun that row")
    exit_code = _get(path, document, "exit_code", "the report ", (int,), "0 or 1")
    if exit_code != (0 if verdict == Status.PASS.value else EXIT_FAILED):
        raise ReportError(f"{path} says exit code {exit_code} for verdict {verdict!r} (a PASS exits 0, a FAIL 1): "
                          "a report that contradicts itself is no evidence either way; rerun that row")
    counted = _get(path, document, "counts", "the report ", (dict,), "an object")
    for status in Status:
        said_count = _get(path, counted, status.value, "'counts' ", (int,), "an integer")
        held = sum(1 for c in report.checks if c["status"] == status.value)
        if said_count != held:
            raise ReportError(f"{path} counts {said_count} {status.value} but its checks hold {held}: a report that "
                              "contradicts itself is no evidence either way; rerun that row")


def load_reports(folder: Path) -> dict[str, Report]:
    """Every row report under ``folder`` (``inspect`` reports are read, and left out, as compare's are), by row."""
    if not folder.is_dir():
        raise ReportError(f"reports folder {str(folder)!r} does not exist; pass the folder the rows wrote with --report-dir")
    reports: dict[str, Report] = {}
    for path in sorted(folder.rglob("*.json")):
        report = read_report(path)
        if report is None or report.mode != "row":
            continue
        if report.row in reports:
            raise ReportError(f"two reports for row {report.row!r} ({reports[report.row].path} and {path}); keep one per row")
        reports[report.row] = report
    return reports


# --- the matrix verdict


@dataclass
class Verdict:
    ok: bool
    problems: list[str]
    table: str
    rows: list[dict[str, Any]]  # the table's rows as data (--json)


def _cell(check: dict[str, Any] | None) -> str:
    if check is None:
        return "—"
    cell = check["status"].upper()
    declared = pipeline.declared(check["name"])
    key, template = _SHOWN[declared] if declared in _SHOWN else (None, "")
    value = check["measured"].get(key) if key else None
    if value is not None:
        cell += " " + template.format(f"{value:.2g}" if isinstance(value, float) else value)
    return markup.text(cell)


def one_release(reports: dict[str, Report], rows: list[str]) -> list[str]:
    """The problems that mean the rows did not judge one release's wheels, each its own (``rows``: the table's order)."""
    problems = []
    releases: dict[str, list[str]] = {}
    rows = [r for r in rows if r in reports]
    for row in rows:
        report = reports[row]
        releases.setdefault(report.release.public, []).append(row)
        if report.executorch is not None:
            try:
                imported = Version(report.executorch).public
            except InvalidVersion:
                imported = None
            if imported != report.release.public:
                problems.append(f"{row}: its child imported executorch {report.executorch!r}, not the wheel's "
                                f"{report.release.public} ({report.wheel})")
    if len(releases) > 1:
        problems.append("the rows judged different executorch releases: "
                        + "; ".join(f"{v} ({', '.join(rows)})" for v, rows in sorted(releases.items()))
                        + "; one summary judges one release")
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            ra, rb = reports[a], reports[b]
            if ra.sha256 == rb.sha256:
                problems.append(f"{a} and {b} judged one wheel ({ra.wheel}, sha256 {ra.sha256[:12]}…): each row gates "
                                "its own (another machine's, or a CPU build where the other is a CUDA build)")
            elif ra.wheel == rb.wheel:
                problems.append(f"{a} and {b} judged two different wheels named {ra.wheel} "
                                f"(sha256 {ra.sha256[:12]}… and {rb.sha256[:12]}…)")
    return problems


def judge(reports: dict[str, Report], release: str) -> Verdict:
    needed = RELEASE_ROWS[release]
    rows = [r for r in needed] + sorted(r for r in reports if r not in needed)
    problems = []
    for row in rows:
        report = reports.get(row)
        if report is None:
            problems.append(f"{row}: no report (the {release} release needs this row)")
            continue
        if not report.checks:
            problems.append(f"{row}: its report holds no checks, so nothing was judged")
        if report.verdict != Status.PASS.value:
            problems.append(f"{row}: failed ({', '.join(report.failing)}{', strict: warnings fail' if report.strict else ''})")
        if ROWS[row].execution_required:
            by_name = {c["name"]: c for c in report.checks}
            for name in MUST_EXECUTE:
                status = by_name.get(name, {}).get("status")
                if status != Status.PASS.value:
                    problems.append(f"{row}: {name!r} is {status or 'absent'}, and this row must execute it")
    problems += one_release(reports, rows)
    names: list[str] = []
    for report in (reports[r] for r in rows if r in reports):
        for check in report.checks:
            if check["name"] not in names:
                names.append(check["name"])
    cell = markup.text
    lines = ["| check | " + " | ".join(cell(r) for r in rows) + " |", "|---" * (len(rows) + 1) + "|"]
    lines.append("| wheel | " + " | ".join((cell(reports[r].wheel) if r in reports else "no report") for r in rows) + " |")
    lines.append("| sha256 | " + " | ".join((reports[r].sha256 if r in reports else "—") for r in rows) + " |")
    lines.append("| gate | " + " | ".join((cell(_gate_said(reports[r])) if r in reports else "—") for r in rows) + " |")
    for name in names:
        cells = []
        for row in rows:
            report = reports.get(row)
            found = next((c for c in report.checks if c["name"] == name), None) if report else None
            cells.append(_cell(found))
        lines.append(f"| {cell(name)} | " + " | ".join(cells) + " |")
    verdicts = [(("PASS" if reports[r].checks else "NO CHECKS") if reports[r].verdict == Status.PASS.value else "FAIL")
                if r in reports else "MISSING" for r in rows]
    lines.append("| **verdict** | " + " | ".join(verdicts) + " |")
    return Verdict(not problems, problems, "\n".join(lines) + "\n", _as_data(reports, rows, needed, verdicts))


def _gate_said(report: Report) -> str:
    return f"{paths.DISTRIBUTION} {report.gate}" if report.gate is not None else "unknown (report schema 3)"


def _as_data(reports: dict[str, Report], rows: list[str], needed: tuple[str, ...] | list[str], verdicts: list[str]) -> list[dict]:
    """Each row of the table as data, for --json (docs/summary-schema.json)."""
    out: list[dict[str, Any]] = []
    for row, verdict in zip(rows, verdicts):
        report = reports.get(row)
        out.append({"row": row, "needed": row in needed, "verdict": verdict.lower().replace(" ", "_"),
                    "report": None if report is None else str(report.path),
                    "wheel": None if report is None else {"file": report.wheel, "sha256": report.sha256},
                    "gate": None if report is None else {"name": paths.DISTRIBUTION, "version": report.gate},
                    "executorch": None if report is None else report.executorch,
                    "strict": None if report is None else report.strict,
                    "checks": [] if report is None else [{"name": c["name"], "status": c["status"]} for c in report.checks]})
    return out


# --- the command


# What a file the summary wrote begins with: an existing file at --output or --json that does not is someone else's.
_OWN_STARTS = {"--output": b"| check | ", "--json": b'{\n  "schema": 1,\n  "mode": "summary",'}


def check_output(output: Path, option: str = "--output", reports: Path | None = None) -> None:
    """Refuse, before any report is read, an --output or --json the summary cannot write or did not write:
    a folder, a link, a FIFO or device, a file that is not an earlier summary; and a --json inside the reports
    folder, which the next summary would read as a report."""
    fix = f"pass another {option}"
    if option == "--json" and reports is not None and Path(os.path.realpath(output)).is_relative_to(os.path.realpath(reports)):
        raise ReportError(f"--json {str(output)!r} is inside the reports folder {str(reports)!r}, whose every .json the "
                          f"summary reads as a row's report: {fix}, outside it")
    if output.is_symlink():
        raise ReportError(f"{option} {str(output)!r} is a link, which the summary will not write through; {fix}")
    if output.exists():
        if not output.is_file():
            raise ReportError(f"{option} {str(output)!r} is {'a folder' if output.is_dir() else 'not a regular file'}; {fix}")
        own = _OWN_STARTS[option]
        try:
            with open(output, "rb") as handle:
                start = handle.read(len(own))
        except OSError as exc:
            raise ReportError(f"{option} {str(output)!r} cannot be read to see whose it is ({exc.strerror or exc}); {fix}") from None
        if start != own:
            raise ReportError(f"{option} {str(output)!r} is a file the summary did not write, which it will not replace; {fix}")
    probe = output.parent
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        raise ReportError(f"{option} {str(output)!r} cannot be written ({str(probe)!r} is not a writable folder); {fix}")


def as_json(verdict: Verdict, release: str, folder: Path) -> dict[str, Any]:
    """The matrix verdict as data: the release, its verdict and problems, each row's wheel (file, sha256), the gate
    that judged it, its verdict and checks; and the gate that summed them up (docs/summary-schema.json)."""
    return {"schema": JSON_SCHEMA, "mode": "summary", "release": release, "reports": str(folder),
            "verdict": "pass" if verdict.ok else "fail", "exit_code": 0 if verdict.ok else EXIT_FAILED,
            "gate": {"name": paths.DISTRIBUTION, "version": paths.version()},
            "rows": verdict.rows, "problems": verdict.problems}


def summary(folder: Path, release: str, output: Path | None = None, json_output: Path | None = None) -> int:
    if output is not None:
        check_output(output)
    if json_output is not None:
        check_output(json_output, "--json", folder)
    reports = load_reports(folder)
    if not reports:  # nothing to judge is no verdict: not a FAIL of the release, and never a PASS
        inspected = sum(1 for _ in folder.rglob("*.json"))
        raise ReportError(f"reports folder {str(folder)!r} holds no row report{f' ({inspected} other JSON files)' if inspected else ''}: "
                          f"nothing to judge; pass the folder the rows wrote with --report-dir (nox -s ROW -- WHEEL "
                          f"--report-dir DIR)")
    verdict = judge(reports, release)
    print(markup.redact(verdict.table))
    for problem in verdict.problems:
        fail(f"{release} release", markup.plain(problem))
    word = "PASSED" if verdict.ok else "FAILED"
    print(f"summary ({release} release, {markup.plain(folder)}): {word}")
    text = (verdict.table + "\n" + "".join(f"- FAIL {markup.text(p)}\n" for p in verdict.problems)
            + f"\n**summary ({release} release, {markup.text(folder)}): {word}**\n")
    code = 0 if verdict.ok else EXIT_FAILED
    try:
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(markup.redact(text), encoding="utf-8")
        if json_output is not None:
            json_output.parent.mkdir(parents=True, exist_ok=True)
            json_output.write_text(markup.redact(json.dumps(as_json(verdict, release, folder), indent=2) + "\n"), encoding="utf-8")
        append_to_step_summary(text)
    except OSError as exc:  # the verdict above stands; what could not be written is said, in one line
        error(f"the summary could not be written ({exc.strerror or exc}: {markup.plain(exc.filename or '')}); "
              f"the verdict above stands")
    return code
