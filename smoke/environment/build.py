"""Build the isolated environment a row runs in: a fresh virtualenv (or uv venv)
holding the wheel under test and the torch paired with it.

Offline runners get three options: a folder of wheels with no index (``wheelhouse``), the wheel without its pins
resolved (``no_deps``), and torch from an existing environment through a ``.pth`` file (``torch_from``;
``--system-site-packages`` would give the base interpreter's packages, not that environment's).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from smoke import markup, proc
from smoke.environment import installer
from smoke.environment.folders import Owned, claim
from smoke.errors import EnvironmentBuildError
from smoke.readers import systems
from smoke.readers.wheel import Interpreter, Wheel

STAMP = "gate-stamp.json"
TORCH_PTH = "gate-torch-from.pth"
TORCH_SOURCE = "gate-torch-source.txt"  # where the build found torch, said again when the environment is reused


@dataclass(frozen=True)
class EnvOptions:
    """Where and how to build: the folder, the constraints the wheel's release pairs with, and the
    row options marked ``env`` in ``smoke.options`` (their defaults are stated there)."""

    env_dir: Path
    constraints: Path
    wheelhouse: Path | None
    no_deps: bool
    torch_from: Path | None
    torch_index: str | None
    venv_backend: str
    reuse_env: bool


@dataclass(frozen=True)
class Env:
    location: Path
    python: Path
    torch_source: str
    reused: bool

    @property
    def bin(self) -> Path:
        return self.python.parent


def env_without_pythonpath() -> dict[str, str]:
    """The gate's own PYTHONPATH (nox installed with --target, say) must not leak into the environment."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_TARGET")}


def run(cmd: Sequence[str | os.PathLike], what: str, *, inherit_pythonpath: bool = False) -> subprocess.CompletedProcess:
    """Run one command of the build; on failure raise with the command and its output's tail."""
    return proc.run(cmd, what=what, error=EnvironmentBuildError, env=None if inherit_pythonpath else env_without_pythonpath(),
                    tail_lines=15, joiner="\n")


def site_packages(python: Path) -> Path:
    out = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], "finding site-packages")
    return Path(out.stdout.strip())


def site_packages_holding(venv: Path, package: str) -> Path | None:
    """The site-packages of the environment at ``venv`` that holds ``package`` (a folder with ``__init__.py``, or a
    namespace folder), read from its layout with no process started; None where none does."""
    candidates = sorted(venv.glob("lib/python3*/site-packages")) + sorted(venv.glob("Lib/site-packages"))
    return next((candidate for candidate in candidates if (candidate / package).is_dir()), None)


def torch_site_packages(venv: Path) -> Path:
    """The site-packages of an existing environment that holds torch."""
    found = site_packages_holding(venv, "torch")
    if found is not None and (found / "torch" / "__init__.py").is_file():
        return found
    raise EnvironmentBuildError(
        f"--torch-from {str(venv)!r} has no torch in lib/python3*/site-packages; "
        f"pass the root of a virtual environment that has torch installed"
    )


def torch_source(options: EnvOptions, python: Path, backend: str, sources: installer.Sources | None = None) -> str:
    """Where the environment's torch came from: the source whose wheel it is (``installer.installed_from``), among
    those the install was given (pip's configured ones read here for pip, where ``sources`` is None)."""
    if options.torch_from is not None:
        return f"existing environment {options.torch_from} (.pth)"
    try:
        sources = sources if sources is not None else _pip_sources(backend, python)
    except EnvironmentBuildError:
        return f"a source pip chose (pip's configuration could not be read), pinned by {options.constraints.name}"
    given = installer.places(sources, options.wheelhouse, options.torch_index)
    sites = sorted(options.env_dir.glob("lib/python3*/site-packages")) + sorted(options.env_dir.glob("Lib/site-packages"))
    return f"{installer.installed_from(sites, 'torch', given)}, pinned by {options.constraints.name}"


def _pip_sources(backend: str, python: Path) -> installer.Sources:
    """pip's configured sources: the gate's own pip's for uv (which is given them), the environment's pip's for pip."""
    return installer.pip_sources(sys.executable if backend == "uv" else python, env_without_pythonpath())


def _stamp(wheel: Wheel, interpreter: Interpreter, options: EnvOptions) -> dict:
    """What the environment was built from, as its stamp file holds it: a URL's credentials masked (an index's token
    is never written; a build with another token of the same index is the same build)."""
    return json.loads(markup.redact(json.dumps(_made_from(wheel, interpreter, options))))


