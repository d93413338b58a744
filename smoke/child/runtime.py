"""The runtime's process: where the programs load and run, apart from the exporter (issue 58).

The child exports through ``executorch.exir`` and the row's partitioner, so code of the exporter runs in its process,
and code that replaced the runtime's load there decided what `run with data file` saw (a runtime that crashed on the
weighted program PASSed, the exporter's wrapper answering for it). So the runs and the controls load in processes of
an interpreter of their own that imports what a user who runs a program imports: torch and the runtime's bindings
(``portable_lib``, which in 1.5 imports ``executorch.exir``'s package as it does for every user), and nothing the export
needs beyond that. It starts as the child's imports end, its own imports beside the exports.

It forks one process per case (``smoke.child.negative``: each run, and each control), given on its stdin as
``CASE<TAB>PROGRAM<TAB>DATA_FILE`` (``-``: none); each fork writes its end (``negative.files``), and this process writes
the end of one that died without its own: a signal (the negative control's SIGSEGV on the CPU), or an exit. On a row
whose device a fork could not use (``forks.device_initialised``) the child starts an interpreter per case instead
(``negative.start_control``), which imports the same.

Usage (the child does this): ``python -m smoke.child.runtime WORKDIR``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from smoke import proc
from smoke.child import forks, negative

READY = "runtime.ready"  # written once its imports are done: that it can fork (the device untouched), or not


def start(workdir: Path) -> subprocess.Popen:
    """The runtime's process, started now: it imports torch and the runtime, then forks a case per line of its stdin."""
    with open(workdir / "runtime.log", "wb") as log:  # the process has its own copy of the descriptor
        return proc.start([sys.executable, "-m", "smoke.child.runtime", str(workdir)], stdin=subprocess.PIPE,
                          stdout=subprocess.DEVNULL, stderr=log, text=True)


def _case(case: str, pte: str, ptd: str | None, examples: dict, workdir: Path, can_fork: bool) -> forks.Forked | subprocess.Popen:
    """The case's process: a fork of this one, or (``can_fork`` False: this process's imports initialised the device,
    which a fork could not use) an interpreter of its own that imports the same."""
    end, stage_file = negative.files(workdir, case)
    if not can_fork:
        started = negative.start_control(workdir, case)
        negative.send(started, Path(pte), Path(ptd) if ptd else None)
        return started

    def work() -> int:
        signal.alarm(negative.CONTROL_TIMEOUT_S)
        negative.write_end(end, negative.run_stages(pte, ptd, examples[negative.label_of(case)], stage_file))
        return 0

    return forks.fork(work, workdir / f"control-{case}.log")


def _ended(case: str, code: int, workdir: Path) -> None:
    """The end of a case whose fork wrote none: how it ended, and the stage it had reached."""
    end, stage_file = negative.files(workdir, case)
    if end.is_file():
        return
    stage = negative.stage_read(stage_file)
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        negative.write_end(end, {"signal": name, "stage": stage})
    else:
        negative.write_end(end, {"failed": f"the process loading it exited {code} without its end: "
                               f"{proc.file_tail(workdir / f'control-{case}.log')}", "stage": stage})


def main(workdir: Path) -> int:
    import torch  # noqa: F401  (before the runtime, as the runtime's own package does)
    from executorch.extension.pybindings import portable_lib  # noqa: F401

    from smoke.child.models import models

    examples = {label: example for label, (_model, example) in models().items()}
    can_fork = not forks.device_initialised()
    (workdir / READY).write_text(json.dumps({"forks": can_fork}))
    pending: dict[str, forks.Forked | subprocess.Popen] = {}
    buffer, closed = b"", False
    while not closed or pending:
        if not closed and select.select([0], [], [], 0.02)[0]:
            chunk = os.read(0, 1 << 16)
            closed = not chunk
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                case, _tab, rest = line.decode("utf-8", errors="replace").partition("\t")
                pte, _tab, ptd = rest.partition("\t")
                if case in negative.ALL_CASES and pte and case not in pending:
                    pending[case] = _case(case, pte, None if ptd in ("", "-") else ptd, examples, workdir, can_fork)
        elif closed:
            time.sleep(0.01)
        for case, fork in list(pending.items()):
            if (code := fork.poll()) is not None:
                del pending[case]
                _ended(case, code, workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
