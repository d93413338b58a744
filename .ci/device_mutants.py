"""The seed's mutants on a real CUDA build, on the GPU machine: each must FAIL by its own check.

    ENV/bin/python .ci/device_mutants.py ROW LAYOUT WORKDIR OUTDIR

Run with the Python of the environment the gate built for the wheel (``--env-dir``: torch, the wheel's
executorch, a GPU), after ``nox -s cuda_x86_64 ... --workdir WORKDIR --keep`` kept its artifacts
(``WORKDIR/weightless``, ``WORKDIR/weighted``). ROW is the row that kept them (cuda_x86_64 on the GPU machine;
cpu_x86_64 anywhere, which is how tests/integration/test_device_mutants.py runs this script on the CPU); LAYOUT names
the build in the lines printed ("1.2.0", "main"). The gate's own check functions judge each mutant, as in the gate's run:

- weights left in the program: the weighted model exported again with ``CudaBackend.save_data_externally``
  answering False (upstream's own switch, in 1.2.0 and main; for XNNPACK, no constant tagged for the data file),
  so the weights stay in the .pte:
  ``weights in the data file`` (or ``data file``, where no data file is written at all);
- a declined partition: the weighted model lowered with no partitioner: ``delegate``;
- a wrong key: the data file's weights key changed (one character): ``data file``, then ``run with data file``;
- weights missing from the data file: the weighted program with the weightless program's data file:
  ``data file`` where the keys name the content (main), else ``weights in the data file`` (1.2's method-name key is
  in both files), then ``run with data file`` (XNNPACK writes none for the weightless model: not made there);
- outputs off by 0.01: the real program run with its real data file, 0.01 added to what it returned:
  ``run with data file``;
- the weights left in the program, loaded without a data file by the negative control the child's way where it cannot
  fork (CUDA's driver initialised by its imports): an interpreter of its own, started early and sent the program as
  soon as it is written (``smoke.child.negative.send``): ``negative control``.
The unchanged artifacts pass the same checks first (the control). One ``MUTANT`` line each; exit 1 if a
mutant passed or the control failed. A mutant's load and run happens in a process of its own (this script with
``--run-one``): a runtime fed a data file without the weights may end its process (on main's CUDA build on the
H200, 2026-12-05, the first run of the script printed nothing after that mutant's load), and a process that
ends so is that mutant's FAIL, named by its signal.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smoke import tensors  # noqa: E402
from smoke.artifacts import read_data_file  # noqa: E402
from smoke.checks import controls  # noqa: E402
from smoke.checks.exported import check_data_file, check_delegated, check_weights_in_data_file  # noqa: E402
from smoke.checks.outputs import judge_ran  # noqa: E402
from smoke.child import (
    delegates,  # noqa: E402
    negative,  # noqa: E402
)
from smoke.child.models import check_run, models, registered_backends, run_program, weight_matrix_bytes  # noqa: E402
from smoke.child.reference import answers  # noqa: E402
from smoke.child.row import ChildRow  # noqa: E402
from smoke.results import CheckResult, Status, failed  # noqa: E402
from smoke.rows import ROWS, child_data  # noqa: E402
from smoke.stages import NEGATIVE, RUN  # noqa: E402


def judged(ran: dict, pte: Path, data_file: str) -> CheckResult:
    """What the parent makes of a run handed over (smoke.checks.outputs), eager's answer computed here as
    smoke.child.reference computes it."""
    eager = {label: tensors.decode(found) for label, found in answers().items()}
    return judge_ran(RUN.of("weighted"), ran, pte.parent.parent, data_file, eager)


def _write(program, folder: Path) -> None:
    (folder / "model.pte").write_bytes(program.buffer)
    program.write_tensor_data_to_file(str(folder))


def export(row, model, example, folder: Path, *, external: bool = True, partitioned: bool = True) -> None:
    """The row's export, or the same with the weights kept in the program, or with no partitioner."""
    import torch
    from executorch.exir import to_edge_transform_and_lower

    folder.mkdir(parents=True, exist_ok=True)
    if not partitioned:
        return _write(to_edge_transform_and_lower(torch.export.export(model, example)).to_executorch(), folder)
    if external:
        return delegates.export(ChildRow(**child_data(row)), model, example, folder)
    if row.backend.name == "xnnpack":  # no constant tagged for the data file
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        lowered = to_edge_transform_and_lower(torch.export.export(model, example), partitioner=[XnnpackPartitioner()])
        return _write(lowered.to_executorch(), folder)
    from executorch.backends.cuda.cuda_backend import CudaBackend

    original = CudaBackend.__dict__["save_data_externally"]
    CudaBackend.save_data_externally = classmethod(lambda cls: False)
    try:
        delegates.export(ChildRow(**child_data(row)), model, example, folder)
    finally:
        CudaBackend.save_data_externally = original


