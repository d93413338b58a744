"""The parent: one row from start to verdict, stage by stage.

Read the wheel (``smoke.readers.wheel``), run the file checks, build the environment (``smoke.environment.build``),
run the child (``smoke.environment.follow``) and judge the environment on what it reports, then write the reports
(``smoke.report``) and print the verdict; ``smoke.checks.pipeline.for_row`` says which checks each stage runs. The
parent imports nothing heavy (no torch, no executorch): it runs in nox's own interpreter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from smoke import options as opts
from smoke import paths, proc, protocol, report, stages
from smoke.backends import cuda_checks
from smoke.checks import controls, exported, installed, kinds, outputs, pipeline, requirements, shipped
from smoke.console import emit, error, phase, say
from smoke.engine import cpp
from smoke.engine.machine import machine
from smoke.environment import build as environment
from smoke.environment import consumer, download, installer, loaderenv, reference, unchanged
from smoke.environment import folders as owned
from smoke.environment.follow import ChildEvents, RefusedRecord, StopChild, judge_child, run_child
from smoke.errors import EXIT_FAILED, GateError, MachineError
from smoke.readers import pairing, settings
from smoke.readers import wheel as wheels
from smoke.readers.systems import LINUX, SYSTEMS, host, host_words
from smoke.report import Run
from smoke.results import CheckResult, Status, all_passed, failed, skipped, summary_line
from smoke.rows import Row, check_host, check_machine, child_data

OWN = paths.GATE


def gate(row: Row, options: opts.Options) -> int:
    """One row, start to verdict. The folders it takes (``smoke.environment.folders``: the work folder, the
    environment) are context managers on one stack, released however the run ends."""
    with contextlib.ExitStack() as stack:
        with machine("the run", None, None):  # the last net: stages say which of their folders
            return _gate(row, options, stack)


def _inside(inner: Path, outer: Path) -> bool:
    return inner == outer or inner.is_relative_to(outer)


def _places(path: Path) -> tuple[Path, Path]:
    """Where a path is: as given (a link a folder holds is in that folder) and where it leads."""
    absolute = Path(os.path.abspath(path))
    return Path(os.path.realpath(absolute.parent)) / absolute.name, Path(os.path.realpath(absolute))


def check_outputs(row: Row, options: opts.Options, env_dir: Path) -> None:
    """Every path the run will write, refused now, before any work, with one line naming the option: the report
    folder and its reports, the step summary, the environment and work folders (too long a path, a file where a folder
    must be, a folder another gate run holds, nested folders, a folder holding an input or the checkout)."""
    if options.report_dir is not None:
        report.check_writable(options.report_dir, [Run(row.name).stem])
    report.check_step_summary()
    named: list[tuple[str, Path | None]] = [("--env-dir", env_dir), ("--workdir", options.workdir),
                                            ("--report-dir", options.report_dir)]
    folders = [(option, path) for option, path in named if path is not None]
    # The folders the gate empties, as its lines name them; the report folder only gets its two files.
    emptied = {"--env-dir": "environment folder", "--workdir": "work folder"}
    for option, path in folders:
        if option in emptied:
            report.check_length(path, option, f"pass a shorter {option}")
            owned.check_place(path, option)
            # Another run's folder, refused before anything is printed; only probed: the lock is still taken where the
            # folder is used (the build, the work folder's claim), which refuses a run that took it in between.
            owned.check_free(path, emptied[option], option)
    folders = [(option, Path(os.path.realpath(path))) for option, path in folders]  # a link is where it leads
    for (first, a), (second, b) in itertools.combinations(folders, 2):
        if _inside(a, b) or _inside(b, a):
            how = "is" if a == b else "is inside" if _inside(a, b) else "holds"
            raise GateError(f"{first} {str(a)!r} {how} {second} {str(b)!r}: the gate empties its environment and work "
                            f"folders, and the report folder is searched for reports; pass folders apart from one another")
    inputs = [("the wheel", options.wheel), ("--constraints", options.constraints), ("--wheelhouse", options.wheelhouse),
              ("--torch-from", options.torch_from),
              ("the gate's checkout" if paths.CHECKOUT else "the gate's installed package", paths.CHECKOUT or paths.PACKAGE)]
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


def hold_reports(folder: Path, stem: str) -> contextlib.AbstractContextManager[None]:
    """A row's two reports in the report folder, held by this run from its first step until they are written: a second
    run writing the same reports there meanwhile is refused at once (one ERROR line naming the holder, exit 2) instead
    of the two writing over each other's. One run after another replaces them, as before (``report.check_target``)."""
    return owned.lock_file(folder / f".{stem}.lock", "report folder", "--report-dir")