def _made_from(wheel: Wheel, interpreter: Interpreter, options: EnvOptions) -> dict:
    fields = {k: str(v) for k, v in asdict(options).items() if k not in ("env_dir", "reuse_env")}
    fields["venv_backend"] = installer.choose_backend(options.venv_backend)[0]  # what auto chose
    if fields["venv_backend"] == "uv":  # an environment of hard links to uv's cache (before issue 58) is built again
        fields["link_mode"] = installer.LINK_MODE
    return {
        "wheel": wheel.filename,
        "wheel_sha256": wheel.sha256,
        # The interpreter by what it is, not how it was named: .venv/bin/python and .venv/bin/python3 build the same.
        "interpreter": os.path.realpath(interpreter.path),
        "constraints_sha256": hashlib.sha256(options.constraints.read_bytes()).hexdigest(),
        **fields,
    }


def wheelhouse_files(wheelhouse: Path) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for path in sorted(wheelhouse.glob("*.whl")):
        try:
            name = parse_wheel_filename(path.name)[0]
        except InvalidWheelFilename:
            continue
        found.setdefault(name, []).append(path)
    return found


def plan_no_deps(
    requires: Sequence[Requirement],
    installed: set[str],
    available: dict[str, list[Path]] | None,
    marker_env: dict[str, str],
) -> tuple[list[str], list[str]]:
    """Which of the wheel's requirements to install one by one, without resolving them.

    Returns (to_install, left_out): requirements whose markers hold for this
    environment and that are not installed already; with a wheelhouse, those it
    has no file for are left out instead of failing the whole install.
    """
    to_install, left_out = [], []
    for req in requires:
        env = dict(marker_env, extra="")
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        if name in installed:
            continue
        if available is not None and name not in available:
            left_out.append(str(req))
            continue
        to_install.append(str(available[name][-1]) if available is not None else str(req))
    return to_install, left_out


# Requirements that must be in the environment's own site-packages, even where --torch-from's
# .pth makes another environment's copy importable: the wheel's libraries find the CUDA runtime
# through $ORIGIN entries, relative to their own folder, never through sys.path.
OWN_SITE_PREFIXES = ("nvidia-",)


def _project(item: str) -> str:
    """The project of a requirement string or of a wheel's path, as plan_no_deps lists them."""
    if item.endswith(".whl"):
        return parse_wheel_filename(Path(item).name)[0]
    return canonicalize_name(Requirement(item).name)


def _installed_names(python: Path) -> set[str]:
    """The distributions the environment has, for --no-deps: what sys.path reaches (the .pth of
    --torch-from included), except OWN_SITE_PREFIXES packages that are not in its own site-packages."""
    out = run(
        [python, "-c", "import importlib.metadata as m, json, os, sysconfig; "
                       "own = {os.path.realpath(sysconfig.get_paths()[k]) for k in ('purelib', 'platlib')}; "
                       "print(json.dumps([[d.metadata['Name'], os.path.realpath(str(d.locate_file(''))) in own] for d in m.distributions()]))"],
        "listing installed distributions",
    )
    return {canonicalize_name(name) for name, own in json.loads(out.stdout)
            if name and (own or not canonicalize_name(name).startswith(OWN_SITE_PREFIXES))}


def _marker_env(python: Path) -> dict[str, str]:
    out = run([python, "-c", "import json; from platform import *; import sys, os; "
               "print(json.dumps({'python_version': '%d.%d' % sys.version_info[:2], 'python_full_version': python_version(), "
               "'platform_machine': machine(), 'platform_system': system(), 'sys_platform': sys.platform, "
               "'os_name': os.name, 'implementation_name': sys.implementation.name, 'platform_python_implementation': python_implementation()}))"],
              "reading the environment's markers")
    return {**default_environment(), **json.loads(out.stdout)}


def _stamped(stamp_file: Path) -> dict | None:
    try:
        return json.loads(stamp_file.read_text())
    except (OSError, ValueError):
        return None


def _venv_python() -> str:
    """Where a virtual environment made on this host keeps its interpreter."""
    here = systems.host()
    return here.venv_python if here is not None else systems.SYSTEMS[systems.LINUX].venv_python


def environment_python(location: Path) -> Path:
    """The interpreter of the environment built in ``location``."""
    return location / _venv_python()


def will_reuse(wheel: Wheel, interpreter: Interpreter, options: EnvOptions) -> bool:
    """Whether ``built`` would reuse what is in the folder (asked before, to name the step truly)."""
    location = options.env_dir
    python = location / _venv_python()
    return (options.reuse_env and python.exists()
            and _stamped(location / STAMP) == _stamp(wheel, interpreter, options))


