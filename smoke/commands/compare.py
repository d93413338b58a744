"""``nox -s compare -- OLD.whl NEW.whl [--row ROW]``: what changed between a release that worked and a candidate.

Both wheels are judged on one row (``--row``, else one fitting both), each on its own:

- **checks**: each verdict on OLD and NEW side by side (``regressed``); by default each wheel runs its whole
  row in its own environment; ``--static-only`` runs the file checks alone;
- **static drift** (``smoke.engine.drift``): files, sizes, Requires-Dist, RUNPATH, symbols, platform policy;
- **runtime drift** (not with ``--static-only``): the seeded models' outputs, file sizes and times, NEW against OLD.

Exit 1 when a check regressed or outputs drifted past the tolerance; 0 otherwise; 2 when it cannot judge.
``--report-dir DIR`` writes ``DIR/compare-ROW.json`` and ``DIR/compare-ROW.md`` (``hold_reports``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, BinaryIO

from smoke import markup, paths, proc, report, stages
from smoke import options as opts
from smoke.checks import kinds, pipeline, shipped
from smoke.console import say
from smoke.engine import drift
from smoke.engine import row as gate
from smoke.errors import EXIT_FAILED, GateError
from smoke.readers import wheel as wheels
from smoke.rows import ROWS, Row, check_machine
from smoke.stages import CHILD_PROCESS, DATA_FILE, DELEGATE, EXECUTED, EXPORT, IMPORT_PHASE, PORTABLE, RUN, load_phase
from smoke.tensors import ATOL, RTOL

SCHEMA = 1
ENV_DIR = paths.ENVS / "compare"
# The row options passed on to both row runs, as given.
PASSED_ON = ("python", "wheelhouse", "no_deps", "torch_from", "torch_index", "venv_backend", "timeout")
# The checks whose outputs are set side by side, and the artifacts whose sizes are.
OUTPUT_CHECKS = (*RUN.names(), PORTABLE.name)
SIZES = tuple((f"{DELEGATE.of(m)}", "pte_bytes", f"{m} .pte") for m in stages.MODELS) + \
    tuple((f"{DATA_FILE.of(m)}", "data_file_bytes", f"{m} .ptd") for m in stages.MODELS) + \
    ((PORTABLE.name, "pte_bytes", "portable .pte"),)
TIMES = (IMPORT_PHASE, *EXPORT.names(), *(load_phase(m) for m in stages.MODELS))


class CompareError(GateError):
    pass


def choose_row(old: wheels.Wheel, new: wheels.Wheel, name: str | None) -> Row:
    """The row both wheels are judged on: the one named, or the first row of NEW's build that OLD fits too."""
    if name is not None:
        row = ROWS[name]
        check_machine(old, row)
        check_machine(new, row)
        return row
    fits = lambda row, wheel: row.machine in wheel.linux_machines or "any" in wheel.linux_machines  # noqa: E731
    rows = [row for row in ROWS.values() if fits(row, new)]
    # NEW's kind of build first (a CPU build: the CPU rows), as inspect chooses
    rows.sort(key=lambda row: row.backend.not_its_build(new) is not None)
    fitting = [row for row in rows if fits(row, old)]
    if not fitting:
        raise CompareError(f"OLD {old.filename!r} is built for {', '.join(sorted(old.machines))} and NEW {new.filename!r} "
                           f"for {', '.join(sorted(new.machines))}: compare two wheels of one machine")
    return fitting[0]


# --- the checks, side by side ---------------------------------------------------------------------


def file_results(row: Row, wheel: wheels.Wheel, libraries) -> list[dict[str, Any]]:
    """The row's wheel-file checks on one wheel, as the report holds them (nothing printed)."""
    return [kinds.run_file(check, wheel, row, libraries).to_json() for check in pipeline.file_checks(row)]


# The results a row reports only when they fail (smoke.checks.pipeline.result_names): not there is not failed.
ONLY_ON_FAILURE = (CHILD_PROCESS.name, EXECUTED.name)


def regressed(name: str, old: str | None, new: str | None) -> bool:
    """Whether NEW regressed on one check, by the two statuses (None: not reported).

    A check OLD passed that NEW failed, skipped or did not report regressed (after a crash, NEW was never judged on
    it). One reported only on failure regresses where NEW fails it and OLD did not; NEW's child process failing
    regresses even where OLD's failed too."""
    if name in ONLY_ON_FAILURE:
        return new == "fail" and (name == CHILD_PROCESS.name or old != "fail")
    return old == "pass" and new in ("fail", "skip", None)


