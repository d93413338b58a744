"""The runs' and the controls' processes: each program loaded with its data file (``run with data file``, the cases
``RUNS``), and the weighted program loaded WITHOUT its data file (the negative control) or with a damaged copy of it
(``corrupt data file``: the parent writes the copies, ``smoke.checks.controls.write_damaged``), each in a process of its
own that imported the runtime and nothing of the export (issue 58).

Each loads and runs its program as every other case does (``run_stages``), so that a control and its twin differ by the
data file alone, writing the stage it has reached to ``control-CASE.stage`` before each, and its end to
``control-CASE.json``: the error, or the outputs. A crash leaves the stage file naming where it came. The parent
judges (``smoke.checks.controls``): what each control proves only holds where its twin, the program with its data
file, ran and matched eager.

The processes are forks of the runtime's process (``smoke.child.runtime``), or, where no fork could be made,
``python -m smoke.child.negative CASE WORKDIR``, started early (``start_control``), which reads one line on its fd 0,
``PROGRAM<TAB>DATA_FILE`` (``-``: none).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from smoke import proc, tensors
from smoke.child import forks
from smoke.child.probe import one_line

CONTROL_TIMEOUT_S = 300
MISSING = "missing"  # the negative control's case: no data file
DAMAGED = ("truncated", "cut")  # the corrupt data file's cases (smoke.checks.controls.CASES)
CASES = (MISSING, *DAMAGED)
RUNS = ("weightless", "weighted")  # `run with data file`'s cases: each program with its data file (issue 58)
ALL_CASES = (*RUNS, *CASES)


def label_of(case: str) -> str:
    """The model whose inputs a case runs: a run's own, the weighted model's for every control."""
    return case if case in RUNS else "weighted"


def files(workdir: Path, case: str) -> tuple[Path, Path]:
    """Where the control of ``case`` writes its end and its stage."""
    return workdir / f"control-{case}.json", workdir / f"control-{case}.stage"


def start_control(workdir: Path, case: str) -> subprocess.Popen:
    """The control's process, started early: it imports torch and the runtime while the exports run, then waits on
    stdin for the program to load."""
    cmd = [sys.executable, "-m", "smoke.child.negative", case, str(workdir)]
    return proc.start(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def write_end(path: Path, said: dict) -> None:
    """A case's end, whole or not at all (written beside and renamed): the child may read it while it is written."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(said))
    os.replace(partial, path)


class Case(forks.Started):
    """One case sent to the runtime's process (``smoke.child.runtime``), which forks a process for it: what ``send``
    and ``collect`` are given, as they are a process of the case's own. Ending it (``proc.end``: ``poll``, ``kill``,
    ``wait``, ``Started``'s) ends the runtime's process, shared by every case, with the child's work."""

    def __init__(self, process: subprocess.Popen, case: str, workdir: Path) -> None:
        super().__init__(process, workdir / "runtime.log")
        self.case, self.workdir = case, workdir

    def send(self, pte: Path, ptd: Path | None) -> bool:
        if self.process.stdin is None or self.process.poll() is not None:
            return False
        try:
            self.process.stdin.write(f"{self.case}\t{pte}\t{ptd if ptd is not None else '-'}\n")
            self.process.stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    def end(self, timeout: float) -> dict | None:
        """The case's end, once written (by its fork, or by the runtime's process for a fork that died); None where the
        runtime's process ended without it, or ``timeout`` passed."""
        end, _stage = files(self.workdir, self.case)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if end.is_file():
                try:
                    said = json.loads(end.read_text())
                except (OSError, ValueError):
                    said = {"failed": "its end is not JSON"}
                return said if isinstance(said, dict) else {"failed": "its end is not an object"}
            if self.process.poll() is not None and not end.is_file():
                return None
            time.sleep(0.01)
        return None


def send(control: "subprocess.Popen | Case", pte: Path, ptd: Path | None) -> bool:
    """Give the control's process, started early, the program (and data file) to load now; True once sent. A process
    that has ended already (its stdin closed) is judged by ``collect`` as it ended."""
    if isinstance(control, Case):
        return control.send(pte, ptd)
    line = f"{pte}\t{ptd if ptd is not None else '-'}\n"
    if control.stdin is None:
        return False
    try:
        control.stdin.write(line)
        control.stdin.flush()
    except (OSError, ValueError):
        return False
    return True


