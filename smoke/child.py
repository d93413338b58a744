"""The child: runs inside the gate's environment, in a process of its own.

It exports a weightless model (``x + y``) and a weighted one (a seeded
``nn.Linear``) through the row's delegate, checks what was written, loads the
programs with their data files and compares them with eager PyTorch.

It speaks to the parent only through the record file, JSON Lines, one object a
line, flushed as it goes so that a crash loses nothing already decided:

- ``{"kind": "facts", ...}``: versions of executorch, torch, Python; the device.
- ``{"kind": "probe", ...}``: ``smoke.probe.probe()``, for the parent's environment checks.
- ``{"kind": "phase", "name": ..., "event": "start"|"end", "seconds": ...}``
- ``{"kind": "check", "name", "status": "pass"|"fail"|"skip", "reason", "measured"}``
- ``{"kind": "end"}``: the last line; without it the child did not finish.

Usage (the parent does this): ``python -m smoke.child ROW WORKDIR RECORD [--fail-fast] [--no-overlap]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from smoke import proc
from smoke.pipeline import (DATA_FILE, DELEGATE, EXPORT, IMPORT_PHASE, MODELS, NEGATIVE, NEGATIVE_PHASE, RUN, WEIGHTS,
                            load_phase)
from smoke.checks import check_data_file, check_delegated, check_weights_in_data_file
from smoke.probe import one_line
from smoke.results import CheckResult, Status, failed, passed, skipped
from smoke.rows import ROWS, Row

RTOL = 1e-4
ATOL = 1e-5
SEED = 0
NEGATIVE_TIMEOUT_S = 300


class FailFast(Exception):
    pass


class Recorder:
    def __init__(self, path: Path, fail_fast: bool) -> None:
        self.handle = open(path, "a", encoding="utf-8")
        self.fail_fast = fail_fast

    def write(self, **record: Any) -> None:
        self.handle.write(json.dumps(record, default=str) + "\n")
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def check(self, result: CheckResult) -> CheckResult:
        self.write(kind="check", **result.to_json())
        if self.fail_fast and result.status is Status.FAIL:
            raise FailFast
        return result

    @contextmanager
    def phase(self, name: str):
        start = time.monotonic()
        self.write(kind="phase", name=name, event="start")
        try:
            yield
        finally:
            self.write(kind="phase", name=name, event="end", seconds=round(time.monotonic() - start, 3))


# --- the models -----------------------------------------------------------------

def models():
    import torch

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    torch.manual_seed(SEED)
    weighted = torch.nn.Linear(8, 4).eval()
    built = {
        "weightless": (Add().eval(), (torch.randn(4, 8), torch.randn(4, 8))),
        "weighted": (weighted, (torch.randn(2, 8),)),
    }
    assert tuple(built) == MODELS  # the labels every check and report uses (smoke.pipeline)
    return built


def weight_matrix_bytes(model) -> int:
    weight = model.weight
    return weight.numel() * weight.element_size()


# --- export, one function per delegate ------------------------------------------


# --- loading and running --------------------------------------------------------

def registered_backends() -> list[str]:
    from executorch.extension.pybindings import portable_lib

    return list(portable_lib._get_registered_backend_names())


def run_program(pte: Path, ptd: Path | None, example) -> list:
    from executorch.extension.pybindings import portable_lib

    if ptd is not None:
        module = portable_lib._load_for_executorch(str(pte), data_path=str(ptd))
    else:
        module = portable_lib._load_for_executorch(str(pte))
    outputs = module.forward(tuple(example))
    return [out.detach().cpu() if hasattr(out, "detach") else out for out in outputs]


def compare(label: str, outputs: list, expected, loaded_with: str = "its data file") -> CheckResult:
    import torch

    name = RUN.of(label)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    if len(outputs) != len(expected):
        return failed(name, f"returned {len(outputs)} outputs, eager returns {len(expected)}")
    diffs = [float((a.float() - e.float()).abs().max()) if a.shape == e.shape else float("inf") for a, e in zip(outputs, expected)]
    tolerance = f"rtol {RTOL:g}, atol {ATOL:g}"
    measured = {"max_abs_diff": max(diffs), "rtol": RTOL, "atol": ATOL}
    try:
        for a, e in zip(outputs, expected):
            torch.testing.assert_close(a, e, rtol=RTOL, atol=ATOL)
    except AssertionError as exc:
        first = str(exc).strip().splitlines()[0]
        return failed(name, f"loaded with {loaded_with}, output differs from eager: max abs diff {max(diffs):.3g} ({tolerance}): {first}", **measured)
    return passed(name, f"loaded with {loaded_with}, matched eager, max abs diff {max(diffs):.3g} ({tolerance})", **measured)


def check_run(row: Row, label: str, pte: Path, ptd: Path, model, example, backends: list[str]) -> CheckResult:
    """Load ``pte`` with ``ptd`` (where it exists), run it and compare with eager."""
    name = RUN.of(label)
    data = ptd if ptd.exists() else None
    if row.backend.delegate_id not in backends:
        try:
            run_program(pte, data, example)
            err = "yet it ran"
        except Exception as exc:
            err = f"loading raised {one_line(exc)}"
        return failed(name, f"Backend {row.backend.delegate_id} is not registered in this wheel's runtime "
                            f"(registered: {', '.join(backends)}); {err}", registered_backends=backends)
    try:
        outputs = run_program(pte, data, example)
    except Exception as exc:
        return failed(name, f"loading or running raised {one_line(exc)}", registered_backends=backends)
    loaded_with = ptd.name if data is not None else "no data file (none was written)"
    return compare(label, outputs, model(*example).detach(), loaded_with)


# --- the device -----------------------------------------------------------------


# --- the negative control -------------------------------------------------------

def start_negative_process(workdir: Path) -> subprocess.Popen:
    """The negative control's process, started early: it imports torch and the runtime while the
    exports run, then waits on stdin for the program to load."""
    cmd = [sys.executable, "-m", "smoke.child", "--negative", "-", str(workdir / "negative.json")]
    return proc.start(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def negative_control(row: Row, pte: Path, workdir: Path, started: subprocess.Popen | None = None) -> CheckResult:
    """Load the weighted program WITHOUT its data file, in a process of its own.

    It must not give eager's answer: a crash or an error is the expected outcome;
    a match means the weights are not coming from the data file.
    """
    name = NEGATIVE.name
    control = started or start_negative_process(workdir)
    try:
        _out, stderr = control.communicate(f"{pte}\n", timeout=NEGATIVE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.end(control)
        return passed(name, f"did not finish within {NEGATIVE_TIMEOUT_S} s without its data file (expected: no eager answer)")
    if control.returncode < 0:
        sig = signal.Signals(-control.returncode).name
        return passed(name, f"the load without {row.backend.data_file} crashed the process with {sig}, as expected", outcome=sig)
    try:
        verdict = json.loads((workdir / "negative.json").read_text())
    except (OSError, ValueError):
        return failed(name, f"the control process exited {control.returncode} without its verdict: {proc.tail(stderr, 1)}")
    if verdict["outcome"] == "error":
        return passed(name, f"loading or running without {row.backend.data_file} failed, as expected: {verdict['error']}", outcome="error")
    if verdict["matched"]:
        return failed(name, f"ran without {row.backend.data_file} and matched eager (max abs diff {verdict['max_abs_diff']:.3g}): "
                            f"the weights are not coming from the data file", outcome="matched", max_abs_diff=verdict["max_abs_diff"])
    return passed(name, f"ran without {row.backend.data_file} and did not match eager (max abs diff {verdict['max_abs_diff']:.3g}), as expected",
                  outcome="mismatch", max_abs_diff=verdict["max_abs_diff"])


def negative_main(pte: str, out: Path) -> int:
    import torch
    from executorch.extension.pybindings import portable_lib  # noqa: F401  (imported before the program is known)

    model, example = models()["weighted"]
    pte = Path(sys.stdin.readline().strip() if pte == "-" else pte)
    try:
        outputs = run_program(pte, None, example)
    except Exception as exc:  # the expected outcome: report it as data
        out.write_text(json.dumps({"outcome": "error", "error": one_line(exc)}))
        return 0
    expected = model(*example).detach()
    diff = float((outputs[0].float() - expected).abs().max()) if outputs and outputs[0].shape == expected.shape else float("inf")
    matched = bool(torch.allclose(outputs[0].float(), expected, rtol=RTOL, atol=ATOL)) if diff != float("inf") else False
    out.write_text(json.dumps({"outcome": "ran", "matched": matched, "max_abs_diff": diff}))
    return 0


# --- the whole run --------------------------------------------------------------

def gate(row: Row, workdir: Path, rec: Recorder, early_negative: bool = True) -> None:
    # Started before our own imports, so that its imports overlap ours and the exports.
    started = start_negative_process(workdir) if early_negative else None
    forced = os.environ.get("GATE_PARALLEL_EXPORTS")
    parallel = early_negative and (forced == "1" if forced in ("0", "1") else (os.cpu_count() or 1) >= PARALLEL_MIN_CPUS)
    helper = start_export_process(row, workdir) if parallel else None
    try:
        _gate(row, workdir, rec, started, helper)
    finally:
        for process in (started, helper):
            proc.end(process)


def export_here(rec: Recorder, row: Row, name: str, model, example, folder: Path) -> bool:
    start = time.monotonic()
    try:
        with rec.phase(name):
            row.backend.export(model, example, folder)
    except Exception as exc:
        rec.write(kind="log", text=traceback.format_exc())
        rec.check(failed(name, f"export through the {row.backend.delegate_id} partitioner raised {one_line(exc)}"))
        return False
    rec.check(_wrote(name, folder, time.monotonic() - start))
    return True


def _wrote(name: str, folder: Path, seconds: float, own_process: bool = False) -> CheckResult:
    seconds = round(seconds, 1)
    where = " (in its own process, beside the other export)" if own_process else ""
    return passed(name, f"wrote {', '.join(sorted(p.name for p in folder.iterdir()))} in {seconds} s{where}",
                  seconds=seconds, own_process=own_process)


# The weightless model is exported by a helper process at the same time as the weighted one
# here, where the machine has the cores for it (--no-overlap: one after the other;
# GATE_PARALLEL_EXPORTS=1 or 0 decides whatever the core count).
PARALLEL_LABEL = "weightless"
PARALLEL_MIN_CPUS = 4


def start_export_process(row: Row, workdir: Path) -> subprocess.Popen:
    folder = workdir / PARALLEL_LABEL
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "smoke.child", "--export", row.name, PARALLEL_LABEL, str(folder), str(workdir / "export.json")]
    with open(workdir / "export.log", "wb") as log:  # a file, not a pipe: nobody reads it while it runs
        return proc.start(cmd, stdout=log, stderr=subprocess.STDOUT)


def collect_export(rec: Recorder, row: Row, helper: subprocess.Popen, folder: Path, workdir: Path) -> bool:
    name = EXPORT.of(PARALLEL_LABEL)
    helper.wait()
    try:
        verdict = json.loads((workdir / "export.json").read_text())
    except (OSError, ValueError):
        rec.check(failed(name, f"the export process exited {helper.returncode} without its result: {proc.file_tail(workdir / 'export.log')}"))
        return False
    rec.write(kind="phase", name=name, event="start")
    rec.write(kind="phase", name=name, event="end", seconds=verdict["seconds"])
    if not verdict["ok"]:
        rec.write(kind="log", text=verdict["traceback"])
        rec.check(failed(name, f"export through the {row.backend.delegate_id} partitioner raised {verdict['error']} (in its own process)"))
        return False
    rec.check(_wrote(name, folder, verdict["seconds"], own_process=True))
    return True


def export_main(row_name: str, label: str, folder: Path, out: Path) -> int:
    import torch  # noqa: F401
    import executorch.exir  # noqa: F401

    model, example = models()[label]
    start = time.monotonic()
    try:
        ROWS[row_name].backend.export(model, example, folder)
        verdict = {"ok": True, "seconds": round(time.monotonic() - start, 3)}
    except Exception as exc:  # reported as data
        verdict = {"ok": False, "seconds": round(time.monotonic() - start, 3), "error": one_line(exc),
                   "traceback": traceback.format_exc()}
    out.write_text(json.dumps(verdict))
    return 0


def _gate(row: Row, workdir: Path, rec: Recorder, started: subprocess.Popen | None,
          helper: subprocess.Popen | None = None) -> None:
    with rec.phase(IMPORT_PHASE):
        import torch
        import executorch.exir  # noqa: F401  (timed here, not in the first export)
        from importlib.metadata import version

    facts = {"executorch": version("executorch"), "torch": torch.__version__, "torch_file": torch.__file__,
             "python": platform.python_version(), "machine": platform.machine()}
    device = row.backend.device_facts()
    rec.write(kind="facts", **facts, device=device)
    # What the parent's environment checks judge (torch agrees, delegate registers, ...),
    # read here, where torch and the runtime are imported already, instead of in a process of its own.
    from smoke.probe import probe

    rec.write(kind="probe", **probe())

    blocked: str | None = None  # why the device-bound checks cannot run
    found = row.backend.check_device(row, device)
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
    for label, (model, example) in built.items():
        name = EXPORT.of(label)
        if blocked:
            rec.check(skipped(name, f"not run: {blocked}"))
            exported[label] = False
            continue
        folders[label].mkdir(parents=True, exist_ok=True)
        if label == PARALLEL_LABEL and helper is not None:
            continue  # exported by the helper process, collected below
        exported[label] = export_here(rec, row, name, model, example, folders[label])
    if helper is not None:
        exported[PARALLEL_LABEL] = collect_export(rec, row, helper, folders[PARALLEL_LABEL], workdir)

    data: dict[str, CheckResult] = {}
    for label in built:
        if not exported[label]:
            rec.check(skipped(DELEGATE.of(label), f"not run: {EXPORT.of(label)} did not happen"))
            data[label] = rec.check(skipped(DATA_FILE.of(label), f"not run: {EXPORT.of(label)} did not happen"))
            continue
        rec.check(check_delegated(label, folders[label] / "model.pte", row.backend.delegate_id))
        required = label == "weighted" or row.backend.weightless_writes_data
        data[label] = rec.check(check_data_file(label, folders[label], row.backend.data_file, required=required))

    if all(r.status is Status.PASS for r in data.values()):
        rec.check(check_weights_in_data_file(
            row.backend.data_file, data["weighted"].measured["data_file_bytes"], data["weightless"].measured["data_file_bytes"],
            weight_matrix_bytes(built["weighted"][0])))
    else:
        rec.check(skipped(WEIGHTS.name, "not run: a data file is missing or unreadable"))

    backends = registered_backends()
    for label, (model, example) in built.items():
        name = RUN.of(label)
        if data[label].status is not Status.PASS:
            rec.check(skipped(name, f"not run: no data file for {label}" if not blocked else f"not run: {blocked}"))
            continue
        with rec.phase(load_phase(label)):
            rec.check(check_run(row, label, folders[label] / "model.pte", folders[label] / row.backend.data_file, model, example, backends))

    name = NEGATIVE.name
    if exported.get("weighted") and (folders["weighted"] / row.backend.data_file).exists() and row.backend.delegate_id in backends:
        with rec.phase(NEGATIVE_PHASE):
            rec.check(negative_control(row, folders["weighted"] / "model.pte", workdir, started))
    else:
        rec.check(skipped(name, "not run: the weighted program was not exported with a data file, or its delegate is not registered"))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--negative":
        return negative_main(argv[1], Path(argv[2]))
    if argv and argv[0] == "--export":
        return export_main(argv[1], argv[2], Path(argv[3]), Path(argv[4]))
    parser = argparse.ArgumentParser(prog="python -m smoke.child")
    parser.add_argument("row", choices=sorted(ROWS))
    parser.add_argument("workdir", type=Path)
    parser.add_argument("record", type=Path)
    parser.add_argument("--fail-fast", action="store_true")
    parser.add_argument("--no-overlap", action="store_true",
                        help="start the negative control's process only when it is needed, and export the models one after the other")
    args = parser.parse_args(argv)
    rec = Recorder(args.record, args.fail_fast)
    try:
        gate(ROWS[args.row], args.workdir, rec, early_negative=not args.no_overlap)
    except FailFast:
        pass
    rec.write(kind="end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
