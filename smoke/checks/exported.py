"""The checks on exported artifacts. Pure functions of files and numbers, so
each can be shown to fail on a changed copy of a real artifact.

The parent judges them on what the child wrote, when the child asks (``smoke.child.ask``: ``judge_exports``),
and reads the portable kernels' program for it (``program_facts``)."""

from __future__ import annotations

from pathlib import Path

from smoke.artifacts import ArtifactError, missing_keys, read_data_file, read_program
from smoke.results import CheckResult, Status, failed, passed, skipped
from smoke.stages import DATA_FILE, DELEGATE, EXPORT, WEIGHTS

# The host/device copies exir puts at the boundary of a delegate compiled for a device (one whose
# ``target_device`` compile spec names it, as main's CudaPartitioner adds): ``PropagateDevicePass``
# inserts ``_h2d_copy`` before each delegate input and ``_d2h_copy`` after each output, and the
# runtime runs them as the ``.out`` kernels (main's ``exir/passes/propagate_device_pass.py`` and
# ``exir/passes/_device_copy_ops_registry.py``, read at cff6f4dd; seen in the H200 build of main's
# program, tests/data/h200-executorch-main). They move data and compute nothing: the delegate's own.
DEVICE_COPIES = ("et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out")


def check_delegated(label: str, pte: Path, delegate_id: str) -> CheckResult:
    """Every plan carries ``delegate_id`` and leaves no compute to the portable kernels.

    A partitioner that declined the model, wholly or in part, leaves operators in
    the plan; this reads them from ``execution_plan[].operators`` and the ids from
    ``execution_plan[].delegates[].id``. The only operators a plan may keep are the
    host/device copies around a delegate compiled for a device (``DEVICE_COPIES``).
    """
    name = DELEGATE.of(label)
    try:
        program = read_program(pte)
    except (OSError, ArtifactError) as exc:
        return failed(name, f"cannot read the program: {exc}")
    if not program.plans:
        return failed(name, f"{pte.name} has no execution plan")
    problems, copies = [], {}
    for plan in program.plans:
        if delegate_id not in plan.delegate_ids:
            problems.append(f"plan {plan.name!r} has delegates {list(plan.delegate_ids)}, not {delegate_id}")
        allowed = DEVICE_COPIES if plan.target_devices else ()
        compute = [op for op in plan.operators if op not in allowed]
        if compute:
            problems.append(f"plan {plan.name!r} leaves {len(compute)} operators outside the delegate: {', '.join(compute)}")
        if kept := [op for op in plan.operators if op in allowed]:
            copies[plan.name] = kept
    measured = {
        "pte_bytes": program.size,
        "delegates": {plan.name: list(plan.delegate_ids) for plan in program.plans},
        "operators_left": {plan.name: list(plan.operators) for plan in program.plans},
        "device_copies": copies,
    }
    if problems:
        return failed(name, "; ".join(problems), **measured)
    plans = ", ".join(repr(plan.name) for plan in program.plans)
    kept = sorted({op for ops in copies.values() for op in ops})
    around = (f", only the host/device copies around it ({', '.join(kept)}; target device "
              f"{', '.join(sorted({d for p in program.plans for d in p.target_devices}))})") if kept else ""
    return passed(name, f"{pte.name} ({program.size} B): plan {plans} runs on {delegate_id}, no compute left outside it{around}",
                  **measured)