def unstamp(location: Path) -> None:
    """The environment in ``location`` is no longer taken as built: the next run builds it afresh."""
    (location / STAMP).unlink(missing_ok=True)


@contextmanager
def built(wheel: Wheel, interpreter: Interpreter, options: EnvOptions, say: Callable[[str], None]) -> Iterator[Env]:
    """The environment of one run: built (or reused) on entry in a folder this run owns and locks
    (``smoke.environment.folders``), stamped only once the build completed, so an interrupted build is never taken as
    good. A failed build leaves nothing half-made: a folder it created is removed, one it emptied is emptied again."""
    owned = claim(options.env_dir, "environment folder", "--env-dir", earlier_marks=(STAMP,))
    try:
        try:
            env = _build(wheel, interpreter, options, say, owned)
        except BaseException:
            if owned.created:
                owned.remove()
            elif not (options.env_dir / STAMP).exists():  # the build had begun: what is there is half-made
                owned.empty()
            raise
        yield env
    finally:
        owned.release()


def _build(wheel: Wheel, interpreter: Interpreter, options: EnvOptions, say: Callable[[str], None], owned: Owned) -> Env:
    location = options.env_dir
    backend, uv = installer.choose_backend(options.venv_backend)
    stamp = _stamp(wheel, interpreter, options)
    stamp_file = location / STAMP
    python = location / _venv_python()
    if options.reuse_env and stamp_file.is_file() and python.exists():
        if _stamped(stamp_file) == stamp:
            say(f"reusing environment {location} (same wheel sha256 {wheel.sha256[:12]}, same options)")
            said = location / TORCH_SOURCE  # none in an environment an earlier gate built: found again
            source = said.read_text(encoding="utf-8").strip() if said.is_file() else torch_source(options, python, backend)
            return Env(location, python, source, reused=True)
        say(f"environment {location} was built for another wheel or other options: rebuilding it")
    elif not owned.unused and not stamp_file.exists():
        say(f"environment {location} holds an unfinished build (an earlier run was stopped or failed while building): "
            f"building it afresh")
    owned.empty()  # the stamp first of all: from here until the end of the build, nothing says "good"
    run(installer.venv_command(backend, uv, interpreter.path, location), f"creating the environment ({backend})",
        inherit_pythonpath=backend == "virtualenv")
    if options.torch_from is not None:
        target = torch_site_packages(options.torch_from)
        (site_packages(python) / TORCH_PTH).write_text(f"{target}\n")
        say(f"torch: taken from {target} through {TORCH_PTH}")
    sources = None
    if backend == "uv":
        sources = _pip_sources(backend, python)
        say(f"installing with uv ({uv}) from pip's sources: {sources.describe()}")
    tool = installer.Installer(backend, python, uv, sources)
    pip = tool.base(wheelhouse=options.wheelhouse, torch_index=options.torch_index)
    constrain: list[str | os.PathLike] = [] if options.torch_from is not None else ["-c", options.constraints]
    torch: list[str | os.PathLike] = [] if options.torch_from is not None else ["torch"]
    if not options.no_deps:
        run(pip + constrain + [wheel.path, *torch], f"installing {wheel.filename} and the paired torch ({backend})")
    else:
        if torch:
            run(pip + constrain + torch, f"installing the paired torch ({backend})")
        run(pip + ["--no-deps", wheel.path], f"installing {wheel.filename} without its dependencies ({backend})")
        available = wheelhouse_files(options.wheelhouse) if options.wheelhouse else None
        todo, left_out = plan_no_deps(wheel.requires_dist, _installed_names(python), available, _marker_env(python))
        # pip would take another environment's copy, seen through the .pth, as installed: insist.
        own = [item for item in todo if _project(item).startswith(OWN_SITE_PREFIXES)]
        rest = [item for item in todo if item not in own]
        if rest:
            run(pip + constrain + ["--no-deps", *rest], "installing the wheel's missing requirements without resolving them")
        if own:
            run(pip + constrain + ["--no-deps", *tool.reinstall([_project(item) for item in own]), *own],
                "installing the CUDA runtime into the environment itself")
        say(f"--no-deps: installed {len(todo)} missing requirements one by one"
            + (f"; not installed (not in the wheelhouse): {', '.join(left_out)}" if left_out else ""))
    source = torch_source(options, python, backend, sources)
    (location / TORCH_SOURCE).write_text(markup.redact(source) + "\n", encoding="utf-8")  # an index's token never written
    partial = stamp_file.with_suffix(".partial")
    partial.write_text(json.dumps(stamp, indent=2))
    os.replace(partial, stamp_file)
    return Env(location, python, source, reused=False)
