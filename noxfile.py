"""The release gate for executorch wheels: one session per platform row.

    nox -s cuda_x86_64 -- path/to/executorch-....whl [options]

A bare `nox` runs only the gate's own tests (marked * below). nox marks every other session -
("skipped") because a bare `nox` does not run it: each row runs when named, with its wheel.
Row sessions run in nox's own interpreter (``venv_backend="none"``) so that the
wheel is read, and a wheel that cannot run is refused, before any environment is
built; ``smoke.environment.build`` then builds the isolated one. Options: ``--help``.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import nox
from packaging.utils import canonicalize_name

sys.path.insert(0, str(Path(__file__).parent))

from smoke import cli, paths  # noqa: E402
from smoke.errors import EXIT_CANNOT_RUN  # noqa: E402
from smoke.rows import ROWS  # noqa: E402

nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "virtualenv"
# nox looks for uv before every session and says "uv binary not found." when there is none; the
# gate builds with virtualenv unless told --venv-backend uv, so the line says nothing here.
logging.getLogger("nox").addFilter(lambda record: record.getMessage() != "uv binary not found.")


def _verdict(session: nox.Session, name: str, code: int) -> None:
    """Exit 1 (through nox) when the wheel failed; exit 2 at once when the gate could not run.

    Never session.skip(): nox counts a skip as a success. nox ends every failed session
    with exit 1, so "could not run" leaves nox with SystemExit(2) instead; sessions
    named after it on the same command line then do not run.
    """
    if code == EXIT_CANNOT_RUN:
        session.log(f"{name} could not run (exit {code})")
        raise SystemExit(code)
    if code > 128:  # interrupted (130 SIGINT, 143 SIGTERM): no verdict, and no further session
        session.log(f"{name} was interrupted (exit {code})")
        raise SystemExit(code)
    if code:
        session.error(f"{name}: FAILED (exit {code})")


def _invoked_from(session: nox.Session) -> None:
    """Where the user ran nox from (nox runs its sessions in the checkout): a relative path given is the user's, made
    absolute against it (smoke.options.path), and its pyproject.toml may hold the gate's policy."""
    os.environ[paths.INVOKED_FROM] = session.invoked_from


def _row_session(row: str):
    def session(session: nox.Session) -> None:
        _invoked_from(session)
        _verdict(session, row, cli.main(list(session.posargs), row=row))

    session.__doc__ = ROWS[row].description
    session.__name__ = row
    return session


for _name in ROWS:
    nox.session(name=_name, venv_backend="none")(_row_session(_name))


@nox.session(venv_backend="none")
def inspect(session: nox.Session) -> None:
    """Check a wheel file with nothing installed, on the rows it is built for: tags, foreign files, start-up code, platform, architecture, torch requirement, libraries, RUNPATH, runtime core, duplicates, imports, CUDA parts, RECORD (-- WHEEL [--row ROW])."""
    _invoked_from(session)
    _verdict(session, "inspect", cli.inspect_main(list(session.posargs)))


@nox.session(venv_backend="none")
def summary(session: nox.Session) -> None:
    """Merge the rows' JSON reports into one table; fail if a row failed, is missing, or skipped what it must run (-- REPORTS_DIR)."""
    _invoked_from(session)
    _verdict(session, "summary", cli.summary_main(list(session.posargs)))


@nox.session(venv_backend="none")
def compare(session: nox.Session) -> None:
    """What changed from a release that worked to a candidate: checks side by side, static and runtime drift; fail on a regression (-- OLD.whl NEW.whl [--row ROW] [--static-only])."""
    _invoked_from(session)
    _verdict(session, "compare", cli.compare_main(list(session.posargs)))


@nox.session(venv_backend="none")
def benchmark(session: nox.Session) -> None:
    """Time the gate's phases over several runs, min/median/max and the whole run over its floor (one import alone + exports + loads) (-- WHEEL [--row ROW] [--runs N] [--budget S] [--variants all|default] [--output FILE] [--log-dir DIR])."""
    _invoked_from(session)
    _verdict(session, "benchmark", cli.benchmark_main(list(session.posargs)))


INTEGRATION = "tests/integration"


def _names_paths(args: list[str]) -> bool:
    """Whether the arguments name test files or folders (or a test in one: PATH::NAME), not only options."""
    return any(not arg.startswith("-") and Path(arg.split("::", 1)[0]).exists() for arg in args)


def _installed_bytes(location: Path, installed: list[dict]) -> int:
    """The bytes of the files pip installed for the distributions of its report: their RECORD's sizes, read from the
    environment's site-packages (no walk of the environment, and none where nothing was installed)."""
    if not installed:
        return 0
    names = {canonicalize_name(str(item["metadata"]["name"])) for item in installed}
    total = 0
    for record in location.glob("lib/python*/site-packages/*.dist-info/RECORD"):
        if canonicalize_name(record.parent.name.removesuffix(".dist-info").rsplit("-", 1)[0]) in names:
            total += sum(int(row[2]) for row in csv.reader(record.read_text(encoding="utf-8").splitlines())
                         if len(row) >= 3 and row[2].isdigit())
    return total


