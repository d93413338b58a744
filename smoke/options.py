"""Every option of a row, in one table: the command line, the environment's options and the
child's arguments are all derived from it, and each default is stated here once.

``Options`` is made from the table; ``parser`` builds the row's ``argparse`` parser (``inspect`` takes the entries
it shares by name); entries marked ``env`` are what ``smoke.environment.build`` reads, and those marked ``child``
are passed to the child, which parses them with the same entries (``child_parser``).
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from smoke import paths, report
from smoke.errors import GateError


def seconds(text: str) -> float:
    """A time limit: a finite number of seconds above 0 (0, a negative or nan would end or never end the child)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time limit: give seconds above 0, e.g. 1800")
    return value


def version(text: str) -> str:
    """A PEP 440 version, as pip takes it after ``executorch==``."""
    from packaging.version import InvalidVersion, Version  # here: the child imports this module, and its environment may lack packaging

    try:
        return str(Version(text))
    except InvalidVersion:
        raise argparse.ArgumentTypeError(f"{text!r} is not a version (PEP 440): give one such as 1.5.1 or "
                                         f"1.6.0.dev20261201") from None


def path(text: str) -> Path:
    """A path given on a command line (every command's path arguments and options take this type), made absolute once,
    at the edge, against the folder the caller ran the gate from (``paths.invoked_from``): nox and every process the
    gate starts run in the checkout. One too long for the file system is refused here, before an ``os.stat`` of it
    raises ENAMETOOLONG."""
    given = Path(text)
    absolute = given if given.is_absolute() else paths.invoked_from() / given
    try:
        report.check_length(absolute, "path", "pass a shorter one")
    except GateError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return absolute


def interpreter(text: str) -> str:
    """``--python``: a name looked up on PATH (``python3.11``) as given; a path (it holds a separator) as ``path``."""
    separators = [sep for sep in (os.sep, os.altsep) if sep]
    return str(path(text)) if any(sep in text for sep in separators) else text


@dataclass(frozen=True)
class Opt:
    dest: str
    flag: str | None  # None: the positional argument
    help: str
    default: Any = None
    type: Callable[[str], Any] | None = None
    action: str | None = None  # "store_true", "store_false"
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    env: bool = False  # one of the environment's options (smoke.environment.build.EnvOptions)
    child: bool = False  # passed on to the child process

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        kwargs: dict[str, Any] = {"help": self.help, "default": self.default}  # the default, from the table only
        for key in ("action", "type", "choices", "metavar"):
            if getattr(self, key) is not None:
                kwargs[key] = getattr(self, key)
        if self.flag is None:
            parser.add_argument(self.dest, nargs="?", **kwargs)
        else:
            parser.add_argument(self.flag, dest=self.dest, **kwargs)

    def as_argument(self, value: Any) -> list[str]:
        """The words that give ``value`` to a parser built from this entry ([] for the default)."""
        if value == self.default:
            return []
        if self.flag is None:
            raise ValueError(f"{self.dest} is the positional argument: no flag passes it on")
        if self.action in ("store_true", "store_false"):
            return [self.flag]
        return [self.flag, str(value)]


