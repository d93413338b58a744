"""Every extension module the wheel ships imports, each in a process of its own.

The modules are the installed distribution's ``*.cpython-*.so`` and ``*.abi3.so`` files (its RECORD), each imported
by its dotted name in ``python -I`` with the clean loader environment (``smoke.environment.loaderenv``). A process
each: in one, a module whose library its RUNPATH misses would load anyway once another had loaded that soname, and a
crash would end the others' imports too. The child starts ``python -m smoke.child.extensions VERDICT.json`` early,
beside the exports, and collects its verdict last (``collect``).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
import time
from importlib import metadata
from pathlib import Path, PurePosixPath

from smoke import proc
from smoke.child import forks
from smoke.errors import GateError
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import EXTENSIONS

DISTRIBUTION = "executorch"
IMPORT_TIMEOUT_S = 300
LOG_BYTES = 1 << 20  # what is read of the together fork's output (its end)
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
    print("\\n" + json.dumps({"end": sys.argv[1]}), flush=True)  # it reached its end: the import returned
""")
# Every module that imported alone, into one process, in name order: a mark before each import (to stdout, where
# stderr is sent too), the loader's or the module's error after one that raised, an end line once all were tried.
_TOGETHER = textwrap.dedent("""
    import importlib, json, os, sys
    os.dup2(1, 2)
    for index, module in enumerate(sys.argv[1:]):
        print("\\n" + MARK + str(index), flush=True)
        try:
            importlib.import_module(module)
        except BaseException as exc:
            print("\\n" + json.dumps({"error": index, "message": f"{type(exc).__name__}: {exc}"}), flush=True)
    print("\\n" + json.dumps({"end": len(sys.argv) - 1}), flush=True)
""").replace("MARK", repr("@@smoke.child.extensions "))
MARK = "@@smoke.child.extensions "
# What a second registration prints: ExecuTorch's kernel registry (it then aborts), its platform layer,
# torch's dispatcher (a second TORCH_LIBRARY or an operator defined twice: it throws, so terminate), and
# the generic words. Matched per load or import, in what that one printed (here and smoke.child.loads).
REGISTERED_TWICE = re.compile(r"Re-registering |Tried to register an operator|Only a single TORCH_LIBRARY|"
                              r"Overriding a previously registered kernel|register_pal\(\) called multiple times|"
                              r"already registered|registered twice|registered more than once", re.IGNORECASE)


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
    """torch's library folder when torch is not in this environment's site-packages (``--torch-from``), else None.

    The wheel's libraries reach torch through ``$ORIGIN/../../../torch/lib``, which exists only where pip put torch
    beside them; elsewhere, this folder is given to these imports' loader alone as LD_LIBRARY_PATH (``libraries
    resolve`` has checked that each RUNPATH leads into torch/).
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


def with_torch_lib(torch_lib: str | None) -> dict[str, str] | None:
    """This process's environment with torch's folder as LD_LIBRARY_PATH where torch lies outside site-packages
    (``torch_outside``); None (inherit it) otherwise."""
    import os

    return {**os.environ, "LD_LIBRARY_PATH": torch_lib} if torch_lib else None


def import_alone(module: str, timeout: float = IMPORT_TIMEOUT_S, torch_lib: str | None = None) -> dict:
    """Import one module in a fresh ``python -I``; its outcome as data: ``error`` is None when it imported."""

    start = time.monotonic()
    env = with_torch_lib(torch_lib)
    try:
        ran = proc.run([sys.executable, "-I", "-c", _IMPORT, module], what=f"importing {module}", timeout=timeout, check=False,
                       env=env)
    except GateError as exc:  # could not start, or ran past its limit
        return {"module": module, "error": str(exc), "seconds": round(time.monotonic() - start, 3)}
    seconds = round(time.monotonic() - start, 3)
    if ran.returncode == 0 and _last(ran.stdout).get("end") == module:
        return {"module": module, "error": None, "seconds": seconds}
    if ran.returncode == 0:  # exited 0 without saying the import returned: the module's own code ended the process
        return {"module": module, "seconds": seconds,
                "error": f"the process exited 0 while importing it, before the import returned (code run by the import ends "
                         f"the process): {proc.tail(ran.stdout + ran.stderr) or 'it printed nothing'}"}
    if ran.returncode < 0:
        error = f"the process was ended by {signal.Signals(-ran.returncode).name}: {proc.tail(ran.stderr)}"
    else:
        error = _last(ran.stdout).get("error") or f"exited {ran.returncode}: {proc.tail(ran.stdout + ran.stderr)}"
    return {"module": module, "error": str(error), "seconds": seconds}


def _last(stdout: str) -> dict:
    """The JSON object on the last line of a process's output, or {}."""
    lines = stdout.strip().splitlines()
    return _json_object(lines[-1]) if lines else {}