def side_by_side(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per check name, in NEW's order then OLD's leftovers, each marked where NEW regressed (``regressed``)."""
    before = {r["name"]: r for r in old}
    after = {r["name"]: r for r in new}
    names = list(after) + [n for n in before if n not in after]
    rows = []
    for name in names:
        o, n = before.get(name), after.get(name)
        old_status, new_status = (o["status"] if o else None), (n["status"] if n else None)
        rows.append({"name": name, "old": old_status, "new": new_status,
                     "regression": regressed(name, old_status, new_status),
                     "old_reason": o["reason"] if o else None, "new_reason": n["reason"] if n else None})
    return rows


DEVICE_CODE = "device code"  # the CUDA rows' check (smoke.backends.cuda_checks): its measured holds each library's code


def device_code_drift(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The CUDA device code (machine code per sm, PTX) of each library, as the two ``device code`` checks read it;
    None where neither side ran that check (a CPU row) or neither read any library."""
    def libraries(results: list[dict[str, Any]]) -> dict[str, dict[str, list[str]]] | None:
        found = next((r for r in results if isinstance(r, dict) and r.get("name") == DEVICE_CODE), None)
        measured = (found or {}).get("measured")
        listed = measured.get("libraries") if isinstance(measured, dict) else None
        if not isinstance(listed, dict):
            return None
        return {str(path): {key: [str(a) for a in code.get(key) or []] for key in ("sm", "ptx")}
                for path, code in listed.items() if isinstance(code, dict)}

    before, after = libraries(old), libraries(new)
    if before is None and after is None:
        return None
    before, after = before or {}, after or {}
    changed = [{"library": path, "old": before[path], "new": after[path]}
               for path in sorted(set(before) & set(after)) if before[path] != after[path]]
    return {"added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)), "changed": changed}


# --- the runtime: each wheel's row, then its report read ------------------------------------------


def row_arguments(args) -> list[str]:
    return [word for dest in PASSED_ON for word in opts.BY_DEST[dest].as_argument(getattr(args, dest))]


def run_row(row: Row, which: str, wheel: wheels.Wheel, env_dir: Path, work: Path, passed: list[str]) -> dict[str, Any]:
    """``python -m smoke ROW WHEEL`` in its own environment; its JSON report, read whole. Its output goes to a log
    in ``work``, its artifacts in a work folder there; a run that could not judge (exit 2 or a signal) is this command's
    error, naming the log."""
    reports, log = work / f"{which}-reports", work / f"{which}.log"
    cmd = [sys.executable, "-m", "smoke", row.name, str(wheel.path), "--env-dir", str(env_dir / f"{which}-{row.name}"),
           "--reuse-env", "--report-dir", str(reports), "--workdir", str(work / f"{which}-work"), *passed]
    say(f"running {row.name} on {which.upper()} {wheel.filename} (log: {log})")
    start = time.monotonic()
    with open(log, "wb") as out, open(log, "rb") as written:
        process = proc.start(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=paths.HOME,
                             env={**os.environ, paths.INVOKED_FROM: str(paths.invoked_from())})
        pending = bytearray()
        try:
            code = None
            while code is None:  # the row's phases said as its log gets them (a row takes a minute: issue 36)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = process.wait(timeout=0.5)
                _relay_phases(written, pending, which)
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): the row ends what it started on SIGTERM (its child, the child's helpers),
            # which a SIGKILL would leave running; waited for, then killed only if it does not end.
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            raise
    said = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    if code not in (0, EXIT_FAILED):
        error = next((line for line in reversed(said) if line.startswith("ERROR ")), said[-1] if said else "no output")
        raise CompareError(f"the {row.name} row could not judge {which.upper()} {wheel.filename!r} (exit {code}): "
                           f"{error.removeprefix('ERROR ')} (its log: {log})")
    say(f"  {which.upper()}: {said[-1] if said else ''} ({time.monotonic() - start:.1f} s)")
    path = reports / f"{row.name}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CompareError(f"the {row.name} row on {which.upper()} wrote no readable report {str(path)!r} ({exc}); "
                           f"its log: {log}") from None


PHASE = "  ... "  # how a row prints a phase as it starts and ends (smoke.console.phase)


def _relay_phases(log: BinaryIO, pending: bytearray, which: str) -> None:
    """The phase lines the row's log got since the last call, said as ``  OLD ... export (weighted)``; a line not yet
    ended is kept in ``pending`` for the next call."""
    pending += log.read()
    *ended, rest = pending.split(b"\n")
    pending[:] = rest
    for raw in ended:
        text = raw.decode(errors="replace").rstrip()
        if text.startswith(PHASE):
            say(f"  {which.upper()}{text[1:]}")


def _checks(run: dict[str, Any]) -> list[dict[str, Any]]:
    checks = run.get("checks") if isinstance(run, dict) else None
    return [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []


def _measured(run: dict[str, Any], name: str) -> dict[str, Any]:
    found = next((r for r in _checks(run) if r.get("name") == name), None)
    measured = (found or {}).get("measured")
    return measured if isinstance(measured, dict) else {}


def _status(run: dict[str, Any], name: str) -> str | None:
    found = next((r for r in _checks(run) if r.get("name") == name), None)
    return str(found.get("status")) if found else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def _outputs(value: Any) -> list[list[float]] | None:
    """Recorded outputs (a list of flattened outputs, each a list of numbers, NaN and the infinities by name), or None
    if they are not that."""
    if not isinstance(value, list) or not all(isinstance(out, list) for out in value):
        return None
    read = [[report.NOT_FINITE[x] if isinstance(x, str) and x in report.NOT_FINITE else x for x in out] for out in value]
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for out in read for x in out):
        return None
    return read


def _float(value: float | int) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer past float's range (a report's JSON may hold one)
        return math.inf if value > 0 else -math.inf


