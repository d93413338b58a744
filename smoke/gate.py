"""The parent: read the wheel, build the environment, run the child, print the verdict.

The parent imports nothing heavy (no torch, no executorch): it runs in nox's own
interpreter and reads the child's record file as it grows.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from smoke import download, environment, installed, owned, pairing, pipeline, proc, report, shipped, wheel as wheels
from smoke.report import Run
from smoke.errors import EXIT_FAILED, Interrupted
from smoke.results import CheckResult, all_passed, failed, skipped, summary_line
from smoke.rows import Row

REPO = Path(__file__).resolve().parent.parent


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
    # Overlap: the environment checks read torch and the runtime in the export child, and the
    # negative control's process starts with the child. False: the old, serial way (for the benchmark).
    overlap: bool = True
    report_dir: Path | None = None


def say(text: str) -> None:
    print(text, flush=True)


def emit(run: Run, result: CheckResult) -> CheckResult:
    run.results.append(result)
    say(result.line())
    return result


@contextmanager
def phase(run: Run, name: str):
    """A phase of the parent: printed when it starts and with its duration, and recorded."""
    say(f"  ... {name}")
    start = time.monotonic()
    try:
        yield
    finally:
        seconds = round(time.monotonic() - start, 3)
        run.phases.append({"name": name, "seconds": seconds})
        say(f"  ... {name}: {seconds:.1f} s")


@dataclass
class ChildOutcome:
    facts: dict[str, Any]
    finished: bool
    returncode: int | None
    timed_out: bool
    last_phase: str | None
    bad_lines: list[str]
    probe: dict[str, Any] | None = None
    stopped: bool = False  # the parent ended it (fail-fast on a check it judged)


class StopChild(Exception):
    """Raised by a callback to end the child now (fail-fast)."""


def _parse_line(line: str, outcome: ChildOutcome, on_check: Callable[[CheckResult], None],
                on_phase: Callable[[str, float], None] = lambda name, seconds: None,
                on_probe: Callable[[dict], None] = lambda facts: None) -> None:
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
            on_phase(str(record.get("name")), record.get("seconds"))
    elif kind == "facts":
        outcome.facts = {k: v for k, v in record.items() if k != "kind"}
    elif kind == "probe":
        outcome.probe = {k: v for k, v in record.items() if k != "kind"}
        on_probe(outcome.probe)
    elif kind == "end":
        outcome.finished = True


def run_child(cmd: list[str], record: Path, log: Path, timeout: float, env: dict[str, str],
              on_check: Callable[[CheckResult], None],
              on_phase: Callable[[str, float], None] = lambda name, seconds: None,
              on_probe: Callable[[dict], None] = lambda facts: None) -> ChildOutcome:
    """Start the child and follow its record file until it exits or its time is up."""
    outcome = ChildOutcome({}, False, None, False, None, [])
    record.touch()
    with log.open("wb") as log_handle, record.open("r", encoding="utf-8") as reader:
        child = proc.start(cmd, stdout=log_handle, stderr=subprocess.STDOUT, env=env, cwd=REPO, own_group=True)
        try:
            _follow(child, reader, outcome, timeout, on_check, on_phase, on_probe)
        except BaseException:  # Ctrl-C, SIGTERM (Interrupted), or an error of ours: the child must not outlive us
            proc.end_group(child)
            raise
        outcome.returncode = child.returncode
    return outcome


def _follow(child, reader, outcome: ChildOutcome, timeout: float, on_check, on_phase, on_probe) -> None:
    """Read the record as it grows until the child exits, is stopped, or runs out of time."""
    deadline = time.monotonic() + timeout
    pending = ""
    while True:
        done = child.poll() is not None
        pending += reader.read()
        *lines, pending = pending.split("\n")
        if done and pending.strip():
            lines.append(pending)
        try:
            for line in lines:
                if line.strip():
                    _parse_line(line, outcome, on_check, on_phase, on_probe)
        except StopChild:
            outcome.stopped = True
            if not done:
                proc.end_group(child, grace=0)
            return
        if done:
            return
        if time.monotonic() > deadline:
            outcome.timed_out = True
            proc.end_group(child, grace=0)
            return
        time.sleep(0.2)


def judge_child(outcome: ChildOutcome, timeout: float, log: Path) -> CheckResult | None:
    """A child that crashed, hung or spoke garbage is a FAIL of its own, with its log's tail."""
    if outcome.stopped:
        return None  # the parent ended it, on a failure it has printed already
    where = f" during {outcome.last_phase!r}" if outcome.last_phase else ""
    tail = proc.file_tail(log)
    if outcome.timed_out:
        return failed(pipeline.CHILD_PROCESS.name, f"killed after the {timeout:g} s time limit{where} (--timeout to change it)")
    if outcome.bad_lines:
        return failed(pipeline.CHILD_PROCESS.name, f"wrote {len(outcome.bad_lines)} lines that are not check records, first: {outcome.bad_lines[0]!r}")
    if outcome.returncode and outcome.returncode < 0:
        sig = signal.Signals(-outcome.returncode).name
        return failed(pipeline.CHILD_PROCESS.name, f"ended by {sig}{where}; last output: {tail}")
    if not outcome.finished:
        return failed(pipeline.CHILD_PROCESS.name, f"exited {outcome.returncode}{where} before finishing; last output: {tail}")
    return None


