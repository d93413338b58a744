"""Exporting the two models through the row's backend: in the child, or the weightless one in a
process of its own at the same time (``--parallel-exports``): ``python -m smoke.child.exports ROW.json LABEL
FOLDER VERDICT.json``, which writes its outcome as data for the child to collect.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from smoke import proc, protocol
from smoke.child import delegates
from smoke.child.models import models
from smoke.child.probe import one_line
from smoke.child.row import ChildRow
from smoke.record import Recorder
from smoke.results import CheckResult, failed, passed
from smoke.stages import EXPORT

# With --parallel-exports yes, the weightless model is exported by a helper process at the same
# time as the weighted one. Not the default: on the H200 (docs/records/benchmarks.md) the two exports at
# once each paid the first compile, while in series the second reused the first's and took a
# quarter of the time, so the whole run was no faster, and in the second call slower.
PARALLEL_LABEL = "weightless"


def parallel(choice: str, overlap: bool) -> bool:
    """Whether the weightless model is exported in a process of its own (``--parallel-exports yes``,
    and not ``--no-overlap``, the serial way)."""
    return choice == "yes" and overlap


def export_here(rec: Recorder, row: ChildRow, name: str, model, example, folder: Path) -> bool:
    start = time.monotonic()
    try:
        with rec.phase(name):
            delegates.export(row, model, example, folder)
    except Exception as exc:
        rec.write(protocol.Log(traceback.format_exc()))
        rec.check(failed(name, f"export through the {row.delegate_id} partitioner raised {one_line(exc)}"))
        return False
    rec.check(_wrote(name, folder, time.monotonic() - start))
    return True


def _wrote(name: str, folder: Path, seconds: float, own_process: bool = False) -> CheckResult:
    seconds = round(seconds, 1)
    where = " (in its own process, beside the other export)" if own_process else ""
    return passed(name, f"wrote {', '.join(sorted(p.name for p in folder.iterdir()))} in {seconds} s{where}",
                  seconds=seconds, own_process=own_process)


def start_export_process(row_file: Path, workdir: Path) -> subprocess.Popen:
    folder = workdir / PARALLEL_LABEL
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "smoke.child.exports", str(row_file), PARALLEL_LABEL, str(folder), str(workdir / "export.json")]
    with open(workdir / "export.log", "wb") as log:  # a file, not a pipe: nobody reads it while it runs
        return proc.start(cmd, stdout=log, stderr=subprocess.STDOUT)


def collect_export(rec: Recorder, row: ChildRow, helper: subprocess.Popen, folder: Path, workdir: Path) -> bool:
    name = EXPORT.of(PARALLEL_LABEL)
    helper.wait()
    try:
        verdict = json.loads((workdir / "export.json").read_text())
    except (OSError, ValueError):
        rec.check(failed(name, f"the export process exited {helper.returncode} without its result: {proc.file_tail(workdir / 'export.log')}"))
        return False
    rec.write(protocol.Phase(name, "start"))
    rec.write(protocol.Phase(name, "end", verdict["seconds"]))
    if not verdict["ok"]:
        rec.write(protocol.Log(verdict["traceback"]))
        rec.check(failed(name, f"export through the {row.delegate_id} partitioner raised {verdict['error']} (in its own process)"))
        return False
    rec.check(_wrote(name, folder, verdict["seconds"], own_process=True))
    return True


def export_main(row_file: Path, label: str, folder: Path, out: Path) -> int:
    import executorch.exir  # noqa: F401
    import torch  # noqa: F401

    model, example = models()[label]
    start = time.monotonic()
    verdict: dict[str, Any]
    try:
        delegates.export(ChildRow.read(row_file), model, example, folder)
        verdict = {"ok": True, "seconds": round(time.monotonic() - start, 3)}
    except Exception as exc:  # reported as data
        verdict = {"ok": False, "seconds": round(time.monotonic() - start, 3), "error": one_line(exc),
                   "traceback": traceback.format_exc()}
    out.write_text(json.dumps(verdict))
    return 0


if __name__ == "__main__":
    sys.exit(export_main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])))