def _said_kept(folder: owned.Owned) -> None:
    if (folder.path / "record.jsonl").exists():  # an interrupted run keeps its artifacts, as a failed one does
        say(f"artifacts kept in {folder.path}")


def _work_folder(stack: contextlib.ExitStack, path: Path) -> owned.Owned:
    return stack.enter_context(owned.held(owned.claim(path, "work folder", "--workdir"), interrupted=_said_kept))


# A row is one function, ``steps``, read top to bottom. Each step is given what the steps before it made (frozen
# dataclasses) and returns its own product, or ``STOP`` where the run ends after it. What every step shares is the
# ``Context``; ``Run`` in it is the report, to which each step adds its checks' results and phases.


@dataclasses.dataclass(frozen=True)
class Context:
    """What every step of one row's run is given: the row, its options, the stack its folders are held on, the report
    being written, when the run began, and the environment's folder."""
    row: Row
    options: opts.Options
    stack: contextlib.ExitStack
    run: Run
    start: float
    env_dir: Path


@dataclasses.dataclass(frozen=True)
class Stop:
    """A step's answer where the run ends after it: its results are recorded; the verdict follows."""


STOP = Stop()


@dataclasses.dataclass(frozen=True)
class Given:
    """``outputs_and_input``: the interpreter the environment is built with, and the wheel's file."""
    interpreter: wheels.Interpreter
    wheel_path: Path


@dataclasses.dataclass(frozen=True)
class Read:
    """``wheel_read``: the wheel, its policy, and why its installed half cannot run here (None where it can); the
    torch constraints where it can."""
    interpreter: wheels.Interpreter
    wheel: wheels.Wheel
    policy: settings.Policy
    elsewhere: str | None
    constraints: Path | None


@dataclasses.dataclass(frozen=True)
class Judged:
    """``wheel_said``: a wheel whose installed half runs on this host, and the work folder given and claimed."""
    interpreter: wheels.Interpreter
    wheel: wheels.Wheel
    constraints: Path
    given_work: owned.Owned | None


@dataclasses.dataclass(frozen=True)
class Built:
    """``environment_built``: the environment, where its processes import the gate's code from, and their
    loader environment."""
    env: environment.Env
    code: Path
    child_env: dict[str, str]
    noted: unchanged.Noted  # its files but the wheel's, before any of the wheel's code ran (eager's answer is held to them)
    eager_code: Path  # the gate's code the reference imports: a copy of its own, noted


def _gate(row: Row, options: opts.Options, stack: contextlib.ExitStack) -> int:
    """The row's steps, until one ends the run; then the verdict."""
    context = Context(row, options, stack, Run(row.name), time.monotonic(), options.env_dir or paths.ENVS / row.name)
    work = steps(context)
    return finish(context.run, options, work, context.start)


def steps(context: Context) -> owned.Owned | None:
    """A row, top to bottom; the work folder the child ran in, where it ran."""
    read = wheel_read(context, outputs_and_input(context))
    if read.elsewhere is not None:
        files_only_elsewhere(context, read, read.elsewhere)
        return None
    judged = wheel_said(context, read)
    files = files_checked(context, judged)
    if isinstance(files, Stop):
        return None
    built = environment_built(context, judged, files)
    if isinstance(built, Stop):
        return None
    if isinstance(environment_probed(context, judged, built, files), Stop):
        return None
    return child_run(context, judged, built, files)


def outputs_and_input(context: Context) -> Given:
    """Every path the run will write refused now, if it must be; the interpreter; the wheel (downloaded if none given)."""
    options = context.options
    check_outputs(context.row, options, context.env_dir)
    if options.report_dir is not None:
        context.stack.enter_context(hold_reports(options.report_dir, context.run.stem))
    interpreter = wheels.probe_interpreter(options.python)
    return Given(interpreter, options.wheel or download.default_wheel(context.row, interpreter, options.wheel_index, say,
                                                                      options.wheel_version, options.pre))