ROW_OPTIONS: tuple[Opt, ...] = (
    Opt("wheel", None, "the executorch .whl to gate (default: download the current public release)", type=path),
    Opt("wheel_index", "--wheel-index", "with no wheel given, download the current release from this index "
        "(default: pip's configured one)", metavar="URL"),
    Opt("wheel_version", "--wheel-version", "with no wheel given, download this executorch version instead of the current "
        "release: a release (1.4.1) or a nightly (1.6.0.dev20261201, from a --wheel-index that serves nightlies)",
        type=version, metavar="VERSION"),
    Opt("pre", "--pre", "with no wheel given, take the newest version, pre-releases and nightlies included",
        default=False, action="store_true"),
    Opt("python", "--python", "interpreter to build the environment from (default: the one running the gate)",
        type=interpreter),
    Opt("constraints", "--constraints", "pip constraints file to use instead of the torch paired with the wheel's release",
        type=path),
    Opt("wheelhouse", "--wheelhouse", "install from this folder of wheels only, with no package index (offline)",
        type=path, env=True),
    Opt("no_deps", "--no-deps", "install the wheel without resolving its dependency pins; its missing requirements are "
        "installed one by one where available", default=False, action="store_true", env=True),
    Opt("torch_from", "--torch-from", "take torch from this existing environment (a .pth file), instead of installing it",
        type=path, metavar="VENV", env=True),
    Opt("torch_index", "--torch-index", "an extra package index for torch, e.g. https://download.pytorch.org/whl/cpu "
        "for a CPU row (default: pip's configuration)", metavar="URL", env=True),
    Opt("venv_backend", "--venv-backend", "what builds and fills the environment: uv (uv venv, uv pip install from pip's "
        "configured sources), virtualenv (virtualenv, pip install), or auto: uv where it is found, else virtualenv "
        "(default: auto)", default="auto", choices=("auto", "uv", "virtualenv"), env=True),
    Opt("env_dir", "--env-dir", "where the environment is built (default: .gate/envs/ROW)", type=path),
    Opt("reuse_env", "--reuse-env", "reuse the environment if it was built from the same wheel (sha256) and options",
        default=False, action="store_true", env=True),
    Opt("workdir", "--workdir", "where the artifacts are written and kept (default: a temporary folder, removed on success)",
        type=path),
    Opt("keep", "--keep", "keep the temporary artifacts folder even on success", default=False, action="store_true"),
    Opt("fail_fast", "--fail-fast", "stop at the first failed check", default=False, action="store_true", child=True),
    Opt("timeout", "--timeout", "seconds the child may run before it is killed (default: 1800)", default=1800.0, type=seconds),
    Opt("overlap", "--no-overlap", "read torch and the runtime in a process of their own before the child, start the "
        "negative control's process only when needed, export the two models one after the other (the slower, serial "
        "way; for the benchmark's before/after)", default=True, action="store_false", child=True),
    Opt("parallel_exports", "--parallel-exports", "yes: export the two models at once, the weightless one in a process "
        "of its own (not with --no-overlap); no: one after the other, the second reusing the first's compile "
        "(default: no, the faster on the H200: docs/records/benchmarks.md)", default="no", choices=("yes", "no"), child=True),
    Opt("policy", "--policy", "the gate's policy for this wheel, a TOML file (default: [tool.executorch-wheel-gate] in the "
        "pyproject.toml of the folder the gate runs in, else the defaults: docs/policy.md)", type=path, metavar="FILE"),
    Opt("strict", "--strict", "warnings fail the run (default: the policy's strict, else no: docs/policy.md)", default=False,
        action="store_true"),
    Opt("report_dir", "--report-dir", "write the run's JSON report and JUnit XML to DIR/ROW.json and DIR/ROW.xml",
        type=path, metavar="DIR"),
)
BY_DEST = {opt.dest: opt for opt in ROW_OPTIONS}

@dataclass
class Options:
    """A row run's options: one field per entry of ``ROW_OPTIONS``, of the type its entry's converter gives, with the
    entry's default (``tests/test_options.py`` holds the two the same)."""

    wheel: Path | None = None
    wheel_index: str | None = None
    wheel_version: str | None = None
    pre: bool = False
    python: str | None = None
    constraints: Path | None = None
    wheelhouse: Path | None = None
    no_deps: bool = False
    torch_from: Path | None = None
    torch_index: str | None = None
    venv_backend: str = "auto"
    env_dir: Path | None = None
    reuse_env: bool = False
    workdir: Path | None = None
    keep: bool = False
    fail_fast: bool = False
    timeout: float = 1800.0
    overlap: bool = True
    parallel_exports: str = "no"
    policy: Path | None = None
    strict: bool = False
    report_dir: Path | None = None


def add(parser: argparse.ArgumentParser, dests: Iterable[str] | None = None) -> None:
    """Add the table's entries (all, or those named) to a parser."""
    for opt in ROW_OPTIONS if dests is None else (BY_DEST[d] for d in dests):
        opt.add_to(parser)


def from_args(args: argparse.Namespace, dests: Iterable[str] | None = None) -> Options:
    """The Options of parsed arguments: every entry read by its own name, none dropped."""
    return Options(**{d: getattr(args, d) for d in (dests if dests is not None else BY_DEST)})


def for_environment(options: Options) -> dict[str, Any]:
    return {opt.dest: getattr(options, opt.dest) for opt in ROW_OPTIONS if opt.env}


def child_arguments(options: Options) -> list[str]:
    return [word for opt in ROW_OPTIONS if opt.child for word in opt.as_argument(getattr(options, opt.dest))]


def child_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    for opt in ROW_OPTIONS:
        if opt.child:
            opt.add_to(parser)
    return parser


def markdown() -> str:
    """The table of a row's options as docs/options.md shows it, made from ROW_OPTIONS (a test keeps the two equal)."""
    lines = ["| option | what it does |", "|---|---|"]
    for opt in ROW_OPTIONS:
        if opt.flag is None:
            name = "`WHEEL`"
        elif opt.action in ("store_true", "store_false"):
            name = f"`{opt.flag}`"
        else:
            value = opt.metavar or ("|".join(opt.choices) if opt.choices else opt.dest.upper())
            name = f"`{opt.flag} {value}`"
        lines.append(f"| {name} | {opt.help.replace('|', chr(92) + '|')} |")
    return "\n".join(lines)