def _json_object(line: str) -> dict:
    """The JSON object one line holds, or {} (not JSON, or JSON of another kind)."""
    try:
        said = json.loads(line)
    except (ValueError, RecursionError):
        return {}
    return said if isinstance(said, dict) else {}


def split_marked(text: str, mark: str) -> tuple[dict[int, str], int]:
    """What was printed after each ``mark`` line (``MARK`` then an index), by index, and the last index marked (-1 for
    none): a process that marks each load or import before it (here and ``smoke.child.loads``)."""
    said: dict[int, list[str]] = {}
    current = -1
    for line in text.splitlines():
        if line.startswith(mark) and line[len(mark):].strip().isdigit():
            current = int(line[len(mark):])
            continue
        said.setdefault(current, []).append(line)
    return {index: "\n".join(lines) for index, lines in said.items() if index >= 0}, current


def import_together(modules: list[str], timeout: float = IMPORT_TIMEOUT_S, torch_lib: str | None = None) -> dict:
    """Import ``modules`` into one ``python -I``, in order: what each printed (by index), the errors, how the
    process ended and whether it reached its end. Each imports alone; two that register one kernel, operator or
    backend each register it twice in the one process a user imports them into."""

    env = with_torch_lib(torch_lib)
    try:
        ran = proc.run([sys.executable, "-I", "-c", _TOGETHER, *modules], what="importing the extension modules together",
                       timeout=timeout, check=False, env=env)
    except GateError as exc:
        return {"reached": -1, "output": {}, "errors": {}, "ended": False, "exit": None, "signal": None, "broken": str(exc)}
    return read_together(ran.stdout, ran.returncode, modules)


def read_together(stdout: str, code: int, modules: list[str]) -> dict:
    """What a process importing ``modules`` together said (``_TOGETHER``, ``import_here``) and how it ended, as data."""
    errors: dict[int, str] = {}
    ended, printed = False, []
    for line in stdout.splitlines():
        record = _json_object(line) if line.startswith("{") else {}
        if record.get("end") == len(modules):
            ended = True
        elif "error" in record and str(record["error"]).isdigit():
            errors[int(record["error"])] = str(record.get("message"))
        else:
            printed.append(line)
    output, reached = split_marked("\n".join(printed), MARK)
    return {"reached": reached, "output": output, "errors": errors,
            "ended": ended, "exit": code if code >= 0 else None, "signal": signal.Signals(-code).name if code < 0 else None}


def import_here(modules: list[str]) -> int:
    """``_TOGETHER``'s work in this process (a fork of the child: ``fork_together``): each module imported in order,
    marked before it, its error after it, an end line once all were tried; its output is fds 1 and 2."""
    import importlib

    for index, module in enumerate(modules):
        print("\n" + MARK + str(index), flush=True)
        try:
            importlib.import_module(module)
        except BaseException as exc:  # noqa: BLE001 - said, as the loader or the module said it
            print("\n" + json.dumps({"error": index, "message": f"{type(exc).__name__}: {exc}"}), flush=True)
    print("\n" + json.dumps({"end": len(modules)}), flush=True)
    return 0


def fork_together(workdir: Path) -> tuple[list[str], forks.Forked] | None:
    """Every extension module the wheel ships imported into one process: a fork of the child made right after its
    imports (torch, ``executorch.exir``: what a user's process holds before it imports them), while the child exports;
    None where the distribution is not installed (``collect`` says so). ``collect`` reads it (``together_of``)."""
    try:
        modules = shipped_modules()
    except metadata.PackageNotFoundError:
        return None
    return modules, forks.fork(lambda: import_here(modules), workdir / "together-imports.log")


