"""Who fills the environment, and from where: pip, or uv with pip's own sources.

uv reads none of pip's configuration (``pip.conf``, ``PIP_*``), so given only the gate's flags it could quietly take
packages from elsewhere (another torch from PyPI). ``pip_sources`` asks pip itself (``pip config list``) and
``uv_install`` passes the same sources to uv as flags, with pip's way of choosing among indexes
(``--index-strategy unsafe-best-match``), so both install the same versions. uv is found as nox finds it: ``$UV``,
else the ``uv`` package's binary, else ``uv`` on ``PATH``.
"""

from __future__ import annotations

import ast
import csv
import html.parser
import importlib.metadata
import json
import os
import shutil
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Sequence
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from smoke import proc
from smoke.errors import EnvironmentBuildError

BACKENDS = ("auto", "uv", "virtualenv")
LINK_MODE = "copy"  # how uv puts a package's files in the environment (pip always copies: its cache holds wheels)
UV_HINT = "install it with `python -m pip install uv` in the interpreter that runs the gate (requirements-gate.txt has it)"


def find_uv() -> str | None:
    """uv's binary, found as nox finds it: $UV, the uv package's own binary, then PATH."""
    named = os.environ.get("UV")
    if named:
        return shutil.which(named) or (named if Path(named).is_file() else None)
    try:
        from uv import find_uv_bin  # the uv wheel's own locator
    except ImportError:
        pass
    else:
        try:
            return find_uv_bin()
        except FileNotFoundError:
            pass
    return shutil.which("uv")


def choose_backend(asked: str) -> tuple[str, str | None]:
    """(backend, uv binary or None) for ``--venv-backend`` ``asked``: ``auto`` is uv where it is found."""
    if asked == "virtualenv":
        return "virtualenv", None
    uv = find_uv()
    if uv is not None:
        return "uv", uv
    if asked == "uv":
        raise EnvironmentBuildError(f"--venv-backend uv: no uv found ($UV, the uv package, PATH): {UV_HINT}")
    return "virtualenv", None