def wheel_read(context: Context, given: Given) -> Read:
    """The wheel read, its policy, and refused where it is not for this row, this interpreter or any known torch."""
    run, row, options = context.run, context.row, context.options
    with phase(run, f"reading the wheel {given.wheel_path}"):
        wheel = wheels.read_wheel(given.wheel_path)
        policy = policy_for(wheel, options)
        judged_by(run, policy, wheel, options)
        wheel = dataclasses.replace(wheel, user_supplied=policy.user_supplied)
        check_machine(wheel, row)
        elsewhere = away(row)
        if elsewhere is None and (lacks := consumer.machine_lacks(wheel, row.backend.name)) is not None:
            raise MachineError(f"{lacks}; the C++ SDK is not judged without it (README: What a machine needs)")
        run.wheel, run.wheel_size, run.wheel_sha256 = wheel.filename, wheel.size, wheel.sha256
        constraints = None
        if elsewhere is None:
            wheels.check_interpreter(wheel, given.interpreter)
            check_host(given.interpreter, row)
            constraints = pairing.constraints_for(wheel, options.constraints)
    return Read(given.interpreter, wheel, policy, elsewhere, constraints)


def policy_for(wheel: wheels.Wheel, options: opts.Options) -> settings.Policy:
    """The policy for this wheel (--policy, or the pyproject.toml nox runs from), each waiver's check known."""
    policy = settings.for_wheel(wheel, options.policy, paths.invoked_from())
    policy.unknown_checks(pipeline.check_names())
    return policy


def judged_by(run: Run, policy: settings.Policy, wheel: wheels.Wheel, options: opts.Options) -> None:
    """The run judged by the policy: recorded in its report, strict where it or --strict says, its waivers applied."""
    run.policy = policy.to_json()
    run.strict = bool(options.strict or policy.strict)
    run.waivers = settings.Waivers(policy.waivers, wheel.version)


def files_only_elsewhere(context: Context, read: Read, elsewhere: str) -> None:
    """A row for another system: its file checks only, on any host; nothing is installed, the rest is skipped."""
    run, row, wheel = context.run, context.row, read.wheel
    say(f"wheel: {wheel.filename}, {wheel.size} B, sha256 {wheel.sha256}; executorch {wheel.version}")
    file_checks(run, row, wheel, context.options)
    say(elsewhere)
    facts = SYSTEMS[row.system]
    skip_installed_half(context, f"not run: the {facts.words} row's installed half is not built yet" if not facts.installed_half
                        else f"not run: the {row.name} row installs and runs the wheel on {facts.words} only (this host: "
                             f"{host_words()})")


def wheel_said(context: Context, read: Read) -> Judged:
    """What is judged, under which policy and constraints; a work folder given is claimed before anything is built."""
    wheel, options, constraints = read.wheel, context.options, read.constraints
    if constraints is None:
        raise GateError("the wheel was said before its constraints were chosen: a fault of the gate's")
    say(f"wheel: {wheel.filename}, {wheel.size} B, sha256 {wheel.sha256}; executorch {wheel.version}; "
        f"constraints {constraints.relative_to(paths.HOME) if constraints.is_relative_to(paths.HOME) else constraints}")
    say(read.policy.line())
    if options.constraints is None and (made := pairing.pair(wheel)).by_rule:
        say(f"torch paired by rule: {made.how}")
    given_work = None
    if options.workdir is not None:  # refused now, before anything is built, if it is not the gate's
        with machine("the work folder", options.workdir, "--workdir"):
            given_work = _work_folder(context.stack, options.workdir)
    return Judged(read.interpreter, wheel, constraints, given_work)