def check_data_file(label: str, folder: Path, data_file: str, *, required: bool) -> CheckResult:
    """The data file is there under the name the runners pass, and reads as a FlatTensor file."""
    name = DATA_FILE.of(label)
    path = folder / data_file
    if not path.is_file():
        present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        if not required:
            return passed(name, f"no {data_file} written (the delegate writes none for a model without weights); counted as 0 B",
                          data_file_bytes=0, payload_bytes=0, written=False)
        return failed(name, f"{data_file} is missing from {folder} (it has {', '.join(present) or 'nothing'})")
    try:
        data = read_data_file(path)
    except (OSError, ArtifactError) as exc:
        return failed(name, f"{data_file} is not a readable data file: {exc}", data_file_bytes=path.stat().st_size)
    keys = ", ".join(f"{b.key} {b.size} B" for b in data.blobs) or "no named data"
    measured = {"data_file_bytes": data.size, "payload_bytes": data.payload_bytes, "written": True}
    pte = folder / "model.pte"
    try:
        missing = missing_keys(read_program(pte), [data]) if pte.is_file() else None
    except (OSError, ArtifactError):
        missing = None  # an unreadable program is the delegate check's failure
    if missing:
        return failed(name, f"{data_file} ({keys}) lacks the named data its program expects: {', '.join(missing)}",
                      missing_keys=missing, **measured)
    known = "" if missing is None else ", every key its program expects"
    return passed(name, f"{data_file} is {data.size} B ({keys}){known}", **measured)


def check_weights_in_data_file(data_file: str, weighted_bytes: int, weightless_bytes: int, weight_bytes: int) -> CheckResult:
    """The weighted data file exceeds the weightless one, written in the same run, by at least the weight matrix.

    A difference, not a fixed bound: even a weightless model's data file is larger than a small model's weights. The
    weight matrix alone, not all parameters: the CUDA delegate was measured to keep a small bias out of the file.
    """
    name = WEIGHTS.name
    difference = weighted_bytes - weightless_bytes
    measured = {"weighted_bytes": weighted_bytes, "weightless_bytes": weightless_bytes,
                "difference_bytes": difference, "weight_matrix_bytes": weight_bytes}
    text = f"{data_file} is {weighted_bytes} B, {difference} B over the weightless model's {weightless_bytes} B"
    if difference >= weight_bytes:
        return passed(name, f"{text}, ≥ the {weight_bytes} B weight matrix", **measured)
    return failed(name, f"{text}, < the {weight_bytes} B weight matrix: the weights are not in the data file", **measured)


# --- the child's questions (smoke.child.ask), answered here: what the parent's readers read ---------------

def judge_exports(backend, workdir: Path, asked: dict) -> tuple[list[CheckResult], dict]:
    """``exported``: the checks of what the child wrote, in the order a run reports them, and the answer
    (each label's ``data file`` status: its run depends on it). ``asked["exported"]``: label -> whether
    that export happened; ``asked["weight_matrix_bytes"]``: the weighted model's weight matrix."""
    exported = {str(label): bool(done) for label, done in dict(asked.get("exported") or {}).items()}
    results: list[CheckResult] = []
    data: dict[str, CheckResult] = {}
    for label, done in exported.items():
        if not done:
            results.append(skipped(DELEGATE.of(label), f"not run: {EXPORT.of(label)} did not happen"))
            data[label] = skipped(DATA_FILE.of(label), f"not run: {EXPORT.of(label)} did not happen")
            results.append(data[label])
            continue
        folder = workdir / label
        results.append(check_delegated(label, folder / "model.pte", backend.delegate_id))
        required = label == "weighted" or backend.weightless_writes_data
        data[label] = check_data_file(label, folder, backend.data_file, required=required)
        results.append(data[label])
    if set(data) == {"weightless", "weighted"} and all(r.status is Status.PASS for r in data.values()):
        results.append(check_weights_in_data_file(
            backend.data_file, data["weighted"].measured["data_file_bytes"], data["weightless"].measured["data_file_bytes"],
            int(asked.get("weight_matrix_bytes") or 0)))
    else:
        results.append(skipped(WEIGHTS.name, "not run: a data file is missing or unreadable"))
    return results, {"data_file": {label: result.status.value for label, result in data.items()}}


def program_facts(pte: Path) -> dict:
    """``program``: a program's plans, their delegates and the operators they leave, or why it cannot be read."""
    try:
        program = read_program(pte)
    except (OSError, ArtifactError) as exc:
        return {"error": str(exc)}
    return {"bytes": program.size, "plans": [{"name": plan.name, "delegate_ids": list(plan.delegate_ids),
                                              "operators": list(plan.operators)} for plan in program.plans]}