def gate(row: Row, options: Options) -> int:
    """One row, start to verdict. The folders it takes (``smoke.owned``) are released however it ends."""
    held: list[owned.Owned] = []
    try:
        return _gate(row, options, held)
    except (KeyboardInterrupt, Interrupted):
        for folder in held:
            if (folder.path / "record.jsonl").exists():  # the work folder, kept as on any failure
                say(f"artifacts kept in {folder.path}")
        raise
    finally:
        for folder in held:
            if folder.created and folder.path.is_dir() and folder.unused:
                folder.remove()  # made by this run and never used: nothing is left behind
            else:
                folder.release()


def _gate(row: Row, options: Options, held: list) -> int:
    run = Run(row.name)
    start = time.monotonic()
    if options.report_dir is not None:
        report.check_writable(options.report_dir)
    report.check_step_summary()
    interpreter = wheels.probe_interpreter(options.python)
    path = options.wheel or download.default_wheel(row, interpreter, options.wheel_index, say)
    with phase(run, f"reading the wheel {path}"):
        wheel = wheels.read_wheel(path)
        wheels.check_machine(wheel, row)
        wheels.check_interpreter(wheel, interpreter)
        wheels.check_host(interpreter, row)
        constraints = pairing.constraints_for(wheel, options.constraints)
    run.wheel, run.wheel_size, run.wheel_sha256 = wheel.filename, wheel.size, wheel.sha256
    say(f"wheel: {wheel.filename}, {wheel.size} B, sha256 {wheel.sha256}; executorch {wheel.version}; "
        f"constraints {constraints.relative_to(REPO) if constraints.is_relative_to(REPO) else constraints}")

    given_work = None
    if options.workdir is not None:  # refused now, before anything is built, if it is not the gate's
        given_work = owned.claim(options.workdir, "work folder", "--workdir")
        held.append(given_work)

    if not file_checks(run, row, wheel, options):
        return finish(run, options, None, start)

    env_options = environment.EnvOptions(
        location=options.env_dir or REPO / ".gate" / "envs" / row.name,
        constraints=constraints, wheelhouse=options.wheelhouse, no_deps=options.no_deps,
        torch_from=options.torch_from, torch_index=options.torch_index, backend=options.venv_backend, reuse=options.reuse_env,
    )
    with phase(run, f"building the environment in {env_options.location} ({options.venv_backend}, {interpreter.describe()})"):
        env = environment.build(wheel, interpreter, env_options, say)
    held.append(env.owned)
    run.torch_source = env.torch_source
    say(f"torch from {env.torch_source}")

    child_env = {**environment.env_without_pythonpath(), "PYTHONPATH": str(REPO), "PATH": f"{env.bin}{os.pathsep}{os.environ.get('PATH', '')}",
                 "PYTHONUNBUFFERED": "1"}
    if not options.overlap:
        with phase(run, "probing the environment in a process of its own"):
            facts = installed.run_probe(env.python, child_env, REPO)
        if not installed_checks(run, row, wheel, facts, options):
            return finish(run, options, None, start)

    if given_work is not None:
        work = given_work
        work.empty()  # an earlier run's records are never read as this run's
    else:
        work = owned.claim(Path(tempfile.mkdtemp(prefix=f"gate-{row.name}-")), "work folder", "--workdir")
        held.append(work)
    workdir = work.path
    record, log = workdir / "record.jsonl", workdir / "child.log"
    record.write_text("")
    cmd = [str(env.python), "-m", "smoke.child", row.name, str(workdir), str(record)]
    if options.fail_fast:
        cmd.append("--fail-fast")
    if not options.overlap:
        cmd.append("--no-overlap")
    say(f"running the child in {workdir} (time limit {options.timeout:g} s)")

    def on_probe(facts: dict) -> None:
        if options.overlap and not installed_checks(run, row, wheel, facts, options):
            raise StopChild

    outcome = run_child(cmd, record, log, options.timeout, child_env, lambda r: emit(run, r),
                        lambda name, seconds: run.phases.append({"name": name, "seconds": seconds}), on_probe)
    run.facts = outcome.facts
    if options.overlap and outcome.probe is None:
        for check in pipeline.for_row(row, pipeline.ENVIRONMENT):
            emit(run, skipped(check.name, "not run: the child ended before it reported torch and the runtime (see child process)"))
    verdict = judge_child(outcome, options.timeout, log)
    if verdict is not None:
        emit(run, verdict)
    return finish(run, options, work, start)