def start_together(workdir: Path) -> tuple[list[str], forks.Started] | None:
    """Every extension module the wheel ships imported into one fresh ``python -I`` (``_TOGETHER``), started now, beside
    the exports: the child's way where it cannot fork (CUDA's driver initialised: ``forks.device_initialised``). None
    where the distribution is not installed; ``collect`` reads it as it reads the fork (``together_of``)."""
    try:
        modules = shipped_modules()
    except metadata.PackageNotFoundError:
        return None

    torch_lib = torch_outside()
    env = with_torch_lib(torch_lib)
    log = workdir / "together-imports.log"
    with open(log, "wb") as out:  # a file, not a pipe: nobody reads it while it runs
        process = proc.start([sys.executable, "-I", "-c", _TOGETHER, *modules], stdout=out, stderr=subprocess.STDOUT,
                             env=env, background=True)
    return modules, forks.Started(process, log)


def together_of(forked: tuple[list[str], forks.Forked | forks.Started], imported: list[str], torch_lib: str | None = None,
                timeout: float = IMPORT_TIMEOUT_S) -> dict | None:
    """The fork's verdict (or the process's of ``start_together``), as ``together`` gives it: where it went wrong (the
    module being imported and which earlier modules bring it about, each imported before it in a fresh process), or None
    where fewer than two modules imported alone (``imported``)."""
    modules, process = forked
    first = AFTER if isinstance(process, forks.Forked) else None  # what the process imported before the modules
    if len(imported) < 2:
        proc.end(process)
        return None
    start = time.monotonic()
    try:
        code = process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.wait()
    try:
        with process.log.open("rb") as handle:
            said = proc.read_end(handle, LOG_BYTES)[0].decode(errors="replace")
    except OSError:
        said = ""
    ran = read_together(said, code, modules)
    # a module that does not import alone raises here too, and is judged by that: only the others' errors count
    ran["errors"] = {index: error for index, error in ran["errors"].items() if modules[index] in imported}
    found = together_incident(ran)
    if found is None or modules[found[0]] not in imported:
        return {"modules": imported, "incident": None, "seconds": round(time.monotonic() - start, 3), "after_imports": first}
    index, seen, kind = found
    culprit = modules[index]
    after = [other for other in modules[:index] if other in imported
             and (hit := together_incident(import_together([other, culprit], torch_lib=torch_lib))) is not None and hit[0] == 1]
    return {"modules": imported, "incident": {"module": culprit, "after": after, "seen": seen, "kind": kind},
            "seconds": round(time.monotonic() - start, 3), "after_imports": first}


# What the child had imported when it forked the process the modules are imported into together (smoke.child.run).
AFTER = "torch and executorch.exir"


def together_incident(ran: dict) -> tuple[int, str, str] | None:
    """Where the one process went wrong: the first import that printed a second registration, the first that raised
    (a module that imports alone and raises after the others: pybind11's "generic_type: type ... is already
    registered!", issue 48), or the import during which it was ended (a signal, or an exit before its end); what was
    seen; and which of the three it was ("twice", "raised", "ended")."""
    for index in sorted(ran["output"]):
        if REGISTERED_TWICE.search(ran["output"][index]) is not None:
            seen = next(line for line in ran["output"][index].splitlines() if REGISTERED_TWICE.search(line))
            return index, proc.tail(seen, 1), "twice"
    if ran.get("errors"):
        index = min(ran["errors"])
        return index, proc.tail(str(ran["errors"][index]), 1), "raised"
    if not ran["ended"]:
        how = f"was ended by {ran['signal']}" if ran["signal"] else f"ended (exit {ran['exit']})"
        broke = f"; {ran['broken']}" if ran.get("broken") else ""
        return max(ran["reached"], 0), (f"the process {how} during this import, before the imports after it{broke}: "
                                        f"{proc.tail(ran['output'].get(ran['reached'], '')) or 'it printed nothing'}"), "ended"
    return None


def together(modules: list[str], torch_lib: str | None = None) -> dict | None:
    """The modules that imported alone, into one process; where that goes wrong, the module being imported and
    the one imported before it that brings it about (each alone before it, a process each), as far as found."""
    if len(modules) < 2:
        return None
    start = time.monotonic()
    found = together_incident(import_together(modules, torch_lib=torch_lib))
    if found is None:
        return {"modules": modules, "incident": None, "seconds": round(time.monotonic() - start, 3)}
    index, seen, kind = found
    culprit = modules[index]
    after = [other for other in modules[:index]
             if (hit := together_incident(import_together([other, culprit], torch_lib=torch_lib))) is not None and hit[0] == 1]
    return {"modules": modules, "incident": {"module": culprit, "after": after, "seen": seen, "kind": kind},
            "seconds": round(time.monotonic() - start, 3)}


