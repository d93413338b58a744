"""The child: runs inside the gate's environment, in a process of its own.

Given its row as data (``ROW.json``, ``smoke.child.row``), it exports a weightless and a weighted model through the
row's delegate (``smoke.child.exports``), has the parent judge what was written (``smoke.child.ask``), loads and runs
the programs and hands the parent their outputs, which it holds to eager's answer (``smoke.child.models``,
``smoke.checks.outputs``), and runs the negative control
(``smoke.child.negative``). It speaks through its record file (``smoke.record``) and hears the parent's answers on stdin.

Usage (the parent does this): ``python -S -m smoke.child ROW.json WORKDIR RECORD [--fail-fast] [--no-overlap]
[--parallel-exports yes|no]``, the options being the row's own (``smoke.options``).
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from smoke import options, proc, protocol
from smoke.child import delegates, exports, negative, openvino, runtime, xnnpack_quantized
from smoke.child.ask import ask, hand_over
from smoke.child.exports import PARALLEL_LABEL, collect_export, export_here, start_export_process
from smoke.child.extensions import collect as collect_imports
from smoke.child.extensions import fork_together, start_extensions_process, start_together
from smoke.child.forks import Forked, Started, device_initialised
from smoke.child.loads import collect as collect_loads
from smoke.child.loads import fork_part, start_loads_process
from smoke.child.loads import forkable as loads_forkable
from smoke.child.models import check_run, models, registered_backends, weight_matrix_bytes
from smoke.child.portable import PHASE as PORTABLE_PHASE
from smoke.child.portable import QUANTIZED_PHASE, check_portable, check_quantized
from smoke.child.probe import probe
from smoke.child.row import ChildRow
from smoke.record import FailFast, Recorder
from smoke.results import Status, skipped
from smoke.stages import (
    BESIDE_PHASE,
    CORRUPT,
    EXPORT,
    IMPORT_PHASE,
    NEGATIVE,
    NEGATIVE_PHASE,
    OPENVINO_MODEL,
    RUN,
    XNNPACK_QUANTIZED,
    load_phase,
)


@dataclass
class Forks:
    """The forks of this process (``smoke.child.forks``), each ended with the child's work."""
    # The runs' and the controls' processes, by case (smoke.child.negative: each program with its data file, the weighted
    # one without it, and with each damaged copy of it): forks of the runtime's process (smoke.child.runtime), which
    # imported the runtime and nothing of the export (issue 58), or interpreters of their own (start_control) where the
    # device was initialised already
    controls: dict[str, negative.Case | subprocess.Popen] | None = None
    loader: subprocess.Popen | None = None  # the runtime's process (smoke.child.runtime)
    # The extension modules into one process: a fork (extensions.fork_together), or a fresh one (start_together)
    together: tuple[list[str], Forked | Started] | None = None
    loads: dict[str, Forked] | None = None  # the loads' parts, "before" and "after" torch (smoke.child.loads.fork_part)
    xnnpack: Forked | Started | None = None  # the PT2E-quantized model lowered to XNNPACK (smoke.child.xnnpack_quantized)

    def processes(self) -> list[Forked | Started | negative.Case | subprocess.Popen | None]:
        return [*(self.controls or {}).values(), self.loader, self.together[1] if self.together else None,
                *(self.loads or {}).values(), self.xnnpack]


def gate(row_file: Path, workdir: Path, rec: Recorder, overlap: bool = True, parallel_exports: str = "no") -> None:
    row = ChildRow.read(row_file)
    helper = start_export_process(row_file, workdir) if exports.parallel(parallel_exports, overlap) else None
    # Beside the exports, collected last: each extension module imported alone, a fresh interpreter each (their import
    # into one process is a fork of this one, below), and every shared library loaded (smoke.child.loads).
    imports = start_extensions_process(workdir, alone_only=True) if overlap else None
    forked = Forks()
    loads = None
    if overlap and loads_forkable():  # nothing of torch's imported yet: the loads before torch
        forked.loads = {"before": fork_part(workdir, "before")}
    elif overlap:  # torch in another environment: the loads in a process of their own
        loads = start_loads_process(workdir)

    def collect_last() -> None:
        with rec.phase(BESIDE_PHASE):
            rec.check(collect_imports(imports, workdir, forked.together))
            for result in collect_loads(loads, workdir, forked.loads):
                rec.check(result)

    try:
        try:
            _gate(row, workdir, rec, forked, overlap, helper)
        except FailFast:
            raise
        except Exception:
            # The child's own checks broke off (the runtime does not import, say): the imports'
            # verdict, naming the module and the loader's message, is recorded all the same.
            with contextlib.suppress(FailFast):
                collect_last()
            raise
        collect_last()
    finally:
        for process in (*forked.processes(), helper, imports, loads):
            proc.end(process)


