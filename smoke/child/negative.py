"""The negative control: the weighted program loaded WITHOUT its data file, in a process of its own.

It must not give eager's answer: a crash or an error is expected; a match means the weights are not coming from the
data file. The process is a fork of the child made after its imports (``fork_control``), reading the program's path
on its fd 0; with ``--no-overlap`` it is ``python -m smoke.child.negative - VERDICT.json``, started when needed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from smoke import proc
from smoke.child import forks
from smoke.child.models import models, run_program
from smoke.child.probe import one_line
from smoke.results import CheckResult, failed, passed
from smoke.stages import NEGATIVE
from smoke.tensors import ATOL, RTOL

if TYPE_CHECKING:
    from smoke.child.row import ChildRow

NEGATIVE_TIMEOUT_S = 300


def start_negative_process(workdir: Path) -> subprocess.Popen:
    """The negative control's process, started early: it imports torch and the runtime while the
    exports run, then waits on stdin for the program to load."""
    cmd = [sys.executable, "-m", "smoke.child.negative", "-", str(workdir / "negative.json")]
    return proc.start(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def fork_control(workdir: Path) -> forks.Forked:
    """The negative control's process: a fork of the child, made after its imports (``smoke.child.forks``), that
    imports the runtime's bindings now and waits on its fd 0 for the program to load."""
    return forks.fork(lambda: negative_main("-", workdir / "negative.json"), workdir / "negative.log", pipe=True)


def send_control(control: "subprocess.Popen | forks.Forked", pte: Path) -> bool:
    """Give the control's process, started early, the program to load now, so that it loads while the child works on
    (``negative_control`` then waits for its verdict); True once sent. A process that has ended already (its stdin
    closed) is judged by ``negative_control`` as it ended."""
    if isinstance(control, forks.Forked):
        control.send(f"{pte}\n")
        return True
    if control.stdin is None:
        return False
    try:
        control.stdin.write(f"{pte}\n")
        control.stdin.flush()
    except (OSError, ValueError):
        return False
    return True


def negative_control(row: "ChildRow", pte: Path, workdir: Path,
                     started: "subprocess.Popen | forks.Forked | None" = None, sent: bool = False) -> CheckResult:
    """Load the weighted program WITHOUT its data file, in a process of its own (``started`` early, and ``sent`` the
    program by ``send_control`` where it was).

    It must not give eager's answer: a crash or an error is the expected outcome;
    a match means the weights are not coming from the data file.
    """
    name = NEGATIVE.name
    control = started or start_negative_process(workdir)
    try:
        _out, stderr = control.communicate("" if sent and started else f"{pte}\n", timeout=NEGATIVE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.end(control)
        return passed(name, f"did not finish within {NEGATIVE_TIMEOUT_S} s without its data file (expected: no eager answer)")
    code = control.returncode
    assert code is not None  # waited for above
    if code < 0:
        sig = signal.Signals(-code).name
        return passed(name, f"the load without {row.data_file} crashed the process with {sig}, as expected", outcome=sig)
    try:
        verdict = json.loads((workdir / "negative.json").read_text())
    except (OSError, ValueError):
        return failed(name, f"the control process exited {code} without its verdict: {proc.tail(stderr, 1)}")
    if verdict["outcome"] == "error":
        return passed(name, f"loading or running without {row.data_file} failed, as expected: {verdict['error']}", outcome="error")
    if verdict["matched"]:
        return failed(name, f"ran without {row.data_file} and matched eager (max abs diff {verdict['max_abs_diff']:.3g}): "
                            f"the weights are not coming from the data file", outcome="matched", max_abs_diff=verdict["max_abs_diff"])
    return passed(name, f"ran without {row.data_file} and did not match eager (max abs diff {verdict['max_abs_diff']:.3g}), as expected",
                  outcome="mismatch", max_abs_diff=verdict["max_abs_diff"])


def negative_main(pte: str, out: Path) -> int:
    import torch
    from executorch.extension.pybindings import portable_lib  # noqa: F401  (imported before the program is known)

    model, example = models()["weighted"]
    program = Path(sys.stdin.readline().strip() if pte == "-" else pte)
    try:
        outputs = run_program(program, None, example)
    except Exception as exc:  # the expected outcome: report it as data
        out.write_text(json.dumps({"outcome": "error", "error": one_line(exc)}))
        return 0
    expected = model(*example).detach()
    diff = float((outputs[0].float() - expected).abs().max()) if outputs and outputs[0].shape == expected.shape else float("inf")
    matched = bool(torch.allclose(outputs[0].float(), expected, rtol=RTOL, atol=ATOL)) if diff != float("inf") else False
    out.write_text(json.dumps({"outcome": "ran", "matched": matched, "max_abs_diff": diff}))
    return 0


if __name__ == "__main__":
    sys.exit(negative_main(sys.argv[1], Path(sys.argv[2])))
