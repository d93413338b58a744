"""``nox -s summary -- REPORTS_DIR [--release cuda|cpu|all]``: the matrix verdict.

Merges the JSON reports of every row into one Markdown table (check x row, with the
measured sizes) and decides the release: it fails if a row failed, if a row the
release needs (``smoke.rows.RELEASE_ROWS``) has no report, or if a row that must
execute skipped a check in ``smoke.stages.MUST_EXECUTE``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smoke import pipeline, stages
from smoke.errors import EXIT_FAILED, GateError
from smoke.report import SCHEMA, append_to_step_summary
from smoke.rows import RELEASE_ROWS, ROWS
from smoke.stages import MUST_EXECUTE

# The measured number shown beside a status, per declared check.
_SHOWN = {stages.DATA_FILE: ("data_file_bytes", "{} B"), stages.DELEGATE: ("pte_bytes", "{} B"),
          stages.WEIGHTS: ("difference_bytes", "+{} B over weightless"),
          stages.RUN: ("max_abs_diff", "max abs diff {}")}


class ReportError(GateError):
    pass


def load_reports(folder: Path) -> dict[str, dict[str, Any]]:
    if not folder.is_dir():
        raise ReportError(f"reports folder {str(folder)!r} does not exist; pass the folder the rows wrote with --report-dir")
    reports: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ReportError(f"{path} is not a JSON report ({exc}); remove it or fix the row that wrote it") from exc
        if not isinstance(data, dict) or data.get("mode") != "row":
            continue
        if data.get("schema") != SCHEMA:
            raise ReportError(f"{path} has report schema {data.get('schema')!r}, this gate reads {SCHEMA}: rerun that row")
        if data["row"] in reports:
            raise ReportError(f"two reports for row {data['row']!r} ({path} and another); keep one per row")
        reports[data["row"]] = data
    return reports


@dataclass
class Verdict:
    ok: bool
    problems: list[str]
    table: str


def _cell(check: dict[str, Any] | None) -> str:
    if check is None:
        return "—"
    cell = check["status"].upper()
    key, template = _SHOWN.get(pipeline.declared(check["name"]), (None, ""))
    value = (check.get("measured") or {}).get(key) if key else None
    if value is not None:
        cell += " " + template.format(f"{value:.2g}" if isinstance(value, float) else value)
    return cell


def judge(reports: dict[str, dict[str, Any]], release: str) -> Verdict:
    needed = RELEASE_ROWS[release]
    rows = [r for r in needed] + sorted(r for r in reports if r not in needed)
    problems = []
    for row in rows:
        data = reports.get(row)
        if data is None:
            problems.append(f"{row}: no report (the {release} release needs this row)")
            continue
        if data["verdict"] != "pass":
            failed = [c["name"] for c in data["checks"] if c["status"] == "fail"]
            problems.append(f"{row}: failed ({', '.join(failed)})")
        if row in ROWS and ROWS[row].execution_required:
            by_name = {c["name"]: c for c in data["checks"]}
            for name in MUST_EXECUTE:
                status = by_name.get(name, {}).get("status")
                if status != "pass":
                    problems.append(f"{row}: {name!r} is {status or 'absent'}, and this row must execute it")
    names: list[str] = []
    for data in (reports[r] for r in rows if r in reports):
        for check in data["checks"]:
            if check["name"] not in names:
                names.append(check["name"])
    header = "| check | " + " | ".join(rows) + " |"
    lines = [header, "|---" * (len(rows) + 1) + "|"]
    lines.append("| wheel | " + " | ".join((reports[r]["wheel"]["file"] if r in reports else "no report") for r in rows) + " |")
    for name in names:
        cells = []
        for row in rows:
            data = reports.get(row)
            check = next((c for c in data["checks"] if c["name"] == name), None) if data else None
            cells.append(_cell(check))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **verdict** | " + " | ".join((reports[r]["verdict"].upper() if r in reports else "MISSING") for r in rows) + " |")
    return Verdict(not problems, problems, "\n".join(lines) + "\n")


def summary(folder: Path, release: str, output: Path | None = None) -> int:
    verdict = judge(load_reports(folder), release)
    print(verdict.table)
    for problem in verdict.problems:
        print(f"FAIL {problem}")
    line = f"summary ({release} release, {folder}): {'PASSED' if verdict.ok else 'FAILED'}"
    print(line)
    text = verdict.table + "\n" + "".join(f"- FAIL {p}\n" for p in verdict.problems) + f"\n**{line}**\n"
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
    append_to_step_summary(text)
    return 0 if verdict.ok else EXIT_FAILED