@dataclass(frozen=True)
class Sources:
    """Where pip would take packages from, as pip's configuration says (values in pip's own order)."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    no_index: bool = False
    trusted_hosts: tuple[str, ...] = ()
    unhandled: tuple[str, ...] = field(default=())  # settings uv is not given (named in the line printed)

    def uv_flags(self) -> list[str]:
        flags: list[str] = []
        if self.no_index:
            flags.append("--no-index")
        if self.index_url and not self.no_index:
            flags += ["--index-url", self.index_url]
        for url in () if self.no_index else self.extra_index_urls:
            flags += ["--extra-index-url", url]
        for link in self.find_links:
            flags += ["--find-links", link]
        for path in self.constraints:
            flags += ["--constraint", path]
        for host in self.trusted_hosts:
            flags += ["--allow-insecure-host", host]
        return flags

    def describe(self) -> str:
        parts = []
        if self.no_index:
            parts.append("no index")
        else:
            parts.append(f"index {self.index_url or 'PyPI (pip default)'}")
            parts += [f"extra index {url}" for url in self.extra_index_urls]
        parts += [f"find-links {link}" for link in self.find_links]
        parts += [f"constraint {path}" for path in self.constraints]
        if self.unhandled:
            parts.append(f"pip settings uv is not given: {', '.join(self.unhandled)}")
        return "; ".join(parts)


# pip's settings that choose where packages come from, and those that need no translation for uv.
_LIST_SETTINGS = {"extra-index-url", "find-links", "constraint", "trusted-host"}
_IGNORED = {"disable-pip-version-check", "default-timeout", "timeout", "cert", "progress-bar", "quiet",
            "verbose", "no-cache-dir", "cache-dir", "retries", "no-input", "root-user-action", "break-system-packages",
            "no-warn-script-location", "require-virtualenv", "config-file"}
_TRUE = {"1", "true", "yes", "on", "y", "t"}  # what pip reads as true (its strtobool): PIP_NO_INDEX=y is no index


def parse_pip_config(listing: str) -> Sources:
    """Read ``pip config list`` output (``section.name='value'`` lines, ``:env:.name`` for PIP_* variables).

    pip applies its sections in order (global, then the command's ``install``, then ``:env:``),
    a later value replacing an earlier one of the same name; list settings are whitespace-separated."""
    values: dict[str, str] = {}
    rank = {"global": 0, "install": 1, ":env:": 2}
    order: dict[str, int] = {}
    for line in listing.splitlines():
        key, sep, raw = line.partition("=")
        if not sep or "." not in key:
            continue
        section, _, name = key.rpartition(".")
        if section not in rank:
            continue  # another command's section (download, wheel, ...): not what install reads
        try:  # pip prints each value as Python's repr
            value = str(ast.literal_eval(raw.strip()))
        except (ValueError, SyntaxError):
            value = raw.strip().strip("'\"")
        if rank[section] >= order.get(name, -1):
            values[name], order[name] = value, rank[section]
    def listed(name: str) -> tuple[str, ...]:
        return tuple(values.get(name, "").split())

    known = {"index-url", "no-index"} | _LIST_SETTINGS
    unhandled = tuple(sorted(name for name in values if name not in known and name not in _IGNORED))
    return Sources(index_url=values.get("index-url") or None, extra_index_urls=listed("extra-index-url"),
                   find_links=listed("find-links"), constraints=listed("constraint"),
                   no_index=values.get("no-index", "").lower() in _TRUE, trusted_hosts=listed("trusted-host"),
                   unhandled=unhandled)


def pip_sources(python: Path | str, env: Mapping[str, str]) -> Sources:
    """pip's configured sources, as the pip of ``python`` reads them in ``env`` (the gate asks its own
    interpreter's pip: the files and variables are the user's and the machine's, the same for any pip;
    only a pip.conf inside that interpreter's own prefix would differ, and a new environment has none)."""
    # Through smoke.proc, as every process the gate starts: it runs beside the file checks' thread, whose ends of their
    # own processes end only what is no registered process of the gate's (a bare subprocess.run here was one: on the
    # H100, 2026-12-06, it was ended with SIGTERM as the orphan of a cuobjdump run).
    out = proc.run([str(python), "-m", "pip", "config", "list"], what="reading pip's configuration", error=EnvironmentBuildError,
                   env=dict(env), timeout=120, check=False, fix="pass --venv-backend virtualenv")
    if out.returncode != 0:
        raise EnvironmentBuildError(f"reading pip's configuration failed (exit {out.returncode}): "
                                    f"{proc.tail(out.stdout + out.stderr)}; pass --venv-backend virtualenv")
    return parse_pip_config(out.stdout)


@dataclass(frozen=True)
class Installer:
    """The command that installs into one environment: ``pip install`` run by its Python, or ``uv pip install``."""

    backend: str
    python: Path
    uv: str | None = None
    sources: Sources | None = None

    def base(self, *, wheelhouse: Path | None, torch_index: str | None) -> list[str]:
        if self.backend == "uv":
            assert self.uv is not None and self.sources is not None, "the uv backend is made with uv and pip's sources"
            # --compile-bytecode: as pip does by default; without it, the first run's imports compile torch's and the
            # runtime's modules, in every process that imports them at once, and the cold run is longer than its
            # build by that (issue 35: the cold run's extra over a warm one is the build alone).
            # --link-mode copy: the environment's files are its own (issue 58). uv's default hard-links them from its
            # cache, so code of the wheel that writes into an installed file in place (torch's) changes the cache's copy,
            # and every environment built from the cache afterwards; `clone` is no better where the filesystem has no
            # copy-on-write (on this machine's ext4 it hard-linked: torch/__init__.py had 3 links). What a copy costs
            # is measured in docs/records/runs/2026-12-08-link-mode.
            cmd = [self.uv, "pip", "install", "--quiet", "--compile-bytecode", "--link-mode", LINK_MODE, "--python",
                   str(self.python), "--index-strategy", "unsafe-best-match", *self.sources.uv_flags()]
        else:
            cmd = [str(self.python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        if wheelhouse is not None:
            cmd += ["--no-index", "--find-links", str(wheelhouse)]
        elif torch_index:
            cmd += ["--extra-index-url", torch_index]
        return cmd

    def reinstall(self, projects: Sequence[str]) -> list[str]:
        """Flags that install ``projects`` even where another environment's copy is seen as installed."""
        if self.backend == "uv":
            return [flag for name in projects for flag in ("--reinstall-package", name)]
        return ["--ignore-installed"]


def venv_command(backend: str, uv: str | None, interpreter: str, location: Path) -> list[str]:
    if backend == "uv":
        assert uv is not None, "the uv backend is chosen only where uv is found"
        # No --seed: nothing in the environment runs pip, and seeding would reach for an index (offline runners have none).
        return [uv, "venv", "--quiet", "--allow-existing", "-p", interpreter, str(location)]
    return [sys.executable, "-m", "virtualenv", "--quiet", "-p", interpreter, str(location)]


# --- where an installed distribution came from ------------------------------------------------------------------------
# Neither pip nor uv records where a package asked for by name came from (direct_url.json, PEP 610, is written only for
# a URL or a path asked for itself), and uv takes the best version from any source (unsafe-best-match). So the installed
# files are matched against the wheels each local source holds: the wheel of the same name and version whose RECORD
# hashes every file as installed is where they came from. A remote index is not read; where no local wheel matches,
# the remote sources the install was given are named.

PYPI = "https://pypi.org/simple"


@dataclass(frozen=True)
class Place:
    """A source the install was given, as a line names it; ``folder`` is where a local one's files are."""

    said: str
    folder: Path | None = None
    index: bool = False  # a simple index (a page per project, PEP 503), else a flat folder of wheels (find-links)


def _local_path(location: str) -> Path | None:
    """The folder or file a find-links entry, an index URL or a link names, where it is on this machine."""
    parts = urlsplit(location)
    if parts.scheme == "file":
        return Path(url2pathname(parts.path))
    return None if parts.scheme in ("http", "https") else Path(location)  # a path (C: parses as a scheme)


def places(sources: Sources, wheelhouse: Path | None, torch_index: str | None) -> list[Place]:
    """The sources of an install made with ``Installer.base(wheelhouse=..., torch_index=...)`` and pip's ``sources``."""
    found: list[Place] = []
    if wheelhouse is not None:
        found.append(Place(f"the wheelhouse {wheelhouse}", wheelhouse))
    for link in sources.find_links:
        folder = _local_path(link)
        found.append(Place(f"a local wheel folder ({folder})", folder) if folder is not None and folder.is_dir()
                     else Place(f"the find-links page {link}"))
    if wheelhouse is None and not sources.no_index:  # --no-index: no index is read
        for url in (sources.index_url or PYPI, *sources.extra_index_urls, *([torch_index] if torch_index else [])):
            folder = _local_path(url)
            found.append(Place(f"the package index {url}", folder, index=True) if folder is not None and folder.is_dir()
                         else Place(f"the package index {'PyPI' if url == PYPI else url}"))
    return found


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [value for name, value in attrs if tag == "a" and name == "href" and value]


def _wheels(place: Place, project: str) -> Iterator[Path]:
    """The wheel files a local source offers for ``project``: a folder's own, or those its index page links to."""
    assert place.folder is not None
    if not place.index:
        yield from sorted(place.folder.glob("*.whl"))
        return
    page_folder = place.folder / project
    page = page_folder / "index.html"
    links = _Links()
    if page.is_file():
        links.feed(page.read_text(errors="replace"))
    for href in links.hrefs:
        target = href.split("#", 1)[0]
        if urlsplit(target).scheme == "file":
            yield Path(url2pathname(urlsplit(target).path))
        elif not urlsplit(target).scheme:
            yield page_folder / unquote(target)
    yield from sorted(page_folder.glob("*.whl"))


def _hashed(record: str) -> set[tuple[str, str]]:
    """A RECORD's (path, hash) rows for the files a wheel puts in site-packages as they are (not its metadata,
    which the installer adds to, nor its .data, which the installer moves)."""
    return {(row[0], row[1]) for row in csv.reader(record.splitlines())
            if len(row) >= 2 and row[1] and not row[0].split("/", 1)[0].endswith((".dist-info", ".data"))}


def _wheel_record(wheel: Path) -> str:
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [name for name in archive.namelist() if name.count("/") == 1 and name.endswith(".dist-info/RECORD")]
            return archive.read(names[0]).decode("utf-8", errors="replace") if len(names) == 1 else ""
    except (OSError, zipfile.BadZipFile):
        return ""


def installed_from(sites: Sequence[Path], project: str, given: Sequence[Place]) -> str:
    """Where the ``project`` installed in the site-packages ``sites`` came from, as a line says it."""
    name = canonicalize_name(project)
    dist = next((d for d in importlib.metadata.distributions(path=[str(site) for site in sites])
                 if canonicalize_name(d.metadata["Name"] or "") == name), None)
    if dist is None:
        return f"nowhere: no {project} is installed in {', '.join(map(str, sites)) or 'the environment'}"
    direct = json.loads(dist.read_text("direct_url.json") or "{}").get("url")
    if direct:  # asked for by its path or URL (PEP 610)
        return f"the local file {url2pathname(urlsplit(direct).path)}" if urlsplit(direct).scheme == "file" else direct
    installed = _hashed(dist.read_text("RECORD") or "")
    for place in given:
        if place.folder is None:
            continue
        for wheel in _wheels(place, name):
            try:
                wheel_name, version = parse_wheel_filename(wheel.name)[:2]
                same = wheel_name == name and version == Version(dist.version)
            except (InvalidWheelFilename, InvalidVersion):
                continue
            files = _hashed(_wheel_record(wheel)) if same and wheel.is_file() else set()
            if files and files <= installed:
                return place.said
    remote = [place.said for place in given if place.folder is None]
    if len(remote) == 1:
        return remote[0]
    if remote:
        return f"one of: {'; '.join(remote)}"
    return f"none of its sources holds a wheel with its files ({'; '.join(place.said for place in given)})"