class FileWork:
    """The file checks, run in a thread of the parent while the environment is built and the child starts (issue 35:
    the child waited 1.6 s for them). Their results are printed and recorded in the pipeline's order when the parent
    takes them (``take``), before the child's first report is read. ``done``: taken already, whether the run goes on."""

    NAME = "checking what the wheel ships"

    def __init__(self, run: Run, row: Row, wheel: wheels.Wheel, options: opts.Options, ready: dict[str, CheckResult]) -> None:
        self.run, self.row, self.wheel, self.options, self.ready = run, row, wheel, options, ready
        self.results: list[CheckResult] = []
        self.libraries: shipped.Libraries | None = None
        self.failure: BaseException | None = None
        self.seconds = 0.0
        self.taken: bool | None = None
        self.cancelled = False  # the run ended without them (an error, an interrupt): stop after the check under way
        self.read = threading.Event()  # the wheel's libraries read (or the reading failed): ``readable`` can answer
        self.thread = threading.Thread(target=self._work, name="file checks", daemon=True)
        self.thread.start()

    def _work(self) -> None:
        start = time.monotonic()
        if (here := host()) is not None and here.name == LINUX:  # a thread's id is a task's there: this thread only
            with contextlib.suppress(OSError):  # the child's imports and exports come first
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                               min(os.getpriority(os.PRIO_PROCESS, 0) + proc.BACKGROUND_NICE, 19))
        try:
            try:
                self.libraries = shipped.read_libraries(self.wheel)
            finally:
                self.read.set()
            for check in pipeline.file_checks(self.row):
                if self.cancelled:
                    break
                result = self.ready.get(check.name) or kinds.run_file(check, self.wheel, self.row, self.libraries)
                self.results.append(result)
                if not self.run.waived(result) and self.options.fail_fast:
                    break
        except BaseException as exc:  # noqa: BLE001 - raised again in the parent's thread (take)
            self.failure = exc
        finally:
            self.seconds = round(time.monotonic() - start, 3)

    def readable(self) -> bool:
        """Wait for the wheel's libraries to be read (the first of the file checks' work); whether each could be. A
        wheel whose libraries cannot be read (``architecture`` FAILs, naming each) is never installed: a build waits
        for this. An error of the reading (a damaged archive) is raised here, at the edge."""
        self.read.wait()
        if self.libraries is None:
            self.thread.join()
            if self.failure is not None:
                raise self.failure
        return self.libraries is not None and not (self.libraries.unreadable or self.libraries.not_elf)

    def stop(self) -> None:
        """The thread ended with the run: nothing of the gate's runs after it."""
        self.cancelled = True
        self.thread.join()

    def take(self) -> bool:
        """Wait for the checks, print and record them; False where the run stops after them (fail-fast stopped them,
        or the wheel ships libraries the gate cannot read). An error of theirs is raised here, at the edge."""
        if self.taken is not None:
            return self.taken
        self.thread.join()
        if self.failure is not None:
            raise self.failure
        say(f"  ... {self.NAME}")
        go_on = True
        for result in self.results:
            if not emit(self.run, result) and self.options.fail_fast:
                go_on = False
        self.run.phases.append({"name": self.NAME, "seconds": self.seconds})
        say(f"  ... {self.NAME}: {self.seconds:.1f} s")
        if go_on and self.libraries is not None and (self.libraries.unreadable or self.libraries.not_elf):
            say("the environment is not used: the wheel ships libraries the gate cannot read (see architecture)")
            go_on = False
        self.taken = go_on
        return go_on


def files_checked(context: Context, judged: Judged) -> FileWork | Stop:
    """The file checks started beside what comes next (``FileWork``); the environment is not built where the wheel is
    a CPU build on a CUDA row, or where its torch requirement cannot be installed as declared (those two checks are
    run first, here), nor, with fail-fast, where a file check failed (they are waited for here)."""
    run, row, wheel, options = context.run, context.row, judged.wheel, context.options
    requirement, build = requirements.TORCH_REQUIREMENT, cuda_checks.CUDA_BUILD
    ready = {}
    for first in (build, requirement):  # read from the wheel's metadata alone, in no time
        if first in pipeline.file_checks(row):
            ready[first.name] = kinds.run_file(first, wheel, row, shipped.Libraries((), ()))
    files = FileWork(run, row, wheel, options, ready)
    context.stack.callback(files.stop)
    if options.fail_fast and not files.take():  # fail-fast: nothing is built for a wheel a file check failed
        return STOP

    def failing(check: kinds.FileCheck) -> bool:
        result = ready.get(check.name)
        return result is not None and run.waived(result).status is Status.FAIL

    if failing(build):  # a CPU build on a CUDA row: its CUDA checks cannot pass, and its own row is another
        if not files.take():
            return STOP
        say(f"the environment is not built: the wheel is a CPU build, which the {row.name} row cannot run; its row is "
            f"cpu_{row.machine} (see {build.name})")
        skip_installed_half(context, f"not run: the wheel is a CPU build (see {build.name})")
        return STOP
    if failing(requirement):
        if not files.take():
            return STOP
        if options.constraints is None:
            say(f"the environment is not built: the wheel's requirements cannot be installed as declared beside its paired "
                f"torch (see {requirement.name})")
            skip_installed_half(context, f"not run: the environment is not built (see {requirement.name})")
            return STOP
    return files