def collect(control: "subprocess.Popen | Case", workdir: Path, case: str) -> dict[str, Any]:
    """What the control's process said, for the parent to judge: ``stage`` and one of ``error``, ``signal``,
    ``outputs``; ``failed`` where it said nothing readable. Its program was sent (``send``) before."""
    end, stage_file = files(workdir, case)
    if isinstance(control, Case):
        said = control.end(CONTROL_TIMEOUT_S)
        if said is None:
            return {"failed": f"the runtime's process ended or ran past {CONTROL_TIMEOUT_S} s without its end: "
                              f"{proc.file_tail(control.log)}", "stage": stage_read(stage_file)}
        return said
    try:
        _out, stderr = control.communicate(timeout=CONTROL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.end(control)
        return {"failed": f"did not finish within {CONTROL_TIMEOUT_S} s", "stage": stage_read(stage_file)}
    code = control.returncode
    assert code is not None  # waited for above
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return {"signal": name, "stage": stage_read(stage_file)}
    try:
        said = json.loads(end.read_text())
    except (OSError, ValueError):
        return {"failed": f"the control process exited {code} without its end: {proc.tail(stderr, 1)}",
                "stage": stage_read(stage_file)}
    return said if isinstance(said, dict) else {"failed": "its end is not an object"}


def stage_read(path: Path) -> str:
    try:
        return path.read_text().strip() or "start"
    except OSError:
        return "start"


def stage_of_error(message: str) -> str:
    """Where the binding's ``forward`` failed, from its own words: "Failed to load method forward" (method load),
    "Failed to execute method", "method->execute() failed" (execute); else the whole call."""
    lowered = message.lower()
    if "load method" in lowered or "load_method" in lowered:
        return "method load"
    if "execute" in lowered:
        return "execute"
    return "forward"


def run_stages(pte: str, ptd: str | None, example, stage_file: Path) -> dict[str, Any]:
    """Load and run the program as ``run with data file`` (its twin) does, ``_load_for_executorch`` and ``forward``, so
    that the two differ by the data file alone (the runtime's ``_load_program`` path gave main's CUDA build another
    error, with or without its data file, measured on the H200), writing each stage to ``stage_file`` before it
    begins: ``program load`` (the module, and its program and data file read through ``method_meta``), then
    ``forward`` (the method's load and its execute, one call in the binding; an error names which). Its outputs, or
    the error and the stage where it came."""
    from executorch.extension.pybindings import portable_lib

    def at(stage: str) -> str:
        stage_file.write_text(stage)
        return stage

    stage = at("program load")
    try:
        module = (portable_lib._load_for_executorch(pte, data_path=ptd) if ptd is not None
                  else portable_lib._load_for_executorch(pte))
        if hasattr(module, "method_meta"):
            module.method_meta("forward")
        stage = at("forward")
        outputs = module.forward(tuple(example))
    except Exception as exc:  # the expected outcome: said as data, with its stage
        message = one_line(exc)
        return {"stage": stage_of_error(message) if stage == "forward" else stage, "error": message}
    return {"stage": "execute", "outputs": tensors.encode_all([o.detach().cpu() if hasattr(o, "detach") else o
                                                               for o in outputs])}


def control_main(case: str, workdir: Path) -> int:
    import torch  # noqa: F401  (imported before the program is known)
    from executorch.extension.pybindings import portable_lib  # noqa: F401

    from smoke.child.models import models

    _model, example = models()[label_of(case)]
    line = sys.stdin.readline().rstrip("\n")
    pte, _tab, ptd = line.partition("\t")
    if not pte:
        return 0  # nothing to load: the child ended first
    end, stage_file = files(workdir, case)
    write_end(end, run_stages(pte, None if ptd in ("", "-") else ptd, example, stage_file))
    return 0


if __name__ == "__main__":
    sys.exit(control_main(sys.argv[1], Path(sys.argv[2])))
