"""Every extension module the wheel ships imports, each in a process of its own.

The modules are the installed distribution's ``*.cpython-*.so`` and ``*.abi3.so`` files (its RECORD),
each imported by its dotted name (``executorch/extension/pybindings/_portable_lib.cpython-311-….so``
is ``executorch.extension.pybindings._portable_lib``) in ``python -I``: the environment's
site-packages and the clean loader environment (``smoke.environment.loaderenv``), nothing else.

A process each, not one for all: in one process a module whose library is not found from its own
RUNPATH would load anyway once an earlier module had loaded a library of that name (the loader
reuses a loaded soname), and a crash in one import would end the others' too.

The child starts ``python -m smoke.child.extensions VERDICT.json`` early, so that it runs beside the
exports, and collects its verdict last (``collect``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from importlib import metadata
from pathlib import Path, PurePosixPath

from smoke import proc
from smoke.errors import GateError
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import EXTENSIONS

DISTRIBUTION = "executorch"
IMPORT_TIMEOUT_S = 300
# Run in the module's process: the exception on one line, the first one in its chain (a package
# that turns the loader's ImportError into its own error would hide the loader's message), and the
# file of the wheel (or of a dependency) that raised it, as the last line of stdout. A loader's error
# is raised by the import system itself: its message (dlerror's) is the whole story.
_IMPORT = textwrap.dedent("""
    import importlib, json, os, sys, sysconfig, traceback
    try:
        importlib.import_module(sys.argv[1])
    except BaseException as exc:
        said = lambda e: f"{type(e).__name__}: {e}".replace("\\n", " ")
        error, first = said(exc), exc
        while (first.__cause__ or first.__context__) is not None:
            first = first.__cause__ or first.__context__
        if first is not exc:
            error += f" (from {said(first)})"
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if not f.filename.startswith("<") and f.filename != importlib.__file__]
        if frames:
            site = sysconfig.get_paths()["purelib"]
            where = frames[-1].filename
            where = os.path.relpath(where, site) if where.startswith(site + os.sep) else where
            error += f" (raised in {where} line {frames[-1].lineno})"
        print("\\n" + json.dumps({"error": error}), flush=True)
        sys.exit(1)
