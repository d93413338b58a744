"""The consumer run on a program, in a process of its own, and the inputs file it reads."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

from smoke import proc
from smoke.errors import GateError

RUN_SECONDS = 60


def run(binary: Path, program: Path, data_file: Path | None, inputs: Path, env: dict[str, str],
        timeout: float = RUN_SECONDS) -> dict[str, Any]:
    """The consumer on ``program`` (with ``data_file``, or none), in a process of its own with ``env`` (the clean
    loader environment, ``Consumer``'s): ``{"outputs": [...]}``, ``{"error": ...}`` as it said, ``{"signal": NAME}`` where the runtime ended it,
    or ``{"failed": why}`` where it said nothing the gate reads."""
    cmd = [str(binary), str(program), str(data_file) if data_file is not None else "-", str(inputs)]
    try:
        done = proc.run(cmd, what="the C++ consumer", timeout=timeout, env=env, check=False)
    except GateError as exc:  # it could not start, or ran past its time
        return {"failed": str(exc)}
    if done.returncode < 0:
        stages = re.findall(r"^gate-stage: (.+)$", done.stderr[-(1 << 20):], re.M)
        where = {"stage": stages[-1].strip()} if stages else {}
        try:
            return {"signal": signal.Signals(-done.returncode).name, **where}
        except ValueError:  # a real-time signal, say, with no name
            return {"signal": f"signal {-done.returncode}", **where}
    for line in reversed(done.stdout[-(1 << 20):].splitlines()):
        if line.startswith("{"):
            try:
                said = json.loads(line)
            except ValueError:
                break
            if isinstance(said, dict):
                return said
    return {"failed": f"exited {done.returncode} without a result: {proc.tail(done.stderr)}"}


def write_inputs(path: Path, inputs: list[Any]) -> None:
    """The inputs file the consumer reads, from ``smoke.tensors`` outputs-shaped data (eager's inputs)."""
    lines = [str(len(inputs))]
    for item in inputs:
        lines.append(" ".join(str(n) for n in [len(item.shape), *item.shape]))
        lines.append(" ".join(repr(float(v)) for v in item.values))
    path.write_text("\n".join(lines) + "\n")
