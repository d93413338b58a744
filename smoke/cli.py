"""The command line of a row: ``python -m smoke ROW WHEEL [options]`` (and ``python -m smoke inspect WHEEL``).

``nox -s ROW -- WHEEL [options]`` and the installed ``executorch-wheel-gate`` (``script``, pyproject.toml's
``[project.scripts]``) call ``main`` with the same words. Errors that mean the gate could not run are caught here,
once, and printed as one ``ERROR`` line with exit code 2; a wheel that fails the gate exits 1.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
from typing import Callable

from smoke import console, markup, options, paths
from smoke.errors import EXIT_CANNOT_RUN, GateError, Interrupted, MissingTool
from smoke.rows import RELEASE_ROWS, ROWS


class UsageError(GateError):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage dump and SystemExit
        raise UsageError(f"{message} (see --help)")


SCRIPT = "executorch-wheel-gate"  # the installed command (pyproject.toml's [project.scripts])


_COMMAND_LINES = (("inspect WHEEL [--row ROW]", "the file checks alone, nothing installed"),
                  ("summary REPORTS_DIR [--json FILE]", "the matrix verdict over the rows' JSON reports"),
                  ("compare OLD.whl NEW.whl", "what changed from a release that worked"),
                  ("benchmark WHEEL", "time the gate's phases over several runs"),
                  ("artifacts PATH...", "what the gate reads from .pte and .ptd files"),
                  ("smoke-test [--dist DIR] [--row ROW]", "a test-infra build job's wheel, as its smoke-test-script"))


def _commands(prog: str) -> str:
    """What the command line without a row does, for --help: the commands besides a row, and where it writes."""
    width = max(len(words) for words, _ in _COMMAND_LINES)
    lines = "".join(f"  {prog} {words.ljust(width)}  {what}\n" for words, what in _COMMAND_LINES)
    return (f"commands besides a row (each takes --help):\n{lines}\n"
            f"Environments and downloads go to .gate in {'the checkout' if paths.CHECKOUT else 'the folder it is run from'} "
            f"({paths.GATE}); --env-dir puts a row's environment elsewhere. Exit codes: 0 passed, 1 failed, 2 could not run.")


def parser(row: str | None = None, prog: str | None = None) -> argparse.ArgumentParser:
    name = prog or "python -m smoke"
    p = _Parser(prog=f"nox -s {row} --" if row else f"{name} ROW", description="Gate one executorch wheel on one platform row.",
                epilog=None if row else _commands(name), formatter_class=argparse.RawDescriptionHelpFormatter)
    if row is None:
        p.add_argument("row", choices=sorted(ROWS), help="the platform row")
    p.add_argument("--version", action="version", version=f"executorch-wheel-gate {_version()}")
    options.add(p)
    return p


def _version() -> str:
    """The gate's own version, its installed distribution's (issue 61: a checkout installs itself, requirements-gate.txt's
    ``-e .``); said as unknown where the gate runs from files no installer put there."""
    from importlib import metadata

    try:
        return metadata.version("executorch-wheel-gate")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def inspect_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = _Parser(prog=prog or "nox -s inspect --", description="Run the checks on the wheel file alone: no environment, no GPU, no torch.")
    p.add_argument("wheel", type=options.path, help="the executorch .whl to inspect")
    p.add_argument("--row", action="append", choices=sorted(ROWS), default=[],
                   help="judge against this row (repeatable; default: the rows of the wheel's architecture and kind of build: "
                        "CPU rows for a CPU build, CUDA rows for a +cuXXX one)")
    options.add(p, ("fail_fast", "policy", "strict"))
    p.add_argument("--report-dir", dest="report_dir", type=options.path, metavar="DIR",
                   help="write the JSON report and JUnit XML of each row judged to DIR/inspect-ROW.json and DIR/inspect-ROW.xml")
    return p


def _raise_interrupted(signum, _frame):
    raise Interrupted(signum)


def machine_words(exc: OSError) -> str:
    """An OSError no stage turned into its own line: what failed, on which path, and what to do."""
    name = markup.plain(str(exc.filename))[:200] if exc.filename else None
    fix = ("shorten that path or name" if exc.errno == errno.ENAMETOOLONG else
           "free space there" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else
           "make it readable and writable" if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else
           "see to that path" if name else "see to the machine")
    return f"{exc.strerror or exc}{f' ({name!r})' if name else ''}: the machine refused it, not the wheel: {fix}, then run again"


def _at_the_edge(work: Callable[[], int]) -> int:
    """Run a command; an error that means it could not run is one ERROR line and exit 2.

    SIGINT (Ctrl-C) and SIGTERM end the run where it is: what it started is ended on the way
    out (``gate.run_child``), and the exit code is 128 + the signal, 130 or 143, as a shell's.
    """
    try:
        os.getcwd()
    except FileNotFoundError:  # the folder it was started from was removed: every relative path, and .gate, is nowhere
        where = os.environ.get("PWD")
        console.error(f"the folder this command runs from{f' ({where})' if where else ''} no longer exists: cd to a folder "
                      "that does, then run again")
        return EXIT_CANNOT_RUN
    # Signal handlers can be set only in the main thread; whatever was there is put back after.
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM)
    if in_main:
        signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        return work()
    except GateError as exc:
        console.error(str(exc))
        return exc.return_code
    except ModuleNotFoundError as exc:  # one of the gate's own tools is not installed where it runs
        if not exc.name or exc.name.split(".")[0] == "smoke":
            raise
        how = ("install requirements-gate.txt there (python -m pip install -r requirements-gate.txt)"
               if paths.CHECKOUT else f"install the gate there again with its requirements (python -m pip install {SCRIPT})")
        console.error(f"the gate's own tool {exc.name.split('.')[0]!r} is not installed in {sys.executable}: {how}")
        return MissingTool.return_code
    except OSError as exc:  # the machine refused something outside any stage's own net: one line, never a traceback
        console.error(machine_words(exc))
        return EXIT_CANNOT_RUN
    except (KeyboardInterrupt, Interrupted) as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        print(f"INTERRUPTED by {signal.Signals(signum).name}: the run was stopped, every process it started "
              f"was ended; no verdict", file=sys.stderr, flush=True)
        return 128 + signum
    finally:
        if in_main and previous is not None:  # None: a handler not set from Python, which cannot be put back
            signal.signal(signal.SIGTERM, previous)


def inspect_main(argv: list[str], prog: str | None = None) -> int:
    # A command's modules are imported when it runs, not at the top: the noxfile imports this module
    # for every session (`nox -l` too), in nox's own interpreter, which `nox -s tests` asks only nox of.

    def work() -> int:
        from smoke.commands import inspect  # inside the edge: a tool of the gate's own missing is one ERROR line

        args = inspect_parser(prog).parse_args(argv)
        return inspect.inspect(args.wheel, options.from_args(args, ("wheel", "fail_fast", "policy", "strict", "report_dir")),
                               args.row)

    return _at_the_edge(work)


def summary_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = _Parser(prog=prog or "nox -s summary --", description="Merge the rows' JSON reports into one table and decide the release.")
    p.add_argument("reports", type=options.path, help="the folder the rows wrote their reports to (searched recursively)")
    p.add_argument("--release", choices=sorted(RELEASE_ROWS), default="all", help="which rows the release needs (default: all)")
    p.add_argument("--output", type=options.path, help="also write the Markdown table and verdict to this file")
    p.add_argument("--json", type=options.path, metavar="FILE", dest="json_output",
                   help="also write the verdict, each row's wheel (file, sha256), the gate that judged it and its checks as "
                        "JSON to this file (docs/summary-schema.json); outside REPORTS_DIR")
    return p


def summary_main(argv: list[str], prog: str | None = None) -> int:
    def work() -> int:
        from smoke.commands import summary  # inside the edge: a tool of the gate's own missing is one ERROR line

        args = summary_parser(prog).parse_args(argv)
        return summary.summary(args.reports, args.release, args.output, args.json_output)

    return _at_the_edge(work)


def compare_parser(prog: str | None = None) -> argparse.ArgumentParser:
    from smoke.commands.compare import PASSED_ON

    p = _Parser(prog=prog or "nox -s compare --", description="Judge OLD and NEW on one row and report what changed: checks side by "
                "side, static drift, runtime drift. Exit 1 on a regression (a check PASS on OLD and FAIL, SKIP or not reported "
                "on NEW; NEW's child process failing; outputs that drift past the tolerance).")
    p.add_argument("old", type=options.path, help="the release that worked (.whl)")
    p.add_argument("new", type=options.path, help="the candidate (.whl)")
    p.add_argument("--row", choices=sorted(ROWS), help="the row to judge both on (default: NEW's row that OLD fits too)")
    p.add_argument("--static-only", action="store_true", help="the wheel-file checks and static drift only: nothing installed")
    p.add_argument("--env-dir", type=options.path, help="the folder of the two environments, DIR/old-ROW and DIR/new-ROW, each reused "
                   "when built from the same wheel (default: .gate/envs/compare)")
    p.add_argument("--report-dir", type=options.path, metavar="DIR", help="write DIR/compare-ROW.json and DIR/compare-ROW.md")
    options.add(p, PASSED_ON)
    return p


def compare_main(argv: list[str], prog: str | None = None) -> int:
    def work() -> int:
        from smoke.commands import compare  # inside the edge: a tool of the gate's own missing is one ERROR line

        args = compare_parser(prog).parse_args(argv)
        return compare.compare(args.old, args.new, args.row, args.static_only, args.report_dir, args.env_dir,
                               compare.row_arguments(args))

    return _at_the_edge(work)


def artifacts_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = _Parser(prog=prog or "python -m smoke artifacts", description="Print what the gate reads from .pte and .ptd files (no executorch "
                "needed): a program's delegates and the keys they expect, a data file's keys and sizes.")
    p.add_argument("paths", nargs="+", type=options.path, help="programs, data files, or a folder the gate kept")
    p.add_argument("--json", action="store_true", help="print the same as JSON")
    return p


def artifacts_main(argv: list[str], prog: str | None = None) -> int:
    def work() -> int:
        from smoke.commands import artifacts  # inside the edge, as every command's modules

        args = artifacts_parser(prog).parse_args(argv)
        return artifacts.artifacts(args.paths, args.json)

    return _at_the_edge(work)


def benchmark_main(argv: list[str], prog: str | None = None) -> int:
    def work() -> int:
        from smoke.commands import benchmark  # inside the edge, as every command's modules

        return benchmark.main(argv, prog or "nox -s benchmark --")

    return _at_the_edge(work)


def smoke_test_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = _Parser(prog=prog or "python -m smoke smoke-test", allow_abbrev=False,
                description="Gate the wheel a pytorch/test-infra build job has just built, as that job's smoke-test-script, "
                "so that a FAIL blocks its upload: the row from the job's CU_VERSION and ARCH, the wheel from "
                "$REPOSITORY/dist, torch's package index from CHANNEL and CU_VERSION. Exit codes are the row's: 0 passed, "
                "1 failed, 2 could not run.",
                epilog="Every other option goes to the row (executorch-wheel-gate cpu_x86_64 --help lists them), e.g. "
                "--report-dir DIR; --torch-index URL replaces the index read from the job. docs/adopting.md shows the call.")
    p.add_argument("--dist", type=options.path, metavar="DIR",
                   help="the folder holding the one wheel to gate (default: $REPOSITORY/dist, where the build job leaves it)")
    p.add_argument("--row", choices=sorted(ROWS), help="the row (default: the build's, from CU_VERSION and ARCH on this host)")
    return p


def smoke_test_main(argv: list[str], prog: str | None = None) -> int:
    def work() -> int:
        from smoke.commands import smoke_test  # inside the edge, as every command's modules
        from smoke.readers.systems import host

        args, rest = smoke_test_parser(prog).parse_known_args(argv)
        job = smoke_test.build_job(os.environ, paths.invoked_from(), args.dist)
        system = host()
        row, words, said = smoke_test.row_run(job, args.row, system.name if system else None, rest)
        console.say(said)
        return main(words, row=row)

    return _at_the_edge(work)


COMMANDS = {"inspect": inspect_main, "summary": summary_main, "compare": compare_main, "artifacts": artifacts_main,
            "benchmark": benchmark_main, "smoke-test": smoke_test_main}


def main(argv: list[str], row: str | None = None, prog: str | None = None) -> int:
    """A row's command line (``row`` given: nox's session of that row), else ``ROW ...`` or a command's (``COMMANDS``);
    ``prog`` is what --help and usage lines call the program (``python -m smoke`` by default)."""
    if row is None and argv[:1] and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:], f"{prog or 'python -m smoke'} {argv[0]}")

    def work() -> int:
        from smoke.commands import gate  # imported when a command runs, inside the edge (see inspect_main)

        args = parser(row, prog).parse_args(argv)
        name = row or args.row
        if name not in ROWS:
            raise UsageError(f"unknown row {name!r}; the rows are {', '.join(sorted(ROWS))}")
        if args.wheel is not None and (args.wheel_version is not None or args.pre):
            flag = "--wheel-version" if args.wheel_version is not None else "--pre"
            raise UsageError(f"{flag} chooses the wheel to download when none is given, and {str(args.wheel)!r} is given: "
                             f"pass the wheel or {flag}, not both")
        for said, unsaid, why in CONFLICTS:
            if said(args) and unsaid(args):
                raise UsageError(why)
        for flag in ("wheelhouse", "torch_from"):
            value = getattr(args, flag)
            if value is not None and not value.is_dir():
                raise UsageError(f"--{flag.replace('_', '-')} {str(value)!r} is not a directory")
        if args.torch_from is not None:
            from smoke.environment.build import torch_site_packages

            torch_site_packages(args.torch_from)  # no torch there: one line now, before anything is built
        return gate.gate(ROWS[name], options.from_args(args))

    return _at_the_edge(work)


# Options that cannot both be given: each would be dropped or overruled without a word (issue 61), so the pair is refused.
CONFLICTS = (
    (lambda a: a.parallel_exports == "yes", lambda a: not a.overlap,
     "--parallel-exports yes exports beside the overlapped child, and --no-overlap runs the serial way: pass one, not both"),
    (lambda a: a.wheelhouse is not None, lambda a: a.torch_index is not None,
     "--wheelhouse installs from that folder alone, with no package index, so --torch-index would be dropped: pass one, "
     "not both (put the torch you want in the wheelhouse)"),
    (lambda a: a.torch_from is not None, lambda a: a.torch_index is not None,
     "--torch-from takes torch from that environment, so --torch-index would be dropped: pass one, not both"),
)


def script() -> int:
    """The installed command, ``executorch-wheel-gate ROW WHEEL [options]`` or ``executorch-wheel-gate COMMAND ...``:
    ``python -m smoke``'s command line, from any folder."""
    return main(sys.argv[1:], prog=SCRIPT)