def installed_half(row: Row) -> list[str]:
    """The results of the row's checks of the environment and the child, in order (``child process`` and ``must
    execute`` aside: those report only a failure)."""
    return [name for stage in (stages.ENVIRONMENT, stages.CHILD) for check in pipeline.for_row(row, stage)
            if check not in (stages.CHILD_PROCESS, stages.EXECUTED) for name in check.names()]


def skip_installed_half(context: Context, why: str) -> None:
    """Every check of the environment and the child, recorded as skipped for ``why`` (printed, never silent)."""
    for result_name in installed_half(context.row):
        emit(context.run, skipped(result_name, why))


def environment_built(context: Context, judged: Judged, files: FileWork) -> Built | Stop:
    """The environment built (or reused), and one loader environment for every process in it."""
    run, options, wheel, interpreter = context.run, context.options, judged.wheel, judged.interpreter
    env_options = environment.EnvOptions(env_dir=context.env_dir, constraints=judged.constraints, **opts.for_environment(options))
    reuse = environment.will_reuse(wheel, interpreter, env_options)
    doing = ("reusing the environment in {}" if reuse else "building the environment in {}").format(env_options.env_dir)
    backend = installer.choose_backend(options.venv_backend)[0]  # auto: uv where it is found
    if not reuse and not files.readable():
        files.take()
        say("the environment is not built: the wheel ships libraries the gate cannot read (see architecture)")
        return STOP
    try:
        with phase(run, f"{doing} ({backend}, {interpreter.describe()})"), \
                machine("building the environment", context.env_dir, "--env-dir"):
            env = context.stack.enter_context(environment.built(wheel, interpreter, env_options, say))
    except GateError as exc:
        # Built beside the file checks (FileWork): a wheel they found damaged or unreadable fails the installer too, in
        # its own many words; the file checks' one line names the cause and the fix.
        files.thread.join()
        if isinstance(files.failure, GateError):
            raise files.failure from exc
        raise
    run.torch_source = env.torch_source
    say(f"torch from {env.torch_source}")
    code = context.stack.enter_context(loaderenv.gate_code())
    loader = loaderenv.for_environment(env.python, code)  # the child passes it on to its own processes
    run.loader_env = loader.to_json()
    say(loader.line())
    # Before the first process that runs the wheel's code (the probe, the extension modules, the child): eager's answer
    # is computed from these files later, and refused if any is not as noted (issue 58).
    # The reference imports the gate's code from a copy of its own, noted whole (code of the wheel could rewrite the
    # checkout's, or leave a compiled file there).
    torch_from = environment.torch_site_packages(options.torch_from) if options.torch_from is not None else None
    eager_code = context.stack.enter_context(loaderenv.private_code())
    noted = unchanged.note(unchanged.site_folders(Path(env.location), torch_from), reference.installed_files(wheel)[0],
                           whole=[str(eager_code)])
    return Built(env, code, loader.env, noted, eager_code)


def environment_probed(context: Context, judged: Judged, built: Built, files: FileWork) -> None | Stop:
    """The environment's checks, on a probe of its own (or, with --overlap, on the child's first report)."""
    if context.options.overlap:
        return None
    if not files.take():  # the checks judge what the file checks read
        return STOP
    with phase(context.run, "probing the environment in a process of its own"):
        facts = installed.run_probe(built.env.python, built.child_env, built.code)
    return None if installed_checks(context.run, context.row, judged.wheel, facts, context.options, files) else STOP


