"""The parent: read the wheel, build the environment, run the child, print the verdict.

The parent imports nothing heavy (no torch, no executorch): it runs in nox's own
interpreter and reads the child's record file as it grows.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from smoke import download, environment, installed, pairing, shipped, wheel as wheels
from smoke.errors import EXIT_FAILED
from smoke.results import CheckResult, all_passed, failed, summary_line
from smoke.rows import Row

REPO = Path(__file__).resolve().parent.parent
CHILD_CHECK = "child process"


@dataclass
class Options:
    wheel: Path | None
    wheel_index: str | None = None
    python: str | None = None
    constraints: Path | None = None
    wheelhouse: Path | None = None
    no_deps: bool = False
    torch_from: Path | None = None
    torch_index: str | None = None
    venv_backend: str = "virtualenv"
    env_dir: Path | None = None
    reuse_env: bool = False
    workdir: Path | None = None
    keep: bool = False
    fail_fast: bool = False
    timeout: float = 1800.0
    report: Path | None = None


@dataclass
class Run:
    """What one row's run decided and measured; the report is made from it."""

    row: str
    wheel: str = ""
    results: list[CheckResult] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    torch_source: str = ""


def say(text: str) -> None:
    print(text, flush=True)


def emit(run: Run, result: CheckResult) -> CheckResult:
    run.results.append(result)
    say(result.line())
    return result


@dataclass
class ChildOutcome:
    facts: dict[str, Any]
    finished: bool
    returncode: int | None
    timed_out: bool
    last_phase: str | None
    bad_lines: list[str]


def _parse_line(line: str, outcome: ChildOutcome, on_check: Callable[[CheckResult], None]) -> None:
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
    elif kind == "facts":
        outcome.facts = {k: v for k, v in record.items() if k != "kind"}
    elif kind == "end":
        outcome.finished = True


def run_child(cmd: list[str], record: Path, log: Path, timeout: float, env: dict[str, str],
              on_check: Callable[[CheckResult], None]) -> ChildOutcome:
    """Start the child and follow its record file until it exits or its time is up."""
    outcome = ChildOutcome({}, False, None, False, None, [])
    record.touch()
    with log.open("wb") as log_handle, record.open("r", encoding="utf-8") as reader:
        proc = subprocess.Popen(cmd, stdout=log_handle, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                start_new_session=True)
        deadline = time.monotonic() + timeout
        pending = ""
        while True:
            done = proc.poll() is not None
            chunk = reader.read()
            pending += chunk
            *lines, pending = pending.split("\n")
            for line in lines:
                if line.strip():
                    _parse_line(line, outcome, on_check)
            if done:
                if pending.strip():
                    _parse_line(pending, outcome, on_check)
                break
            if time.monotonic() > deadline:
                outcome.timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.2)
        outcome.returncode = proc.returncode
    return outcome


def judge_child(outcome: ChildOutcome, timeout: float, log: Path) -> CheckResult | None:
    """A child that crashed, hung or spoke garbage is a FAIL of its own, with its log's tail."""
    where = f" during {outcome.last_phase!r}" if outcome.last_phase else ""
    tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:]) if log.exists() else ""
    if outcome.timed_out:
        return failed(CHILD_CHECK, f"killed after the {timeout:g} s time limit{where} (--timeout to change it)")
    if outcome.bad_lines:
        return failed(CHILD_CHECK, f"wrote {len(outcome.bad_lines)} lines that are not check records, first: {outcome.bad_lines[0]!r}")
    if outcome.returncode and outcome.returncode < 0:
        sig = signal.Signals(-outcome.returncode).name
        return failed(CHILD_CHECK, f"ended by {sig}{where}; last output: {tail}")
    if not outcome.finished:
        return failed(CHILD_CHECK, f"exited {outcome.returncode}{where} before finishing; last output: {tail}")
    return None


