"""Every header of the wheel's C++ SDK compiled alone, as upstream's test_cpp_sdk.py compiles them, and a verdict
with no failure kept by its key (the package's docstring)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from smoke import paths, proc
from smoke.environment.consumer.sdk import BUILD_VARIABLES
from smoke.errors import GateError
from smoke.readers import filekind


@dataclass(frozen=True)
class Headers:
    """Every header under ``executorch/include`` compiled alone (``headers_alone``)."""
    count: int
    failures: tuple[str, ...]  # "path: its first error", each header that does not compile for a reason of the wheel's
    # (header, the header it needs that neither the wheel nor this machine has): needs outside the wheel's own
    # folders (a CUDA toolkit's cuda_runtime.h, say), which this machine cannot judge
    unjudged: tuple[tuple[str, str], ...] = ()
    earlier: str | None = None  # where the verdict was kept by an earlier run of the same headers and compiler (KEPT)


# Left out of the headers compiled alone, as upstream's test_cpp_sdk.py leaves them out (pytorch/executorch main,
# cff6f4dd, _HEADER_EXCLUDES): a Windows header, and two c10 headers meant to be included only from c10/util/complex.h.
HEADERS_LEFT_OUT = ("mman_windows.h", "c10/util/complex_math.h", "c10/util/complex_utils.h")
HEADER_SECONDS = 60
_MISSING = re.compile(r"fatal error: ([^:\s]+): No such file or directory")


class Compiles:
    """The headers' compiles under way: none starts once ``stop`` is called, and ``stop`` ends those running (an
    interrupt of the gate left the pool compiling its queue for seconds after the run said every process was ended)."""

    def __init__(self) -> None:
        self.stopped = False
        self._live: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    def run(self, cmd: list[str], what: str, env: dict[str, str], timeout: float) -> tuple[int, str] | str | None:
        """``cmd`` to its end: its exit code and the end of its error output; why it could not run (text); None once
        stopped."""
        with tempfile.TemporaryFile() as err:
            with self._lock:
                if self.stopped:
                    return None
                try:
                    process = proc.start(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                         own_group=True, background=True)
                except OSError as exc:
                    return f"{what} failed: cannot run {cmd[0]!r} ({exc})"
                self._live.add(process)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return f"{what} failed: {cmd[0]!r} ran past its {timeout:g} s limit and was ended"
            finally:
                proc.end_group(process, grace=0)
                with self._lock:
                    self._live.discard(process)
            data, _cut = proc.read_end(err, proc.CAPTURE_BYTES)
            return process.returncode, data.decode(errors="replace")

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            running = list(self._live)
        for process in running:
            proc.end_group(process, grace=0)


def headers_alone(site: Path, compiler: str, env: dict[str, str], timeout: float = HEADER_SECONDS,
                  compiles: Compiles | None = None) -> Headers:
    """Every header the wheel installs under ``executorch/include`` compiled alone (``-fsyntax-only``, C++17, the
    include folders and definitions the config gives its targets: ``executorch-config.cmake``'s
    ``INTERFACE_INCLUDE_DIRECTORIES`` and ``INTERFACE_COMPILE_DEFINITIONS`` of ``executorch::runtime``), as upstream's
    test compiles them. A header that needs one the wheel does not ship in its own folders, and this machine does
    not have (``cuda_runtime.h`` without a CUDA toolkit), is not judged here: it is said."""
    include = site / "executorch" / "include"
    c10 = include / "executorch" / "runtime" / "core" / "portable_type" / "c10"
    # the first folders of the wheel's own includes (executorch/..., c10/...): a header missing under one is the wheel's
    own = {entry.name for folder in (include, c10) if folder.is_dir() for entry in folder.iterdir()}
    headers = sorted(path for path in include.rglob("*.h") if path.is_file() and not str(path).endswith(HEADERS_LEFT_OUT)
                     and not _not_alone_by_design(path)) if include.is_dir() else []

    compiles = compiles or Compiles()

    def one(header: Path) -> tuple[str, str | None, str | None]:
        shown = str(header.relative_to(include))
        cmd = [compiler, "-std=c++17", "-fsyntax-only", "-x", "c++", f"-I{include}", f"-I{c10}",
               "-DC10_USING_CUSTOM_GENERATED_MACROS", "-include", str(header), os.devnull]
        done = compiles.run(cmd, f"compiling {header.name} alone", env, timeout)
        if done is None:
            return shown, None, None  # stopped: the build says so, and keeps nothing of it
        if isinstance(done, str):
            return shown, done, None
        code, stderr = done
        if code == 0:
            return shown, None, None
        missing = _MISSING.search(stderr)
        if missing and missing[1].split("/", 1)[0] not in own:
            return shown, None, missing[1]  # a header of the system's, not the wheel's: not judged here
        first = next((line.strip() for line in stderr.splitlines() if "error" in line), proc.tail(stderr, 1))
        return shown, f"{shown}: {first}", None

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        found = list(pool.map(one, headers))
    return Headers(len(headers), tuple(why for _, why, _ in found if why is not None),
                   tuple((shown, need) for shown, _, need in found if need is not None))


KEPT = paths.GATE / "cpp-headers"  # verdicts with no failure, one file a key (headers_key); only the gate writes here
KEPT_BYTES = 1 << 20  # what is read of one kept verdict
HASHED_BYTES = 1 << 30  # the most of the include folder hashed for a key: past it, nothing is kept
# What a compile reads from its environment beside its command line: the build's variables (which build_environment
# leaves out, but headers_key may be given any environment), and what the build keeps (the locale its messages are
# in, ...): part of the key, so a run whose compiles could differ never takes another's verdict.
COMPILE_VARIABLES = (*BUILD_VARIABLES, "SOURCE_DATE_EPOCH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TMPDIR")


def headers_key(site: Path, compiler: str, env: dict[str, str]) -> str | None:
    """The sha256 of what ``headers_alone``'s verdict is a function of: every file and link under the include folder
    (its path, and its bytes or the link's text), the compiler (its resolved path, size, modification time and what
    ``--version`` says) and its system include folders (``_system_include_folders``), the compile's variables, and
    this module's text. None where it cannot be known within bounds."""
    include = site / "executorch" / "include"
    resolved = shutil.which(compiler, path=env.get("PATH")) or compiler
    try:
        stat = os.stat(resolved)
        version = proc.run([resolved, "--version"], what="the C++ compiler", timeout=60, check=False, env=env)
    except (OSError, GateError):
        return None
    searched = _system_include_folders(resolved, env)
    if searched is None:
        return None
    digest = hashlib.sha256(json.dumps([
        os.path.realpath(resolved), stat.st_size, stat.st_mtime_ns, version.returncode, version.stdout, searched,
        [(name, env.get(name)) for name in COMPILE_VARIABLES],
        hashlib.sha256(Path(__file__).read_bytes()).hexdigest()]).encode())
    hashed = 0
    for root, folders, files in os.walk(include):  # links to folders are not followed: each is hashed as its text
        folders.sort()
        for name in sorted(files + [f for f in folders if os.path.islink(os.path.join(root, f))]):
            path = os.path.join(root, name)
            shown = os.path.relpath(path, include).encode(errors="surrogateescape")
            try:
                if os.path.islink(path):
                    digest.update(b"L" + shown + b"\0" + os.readlink(path).encode(errors="surrogateescape") + b"\0")
                    continue
                with open(path, "rb") as handle:  # streamed, and bounded across the folder
                    digest.update(b"F" + shown + b"\0")
                    while chunk := handle.read(1 << 20):
                        hashed += len(chunk)
                        if hashed > HASHED_BYTES:
                            return None
                        digest.update(chunk)
                    digest.update(b"\0")
            except OSError:
                return None
    return digest.hexdigest()