def child_run(context: Context, judged: Judged, built: Built, files: FileWork) -> owned.Owned | None:
    """The child, in a work folder of the gate's, given its row as data; judged as it reports; a row that must
    execute and did not run its must-execute checks FAILs. The work folder, where the child was started."""
    run, row, options, env = context.run, context.row, context.options, built.env
    if not files.thread.is_alive() and not files.take():  # done already (a cold build is longer): no child to start
        return None
    if judged.given_work is not None:
        work = judged.given_work
        with machine("the work folder", work.path, "--workdir"):
            work.empty()  # an earlier run's records are never read as this run's
    else:
        with machine("making a temporary work folder", Path(tempfile.gettempdir()), "--workdir, or TMPDIR"):
            work = _work_folder(context.stack, Path(tempfile.mkdtemp(prefix=f"gate-{row.name}-")))
    workdir = work.path
    record, log = workdir / "record.jsonl", workdir / "child.log"
    row_file = workdir / "row.json"  # the child is given its row as data (smoke.child.row)
    with machine("the work folder", workdir, "--workdir"):
        record.write_text("")
        row_file.write_text(json.dumps(child_data(row)), encoding="utf-8")
    cmd = [str(env.python), "-S", "-m", "smoke.child", str(row_file), str(workdir), str(record), *opts.child_arguments(options)]
    # Eager's answers, beside the child, in a process where the wheel's code does not run: the runs' outputs are held
    # to them here (smoke.checks.outputs), never to the child's own comparison (issue 48).
    eager = reference.Later(env.python, built.eager_code, built.child_env, judged.wheel, built.noted)  # begun as the child's imports end
    context.stack.callback(_kept_only_unchanged, built)  # after every process in it ended (the stack unwinds in reverse)
    context.stack.callback(eager.end)
    sdk = cpp.started(row, judged.wheel, Path(env.location), built.child_env, context.stack)  # built beside the child (issue 49)
    say(f"running the child in {workdir} (time limit {options.timeout:g} s)")

    with machine("the child's record and log", workdir, "--workdir"):
        beside = [eager.begin, *([sdk.start] if isinstance(sdk, consumer.Consumer) else [])]
        outcome = run_child(cmd, record, log, options.timeout, built.child_env,
                            RowEvents(context, judged.wheel, files, workdir, eager, beside), cwd=built.code)
    if files.taken is False:  # stopped after the file checks, before its record was read: nothing of it is judged
        return work
    machine_failure(run, workdir)
    run.facts = outcome.facts
    for result in cpp.judged(run, row, sdk, workdir, eager, options.timeout):
        emit(run, result)
    if options.overlap and outcome.probe is None:
        for check in pipeline.for_row(row, stages.ENVIRONMENT):
            emit(run, skipped(check.name, "not run: the child ended before it reported torch and the runtime (see child process)"))
    verdict = judge_child(outcome, options.timeout, log)
    if verdict is None and outcome.finished and not options.fail_fast and (missing := unreported(row, run.results)):
        # It said it had finished (its end record), yet reports the row must receive never came: the probe, the
        # extension modules, the loads (issue 48: code of the wheel wrote an end record and left).
        verdict = failed(stages.CHILD_PROCESS.name, f"ended saying it had finished, but never reported: {', '.join(missing)}; "
                                                    f"last output: {proc.file_tail(log)}", unreported=missing)
    if verdict is not None:
        emit(run, verdict)
    if row.execution_required and (unrun := unexecuted(run.results)):
        emit(run, failed(stages.EXECUTED.name, f"the {row.name} row must execute, and these of its checks did not run: "
                                               f"{'; '.join(unrun)}", unrun=unrun))
    return work


def _kept_only_unchanged(built: Built) -> None:
    """An environment whose files (not the wheel's) the wheel's code changed is not reused: a later run would compute
    eager's answer from them (issue 58). Its stamp is removed, so the next run builds it afresh."""
    if why := built.noted.differs():
        environment.unstamp(Path(built.env.location))
        say(f"the environment in {built.env.location} is not reused: {why}")


