"""What the built environment holds: checks that need the wheel installed, but no GPU.

``smoke.child.probe`` runs inside the environment and prints what torch and the executorch runtime say about
themselves; the parent judges it here, before the export child runs. The common checks are ``CHECKS``; a backend's
own are in its module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from smoke import proc
from smoke.checks.kinds import EnvironmentCheck
from smoke.errors import GateError, NoTorchPairing
from smoke.readers import pairing
from smoke.readers.wheel import Wheel
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import ENVIRONMENT, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.rows import Row


def run_probe(python: Path, env: dict[str, str], cwd: Path, timeout: float = 600) -> dict[str, Any]:
    try:
        ran = proc.run([python, "-m", "smoke.child.probe"], what="probing the environment", env=env, cwd=cwd, timeout=timeout, check=False)
    except GateError as exc:  # could not start, or ran past its limit: the checks fail, saying so
        return {"probe_error": str(exc)}
    try:
        return json.loads(ran.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"probe_error": f"exited {ran.returncode}: {proc.tail(ran.stdout + ran.stderr)}"}


def check_torch_agrees(wheel: Wheel, row: Row, facts: dict[str, Any], libraries: Libraries | None = None) -> CheckResult:
    """torch in the environment is the release paired with the wheel, and on a CUDA row has its CUDA major."""
    name = TORCH_AGREES.name
    if "torch" not in facts:
        return failed(name, f"torch does not import in the environment: {facts.get('torch_error') or facts.get('probe_error')}")
    try:
        version = Version(facts["torch"])
    except InvalidVersion:
        return failed(name, f"torch reports version {facts['torch']!r}, which is not a version")
    problems, said = [], [f"torch {version}"]
    try:
        made = pairing.pair(wheel)
    except NoTorchPairing:  # the caller chose the torch (--constraints): no pairing to compare with
        made = None
    paired = made.torch if made is not None else None
    unpaired = paired is not None and f"{version.major}.{version.minor}" != paired
    given = facts.get(TORCH_GIVEN)  # the caller's own torch (--torch-from): the gate did not choose it
    if unpaired and not given:
        problems.append(f"executorch {wheel.release} pairs with torch {paired}, the environment has {version}")
    more_problems, more_said = row.backend.torch_problems(wheel, facts)
    problems += more_problems
    said += more_said
    measured = {"torch": str(version), "torch_cuda": facts.get("torch_cuda"), "paired": paired, "torch_given": given}
    if problems:
        return failed(name, "; ".join(problems), **measured)
    if unpaired:
        # Not a FAIL of the wheel: the pairing was not what ran, by the caller's choice; said, and recorded as a skip.
        return skipped(name, f"{', '.join(said)}; executorch {wheel.release} pairs with torch {paired}, and this torch is "
                             f"the one --torch-from gave ({given}), so the pairing was not tested: run without --torch-from "
                             f"(or with a torch {paired}) to judge it", **measured)
    if paired is None:
        return skipped(name, f"{said[0]}; no pairing is known for executorch {wheel.release}, so the version was not compared", **measured)
    if made is not None and made.by_rule:  # a nightly or a local build: which rule chose its torch, said
        return passed(name, f"{', '.join(said)}, paired by rule: {made.how}", **measured, paired_by_rule=True)
    return passed(name, f"{', '.join(said)}, paired with executorch {wheel.release}", **measured)


def check_delegate_registers(wheel: Wheel, row: Row, facts: dict[str, Any], libraries: Libraries | None = None) -> CheckResult:
    """After import, the row's delegate is among the runtime's registered backends."""
    name = DELEGATE_REGISTERS.name
    if "backends" not in facts:
        return failed(name, f"the executorch runtime does not import: {facts.get('backends_error') or facts.get('probe_error')}")
    backends = facts["backends"]
    if row.backend.delegate_id not in backends:
        return failed(name, f"{row.backend.delegate_id} is not registered (registered: {', '.join(backends) or 'none'})", backends=backends)
    return passed(name, f"{row.backend.delegate_id} among {len(backends)} registered: {', '.join(backends)}", backends=backends)


# The backend each shipped delegate library registers once it is loaded, by its registration name, from upstream's
# source (pytorch/executorch; the same at v1.4.1 and main cff6f4dd):
BACKEND_LIBRARIES = {
    # backends/xnnpack/runtime/XNNPACKBackend.cpp: Backend backend{xnnpack_backend_key, ...} ("XnnpackBackend", XNNPACKBackend.h)
    "libexecutorch_backend_xnnpack.so": "XnnpackBackend",
    # backends/openvino/runtime/OpenvinoBackend.cpp: Backend backend_id{"OpenvinoBackend", &backend}
    "libexecutorch_backend_openvino.so": "OpenvinoBackend",
    # backends/qualcomm/runtime/QnnExecuTorchBackend.cpp: Backend backend{QNN_BACKEND, &cls} ("QnnBackend", QnnExecuTorch.h);
    # before 1.5 its library is libqnn_executorch_backend.so
    "libexecutorch_backend_qnn.so": "QnnBackend",
    "libqnn_executorch_backend.so": "QnnBackend",
    # backends/cuda/runtime/cuda_backend.cpp: Backend backend{"CudaBackend", &cls}
    "libexecutorch_backend_cuda.so": "CudaBackend",
}
PYBINDINGS = "executorch/extension/pybindings/"  # where the runtime's Python extension is (_C from 1.5, _portable_lib before)


def expected_backends(libraries: Libraries) -> dict[str, str]:
    """The backends the runtime's Python extension loads a library of (its DT_NEEDED closure within the wheel), each
    with that library: what must be registered once it is imported."""
    from smoke.checks.owners import load_groups

    expected: dict[str, str] = {}
    for start, group in load_groups(libraries).items():
        name = start.rsplit("/", 1)[-1]
        if start.startswith(PYBINDINGS) and name.startswith(("_C.", "_portable_lib.")):
            for lib in group:
                backend = BACKEND_LIBRARIES.get(lib.path.rsplit("/", 1)[-1])
                if backend is not None:
                    expected.setdefault(backend, lib.path)
    return expected


def check_backends_register(wheel: Wheel, row: Row, facts: dict[str, Any], libraries: Libraries | None = None) -> CheckResult:
    """Every backend whose library the runtime's Python extension loads is registered once it is imported (upstream's
    test_linux.py asks it of QnnBackend on x86_64; a library that loads and does not register passes `libraries load`)."""
    name = BACKENDS_REGISTER.name
    if "backends" not in facts:
        return failed(name, f"the executorch runtime does not import: {facts.get('backends_error') or facts.get('probe_error')}")
    backends = list(facts["backends"])
    expected = expected_backends(libraries) if libraries is not None else {}
    measured = {"backends": backends, "expected": expected}
    if not expected:
        return skipped(name, f"no shipped library of a known backend is loaded by the runtime's Python extension (registered: "
                             f"{', '.join(backends) or 'none'})", **measured)
    missing = {backend: path for backend, path in expected.items() if backend not in backends}
    if missing:
        shown = "; ".join(f"{backend}, which {path} registers" for backend, path in missing.items())
        return failed(name, f"{len(missing)} of {len(expected)} backends the runtime loads are not registered: {shown} "
                            f"(registered: {', '.join(backends) or 'none'})", **measured)
    shown = ", ".join(f"{backend} ({path.rsplit('/', 1)[-1]})" for backend, path in expected.items())
    many = f"all {len(expected)} backends whose libraries the runtime loads are" if len(expected) > 1 else \
        "the backend whose library the runtime loads is"
    return passed(name, f"{many} registered: {shown}", **measured)


# The key the parent adds to the probe's facts when torch came from the caller's environment (--torch-from).
TORCH_GIVEN = "torch_given"
TORCH_AGREES = Check("torch agrees", ENVIRONMENT, 10, check_torch_agrees)
DELEGATE_REGISTERS = Check("delegate registers", ENVIRONMENT, 20, check_delegate_registers)
BACKENDS_REGISTER = Check("shipped backends register", ENVIRONMENT, 21, check_backends_register)
CHECKS: tuple[EnvironmentCheck, ...] = (TORCH_AGREES, DELEGATE_REGISTERS, BACKENDS_REGISTER)  # every row's; a backend adds its own (smoke.backends)