def fork_after_imports(workdir: Path, forked: Forks, cuda: bool = False) -> None:
    """The runs' and the controls' processes (the runtime's process, ``smoke.child.runtime``, started now, its imports
    beside the exports), and a fork of this process, now that torch and the exporter are imported and nothing else has
    run: the extension modules' joint import, not importing torch again (``smoke.child.forks``).
    Where the imports initialised CUDA's driver (``device_initialised``), a fork could not use the device: each is an
    interpreter started now, so neither waits for the exports' end. A CUDA row's (``cuda``) exports initialise the driver, so its
    PT2E-quantized XNNPACK model starts now too, in an interpreter of its own; a CPU row's is a fork made after its
    first export (``fork_warm``)."""
    if cuda:
        forked.xnnpack = xnnpack_quantized.start_process(workdir)
    if device_initialised():
        forked.controls = {case: negative.start_control(workdir, case) for case in negative.ALL_CASES}
        forked.together = start_together(workdir)
        return
    forked.loader = runtime.start(workdir)
    forked.controls = {case: negative.Case(forked.loader, case, workdir) for case in negative.ALL_CASES}
    forked.together = fork_together(workdir)


def fork_warm(workdir: Path, forked: Forks) -> None:
    """The PT2E-quantized XNNPACK model's process on a row whose exports leave the device alone: a fork made after the
    child's first export, beside the other exports and the runs. It inherits an exporter that has run once: forked
    right after the imports, its first export paid torch.export's first-call cost on the core the child's own first
    export needed, and the 2-core machine's row took 4 to 8 s longer (measured: 14.9 s before it, 18.6 to 23.0 s)."""
    if forked.xnnpack is None and not device_initialised():
        forked.xnnpack = xnnpack_quantized.fork_work(workdir)


def _gate(row: ChildRow, workdir: Path, rec: Recorder, forked: Forks, overlap: bool = True,
          helper: subprocess.Popen | None = None) -> None:
    with rec.phase(IMPORT_PHASE):
        from importlib.metadata import version

        import torch

        if forked.loads is not None and not device_initialised():  # torch imported, nothing of the wheel's yet: the
            forked.loads["after"] = fork_part(workdir, "after")  # loads after torch (else a process of their own)
        import executorch.exir  # noqa: F401  (timed here, not in the first export)

    if overlap:
        fork_after_imports(workdir, forked, cuda=row.backend == "cuda")

    facts = {"executorch": version("executorch"), "torch": torch.__version__, "torch_file": torch.__file__,
             "python": platform.python_version(), "machine": platform.machine()}
    device = delegates.device_facts(row)
    rec.write(protocol.Facts({**facts, "device": device}))
    # What the parent's environment checks judge (torch agrees, delegate registers, ...),
    # read here, where torch and the runtime are imported already, instead of in a process of its own.
    rec.write(protocol.Probe(probe()))

    blocked: str | None = None  # why the device-bound checks cannot run
    found = delegates.check_device(row, device)
    if found is not None:
        result = rec.check(found)
        if result.status is not Status.PASS:
            blocked = "no usable CUDA device (see the CUDA device check)"

    built = models()
    folders = {label: workdir / label for label in built}
    exported: dict[str, bool] = {}
    if blocked and helper is not None:
        proc.end(helper)
        helper = None
    backends = registered_backends()
    if forked.controls is None:  # --no-overlap: each started when its program is known (_case_said)
        forked.controls = {}
    controls = forked.controls
    sent: set[str] = set()  # the controls given their program
    weighted_pte = folders["weighted"] / "model.pte"

    def control() -> bool:
        """Whether the negative control has a program to load: the weighted one, written with its data file by a
        delegate the runtime registers."""
        return bool(exported.get("weighted") and (folders["weighted"] / row.data_file).exists() and row.delegate_id in backends)

    # The weighted model first: its negative control's process loads it (without its data file) while this process
    # exports the weightless one, instead of after both exports.
    for label in sorted(built, key=lambda label: label != "weighted"):
        model, example = built[label]
        name = EXPORT.of(label)
        if blocked:
            rec.check(skipped(name, f"not run: {blocked}"))
            exported[label] = False
            continue
        folders[label].mkdir(parents=True, exist_ok=True)
        if label == PARALLEL_LABEL and helper is not None:
            continue  # exported by the helper process, collected below
        exported[label] = export_here(rec, row, name, model, example, folders[label])
        if overlap and label == "weighted":
            fork_warm(workdir, forked)
        if label == "weighted" and negative.MISSING in controls and control():
            if negative.send(controls[negative.MISSING], weighted_pte, None):
                sent.add(negative.MISSING)
    if helper is not None:
        exported[PARALLEL_LABEL] = collect_export(rec, row, helper, folders[PARALLEL_LABEL], workdir)

    # The parent's readers judge what was written (delegate, data file, weights in the data file) and report
    # it; the answer is each label's data file verdict, on which its run depends.
    judged = ask(rec, "exported", exported=exported, weight_matrix_bytes=weight_matrix_bytes(built["weighted"][0]))
    data = {label: judged.get("data_file", {}).get(label) == Status.PASS.value for label in built}
    # The parent wrote damaged copies of the weighted data file (smoke.checks.controls.write_damaged): each loads now,
    # beside the runs, in its control's process.
    given = judged.get("damaged")
    damaged: dict = given if isinstance(given, dict) else {}
    for case in negative.DAMAGED:
        if case in controls and isinstance(damaged.get(case), str) and data["weighted"] and control():
            if negative.send(controls[case], weighted_pte, Path(damaged[case])):
                sent.add(case)

    # Each run, loaded in the runtime's process (issue 58: never here, where the exporter runs), is handed to the parent,
    # which holds its outputs to eager's answer computed apart from the wheel's code.
    def data_file(label: str) -> Path | None:
        return folders[label] / row.data_file if (folders[label] / row.data_file).exists() else None

    for label in negative.RUNS:
        if data[label] and label in controls and negative.send(controls[label], folders[label] / "model.pte", data_file(label)):
            sent.add(label)
    for label in built:
        name = RUN.of(label)
        if not data[label]:
            hand_over(rec, {"name": name, "skipped": f"not run: no data file for {label}" if not blocked else f"not run: {blocked}"})
            continue
        with rec.phase(load_phase(label)):
            said = _case_said(label, controls, sent, workdir, folders[label] / "model.pte", data_file(label))
            hand_over(rec, check_run(row, label, said, backends))

    # No device needed: the kernels run on the CPU on every row, so this never skips.
    with rec.phase(PORTABLE_PHASE):
        hand_over(rec, check_portable(workdir / "portable"))
    with rec.phase(QUANTIZED_PHASE):
        hand_over(rec, check_quantized(workdir / "quantized"))
    # Quantized, lowered and run beside the exports (in the serial way, --no-overlap, here and now).
    with rec.phase(XNNPACK_QUANTIZED.name):
        hand_over(rec, xnnpack_quantized.collect(forked.xnnpack, workdir))
    with rec.phase(OPENVINO_MODEL.name):  # a SKIP in an instant where its runtime is not installed (the default)
        hand_over(rec, openvino.work(workdir / openvino.LABEL, backends))

    # The controls: what each process said, handed to the parent, which judges it with its twin (smoke.checks.controls).
    why_not = "not run: the weighted program was not exported with a data file, or its delegate is not registered"
    with rec.phase(NEGATIVE_PHASE):
        hand_over(rec, _control_said(NEGATIVE.name, (negative.MISSING,), controls, sent, workdir, weighted_pte, None, why_not)
                  if control() else {"name": NEGATIVE.name, "skipped": why_not})
        hand_over(rec, _control_said(CORRUPT.name, negative.DAMAGED, controls, sent, workdir, weighted_pte, damaged, why_not)
                  if control() else {"name": CORRUPT.name, "skipped": why_not})


