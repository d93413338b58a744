"""The parent: one row from start to verdict, stage by stage.

Read the wheel (``smoke.readers.wheel``), run the file checks (``smoke.checks.shipped`` and the backend's), build
the environment (``smoke.environment.build``), run the child (``smoke.environment.follow``, ``smoke.child.run``) and judge
the environment on what it reports (``smoke.checks.installed``), then write the reports (``smoke.report``)
and print the verdict. Which checks each stage runs is ``smoke.checks.pipeline.for_row``.

The parent imports nothing heavy (no torch, no executorch): it runs in nox's own
interpreter and reads the child's record file as it grows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from smoke import options as opts
from smoke import paths, report, stages
from smoke.checks import exported, installed, pipeline, shipped
from smoke.console import emit, phase, say
from smoke.environment import build as environment
from smoke.environment import download, installer, loaderenv
from smoke.environment import folders as owned
from smoke.environment.follow import StopChild, judge_child, run_child
from smoke.errors import EXIT_FAILED, GateError, MachineError
from smoke.readers import pairing, settings
from smoke.readers import wheel as wheels
from smoke.report import Run
from smoke.results import Status, all_passed, failed, skipped, summary_line
from smoke.rows import HOST_SYSTEMS, Row, check_host, check_machine, child_data

REPO = paths.REPO
OWN = paths.GATE
RUNNERS = {"macos": "macos-14", "windows": "windows-latest"}  # .github/workflows/release-gate.yml
SYSTEM_WORDS = {"linux": "Linux", "macos": "macOS", "windows": "Windows"}


def gate(row: Row, options: opts.Options) -> int:
    """One row, start to verdict. The folders it takes (``smoke.environment.folders``: the work folder, the
    environment) are context managers on one stack, released however the run ends."""
    with contextlib.ExitStack() as stack:
        with machine("the run", None, None):  # the last net: stages say which of their folders
            return _gate(row, options, stack)


@contextlib.contextmanager
def machine(what: str, folder: Path | None, option: str | None) -> Iterator[None]:
    """An OSError of the machine in a stage (a disk full, a read-only or vanished folder) is a
    ``MachineError`` naming the folder and what to do, never a traceback or a FAIL of the wheel."""
    try:
        yield
    except OSError as exc:
        where = folder if folder is not None else Path(exc.filename).parent if exc.filename else None
        at = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(where) else ""
        fix = ("free space there" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else
               "make it writable" if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else "see to it")
        raise MachineError(f"{what}: {exc.strerror or exc} in {str(where) if where else 'a folder it writes'!r}{at}; "
                           f"the machine, not the wheel: {fix}{f' (or pass another {option})' if option else ''}, then run again") from None


def _inside(inner: Path, outer: Path) -> bool:
    return inner == outer or inner.is_relative_to(outer)


def _places(path: Path) -> tuple[Path, Path]:
    """Where a path is: as given (a link a folder holds is in that folder) and where it leads."""
    absolute = Path(os.path.abspath(path))
    return Path(os.path.realpath(absolute.parent)) / absolute.name, Path(os.path.realpath(absolute))


def check_outputs(row: Row, options: opts.Options, env_dir: Path) -> None:
    """Every path the run will write, refused now, before any work, with one line naming the option:
    the report folder and its two reports, the step summary, the environment and work folders (a path
    the file system cannot hold; a file where a folder must be; folders inside one another, which
    emptying one would empty the other; a folder that holds the wheel, an input or the checkout)."""
    if options.report_dir is not None:
        report.check_writable(options.report_dir, [Run(row.name).stem])
    report.check_step_summary()
    folders = [("--env-dir", env_dir), ("--workdir", options.workdir), ("--report-dir", options.report_dir)]
    folders = [(option, path) for option, path in folders if path is not None]
    emptied = ("--env-dir", "--workdir")  # the folders the gate empties; the report folder only gets its two files
    for option, path in folders:
        if option in emptied:
            report.check_length(path, option, f"pass a shorter {option}")
            owned.check_place(path, option)
    folders = [(option, Path(os.path.realpath(path))) for option, path in folders]  # a link is where it leads
    for (first, a), (second, b) in itertools.combinations(folders, 2):
        if _inside(a, b) or _inside(b, a):
            how = "is" if a == b else "is inside" if _inside(a, b) else "holds"
            raise GateError(f"{first} {str(a)!r} {how} {second} {str(b)!r}: the gate empties its environment and work "
                            f"folders, and the report folder is searched for reports; pass folders apart from one another")
    inputs = [("the wheel", options.wheel), ("--constraints", options.constraints), ("--wheelhouse", options.wheelhouse),
              ("--torch-from", options.torch_from), ("the gate's checkout", REPO)]
    for option, path in folders:
        if option not in emptied:
            continue
        if path == OWN:
            raise GateError(f"{option} {str(path)!r} is the gate's own folder of environments and downloads: pass a folder "
                            f"of its own, or leave {option} out")
        for name, given in inputs:
            if given is not None and any(_inside(place, path) for place in _places(Path(given))):
                raise GateError(f"{option} {str(path)!r} holds {name} {str(given)!r}, which the gate would empty away: "
                                f"pass a folder of its own to {option}")


def _said_kept(folder: owned.Owned) -> None:
    if (folder.path / "record.jsonl").exists():  # an interrupted run keeps its artifacts, as a failed one does
        say(f"artifacts kept in {folder.path}")


def _work_folder(stack: contextlib.ExitStack, path: Path) -> owned.Owned:
    return stack.enter_context(owned.held(owned.claim(path, "work folder", "--workdir"), interrupted=_said_kept))


def _gate(row: Row, options: opts.Options, stack: contextlib.ExitStack) -> int:
    run = Run(row.name)
    start = time.monotonic()
    env_dir = options.env_dir or paths.ENVS / row.name
    check_outputs(row, options, env_dir)
    interpreter = wheels.probe_interpreter(options.python)
    path = options.wheel or download.default_wheel(row, interpreter, options.wheel_index, say)
    with phase(run, f"reading the wheel {path}"):
        wheel = wheels.read_wheel(path)
        policy = settings.for_wheel(wheel, options.policy, paths.invoked_from())
        wheel = dataclasses.replace(wheel, user_supplied=policy.user_supplied)
        run.policy = policy.to_json()
        check_machine(wheel, row)
        elsewhere = away(row)
        if elsewhere is not None:  # its file checks only, on any host: nothing is installed for another system
            run.wheel, run.wheel_size, run.wheel_sha256 = wheel.filename, wheel.size, wheel.sha256
        else:
            wheels.check_interpreter(wheel, interpreter)
            check_host(interpreter, row)
            constraints = pairing.constraints_for(wheel, options.constraints)
    if elsewhere is not None:
        say(f"wheel: {wheel.filename}, {wheel.size} B, sha256 {wheel.sha256}; executorch {wheel.version}")
        file_checks(run, row, wheel, options)
        say(elsewhere)
        why = ("not run: the Windows row's installed half is not built yet" if row.system == "windows" else
               f"not run: the {row.name} row installs and runs the wheel on {SYSTEM_WORDS[row.system]} only "
               f"(this host: {platform.system()} {platform.machine()})")
        for check in (*pipeline.for_row(row, stages.ENVIRONMENT), *pipeline.for_row(row, stages.CHILD)):
            if check is not stages.CHILD_PROCESS:
                for result_name in check.names():
                    emit(run, skipped(result_name, why))
        return finish(run, options, None, start)
    run.wheel, run.wheel_size, run.wheel_sha256 = wheel.filename, wheel.size, wheel.sha256
    say(f"wheel: {wheel.filename}, {wheel.size} B, sha256 {wheel.sha256}; executorch {wheel.version}; "
        f"constraints {constraints.relative_to(REPO) if constraints.is_relative_to(REPO) else constraints}")
    say(policy.line())
    if options.constraints is None and (made := pairing.pair(wheel)).by_rule:
        say(f"torch paired by rule: {made.how}")

    given_work = None
    if options.workdir is not None:  # refused now, before anything is built, if it is not the gate's
        with machine("the work folder", options.workdir, "--workdir"):
            given_work = _work_folder(stack, options.workdir)

    if not file_checks(run, row, wheel, options):
        return finish(run, options, None, start)
    if run.libraries.unreadable or run.libraries.not_elf:  # `architecture` FAILed, naming each: never installed
        say("the environment is not built: the wheel ships libraries the gate cannot read (see architecture)")
        return finish(run, options, None, start)

    env_options = environment.EnvOptions(env_dir=env_dir, constraints=constraints, **opts.for_environment(options))
    doing = ("reusing the environment in {}" if environment.will_reuse(wheel, interpreter, env_options)
             else "building the environment in {}").format(env_options.env_dir)
    backend = installer.choose_backend(options.venv_backend)[0]  # auto: uv where it is found
    with phase(run, f"{doing} ({backend}, {interpreter.describe()})"), \
            machine("building the environment", env_dir, "--env-dir"):
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
        with machine("the work folder", work.path, "--workdir"):
            work.empty()  # an earlier run's records are never read as this run's
    else:
        with machine("making a temporary work folder", Path(tempfile.gettempdir()), "--workdir, or TMPDIR"):
            work = _work_folder(stack, Path(tempfile.mkdtemp(prefix=f"gate-{row.name}-")))
    workdir = work.path
    record, log = workdir / "record.jsonl", workdir / "child.log"
    with machine("the work folder", workdir, "--workdir"):
        record.write_text("")
    row_file = workdir / "row.json"  # the child is given its row as data (smoke.child.row)
    with machine("the work folder", workdir, "--workdir"):
        row_file.write_text(json.dumps(child_data(row)), encoding="utf-8")
    cmd = [str(env.python), "-m", "smoke.child", str(row_file), str(workdir), str(record), *opts.child_arguments(options)]
    say(f"running the child in {workdir} (time limit {options.timeout:g} s)")

    def on_probe(facts: dict) -> None:
        if options.overlap and not installed_checks(run, row, wheel, facts, options):
            raise StopChild

    def on_ask(asked: dict) -> dict:
        """The child's questions (smoke.child.ask), answered by the parent's readers and checks."""
        if asked.get("question") == "exported":
            results, answer = exported.judge_exports(row.backend, workdir, asked)
            for result in results:
                emit(run, result)
            return answer
        if asked.get("question") == "program":
            path = Path(str(asked.get("path")))
            if not _inside(path.resolve(), workdir.resolve()):
                return {"error": f"{path} is outside the work folder {workdir}"}
            return exported.program_facts(path)
        return {"error": f"no such question: {asked.get('question')!r}"}

    with machine("the child's record and log", workdir, "--workdir"):
        outcome = run_child(cmd, record, log, options.timeout, child_env, lambda r: emit(run, r),
                            lambda name, seconds: run.phases.append({"name": name, "seconds": seconds}), on_probe, on_ask)
    machine_failure(run, workdir)
    run.facts = outcome.facts
    if options.overlap and outcome.probe is None:
        for check in pipeline.for_row(row, stages.ENVIRONMENT):
            emit(run, skipped(check.name, "not run: the child ended before it reported torch and the runtime (see child process)"))
    verdict = judge_child(outcome, options.timeout, log)
    if verdict is not None:
        emit(run, verdict)
    if row.execution_required and (unrun := unexecuted(run.results)):
        emit(run, failed(stages.EXECUTED.name, f"the {row.name} row must execute, and these of its checks did not run: "
                                               f"{'; '.join(unrun)}", unrun=unrun))
    return finish(run, options, work, start)


def unexecuted(results) -> list[str]:
    """The checks of ``stages.MUST_EXECUTE`` that were skipped or never reported, those for one reason together."""
    by_name = {result.name: result for result in results}
    why: dict[str, list[str]] = {}
    for name in stages.MUST_EXECUTE:
        result = by_name.get(name)
        if result is None:
            why.setdefault("not reported", []).append(name)
        elif result.status is Status.SKIP:
            why.setdefault(f"skipped: {result.reason}", []).append(name)
    return [f"{', '.join(names)} ({reason})" for reason, names in why.items()]


def away(row: Row) -> str | None:
    """Why the row's environment and child cannot run on this host (a macOS or Windows row elsewhere), or None."""
    if row.system == "windows":  # nothing of the environment and the child has been made to run on Windows yet
        return (f"the {row.name} row's installed half (environment, export, load and run on Windows) is not built yet: "
                f"its file checks judged the wheel, on any host; the rest is skipped")
    host = HOST_SYSTEMS.get(platform.system(), platform.system().lower())
    if host == row.system:
        return None
    words = SYSTEM_WORDS
    return (f"the {row.name} row installs and runs the wheel on {words[row.system]} only, and this host is "
            f"{words.get(host, platform.system())} {platform.machine()}: its file checks judged the wheel here; run the row "
            f"on {words[row.system]} (the workflow's {RUNNERS.get(row.system, 'runner')}) for the rest")


