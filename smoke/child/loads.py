"""Every shared library the wheel ships loads, and registers what it registers once (issue 28, parts 1 and 2).

Each ELF library the installed RECORD lists, extension modules too, is opened with ``ctypes.CDLL(path, RTLD_NOW)``:

- ``libraries load``: each alone after ``import torch``; an undefined symbol (executorch#7086), a missing need or a
  crash fails;
- ``libraries load before torch``: each alone without torch, catching reliance on torch's libtorch (executorch#3049),
  which the child's own import of torch hides;
- ``registered once``: all in one process; a second registration (executorch#21642) fails, naming both libraries.

Loads run in forks, each under ``LOAD_TIMEOUT_S``; the child runs this beside the exports and judges it last
(``collect``). Standard library only: the gate's environment has no pyelftools.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

from smoke import proc
from smoke.child import forks
from smoke.child.extensions import REGISTERED_TWICE, split_marked, torch_outside
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import CHILD, Check, ChildCheck

DISTRIBUTION = "executorch"
LOAD_TIMEOUT_S = 120  # one load (or one process loading them all): its static initializers included
SHARED_LIBRARY = re.compile(r"\.so(\.[0-9]+)*$")  # a name the loader is given: libx.so, libx.so.1.2, x.cpython-311-….so
ELF_MAGIC = b"\x7fELF"
MARK = "@@smoke.child.loads "  # written to the output before each load: what follows it, that load printed
LOG_BYTES = 1 << 20  # what is read of one fork's output (its end)

LOADS: ChildCheck = Check("libraries load", CHILD, 82)
BEFORE_TORCH: ChildCheck = Check("libraries load before torch", CHILD, 83)
REGISTERED_ONCE: ChildCheck = Check("registered once", CHILD, 84)
CHECKS = (LOADS, BEFORE_TORCH, REGISTERED_ONCE)


def is_library(path: str) -> bool:
    """A path under site-packages named as a library the loader opens (extension modules included)."""
    parts = PurePosixPath(path).parts
    return bool(parts) and ".." not in parts and not PurePosixPath(path).is_absolute() and bool(SHARED_LIBRARY.search(parts[-1]))


def shipped_libraries(distribution: str = DISTRIBUTION) -> list[tuple[str, str]]:
    """(path in the wheel, where it is installed) of every ELF shared library the installed distribution
    ships, sorted by path; a file named ``.so`` that is not ELF is left to ``architecture``."""
    found = []
    for entry in metadata.files(distribution) or []:
        if not is_library(str(entry)):
            continue
        where = str(entry.locate())
        try:
            with open(where, "rb") as handle:
                if handle.read(len(ELF_MAGIC)) != ELF_MAGIC:
                    continue
        except OSError:
            continue  # RECORD lists it, the install does not hold it: not this check's to say
        found.append((str(entry), where))
    return sorted(found)


def _said(text: str) -> str:
    return " ".join(text.split())


def load_in_fork(paths: list[str], log: Path, timeout: int = LOAD_TIMEOUT_S, at_exit: bool = False) -> dict:
    """Load ``paths`` in order with RTLD_NOW in a fork of this process, its output to ``log``. ``at_exit``: the fork then
    ends through the C library's ``exit``, which runs the loaded libraries' destructors (``os._exit`` skips them), so
    that one that ends the process as it exits is seen (executorch#22653: a destructor that calls abort).

    What happened, as data: ``reached`` (the last load begun), ``errors``, ``signal``, ``exit``, ``output`` (by index),
    and ``ended``, whether it said it reached its end (an initializer that ends the process, ``_exit(0)`` included,
    never says so)."""
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the fork: its own output, its own time limit; it never returns
        ended = False
        try:
            os.close(read)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(timeout)
            for index, path in enumerate(paths):
                os.write(2, f"\n{MARK}{index}\n".encode())
                os.write(write, (json.dumps({"loading": index}) + "\n").encode())
                try:
                    ctypes.CDLL(path, mode=os.RTLD_NOW)
                except OSError as exc:
                    os.write(write, (json.dumps({"error": index, "message": _said(str(exc))}) + "\n").encode())
            os.write(write, (json.dumps({"mapped": mapped()}) + "\n").encode())
            os.write(write, (json.dumps({"end": len(paths)}) + "\n").encode())  # it reached its end (below)
            ended = True
        except BaseException as exc:  # noqa: BLE001 - said, then the fork ends
            os.write(write, (json.dumps({"broken": f"{type(exc).__name__}: {exc}"}) + "\n").encode())
        finally:
            if ended and at_exit:
                try:
                    ctypes.CDLL(None).exit(0)  # the destructors run; it does not return
                finally:
                    os._exit(0)
            os._exit(0)
    os.close(write)
    events = []
    with os.fdopen(read, "rb") as pipe:
        for line in pipe:  # until the fork ends (it closes its end)
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    reached = max((e["loading"] for e in events if "loading" in e), default=-1)
    outcome: dict[str, Any] = {"reached": reached, "errors": {e["error"]: e["message"] for e in events if "error" in e},
               "signal": signal.Signals(-code).name if code < 0 else None, "exit": code if code >= 0 else None,
               "output": split_output(log), "mapped": next((e["mapped"] for e in events if "mapped" in e), []),
               "ended": any(e.get("end") == len(paths) for e in events)}
    broken = [e["broken"] for e in events if "broken" in e]
    if broken:
        outcome["broken"] = broken[0]
    return outcome


def mapped() -> list[str]:
    """The files this process has mapped (/proc/self/maps): the libraries loaded, needs included."""
    try:
        with open("/proc/self/maps") as maps:
            return sorted({line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6
                           and line.split(None, 5)[5].startswith("/")})
    except OSError:
        return []


def split_output(log: Path) -> dict[int, str]:
    """What each load printed (the text after its mark), from the log's last ``LOG_BYTES``."""
    try:
        with log.open("rb") as handle:
            data, _cut = proc.read_end(handle, LOG_BYTES)
    except OSError:
        return {}
    return split_marked(data.decode(errors="replace"), MARK)[0]


def alone(path: str, log: Path, at_exit: bool = False) -> dict:
    """One library loaded in a fork: ``error`` is None when it loaded (and, ``at_exit``, its process then exited
    cleanly with its destructors run: ``load_in_fork``)."""
    start = time.monotonic()
    ran = load_in_fork([path], log, at_exit=at_exit)
    output = ran["output"].get(0, "")
    exited = bool(ran["ended"] and (ran["signal"] or ran["exit"]))
    if exited:  # only where at_exit: it loaded, then its exit went wrong
        how = f"was ended by {ran['signal']}" if ran["signal"] else f"exited {ran['exit']}"
        error = (f"it loaded, then the process {how} as it exited (its destructors run): a destructor of it, or of a "
                 f"library it loaded, ends the process (executorch#22653): {proc.tail(output) or 'it printed nothing'}")
    elif ran["signal"]:
        why = "ran past its {} s limit".format(LOAD_TIMEOUT_S) if ran["signal"] == "SIGALRM" else "crashed or aborted"
        error = f"the process was ended by {ran['signal']} while loading it ({why}): {proc.tail(output) or 'it printed nothing'}"
    elif 0 in ran["errors"]:
        error = ran["errors"][0]
    elif ran.get("broken") or ran["exit"]:
        broke = ran.get("broken") or f"exit {ran['exit']}"
        error = f"the loading process broke: {broke}: {proc.tail(output)}"
    elif not ran["ended"]:
        error = (f"the process ended (exit {ran['exit']}) while loading it, before the load returned: its initializer "
                 f"ends the process: {proc.tail(output) or 'it printed nothing'}")
    else:
        error = None
    return {"error": error, "seconds": round(time.monotonic() - start, 3), "mapped": ran["mapped"] if error is None else [],
            **({"at_exit": True} if exited else {})}


EXTENSION_MODULE = re.compile(r"\.(cpython-[^/]*|abi3)\.so$")


def through_loaders(outcomes: dict[str, dict], libraries: list[tuple[str, str]]) -> dict[str, dict]:
    """A library that fails alone but that a shipped extension module loads as its need, every symbol bound, passes: that
    is how it is ever loaded (1.2.0's CUDA shims bind logging from _portable_lib); its loader is kept as ``via``, its
    own error as ``alone``. One only plain libraries load is not excused: it must name its providers in DT_NEEDED
    (executorch#7086)."""
    where = dict(libraries)
    judged = dict(outcomes)
    for path, outcome in outcomes.items():
        if outcome["error"] is None or EXTENSION_MODULE.search(path):
            continue  # an extension module is never only a need: Python imports it by path, alone
        real = os.path.realpath(where[path])
        loaders = [other for other, seen in outcomes.items() if other != path and seen["error"] is None
                   and EXTENSION_MODULE.search(other) and real in seen.get("mapped", ())]
        if loaders:
            judged[path] = {**outcome, "error": None, "via": loaders[0], "alone": outcome["error"]}
    return judged


def incident(ran: dict) -> tuple[int, str] | None:
    """Where a run of loads went wrong as a second registration would: the load during which the process
    was ended by a signal, or the first load that printed a second registration; and what was seen."""
    for index in sorted(ran["output"]):
        found = REGISTERED_TWICE.search(ran["output"][index])
        if found is not None:
            line = next(line for line in ran["output"][index].splitlines() if REGISTERED_TWICE.search(line))
            ended = f" (and the process was ended by {ran['signal']})" if ran["signal"] and index == ran["reached"] else ""
            return index, proc.tail(line, 1) + ended
    said = proc.tail(ran["output"].get(ran["reached"], "")) or "it printed nothing"
    if ran["signal"] and ran["reached"] >= 0:
        return ran["reached"], f"the process was ended by {ran['signal']}: {said}"
    if not ran["ended"] and ran["reached"] >= 0:  # an exit, 0 or not, during a load: the loads after it never ran
        broke = f"; {ran['broken']}" if ran.get("broken") else ""
        return ran["reached"], f"the process ended (exit {ran['exit']}) during this load, before the loads after it{broke}: {said}"
    return None


def together(every: list[tuple[str, str]], workdir: Path, left_out: frozenset[str] = frozenset()) -> dict:
    """Every library into one process (but ``left_out``: those that do not load alone, which ``libraries
    load`` names); where that goes wrong, the library being loaded and the one that registered first."""
    start = time.monotonic()
    libraries = [(path, where) for path, where in every if path not in left_out]
    paths = [where for _, where in libraries]
    ran = load_in_fork(paths, workdir / "together.log")
    found = incident(ran)
    verdict = {"loaded": len(paths) - len(ran["errors"]), "errors": {libraries[i][0]: m for i, m in ran["errors"].items()},
               "left_out": sorted(left_out)}
    if found is None:
        return {**verdict, "incident": None, "seconds": round(time.monotonic() - start, 3)}
    index, seen = found
    culprit = paths[index]
    # Who registered it first: each other library loaded alone before it, in a fork each; of those that
    # bring it about, the one every such load maps (a library another loads as its need is named, not the other).
    again = []
    if (hit := incident(load_in_fork([culprit], workdir / "pair.log"))) is not None and hit[0] == 0:
        return {**verdict, "incident": {"library": libraries[index][0], "after": None, "also": [], "alone": True, "seen": hit[1]},
                "seconds": round(time.monotonic() - start, 3)}
    for other, (path, where) in enumerate(libraries):
        if other != index:
            tried = load_in_fork([where, culprit], workdir / "pair.log")
            if (hit := incident(tried)) is not None and hit[0] == 1:
                again.append((path, set(load_in_fork([where], workdir / "pair.log")["mapped"])))
    common = set.intersection(*(mapped for _, mapped in again)) if again else set()
    first = [path for path, _ in again if os.path.realpath(dict(libraries)[path]) in common] or [path for path, _ in again]
    return {**verdict, "incident": {"library": libraries[index][0], "after": first[0] if first else None,
                                    "also": [path for path, _ in again if path != (first[0] if first else None)], "seen": seen},
            "seconds": round(time.monotonic() - start, 3)}


PARTS = ("before", "after")  # a process each where the child forks them (``fork_parts``); one process does both otherwise


def loads_main(out: Path, parts: tuple[str, ...] = PARTS) -> int:
    """Run in the gate's environment: every judgement of this module, written to ``out`` as JSON. ``parts``: the loads
    before torch is imported, those after it (with the one process of ``registered once``), or both in turn."""
    start = time.monotonic()
    torch_lib = torch_outside()
    if torch_lib and os.environ.get("LD_LIBRARY_PATH") != torch_lib:
        # torch is in another environment (--torch-from): its folder stands in for site-packages/torch/lib,
        # as for the extension modules' imports; the loader reads LD_LIBRARY_PATH when the process starts.
        os.execve(sys.executable, [sys.executable, "-m", "smoke.child.loads", str(out), *parts],
                  {**os.environ, "LD_LIBRARY_PATH": torch_lib})
    try:
        libraries = shipped_libraries()
    except metadata.PackageNotFoundError as exc:
        out.write_text(json.dumps({"error": f"{DISTRIBUTION} is not installed ({exc})"}))
        return 0
    work = out.parent / "loads"
    work.mkdir(exist_ok=True)
    verdict: dict[str, Any] = {"libraries": [path for path, _ in libraries], "torch_lib": torch_lib}
    if "before" in parts:
        if "torch" in sys.modules:
            raise RuntimeError("the loads before torch are run in a process that has imported torch")
        # Before torch, the fork holds nothing but the interpreter and this library: its exit runs their destructors
        # (after torch, torch's own would run too, whose end is not the wheel's to answer for).
        verdict["before"] = through_loaders({path: alone(where, work / "alone-before.log", at_exit=True)
                                             for path, where in libraries}, libraries)
    if "after" in parts:
        try:
            import torch  # noqa: F401
            torch_error = None
        except BaseException as exc:  # noqa: BLE001 - said in the verdict
            torch_error = f"{type(exc).__name__}: {_said(str(exc))}"
        after = (through_loaders({path: alone(where, work / "alone-after.log") for path, where in libraries}, libraries)
                 if torch_error is None else {})
        # Left out of the one process: what does not load, and what loads only as another's need (its loader brings it).
        broken = frozenset(path for path, outcome in after.items() if outcome["error"] is not None or outcome.get("via"))
        verdict.update(after=after, together=together(libraries, work, broken) if torch_error is None else None,
                       torch_error=torch_error)
    verdict["seconds"] = round(time.monotonic() - start, 3)
    out.write_text(json.dumps(verdict))
    return 0


def start_loads_process(workdir: Path, parts: tuple[str, ...] = PARTS) -> subprocess.Popen:
    """The loads' process, started early; its verdict is read by ``collect``."""
    cmd = [sys.executable, "-m", "smoke.child.loads", str(workdir / "loads.json"), *parts]
    with open(workdir / "loads.log", "wb") as log:  # a file, not a pipe: nobody reads it while it runs
        return proc.start(cmd, stdout=log, stderr=subprocess.STDOUT, background=True)


def forkable() -> bool:
    """Whether the loads can be forks of the child (``fork_part``): not where torch lies in another environment
    (``torch_outside``), for the loader reads the stand-in LD_LIBRARY_PATH only as a process starts, so a process of
    their own does the loads (``start_loads_process``)."""
    return torch_outside() is None


def fork_part(workdir: Path, part: str) -> forks.Forked:
    """One part of the loads (``PARTS``) in a fork of the child, at its background priority; only where ``forkable``.

    ``before`` is forked before the child imports anything of torch's, ``after`` right after its ``import torch`` and
    before anything of the wheel's: the processes ``libraries load before torch`` and ``libraries load`` need, without
    an interpreter importing torch again."""

    def work() -> int:
        os.nice(proc.BACKGROUND_NICE)
        return loads_main(workdir / f"loads-{part}.json", (part,))

    return forks.fork(work, workdir / f"loads-{part}.log")


def collect(started: subprocess.Popen | None, workdir: Path, forked: dict[str, forks.Forked] | None = None) -> list[CheckResult]:
    """Wait for the loads' process (started now if it was not), or the child's forks of its parts (``fork_part``; a
    part the child did not fork, its import of torch having failed, is run now in a process of its own), and judge
    what they wrote: the three results."""
    if not forked:
        return judge_written(started or start_loads_process(workdir), workdir / "loads.json", workdir / "loads.log")
    verdict: dict[str, Any] = {}
    for part in PARTS:
        process: forks.Forked | subprocess.Popen | None = forked.get(part)
        out, log = workdir / f"loads-{part}.json", workdir / f"loads-{part}.log"
        if process is None:
            process = start_loads_process(workdir, (part,))
            out, log = workdir / "loads.json", workdir / "loads.log"
        read = _written(process, out, log)
        if isinstance(read, list):
            return read
        seconds = verdict.get("seconds", 0.0) + read.get("seconds", 0.0)
        verdict.update(read, seconds=round(seconds, 3))
    return judge(verdict)


def _written(process, out: Path, log: Path) -> dict | list[CheckResult]:
    """What a loads' process wrote, once it ended; the three FAILs where it wrote no verdict or an error."""
    process.wait()
    try:
        verdict = json.loads(out.read_text())
    except (OSError, ValueError):
        said = f"the loads' process exited {process.returncode} without its verdict: {proc.file_tail(log)}"
        return [failed(check.name, said) for check in CHECKS]
    if "error" in verdict:
        return [failed(check.name, verdict["error"]) for check in CHECKS]
    return verdict


def judge_written(process, out: Path, log: Path) -> list[CheckResult]:
    read = _written(process, out, log)
    return read if isinstance(read, list) else judge(read)


def _listed(problems: list[str], more_than: int = 3) -> str:
    more = f" (and {len(problems) - more_than} more)" if len(problems) > more_than else ""
    return "; ".join(problems[:more_than]) + more


def _via(outcomes: dict) -> str:
    """What loaded only as another shipped library's need, said after a PASS."""
    through = [f"{path} as a need of {seen['via']}" for path, seen in sorted(outcomes.items()) if seen.get("via")]
    return (f"; {len(through)} not alone but as the need of the extension module that loads them, their symbols bound "
            f"in its scope: " + _listed(through)) if through else ""


def judge(verdict: dict) -> list[CheckResult]:
    libraries: list[str] = verdict["libraries"]
    before, after = verdict["before"], verdict["after"]
    seconds = verdict.get("seconds")
    stand_in = (f"; torch is outside site-packages, so {verdict['torch_lib']} stood in for site-packages/torch/lib"
                if verdict.get("torch_lib") else "")
    if not libraries:
        why = f"the installed {DISTRIBUTION} ships no ELF shared library"
        return [skipped(check.name, why) for check in CHECKS]
    n = len(libraries)
    results = []
    # Loaded after import torch.
    if verdict.get("torch_error"):
        why = f"import torch failed in the environment, so no library could be loaded after it: {verdict['torch_error']}"
        results.append(failed(LOADS.name, why, libraries=libraries))
    else:
        broken = {path: after[path]["error"] for path in libraries if after[path]["error"] is not None}
        measured = {"libraries": libraries, "failed": broken, "seconds": seconds}
        if broken:
            results.append(failed(LOADS.name, f"{len(broken)} of {n} do not load with every symbol bound (RTLD_NOW), each in a "
                                              f"process of its own after import torch{stand_in}: "
                                              + _listed([f"{p}: {e}" for p, e in broken.items()]), **measured))
        else:
            results.append(passed(LOADS.name, f"all {n} load with every symbol bound (RTLD_NOW), each in a process of its own "
                                              f"after import torch{stand_in}{_via(after)}", **measured))
    # Loaded before import torch: what fails only here relies on torch having been imported.
    alone_broken = {path: before[path]["error"] for path in libraries if before[path]["error"] is not None}
    at_exit = [p for p in alone_broken if before[p].get("at_exit")]  # loaded, then ended the process as it exited
    only_after = [p for p in alone_broken if p not in at_exit and p in after and after[p]["error"] is None]
    never = [p for p in alone_broken if p not in only_after]
    measured = {"libraries": libraries, "only_after_torch": only_after, "failed": alone_broken, "at_exit": at_exit}
    problems = [f"{p} loads only after import torch: alone, {alone_broken[p]}" for p in only_after]
    problems += [f"{p}: {alone_broken[p]}" for p in never]
    if problems:
        how = "do not load (RTLD_NOW), or end the process as it exits," if at_exit else "do not load (RTLD_NOW)"
        results.append(failed(BEFORE_TORCH.name, f"{len(alone_broken)} of {n} {how} in a process that has not "
                                                 f"imported torch: " + _listed(problems), **measured))
    else:
        results.append(passed(BEFORE_TORCH.name, f"all {n} load with every symbol bound (RTLD_NOW), each in a process of its own "
                                                 f"that has not imported torch{_via(before)}", **measured))
    # All into one process.
    both = verdict.get("together")
    if both is None:
        results.append(skipped(REGISTERED_ONCE.name, "not run: import torch failed (see libraries load)"))
    elif both["incident"] is not None:
        found = both["incident"]
        also = f" (loading {', '.join(found['also'])} before it does the same)" if found.get("also") else ""
        twice = REGISTERED_TWICE.search(found["seen"]) is not None  # else it ended the process (a signal, an exit)
        if found["after"]:
            first = (f"{found['library']} registers again what {found['after']} registered{also}" if twice else
                     f"{found['library']} ends the process when loaded after {found['after']}{also}")
        elif found.get("alone"):
            first = (f"{found['library']} registers something twice when loaded alone into a process beside nothing else of "
                     f"the wheel's" if twice else f"{found['library']} ends the process when loaded alone after import torch")
        else:
            first = (f"{found['library']} registers again what the libraries loaded before it registered (no one of them "
                     f"loaded alone before it does)" if twice else
                     f"{found['library']} ends the process when loaded after the libraries before it (after no one of them "
                     f"alone)")
        loaded = n - len(both.get("left_out") or [])
        results.append(failed(REGISTERED_ONCE.name, f"loading the {loaded} libraries into one process (after import torch, in path "
                                                    f"order): {first}: {found['seen']}", **both))
    else:
        left = both.get("left_out") or []
        said = (f" ({len(left)} left out, which do not load alone or load only as another's need: see {LOADS.name})"
                if left else "")
        results.append(passed(REGISTERED_ONCE.name, f"the {n - len(left)} libraries loaded into one process (after import torch) "
                                                    f"register nothing twice and end nothing{said} ({both['seconds']:.1f} s)", **both))
    return results


if __name__ == "__main__":
    sys.exit(loads_main(Path(sys.argv[1]), tuple(part for part in PARTS if part in sys.argv[2:]) or PARTS))