def run_apart(row, pte: Path, ptd: Path, where: Path) -> dict:
    """The weighted model's ``run with data file`` as the gate's child has it where it cannot fork: loaded in a process of
    its own that imported the runtime and nothing of the export (``smoke.child.negative``, the case ``weighted``)."""
    where.mkdir(parents=True, exist_ok=True)
    process = negative.start_control(where, "weighted")
    negative.send(process, pte, ptd)
    return check_run(ChildRow(**child_data(row)), "weighted", negative.collect(process, where, "weighted"), registered_backends())


def run_one(argv: list[str]) -> int:
    """``--run-one ROW PTE PTD``: the weighted model's ``run with data file`` on these files, as JSON on stdout."""
    import tempfile

    row, pte, ptd = ROWS[argv[0]], Path(argv[1]), Path(argv[2])
    with tempfile.TemporaryDirectory(prefix="device-mutant-run-") as where:
        result = judged(run_apart(row, pte, ptd, Path(where)), pte, ptd.name)
    print(json.dumps({"status": result.status.value, "reason": result.reason}), flush=True)
    return 0


def isolated_run(row_name: str, pte: Path, ptd: Path) -> CheckResult:
    """``run with data file`` in a process of its own: a process the runtime ends is a FAIL naming the signal."""
    proc = subprocess.run([sys.executable, __file__, "--run-one", row_name, str(pte), str(ptd)], capture_output=True,
                          text=True, timeout=600)
    name = "run with data file (weighted)"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            said = json.loads(line)
            return CheckResult(name, Status(said["status"]), said["reason"])
    if proc.returncode < 0:
        return failed(name, f"loading or running ended the process with {signal.Signals(-proc.returncode).name}")
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return failed(name, f"loading or running ended the process with exit {proc.returncode}: {tail}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--run-one"]:
        return run_one(argv[1:])
    row, layout, work, outdir = ROWS[argv[0]], argv[1], Path(argv[2]), Path(argv[3])
    # The negative control's process is ``python -m smoke.child.negative``: the gate's package from this checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH"))))
    data_file = row.backend.data_file
    outdir.mkdir(parents=True, exist_ok=True)
    built = models()
    model, example = built["weighted"]
    weight = weight_matrix_bytes(model)
    weighted, weightless = work / "weighted", work / "weightless"
    base = check_data_file("weightless", weightless, data_file, required=row.backend.weightless_writes_data)
    weightless_bytes = base.measured.get("data_file_bytes", 0)
    bad = 0

    def say(kind: str, name: str, result, want_fail: bool = True, warn_is_ok: bool = False) -> None:
        """``warn_is_ok``: a control whose release's rule makes its crash a WARN (a CUDA release before
        executorch#22311) is as expected with it."""
        nonlocal bad
        ok = (result.status is Status.FAIL) if want_fail else (
            result.status is Status.PASS or (warn_is_ok and result.status is Status.WARN))
        bad += not ok
        print(f"{kind} {layout} {name}: {'as expected' if ok else 'WRONG'}: {result.line()}", flush=True)

    # The control: the real artifacts pass what the mutants must fail.
    say("CONTROL", "delegate", check_delegated("weighted", weighted / "model.pte", row.backend.delegate_id), want_fail=False)
    data = check_data_file("weighted", weighted, data_file, required=True)
    say("CONTROL", "data file", data, want_fail=False)
    say("CONTROL", "weights", check_weights_in_data_file(data_file, data.measured.get("data_file_bytes", 0), weightless_bytes, weight),
        want_fail=False)
    twin = judged(run_apart(row, weighted / "model.pte", weighted / data_file, outdir / "twin"), weighted / "model.pte", data_file)
    say("CONTROL", "run", twin, want_fail=False)
    from importlib.metadata import version

    from packaging.version import Version

    rule = row.backend.missing_data(Version(version("executorch")))
    eager = tensors.decode(answers()["weighted"])

    def controls_said(pte: Path, where: Path, damaged: dict[str, str] | None = None) -> CheckResult:
        """A control as the child runs it where it cannot fork: its process started first, sent the program; judged
        as the parent judges it, with its twin (the run above) and the release's rule (smoke.checks.controls): the
        negative control, or with ``damaged`` (by case, a damaged copy of the data file) the corrupt data file."""
        where.mkdir(parents=True, exist_ok=True)
        said = {}
        for case, ptd in (damaged or {negative.MISSING: None}).items():
            process = negative.start_control(where, case)
            negative.send(process, pte, Path(ptd) if ptd else None)
            said[case] = negative.collect(process, where, case)
            print(f"SAID {layout} {case}: {json.dumps(said[case])[:400]}", flush=True)
        if damaged:
            return controls.judge_corrupt(said, twin, rule, data_file, eager)
        return controls.judge_missing(NEGATIVE.name, said[negative.MISSING], twin, rule, data_file, eager)

    def control_sent_early(pte: Path, where: Path) -> CheckResult:
        return controls_said(pte, where)

    say("CONTROL", "negative control", control_sent_early(weighted / "model.pte", outdir / "negative-real"), want_fail=False,
        warn_is_ok=True)
    say("CONTROL", "corrupt data file", controls_said(weighted / "model.pte", outdir / "corrupt",
                                                      controls.write_damaged(weighted / data_file, outdir / "damaged")),
        want_fail=False, warn_is_ok=True)

    # Weights left in the program.
    inprogram = outdir / "weights-in-program"
    export(row, model, example, inprogram, external=False)
    found = check_data_file("weighted", inprogram, data_file, required=True)
    if found.status is Status.PASS:
        found = check_weights_in_data_file(data_file, found.measured["data_file_bytes"], weightless_bytes, weight)
    say("MUTANT", "weights left in the program", found)
    say("MUTANT", "weights left in the program (negative control)",
        control_sent_early(inprogram / "model.pte", outdir / "negative-in-program"))

    # A declined partition.
    declined = outdir / "declined"
    export(row, model, example, declined, partitioned=False)
    say("MUTANT", "declined partition", check_delegated("weighted", declined / "model.pte", row.backend.delegate_id))

    # A wrong key: the data file's weights blob under another name of the same length.
    wrong = outdir / "wrong-key"
    shutil.copytree(weighted, wrong)
    # the weights blob: CUDA names it ..._weights_blob; XNNPACK's largest blob is the weight matrix
    key = max(read_data_file(wrong / data_file).blobs, key=lambda blob: (blob.key.endswith("weights_blob"), blob.size)).key
    raw = (wrong / data_file).read_bytes()
    (wrong / data_file).write_bytes(raw.replace(key.encode(), ("0" if key[0] != "0" else "1").encode() + key[1:].encode(), 1))
    say("MUTANT", "wrong key (data file)", check_data_file("weighted", wrong, data_file, required=True))
    say("MUTANT", "wrong key (run)", isolated_run(argv[0], wrong / "model.pte", wrong / data_file))

    # Weights missing from the data file: the weightless program's data file beside the weighted program.
    if (weightless / data_file).is_file():
        missing = outdir / "weights-missing"
        shutil.copytree(weighted, missing)
        shutil.copy(weightless / data_file, missing / data_file)
        # main keys the weights by their content: the data file lacks the key. 1.2 keys them by method name, and the
        # weightless model's file has that key with an empty blob: the data file reads well, and the difference
        # measured in the same run catches it (seen on the 1.2.0 CUDA build on an H100, 2026-12-05).
        found = check_data_file("weighted", missing, data_file, required=True)
        if found.status is Status.PASS:
            found = check_weights_in_data_file(data_file, found.measured["data_file_bytes"], weightless_bytes, weight)
        say("MUTANT", "weights missing (data file)", found)
        say("MUTANT", "weights missing (run)", isolated_run(argv[0], missing / "model.pte", missing / data_file))
    else:
        print(f"SKIP {layout} weights missing: the weightless model wrote no {data_file} to stand in", flush=True)

    # Outputs off by 0.01.
    outputs = run_program(weighted / "model.pte", weighted / data_file, example)
    off = {"name": RUN.of("weighted"), "outputs": tensors.encode_all([o + 0.01 for o in outputs])}
    say("MUTANT", "outputs off by 0.01", judged(off, weighted / "model.pte", data_file))
    print(f"{layout}: {'every mutant FAILed by its own check, the control PASSed' if not bad else f'{bad} WRONG'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