def machine_failure(run: Run, workdir: Path) -> None:
    """A check the child failed because the machine refused a write (its disk full, its folder read-only)
    judged nothing about the wheel: the run is an error naming the work folder, not a FAIL."""
    said = {os.strerror(code) for code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)}
    for result in run.results:
        if result.status is Status.FAIL and (found := next((text for text in said if text in result.reason), None)):
            raise MachineError(f"{result.name} could not write to the work folder {str(workdir)!r}: {found}; the machine, "
                               f"not the wheel: free space there or make it writable (or pass another --workdir), then "
                               f"run again (the artifacts are kept there)")


def file_checks(run: Run, row: Row, wheel: wheels.Wheel, options, libraries: shipped.Libraries | None = None) -> bool:
    """The checks on the wheel file itself (``smoke.checks.shipped``); False when fail-fast stops the run.
    ``libraries``: the wheel's ELF files already read (``inspect`` reads them once for all its rows)."""
    with phase(run, "checking what the wheel ships"):
        run.libraries = libraries if libraries is not None else shipped.read_libraries(wheel)
        for check in pipeline.for_row(row, stages.FILE):
            result = emit(run, stages.run_check(check, wheel, row, run.libraries))
            if not result and options.fail_fast:
                return False
    return True


def installed_checks(run: Run, row: Row, wheel: wheels.Wheel, facts: dict, options: opts.Options) -> bool:
    """The checks on the installed environment (``smoke.checks.installed``); False when fail-fast stops the run."""
    if options.torch_from is not None:
        facts = {**facts, installed.TORCH_GIVEN: str(options.torch_from)}
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
    unwritten = []  # the verdict stands and is printed even where a report cannot be written
    if options.report_dir is not None:
        try:
            written = report.write(run, options.report_dir)
            say(f"reports: {', '.join(str(p) for p in written)}")
        except GateError as exc:
            unwritten.append(str(exc))
    try:
        summary = report.append_step_summary(run)
        if summary is not None:
            say(f"step summary: appended to {summary}")
    except OSError as exc:
        unwritten.append(f"GITHUB_STEP_SUMMARY {os.environ.get('GITHUB_STEP_SUMMARY')!r} could not be appended to "
                         f"({exc.strerror or exc})")
    if work is not None:
        if ok and not options.keep and options.workdir is None:
            work.discard = True  # a temporary folder this run made and marked: removed as the run ends
        else:
            say(f"artifacts kept in {work.path}")
    say(f"{run.stem}: {'PASSED' if ok else 'FAILED'}: {summary_line(run.results)} in {run.seconds:.1f} s")
    for line in unwritten:
        print(f"ERROR {line}; the verdict above stands (exit {run.exit_code}), without that file", file=sys.stderr, flush=True)
    return run.exit_code
