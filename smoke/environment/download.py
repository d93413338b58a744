"""The default wheel: with none given, a row gates the current public release.

It is downloaded, with its name printed, from the package index pip is configured
with (or ``--wheel-index``) into a cache folder, for the environment's interpreter
and the row's architecture.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from smoke import paths, proc
from smoke.errors import InvalidWheel
from smoke.readers.systems import SYSTEMS
from smoke.readers.wheel import PROJECT, Interpreter
from smoke.rows import Row

CACHE = paths.WHEELS


def download_command(row: Row, interpreter: Interpreter, dest: Path, index: str | None, version: str | None = None,
                     pre: bool = False) -> list[str]:
    """pip download of one executorch wheel for the row's platform and the interpreter's Python: the current release,
    ``version`` where one is named, the newest pre-release or nightly too with ``pre``."""
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--dest", str(dest), "--python-version", f"{interpreter.version[0]}.{interpreter.version[1]}",
           "--implementation", interpreter.tag[:2]]
    for tag in SYSTEMS[row.system].download_tags(row.machine):
        cmd += ["--platform", tag]
    if index:
        cmd += ["--index-url", index]
    if pre:
        cmd += ["--pre"]
    return cmd + [f"{PROJECT}=={version}" if version else PROJECT]


def default_wheel(row: Row, interpreter: Interpreter, index: str | None, say, version: str | None = None,
                  pre: bool = False) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    where = index or "the configured package index"
    which = (f"{PROJECT} {version}" if version else f"the newest {PROJECT}, pre-releases and nightlies included" if pre
             else f"the current {PROJECT} release")
    say(f"no wheel given: downloading {which} for {interpreter.tag} {row.machine} from {where}")
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        ran = proc.run(download_command(row, interpreter, Path(tmp), index, version, pre), what="downloading the wheel",
                       error=InvalidWheel, check=False, fix="pass the path of an executorch .whl, or --wheel-index URL")
        found = sorted(Path(tmp).glob(f"{PROJECT}-*.whl"))
        if ran.returncode != 0 or not found:
            tail = proc.tail(ran.stderr, 1) or "no wheel came back"
            raise InvalidWheel(f"no wheel given and none could be downloaded from {where} ({which}: {tail}); "
                               f"pass the path of an executorch .whl, or --wheel-index URL"
                               f"{'' if version or pre else ', --wheel-version VERSION or --pre'}")
        target = CACHE / found[-1].name
        found[-1].replace(target)
    say(f"chose {target.name} (kept in {CACHE})")
    return target