def extensions_main(out: Path, alone_only: bool = False) -> int:
    """Each module imported alone, a fresh ``python -I`` each; then, unless ``alone_only`` (the child imports them
    together in a fork of its own: ``fork_together``), those that imported into one fresh ``python -I`` too."""
    start = time.monotonic()
    try:
        modules = shipped_modules()
    except metadata.PackageNotFoundError as exc:
        out.write_text(json.dumps({"error": f"{DISTRIBUTION} is not installed ({exc})"}))
        return 0
    torch_lib = torch_outside()
    outcomes = [import_alone(module, torch_lib=torch_lib) for module in modules]
    both = None if alone_only else together([o["module"] for o in outcomes if o["error"] is None], torch_lib)
    out.write_text(json.dumps({"outcomes": outcomes, "together": both, "seconds": round(time.monotonic() - start, 3),
                               "torch_lib": torch_lib, "alone_only": alone_only}))
    return 0


def start_extensions_process(workdir: Path, alone_only: bool = False) -> subprocess.Popen:
    """The imports' process, started early; its verdict is read by ``collect``. ``alone_only``: the imports into one
    process are the child's fork's (``fork_together``)."""
    cmd = [sys.executable, "-m", "smoke.child.extensions", str(workdir / "extensions.json"), *(["--alone"] if alone_only else [])]
    with open(workdir / "extensions.log", "wb") as log:  # a file, not a pipe: nobody reads it while it runs
        return proc.start(cmd, stdout=log, stderr=subprocess.STDOUT, background=True)


def collect(started: subprocess.Popen | None, workdir: Path,
            forked: tuple[list[str], forks.Forked | forks.Started] | None = None) -> CheckResult:
    """Wait for the imports' process (started now if it was not) and judge what it wrote; ``forked``: the imports into
    one process made by the child's fork (``fork_together``), judged with them (the process then imported each alone only;
    the child, which made the fork, ends it whether or not it is waited for here)."""
    name = EXTENSIONS.name
    process = started or start_extensions_process(workdir, alone_only=forked is not None)
    process.wait()
    try:
        verdict = json.loads((workdir / "extensions.json").read_text())
    except (OSError, ValueError):
        return failed(name, f"the imports' process exited {process.returncode} without its verdict: "
                            f"{proc.file_tail(workdir / 'extensions.log')}")
    if "error" in verdict:
        return failed(name, verdict["error"])
    both = verdict.get("together")
    imported = [o["module"] for o in verdict["outcomes"] if o["error"] is None]
    if forked is not None:
        both = together_of(forked, imported, verdict.get("torch_lib"))
    elif verdict.get("alone_only"):  # the child broke off before its fork: the modules into one fresh process instead
        both = together(imported, verdict.get("torch_lib"))
    return judge(verdict["outcomes"], verdict["seconds"], verdict.get("torch_lib"), both)


def judge(outcomes: list[dict], seconds: float, torch_lib: str | None = None, both: dict | None = None) -> CheckResult:
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
    measured["together"] = both
    if both is not None and (found := both.get("incident")) is not None:
        kind = found.get("kind") or ("twice" if REGISTERED_TWICE.search(found["seen"]) else "ended")
        first = both.get("after_imports")
        before = (f" after {', '.join(found['after'])}" if found.get("after") else
                  f" after the modules before it or {first} (no one of them alone)" if first else
                  " after the modules before it (no one of them alone)")
        what = {"twice": "registers again what was registered", "raised": "raises when imported"}.get(kind, "ends the process when imported")
        where = f"in name order, after {first}" if first else "in name order"
        return failed(name, f"each imports alone, but imported together into one process ({where}) {found['module']} "
                            f"{what}{before}: {found['seen']}", **measured)
    one = "" if both is None else (f", and together into one process that had imported {both['after_imports']}"
                                   if both.get("after_imports") else ", and together into one process")
    return passed(name, f"all {len(outcomes)} import, each in a process of its own with a clean loader environment"
                        f"{one} ({seconds:.1f} s){stand_in}: {', '.join(modules)}", **measured)


if __name__ == "__main__":
    sys.exit(extensions_main(Path(sys.argv[1]), alone_only="--alone" in sys.argv[2:]))