# The checks the parent judges itself: from the files the exports wrote, read by its own readers
# (``smoke.checks.exported.judge_exports``), and from the runs' outputs held to eager's answer computed apart from the
# wheel's code (``smoke.checks.outputs``). A record of one from the child is refused (issue 48: code of the wheel,
# which runs in the child, wrote PASS records of them).
PARENT_JUDGED = frozenset((*stages.DELEGATE.names(), *stages.DATA_FILE.names(), stages.WEIGHTS.name, *outputs.JUDGED,
                           *stages.CONTROLS))


class RowEvents(ChildEvents):
    """The row's answers to its child (``smoke.environment.follow``): each check emitted, each phase timed, the
    environment's checks on its probe, its questions answered by the parent's readers and checks, the file checks
    taken as it starts."""

    def __init__(self, context: Context, wheel: wheels.Wheel, files: FileWork, workdir: Path, eager: reference.Later,
                 beside: list[Callable[[], object]] | None = None) -> None:
        self.context, self.wheel, self.files, self.workdir, self.eager = context, wheel, files, workdir, eager
        self.beside = beside or []  # started as the child's imports end (its probe): eager's answers, the C++ consumer
        self.ran: set[str] = set()  # the checks handed over once (``ran``)

    def check(self, result: CheckResult) -> None:
        if result.name in PARENT_JUDGED:
            raise RefusedRecord(f"a record of {result.name!r}, which the parent judges itself (the files the exports "
                                f"wrote, the outputs against eager's): not the child's to write (code of the wheel forging the run?)")
        emit(self.context.run, result)

    def phase(self, name: str, seconds: float | None) -> None:
        self.context.run.phases.append({"name": name, "seconds": seconds})

    def probe(self, facts: dict[str, Any]) -> None:
        for begin in self.beside:  # the child's imports are done: the work beside its exports, on the core they leave
            begin()
        context = self.context
        if context.options.overlap and not installed_checks(context.run, context.row, self.wheel, facts, context.options, self.files):
            raise StopChild

    def ask(self, question: protocol.Ask) -> dict[str, Any]:
        """The child's questions (smoke.child.ask), answered by the parent's readers and checks."""
        if question.question == "exported":
            results, answer = exported.judge_exports(self.context.row.backend, self.workdir, question.data)
            for result in results:
                emit(self.context.run, result)
            ptd = self.workdir / "weighted" / self.context.row.backend.data_file
            if answer.get("data_file", {}).get("weighted") == Status.PASS.value and ptd.is_file():
                with machine("the work folder", self.workdir, "--workdir"):  # the corrupt data file's copies
                    answer["damaged"] = controls.write_damaged(ptd, self.workdir / "damaged")
            return answer
        if question.question == "ran" and question.data.get("name") in stages.CONTROLS:
            return self._control(question.data)
        if question.question == "ran":
            name = question.data.get("name")
            if name not in outputs.JUDGED or name in self.ran:
                return {"error": f"no check {name!r} to hand over" if name not in outputs.JUDGED else f"{name!r} was handed over already"}
            self.ran.add(name)
            answers = self.eager.answers(self.context.options.timeout)
            backend = self.context.row.backend
            result = emit(self.context.run, outputs.judge_ran(name, question.data, self.workdir, backend.data_file, answers.outputs,
                                                              answers.error, self.wheel.files, answers.unbuilt, answers.steps,
                                                              backend.delegate_id))
            return {"status": result.status.value}
        return {"error": f"no such question: {question.question!r}"}

    def _control(self, data: dict[str, Any]) -> dict[str, Any]:
        """A control the child handed over (``smoke.checks.controls``): judged here, with its twin's result in this run."""
        name = str(data["name"])
        if name in self.ran:
            return {"error": f"{name!r} was handed over already"}
        self.ran.add(name)
        run = self.context.run
        if isinstance(data.get("skipped"), str):
            return {"status": emit(run, skipped(name, data["skipped"])).status.value}
        given = data.get("said")
        said: dict[str, Any] = given if isinstance(given, dict) else {"failed": "the child handed over no outcome"}
        twin = next((r for r in run.results if r.name == stages.CONTROLS[name]), None)
        backend = self.context.row.backend
        rule = backend.missing_data(self.wheel.version)
        answers = self.eager.answers(self.context.options.timeout)
        eager = answers.outputs.get("weighted") if not answers.error else None
        if name == stages.CORRUPT.name:
            result = controls.judge_corrupt(said, twin, rule, backend.data_file, eager)
        else:
            result = controls.judge_missing(name, said, twin, rule, backend.data_file, eager)
        return {"status": emit(run, result).status.value}

    def started(self) -> None:
        """The file checks taken (printed, recorded) as the child starts its imports; a stop after them ends it."""
        if not self.files.take():
            raise StopChild