""")


def module_name(path: str) -> str | None:
    """The dotted name an extension module is imported by, from its path under site-packages;
    None for a file that is not an extension module or lies outside site-packages."""
    parts = PurePosixPath(path).parts
    if not parts or ".." in parts or not parts[-1].endswith(".so"):
        return None
    stem, _, suffix = parts[-1].partition(".")
    if not (suffix.startswith("cpython-") or suffix == "abi3.so") or not stem.isidentifier():
        return None
    return ".".join((*parts[:-1], stem))


def shipped_modules(distribution: str = DISTRIBUTION) -> list[str]:
    """The extension modules the installed distribution ships, by dotted name, sorted."""
    files = metadata.files(distribution) or []
    return sorted({name for f in files if (name := module_name(str(f))) is not None})


def torch_outside() -> str | None:
    """torch's library folder when torch is not in this environment's site-packages (``--torch-from``:
    a ``.pth`` file leads to another environment's), else None.

    The wheel's libraries reach torch's through ``$ORIGIN/../../../torch/lib``, which exists only where
    pip put torch beside them. With torch elsewhere, that folder stands in for site-packages' own, given to
    these imports' loader (and only to theirs) as LD_LIBRARY_PATH: ``libraries resolve`` has checked that
    each library's RUNPATH leads into torch/, and ``dependency libraries installed`` that the files are there.
    """
    import importlib.util
    import os
    import sysconfig

    spec = importlib.util.find_spec("torch")  # finds the package without running it
    if spec is None or spec.origin is None:
        return None
    folder = os.path.dirname(os.path.realpath(spec.origin))
    sites = {os.path.realpath(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")}
    if os.path.dirname(folder) in sites:
        return None
    return os.path.join(folder, "lib")


def import_alone(module: str, timeout: float = IMPORT_TIMEOUT_S, torch_lib: str | None = None) -> dict:
    """Import one module in a fresh ``python -I``; its outcome as data: ``error`` is None when it imported."""
    import os

    start = time.monotonic()
    env = {**os.environ, "LD_LIBRARY_PATH": torch_lib} if torch_lib else None
    try:
        ran = proc.run([sys.executable, "-I", "-c", _IMPORT, module], what=f"importing {module}", timeout=timeout, check=False,
                       env=env)
    except GateError as exc:  # could not start, or ran past its limit
        return {"module": module, "error": str(exc), "seconds": round(time.monotonic() - start, 3)}
    seconds = round(time.monotonic() - start, 3)
    if ran.returncode == 0:
        return {"module": module, "error": None, "seconds": seconds}
    if ran.returncode < 0:
        error = f"the process was ended by {signal.Signals(-ran.returncode).name}: {proc.tail(ran.stderr)}"
    else:
        try:
            error = json.loads(ran.stdout.strip().splitlines()[-1])["error"]
        except (ValueError, IndexError, KeyError, TypeError):
            error = f"exited {ran.returncode}: {proc.tail(ran.stdout + ran.stderr)}"
    return {"module": module, "error": error, "seconds": seconds}


def extensions_main(out: Path) -> int:
    start = time.monotonic()
    try:
        modules = shipped_modules()
    except metadata.PackageNotFoundError as exc:
        out.write_text(json.dumps({"error": f"{DISTRIBUTION} is not installed ({exc})"}))
        return 0
    torch_lib = torch_outside()
    outcomes = [import_alone(module, torch_lib=torch_lib) for module in modules]
    out.write_text(json.dumps({"outcomes": outcomes, "seconds": round(time.monotonic() - start, 3), "torch_lib": torch_lib}))
    return 0


def start_extensions_process(workdir: Path) -> subprocess.Popen:
    """The imports' process, started early; its verdict is read by ``collect``."""
    cmd = [sys.executable, "-m", "smoke.child.extensions", str(workdir / "extensions.json")]
    with open(workdir / "extensions.log", "wb") as log:  # a file, not a pipe: nobody reads it while it runs
        return proc.start(cmd, stdout=log, stderr=subprocess.STDOUT)


def collect(started: subprocess.Popen | None, workdir: Path) -> CheckResult:
    """Wait for the imports' process (started now if it was not) and judge what it wrote."""
    name = EXTENSIONS.name
    process = started or start_extensions_process(workdir)
    process.wait()
    try:
        verdict = json.loads((workdir / "extensions.json").read_text())
    except (OSError, ValueError):
        return failed(name, f"the imports' process exited {process.returncode} without its verdict: "
                            f"{proc.file_tail(workdir / 'extensions.log')}")
    if "error" in verdict:
        return failed(name, verdict["error"])
    return judge(verdict["outcomes"], verdict["seconds"], verdict.get("torch_lib"))


def judge(outcomes: list[dict], seconds: float, torch_lib: str | None = None) -> CheckResult:
    name = EXTENSIONS.name
    modules = [o["module"] for o in outcomes]
    broken = [o for o in outcomes if o["error"] is not None]
    measured = {"modules": modules, "imported": len(outcomes) - len(broken), "seconds": seconds,
                "failed": {o["module"]: o["error"] for o in broken}, "torch_lib_stand_in": torch_lib}
    # Said in the line: these imports' loader was given torch's folder, which pip would have put in site-packages.
    stand_in = f"; torch is outside site-packages, so {torch_lib} stood in for site-packages/torch/lib" if torch_lib else ""
    if not outcomes:
        return skipped(name, f"the installed {DISTRIBUTION} ships no extension module (*.cpython-*.so, *.abi3.so)", **measured)
    if broken:
        said = "; ".join(f"{o['module']}: {o['error']}" for o in broken)
        return failed(name, f"{len(broken)} of {len(outcomes)} do not import in a clean environment{stand_in}: {said}", **measured)
    return passed(name, f"all {len(outcomes)} import, each in a process of its own with a clean loader environment "
                        f"({seconds:.1f} s){stand_in}: {', '.join(modules)}", **measured)


if __name__ == "__main__":
    sys.exit(extensions_main(Path(sys.argv[1])))