def file_checks(run: Run, row: Row, wheel: wheels.Wheel, options) -> bool:
    """The checks on the wheel file itself (``smoke.shipped``); False when fail-fast stops the run."""
    with phase(run, "checking what the wheel ships"):
        run.libraries = shipped.read_libraries(wheel)
        for check in pipeline.for_row(row, pipeline.FILE):
            result = emit(run, pipeline.run_check(check, wheel, row, run.libraries))
            if not result and options.fail_fast:
                return False
    return True


def installed_checks(run: Run, row: Row, wheel: wheels.Wheel, facts: dict, options: Options) -> bool:
    """The checks on the installed environment (``smoke.installed``); False when fail-fast stops the run."""
    for check in pipeline.for_row(row, pipeline.ENVIRONMENT):
        result = emit(run, pipeline.run_check(check, wheel, row, facts, run.libraries))
        if not result and options.fail_fast:
            return False
    return True


def finish(run: Run, options, work: "owned.Owned | None", start: float) -> int:
    facts = run.facts
    if facts:
        device = facts.get("device") or {}
        say(f"executorch {facts.get('executorch')}, torch {facts.get('torch')} (from {run.torch_source}), "
            f"Python {facts.get('python')}, device {device.get('device_name', 'none')}{' ' + device['sm'] if 'sm' in device else ''}")
    ok = all_passed(run.results)
    run.exit_code = 0 if ok else EXIT_FAILED
    run.seconds = time.monotonic() - start
    if options.report_dir is not None:
        written = report.write(run, options.report_dir)
        say(f"reports: {', '.join(str(p) for p in written)}")
    summary = report.append_step_summary(run)
    if summary is not None:
        say(f"step summary: appended to {summary}")
    if work is not None:
        if ok and not options.keep and options.workdir is None:
            work.remove()  # a temporary folder this run made and marked
        else:
            say(f"artifacts kept in {work.path}")
    say(f"{run.stem}: {'PASSED' if ok else 'FAILED'}: {summary_line(run.results)} in {run.seconds:.1f} s")
    return run.exit_code
