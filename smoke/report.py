"""A run as data, and the files made from it: the JSON report, JUnit XML, the Markdown table.

One ``Run`` is what a row (or ``inspect``) decided and measured. The JSON report is
versioned by ``SCHEMA``; its fields are documented in the README ("Reports").
"""

from __future__ import annotations

import datetime
import json
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smoke.errors import GateError
from smoke.results import CheckResult, Status, counts

SCHEMA = 2
MODES = ("row", "inspect")


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
    libraries: Any = None  # smoke.elf.Libraries, read once and shared by the checks; not reported
    loader_env: dict[str, list[str]] | None = None  # smoke.loaderenv: what was removed from the caller's environment

    @property
    def verdict(self) -> str:
        return "pass" if all(self.results) else "fail"

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
        "versions": {"executorch": run.facts.get("executorch"), "torch": run.facts.get("torch"),
                     "python": run.facts.get("python")},
        "device": device.get("device_name") and {"name": device["device_name"], "sm": device.get("sm")},
        "torch_source": run.torch_source or None,
        "loader_environment": run.loader_env,
        "started": run.started,
        "seconds": round(run.seconds, 3),
        "phases": run.phases,
        "counts": {status.value: tally[status] for status in Status},
        "checks": [result.to_json() for result in run.results],
    }


def to_junit(run: Run) -> ET.ElementTree:
    """Each check is a test case; a FAIL a <failure>, a SKIP a <skipped>, each with its reason."""
    tally = counts(run.results)
    suite_name = f"executorch-gate.{run.stem}"
    suites = ET.Element("testsuites", name="executorch-gate", tests=str(len(run.results)),
                        failures=str(tally[Status.FAIL]), skipped=str(tally[Status.SKIP]), time=f"{run.seconds:.3f}")
    suite = ET.SubElement(suites, "testsuite", name=suite_name, tests=str(len(run.results)), failures=str(tally[Status.FAIL]),
                          errors="0", skipped=str(tally[Status.SKIP]), time=f"{run.seconds:.3f}", timestamp=run.started)
    properties = ET.SubElement(suite, "properties")
    for key, value in (("wheel", run.wheel), ("wheel_sha256", run.wheel_sha256), ("torch_source", run.torch_source)):
        if value:
            ET.SubElement(properties, "property", name=key, value=str(value))
    for result in run.results:
        case = ET.SubElement(suite, "testcase", classname=suite_name, name=result.name,
                             time=f"{result.seconds or 0:.3f}")
        if result.status is Status.FAIL:
            ET.SubElement(case, "failure", message=result.reason).text = result.reason
        elif result.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=result.reason)
        else:
            ET.SubElement(case, "system-out").text = result.reason
    tree = ET.ElementTree(suites)
    ET.indent(tree)
    return tree


def markdown(run: Run) -> str:
    lines = [f"### {run.stem}: {run.verdict.upper()} ({run.wheel})", "", "| check | status | reason |", "|---|---|---|"]
    for result in run.results:
        reason = result.reason.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {result.name} | {result.status.name} | {reason} |")
    return "\n".join(lines) + "\n"


def write(run: Run, folder: Path) -> list[Path]:
    """The JSON report and the JUnit XML, as DIR/ROW.json and DIR/ROW.xml."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path, xml_path = folder / f"{run.stem}.json", folder / f"{run.stem}.xml"
    json_path.write_text(json.dumps(to_json(run), indent=2, default=str) + "\n")
    to_junit(run).write(xml_path, encoding="utf-8", xml_declaration=True)
    return [json_path, xml_path]


def append_to_step_summary(text: str) -> Path | None:
    """Where GitHub Actions sets GITHUB_STEP_SUMMARY, append ``text`` to it."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(text)
    return Path(target)


def append_step_summary(run: Run) -> Path | None:
    """Append the run's table to the GitHub step summary, where there is one."""
    return append_to_step_summary(markdown(run) + "\n")


def check_step_summary() -> None:
    """Refuse, before any work, a GITHUB_STEP_SUMMARY that cannot be appended to."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise GateError(f"GITHUB_STEP_SUMMARY {target!r} cannot be written ({exc.strerror or exc}): "
                        "point it at a writable file, or unset it") from None


def check_writable(folder: Path) -> None:
    """Refuse, before any work, a report folder that cannot be written."""
    probe = folder
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        raise GateError(f"report folder {str(folder)!r} cannot be written ({str(probe)!r} is not a writable directory); "
                        "pass --report-dir with a folder you can write")