def unreported(row: Row, results: list[CheckResult]) -> list[str]:
    """The results of the environment's and the child's checks the row declares that were never reported."""
    reported = {result.name for result in results}
    return [name for name in installed_half(row) if name not in reported]


def unexecuted(results: list[CheckResult]) -> list[str]:
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
    facts = SYSTEMS[row.system]
    if not facts.installed_half:
        return (f"the {row.name} row's installed half (environment, export, load and run on {facts.words}) is not built yet: "
                f"its file checks judged the wheel, on any host; the rest is skipped")
    if (here := host()) is not None and here.name == row.system:
        return None
    return (f"the {row.name} row installs and runs the wheel on {facts.words} only, and this host is "
            f"{host_words()}: its file checks judged the wheel here; run the row "
            f"on {facts.words} (the workflow's {facts.runner}) for the rest")


def machine_failure(run: Run, workdir: Path) -> None:
    """A check the child failed because the machine refused a write (its disk full, its folder read-only)
    judged nothing about the wheel: the run is an error naming the work folder, not a FAIL."""
    said = {os.strerror(code) for code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)}
    for result in run.results:
        if result.status is Status.FAIL and (found := next((text for text in said if text in result.reason), None)):
            raise MachineError(f"{result.name} could not write to the work folder {str(workdir)!r}: {found}; the machine, "
                               f"not the wheel: free space there or make it writable (or pass another --workdir), then "
                               f"run again (the artifacts are kept there)")


def file_checks(run: Run, row: Row, wheel: wheels.Wheel, options: opts.Options, libraries: shipped.Libraries | None = None) -> bool:
    """The checks on the wheel file itself (``smoke.checks.shipped``); False when fail-fast stops the run.
    ``libraries``: the wheel's ELF files already read (``inspect`` reads them once for all its rows)."""
    with phase(run, "checking what the wheel ships"):
        read = libraries if libraries is not None else shipped.read_libraries(wheel)
        for check in pipeline.file_checks(row):
            result = emit(run, kinds.run_file(check, wheel, row, read))
            if not result and options.fail_fast:
                return False
    return True


def installed_checks(run: Run, row: Row, wheel: wheels.Wheel, facts: dict[str, Any], options: opts.Options,
                     files: FileWork | None) -> bool:
    """The checks on the installed environment (``smoke.checks.installed``), on what the file checks read (``files``,
    taken before); False when fail-fast stops the run."""
    if files is None or files.libraries is None:
        raise GateError("the environment's checks ran before the wheel's libraries were read: a fault of the gate's")
    if options.torch_from is not None:
        facts = {**facts, installed.TORCH_GIVEN: str(options.torch_from)}
    for check in pipeline.environment_checks(row):
        result = emit(run, kinds.run_environment(check, wheel, row, facts, files.libraries))
        if not result and options.fail_fast:
            return False
    return True


def finish(run: Run, options: opts.Options, work: "owned.Owned | None", start: float) -> int:
    facts = run.facts
    if facts:
        device = facts.get("device") or {}
        say(f"executorch {facts.get('executorch')}, torch {facts.get('torch')} (from {run.torch_source}), "
            f"Python {facts.get('python')}, device {device.get('device_name', 'none')}{' ' + device['sm'] if 'sm' in device else ''}")
    if run.waivers is not None:
        for waiver in run.waivers.unmatched():
            say(f"waiver unused: {waiver.words()} matched no finding of this run ({waiver.reason})")
    ok = all_passed(run.results, run.strict)
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
    strict = " (strict: warnings fail)" if run.strict and any(r.status is Status.WARN for r in run.results) else ""
    say(f"{run.stem}: {'PASSED' if ok else 'FAILED'}: {summary_line(run.results)}{strict} in {run.seconds:.1f} s")
    for line in unwritten:
        error(f"{line}; the verdict above stands (exit {run.exit_code}), without that file")
    return run.exit_code