def _control_said(name: str, cases: tuple[str, ...], controls: dict, sent: set[str], workdir: Path, pte: Path,
                  damaged: dict | None, why_not: str) -> dict:
    """What the controls of ``cases`` said, for the parent (``name``: their check): one case's said, or by case. A
    control not yet given its program (no fork could be made early, --no-overlap) runs now, in a process of its own."""
    said: dict = {}
    for case in cases:
        ptd = None if damaged is None else damaged.get(case)
        if damaged is not None and not isinstance(ptd, str):
            said[case] = {"failed": "the parent wrote no damaged copy of the data file"}
            continue
        said[case] = _case_said(case, controls, sent, workdir, pte, Path(ptd) if ptd else None)
    return {"name": name, "said": said[cases[0]] if damaged is None else said}


def _case_said(case: str, controls: dict, sent: set[str], workdir: Path, pte: Path, ptd: Path | None) -> dict:
    """What the process of ``case`` said of ``pte`` (with ``ptd``). One not yet given its program (--no-overlap, or no
    process could be started early) is given it now: the runtime's process where it runs still, else an interpreter of
    its own, started now."""
    process: negative.Case | subprocess.Popen | None = controls.get(case)
    if process is None or case not in sent:
        if isinstance(process, negative.Case) and negative.send(process, pte, ptd):
            sent.add(case)
        else:
            if process is not None and not isinstance(process, negative.Case):
                proc.end(process)
            process = negative.start_control(workdir, case)
            controls[case] = process
            negative.send(process, pte, ptd)
            sent.add(case)
    return negative.collect(process, workdir, case)


def main(argv: list[str] | None = None, token: str = "") -> int:
    """The child's work; ``token``, the run's (the first line its parent wrote on its stdin, read by
    ``smoke.child.__main__`` before site-packages was searched), is carried by its end record."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m smoke.child")
    parser.add_argument("row", type=Path, help="the row, as data: ROW.json (smoke.child.row)")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("record", type=Path)
    options.child_parser(parser)  # --fail-fast, --no-overlap, --parallel-exports: the row's own entries
    args = parser.parse_args(argv)
    rec = Recorder(args.record, args.fail_fast)
    try:
        gate(args.row, args.workdir, rec, overlap=args.overlap, parallel_exports=args.parallel_exports)
    except FailFast:
        pass
    rec.write(protocol.End(token))
    return 0


if __name__ == "__main__":
    sys.exit(main())