def _install_said(session: nox.Session, requirements: str) -> None:
    """Install the requirements, then say what was installed, from where, how much and how long it took (pip's
    --report): the first time it fetches torch and executorch, gigabytes; later, nothing."""
    # Not session.create_tmp(): it points TMPDIR at .nox/tests/tmp for every later command, which put the tests'
    # environments (tens of GB) on the checkout's disk, not the machine's temporary one (a CI run ended in ENOSPC).
    with tempfile.TemporaryDirectory(prefix="nox-install-report-") as scratch:
        report = Path(scratch) / "pip-install-report.json"
        start = time.monotonic()
        session.install("-r", requirements, "--report", str(report))
        seconds = time.monotonic() - start
        installed = json.loads(report.read_text(encoding="utf-8")).get("install", []) if report.is_file() else []
    location = Path(session.virtualenv.location)
    remote = sorted(f"{item['metadata']['name']} {item['metadata']['version']}" for item in installed
                    if str(item.get("download_info", {}).get("url", "")).startswith(("http://", "https://")))

    def count(n: int, what: str) -> str:
        return f"{n} {what}{'' if n == 1 else 's'}"

    session.log(f"the tests' environment ({location}): {count(len(installed), 'package')} installed, {len(remote)} of them "
                f"from a package index over the network (pip's cache serves those it holds)"
                f"{': ' + ', '.join(remote) if remote else ''}; {_installed_bytes(location, installed) / 1e6:.0f} MB of files "
                f"installed, in {seconds:.0f} s")


def _chooses_workers(args: list[str]) -> bool:
    """Whether the arguments say how pytest-xdist runs (-n, --numprocesses, --dist) or turn it off (-p no:xdist)."""
    return any(arg in ("-n", "--numprocesses", "--dist") or arg.startswith(("-n", "--numprocesses=", "--dist=", "-pno:xdist"))
               or (arg == "no:xdist" and i and args[i - 1] == "-p") for i, arg in enumerate(args))


SUPPORTED_PYTHON = (3, 10)  # pyproject.toml's requires-python


def _fast_tier(args: list[str]) -> bool:
    """Whether the arguments select the fast tier: -m with an expression that leaves the slow tests out."""
    marks = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "-m"] + [arg[2:] for arg in args if arg.startswith("-m") and len(arg) > 2]
    return any("not slow" in " ".join(mark.split()) for mark in marks)


def workers() -> int:
    """pytest-xdist's workers: one more than the cores this process may use. The integration runs wait on the disk
    (each environment's 5 GB copy) and on their own processes, and two workers kept the two cores here 83% busy
    (ci4, docs/records/runs/2026-12-07-tests-time); a third takes the rest (2026-12-08's records)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores + 1


def pytest_arguments(given: list[str]) -> list[str]:
    """pytest's arguments for the arguments given after --: the workers (``workers``) unless they say otherwise, and
    the Hypothesis profile (tests/conftest.py) unless they name one: `quick` for the fast tier, `ci` for the whole
    suite."""
    args = list(given)
    if not _chooses_workers(given):
        # The slow tests are handed out first (tests/conftest.py), a group's tests kept on one worker (xdist_group).
        # -n 0 (or -p no:xdist) runs them in this process.
        args = ["-n", str(workers()), "--dist", "loadgroup", *args]
    if not any(arg.startswith("--hypothesis-profile") for arg in given):
        args = [f"--hypothesis-profile={'quick' if _fast_tier(given) else 'ci'}", *args]
    if not any(arg.startswith("--durations") for arg in given):  # the slowest, said at the end of the run (issue 57)
        args = [*args, "--durations=20"]
    return args


# No python= here: the tests run on the interpreter that runs nox (the README's .venv), any the project supports, so a
# machine without one named version still runs them; one that is too old is a failure naming the fix, never a skip.
@nox.session(reuse_venv=True)
def tests(session: nox.Session) -> None:
    """The gate's own tests, on every core, the integration runs (tests/integration) among them; -- -m 'not slow' for the fast tier alone."""
    if sys.version_info < SUPPORTED_PYTHON:
        session.error(f"the gate's tests need Python {'.'.join(map(str, SUPPORTED_PYTHON))} or newer, and nox runs on "
                      f"{sys.version.split()[0]} ({sys.executable}): make the .venv with a newer python3 "
                      f"(python3.11 -m venv .venv), then run nox from it")
    _install_said(session, "requirements-test.txt")
    given = list(session.posargs)
    args = pytest_arguments(given)
    if _fast_tier(given) and not _names_paths(given):
        # Every test in tests/integration is slow (tests/test_profiles.py): the fast tier does not even collect them.
        args = [f"--ignore={INTEGRATION}", *args]
    # One run: the slow tests go out first and the fast ones fill the workers' ends (two runs, the fast half first, left
    # a worker idle at the end of each).
    session.run("pytest", *args)