def gate(row: Row, options: Options) -> int:
    run = Run(row.name)
    start = time.monotonic()
    interpreter = wheels.probe_interpreter(options.python)
    path = options.wheel or download.default_wheel(row, interpreter, options.wheel_index, say)
    say(f"reading {path}")
    wheel = wheels.read_wheel(path)
    run.wheel = wheel.filename
    wheels.check_machine(wheel, row)
    wheels.check_interpreter(wheel, interpreter)
    constraints = pairing.constraints_for(wheel, options.constraints)
    say(f"wheel: {wheel.filename}, {wheel.size} B, sha256 {wheel.sha256}; executorch {wheel.version}; "
        f"constraints {constraints.relative_to(REPO) if constraints.is_relative_to(REPO) else constraints}")

    libraries = shipped.read_libraries(wheel)
    for result in shipped.run(wheel, row, libraries):
        emit(run, result)
        if not result and options.fail_fast:
            return finish(run, options, None, start)

    env_options = environment.EnvOptions(
        location=options.env_dir or REPO / ".gate" / "envs" / row.name,
        constraints=constraints, wheelhouse=options.wheelhouse, no_deps=options.no_deps,
        torch_from=options.torch_from, torch_index=options.torch_index, backend=options.venv_backend, reuse=options.reuse_env,
    )
    say(f"building the environment in {env_options.location} ({options.venv_backend}, {interpreter.describe()})")
    t = time.monotonic()
    env = environment.build(wheel, interpreter, env_options, say)
    run.torch_source = env.torch_source
    say(f"environment ready in {time.monotonic() - t:.1f} s; torch from {env.torch_source}")

    child_env = {**environment.env_without_pythonpath(), "PYTHONPATH": str(REPO), "PATH": f"{env.bin}{os.pathsep}{os.environ.get('PATH', '')}",
                 "PYTHONUNBUFFERED": "1"}
    if not installed_checks(run, row, wheel, libraries, env.python, child_env, options):
        return finish(run, options, None, start)

    workdir = options.workdir or Path(tempfile.mkdtemp(prefix=f"gate-{row.name}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    record, log = workdir / "record.jsonl", workdir / "child.log"
    record.write_text("")
    cmd = [str(env.python), "-m", "smoke.child", row.name, str(workdir), str(record)]
    if options.fail_fast:
        cmd.append("--fail-fast")
    say(f"running the child in {workdir} (time limit {options.timeout:g} s)")
    outcome = run_child(cmd, record, log, options.timeout, child_env, lambda r: emit(run, r))
    run.facts = outcome.facts
    verdict = judge_child(outcome, options.timeout, log)
    if verdict is not None:
        emit(run, verdict)
    return finish(run, options, workdir, start)


def installed_checks(run: Run, row: Row, wheel: wheels.Wheel, libraries: shipped.Libraries, python: Path,
                     env: dict[str, str], options: Options) -> bool:
    """The checks on the installed environment; False when fail-fast stops the run."""
    say("  ... probing the environment (torch, the registered backends)")
    t = time.monotonic()
    facts = installed.run_probe(python, env, REPO)
    say(f"  ... probing the environment: {time.monotonic() - t:.1f} s")
    checks = [installed.check_torch_agrees, installed.check_delegate_registers]
    for check in checks:
        result = emit(run, shipped.timed(check, wheel, row, facts))
        if not result and options.fail_fast:
            return False
    if row.needs_cuda:
        result = emit(run, shipped.timed(installed.check_cuda_libraries_resolve, wheel, row, facts, libraries))
        if not result and options.fail_fast:
            return False
    return True


def finish(run: Run, options: Options, workdir: Path | None, start: float) -> int:
    facts = run.facts
    if facts:
        device = facts.get("device") or {}
        say(f"executorch {facts.get('executorch')}, torch {facts.get('torch')} (from {run.torch_source}), "
            f"Python {facts.get('python')}, device {device.get('device_name', 'none')}{' ' + device['sm'] if 'sm' in device else ''}")
    ok = all_passed(run.results)
    if options.report is not None:
        write_report(run, options.report, ok, time.monotonic() - start)
        say(f"report: {options.report}")
    if workdir is not None:
        if ok and not options.keep and options.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            say(f"artifacts kept in {workdir}")
    say(f"{run.row}: {'PASSED' if ok else 'FAILED'}: {summary_line(run.results)} in {time.monotonic() - start:.1f} s")
    return 0 if ok else EXIT_FAILED


REPORT_SCHEMA = 1


def write_report(run: Run, path: Path, ok: bool, seconds: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "schema": REPORT_SCHEMA,
        "row": run.row,
        "wheel": run.wheel,
        "torch_source": run.torch_source,
        "facts": run.facts,
        "checks": [r.to_json() for r in run.results],
        "verdict": "pass" if ok else "fail",
        "seconds": round(seconds, 1),
    }, indent=2, default=str) + "\n")
