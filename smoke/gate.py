"""The parent: one row from start to verdict, stage by stage.

Read the wheel (``smoke.wheel``), run the file checks (``smoke.shipped`` and the backend's), build
the environment (``smoke.environment``), run the child (``smoke.follow``, ``smoke.child``) and judge
the environment on what it reports (``smoke.installed``), then write the reports (``smoke.report``)
and print the verdict. Which checks each stage runs is ``smoke.pipeline.for_row``.

The parent imports nothing heavy (no torch, no executorch): it runs in nox's own
interpreter and reads the child's record file as it grows.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path

from smoke import download, environment, installed, loaderenv, options as opts, owned, pairing, pipeline, report, shipped, stages, wheel as wheels
from smoke.console import emit, phase, say
from smoke.errors import EXIT_FAILED
from smoke.follow import StopChild, judge_child, run_child
from smoke.report import Run
from smoke.results import all_passed, skipped, summary_line
from smoke.rows import Row, check_host, check_machine

REPO = Path(__file__).resolve().parent.parent


def gate(row: Row, options: opts.Options) -> int:
    """One row, start to verdict. The folders it takes (``smoke.owned``: the work folder, the
    environment) are context managers on one stack, released however the run ends."""
    with contextlib.ExitStack() as stack:
        return _gate(row, options, stack)


def _said_kept(folder: owned.Owned) -> None:
    if (folder.path / "record.jsonl").exists():  # an interrupted run keeps its artifacts, as a failed one does
        say(f"artifacts kept in {folder.path}")


def _work_folder(stack: contextlib.ExitStack, path: Path) -> owned.Owned:
    return stack.enter_context(owned.held(owned.claim(path, "work folder", "--workdir"), interrupted=_said_kept))


def _gate(row: Row, options: opts.Options, stack: contextlib.ExitStack) -> int:
    run = Run(row.name)
    start = time.monotonic()
    if options.report_dir is not None:
        report.check_writable(options.report_dir)
    report.check_step_summary()
    interpreter = wheels.probe_interpreter(options.python)
    path = options.wheel or download.default_wheel(row, interpreter, options.wheel_index, say)
    with phase(run, f"reading the wheel {path}"):
        wheel = wheels.read_wheel(path)
        check_machine(wheel, row)
        wheels.check_interpreter(wheel, interpreter)
        check_host(interpreter, row)
        constraints = pairing.constraints_for(wheel, options.constraints)
    run.wheel, run.wheel_size, run.wheel_sha256 = wheel.filename, wheel.size, wheel.sha256
    say(f"wheel: {wheel.filename}, {wheel.size} B, sha256 {wheel.sha256}; executorch {wheel.version}; "
        f"constraints {constraints.relative_to(REPO) if constraints.is_relative_to(REPO) else constraints}")

    given_work = None
    if options.workdir is not None:  # refused now, before anything is built, if it is not the gate's
        given_work = _work_folder(stack, options.workdir)

    if not file_checks(run, row, wheel, options):
        return finish(run, options, None, start)

    env_options = environment.EnvOptions(env_dir=options.env_dir or REPO / ".gate" / "envs" / row.name,
                                         constraints=constraints, **opts.for_environment(options))
    with phase(run, f"building the environment in {env_options.env_dir} ({options.venv_backend}, {interpreter.describe()})"):
        env = stack.enter_context(environment.built(wheel, interpreter, env_options, say))
    run.torch_source = env.torch_source
    say(f"torch from {env.torch_source}")

    # One environment for every process in the built environment (the child passes it on to its own).
    loader = loaderenv.for_environment(env.python, REPO)
    run.loader_env = loader.to_json()
    say(loader.line())
    child_env = loader.env
    if not options.overlap:
        with phase(run, "probing the environment in a process of its own"):
            facts = installed.run_probe(env.python, child_env, REPO)
        if not installed_checks(run, row, wheel, facts, options):
            return finish(run, options, None, start)

    if given_work is not None:
        work = given_work
        work.empty()  # an earlier run's records are never read as this run's
    else:
        work = _work_folder(stack, Path(tempfile.mkdtemp(prefix=f"gate-{row.name}-")))
    workdir = work.path
    record, log = workdir / "record.jsonl", workdir / "child.log"
    record.write_text("")
    cmd = [str(env.python), "-m", "smoke.child", row.name, str(workdir), str(record), *opts.child_arguments(options)]
    say(f"running the child in {workdir} (time limit {options.timeout:g} s)")

    def on_probe(facts: dict) -> None:
        if options.overlap and not installed_checks(run, row, wheel, facts, options):
            raise StopChild

    outcome = run_child(cmd, record, log, options.timeout, child_env, lambda r: emit(run, r),
                        lambda name, seconds: run.phases.append({"name": name, "seconds": seconds}), on_probe)
    run.facts = outcome.facts
    if options.overlap and outcome.probe is None:
        for check in pipeline.for_row(row, stages.ENVIRONMENT):
            emit(run, skipped(check.name, "not run: the child ended before it reported torch and the runtime (see child process)"))
    verdict = judge_child(outcome, options.timeout, log)
    if verdict is not None:
        emit(run, verdict)
    return finish(run, options, work, start)


def file_checks(run: Run, row: Row, wheel: wheels.Wheel, options, libraries: shipped.Libraries | None = None) -> bool:
    """The checks on the wheel file itself (``smoke.shipped``); False when fail-fast stops the run.
    ``libraries``: the wheel's ELF files already read (``inspect`` reads them once for all its rows)."""
    with phase(run, "checking what the wheel ships"):
        run.libraries = libraries if libraries is not None else shipped.read_libraries(wheel)
        for check in pipeline.for_row(row, stages.FILE):
            result = emit(run, stages.run_check(check, wheel, row, run.libraries))
            if not result and options.fail_fast:
                return False
    return True


def installed_checks(run: Run, row: Row, wheel: wheels.Wheel, facts: dict, options: opts.Options) -> bool:
    """The checks on the installed environment (``smoke.installed``); False when fail-fast stops the run."""
    for check in pipeline.for_row(row, stages.ENVIRONMENT):
        result = emit(run, stages.run_check(check, wheel, row, facts, run.libraries))
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
            work.discard = True  # a temporary folder this run made and marked: removed as the run ends
        else:
            say(f"artifacts kept in {work.path}")
    say(f"{run.stem}: {'PASSED' if ok else 'FAILED'}: {summary_line(run.results)} in {run.seconds:.1f} s")
    return run.exit_code