def _system_include_folders(compiler: str, env: dict[str, str]) -> list[tuple[str, int]] | None:
    """The folders the compiler searches for ``<...>`` headers (what ``-E -v`` lists), each with its modification time:
    an upgrade of the C++ library's headers replaces files there, which changes the folder's time, so a verdict kept
    before it is not taken after. None where the compiler does not say."""
    try:
        done = proc.run([compiler, "-x", "c++", "-E", "-v", os.devnull], what="the C++ compiler's search path", timeout=60,
                        check=False, env=env)
        said = done.stderr.splitlines()
        start = said.index("#include <...> search starts here:")
        end = said.index("End of search list.", start)
        return [(os.path.realpath(line.strip()), os.stat(line.strip()).st_mtime_ns) for line in said[start + 1:end]]
    except (OSError, ValueError, GateError):
        return None


def kept_headers(key: str | None, folder: Path = KEPT) -> Headers | None:
    """The verdict an earlier run kept for ``key``, or None: no file, one over ``KEPT_BYTES``, not a regular file, or
    one whose content is not a verdict for that key (a file the gate did not write is never taken)."""
    if key is None:
        return None
    path = folder / f"{key}.json"
    try:
        data = filekind.read_regular(path, KEPT_BYTES, follow=False)
    except filekind.Unreadable:
        return None
    try:
        said = json.loads(data)
        if said["key"] != key or said["failures"]:
            return None
        return Headers(int(said["count"]), (), tuple((str(a), str(b)) for a, b in said["unjudged"]),
                       earlier=str(path))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def keep_headers(key: str | None, headers: Headers, folder: Path = KEPT) -> None:
    """``headers`` kept for ``key`` where it has no failure: written whole to a temporary file of this run's, then
    renamed onto the key's name (two runs that keep one key each write a whole file). A folder that cannot be written
    keeps nothing; the run's verdict is the same."""
    if key is None or headers.failures or headers.earlier is not None:
        return
    written = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, prefix=".kept-", suffix=".tmp", delete=False) as handle:
            written = handle.name
            json.dump({"key": key, "count": headers.count, "failures": [], "unjudged": [list(p) for p in headers.unjudged]},
                      handle)
        os.replace(written, folder / f"{key}.json")
    except OSError:
        if written is not None:
            Path(written).unlink(missing_ok=True)


def _not_alone_by_design(header: Path) -> bool:
    """A header that says it must not be included alone (its own ``#error`` guard, as torch's headeronly
    ``complex_utils.h`` in 1.5.1's c10 copy: "is not meant to be individually included")."""
    try:
        with header.open("rb") as handle:
            text = handle.read(20_000).decode("utf-8", errors="replace")
    except OSError:
        return False
    return bool(re.search(r"#\s*error\b(?:[^\n]|\\\n)*individually included", text))  # a continued line too