def output_drift(old: list, new: list) -> tuple[float | None, bool]:
    """(max abs diff, within tolerance) of two lists of flattened outputs, judged as ``torch.testing.assert_close``
    judges NEW against OLD: |new - old| <= atol + rtol * |old| for every value, NaN equal to NaN, an infinity equal
    only to itself. The diff is None when the outputs' counts or lengths differ (then not within tolerance)."""
    if len(old) != len(new) or any(len(a) != len(b) for a, b in zip(old, new)):
        return None, False
    worst, close = 0.0, True
    for a_out, b_out in zip(old, new):
        for a, b in zip(a_out, b_out):
            a, b = _float(a), _float(b)
            if a == b or (math.isnan(a) and math.isnan(b)):
                continue
            diff = abs(b - a)
            if math.isnan(diff):  # one side NaN, or infinities of opposite signs
                diff = math.inf
            worst = max(worst, diff)
            # an infinity is close only to itself (OLD's infinity made the tolerance infinite: any NEW was close)
            close = close and not math.isinf(a) and not math.isinf(b) and diff <= ATOL + RTOL * abs(a)
    return worst, close


def _ratio(old: float | None, new: float | None) -> float | None:
    return round(new / old, 3) if old is not None and new is not None and old > 0 else None


def runtime_drift(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The two row reports' child results set side by side (``docs/compare-schema.json``, ``runtime``)."""
    outputs = []
    for name in OUTPUT_CHECKS:
        a, b = _measured(old, name), _measured(new, name)
        entry = {"check": name, "old_vs_eager": _number(a.get("max_abs_diff")), "new_vs_eager": _number(b.get("max_abs_diff")),
                 "max_abs_diff": None, "within_tolerance": None, "not_compared": None}
        before, after = _outputs(a.get("outputs")), _outputs(b.get("outputs"))
        if before is None or after is None:
            side, report = ("OLD", old) if before is None else ("NEW", new)
            entry["not_compared"] = f"no outputs recorded on {side} (the check is {_status(report, name) or 'absent'})"
        else:
            diff, close = output_drift(before, after)
            entry["max_abs_diff"] = diff if diff is not None and math.isfinite(diff) else None
            entry["within_tolerance"] = close
            if diff is None:
                entry["not_compared"] = (f"the outputs' shapes differ: OLD {[len(o) for o in before]} values, "
                                         f"NEW {[len(o) for o in after]}")
        outputs.append(entry)
    sizes = []
    for name, key, label in SIZES:
        old_size, new_size = (v if isinstance(v, int) and not isinstance(v, bool) else None
                              for v in (_measured(old, name).get(key), _measured(new, name).get(key)))
        sizes.append({"artifact": label, "old": old_size, "new": new_size, "ratio": _ratio(old_size, new_size)})

    def phases(run: dict[str, Any]) -> dict[str, float | None]:  # keyed by each phase's name; a name that is no text is none
        found = run.get("phases") if isinstance(run, dict) else None
        return {p["name"]: _number(p.get("seconds")) for p in found
                if isinstance(p, dict) and isinstance(p.get("name"), str)} if isinstance(found, list) else {}

    old_times, new_times = phases(old), phases(new)
    times = [{"phase": name, "old": old_times.get(name), "new": new_times.get(name),
              "ratio": _ratio(old_times.get(name), new_times.get(name))} for name in TIMES]
    versions = {side: (run.get("versions") if isinstance(run.get("versions"), dict) else None)
                for side, run in (("old", old), ("new", new))}
    return {"tolerance": {"rtol": RTOL, "atol": ATOL}, "outputs": outputs, "sizes": sizes, "times": times, "versions": versions}


# --- the verdict, the lines and the files ---------------------------------------------------------


def regressions(checks: list[dict[str, Any]], runtime: dict[str, Any] | None) -> list[str]:
    """Each regression in a line: NEW's child first (it explains the checks NEW did not reach), then each check that
    failed or was skipped on NEW, then those NEW did not report, in one line; then the outputs that drifted."""
    found: list[str] = []
    for c in checks:
        if not c["regression"]:
            continue
        if c["name"] == CHILD_PROCESS.name:
            also = ", as on OLD" if c["old"] == "fail" else ""
            found.insert(0, f"NEW's child did not reach its end: {c['name']}: FAIL on NEW{also}: {c['new_reason']}")
        elif c["name"] in ONLY_ON_FAILURE:
            found.append(f"check regressed: {c['name']}: FAIL on NEW, not on OLD: {c['new_reason']}")
        elif c["new"] == "fail":
            found.append(f"check regressed: {c['name']}: PASS on OLD, FAIL on NEW: {c['new_reason']}")
        elif c["new"] == "skip":
            found.append(f"check not run on NEW: {c['name']}: PASS on OLD, SKIP on NEW: {c['new_reason']}")
    unreported = [c["name"] for c in checks if c["regression"] and c["new"] is None]
    if unreported:
        found.append(f"checks not reported on NEW: {len(unreported)}, each PASS on OLD: {', '.join(unreported)}")
    for entry in (runtime or {}).get("outputs", []):
        if entry["within_tolerance"] is False:
            diff = entry["max_abs_diff"]
            how = (f"max abs diff {diff:.3g}" if diff is not None else entry["not_compared"] or "a value that is not finite")
            found.append(f"outputs drift: {entry['check']}: NEW differs from OLD past rtol {RTOL:g}, atol {ATOL:g}: {how}")
    return found


def _wheel_json(wheel: wheels.Wheel) -> dict[str, Any]:
    return {"file": wheel.filename, "version": str(wheel.version), "size": wheel.size, "sha256": wheel.sha256}


def markdown(data: dict[str, Any]) -> str:
    """The comparison for the step summary: every text from a wheel or a message escaped (``smoke.markup``)."""
    cell = markup.text
    verdict = "REGRESSED" if data["regressions"] else "NO REGRESSION"
    lines = [f"### compare {cell(data['row'])}: {verdict} ({cell(data['old']['file'])} → {cell(data['new']['file'])})", ""]
    lines += [f"- {cell(r)}" for r in data["regressions"]] + ([""] if data["regressions"] else [])
    lines += ["| check | OLD | NEW | NEW's reason |", "|---|---|---|---|"]
    for c in data["checks"]:
        mark = " **regressed**" if c["regression"] else ""
        lines.append(f"| {cell(c['name'])} | {cell(_word(c['old']))} | {cell(_word(c['new']))}{mark} | "
                     f"{cell(c['new_reason'] or '')} |")
    lines += ["", "| static drift |", "|---|"] + [f"| {cell(line)} |" for line in drift.lines(data["static"])] + \
        ([] if drift.lines(data["static"]) else ["| none |"])
    runtime = data["runtime"]
    if runtime is not None:
        lines += ["", f"| runtime (rtol {RTOL:g}, atol {ATOL:g}) | OLD | NEW | NEW/OLD |", "|---|---|---|---|"]
        for entry in runtime["outputs"]:
            moved = _moved(entry).replace("PAST", "**past**")
            lines.append(f"| outputs: {cell(entry['check'])} | vs eager {_num(entry['old_vs_eager'])} | "
                         f"vs eager {_num(entry['new_vs_eager'])} | {cell(moved)} |")
        for entry in runtime["sizes"]:
            lines.append(f"| size: {cell(entry['artifact'])} | {_num(entry['old'])} B | {_num(entry['new'])} B | {_num(entry['ratio'])} |")
        for entry in runtime["times"]:
            lines.append(f"| time: {cell(entry['phase'])} | {_num(entry['old'])} s | {_num(entry['new'])} s | {_num(entry['ratio'])} |")
    return "\n".join(lines) + "\n"


def _word(status: str | None) -> str:
    return "NOT REPORTED" if status is None else status.upper()


def _moved(entry: dict[str, Any]) -> str:
    """How far NEW's outputs moved from OLD's, or why they were not set side by side."""
    diff = entry["max_abs_diff"]
    within = "within" if entry["within_tolerance"] else "PAST"
    if entry["not_compared"]:
        return entry["not_compared"] + ("" if entry["within_tolerance"] is None else f" ({within} tolerance)")
    return f"NEW vs OLD max abs diff {'not finite' if diff is None else f'{diff:.3g}'} ({within} rtol {RTOL:g}, atol {ATOL:g})"


def _num(value) -> str:
    return "–" if value is None else f"{value:.3g}" if isinstance(value, float) else str(value)


def print_lines(data: dict[str, Any]) -> None:
    for c in data["checks"]:
        if c["old"] != c["new"]:
            say(f"check {c['name']}: {_word(c['old'])} -> {_word(c['new'])}"
                f"{' (REGRESSION)' if c['regression'] else ''}: {c['new_reason'] or c['old_reason']}")
    same = sum(1 for c in data["checks"] if c["old"] == c["new"])
    say(f"checks: {same} of {len(data['checks'])} with the same verdict on OLD and NEW")
    static = drift.lines(data["static"])
    for line in static:
        say(f"drift: {line}")
    if not static:
        say("drift: none in the files, requirements, RUNPATHs, exported symbols or platform policy")
    runtime = data["runtime"]
    if runtime is not None:
        for e in runtime["outputs"]:
            say(f"outputs {e['check']}: {_moved(e)}; vs eager OLD {_num(e['old_vs_eager'])}, NEW {_num(e['new_vs_eager'])}")
        say("sizes: " + "; ".join(f"{e['artifact']} {_num(e['old'])} -> {_num(e['new'])} B" for e in runtime["sizes"]))
        say("times NEW/OLD: " + "; ".join(f"{e['phase']} {_num(e['old'])} -> {_num(e['new'])} s (x{_num(e['ratio'])})"
                                         for e in runtime["times"]))


# How each file compare writes begins: one found there that begins otherwise is not the gate's, and is left alone.
OWN_STARTS = {".json": b'{\n  "schema": ', ".md": b"### compare "}


def report_paths(folder: Path, row: str) -> list[Path]:
    return [folder / f"compare-{row}.json", folder / f"compare-{row}.md"]


def hold_reports(folder: Path, row: str) -> contextlib.AbstractContextManager[None]:
    """The row's two reports in ``folder``, held by this compare from before any work until they are written: a
    second compare of the row into the folder meanwhile is refused at once (one ERROR line, exit 2) instead of both
    writing over each other's reports (``gate.hold_reports``, lock ``.compare-ROW.lock``)."""
    return gate.hold_reports(folder, f"compare-{row}")


def check_targets(folder: Path, row: str) -> None:
    """Refuse, before any work, a report path where something the gate did not write is (a link, a folder, a
    device, a file that is not an earlier comparison): the gate replaces its own reports only."""
    for path in report_paths(folder, row):
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise CompareError(f"report {str(path)!r} cannot be written ({exc.strerror or exc}): pass another --report-dir") from None
        start = OWN_STARTS[path.suffix]
        if stat.S_ISREG(info.st_mode):
            try:
                with open(path, "rb") as handle:
                    if handle.read(len(start)) == start:
                        continue
            except OSError as exc:
                raise CompareError(f"report {str(path)!r} cannot be read to see whose it is ({exc.strerror or exc})") from None
        what = ("a link" if stat.S_ISLNK(info.st_mode) else "a folder" if stat.S_ISDIR(info.st_mode) else
                "a file the gate did not write" if stat.S_ISREG(info.st_mode) else "not a regular file")
        raise CompareError(f"report {str(path)!r} is {what}, which the gate will not replace: remove it, or pass another --report-dir")


def write_reports(data: dict[str, Any], folder: Path) -> list[Path]:
    """DIR/compare-ROW.json and .md, each whole or not at all: written beside its place and renamed onto it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CompareError(f"report folder {str(folder)!r} cannot be made ({exc.strerror or exc}): pass another --report-dir") from None
    check_targets(folder, data["row"])
    json_path, md_path = report_paths(folder, data["row"])
    for path, text in ((json_path, json.dumps(data, indent=2) + "\n"), (md_path, markdown(data))):
        partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
        try:
            with open(partial, "x", encoding="utf-8") as handle:
                handle.write(markup.redact(text))
            os.replace(partial, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise CompareError(f"report {str(path)!r} could not be written ({exc.strerror or exc}): pass another --report-dir") from None
    return [json_path, md_path]


def _read(path: Path, which: str) -> wheels.Wheel:
    """A wheel refused by the gate's reader is one ERROR line that says which of the two it is."""
    try:
        return wheels.read_wheel(path)
    except GateError as exc:
        raise CompareError(f"{which}: {exc}") from None


def compare(old_path: Path, new_path: Path, row_name: str | None, static_only: bool, report_dir: Path | None,
            env_dir: Path | None, passed: list[str]) -> int:
    if report_dir is not None:
        report.check_writable(report_dir)
    report.check_step_summary()
    start = time.monotonic()
    old, new = _read(old_path, "OLD"), _read(new_path, "NEW")
    row = choose_row(old, new, row_name)
    with contextlib.ExitStack() as held:
        if report_dir is not None:
            held.enter_context(hold_reports(report_dir, row.name))  # one compare at a time writes them
            check_targets(report_dir, row.name)  # before any work: nothing the gate did not write is replaced
        return _compare(old, new, row, static_only, report_dir, env_dir, passed, start)


def _compare(old: wheels.Wheel, new: wheels.Wheel, row: Row, static_only: bool, report_dir: Path | None,
             env_dir: Path | None, passed: list[str], start: float) -> int:
    say(f"OLD: {old.filename}, executorch {old.version}, sha256 {old.sha256}")
    say(f"NEW: {new.filename}, executorch {new.version}, sha256 {new.sha256}")
    how = "the wheel-file checks and static drift only (--static-only)" if static_only else "each wheel run whole, in its own environment"
    say(f"row: {row.name}; {how}")
    old_libs, new_libs = shipped.read_libraries(old), shipped.read_libraries(new)
    static = drift.static_drift(drift.read_side(old, old_libs), drift.read_side(new, new_libs))
    runtime = None
    if static_only:
        old_results, new_results = file_results(row, old, old_libs), file_results(row, new, new_libs)
        checks = side_by_side(old_results, new_results)
    else:
        work = Path(tempfile.mkdtemp(prefix=f"gate-compare-{row.name}-"))
        keep = True
        try:
            env = env_dir or ENV_DIR
            old_run = run_row(row, "old", old, env, work, passed)
            new_run = run_row(row, "new", new, env, work, passed)
            old_results, new_results = _checks(old_run), _checks(new_run)
            checks = side_by_side(old_results, new_results)
            runtime = runtime_drift(old_run, new_run)
            keep = bool(regressions(checks, runtime))
        finally:
            if keep:  # an error, an interrupt or a regression: what the rows wrote is there to look at
                say(f"the rows' logs, reports and artifacts are kept in {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)  # a folder this run made: the rows' logs, reports and work folders
    static["device_code"] = device_code_drift(old_results, new_results)
    data: dict[str, Any] = {"schema": SCHEMA, "mode": report.COMPARE, "row": row.name, "static_only": static_only,
            "old": _wheel_json(old), "new": _wheel_json(new), "checks": checks, "static": static, "runtime": runtime}
    data["regressions"] = regressions(checks, runtime)
    data["exit_code"] = EXIT_FAILED if data["regressions"] else 0
    data["seconds"] = round(time.monotonic() - start, 3)
    print_lines(data)
    if report_dir is not None:
        say(f"reports: {', '.join(str(p) for p in write_reports(data, report_dir))}")
    target = report.append_to_step_summary(markdown(data))
    if target is not None:
        say(f"step summary: appended to {target}")
    for line in data["regressions"]:
        say(f"REGRESSION {line}")
    say(f"compare {row.name}: {'REGRESSED' if data['regressions'] else 'no regression'}: {len(data['regressions'])} "
        f"regression(s), {len(drift.lines(static))} kind(s) of static drift, in {data['seconds']:.1f} s")
    return data["exit_code"]

